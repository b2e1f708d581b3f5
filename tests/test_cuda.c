/* The CUDA backend (the plugin runtime/cuda/cuda.h describes, built only with nvcc): that it
 * loads, its kernel table, checked on the host; where a device is present, every linear kernel
 * against the CPU's portable reference (rt_linear on the scalar kernel set) on ragged shapes
 * (W8A8's bit for bit), the device's forward pass against the CPU's (every op composed: fused and split q/k/v,
 * interleaved and half rope, GQA, windows of ragged lengths continued from the cache, batched
 * decoding against one sequence at a time), and protocol P1 on both fixture models as fp32,
 * int8, int4 and W8A8 artefacts: PPL within 0.1 % of the CPU's, top-1 agreement >= 99.5 %. Without
 * a device the suite runs the host checks, prints "skipped: no CUDA device" with the number of
 * comparisons it did not make, and exits 77: skipped, not passed (make check reports it as
 * such). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/convert.h"
#include "formats/artefact.h"
#include "quantize/quantize.h"
#include "runtime/artefact.h"
#include "runtime/cuda/cuda.h"
#include "schemes/scheme.h"
#include "tokenizer/stream.h"
#include "verify/metrics.h"
#include "tests/testutil.h"

static const rtc_api *cu; /* the plugin's table, opened by main */

static rt_weight weight(lmq_qparams q, int out, int in, const uint8_t *data, const float *b)
{
    rt_weight W = { .name = "blk.3.ffn_up.weight", .q = q, .data = data, .b = b, .out = out, .in = in };
    lmq_err e;
    ck_assert_msg(lmq_layout_of(&q, out, in, &W.L, &e) == LMQ_OK, "%s", e.msg);
    return W;
}

