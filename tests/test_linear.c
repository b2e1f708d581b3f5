/* runtime/linear: rt_linear over every encoding the scheme table stores, on every kernel set this
 * CPU has, on ragged shapes (rows and columns that are not multiples of a group or a vector; one
 * row; one column). Independent values: the scheme table's own dequantiser and a double-precision
 * product over its output.
 *   decoding   with one-hot activations each output is one weight: it must equal q_dequantize's
 *              value bit for bit, through the fused path (few rows) and the staged one (many),
 *              and so must rt_weight_rows (embedding lookups);
 *   products   every output within 1e-5 of the double product, relative to Σ|x·w|;
 *   invariance a row's outputs are the same bits alone, inside a batch, and on 1, 2 or 3 threads;
 *   activations per token and per tensor: the product over an independently quantised x;
 *   fp8        each of both formats' 256 codes decodes to decode(code)·scale bit for bit, and the
 *              fused product is the same kernel set's fp32 product over those weights, bit for bit;
 *   a8 block   int8 activations per block (Q8_0 against 32-blocks and groups, Q8_K against the
 *              256-blocks) against every weight kind the integer product takes: every kernel
 *              set's integer product bit for bit the scalar set's, near the double evaluation of
 *              its definition, independent of threads and batches; rows of no whole activation
 *              block refused; other weights see the reference's x'. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cpu.h"
#include "common/fp.h"
#include "runtime/linear.h"
#include "schemes/fp8.h"
#include "tests/testutil.h"

typedef struct {
    const char *name;
    lmq_qparams q;
} enc;

#define Q(dt, gr, as, g) { .dtype = LMQ_T_##dt, .gran = LMQ_GRAN_##gr, .asym = as, .group = g }
static const enc ENCODINGS[] = {
    { "fp32", Q(F32, NONE, 0, 0) },           { "fp16", Q(F16, NONE, 0, 0) },
    { "bf16", Q(BF16, NONE, 0, 0) },          { "fp8 e4m3 channel", Q(F8_E4M3, CHANNEL, 0, 0) },
    { "int8 tensor", Q(INT8, TENSOR, 0, 0) }, { "int8 channel", Q(INT8, CHANNEL, 0, 0) },
    { "int8 g32", Q(INT8, GROUP, 0, 32) },    { "int8 g128 asym", Q(INT8, GROUP, 1, 128) },
    { "int8 g16", Q(INT8, GROUP, 0, 16) },    { "int4 channel", Q(INT4, CHANNEL, 0, 0) },
    { "int4 g32", Q(INT4, GROUP, 0, 32) },    { "int4 g32 asym", Q(INT4, GROUP, 1, 32) },
    { "int4 g64", Q(INT4, GROUP, 0, 64) },    { "int4 g128", Q(INT4, GROUP, 0, 128) },
    { "int4 g128 asym", Q(INT4, GROUP, 1, 128) },
    { "int4 tensor asym", Q(INT4, TENSOR, 1, 0) }, { "int3 g32", Q(INT3, GROUP, 0, 32) },
    { "int2 g32 asym", Q(INT2, GROUP, 1, 32) }, { "int8 channel asym", Q(INT8, CHANNEL, 1, 0) },
    /* fp8 (19 on, with row 3): fused on the vector kernel sets */
    { "fp8 e4m3 tensor", Q(F8_E4M3, TENSOR, 0, 0) }, { "fp8 e4m3 g32", Q(F8_E4M3, GROUP, 0, 32) },
    { "fp8 e4m3 unscaled", Q(F8_E4M3, NONE, 0, 0) }, { "fp8 e5m2 channel", Q(F8_E5M2, CHANNEL, 0, 0) },
    { "fp8 e5m2 tensor", Q(F8_E5M2, TENSOR, 0, 0) }, { "fp8 e5m2 g64", Q(F8_E5M2, GROUP, 0, 64) },
    /* GGUF's blocks (25 on): fused on every kernel set, the scalar one the reference */
    { "q8_0", Q(Q8_0, NONE, 0, 0) },          { "q4_0", Q(Q4_0, NONE, 0, 0) },
    { "q4_1", Q(Q4_1, NONE, 0, 0) },          { "q5_0", Q(Q5_0, NONE, 0, 0) },
    { "q5_1", Q(Q5_1, NONE, 0, 0) },          { "q2_k", Q(Q2_K, NONE, 0, 0) },
    { "q3_k", Q(Q3_K, NONE, 0, 0) },          { "q4_k", Q(Q4_K, NONE, 0, 0) },
    { "q5_k", Q(Q5_K, NONE, 0, 0) },          { "q6_k", Q(Q6_K, NONE, 0, 0) },
    { "iq4_nl", Q(IQ4_NL, NONE, 0, 0) },      { "iq4_xs", Q(IQ4_XS, NONE, 0, 0) },
};
#define FIRST_BLOCK 25
#define N_ENC (int)(sizeof ENCODINGS / sizeof ENCODINGS[0])

/* out × in: a single row, a single column, tails of every kind, shapes the fused kernels take (in
 * blocks of 32, 64 or 128 columns), rows of more than 16 groups (33 of 32, 17 of 128: AVX-512
 * reads group parameters 16 at a time), and rows of several 256-blocks (GGUF's K-types) on row
 * counts that are no multiple of a tile or of a task's 64. A block encoding takes the shapes whose
 * rows are whole blocks. */
static const int SHAPES[][2] = { { 1, 1 },    { 1, 37 },   { 5, 64 },   { 7, 96 },    { 67, 160 },  { 3, 172 },
                                 { 130, 256 }, { 9, 288 }, { 1, 384 }, { 5, 1056 }, { 4, 1100 }, { 6, 2176 },
                                 { 7, 768 },   { 67, 512 } };
#define N_SHAPES (int)(sizeof SHAPES / sizeof SHAPES[0])

