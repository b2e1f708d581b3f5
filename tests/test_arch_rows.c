/* The Llama-like architectures read as rows of convert/hf.c's family table: Mistral, Qwen2 and
 * Phi-3 checkpoints built here in their exact Hugging Face layouts (config.json, tensor names,
 * fused tensors) from one set of random weights, converted, and run. Their logits are checked
 * against the same weights as a Llama checkpoint, and against a reference forward pass written
 * in this file (double precision, straight from the published Llama/Qwen2 definitions). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "convert/convert.h"
#include "formats/safetensors.h"
#include "runtime/forward.h"
#include "tests/testutil.h"

enum { DIM = 16, HEADS = 4, KVH = 2, HD = DIM / HEADS, KVD = KVH * HD, HID = 24, LAYERS = 2, VOCAB = 32, CTX = 64,
       NTOK = 8 };
#define EPS 1e-5
#define THETA 10000.0

typedef struct {
    float q[DIM * DIM], k[KVD * DIM], v[KVD * DIM], o[DIM * DIM], g[HID * DIM], u[HID * DIM], d[DIM * HID];
    float an[DIM], fn[DIM], bq[DIM], bk[KVD], bv[KVD];
} layer_w;

typedef struct {
    float emb[VOCAB * DIM], head[VOCAB * DIM], norm[DIM];
    layer_w l[LAYERS];
    int biases; /* q/k/v biases are part of the model */
} weights;

static void fill(float *x, int n, double scale, double base, uint64_t *s)
{
    for (int i = 0; i < n; i++)
        x[i] = (float)(base + scale * test_gauss(s));
}

static weights *random_weights(uint64_t seed, int biases)
{
    weights *w = calloc(1, sizeof *w);
    uint64_t s = seed;
    fill(w->emb, VOCAB * DIM, 1.0, 0, &s);
    fill(w->head, VOCAB * DIM, 0.3, 0, &s);
    fill(w->norm, DIM, 0.1, 1, &s);
    for (int l = 0; l < LAYERS; l++) {
        layer_w *L = &w->l[l];
        fill(L->q, DIM * DIM, 0.3, 0, &s);
        fill(L->k, KVD * DIM, 0.3, 0, &s);
        fill(L->v, KVD * DIM, 0.3, 0, &s);
        fill(L->o, DIM * DIM, 0.2, 0, &s);
        fill(L->g, HID * DIM, 0.3, 0, &s);
        fill(L->u, HID * DIM, 0.3, 0, &s);
        fill(L->d, DIM * HID, 0.2, 0, &s);
        fill(L->an, DIM, 0.1, 1, &s);
        fill(L->fn, DIM, 0.1, 1, &s);
        if (biases) {
            fill(L->bq, DIM, 0.5, 0, &s);
            fill(L->bk, KVD, 0.5, 0, &s);
            fill(L->bv, KVD, 0.5, 0, &s);
        }
    }
    w->biases = biases;
    return w;
}

/* ---- the reference: Llama's forward pass (Qwen2's adds the q/k/v biases) ---- */

static void rmsnorm(const double *x, const float *w, double *y)
{
    double ss = 0;
    for (int i = 0; i < DIM; i++)
        ss += x[i] * x[i];
    const double r = 1 / sqrt(ss / DIM + EPS);
    for (int i = 0; i < DIM; i++)
        y[i] = x[i] * r * w[i];
}

static void matvec(const float *W, const float *b, const double *x, int rows, int cols, double *y)
{
    for (int r = 0; r < rows; r++) {
        double acc = b ? b[r] : 0;
        for (int c = 0; c < cols; c++)
            acc += (double)W[(size_t)r * cols + c] * x[c];
        y[r] = acc;
    }
}

/* Hugging Face's rotate_half: the pair (i, i + hd/2) of each head turns by pos·θ^(-2i/hd). */
static void rope(double *v, int heads, int pos)
{
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < HD / 2; i++) {
            const double a = pos * pow(THETA, -2.0 * i / HD), c = cos(a), s = sin(a);
            double *x = v + h * HD;
            const double x0 = x[i], x1 = x[i + HD / 2];
            x[i] = x0 * c - x1 * s;
            x[i + HD / 2] = x0 * s + x1 * c;
        }
}

