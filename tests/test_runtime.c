/* runtime/: the forward pass against the independent reference (golden logits, greedy texts),
 * its internal consistencies (decoding from the cache = the window pass, any thread count, both
 * RoPE layouts, HF vs llama2.c layout), the fast kernels against the scalar reference, error
 * cases, and sampling. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/convert.h"
#include "formats/artefact.h"
#include "formats/container.h"
#include "quantize/quantize.h"
#include "runtime/artefact.h"
#include "runtime/backend.h"
#include "runtime/forward.h"
#include "runtime/pass.h"
#include "runtime/kv.h"
#include "runtime/probe.h"
#include "runtime/sample.h"
#include "tokenizer/tokenizer.h"
#include "tests/testutil.h"


/* ---- helpers ------------------------------------------------------------------------- */

typedef struct {
    lmq_model m;
    rt_model rm;
    lmq_pool *pool;
    rt_state *st;
} loaded;

/* split_qkv: GPT-2 converted with separate q, k, v tensors (lmq convert --split-qkv). */
static void load_model(const char *rel, int split_qkv, lmq_model *m)
{
    lmq_err e;
    lmq_convert_opts o = { .split_qkv = split_qkv };
    lmq_code c = lmq_convert(fixture(rel), &o, m, &e);
    ck_assert_msg(c == LMQ_OK, "%s: %s", rel, e.msg);
}

/* The fixture quantised by a shipped recipe, as the runtime loads an artefact: packed views into
 * the file's mapping. */
static void load_quantised(const char *rel, const char *recipe, lmq_model *m)
{
    lmq_model fp32;
    lmq_err e;
    load_model(rel, 0, &fp32);
    const char *dir = test_tmpdir();
    char in[512], out[512];
    snprintf(in, sizeof in, "%s/fp32.lmq", dir);
    snprintf(out, sizeof out, "%s/q.lmq", dir);
    ck_assert_msg(lmq_container_write_model(in, &fp32, NULL, &e) == LMQ_OK, "%s", e.msg);
    lmq_model_free(&fp32);
    ck_assert_msg(q_quantize_file(in, recipe, out, NULL, &e) == LMQ_OK, "%s: %s", recipe, e.msg);
    ck_assert_msg(rt_load_artefact(out, m, &e) == LMQ_OK, "%s", e.msg);
    test_rmtree(dir); /* the mapping stays valid */
}