/* Whether e stores rows of `in` columns. */
static int fits(const enc *e, int in)
{
    const unsigned block = lmq_encoding_of(e->q.dtype)->block;
    return !block || in % (int)block == 0;
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static float uniform(void) /* [-1, 1) */
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 4503599627370496.0 - 1.0);
}

/* A stored tensor and its view: weights with an outlier row, a wide spread of magnitudes, and
 * every fourth row far from zero with a tiny spread (asymmetric zero codes beyond ±2^13: int8 then
 * takes the AVX-512 step that subtracts before scaling). */
typedef struct {
    lmq_tensor t;
    uint8_t *bytes;
    float *deq, *bias;
    rt_weight W;
} stored;

static void make(stored *s, const enc *e, int out, int in)
{
    lmq_err err;
    memset(s, 0, sizeof *s);
    float *w = malloc((size_t)out * in * sizeof *w);
    for (int i = 0; i < out * in; i++) {
        w[i] = uniform() * (i % 11 == 0 ? 3.0f : 0.2f) * (i / in == out / 2 ? 8.0f : 1.0f);
        if (i / in % 4 == 3)
            w[i] = 3.7f + w[i] * 1e-6f;
    }
    lmq_layout L;
    ck_assert_msg(lmq_layout_of(&e->q, out, in, &L, &err) == LMQ_OK, "%s: %s", e->name, err.msg);
    s->bytes = malloc(L.bytes);
    ck_assert_msg(q_quantize(&e->q, w, out, in, s->bytes, L.bytes, NULL, &err) == LMQ_OK, "%s: %s", e->name, err.msg);
    s->deq = malloc((size_t)out * in * sizeof *s->deq);
    ck_assert(q_dequantize(&e->q, s->bytes, L.bytes, out, in, s->deq, NULL, &err) == LMQ_OK);
    s->bias = malloc((size_t)out * sizeof *s->bias);
    for (int j = 0; j < out; j++)
        s->bias[j] = uniform();
    snprintf(s->t.name, sizeof s->t.name, "test.%s", e->name);
    s->t.ndim = 2;
    s->t.shape[0] = out;
    s->t.shape[1] = in;
    s->t.q = e->q;
    s->t.raw = s->bytes;
    s->t.raw_size = L.bytes;
    ck_assert_msg(rt_weight_of(&s->t, NULL, &s->W, &err) == LMQ_OK, "%s: %s", e->name, err.msg);
    ck_assert_msg(s->W.wide_zeros || !e->q.asym || e->q.gran == LMQ_GRAN_TENSOR || out < 4,
                  "%s [%d × %d]: no wide zero codes", e->name, out, in);
    free(w);
}

static void unmake(stored *s)
{
    free(s->bytes);
    free(s->deq);
    free(s->bias);
}

static lmq_pool *pools[4]; /* 1, 2 and 3 threads, made in each test's process */

static void pools_up(void)
{
    lmq_err err;
    for (int t = 1; t <= 3; t++)
        ck_assert_msg(lmq_pool_create(t, &pools[t], &err) == LMQ_OK, "%s", err.msg);
}

static void pools_down(void)
{
    for (int t = 1; t <= 3; t++)
        lmq_pool_free(pools[t]);
}

static void linear(const rt_kernels *isa, int threads, const float *x, int n, const rt_weight *W, float *y)
{
    lmq_err err;
    rt_exec ex = { .pool = pools[threads], .isa = isa };
    ck_assert_msg(rt_linear(&ex, x, n, W, y, &err) == LMQ_OK, "%s", err.msg);
}

/* Runs check on every kernel set this CPU has × every encoding × every shape. */
static void each_case(void (*check)(const rt_kernels *isa, const enc *e, stored *s, int out, int in))
{
    for (int e = 0; e < N_ENC; e++)
        for (int sh = 0; sh < N_SHAPES; sh++) {
            if (!fits(&ENCODINGS[e], SHAPES[sh][1]))
                continue;
            stored s;
            make(&s, &ENCODINGS[e], SHAPES[sh][0], SHAPES[sh][1]);
            const rt_kernels *isa;
            for (int i = 0; (isa = rt_isa_nth(i)); i++)
                check(isa, &ENCODINGS[e], &s, SHAPES[sh][0], SHAPES[sh][1]);
            unmake(&s);
        }
}

/* The in × in identity, in one buffer kept for the process: a fresh one per case and kernel set
 * (19 MB at 2176 columns) spent most of the suite's time in page faults. */
static const float *identity(int in)
{
    static float *eye;
    static int held;
    enum { MAX_IN = 2176 };
    ck_assert_int_le(in, MAX_IN);
    if (!eye)
        ck_assert_ptr_nonnull(eye = calloc((size_t)MAX_IN * MAX_IN, sizeof *eye));
    for (int i = 0; i < held; i++)
        eye[(size_t)i * held + i] = 0.0f;
    for (int i = 0; i < in; i++)
        eye[(size_t)i * in + i] = 1.0f;
    held = in;
    return eye;
}

/* One-hot rows: y[i][j] = w'[j][k_i] + 0s, exact in any summation order. */
static void decodes_exactly_case(const rt_kernels *isa, const enc *e, stored *s, int out, int in)
{
    const float *x = identity(in);
    float *y = malloc((size_t)in * out * sizeof *y);
    const int ns[] = { 1, in < 3 ? in : 3, in }; /* few rows (fused where it applies), then many (staged) */
    for (int k = 0; k < 3; k++) {
        const int n = ns[k];
        linear(isa, 2, x, n, &s->W, y);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < out; j++)
                ck_assert_msg(y[(size_t)i * out + j] == s->deq[(size_t)j * in + i],
                              "%s, %s [%d × %d], %d rows: w[%d][%d] = %.9g, decoded %.9g", isa->name, e->name,
                              out, in, n, j, i, (double)s->deq[(size_t)j * in + i], (double)y[(size_t)i * out + j]);
    }
    /* The embedding lookup decodes rows the same way. */
    lmq_err err;
    float *rows = malloc((size_t)out * in * sizeof *rows);
    ck_assert_msg(rt_weight_rows(isa, &s->W, 0, out, rows, &err) == LMQ_OK, "%s", err.msg);
    ck_assert_msg(!memcmp(rows, s->deq, (size_t)out * in * sizeof *rows), "%s, %s: rows differ from q_dequantize",
                  isa->name, e->name);
    free(rows);
    free(y);
}