/* Logits [n × VOCAB] for tokens[0..n). */
static void reference(const weights *w, const int32_t *tok, int n, double *logits)
{
    static double K[LAYERS][NTOK][KVD], V[LAYERS][NTOK][KVD];
    for (int t = 0; t < n; t++) {
        double x[DIM], xn[DIM], q[DIM], att[DIM], o[DIM], g[HID], u[HID], dn[DIM];
        for (int i = 0; i < DIM; i++)
            x[i] = w->emb[tok[t] * DIM + i];
        for (int l = 0; l < LAYERS; l++) {
            const layer_w *L = &w->l[l];
            rmsnorm(x, L->an, xn);
            matvec(L->q, w->biases ? L->bq : NULL, xn, DIM, DIM, q);
            matvec(L->k, w->biases ? L->bk : NULL, xn, KVD, DIM, K[l][t]);
            matvec(L->v, w->biases ? L->bv : NULL, xn, KVD, DIM, V[l][t]);
            rope(q, HEADS, t);
            rope(K[l][t], KVH, t);
            for (int h = 0; h < HEADS; h++) {
                const int kh = h / (HEADS / KVH); /* grouped-query attention */
                double p[NTOK], mx = -INFINITY, sum = 0;
                for (int s = 0; s <= t; s++) {
                    p[s] = 0;
                    for (int i = 0; i < HD; i++)
                        p[s] += q[h * HD + i] * K[l][s][kh * HD + i];
                    p[s] /= sqrt((double)HD);
                    mx = fmax(mx, p[s]);
                }
                for (int s = 0; s <= t; s++)
                    sum += (p[s] = exp(p[s] - mx));
                for (int i = 0; i < HD; i++) {
                    att[h * HD + i] = 0;
                    for (int s = 0; s <= t; s++)
                        att[h * HD + i] += p[s] / sum * V[l][s][kh * HD + i];
                }
            }
            matvec(L->o, NULL, att, DIM, DIM, o);
            for (int i = 0; i < DIM; i++)
                x[i] += o[i];
            rmsnorm(x, L->fn, xn);
            matvec(L->g, NULL, xn, HID, DIM, g);
            matvec(L->u, NULL, xn, HID, DIM, u);
            for (int i = 0; i < HID; i++)
                g[i] = g[i] / (1 + exp(-g[i])) * u[i]; /* SwiGLU */
            matvec(L->d, NULL, g, DIM, HID, dn);
            for (int i = 0; i < DIM; i++)
                x[i] += dn[i];
        }
        rmsnorm(x, w->norm, xn);
        matvec(w->head, NULL, xn, VOCAB, DIM, logits + (size_t)t * VOCAB);
    }
}

/* ---- checkpoints in each layout ---- */

typedef struct {
    st_out t[64];
    int64_t shape[64][2];
    float *owned[16];
    int n, n_owned;
} tensors;

static void add(tensors *ts, const char *name, const float *data, int64_t rows, int64_t cols)
{
    char *copy = malloc(strlen(name) + 1);
    strcpy(copy, name);
    ts->shape[ts->n][0] = rows;
    ts->shape[ts->n][1] = cols;
    ts->t[ts->n] = (st_out){ copy, ST_F32, cols ? 2 : 1, ts->shape[ts->n], data };
    ts->n++;
}

/* rows of a (ra × cols) then of b (rb × cols) [then of c]: a fused matrix. */
static const float *stack(tensors *ts, const float *a, int ra, const float *b, int rb, const float *c, int rc, int cols)
{
    float *f = malloc((size_t)(ra + rb + rc) * cols * sizeof *f);
    memcpy(f, a, (size_t)ra * cols * sizeof *f);
    memcpy(f + (size_t)ra * cols, b, (size_t)rb * cols * sizeof *f);
    if (c)
        memcpy(f + (size_t)(ra + rb) * cols, c, (size_t)rc * cols * sizeof *f);
    ts->owned[ts->n_owned++] = f;
    return f;
}

/* Writes <dir>/model.safetensors with model_type's names, config.json (extra: more fields) and
 * a llama2.c tokenizer of VOCAB pieces. */