/* What the table takes and refuses, by encoding; a refusal names the tensor and the reason. */
START_TEST(table)
{
    const rt_backend *cuda, *cpu, *none;
    lmq_err e;
    ck_assert_msg(rt_backend_get("cuda", &cuda, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(rt_backend_get("cpu", &cpu, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(rt_backend_get("tpu", &none, &e), LMQ_E_ARG);
    ck_assert_ptr_eq(cuda, &cu->backend);
    const struct {
        lmq_qparams q;
        int act, ok; /* act: 0 none, 1 int8 per token, 2 per tensor */
        const char *why;
    } rows[] = {
        { { LMQ_T_F32, LMQ_GRAN_NONE, 0, 0 }, 0, 1, NULL },
        { { LMQ_T_F16, LMQ_GRAN_NONE, 0, 0 }, 0, 1, NULL },
        { { LMQ_T_BF16, LMQ_GRAN_NONE, 0, 0 }, 0, 1, NULL },
        { { LMQ_T_INT8, LMQ_GRAN_TENSOR, 0, 0 }, 0, 1, NULL },
        { { LMQ_T_INT8, LMQ_GRAN_CHANNEL, 0, 0 }, 0, 1, NULL },
        { { LMQ_T_INT4, LMQ_GRAN_GROUP, 0, 128 }, 0, 1, NULL },
        { { LMQ_T_INT4, LMQ_GRAN_GROUP, 1, 128 }, 0, 1, NULL },
        { { LMQ_T_INT2, LMQ_GRAN_GROUP, 1, 32 }, 0, 1, NULL },
        { { LMQ_T_INT8, LMQ_GRAN_CHANNEL, 1, 0 }, 1, 0, "int8 asymmetric with activation quantisation" },
        { { LMQ_T_INT8, LMQ_GRAN_CHANNEL, 0, 0 }, 1, 1, NULL }, /* W8A8 per token */
        { { LMQ_T_INT8, LMQ_GRAN_CHANNEL, 0, 0 }, 2, 0, "activation quantisation per tensor" },
        { { LMQ_T_INT8, LMQ_GRAN_GROUP, 0, 128 }, 1, 0, "int8 per group: no CUDA kernel for this granularity" },
        { { LMQ_T_INT4, LMQ_GRAN_GROUP, 0, 128 }, 1, 0, "int4 with activation quantisation" },
        { { LMQ_T_INT3, LMQ_GRAN_GROUP, 0, 32 }, 0, 1, NULL },
        { { LMQ_T_F8_E4M3, LMQ_GRAN_CHANNEL, 0, 0 }, 0, 0, "no CUDA kernel for this encoding" },
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        rt_weight W = weight(rows[i].q, 4, 64, NULL, NULL);
        W.act = (lmq_act){ .scheme = rows[i].act ? LMQ_ACT_INT8 : LMQ_ACT_NONE,
                           .gran = rows[i].act == 2 ? LMQ_ACT_TENSOR : LMQ_ACT_TOKEN };
        char why[256] = "";
        ck_assert_int_eq(cuda->supports(&W, why, sizeof why), rows[i].ok);
        if (!rows[i].ok) {
            ck_assert_msg(strstr(why, "blk.3.ffn_up.weight") && strstr(why, rows[i].why), "row %zu: %s", i, why);
        }
        ck_assert_int_eq(cpu->supports(&W, why, sizeof why), 1);
    }
}
END_TEST

/* Opening: a context where there is a device, "no CUDA device" where there is none. */
START_TEST(open_device)
{
    rtc_ctx *c;
    lmq_err e = { 0 };
    const lmq_code code = cu->open(0, &c, &e);
    if (cu->backend.devices() == 0) {
        ck_assert_int_eq(code, LMQ_E_UNSUPPORTED);
        ck_assert_str_eq(e.msg, "no CUDA device");
        ck_assert_ptr_null(c);
    } else {
        ck_assert_msg(code == LMQ_OK, "%s", e.msg);
        char desc[256];
        cu->describe(c, desc, sizeof desc);
        ck_assert_msg(strstr(desc, "sm_"), "%s", desc);
        cu->close(c);
    }
}
END_TEST

/* ---- the kernels against the CPU --------------------------------------------------------- */

/* a8: W8A8, the input int8 per token: integer sums, so the device's results are the CPU's bit
 * for bit (the GEMV, steps of it beyond RTC_GEMV_MAX_ROWS rows, and cuBLAS's int8 GEMM where rows
 * are multiples of 4 bytes). */
static const struct {
    lmq_qparams q;
    int a8;
} encodings[] = {
    { { LMQ_T_INT8, LMQ_GRAN_TENSOR, 0, 0 }, 0 },  { { LMQ_T_INT8, LMQ_GRAN_CHANNEL, 0, 0 }, 0 },
    { { LMQ_T_INT8, LMQ_GRAN_GROUP, 0, 16 }, 0 },  { { LMQ_T_INT8, LMQ_GRAN_GROUP, 0, 128 }, 0 },
    { { LMQ_T_INT4, LMQ_GRAN_TENSOR, 0, 0 }, 0 },  { { LMQ_T_INT4, LMQ_GRAN_CHANNEL, 0, 0 }, 0 },
    { { LMQ_T_INT4, LMQ_GRAN_GROUP, 0, 16 }, 0 },  { { LMQ_T_INT4, LMQ_GRAN_GROUP, 0, 32 }, 0 },
    { { LMQ_T_INT4, LMQ_GRAN_GROUP, 0, 128 }, 0 }, { { LMQ_T_F32, LMQ_GRAN_NONE, 0, 0 }, 0 },
    { { LMQ_T_F16, LMQ_GRAN_NONE, 0, 0 }, 0 },     { { LMQ_T_BF16, LMQ_GRAN_NONE, 0, 0 }, 0 },
    { { LMQ_T_INT8, LMQ_GRAN_CHANNEL, 0, 0 }, 1 },
    { { LMQ_T_INT8, LMQ_GRAN_GROUP, 1, 128 }, 0 }, { { LMQ_T_INT4, LMQ_GRAN_GROUP, 1, 32 }, 0 },
    { { LMQ_T_INT3, LMQ_GRAN_GROUP, 0, 32 }, 0 },  { { LMQ_T_INT3, LMQ_GRAN_CHANNEL, 0, 0 }, 0 },
    { { LMQ_T_INT2, LMQ_GRAN_GROUP, 1, 32 }, 0 },
};
#define N_ENC (sizeof encodings / sizeof encodings[0])

/* [out × in]: a single row and column multiples of 16 and 32 (16-byte loads) and odd ones (a row
 * starting inside a byte for int4; the per-code path), with 1 to 3 activation rows (the GEMV)
 * and more than RTC_GEMV_MAX_ROWS (integer prefill: dequantised blocks and cuBLAS). */
static const struct {
    int out, in, n;
} shapes[] = { { 1, 16, 1 },   { 7, 50, 3 },  { 33, 129, 1 }, { 130, 256, 3 }, { 9, 4096, 1 },
               { 5, 4100, 3 }, { 64, 512, 2 }, { 12, 160, RTC_GEMV_MAX_ROWS }, { 6, 33, 5 },
               { 40, 96, 17 }, { 3, 51, RTC_GEMV_MAX_ROWS + 1 } };
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

/* Where the kernels may differ from the CPU, relative to Σ|x·w|: their summation order (1e-4
 * bounds it with room), and where x is rounded to the weights' format (fp16 2^-11, bf16 2^-8 a
 * product) or, for integer prefill, x and the dequantised weights both to fp16. */
static double tolerance(lmq_dtype d, int n)
{
    if (d == LMQ_T_F16)
        return 0x1p-10;
    if (d == LMQ_T_BF16)
        return 0x1p-7;
    return d != LMQ_T_F32 && n > RTC_GEMV_MAX_ROWS ? 0x1p-9 : 1e-4; /* integer prefill */
}

/* y[n × W.out] = x[n × W.in]·Wᵀ (+ b) on the device: W uploaded (at least its stored bytes), x
 * copied there and the product back. */
static void device_linear(const rt_weight *W, const float *x, int n, float *y)
{
    lmq_err e;
    rtc_ctx *c;
    rtc_weight *dw;
    void *dx, *dy;
    const size_t nx = (size_t)n * W->in * sizeof *x, ny = (size_t)n * W->out * sizeof *y;
    ck_assert_msg(cu->open(0, &c, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(cu->upload(c, W, &dw, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_uint_ge(cu->weight_bytes(dw), W->L.bytes);
    ck_assert_msg(cu->alloc(c, nx, &dx, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(cu->alloc(c, ny, &dy, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(cu->to_device(c, dx, x, nx, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(cu->linear(c, dx, n, dw, dy, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(cu->to_host(c, y, dy, ny, &e) == LMQ_OK, "%s", e.msg);
    cu->free(dx);
    cu->free(dy);
    cu->weight_free(dw);
    cu->close(c);
}

START_TEST(kernels)
{
    const lmq_qparams q = encodings[_i / N_SHAPES].q;
    const int a8 = encodings[_i / N_SHAPES].a8;
    const int out = shapes[_i % N_SHAPES].out, in = shapes[_i % N_SHAPES].in, n = shapes[_i % N_SHAPES].n;
    const int with_bias = _i % 2;
    char desc[64];
    q_describe(&q, desc, sizeof desc);
    uint64_t seed = 1000 + (uint64_t)_i;
    float *w = malloc((size_t)out * in * sizeof *w), *wd = malloc((size_t)out * in * sizeof *wd);
    float *x = malloc((size_t)n * in * sizeof *x), *b = malloc((size_t)out * sizeof *b);
    float *want = malloc((size_t)n * out * sizeof *want), *got = malloc((size_t)n * out * sizeof *got);
    for (int i = 0; i < out * in; i++)
        w[i] = (float)(0.05 * test_gauss(&seed));
    for (int i = 0; i < n * in; i++) /* row 1 zero: a W8A8 scale of 0 */
        x[i] = i / in == 1 ? 0.0f : (float)test_gauss(&seed);
    for (int i = 0; i < out; i++)
        b[i] = (float)(0.1 * test_gauss(&seed));
    lmq_err e;
    lmq_layout L;
    ck_assert_msg(lmq_layout_of(&q, out, in, &L, &e) == LMQ_OK, "%s", e.msg);
    uint8_t *data = malloc(L.bytes);
    ck_assert_msg(q_quantize(&q, w, out, in, data, L.bytes, NULL, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(q_dequantize(&q, data, L.bytes, out, in, wd, NULL, &e) == LMQ_OK, "%s", e.msg);
    rt_weight W = weight(q, out, in, data, with_bias ? b : NULL);
    if (a8)
        W.act = (lmq_act){ .scheme = LMQ_ACT_INT8, .gran = LMQ_ACT_TOKEN };

    const rt_exec cpu = { .isa = &rt_kernels_scalar };
    ck_assert_msg(rt_linear(&cpu, x, n, &W, want, &e) == LMQ_OK, "%s", e.msg);

    device_linear(&W, x, n, got);

    const double tol = tolerance((lmq_dtype)q.dtype, n);
    for (int t = 0; t < n; t++)
        for (int r = 0; r < out; r++) {
            double mag = 0;
            for (int k = 0; k < in; k++)
                mag += fabs((double)x[(size_t)t * in + k] * wd[(size_t)r * in + k]);
            const double d = fabs((double)got[(size_t)t * out + r] - want[(size_t)t * out + r]);
            ck_assert_msg(a8 ? d == 0 : d <= tol * mag + 1e-6, "%s%s [%d × %d] n %d: y[%d, %d] = %.9g, CPU %.9g (|Σ x·w| ≤ "
                          "%g)", desc, a8 ? " a8" : "", out, in, n, t, r, got[(size_t)t * out + r],
                          want[(size_t)t * out + r], mag);
        }
    free(w), free(wd), free(x), free(b), free(want), free(got), free(data);
}
END_TEST

/* ---- the forward pass against the CPU ---------------------------------------------------- */


/* A model on both devices: the fixture rel converted (split: separate q, k, v), quantised by
 * recipe when given (loaded from the artefact as verify does), and a state on each. */
typedef struct {
    lmq_model m;
    rt_model rm;
    lmq_pool *pool;
    rt_state *cpu, *dev;
} both;

static void open_both(both *b, const char *rel, int split, const char *recipe, int max_tokens, int seqs)
{
    lmq_err e;
    const lmq_convert_opts o = { .split_qkv = split };
    ck_assert_msg(lmq_convert(fixture(rel), &o, &b->m, &e) == LMQ_OK, "%s: %s", rel, e.msg);
    if (recipe) {
        const char *dir = test_tmpdir();
        char in[512], out[512];
        snprintf(in, sizeof in, "%s/fp32.lmq", dir);
        snprintf(out, sizeof out, "%s/q.lmq", dir);
        ck_assert_msg(lmq_container_write_model(in, &b->m, NULL, &e) == LMQ_OK, "%s", e.msg);
        lmq_model_free(&b->m);
        ck_assert_msg(q_quantize_file(in, recipe, out, NULL, &e) == LMQ_OK, "%s: %s", recipe, e.msg);
        ck_assert_msg(rt_load_artefact(out, &b->m, &e) == LMQ_OK, "%s", e.msg);
        test_rmtree(dir); /* the mapping stays valid */
    }
    ck_assert_msg(rt_model_init(&b->rm, &b->m, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(lmq_pool_create(0, &b->pool, &e) == LMQ_OK, "%s", e.msg);
    const rt_exec cpu = { .pool = b->pool, .isa = rt_isa_best() }, dev = { .isa = rt_isa_best(), .backend = &cu->backend };
    ck_assert_msg(rt_state_create(&b->rm, &cpu, max_tokens, &b->cpu, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(rt_state_create_seqs(&b->rm, &dev, max_tokens, seqs, &b->dev, &e) == LMQ_OK, "%s", e.msg);
}

static void close_both(both *b)
{
    rt_state_free(b->cpu);
    rt_state_free(b->dev);
    lmq_pool_free(b->pool);
    rt_model_free(&b->rm);
    lmq_model_free(&b->m);
}

static int32_t *tokens_for(int n, int vocab, uint64_t seed)
{
    int32_t *t = malloc((size_t)n * sizeof *t);
    for (int i = 0; i < n; i++)
        t[i] = (int32_t)(test_uniform(&seed) * vocab);
    return t;
}

/* max |got − want| over n logits, against the bound tol·(1 + max |want|) (fp32 summation order). */
static void check_logits(const float *want, const float *got, size_t n, double tol, const char *what)
{
    double worst = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)got[i] - want[i]));
        scale = fmax(scale, fabs((double)want[i]));
    }
    ck_assert_msg(worst <= tol * (1 + scale), "%s: logits differ by %g (largest %g)", what, worst, scale);
}

static const struct {
    const char *rel;
    int split;
} models[] = { { STORIES, 0 }, { "stories260K-hf", 0 }, { SOTU, 0 }, { SOTU, 1 } };
#define N_MODELS (int)(sizeof models / sizeof models[0])

/* Windows of ragged lengths from an empty cache and continued from it (every logit), against
 * the CPU: each op of the pass composed, on interleaved and half rope, GQA (stories260K: 8
 * heads, 4 kv heads), fused and split q/k/v with biases and learned positions (GPT-2). */
START_TEST(forward_matches_cpu)
{
    both b;
    open_both(&b, models[_i].rel, models[_i].split, NULL, 128, 1);
    const int V = b.m.arch.vocab_size;
    const struct { int n, pos0; } calls[] = { { 1, 0 }, { 7, 0 }, { 33, 0 }, { 11, 33 }, { 1, 44 }, { 100, 0 } };
    int32_t *t = tokens_for(128, V, 7 + (uint64_t)_i);
    float *want = malloc((size_t)100 * V * sizeof *want), *got = malloc((size_t)100 * V * sizeof *got);
    lmq_err e;
    for (size_t k = 0; k < sizeof calls / sizeof calls[0]; k++) {
        const int n = calls[k].n, p = calls[k].pos0;
        ck_assert_msg(rt_forward(b.cpu, t + p, n, p, RT_LOGITS_ALL, want, &e) == LMQ_OK, "%s", e.msg);
        ck_assert_msg(rt_forward(b.dev, t + p, n, p, RT_LOGITS_ALL, got, &e) == LMQ_OK, "%s", e.msg);
        char what[128];
        snprintf(what, sizeof what, "%s%s: %d tokens at %d", models[_i].rel, models[_i].split ? " (split qkv)" : "",
                 n, p);
        check_logits(want, got, (size_t)n * V, 1e-4, what);
    }
    free(t), free(want), free(got);
    close_both(&b);
}
END_TEST

/* Batched decoding: sequences of ragged prompt lengths, then steps of one token each for all
 * of them in one pass, against each sequence decoded alone on the CPU. */
START_TEST(batch_matches_cpu)
{
    enum { SEQS = 5, STEPS = 4 };
    both b;
    open_both(&b, models[_i].rel, models[_i].split, NULL, 64, SEQS);
    const int V = b.m.arch.vocab_size, len[SEQS] = { 1, 9, 17, 30, 2 };
    int32_t *t = tokens_for(SEQS * 64, V, 100 + (uint64_t)_i);
    float *want = malloc((size_t)V * sizeof *want), *got = malloc((size_t)SEQS * V * sizeof *got);
    lmq_err e;
    for (int q = 0; q < SEQS; q++)
        ck_assert_msg(rt_forward_seq(b.dev, q, t + q * 64, len[q], 0, RT_LOGITS_NONE, NULL, &e) == LMQ_OK, "%s",
                      e.msg);
    for (int g = 0; g < STEPS; g++) {
        int32_t next[SEQS];
        for (int q = 0; q < SEQS; q++)
            next[q] = t[q * 64 + len[q] + g];
        ck_assert_msg(rt_decode_batch(b.dev, SEQS, next, got, &e) == LMQ_OK, "%s", e.msg);
        for (int q = 0; q < SEQS; q++) { /* the CPU's state holds one sequence: replay it */
            ck_assert_msg(rt_forward(b.cpu, t + q * 64, len[q] + g + 1, 0, RT_LOGITS_LAST, want, &e) == LMQ_OK, "%s",
                          e.msg);
            char what[128];
            snprintf(what, sizeof what, "%s: sequence %d, step %d", models[_i].rel, q, g);
            check_logits(want, got + (size_t)q * V, (size_t)V, 1e-4, what);
        }
    }
    /* more sequences than the state holds, a token outside the vocabulary */
    int32_t bad[SEQS + 1] = { 0 };
    ck_assert_int_eq(rt_decode_batch(b.dev, SEQS + 1, bad, got, &e), LMQ_E_ARG);
    bad[2] = V;
    ck_assert_int_eq(rt_decode_batch(b.dev, SEQS, bad, got, &e), LMQ_E_ARG);
    free(t), free(want), free(got);
    close_both(&b);
}
END_TEST

/* Protocol P1 on the device against the CPU: fp32, int8 (per channel), int4 (w4a16: g128,
 * an int8 classifier and an fp16 embedding) and W8A8 artefacts of both fixture models. */
static const struct {
    const char *rel, *text;
} p1_models[] = { { SOTU, "text/sotu-eval.txt" }, { STORIES, "text/tinystories-valid.txt" } };
static const char *const p1_recipes[] = { NULL, "recipes/int8-channel.yaml", "recipes/w4a16.yaml", "recipes/w8a8.yaml" };
#define N_RECIPES (int)(sizeof p1_recipes / sizeof p1_recipes[0])
#define N_P1 (int)(sizeof p1_models / sizeof p1_models[0]) * N_RECIPES

START_TEST(p1_matches_cpu)
{
    const int mi = _i / N_RECIPES, ri = _i % N_RECIPES;
    both b;
    open_both(&b, p1_models[mi].rel, 0, p1_recipes[ri], 256, 1);
    int32_t *ids;
    size_t n;
    int docs;
    uint64_t sum;
    lmq_err e;
    ck_assert_msg(tok_stream_read(&b.m, fixture(p1_models[mi].text), &ids, &n, &docs, &sum, &e) == LMQ_OK, "%s", e.msg);
    const size_t most = 16 * 256; /* 16 windows: 4080 positions, top-1 >= 99.5 % allows 20 disagreements */
    vf_opts o = { .ctx = 256 };
    vf_result cpu, dev;
    ck_assert_msg(vf_score(b.cpu, &b.dev, 1, ids, (int64_t)(n < most ? n : most), &o, &cpu, &dev, &e) == LMQ_OK, "%s",
                  e.msg);
    const double dppl = fabs(dev.ppl / cpu.ppl - 1);
    ck_assert_msg(dppl <= 1e-3 && dev.top1 >= 0.995, "%s %s: PPL %.6f on the device, %.6f on the CPU (%.4f %%), top-1 "
                  "agreement %.4f", p1_models[mi].rel, p1_recipes[ri] ? p1_recipes[ri] : "fp32", dev.ppl, cpu.ppl,
                  100 * dppl, dev.top1);
    free(ids);
    close_both(&b);
}
END_TEST

int main(void)
{
    lmq_err e;
    if (!(cu = rt_cuda(&e))) {
        fprintf(stderr, "test_cuda: the CUDA build's plugin does not load: %s\n", e.msg);
        return 1;
    }
    const int devices = cu->backend.devices();
    Suite *s = suite_create("cuda");
    TCase *host = tcase_create("table");
    tcase_add_test(host, table);
    tcase_add_test(host, open_device);
    suite_add_tcase(s, host);
    if (devices) {
        TCase *dev = tcase_create("kernels");
        tcase_set_timeout(dev, 120);
        tcase_add_loop_test(dev, kernels, 0, (int)(N_ENC * N_SHAPES));
        suite_add_tcase(s, dev);
        TCase *fw = tcase_create("forward");
        tcase_set_timeout(fw, 600);
        tcase_add_loop_test(fw, forward_matches_cpu, 0, N_MODELS);
        tcase_add_loop_test(fw, batch_matches_cpu, 0, N_MODELS);
        tcase_add_loop_test(fw, p1_matches_cpu, 0, N_P1);
        suite_add_tcase(s, fw);
    }
    /* In one process: a CUDA context does not survive Check's fork, and main already made one. */
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    const int rc = srunner_ntests_failed(sr) ? 1 : 0;
    srunner_free(sr);
    if (rc || devices)
        return rc;
    printf("test_cuda: skipped: no CUDA device (%d kernel comparisons and %d forward-pass comparisons against the "
           "CPU not run; only the host-side checks ran)\n",
           (int)(N_ENC * N_SHAPES), 2 * N_MODELS + N_P1);
    return 77;
}