START_TEST(decodes_exactly)
{
    each_case(decodes_exactly_case);
}
END_TEST

/* Every output within 1e-5 of the double product (and, for GGUF's blocks, of the scalar set's
 * fused product, the reference); a row's bits the same alone, in a batch of 1..50 rows, on 1, 2 or
 * 3 threads. */
static void products_case(const rt_kernels *isa, const enc *e, stored *s, int out, int in)
{
    enum { ROWS = 50 };
    const int ns[] = { 1, 3, 8, 9, ROWS }; /* fused up to 8 rows, fp32 direct up to 48 */
    s->W.b = s->bias;
    const size_t n_out = (size_t)ROWS * out;
    float *x = malloc((size_t)ROWS * in * sizeof *x), *y = malloc(n_out * sizeof *y);
    float *alone = malloc(n_out * sizeof *alone), *ref_y = malloc(n_out * sizeof *ref_y);
    double *ref = malloc(n_out * sizeof *ref), *mag = malloc(n_out * sizeof *mag);
    for (int i = 0; i < ROWS * in; i++)
        x[i] = uniform();
    /* What no batch, thread count or kernel changes: the double product and each row run alone. */
    for (int i = 0; i < ROWS; i++) {
        linear(isa, 1, x + (size_t)i * in, 1, &s->W, alone + (size_t)i * out);
        for (int j = 0; j < out; j++) {
            double r = s->bias[j], m = fabs(s->bias[j]);
            for (int c = 0; c < in; c++) {
                const double p = (double)x[(size_t)i * in + c] * s->deq[(size_t)j * in + c];
                r += p;
                m += fabs(p);
            }
            ref[(size_t)i * out + j] = r, mag[(size_t)i * out + j] = m;
        }
    }
    const int blocks = lmq_encoding_of(e->q.dtype)->block != 0;
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        const int n = ns[k];
        if (blocks)
            linear(&rt_kernels_scalar, 1, x, n, &s->W, ref_y);
        for (int threads = 1; threads <= 3; threads++) {
            linear(isa, threads, x, n, &s->W, y);
            for (size_t o = 0; o < (size_t)n * out; o++) {
                const int i = (int)(o / out);
                const float got = y[o];
                ck_assert_msg(fabs(got - ref[o]) <= 1e-5 * mag[o], "%s, %s [%d × %d], row %d of %d: %.9g, double "
                              "product %.9g", isa->name, e->name, out, in, i, n, (double)got, ref[o]);
                ck_assert_msg(!blocks || fabs(got - ref_y[o]) <= 1e-5 * mag[o],
                              "%s, %s [%d × %d], row %d of %d: %.9g, the scalar set's %.9g", isa->name, e->name, out,
                              in, i, n, (double)got, (double)ref_y[o]);
                ck_assert_msg(memcmp(&got, &alone[o], sizeof got) == 0,
                              "%s, %s [%d × %d]: row %d of %d on %d threads gives %.9g, alone %.9g", isa->name,
                              e->name, out, in, i, n, threads, (double)got, (double)alone[o]);
            }
        }
    }
    free(x);
    free(y);
    free(alone);
    free(ref_y);
    free(ref);
    free(mag);
}

START_TEST(products_and_invariance)
{
    each_case(products_case);
}
END_TEST

/* Activation quantisation, written apart from the runtime's: the max in double, the rounding by
 * lround (half away from zero, as roundf), the clamp by comparison. Values into out, codes into
 * q and each span's scale into sc (span = a row, or all n rows per tensor). */
static void ref_act(const float *x, int n, int in, lmq_act_gran gran, float *out, long *q, float *sc)
{
    const int rows = gran == LMQ_ACT_TENSOR ? 1 : n, span = gran == LMQ_ACT_TENSOR ? n * in : in;
    for (int r = 0; r < rows; r++) {
        double mx = 0;
        for (int k = 0; k < span; k++)
            mx = fabs((double)x[r * span + k]) > mx ? fabs((double)x[r * span + k]) : mx;
        const float s = sc[r] = (float)mx / 127.0f;
        for (int k = 0; k < span; k++) {
            long c = mx == 0 ? 0 : lround((double)(x[r * span + k] / s));
            c = c > 127 ? 127 : c < -127 ? -127 : c;
            q[r * span + k] = c;
            out[r * span + k] = mx == 0 ? 0.0f : (float)c * s;
        }
    }
}

/* The e4m3 values, from the format's definition alone (bias 7, 3 mantissa bits, subnormals, no
 * infinities, S.1111.111 NaN): v[c] for the non-negative codes c = 0..126. */
static void e4m3_values(double v[127])
{
    for (int c = 0; c < 127; c++) {
        const int e = c >> 3, m = c & 7;
        v[c] = e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
    }
}

/* fp8 e4m3 activations, as ref_act: s = max|x| / 448 (float), each x / s to the nearest e4m3
 * value by search (ties to the even code; past 448 the largest), times s. */
static void ref_act_fp8(const float *x, int n, int in, lmq_act_gran gran, float *out)
{
    double v[127];
    e4m3_values(v);
    const int rows = gran == LMQ_ACT_TENSOR ? 1 : n, span = gran == LMQ_ACT_TENSOR ? n * in : in;
    for (int r = 0; r < rows; r++) {
        double mx = 0;
        for (int k = 0; k < span; k++)
            mx = fabs((double)x[r * span + k]) > mx ? fabs((double)x[r * span + k]) : mx;
        const float s = (float)mx / 448.0f;
        for (int k = 0; k < span; k++) {
            const float q = mx == 0 ? 0.0f : x[r * span + k] / s;
            int best = 0;
            for (int c = 1; c < 127; c++) {
                const double d = fabs(fabs((double)q) - v[c]), db = fabs(fabs((double)q) - v[best]);
                if (d < db || (d == db && !(c & 1)))
                    best = c;
            }
            const float a = (float)v[best] * s;
            out[r * span + k] = mx == 0 ? 0.0f : q < 0 ? -a : a;
        }
    }
}