static void write_checkpoint(const char *dir, const weights *w, const char *model_type, const char *architecture,
                             const char *extra)
{
    tensors ts = { 0 };
    char n[128], path[600];
    const int phi3 = !strcmp(model_type, "phi3");
    add(&ts, "model.embed_tokens.weight", w->emb, VOCAB, DIM);
    for (int l = 0; l < LAYERS; l++) {
        const layer_w *L = &w->l[l];
#define T(what, data, r, c) (snprintf(n, sizeof n, "model.layers.%d.%s", l, what), add(&ts, n, data, r, c))
        T("input_layernorm.weight", L->an, DIM, 0);
        T("post_attention_layernorm.weight", L->fn, DIM, 0);
        T("self_attn.o_proj.weight", L->o, DIM, DIM);
        T("mlp.down_proj.weight", L->d, DIM, HID);
        if (phi3) {
            T("self_attn.qkv_proj.weight", stack(&ts, L->q, DIM, L->k, KVD, L->v, KVD, DIM), DIM + 2 * KVD, DIM);
            T("mlp.gate_up_proj.weight", stack(&ts, L->g, HID, L->u, HID, NULL, 0, DIM), 2 * HID, DIM);
        } else {
            T("self_attn.q_proj.weight", L->q, DIM, DIM);
            T("self_attn.k_proj.weight", L->k, KVD, DIM);
            T("self_attn.v_proj.weight", L->v, KVD, DIM);
            T("mlp.gate_proj.weight", L->g, HID, DIM);
            T("mlp.up_proj.weight", L->u, HID, DIM);
        }
        if (!strcmp(model_type, "qwen2")) { /* Qwen2 always has them (zero when w has none) */
            T("self_attn.q_proj.bias", L->bq, DIM, 0);
            T("self_attn.k_proj.bias", L->bk, KVD, 0);
            T("self_attn.v_proj.bias", L->bv, KVD, 0);
        }
#undef T
    }
    add(&ts, "model.norm.weight", w->norm, DIM, 0);
    add(&ts, "lm_head.weight", w->head, VOCAB, DIM);
    lmq_err e;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ck_assert_msg(st_write(path, ts.t, ts.n, &e) == LMQ_OK, "%s", e.msg);
    for (int i = 0; i < ts.n; i++)
        free((char *)ts.t[i].name);
    for (int i = 0; i < ts.n_owned; i++)
        free(ts.owned[i]);

    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "{\"architectures\": [\"%s\"], \"model_type\": \"%s\", \"hidden_size\": %d, \"intermediate_size\": %d, "
            "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, "
            "\"vocab_size\": %d, \"max_position_embeddings\": %d, \"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, "
            "\"tie_word_embeddings\": false, \"hidden_act\": \"silu\", \"bos_token_id\": 1, \"eos_token_id\": 2%s%s}",
            architecture, model_type, DIM, HID, LAYERS, HEADS, KVH, VOCAB, CTX, extra ? ", " : "", extra ? extra : "");
    fclose(f);

    /* tokenizer.bin: <unk> <s> </s> " " a..z ab ba, scores by position */
    snprintf(path, sizeof path, "%s/tokenizer.bin", dir);
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    int32_t max = 5;
    fwrite(&max, 4, 1, f);
    for (int i = 0; i < VOCAB; i++) {
        char piece[8];
        if (i < 3)
            snprintf(piece, sizeof piece, "%s", (const char *[]){ "<unk>", "<s>", "</s>" }[i]);
        else if (i == 3)
            snprintf(piece, sizeof piece, " ");
        else if (i < 30)
            snprintf(piece, sizeof piece, "%c", 'a' + i - 4);
        else
            snprintf(piece, sizeof piece, "%s", i == 30 ? "ab" : "ba");
        float score = -(float)i;
        int32_t len = (int32_t)strlen(piece);
        fwrite(&score, 4, 1, f);
        fwrite(&len, 4, 1, f);
        fwrite(piece, 1, (size_t)len, f);
    }
    fclose(f);
}

static char scratch[64];
static int n_dirs;

static void scratch_up(void) { snprintf(scratch, sizeof scratch, "%s", test_tmpdir()); }
static void scratch_down(void) { test_rmtree(scratch); }

/* A fresh checkpoint directory of the given layout, converted into m. */
static void convert_layout(const weights *w, const char *model_type, const char *architecture, const char *extra,
                           lmq_model *m)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/ck%d", scratch, n_dirs++);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    write_checkpoint(dir, w, model_type, architecture, extra);
    lmq_err e;
    ck_assert_msg(lmq_convert(dir, NULL, m, &e) == LMQ_OK, "%s: %s", model_type, e.msg);
}

/* The conversion's error, for a checkpoint that must be refused; `from` -> `to` edits the
 * config (from: NULL, none). */
static void convert_refused(const weights *w, const char *model_type, const char *architecture, const char *extra,
                            const char *from, const char *to, const char *needle)
{
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/ck%d", scratch, n_dirs++);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    write_checkpoint(dir, w, model_type, architecture, extra);
    if (from) {
        snprintf(path, sizeof path, "%s/config.json", dir);
        char text[2048] = "", *p;
        FILE *f = fopen(path, "r");
        size_t n = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[n] = 0;
        ck_assert_ptr_nonnull(p = strstr(text, from));
        f = fopen(path, "w");
        fprintf(f, "%.*s%s%s", (int)(p - text), text, to, p + strlen(from));
        fclose(f);
    }
    lmq_model m;
    lmq_err e;
    ck_assert_int_ne(lmq_convert(dir, NULL, &m, &e), LMQ_OK);
    ck_assert_msg(strstr(e.msg, needle), "%s", e.msg);
}