/* A state for the model with the given thread count and kernel set. */
static void start(loaded *L, int threads, const rt_kernels *isa, int max_tokens)
{
    lmq_err e;
    ck_assert_msg(rt_model_init(&L->rm, &L->m, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(lmq_pool_create(threads, &L->pool, &e) == LMQ_OK, "%s", e.msg);
    rt_exec ex = { .pool = L->pool, .isa = isa };
    ck_assert_msg(rt_state_create(&L->rm, &ex, max_tokens, &L->st, &e) == LMQ_OK, "%s", e.msg);
}

static void open_model_opts(loaded *L, const char *rel, int split_qkv, int threads, const rt_kernels *isa)
{
    load_model(rel, split_qkv, &L->m);
    start(L, threads, isa, 256);
}

static void open_model(loaded *L, const char *rel, int threads, const rt_kernels *isa)
{
    open_model_opts(L, rel, 0, threads, isa);
}

static void close_model(loaded *L)
{
    rt_state_free(L->st);
    lmq_pool_free(L->pool);
    rt_model_free(&L->rm);
    lmq_model_free(&L->m);
}

static float *window_logits(loaded *L, const int32_t *tokens, int n)
{
    float *lg = malloc((size_t)n * L->m.arch.vocab_size * sizeof *lg);
    lmq_err e;
    ck_assert_ptr_nonnull(lg);
    ck_assert_msg(rt_forward(L->st, tokens, n, 0, RT_LOGITS_ALL, lg, &e) == LMQ_OK, "%s", e.msg);
    return lg;
}

/* n tokens drawn from the vocabulary with a fixed seed. */
static int32_t *random_tokens(int n, int vocab, uint64_t seed)
{
    rt_rng r;
    rt_rng_seed(&r, seed);
    int32_t *t = malloc((size_t)n * sizeof *t);
    for (int i = 0; i < n; i++)
        t[i] = (int32_t)(rt_rng_u32(&r) % (uint32_t)vocab);
    return t;
}

static json_t *golden(const char *name)
{
    char rel[256];
    snprintf(rel, sizeof rel, "golden/%s", name);
    json_error_t je;
    json_t *j = json_load_file(fixture(rel), 0, &je);
    ck_assert_msg(j != NULL, "%s: %s", rel, je.text);
    return j;
}

/* ---- against the golden values ----------------------------------------------------- */

/* Window 0 of each text: positions 0..3, the first 8 logits, within 1e-4 relative or 1e-5
 * absolute of the independent reference. */
static void check_golden_logits(const char *model_key, const char *rel, int split_qkv)
{
    json_t *g = golden("logits-window0.json"), *texts = json_object_get(g, model_key);
    ck_assert_ptr_nonnull(texts);
    loaded L;
    open_model_opts(&L, rel, split_qkv, 2, rt_isa_best());
    const int V = L.m.arch.vocab_size;
    const char *text;
    json_t *w;
    int checked = 0;
    json_object_foreach(texts, text, w) {
        json_t *toks = json_object_get(w, "window_tokens_first8"), *pos = json_object_get(w, "positions");
        int32_t ids[8];
        ck_assert_int_eq(json_array_size(toks), 8);
        for (int i = 0; i < 8; i++)
            ids[i] = (int32_t)json_integer_value(json_array_get(toks, i));
        float *lg = window_logits(&L, ids, 8);
        for (size_t k = 0; k < json_array_size(pos); k++) {
            json_t *p = json_array_get(pos, k), *want = json_object_get(p, "logits_first8");
            int at = (int)json_integer_value(json_object_get(p, "pos"));
            ck_assert_int_eq(json_integer_value(json_object_get(p, "token")), ids[at]);
            for (int v = 0; v < 8; v++) {
                double ref = json_real_value(json_array_get(want, v)), got = lg[(size_t)at * V + v];
                ck_assert_msg(fabs(got - ref) <= 1e-5 || fabs(got - ref) <= 1e-4 * fabs(ref),
                              "%s %s pos %d logit %d: %.7f, reference %.7f", model_key, text, at, v, got, ref);
                checked++;
            }
        }
        free(lg);
    }
    ck_assert_int_ge(checked, 32);
    close_model(&L);
    json_decref(g);
}

START_TEST(golden_logits_stories)
{
    check_golden_logits("stories260K", STORIES, 0);
}
END_TEST

START_TEST(golden_logits_sotu)
{
    check_golden_logits("sotu-gpt2", SOTU, 0);
}
END_TEST

START_TEST(golden_logits_sotu_split_qkv)
{
    check_golden_logits("sotu-gpt2", SOTU, 1);
}
END_TEST

/* GPT-2 with q, k, v as three linear layers gives the fused layer's logits: each output is the
 * same dot product in the same order, so bit for bit. */
START_TEST(split_qkv_equals_fused)
{
    loaded f, sp;
    open_model_opts(&f, SOTU, 0, 2, rt_isa_best());
    open_model_opts(&sp, SOTU, 1, 2, rt_isa_best());
    ck_assert(f.rm.layers[0].w[RT_W_QKV].data && !sp.rm.layers[0].w[RT_W_QKV].data);
    const int n = 64, V = f.m.arch.vocab_size;
    int32_t *t = random_tokens(n, V, 7);
    float *a = window_logits(&f, t, n), *b = window_logits(&sp, t, n);
    for (size_t i = 0; i < (size_t)n * V; i++)
        ck_assert_msg(a[i] == b[i], "logit %zu: fused %.9g, split %.9g", i, a[i], b[i]);
    free(a);
    free(b);
    free(t);
    close_model(&f);
    close_model(&sp);
}
END_TEST

/* Greedy continuation from the golden prompt (tokenised here), one token at a time from the
 * cache after a prefill of the prompt; the ids must be the reference's. */
static void check_greedy(const char *model_key, const char *rel, int threads)
{
    json_t *g = golden("greedy.json"), *entry = json_object_get(g, model_key);
    json_t *want = json_object_get(entry, "ids");
    const char *prompt = json_string_value(json_object_get(entry, "prompt"));
    loaded L;
    open_model(&L, rel, threads, rt_isa_best());
    lmq_err e;
    tok_tokenizer *tk;
    ck_assert_msg(tok_open_model(&L.m, &tk, &e) == LMQ_OK, "%s", e.msg);
    int32_t *ids;
    size_t n;
    ck_assert_msg(tok_encode(tk, prompt, strlen(prompt), &ids, &n, &e) == LMQ_OK, "%s", e.msg);
    if (n == 0) { /* GPT-2 encodes "" to nothing; llama2.c gives BOS */
        ids = realloc(ids, sizeof *ids);
        ids[0] = (int32_t)L.m.arch.bos_id;
        n = 1;
    }
    const size_t total = json_array_size(want);
    ck_assert_uint_gt(total, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(ids[i], json_integer_value(json_array_get(want, i)));
    const int V = L.m.arch.vocab_size;
    float *lg = malloc((size_t)V * sizeof *lg);
    ck_assert_msg(rt_forward(L.st, ids, (int)n, 0, RT_LOGITS_LAST, lg, &e) == LMQ_OK, "%s", e.msg);
    for (size_t pos = n; pos < total; pos++) {
        int32_t next = (int32_t)rt_argmax(lg, V);
        ck_assert_msg(next == json_integer_value(json_array_get(want, pos)), "%s: token %zu is %d, reference %lld",
                      model_key, pos, next, (long long)json_integer_value(json_array_get(want, pos)));
        if (pos + 1 < total)
            ck_assert_msg(rt_decode(L.st, next, (int)pos, lg, &e) == LMQ_OK, "%s", e.msg);
    }
    ck_assert_uint_eq(total - n, 40);
    free(lg);
    free(ids);
    tok_free(tk);
    close_model(&L);
    json_decref(g);
}

START_TEST(greedy_stories)
{
    check_greedy("stories260K", STORIES, 1);
}
END_TEST

START_TEST(greedy_sotu)
{
    check_greedy("sotu-gpt2", SOTU, 2);
}
END_TEST

/* ---- internal consistency ------------------------------------------------------------ */

/* Every position of a 256 window: the logits from decoding one token at a time from the cache
 * are bit-identical to the window pass's (both kernel sets); a second window pass in the same
 * state (starting again at 0) gives the same logits again. */
static void check_decode_equals_window(const char *rel, const char *recipe, const rt_kernels *isa)
{
    loaded L;
    if (recipe) {
        load_quantised(rel, recipe, &L.m);
        start(&L, 2, isa, 256);
    } else {
        open_model(&L, rel, 2, isa);
    }
    const int V = L.m.arch.vocab_size, n = 256;
    int32_t *t = random_tokens(n, V, 7);
    float *win = window_logits(&L, t, n), *one = malloc((size_t)V * sizeof *one);
    lmq_err e;
    for (int p = 0; p < n; p++) {
        ck_assert_msg(rt_decode(L.st, t[p], p, one, &e) == LMQ_OK, "%s", e.msg);
        ck_assert_msg(memcmp(one, win + (size_t)p * V, (size_t)V * sizeof *one) == 0,
                      "%s %s (%s): decoded logits differ from the window's at position %d", rel,
                      recipe ? recipe : "", isa->name, p);
    }
    float *again = window_logits(&L, t, n);
    ck_assert(memcmp(again, win, (size_t)n * V * sizeof *win) == 0);
    /* Prefill in two pieces (positions 0..99, then 100..255) matches too. */
    ck_assert(rt_forward(L.st, t, 100, 0, RT_LOGITS_NONE, NULL, &e) == LMQ_OK);
    ck_assert(rt_forward(L.st, t + 100, n - 100, 100, RT_LOGITS_ALL, again, &e) == LMQ_OK);
    ck_assert(memcmp(again, win + (size_t)100 * V, (size_t)(n - 100) * V * sizeof *win) == 0);
    free(again);
    free(win);
    free(one);
    free(t);
    close_model(&L);
}

START_TEST(decode_equals_window)
{
    check_decode_equals_window(STORIES, NULL, rt_isa_best());
    check_decode_equals_window(SOTU, NULL, rt_isa_best());
    check_decode_equals_window(STORIES, NULL, &rt_kernels_scalar);
}
END_TEST

/* The same for packed weights: int4 g128 layers (fused where a row is a multiple of 32 long,
 * generic for stories260K's 172-wide ffn_down), an int8 classifier and an fp16 embedding; int4
 * g32 asymmetric; int3 (generic throughout). */
START_TEST(decode_equals_window_packed)
{
    const char *recipes[] = { "recipes/w4a16.yaml", "recipes/int4-g32-asym.yaml", "recipes/int3-g32.yaml" };
    for (int r = 0; r < 3; r++)
        for (int i = 0; rt_isa_nth(i); i++)
            check_decode_equals_window(STORIES, recipes[r], rt_isa_nth(i));
}
END_TEST

/* 1, 2 and 3 threads give bit-identical logits, for fp32 and packed weights. */
START_TEST(threads_identical)
{
    const struct { const char *model, *recipe; } cases[] = {
        { STORIES, NULL }, { SOTU, NULL }, { STORIES, "recipes/w4a16.yaml" }, { SOTU, "recipes/w4a16.yaml" },
    };
    for (int mi = 0; mi < 4; mi++) {
        float *ref = NULL;
        int32_t *t = NULL;
        size_t bytes = 0;
        for (int threads = 1; threads <= 3; threads++) {
            loaded L;
            if (cases[mi].recipe) {
                load_quantised(cases[mi].model, cases[mi].recipe, &L.m);
                start(&L, threads, rt_isa_best(), 256);
            } else {
                open_model(&L, cases[mi].model, threads, rt_isa_best());
            }
            if (!t)
                t = random_tokens(256, L.m.arch.vocab_size, 11);
            float *lg = window_logits(&L, t, 256);
            bytes = (size_t)256 * L.m.arch.vocab_size * sizeof *lg;
            if (!ref)
                ref = lg;
            else {
                ck_assert_msg(memcmp(lg, ref, bytes) == 0, "%s %s: %d threads differ from 1", cases[mi].model,
                              cases[mi].recipe ? cases[mi].recipe : "", threads);
                free(lg);
            }
            close_model(&L);
        }
        free(ref);
        free(t);
    }
}
END_TEST

/* A pass taken one block at a time (rt_forward_from), its residual stream kept outside the state
 * between the steps and another window run through the state in between, ends bit for bit where
 * rt_forward_blocks ends after as many blocks: for fp32 and packed weights, after every block. */
START_TEST(blocks_one_at_a_time)
{
    const struct { const char *model, *recipe; } cases[] = {
        { STORIES, NULL }, { SOTU, NULL }, { STORIES, "recipes/w4a16.yaml" },
    };
    for (int mi = 0; mi < 3; mi++) {
        loaded L;
        if (cases[mi].recipe) {
            load_quantised(cases[mi].model, cases[mi].recipe, &L.m);
            start(&L, 2, rt_isa_best(), 256);
        } else {
            open_model(&L, cases[mi].model, 2, rt_isa_best());
        }
        const int n = 200, nl = L.m.arch.n_layers;
        const size_t size = (size_t)n * L.m.arch.dim * sizeof(float);
        int32_t *t = random_tokens(n, L.m.arch.vocab_size, 5), *other = random_tokens(n, L.m.arch.vocab_size, 6);
        float *x = malloc(size), *ref = malloc(size);
        lmq_err e;
        ck_assert_msg(rt_forward_blocks(L.st, t, n, 0, &e) == LMQ_OK, "%s", e.msg);
        memcpy(x, rt_state_stream(L.st), size);
        for (int l = 0; l < nl; l++) {
            ck_assert(rt_forward_blocks(L.st, other, n, nl, &e) == LMQ_OK);
            memcpy(rt_state_stream(L.st), x, size);
            ck_assert_msg(rt_forward_from(L.st, n, l, l + 1, &e) == LMQ_OK, "%s", e.msg);
            memcpy(x, rt_state_stream(L.st), size);
            ck_assert(rt_forward_blocks(L.st, t, n, l + 1, &e) == LMQ_OK);
            memcpy(ref, rt_state_stream(L.st), size);
            ck_assert_msg(memcmp(x, ref, size) == 0, "%s %s: block %d taken alone differs", cases[mi].model,
                          cases[mi].recipe ? cases[mi].recipe : "", l);
        }
        /* The blocks did something: the stream is no longer the embeddings. */
        ck_assert(rt_forward_blocks(L.st, t, n, 0, &e) == LMQ_OK);
        ck_assert(memcmp(x, rt_state_stream(L.st), size) != 0);
        free(x);
        free(ref);
        free(t);
        free(other);
        close_model(&L);
    }
}
END_TEST

static double max_abs_diff(const float *a, const float *b, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* Reorders each head's q/k rows as Hugging Face's conversion does, pair (2i, 2i+1) →
 * (i, i + hd/2), and declares the half layout: the logits must not change. */
static void permute_to_half(lmq_model *m)
{
    const int hd = m->arch.dim / m->arch.n_heads, d = m->arch.dim;
    float *tmp = malloc((size_t)hd * d * sizeof *tmp);
    for (int l = 0; l < m->arch.n_layers; l++)
        for (int which = 0; which < 2; which++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.attn_%c.weight", l, which ? 'k' : 'q');
            lmq_tensor *t = lmq_model_find(m, name);
            ck_assert_ptr_nonnull(t);
            for (int64_t h = 0; h < t->shape[0] / hd; h++) {
                float *head = t->data + h * hd * d;
                for (int i = 0; i < hd / 2; i++) {
                    memcpy(tmp + (size_t)i * d, head + (size_t)(2 * i) * d, (size_t)d * sizeof *tmp);
                    memcpy(tmp + (size_t)(i + hd / 2) * d, head + (size_t)(2 * i + 1) * d, (size_t)d * sizeof *tmp);
                }
                memcpy(head, tmp, (size_t)hd * d * sizeof *tmp);
            }
        }
    m->arch.rope = LMQ_ROPE_HALF;
    free(tmp);
}

START_TEST(rope_layouts_agree)
{
    loaded a, b, hf;
    open_model(&a, STORIES, 2, rt_isa_best());
    load_model(STORIES, 0, &b.m);
    permute_to_half(&b.m);
    start(&b, 2, rt_isa_best(), 256);
    open_model(&hf, "stories260K-hf", 2, rt_isa_best());
    ck_assert_int_eq(hf.m.arch.rope, LMQ_ROPE_HALF);
    const int V = a.m.arch.vocab_size;
    int32_t *t = random_tokens(256, V, 3);
    float *la = window_logits(&a, t, 256), *lb = window_logits(&b, t, 256), *lh = window_logits(&hf, t, 256);
    double dp = max_abs_diff(la, lb, (size_t)256 * V), dh = max_abs_diff(la, lh, (size_t)256 * V);
    ck_assert_msg(dp <= 2e-5, "half layout (permuted here) differs by %g", dp);
    ck_assert_msg(dh <= 2e-5, "stories260K-hf differs from the llama2.c layout by %g", dh);
    /* The layouts are not interchangeable: the permuted weights read as interleaved are wrong. */
    b.rm.arch.rope = LMQ_ROPE_INTERLEAVED;
    float *wrong = window_logits(&b, t, 256);
    ck_assert_double_gt(max_abs_diff(la, wrong, (size_t)256 * V), 1e-2);
    free(wrong);
    free(la);
    free(lb);
    free(lh);
    free(t);
    close_model(&a);
    close_model(&b);
    close_model(&hf);
}
END_TEST

/* ---- kernels: fast set against the scalar reference ------------------------------------ */

static void fill(float *x, size_t n, float scale, rt_rng *r)
{
    for (size_t i = 0; i < n; i++)
        x[i] = scale * (2.0f * rt_rng_float(r) - 1.0f);
}

START_TEST(kernels_match_scalar)
{
    const rt_kernels *ref = &rt_kernels_scalar, *fast = rt_isa_best();
    rt_rng r;
    rt_rng_seed(&r, 5);
    /* Shapes around the vector width and the tile sizes, with strides. */
    const int shapes[][3] = { { 1, 1, 1 }, { 1, 5, 7 }, { 3, 4, 8 }, { 4, 9, 17 }, { 7, 13, 64 }, { 97, 33, 129 } };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int m = shapes[s][0], cols = shapes[s][1], k = shapes[s][2], ldx = k + 3, ldw = k + 1, ldy = cols + 2;
        float *x = calloc((size_t)m * ldx, 4), *w = calloc((size_t)cols * ldw, 4), *b = malloc((size_t)cols * 4);
        float *y0 = calloc((size_t)m * ldy, 4), *y1 = calloc((size_t)m * ldy, 4);
        fill(x, (size_t)m * ldx, 1.0f, &r);
        fill(w, (size_t)cols * ldw, 1.0f, &r);
        fill(b, (size_t)cols, 1.0f, &r);
        ref->gemm_nt(x, ldx, w, ldw, b, y0, ldy, m, cols, k);
        fast->gemm_nt(x, ldx, w, ldw, b, y1, ldy, m, cols, k);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < ldy; j++) {
                float e0 = y0[i * ldy + j], e1 = y1[i * ldy + j];
                ck_assert_msg(fabsf(e0 - e1) <= 1e-5f * (1 + k), "gemm %dx%dx%d at %d,%d: %g vs %g", m, cols, k, i, j, e0, e1);
                if (j >= cols) /* the padding between rows is untouched */
                    ck_assert(e1 == 0.0f);
            }
        free(x), free(w), free(b), free(y0), free(y1);
    }
    for (int n = 1; n <= 40; n += 3) {
        float a[40], b0[40], b1[40], u[40], v0[8], v1[8], vals[40 * 8];
        fill(a, n, 6.0f, &r);
        fill(u, n, 2.0f, &r);
        fill(vals, (size_t)n * 8, 1.0f, &r);
        memcpy(b0, a, sizeof a);
        memcpy(b1, a, sizeof a);
        ref->gelu_tanh(b0, n);
        fast->gelu_tanh(b1, n);
        for (int i = 0; i < n; i++)
            ck_assert_msg(fabsf(b0[i] - b1[i]) <= 2e-6f * (1 + fabsf(a[i])), "gelu(%g): %g vs %g", a[i], b0[i], b1[i]);
        memcpy(b0, a, sizeof a);
        memcpy(b1, a, sizeof a);
        ref->silu_mul(b0, u, n);
        fast->silu_mul(b1, u, n);
        for (int i = 0; i < n; i++)
            ck_assert_msg(fabsf(b0[i] - b1[i]) <= 2e-6f * (1 + fabsf(a[i] * u[i])), "silu: %g vs %g", b0[i], b1[i]);
        memcpy(b0, a, sizeof a);
        memcpy(b1, a, sizeof a);
        float s0 = ref->softmax_unnorm(b0, n, 0.7f), s1 = fast->softmax_unnorm(b1, n, 0.7f);
        ck_assert(fabsf(s0 - s1) <= 1e-6f * s0);
        for (int i = 0; i < n; i++)
            ck_assert(fabsf(b0[i] - b1[i]) <= 1e-6f && b0[i] <= 1.0f && b1[i] <= 1.0f);
        ref->wsum_rows(b0, n, vals, 8, 0.5f, v0, 7);
        fast->wsum_rows(b0, n, vals, 8, 0.5f, v1, 7);
        for (int i = 0; i < 7; i++)
            ck_assert(fabsf(v0[i] - v1[i]) <= 1e-5f);
    }
    /* Gram rows, every set against the definition bit for bit (one order, no fused multiply-add):
     * widths around the 16-column pass, from every starting row, with a stride. */
    for (int d = 1; d <= 37; d += 6)
        for (int n = 1; n <= 9; n += 4) {
            const size_t ldx = (size_t)d + 2;
            float *x = malloc((size_t)n * ldx * 4);
            double *want = malloc((size_t)d * 8), *got = malloc((size_t)d * 8);
            fill(x, (size_t)n * ldx, 3.0f, &r);
            for (int i = 0; i < d; i++) {
                const rt_kernels *isa;
                for (int c = 0; c < d; c++) {
                    want[c] = 0.25 * c;
                    for (int t = 0; t < n && c >= i; t++)
                        want[c] = want[c] + (double)x[t * ldx + i] * (double)x[t * ldx + c];
                }
                for (int k = 0; (isa = rt_isa_nth(k)); k++) {
                    for (int c = 0; c < d; c++)
                        got[c] = 0.25 * c;
                    isa->gram_row(got, x, ldx, n, i, d);
                    ck_assert_msg(!memcmp(got, want, (size_t)d * 8), "%s gram_row d %d, n %d, row %d", isa->name, d,
                                  n, i);
                }
            }
            free(x), free(want), free(got);
        }
    /* A softmax weighted sum against its definition. */
    float sc[3] = { 1.0f, 2.0f, 3.0f }, vals[3] = { 10.0f, 20.0f, 30.0f }, out;
    float sum = fast->softmax_unnorm(sc, 3, 1.0f);
    fast->wsum_rows(sc, 3, vals, 1, 1.0f / sum, &out, 1);
    const double e1 = exp(-2.0), e2 = exp(-1.0);
    ck_assert_double_eq_tol(out, (10 * e1 + 20 * e2 + 30) / (e1 + e2 + 1), 1e-5);
}
END_TEST

/* The row statistics and KL, in both kernel sets, against straightforward fp64 definitions. */
START_TEST(row_kernels_against_definition)
{
    const int n = 50257;
    float *l = malloc((size_t)n * 4), *q = malloc((size_t)n * 4);
    rt_rng r;
    rt_rng_seed(&r, 9);
    fill(l, (size_t)n, 12.0f, &r);
    l[777] = 40.0f; /* the maximum, twice: the lower index wins */
    l[4000] = 40.0f;
    double mx = 40.0, s = 0.0;
    for (int i = 0; i < n; i++)
        s += exp(l[i] - mx);
    const float scales[] = { 0.0f, 1e-4f, 1e-2f, 1.0f, 8.0f };
    const rt_kernels *isa;
    for (int set = 0; (isa = rt_isa_nth(set)); set++) {
        rt_rowstat st;
        ck_assert_int_eq(isa->row_stats(l, n, &st), 0);
        ck_assert_int_eq(st.argmax, 777);
        ck_assert(st.max == 40.0f);
        ck_assert_double_eq_tol(st.sumexp, s, 1e-7 * s);
        for (size_t k = 0; k < sizeof scales / sizeof scales[0]; k++) {
            /* q = l + noise + a constant offset (which KL must ignore). */
            for (int i = 0; i < n; i++)
                q[i] = l[i] + scales[k] * (2.0f * rt_rng_float(&r) - 1.0f) + 3.0f;
            double mq = q[0], sq = 0.0, kl = 0.0;
            for (int i = 0; i < n; i++)
                mq = fmax(mq, q[i]);
            for (int i = 0; i < n; i++)
                sq += exp(q[i] - mq);
            const long double lse_r = mx + logl(s), lse_q = mq + logl(sq);
            long double acc = 0.0L;
            for (int i = 0; i < n; i++) {
                long double lp = l[i] - lse_r, lqv = q[i] - lse_q;
                acc += expl(lp) * (lp - lqv);
            }
            kl = (double)acc;
            double got = isa->kl_row(l, &st, q, n);
            ck_assert_msg(fabs(got - kl) <= 1e-6 * kl + 1e-12, "%s KL at noise %g: %.10g, definition %.10g",
                          isa->name, scales[k], got, kl);
            if (scales[k] == 0.0f)
                ck_assert(got < 1e-12);
        }
        ck_assert_double_eq(isa->kl_row(l, &st, l, n), 0.0);
        l[123] = NAN;
        ck_assert_int_eq(isa->row_stats(l, n, &st), -1);
        l[123] = INFINITY;
        ck_assert_int_eq(isa->row_stats(l, n, &st), -1);
        l[123] = 0.0f;
    }
    free(l);
    free(q);
}
END_TEST

/* ---- errors ----------------------------------------------------------------------------- */

START_TEST(forward_errors)
{
    loaded L;
    open_model(&L, STORIES, 1, rt_isa_best());
    lmq_err e;
    float lg[512];
    int32_t t[2] = { 1, 512 };
    ck_assert_int_eq(rt_forward(L.st, t, 2, 0, RT_LOGITS_LAST, lg, &e), LMQ_E_ARG);
    ck_assert_msg(strstr(e.msg, "token 512") != NULL, "%s", e.msg);
    t[1] = -1;
    ck_assert_int_eq(rt_forward(L.st, t, 2, 0, RT_LOGITS_LAST, lg, &e), LMQ_E_ARG);
    ck_assert_int_eq(rt_decode(L.st, 5, 3, lg, &e), LMQ_E_ARG); /* positions 0..2 never computed */
    ck_assert_msg(strstr(e.msg, "position 3") != NULL, "%s", e.msg);
    ck_assert_int_eq(rt_decode(L.st, 5, 0, lg, &e), LMQ_OK);
    ck_assert_int_eq(rt_decode(L.st, 5, 1, lg, &e), LMQ_OK);
    ck_assert_int_eq(rt_decode(L.st, 5, 256, lg, &e), LMQ_E_ARG); /* beyond the state */
    ck_assert_int_eq(rt_forward(L.st, t, 0, 0, RT_LOGITS_LAST, lg, &e), LMQ_E_ARG);
    ck_assert_int_eq(rt_forward(L.st, t, 1, 0, RT_LOGITS_LAST, NULL, &e), LMQ_E_ARG);
    /* Block ranges outside the model's; a pass from the stream leaves no position in the cache. */
    ck_assert_int_eq(rt_forward_from(L.st, 2, 3, 2, &e), LMQ_E_ARG);
    ck_assert_msg(strstr(e.msg, "blocks 3..1 of 5") != NULL, "%s", e.msg);
    ck_assert_int_eq(rt_forward_from(L.st, 2, -1, 2, &e), LMQ_E_ARG);
    ck_assert_int_eq(rt_forward_from(L.st, 2, 0, 6, &e), LMQ_E_ARG);
    ck_assert_int_eq(rt_forward_blocks(L.st, t, 1, 6, &e), LMQ_E_ARG);
    ck_assert_int_eq(rt_forward_blocks(L.st, (const int32_t[]){ 1, 2 }, 2, 0, &e), LMQ_OK);
    ck_assert_int_eq(rt_forward_from(L.st, 2, 0, 5, &e), LMQ_OK);
    ck_assert_int_eq(rt_decode(L.st, 5, 2, lg, &e), LMQ_E_ARG);
    rt_state *s2;
    rt_exec ex = { .pool = NULL, .isa = &rt_kernels_scalar };
    ck_assert_int_eq(rt_state_create(&L.rm, &ex, 513, &s2, &e), LMQ_E_ARG);
    ck_assert_int_eq(rt_state_create(&L.rm, &ex, -1, &s2, &e), LMQ_E_ARG);
    ck_assert_int_eq(rt_state_create(&L.rm, &ex, 0, &s2, &e), LMQ_OK);
    ck_assert_int_eq(rt_state_max_tokens(s2), 512);
    rt_state_free(s2);
    close_model(&L);

    /* Models the runtime refuses: a missing tensor, a rope layout that does not fit. */
    lmq_model m;
    rt_model rm;
    load_model(STORIES, 0, &m);
    m.arch.rope = LMQ_ROPE_NONE;
    ck_assert_int_eq(rt_model_init(&rm, &m, &e), LMQ_E_UNSUPPORTED);
    m.arch.rope = LMQ_ROPE_INTERLEAVED;
    snprintf(lmq_model_find(&m, "blk.3.attn_v.weight")->name, LMQ_NAME_MAX, "blk.3.attn_v.weihgt");
    ck_assert_int_eq(rt_model_init(&rm, &m, &e), LMQ_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "blk.3.attn_v.weight") != NULL, "%s", e.msg);
    lmq_model_free(&m);
    load_model(SOTU, 0, &m);
    m.arch.rope = LMQ_ROPE_HALF;
    ck_assert_int_eq(rt_model_init(&rm, &m, &e), LMQ_E_UNSUPPORTED);
    lmq_model_free(&m);
}
END_TEST

/* The device seam on the CPU: what --device takes, and what only the cuda device does. */
START_TEST(device_seam)
{
    lmq_err e;
    const rt_backend *b;
    ck_assert_int_eq(rt_backend_ready("tpu", &b, &e), LMQ_E_ARG);
    ck_assert_msg(strstr(e.msg, "'tpu' is not cpu or cuda") != NULL, "%s", e.msg);
    ck_assert_int_eq(rt_backend_ready("cpu", &b, &e), LMQ_OK);
    ck_assert_ptr_eq(b, &rt_cpu_backend);
    const rt_backend *cuda;
    const int built = rt_backend_get("cuda", &cuda, &e) == LMQ_OK, present = built && cuda->devices() > 0;
    if (!built)
        ck_assert_msg(strstr(e.msg, "lmq was built without CUDA") != NULL, "%s", e.msg);
    const lmq_code c = rt_backend_ready("cuda", &b, &e);
    if (!present) {
        ck_assert_int_eq(c, LMQ_E_UNSUPPORTED);
        ck_assert_msg(strstr(e.msg, built ? "--device cuda: no CUDA device" : "--device cuda: lmq was built "
                             "without CUDA") != NULL, "%s", e.msg);
    } else
        ck_assert_msg(c == LMQ_OK && b == cuda && !strcmp(b->name, "cuda"), "%s", e.msg);

    loaded L;
    open_model(&L, STORIES, 1, &rt_kernels_scalar);
    rt_state *s2;
    const rt_exec ex = { .isa = &rt_kernels_scalar };
    ck_assert_int_eq(rt_state_create_seqs(&L.rm, &ex, 16, 0, &s2, &e), LMQ_E_ARG);
    int32_t t[3] = { 1, 2, 3 };
    float *lg = malloc((size_t)3 * L.m.arch.vocab_size * sizeof *lg), *lg0 = malloc(L.m.arch.vocab_size * sizeof *lg0);
    /* a batch of the one sequence the state holds is its next token */
    ck_assert_int_eq(rt_decode_batch(L.st, 2, t, lg, &e), LMQ_E_ARG);
    ck_assert_int_eq(rt_forward(L.st, t, 2, 0, RT_LOGITS_NONE, NULL, &e), LMQ_OK);
    ck_assert_int_eq(rt_decode_batch(L.st, 1, t + 2, lg, &e), LMQ_OK);
    ck_assert_int_eq(rt_decode(L.st, t[2], 2, lg0, &e), LMQ_OK);
    ck_assert_int_eq(memcmp(lg, lg0, L.m.arch.vocab_size * sizeof *lg), 0);
    ck_assert_int_eq(rt_forward_seq(L.st, 1, t, 3, 0, RT_LOGITS_LAST, lg, &e), LMQ_E_ARG);
    /* sequence 0 is rt_forward's */
    ck_assert_int_eq(rt_forward_seq(L.st, 0, t, 3, 0, RT_LOGITS_LAST, lg, &e), LMQ_OK);
    ck_assert_int_eq(rt_forward(L.st, t, 3, 0, RT_LOGITS_LAST, lg0, &e), LMQ_OK);
    ck_assert_int_eq(memcmp(lg, lg0, L.m.arch.vocab_size * sizeof *lg), 0);
    /* the cuda backend without a device: refused with why, nothing left open */
    if (built) {
        const rt_exec on_cuda = { .isa = &rt_kernels_scalar, .backend = cuda };
        const lmq_code made = rt_state_create(&L.rm, &on_cuda, 16, &s2, &e);
        if (!present) {
            ck_assert_int_eq(made, LMQ_E_UNSUPPORTED);
            ck_assert_msg(strstr(e.msg, "no CUDA device") != NULL, "%s", e.msg);
        } else {
            ck_assert_msg(made == LMQ_OK, "%s", e.msg);
            ck_assert_int_eq(rt_forward_blocks(s2, t, 3, 1, &e), LMQ_E_UNSUPPORTED); /* calibration: the CPU's */
            rt_state_free(s2);
        }
    }
    free(lg);
    free(lg0);
    close_model(&L);
}
END_TEST

/* Sequences decoded together (one pass, their rows one matrix product per layer) give each
 * sequence's logits bit for bit as decoding it alone: prompts of different lengths, in every
 * cache format (the fp32 one read in place, the others through the tile), on two threads. */
static void check_batch_equals_alone(const char *rel, const char *kv)
{
    enum { SEQS = 4, STEPS = 5 };
    loaded L;
    lmq_err e;
    load_model(rel, 0, &L.m);
    ck_assert_msg(rt_model_init(&L.rm, &L.m, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(lmq_pool_create(2, &L.pool, &e) == LMQ_OK, "%s", e.msg);
    const rt_exec ex = { .pool = L.pool, .isa = rt_isa_best(), .kv_k = rt_kv_find(kv), .kv_v = rt_kv_find(kv) };
    const int V = L.m.arch.vocab_size;
    rt_state *batch, *alone[SEQS];
    ck_assert_msg(rt_state_create_seqs(&L.rm, &ex, 64, SEQS, &batch, &e) == LMQ_OK, "%s", e.msg);
    int32_t *prompt = random_tokens(40, V, 7), next[SEQS];
    float *lg = malloc((size_t)SEQS * V * sizeof *lg), *lg1 = malloc((size_t)V * sizeof *lg1);
    for (int q = 0; q < SEQS; q++) {
        const int len = 3 + 11 * q; /* sequence q: its own prompt, its own length */
        ck_assert_msg(rt_state_create(&L.rm, &ex, 64, &alone[q], &e) == LMQ_OK, "%s", e.msg);
        ck_assert_int_eq(rt_forward_seq(batch, q, prompt + q, len, 0, RT_LOGITS_NONE, NULL, &e), LMQ_OK);
        ck_assert_int_eq(rt_forward(alone[q], prompt + q, len, 0, RT_LOGITS_NONE, NULL, &e), LMQ_OK);
        next[q] = prompt[q + len];
    }
    for (int step = 0; step < STEPS; step++) {
        ck_assert_msg(rt_decode_batch(batch, SEQS, next, lg, &e) == LMQ_OK, "%s", e.msg);
        for (int q = 0; q < SEQS; q++) {
            ck_assert_int_eq(rt_decode(alone[q], next[q], 3 + 11 * q + step, lg1, &e), LMQ_OK);
            ck_assert_msg(!memcmp(lg + (size_t)q * V, lg1, (size_t)V * sizeof *lg1), "%s --kv %s: sequence %d, "
                          "step %d differs decoded in the batch", rel, kv, q, step);
            next[q] = (int32_t)((next[q] * 31 + step + q) % V);
        }
    }
    for (int q = 0; q < SEQS; q++)
        rt_state_free(alone[q]);
    rt_state_free(batch);
    free(prompt);
    free(lg);
    free(lg1);
    L.st = NULL;
    close_model(&L);
}

START_TEST(batch_decode_equals_alone)
{
    const char *kv[] = { "fp32", "int8", "int4", "fp16" };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        check_batch_equals_alone(STORIES, kv[i]);
        check_batch_equals_alone(SOTU, kv[i]);
    }
}
END_TEST

/* ---- what decode streams, and the probe that reads it ---------------------------------- */

static void count_streamed(const rt_weight *W, void *v)
{
    uint64_t *n = v;
    n[0]++;
    n[1] += W->L.bytes;
}

/* Every linear layer and the classifier, once each: GPT-2 has four matrices a block (q, k and v
 * fused), the Llama-shaped stories model seven. */
START_TEST(streamed_weights)
{
    const struct { const char *rel; int per_layer; } m[] = { { SOTU, 4 }, { STORIES, 7 } };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        loaded L;
        open_model(&L, m[i].rel, 1, rt_isa_best());
        uint64_t n[2] = { 0, 0 };
        rt_model_each_streamed(&L.rm, count_streamed, n);
        ck_assert_int_eq(n[0], (uint64_t)m[i].per_layer * L.rm.arch.n_layers + 1);
        ck_assert_uint_eq(n[1], rt_model_weight_bytes(&L.rm));
        close_model(&L);
    }
}
END_TEST

/* The probe reads every byte of every span, each round: spans of ragged lengths and alignments,
 * one longer than a work item, summed as 64-bit words over whole 256-byte steps and then bytes. */
START_TEST(probe_reads_every_byte)
{
    const size_t lens[] = { 1000, (300 << 10) + 17, 256, 3 };
    const size_t offs[] = { 3, 0, 64, 1 };
    uint8_t *buf[4];
    rt_span sp[4];
    uint64_t want = 0;
    for (int i = 0; i < 4; i++) {
        buf[i] = malloc(lens[i] + offs[i]);
        uint8_t *p = buf[i] + offs[i];
        for (size_t k = 0; k < lens[i]; k++)
            p[k] = (uint8_t)(k * 7 + (size_t)i);
        const size_t whole = lens[i] / 256 * 256;
        for (size_t k = 0; k < whole; k += 8) {
            uint64_t w = 0;
            for (int b = 7; b >= 0; b--)
                w = w << 8 | p[k + (size_t)b];
            want += w;
        }
        for (size_t k = whole; k < lens[i]; k++)
            want += p[k];
        sp[i] = (rt_span){ p, lens[i] };
    }
    lmq_pool *pool;
    lmq_err e;
    ck_assert(lmq_pool_create(2, &pool, &e) == LMQ_OK);
    for (int t = 0; t < 2; t++) {
        double gbps = 0;
        uint64_t sum = 0;
        ck_assert_msg(rt_probe_read_spans(t ? pool : NULL, sp, 4, 3, &gbps, &sum, &e) == LMQ_OK, "%s", e.msg);
        ck_assert_uint_eq(sum, 3 * want);
        ck_assert(gbps > 0);
    }
    double gbps;
    ck_assert_int_eq(rt_probe_read_spans(pool, sp, 4, 0, &gbps, NULL, &e), LMQ_E_ARG);
    lmq_pool_free(pool);
    for (int i = 0; i < 4; i++)
        free(buf[i]);
}
END_TEST

/* ---- sampling ------------------------------------------------------------------------- */

/* The model definition (runtime/pass.c) as the ops a backend is asked for, written out here from
 * the two architectures: GPT-2 (fused q|k|v, learned positions, GELU) and Llama (separate q, k,
 * v, gated SiLU), a failing op ending the pass with its code. */
typedef struct {
    int fused, gated, pos, fail_at; /* fail_at: the op (1-based) that fails, 0 none */
    char log[1024];
    int ops;
} rec_backend;

static const char *const BUF_NAMES[RT_BUF_COUNT] = { "X", "XB", "XB2", "Q", "K", "V", "QKV", "HB", "HB2", "LOGITS" };
static const char *const W_NAMES[] = { "qkv", "q", "k", "v", "out", "gate", "up", "down", "tok", "pos", "cls" };

static lmq_code rec(rec_backend *b, lmq_err *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const size_t at = strlen(b->log);
    vsnprintf(b->log + at, sizeof b->log - at, fmt, ap);
    va_end(ap);
    return ++b->ops == b->fail_at ? lmq_fail(err, LMQ_E_IO, "op %d failed", b->ops) : LMQ_OK;
}

static int rec_has(void *be, int layer, rt_wslot w)
{
    const rec_backend *b = be;
    (void)layer;
    return w == RT_W_QKV ? b->fused : w == RT_W_Q || w == RT_W_K || w == RT_W_V ? !b->fused
           : w == RT_W_GATE ? b->gated : w == RT_W_POS ? b->pos : 1;
}
static lmq_code rec_embed(void *be, rt_wslot w, lmq_err *err) { return rec(be, err, "%s ", W_NAMES[w]); }
static lmq_code rec_norm(void *be, int layer, rt_norm which, rt_buf y, rt_buf x, int r0, int rows, lmq_err *err)
{
    return rec(be, err, "norm%d.%s %s>%s %d+%d ", layer, (const char *[]){ "attn", "ffn", "out" }[which], BUF_NAMES[x],
               BUF_NAMES[y], r0, rows);
}
static lmq_code rec_linear(void *be, int layer, rt_wslot w, rt_buf x, int r0, int rows, rt_buf y, lmq_err *err)
{
    return rec(be, err, "lin%d.%s %s>%s %d+%d ", layer, W_NAMES[w], BUF_NAMES[x], BUF_NAMES[y], r0, rows);
}
static lmq_code rec_rope(void *be, int layer, int fused, lmq_err *err)
{
    return rec(be, err, "rope%d%s ", layer, fused ? " fused" : "");
}
static lmq_code rec_att(void *be, int layer, lmq_err *err) { return rec(be, err, "att%d ", layer); }
static lmq_code rec_act(void *be, int gated, lmq_err *err) { return rec(be, err, gated ? "silu*HB2 " : "gelu "); }
static lmq_code rec_add(void *be, rt_buf x, rt_buf y, lmq_err *err)
{
    return rec(be, err, "%s+=%s ", BUF_NAMES[x], BUF_NAMES[y]);
}
static const rt_ops REC_OPS = { rec_has, rec_embed, rec_norm, rec_linear, rec_rope, rec_att, rec_act, rec_add };

START_TEST(pass_ops_in_order)
{
    lmq_err e;
    rec_backend gpt2 = { .fused = 1, .pos = 1 };
    ck_assert_int_eq(rt_pass(&REC_OPS, &gpt2, &(rt_pass_rows){ .n = 3, .embed = 1, .from = 0, .to = 1, .logits_from = 2 },
                             &e), LMQ_OK);
    ck_assert_str_eq(gpt2.log, "tok pos "
                               "norm0.attn X>XB 0+3 lin0.qkv XB>QKV 0+3 rope0 fused att0 lin0.out XB2>XB 0+3 X+=XB "
                               "norm0.ffn X>XB 0+3 lin0.up XB>HB 0+3 gelu lin0.down HB>XB 0+3 X+=XB "
                               "norm-1.out X>XB 2+1 lin-1.cls XB>LOGITS 2+1 ");
    /* From the residual stream through block 1 of 2, no logits. */
    rec_backend llama = { .gated = 1 };
    ck_assert_int_eq(rt_pass(&REC_OPS, &llama, &(rt_pass_rows){ .n = 5, .embed = 0, .from = 1, .to = 2, .logits_from = 5 },
                             &e), LMQ_OK);
    ck_assert_str_eq(llama.log, "norm1.attn X>XB 0+5 lin1.q XB>Q 0+5 lin1.k XB>K 0+5 lin1.v XB>V 0+5 rope1 att1 "
                                "lin1.out XB2>XB 0+5 X+=XB norm1.ffn X>XB 0+5 lin1.gate XB>HB 0+5 lin1.up XB>HB2 0+5 "
                                "silu*HB2 lin1.down HB>XB 0+5 X+=XB ");
    /* Every logit row: the final norm and classifier over all n. A failing op's code ends it. */
    rec_backend all = { .gated = 1, .fail_at = 2 };
    ck_assert_int_eq(rt_pass(&REC_OPS, &all, &(rt_pass_rows){ .n = 2, .embed = 0, .from = 0, .to = 0, .logits_from = 0 },
                             &e), LMQ_E_IO);
    ck_assert_str_eq(all.log, "norm-1.out X>XB 0+2 lin-1.cls XB>LOGITS 0+2 ");
    ck_assert_str_eq(e.msg, "op 2 failed");
}
END_TEST

START_TEST(rng_known_answers)
{
    /* PCG32 seeded (42, 54), the pcg32 reference implementation's demo values. */
    rt_rng r;
    rt_rng_seed(&r, 42);
    const uint32_t want[6] = { 0xa15c02b7, 0x7b47f409, 0xba1d3330, 0x83d2f293, 0xbfa4784b, 0xcbed606e };
    for (int i = 0; i < 6; i++)
        ck_assert_uint_eq(rt_rng_u32(&r), want[i]);
    for (int i = 0; i < 1000; i++) {
        float f = rt_rng_float(&r);
        ck_assert(f >= 0.0f && f < 1.0f);
    }
}
END_TEST

START_TEST(sampling)
{
    const float tied[5] = { 1.0f, 3.0f, -2.0f, 3.0f, 0.0f };
    ck_assert_int_eq(rt_argmax(tied, 5), 1);
    rt_sampler s;
    lmq_err e;
    ck_assert_int_eq(rt_sampler_init(&s, 5, 0.0f, 1.0f, 1, &e), LMQ_OK);
    ck_assert_int_eq(rt_sample(&s, tied), 1); /* temperature 0 = greedy */
    rt_sampler_free(&s);
    ck_assert_int_eq(rt_sampler_init(&s, 5, -1.0f, 1.0f, 1, &e), LMQ_E_ARG);
    ck_assert_int_eq(rt_sampler_init(&s, 5, 1.0f, 0.0f, 1, &e), LMQ_E_ARG);
    ck_assert_int_eq(rt_sampler_init(&s, 5, 1.0f, 1.5f, 1, &e), LMQ_E_ARG);
    ck_assert_int_eq(rt_sampler_init(&s, 0, 1.0f, 1.0f, 1, &e), LMQ_E_ARG);

    /* Frequencies follow softmax(logits / T) (binomial 5-sigma bounds), and a seed repeats. */
    const float lg[4] = { 0.0f, 1.0f, 2.0f, -1.0f };
    const float T = 1.5f;
    double p[4], z = 0.0;
    for (int i = 0; i < 4; i++)
        z += p[i] = exp(lg[i] / T);
    int count[4] = { 0 }, first[50];
    const int N = 40000;
    ck_assert_int_eq(rt_sampler_init(&s, 4, T, 1.0f, 1234, &e), LMQ_OK);
    for (int i = 0; i < N; i++) {
        int t = rt_sample(&s, lg);
        ck_assert(t >= 0 && t < 4);
        count[t]++;
        if (i < 50)
            first[i] = t;
    }
    rt_sampler_free(&s);
    for (int i = 0; i < 4; i++) {
        double pi = p[i] / z, sd = sqrt(N * pi * (1 - pi));
        ck_assert_msg(fabs(count[i] - N * pi) < 5 * sd, "token %d drawn %d times, expected %.0f", i, count[i], N * pi);
    }
    ck_assert_int_eq(rt_sampler_init(&s, 4, T, 1.0f, 1234, &e), LMQ_OK);
    for (int i = 0; i < 50; i++)
        ck_assert_int_eq(rt_sample(&s, lg), first[i]);
    rt_sampler_free(&s);

    /* top-p at T = 1.5 (p = .138 .268 .523 .071): 0.5 keeps only token 2; 0.75 keeps 2 and 1. */
    ck_assert_int_eq(rt_sampler_init(&s, 4, T, 0.5f, 99, &e), LMQ_OK);
    for (int i = 0; i < 500; i++)
        ck_assert_int_eq(rt_sample(&s, lg), 2);
    rt_sampler_free(&s);
    ck_assert_int_eq(rt_sampler_init(&s, 4, T, 0.75f, 99, &e), LMQ_OK);
    int seen[4] = { 0 };
    for (int i = 0; i < 2000; i++)
        seen[rt_sample(&s, lg)]++;
    ck_assert(seen[0] == 0 && seen[3] == 0 && seen[1] > 0 && seen[2] > seen[1]);
    rt_sampler_free(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("runtime");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, golden_logits_stories);
    tcase_add_test(tc, golden_logits_sotu);
    tcase_add_test(tc, golden_logits_sotu_split_qkv);
    tcase_add_test(tc, split_qkv_equals_fused);
    tcase_add_test(tc, greedy_stories);
    tcase_add_test(tc, greedy_sotu);
    tcase_add_test(tc, decode_equals_window);
    tcase_add_test(tc, decode_equals_window_packed);
    tcase_add_test(tc, threads_identical);
    tcase_add_test(tc, blocks_one_at_a_time);
    tcase_add_test(tc, rope_layouts_agree);
    tcase_add_test(tc, kernels_match_scalar);
    tcase_add_test(tc, row_kernels_against_definition);
    tcase_add_test(tc, forward_errors);
    tcase_add_test(tc, device_seam);
    tcase_add_test(tc, batch_decode_equals_alone);
    tcase_add_test(tc, streamed_weights);
    tcase_add_test(tc, probe_reads_every_byte);
    tcase_add_test(tc, pass_ops_in_order);
    tcase_add_test(tc, rng_known_answers);
    tcase_add_test(tc, sampling);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