/* W8A8 per token with symmetric int8 weights per channel, as integers (runtime/linear.h): weight
 * codes and scales read from the stored bytes, the sums in int64, then the two scale products. */
static void ref_int8_product(const stored *s, const long *q, const float *sx, int n, int out, int in, float *y)
{
    lmq_layout L;
    lmq_err e;
    ck_assert(lmq_layout_of(&s->t.q, out, in, &L, &e) == LMQ_OK);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < out; j++) {
            int64_t sum = 0;
            for (int k = 0; k < in; k++)
                sum += q[(size_t)i * in + k] * ((int64_t)s->bytes[L.code_offset + (size_t)j * in + k] - 128);
            uint16_t h;
            memcpy(&h, s->bytes + 2 * (size_t)j, 2);
            const float v = (float)sum * sx[i] * lmq_f16_to_f32(h);
            y[(size_t)i * out + j] = s->W.b ? v + s->W.b[j] : v;
        }
}

/* Inputs quantised (int8 and fp8 e4m3) per token and per tensor, on every kernel set, fused,
 * generic and integer paths, with and without bias: the same bits as the product over the
 * reference's quantised x (symmetric int8 per channel, int8 per token: the reference's integer
 * product). Row 2 is zero; row 5 holds one huge value, which per tensor rounds every other row to
 * 0 on the int8 grid and per token touches its own row only; row 7 is subnormal. */
static void activations_case(const rt_kernels *isa, const enc *e, stored *s, int out, int in)
{
    enum { N = 9 };
    float *x = malloc((size_t)N * in * sizeof *x), *xq = malloc((size_t)N * in * sizeof *xq), sc[N];
    float *y = malloc((size_t)N * out * sizeof *y), *want = malloc((size_t)N * out * sizeof *want);
    float *alone = malloc((size_t)out * sizeof *alone);
    long *q = malloc((size_t)N * in * sizeof *q);
    for (int i = 0; i < N * in; i++)
        x[i] = i / in == 2 ? 0.0f : uniform();
    x[5 * in + in / 2] = 1e4f;
    for (int k = 0; k < in; k++) /* subnormal: a scale that is not max / 127 exactly */
        x[7 * in + k] *= 1e-39f;
    const int integer = e->q.dtype == LMQ_T_INT8 && e->q.gran == LMQ_GRAN_CHANNEL && !e->q.asym;
    for (int scheme = LMQ_ACT_INT8; scheme <= LMQ_ACT_FP8_E4M3; scheme++)
        for (int gran = LMQ_ACT_TOKEN; gran <= LMQ_ACT_TENSOR; gran++)
            for (int bias = 0; bias < 2; bias++) {
                const char *act = lmq_act_scheme_names[scheme], *g = lmq_act_gran_names[gran];
                s->W.b = bias ? s->bias : NULL;
                rt_weight plain = s->W;
                plain.act = (lmq_act){ 0 }; /* the reference's x is rounded already */
                s->W.act = (lmq_act){ .scheme = (uint8_t)scheme, .gran = (uint8_t)gran };
                if (scheme == LMQ_ACT_FP8_E4M3)
                    ref_act_fp8(x, N, in, (lmq_act_gran)gran, xq);
                else
                    ref_act(x, N, in, (lmq_act_gran)gran, xq, q, sc);
                if (scheme == LMQ_ACT_INT8 && gran == LMQ_ACT_TOKEN && integer)
                    ref_int8_product(s, q, sc, N, out, in, want);
                else
                    linear(isa, 2, xq, N, &plain, want);
                for (int threads = 1; threads <= 3; threads++) {
                    linear(isa, threads, x, N, &s->W, y);
                    ck_assert_msg(!memcmp(y, want, (size_t)N * out * sizeof *y), "%s, %s [%d × %d], %s %s%s on %d "
                                  "threads: not the reference's product", isa->name, e->name, out, in, act, g,
                                  bias ? " with bias" : "", threads);
                }
                for (int i = 0; i < N && !bias; i++)
                    for (int j = 0; j < out; j++) {
                        const float v = y[(size_t)i * out + j];
                        if (i == 2 || (scheme == LMQ_ACT_INT8 && gran == LMQ_ACT_TENSOR && i != 5))
                            ck_assert_msg(v == 0.0f, "%s, %s, %s %s: row %d gives %g, not 0", isa->name, e->name,
                                          act, g, i, (double)v);
                    }
                if (gran == LMQ_ACT_TOKEN) /* each row on its own grid: the same bits alone */
                    for (int i = 0; i < N; i++) {
                        linear(isa, 1, x + (size_t)i * in, 1, &s->W, alone);
                        ck_assert_msg(!memcmp(alone, y + (size_t)i * out, (size_t)out * sizeof *alone),
                                      "%s, %s, %s token: row %d differs alone", isa->name, e->name, act, i);
                    }
            }
    s->W.act = (lmq_act){ 0 };
    s->W.b = NULL;
    free(x);
    free(xq);
    free(q);
    free(y);
    free(want);
    free(alone);
}

START_TEST(activations_quantised)
{
    /* fp32, int8 channel, int4 g32 and fp8 e4m3 channel (fused on AVX2 and AVX-512), int2 (generic), q4_k
     * (fused everywhere) */
    const int encs[] = { 0, 5, 10, 3, 16, FIRST_BLOCK + 7 };
    const rt_kernels *isa;
    for (int i = 0; (isa = rt_isa_nth(i)); i++)
        for (size_t k = 0; k < sizeof encs / sizeof encs[0]; k++)
            for (int sh = 0; sh < N_SHAPES; sh++) {
                if (!fits(&ENCODINGS[encs[k]], SHAPES[sh][1]))
                    continue;
                stored s;
                make(&s, &ENCODINGS[encs[k]], SHAPES[sh][0], SHAPES[sh][1]);
                activations_case(isa, &ENCODINGS[encs[k]], &s, SHAPES[sh][0], SHAPES[sh][1]);
                unmake(&s);
            }
}
END_TEST