static const int32_t TOKENS[NTOK] = { 1, 7, 30, 4, 4, 19, 31, 2 };

/* The runtime's logits [NTOK × VOCAB] for TOKENS. */
static float *run(const lmq_model *m)
{
    rt_model rm;
    rt_state *s;
    lmq_err e;
    ck_assert_msg(rt_model_init(&rm, m, &e) == LMQ_OK, "%s", e.msg);
    rt_exec ex = { .pool = NULL, .isa = rt_isa_best() };
    ck_assert_msg(rt_state_create(&rm, &ex, NTOK, &s, &e) == LMQ_OK, "%s", e.msg);
    float *lg = malloc(NTOK * VOCAB * sizeof *lg);
    ck_assert_msg(rt_forward(s, TOKENS, NTOK, 0, RT_LOGITS_ALL, lg, &e) == LMQ_OK, "%s", e.msg);
    rt_state_free(s);
    rt_model_free(&rm);
    return lg;
}

/* The runtime against the reference: every logit within 1e-4 (fp32 against double). */
static void assert_matches_reference(const float *lg, const weights *w)
{
    static double ref[NTOK * VOCAB];
    reference(w, TOKENS, NTOK, ref);
    double worst = 0, spread = 0;
    for (int i = 0; i < NTOK * VOCAB; i++) {
        worst = fmax(worst, fabs(lg[i] - ref[i]) / (1 + fabs(ref[i])));
        spread = fmax(spread, fabs(ref[i]));
    }
    ck_assert_msg(worst < 1e-4, "runtime differs from the reference by %g (logits up to %g)", worst, spread);
    ck_assert(spread > 0.5); /* logits that say something */
}

static void assert_same_logits(const float *a, const float *b, const char *what)
{
    ck_assert_msg(!memcmp(a, b, NTOK * VOCAB * sizeof *a), "%s: logits differ from the Llama checkpoint's", what);
}

START_TEST(llama_matches_reference)
{
    weights *w = random_weights(11, 0);
    lmq_model m;
    convert_layout(w, "llama", "LlamaForCausalLM", NULL, &m);
    float *lg = run(&m);
    assert_matches_reference(lg, w);
    free(lg);
    lmq_model_free(&m);
    free(w);
}
END_TEST

/* Mistral: Llama's layout; the sliding window caps max_seq (exact for every context lmq then
 * runs); v0.2's "sliding_window": null leaves it. */
START_TEST(mistral_rows)
{
    weights *w = random_weights(12, 0);
    lmq_model llama, mistral;
    convert_layout(w, "llama", "LlamaForCausalLM", NULL, &llama);
    convert_layout(w, "mistral", "MistralForCausalLM", "\"sliding_window\": 8", &mistral);
    ck_assert_int_eq(llama.arch.max_seq, CTX);
    ck_assert_int_eq(mistral.arch.max_seq, 8);
    ck_assert_msg(strstr(mistral.notes, "sliding_window 8"), "%s", mistral.notes);
    float *a = run(&llama), *b = run(&mistral);
    assert_same_logits(a, b, "mistral");
    free(b);
    lmq_model_free(&mistral);
    convert_layout(w, "mistral", "MistralForCausalLM", "\"sliding_window\": null", &mistral);
    ck_assert_int_eq(mistral.arch.max_seq, CTX);
    free(a);
    lmq_model_free(&mistral);
    lmq_model_free(&llama);
    free(w);
}
END_TEST

/* Qwen2: q/k/v biases. Zero biases give the Llama checkpoint's logits; others match the
 * reference with the biases, and change the logits. The sliding window is off unless
 * use_sliding_window says so. */