/* ---- int8 activations per block (a8 block) */

/* The rounding, written apart from the runtime's, as llama.cpp pairs it with the weights (alen:
 * the activation block, 32 or 256). 32, Q8_0: a block's max in double, d = max / 127 in float,
 * codes lround(x / d) clamped, the block's scale d through fp16. 256, Q8_K: the first value of
 * largest magnitude max, iscale = −127 / max, codes iscale·x rounded to nearest even capped at 127,
 * the scale 1 / iscale in fp32. x' = code·scale into xq (NULL: not wanted). Codes into q, each
 * value's scale into dx ([n × in]). */
static void ref_act_block(const float *x, int n, int in, int alen, long *q, float *dx, float *xq)
{
    for (int b = 0; b < n * in / alen; b++) {
        const float *xb = x + (size_t)b * alen;
        double mx = 0;
        float big = 0;
        for (int k = 0; k < alen; k++)
            if (fabs((double)xb[k]) > mx)
                mx = fabs((double)xb[k]), big = xb[k];
        const float d = (float)mx / 127.0f, iscale = -127.0f / big;
        const float scale = mx == 0 ? 0.0f : alen == 32 ? lmq_f16_to_f32(lmq_f32_to_f16(d)) : 1.0f / iscale;
        for (int k = b * alen; k < (b + 1) * alen; k++) {
            long c = mx == 0 ? 0 : alen == 32 ? lround((double)(x[k] / d)) : lrint((double)(iscale * x[k]));
            q[k] = c > 127 ? 127 : c < -127 ? -127 : c;
            dx[k] = scale;
            if (xq)
                xq[k] = (float)q[k] * scale;
        }
    }
}

/* The weight kinds the integer product takes (ENCODINGS' rows: lmq's groups and every GGUF block
 * type), and shapes: rows no multiple of a tile of 4 or 16, one block, three, rows of 128·k
 * (several groups of 128, and groups of 32 in more than 16 blocks), rows of 256·k for the
 * 256-blocks. An encoding takes the shapes whose rows are whole activation blocks. */
static const int A8B_ENCS[] = { 6,  10, 12, 13, FIRST_BLOCK, FIRST_BLOCK + 1, FIRST_BLOCK + 2, FIRST_BLOCK + 3,
                                FIRST_BLOCK + 4, FIRST_BLOCK + 5, FIRST_BLOCK + 6, FIRST_BLOCK + 7, FIRST_BLOCK + 8,
                                FIRST_BLOCK + 9, FIRST_BLOCK + 10, FIRST_BLOCK + 11 };
static const int A8B_SHAPES[][2] = { { 1, 32 }, { 5, 96 },  { 7, 128 }, { 18, 256 }, { 67, 384 },
                                     { 3, 640 }, { 1, 256 }, { 5, 512 }, { 67, 768 }, { 3, 1280 } };

static void a8b_run(const rt_kernels *isa, int threads, const float *x, int n, const rt_weight *W, float *y)
{
    linear(isa, threads, x, n, W, y);
}

/* Every kernel set's a8 block product bit for bit the scalar set's, for n = 1, 2, 3, 4, 5, 7, 17,
 * 50 rows of x; within fp32 rounding of Σ qx·dx·w' in double (the reference's codes, the scheme
 * table's weights w' = qw·dw (+ min) exactly); the same bits on 1..3 threads, row by row alone and
 * in two batches; zero rows give the bias exactly. */
static void a8b_case(const rt_kernels *isa, const enc *e, stored *s, int out, int in)
{
    enum { ROWS = 50 };
    const int ns[] = { 1, 2, 3, 4, 5, 7, 17, ROWS };
    const int alen = (int)lmq_act_block_len(e->q.dtype), terms = in / 16;
    float *x = malloc((size_t)ROWS * in * sizeof *x), *dx = malloc((size_t)ROWS * in * sizeof *dx);
    long *q = malloc((size_t)ROWS * in * sizeof *q);
    float *y = malloc((size_t)ROWS * out * sizeof *y), *ref_y = malloc((size_t)ROWS * out * sizeof *ref_y);
    float *part = malloc((size_t)ROWS * out * sizeof *part);
    for (int i = 0; i < ROWS * in; i++)
        x[i] = i / in == 4 ? 0.0f : uniform() * (i % 37 == 0 ? 9.0f : 1.0f);
    for (int k = 0; k < alen; k++) /* one zero block in a row that is not */
        x[(size_t)6 * in + k] = 0.0f;
    ref_act_block(x, ROWS, in, alen, q, dx, NULL);
    s->W.b = s->bias;
    s->W.act = (lmq_act){ .scheme = LMQ_ACT_INT8, .gran = LMQ_ACT_BLOCK };
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        const int n = ns[k];
        linear(&rt_kernels_scalar, 1, x, n, &s->W, ref_y);
        for (int threads = 1; threads <= 3; threads++) {
            a8b_run(isa, threads, x, n, &s->W, y);
            ck_assert_msg(!memcmp(y, ref_y, (size_t)n * out * sizeof *y), "%s, %s [%d × %d], %d rows on %d threads: "
                          "not the scalar set's bits", isa->name, e->name, out, in, n, threads);
        }
        /* two batches, then row by row */
        a8b_run(isa, 2, x, n / 2, &s->W, part);
        a8b_run(isa, 3, x + (size_t)(n / 2) * in, n - n / 2, &s->W, part + (size_t)(n / 2) * out);
        ck_assert_msg(!memcmp(part, y, (size_t)n * out * sizeof *y), "%s, %s [%d × %d]: %d rows in two batches differ",
                      isa->name, e->name, out, in, n);
        for (int i = 0; i < n; i++) {
            a8b_run(isa, 1, x + (size_t)i * in, 1, &s->W, part);
            ck_assert_msg(!memcmp(part, y + (size_t)i * out, (size_t)out * sizeof *y),
                          "%s, %s [%d × %d]: row %d of %d differs alone", isa->name, e->name, out, in, i, n);
        }
    }
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < out; j++) {
            double r = s->bias[j], m = fabs(s->bias[j]);
            for (int k = 0; k < in; k++) {
                const size_t ik = (size_t)i * in + k;
                const double p = (double)q[ik] * dx[ik] * s->deq[(size_t)j * in + k];
                r += p, m += fabs(p);
            }
            const float got = y[(size_t)i * out + j];
            ck_assert_msg(fabs(got - r) <= 1e-6 * terms * m + 1e-30, "%s, %s [%d × %d], row %d, out %d: %.9g, double "
                          "%.9g", isa->name, e->name, out, in, i, j, (double)got, r);
            if (i == 4)
                ck_assert_msg(got == s->bias[j], "%s, %s: a zero row gives %.9g, not the bias %.9g", isa->name,
                              e->name, (double)got, (double)s->bias[j]);
        }
    s->W.act = (lmq_act){ 0 };
    s->W.b = NULL;
    free(x), free(dx), free(q), free(y), free(ref_y), free(part);
}

START_TEST(a8_block_products)
{
    const rt_kernels *isa;
    for (size_t k = 0; k < sizeof A8B_ENCS / sizeof A8B_ENCS[0]; k++)
        for (size_t sh = 0; sh < sizeof A8B_SHAPES / sizeof A8B_SHAPES[0]; sh++) {
            const enc *e = &ENCODINGS[A8B_ENCS[k]];
            const int out = A8B_SHAPES[sh][0], in = A8B_SHAPES[sh][1];
            if (in % (int)lmq_act_block_len(e->q.dtype))
                continue;
            stored s;
            make(&s, e, out, in);
            for (int i = 0; (isa = rt_isa_nth(i)); i++)
                a8b_case(isa, e, &s, out, in);
            unmake(&s);
        }
}
END_TEST

/* The 256-blocks take activation blocks of 256 (Q8_K): rows of 384 inputs are refused, saying so
 * (their layout refuses them too, but the check is made first on a recipe's or manifest's shapes);
 * 512 are taken, as 384 are by the 32-blocks. */
START_TEST(a8_block_q8_k_rows)
{
    const lmq_act a = { .scheme = LMQ_ACT_INT8, .gran = LMQ_ACT_BLOCK };
    for (int e = FIRST_BLOCK; e < N_ENC; e++) {
        const lmq_qparams *qp = &ENCODINGS[e].q;
        lmq_err err = { 0 };
        const int k256 = lmq_encoding_of(qp->dtype)->block == 256;
        ck_assert_int_eq(lmq_act_check(a, qp, 384, &err), k256 ? LMQ_E_ARG : LMQ_OK);
        if (k256)
            ck_assert_msg(strstr(err.msg, "multiple of 256") && strstr(err.msg, "Q8_K") && strstr(err.msg, "384"),
                          "%s", err.msg);
        ck_assert_int_eq(lmq_act_check(a, qp, 512, &err), LMQ_OK);
    }
}
END_TEST

/* Weights the integer product does not take (fp32, int4 per channel, int8 g128 asymmetric: the
 * float product) see x' = code·scale, the reference's rounding, bit for bit. */
START_TEST(a8_block_rounding)
{
    const int encs[] = { 0, 9, 7 };
    const rt_kernels *isa;
    for (size_t k = 0; k < sizeof encs / sizeof encs[0]; k++)
        for (size_t sh = 0; sh < sizeof A8B_SHAPES / sizeof A8B_SHAPES[0]; sh++) {
            const int out = A8B_SHAPES[sh][0], in = A8B_SHAPES[sh][1], n = 7;
            stored s;
            make(&s, &ENCODINGS[encs[k]], out, in);
            float *x = malloc((size_t)n * in * sizeof *x), *xq = malloc((size_t)n * in * sizeof *xq);
            float *dx = malloc((size_t)n * in * sizeof *dx), *y = malloc((size_t)n * out * sizeof *y);
            float *want = malloc((size_t)n * out * sizeof *want);
            long *q = malloc((size_t)n * in * sizeof *q);
            for (int i = 0; i < n * in; i++)
                x[i] = i / in == 2 ? 0.0f : uniform();
            x[in / 2] = 1e4f;
            ref_act_block(x, n, in, 32, q, dx, xq);
            for (int i = 0; (isa = rt_isa_nth(i)); i++) {
                s.W.act = (lmq_act){ 0 };
                linear(isa, 2, xq, n, &s.W, want);
                s.W.act = (lmq_act){ .scheme = LMQ_ACT_INT8, .gran = LMQ_ACT_BLOCK };
                linear(isa, 2, x, n, &s.W, y);
                ck_assert_msg(!memcmp(y, want, (size_t)n * out * sizeof *y), "%s, %s [%d × %d]: not the product over "
                              "the reference's x'", isa->name, ENCODINGS[encs[k]].name, out, in);
            }
            free(x), free(xq), free(dx), free(y), free(want), free(q);
            unmake(&s);
        }
}
END_TEST

/* ---- fp8: every code */

/* fp8 weights [out × in] q written byte by byte: element e's code 37·e + 11 mod 256 (every code in
 * each 256 elements), or where that is Inf or NaN and `finite` asks, the finite code with its sign
 * and low four bits; scale i 2^(i mod 9 − 4)·(1 + (i mod 5)/8), one in seven a tenth of the
 * smallest normal float (its products subnormal). Returns the bytes, t and their view W. */