START_TEST(qwen2_rows)
{
    weights *w = random_weights(13, 0);
    lmq_model llama, qwen;
    convert_layout(w, "llama", "LlamaForCausalLM", NULL, &llama);
    convert_layout(w, "qwen2", "Qwen2ForCausalLM", "\"use_sliding_window\": false, \"sliding_window\": 4", &qwen);
    ck_assert_ptr_nonnull(lmq_model_find(&qwen, "blk.1.attn_k.bias"));
    ck_assert_int_eq(qwen.arch.max_seq, CTX);
    float *a = run(&llama), *b = run(&qwen);
    assert_same_logits(a, b, "qwen2 with zero biases");
    free(b);
    lmq_model_free(&qwen);

    weights *wb = random_weights(13, 1);
    convert_layout(wb, "qwen2", "Qwen2ForCausalLM", "\"use_sliding_window\": true, \"sliding_window\": 8", &qwen);
    ck_assert_int_eq(qwen.arch.max_seq, 8);
    b = run(&qwen);
    assert_matches_reference(b, wb);
    double moved = 0;
    for (int i = 0; i < NTOK * VOCAB; i++)
        moved = fmax(moved, fabs(a[i] - b[i]));
    ck_assert_msg(moved > 0.1, "biases moved the logits by only %g", moved);
    free(a);
    free(b);
    lmq_model_free(&qwen);
    lmq_model_free(&llama);
    free(w);
    free(wb);
}
END_TEST

/* Phi-3: qkv_proj and gate_up_proj are split at convert into exactly Llama's tensors. */
START_TEST(phi3_rows)
{
    weights *w = random_weights(14, 0);
    lmq_model llama, phi;
    convert_layout(w, "llama", "LlamaForCausalLM", NULL, &llama);
    convert_layout(w, "phi3", "Phi3ForCausalLM", "\"sliding_window\": 2047", &phi);
    ck_assert_int_eq(phi.n_tensors, llama.n_tensors);
    for (int i = 0; i < llama.n_tensors; i++) {
        const lmq_tensor *x = &llama.tensors[i], *y = lmq_model_find(&phi, x->name);
        ck_assert_msg(y != NULL, "phi3 lacks %s", x->name);
        ck_assert(y->ndim == x->ndim && !memcmp(y->shape, x->shape, sizeof x->shape));
        ck_assert_msg(!memcmp(x->data, y->data, (size_t)lmq_tensor_numel(x) * sizeof(float)), "%s differs", x->name);
    }
    ck_assert_int_eq(phi.arch.max_seq, CTX); /* 2047 is past max_position_embeddings */
    float *a = run(&llama), *b = run(&phi);
    assert_same_logits(a, b, "phi3");
    free(a);
    free(b);
    lmq_model_free(&phi);
    lmq_model_free(&llama);
    free(w);
}
END_TEST

START_TEST(refusals)
{
    weights *w = random_weights(15, 0);
    /* Phi-3 variants lmq does not run */
    convert_refused(w, "phi3", "Phi3ForCausalLM", "\"partial_rotary_factor\": 0.5", NULL, NULL,
                    "partial_rotary_factor");
    convert_refused(w, "phi3", "Phi3ForCausalLM", "\"rope_scaling\": {\"type\": \"longrope\"}", NULL, NULL,
                    "rope_scaling");
    /* fused rows that do not add up: the tensor has q|k|v rows for 2 kv heads, the config says 4 */
    convert_refused(w, "phi3", "Phi3ForCausalLM", NULL, "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 4",
                    "qkv_proj.weight: 32 rows, but the q, k, v it holds have 48");
    /* a family name without its architecture, and one lmq does not know */
    convert_refused(w, "qwen2", "LlamaForCausalLM", NULL, NULL, NULL, "not supported for model_type qwen2");
    convert_refused(w, "gemma", "GemmaForCausalLM", NULL, NULL, NULL, "mistral / MistralForCausalLM");
    free(w);
}
END_TEST

/* A Llama model with only some of the q/k/v biases is refused (all three or none). */
START_TEST(partial_biases)
{
    weights *w = random_weights(16, 1);
    lmq_model m;
    convert_layout(w, "qwen2", "Qwen2ForCausalLM", NULL, &m);
    lmq_tensor *t = lmq_model_find(&m, "blk.0.attn_v.bias");
    ck_assert_ptr_nonnull(t);
    snprintf(t->name, sizeof t->name, "blk.0.attn_v.biasx");
    lmq_err e;
    ck_assert_int_eq(lmq_model_validate(&m, &e), LMQ_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "blk.0.attn_v.bias: missing"), "%s", e.msg);
    snprintf(t->name, sizeof t->name, "blk.0.attn_v.bias");
    t->shape[0] = 1;
    ck_assert_int_eq(lmq_model_validate(&m, &e), LMQ_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "blk.0.attn_v.bias: shape"), "%s", e.msg);
    lmq_model_free(&m);
    free(w);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("arch_rows");
    TCase *tc = tcase_create("all");
    tcase_add_checked_fixture(tc, scratch_up, scratch_down);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, llama_matches_reference);
    tcase_add_test(tc, mistral_rows);
    tcase_add_test(tc, qwen2_rows);
    tcase_add_test(tc, phi3_rows);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, partial_biases);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