static uint8_t *fp8_weights(const lmq_qparams *q, int out, int in, int finite, rt_weight *W, lmq_tensor *t)
{
    lmq_layout L;
    lmq_err err;
    ck_assert(lmq_layout_of(q, out, in, &L, &err) == LMQ_OK);
    uint8_t *b = malloc(L.bytes);
    for (int64_t i = 0; i < L.n_scales; i++) {
        const float sc = i % 7 == 6 ? 0x1p-126f / 10 : ldexpf(1.0f + (float)(i % 5) / 8, (int)(i % 9) - 4);
        memcpy(b + 4 * i, &sc, 4);
    }
    const q_fp8_format *f = q->dtype == LMQ_T_F8_E4M3 ? &q_fp8_e4m3 : &q_fp8_e5m2;
    for (size_t e = 0; e < (size_t)out * in; e++) {
        uint8_t c = (uint8_t)(37 * e + 11);
        if (finite && !isfinite(q_fp8_decode(f, c)))
            c &= 0x8F;
        b[L.code_offset + e] = c;
    }
    *t = (lmq_tensor){ .ndim = 2, .shape = { out, in }, .q = *q, .raw = b, .raw_size = L.bytes };
    snprintf(t->name, sizeof t->name, "test.fp8");
    ck_assert_msg(rt_weight_of(t, NULL, W, &err) == LMQ_OK, "%s", err.msg);
    return b;
}

/* q_dequantize's values for any code, Inf and NaN too: decode(code)·scale, one rounding. */
static void fp8_dequantize(const lmq_qparams *q, const uint8_t *b, int out, int in, float *deq)
{
    lmq_layout L;
    lmq_err err;
    ck_assert(lmq_layout_of(q, out, in, &L, &err) == LMQ_OK);
    const q_fp8_format *f = q->dtype == LMQ_T_F8_E4M3 ? &q_fp8_e4m3 : &q_fp8_e5m2;
    for (size_t e = 0; e < (size_t)out * in; e++) {
        const size_t j = e / (size_t)in, k = e % (size_t)in;
        const size_t i = q->gran == LMQ_GRAN_TENSOR ? 0 : j * (size_t)L.groups_per_row + k / (size_t)L.group;
        float sc = 1.0f;
        if (L.n_scales)
            memcpy(&sc, b + 4 * i, 4);
        deq[e] = q_fp8_decode(f, b[L.code_offset + e]) * sc;
    }
}

/* Both fp8 formats, unscaled and with a scale per tensor, channel and group of 32, on ragged shapes:
 * on every kernel set each of the 256 codes decodes (rt_weight_rows) to decode(code)·scale bit for
 * bit, NaNs' too, so every set gives the same bits; and over the finite codes, with a bias,
 * rt_linear for n = 1..9 and 50 rows on 1..3 threads gives the bits of the same kernel set's fp32
 * product over q_dequantize's weights. */
START_TEST(fp8_every_code)
{
    static const int shapes[][2] = { { 1, 256 }, { 7, 37 }, { 67, 160 }, { 3, 1100 }, { 9, 288 } };
    static const lmq_dtype dts[] = { LMQ_T_F8_E4M3, LMQ_T_F8_E5M2 };
    static const lmq_gran grans[] = { LMQ_GRAN_NONE, LMQ_GRAN_TENSOR, LMQ_GRAN_CHANNEL, LMQ_GRAN_GROUP };
    enum { ROWS = 50 };
    static const int ns[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, ROWS }; /* fused up to 8 rows, then staged */
    lmq_err err;
    for (size_t d = 0; d < 2; d++)
        for (size_t g = 0; g < sizeof grans / sizeof grans[0]; g++)
            for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
                const int out = shapes[sh][0], in = shapes[sh][1];
                const lmq_qparams q = { .dtype = dts[d], .gran = grans[g],
                                        .group = grans[g] == LMQ_GRAN_GROUP ? 32 : 0 };
                const char *name = lmq_encoding_of(q.dtype)->name, *gran = lmq_gran_name(q.gran);
                float *deq = malloc((size_t)out * in * sizeof *deq), *rows = malloc((size_t)out * in * sizeof *rows);
                float *x = malloc((size_t)ROWS * in * sizeof *x), *bias = malloc((size_t)out * sizeof *bias);
                float *y = malloc((size_t)ROWS * out * sizeof *y), *want = malloc((size_t)ROWS * out * sizeof *want);
                for (int i = 0; i < ROWS * in; i++)
                    x[i] = uniform();
                for (int j = 0; j < out; j++)
                    bias[j] = uniform();
                for (int finite = 0; finite < 2; finite++) {
                    rt_weight W, F;
                    lmq_tensor t, tf;
                    uint8_t *b = fp8_weights(&q, out, in, finite, &W, &t);
                    fp8_dequantize(&q, b, out, in, deq);
                    if (finite) { /* where it takes the codes (it refuses NaN and Inf) */
                        ck_assert(q_dequantize(&q, b, t.raw_size, out, in, rows, NULL, &err) == LMQ_OK);
                        ck_assert(!memcmp(rows, deq, (size_t)out * in * sizeof *rows));
                    }
                    tf = (lmq_tensor){ .ndim = 2, .shape = { out, in }, .q = { .dtype = LMQ_T_F32 },
                                       .raw = (uint8_t *)deq, .raw_size = (size_t)out * in * sizeof *deq };
                    ck_assert(rt_weight_of(&tf, bias, &F, &err) == LMQ_OK);
                    W.b = bias;
                    const rt_kernels *isa;
                    for (int i = 0; (isa = rt_isa_nth(i)); i++) {
                        ck_assert_msg(rt_linear_fused(isa, &W) == (isa != &rt_kernels_scalar), "%s: %s %s", isa->name,
                                      name, gran);
                        if (!finite && isa == &rt_kernels_scalar) /* its rows are q_dequantize's, which refuses them */
                            continue;
                        ck_assert(rt_weight_rows(isa, &W, 0, out, rows, &err) == LMQ_OK);
                        for (size_t e = 0; e < (size_t)out * in; e++)
                            ck_assert_msg(!memcmp(&rows[e], &deq[e], sizeof *rows), "%s, %s %s [%d × %d]: code 0x%02x "
                                          "decodes to %.9g, q_dequantize %.9g", isa->name, name, gran, out, in,
                                          b[W.L.code_offset + e], (double)rows[e], (double)deq[e]);
                        for (size_t k = 0; finite && k < sizeof ns / sizeof ns[0]; k++) {
                            const int n = ns[k];
                            linear(isa, 1, x, n, &F, want);
                            for (int threads = 1; threads <= 3; threads++) {
                                linear(isa, threads, x, n, &W, y);
                                ck_assert_msg(!memcmp(y, want, (size_t)n * out * sizeof *y), "%s, %s %s [%d × %d], "
                                              "%d rows on %d threads: not the fp32 product's bits", isa->name, name,
                                              gran, out, in, n, threads);
                            }
                        }
                    }
                    free(b);
                }
                free(deq), free(rows), free(x), free(bias), free(y), free(want);
            }
}
END_TEST

/* Which encodings the fused kernels take: the ones the scheme table says they may, on every vector
 * kernel set or (wide) on the AVX-512 ones alone (fp32 on AVX2 is gemm_nt's product; int3 and int2
 * have no AVX2 rows), never on the scalar one; GGUF's blocks on every set, the scalar one too. */
START_TEST(fused_where_expected)
{
    struct { int e, in, fused, wide; } cases[] = {
        { 0, 37, 1, 1 },   { 1, 37, 1, 0 },  { 2, 37, 1, 0 },   { 3, 64, 1, 0 },   { 4, 37, 1, 0 },
        { 3, 37, 1, 0 },   { 19, 37, 1, 0 }, { 20, 172, 1, 0 }, { 21, 37, 1, 0 },  { 22, 37, 1, 0 },
        { 6, 160, 1, 0 },  { 8, 160, 0, 0 }, { 10, 160, 1, 0 }, { 10, 172, 0, 0 }, { 13, 256, 1, 0 },
        { 13, 160, 1, 0 }, { 16, 64, 1, 1 }, { 16, 172, 0, 0 }, { 17, 64, 1, 1 }, { 5, 256, 1, 0 },
        { 18, 256, 1, 0 }, { 18, 37, 1, 0 },
    };
    const rt_kernels *isa;
    for (int k = 0; (isa = rt_isa_nth(k)); k++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            stored s;
            make(&s, &ENCODINGS[cases[i].e], 3, cases[i].in);
            const int want =
                isa != &rt_kernels_scalar && cases[i].fused && (!cases[i].wide || isa->needs & LMQ_CPU_AVX512);
            ck_assert_msg(rt_linear_fused(isa, &s.W) == want, "%s: %s over %d inputs", isa->name,
                          ENCODINGS[cases[i].e].name, cases[i].in);
            unmake(&s);
        }
    for (int k = 0; (isa = rt_isa_nth(k)); k++)
        for (int e = FIRST_BLOCK; e < N_ENC; e++) {
            stored s;
            make(&s, &ENCODINGS[e], 3, 512);
            ck_assert_msg(rt_linear_fused(isa, &s.W), "%s: %s not fused", isa->name, ENCODINGS[e].name);
            unmake(&s);
        }
}
END_TEST

START_TEST(bad_views)
{
    lmq_err err;
    uint8_t bytes[64] = { 0 };
    lmq_tensor t = { .name = "blk.0.ffn_up.weight", .ndim = 2, .shape = { 4, 8 }, .q = Q(INT8, CHANNEL, 0, 0),
                     .raw = bytes, .raw_size = 39 };
    rt_weight W;
    ck_assert_int_eq(rt_weight_of(&t, NULL, &W, &err), LMQ_E_FORMAT);
    ck_assert_msg(strstr(err.msg, "blk.0.ffn_up.weight"), "%s", err.msg);
    t.raw_size = 40;
    ck_assert_int_eq(rt_weight_of(&t, NULL, &W, &err), LMQ_OK);
    t.act = (lmq_act){ .scheme = LMQ_ACT_INT8, .gran = LMQ_ACT_TENSOR };
    ck_assert_int_eq(rt_weight_of(&t, NULL, &W, &err), LMQ_OK);
    ck_assert(W.act.scheme == LMQ_ACT_INT8 && W.act.gran == LMQ_ACT_TENSOR);
    t.act.gran = LMQ_ACT_GRAN_COUNT;
    ck_assert_int_eq(rt_weight_of(&t, NULL, &W, &err), LMQ_E_FORMAT);
    ck_assert_msg(strstr(err.msg, "activation"), "%s", err.msg);
    t.act = (lmq_act){ .scheme = LMQ_ACT_INT8, .gran = LMQ_ACT_BLOCK }; /* 8 inputs: no whole block */
    ck_assert_int_eq(rt_weight_of(&t, NULL, &W, &err), LMQ_E_FORMAT);
    ck_assert_msg(strstr(err.msg, "blk.0.ffn_up.weight") && strstr(err.msg, "per block"), "%s", err.msg);
    t.act = (lmq_act){ 0 };
    t.ndim = 1;
    ck_assert_int_eq(rt_weight_of(&t, NULL, &W, &err), LMQ_E_FORMAT);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("linear");
    TCase *tc = tcase_create("linear");
    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, pools_up, pools_down);
    tcase_add_test(tc, decodes_exactly);
    tcase_add_test(tc, products_and_invariance);
    tcase_add_test(tc, activations_quantised);
    tcase_add_test(tc, a8_block_products);
    tcase_add_test(tc, a8_block_rounding);
    tcase_add_test(tc, fp8_every_code);
    tcase_add_test(tc, a8_block_q8_k_rows);
    tcase_add_test(tc, fused_where_expected);
    tcase_add_test(tc, bad_views);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
