/* schemes/: the scheme table, bit packing, fp8, weight statistics. */
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fp.h"
#include "common/pool.h"
#include "schemes/fp8.h"
#include "schemes/pack.h"
#include "schemes/scheme.h"
#include "common/stats.h"
#include "tests/testutil.h"

/* ---- helpers ----------------------------------------------------------------------------- */

typedef struct {
    uint64_t s;
} rng;

static uint64_t next_u64(rng *r) /* splitmix64 */
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform(rng *r) /* [0, 1) */
{
    return (double)(next_u64(r) >> 11) * 0x1p-53;
}

static double gauss(rng *r)
{
    double u = uniform(r), v = uniform(r);
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

static float *gauss_matrix(uint64_t seed, size_t n, double sigma)
{
    rng r = { seed };
    float *w = malloc(n * sizeof *w);
    for (size_t i = 0; i < n; i++)
        w[i] = (float)(sigma * gauss(&r));
    return w;
}

static lmq_qparams qp_of(lmq_dtype t, lmq_gran gran, uint32_t group, int asym)
{
    lmq_qparams q = { .dtype = (uint16_t)t, .gran = (uint8_t)gran, .asym = (uint8_t)asym,
                      .group = group };
    return q;
}

/* Quantises w, dequantises into wq, and returns the stored bytes (the caller frees them). */
static uint8_t *roundtrip(const lmq_qparams *qp, const float *w, int64_t rows, int64_t cols,
                          float *wq, size_t *size)
{
    lmq_layout L;
    lmq_err err;
    ck_assert_msg(lmq_layout_of(qp, rows, cols, &L, &err) == LMQ_OK, "%s", err.msg);
    uint8_t *buf = malloc(L.bytes);
    ck_assert_msg(q_quantize(qp, w, rows, cols, buf, L.bytes, NULL, &err) == LMQ_OK, "%s", err.msg);
    ck_assert_msg(q_dequantize(qp, buf, L.bytes, rows, cols, wq, NULL, &err) == LMQ_OK, "%s", err.msg);
    if (size)
        *size = L.bytes;
    return buf;
}

/* The golden README's integer conventions, transcribed directly for one group (inputs here are
 * never degenerate: no constant groups, no zero point beyond int16). */
static void ref_group(unsigned b, int asym, const float *w, size_t n, float *out)
{
    float mn = w[0], mx = w[0], amax = 0;
    for (size_t i = 0; i < n; i++) {
        mn = fminf(mn, w[i]);
        mx = fmaxf(mx, w[i]);
        amax = fmaxf(amax, fabsf(w[i]));
    }
    if (!asym) {
        float qmax = (float)((1 << (b - 1)) - 1);
        float s = lmq_f16_to_f32(lmq_f32_to_f16(amax / qmax));
        for (size_t i = 0; i < n; i++) {
            float q = s == 0 ? 0 : fminf(fmaxf(roundf(w[i] / s), -qmax), qmax);
            out[i] = q * s;
        }
    } else {
        float top = (float)((1 << b) - 1);
        float s = lmq_f16_to_f32(lmq_f32_to_f16((mx - mn) / top));
        float z = roundf(-mn / s);
        for (size_t i = 0; i < n; i++) {
            float q = fminf(fmaxf(roundf(w[i] / s) + z, 0), top);
            out[i] = (q - z) * s;
        }
    }
}

static void ref_matrix(unsigned b, const lmq_qparams *qp, const float *w, int64_t rows,
                       int64_t cols, float *out)
{
    if (qp->gran == LMQ_GRAN_TENSOR) {
        ref_group(b, qp->asym, w, (size_t)(rows * cols), out);
        return;
    }
    int64_t g = qp->gran == LMQ_GRAN_GROUP && cols > qp->group ? qp->group : cols;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c += g) {
            size_t off = (size_t)(r * cols + c), n = (size_t)(cols - c < g ? cols - c : g);
            ref_group(b, qp->asym, w + off, n, out + off);
        }
}

static const struct {
    lmq_dtype t;
    unsigned bits;
} ints[] = { { LMQ_T_INT8, 8 }, { LMQ_T_INT4, 4 }, { LMQ_T_INT3, 3 }, { LMQ_T_INT2, 2 } };
#define N_INTS (sizeof ints / sizeof ints[0])

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static size_t distinct(const float *v, size_t n)
{
    float *t = malloc(n * sizeof *t);
    memcpy(t, v, n * sizeof *t);
    qsort(t, n, sizeof *t, cmp_float);
    size_t k = n ? 1 : 0;
    for (size_t i = 1; i < n; i++)
        k += t[i] != t[i - 1];
    free(t);
    return k;
}

static double rel_error(const float *w, const float *wq, size_t n)
{
    lmq_stats st;
    lmq_tensor_stats(w, wq, n, &st);
    return st.rel_error;
}

/* ---- the table and validation ------------------------------------------------------------ */

START_TEST(table_rows)
{
    static const struct {
        const char *name;
        unsigned bits, scale_bits;
        int integer;
        unsigned block, block_bytes; /* GGUF's block_<type> structs (ggml-common.h) */
    } want[LMQ_T_COUNT] = {
        [LMQ_T_F32] = { "fp32", 32, 0, 0 },         [LMQ_T_F16] = { "fp16", 16, 0, 0 },
        [LMQ_T_BF16] = { "bf16", 16, 0, 0 },       [LMQ_T_F8_E4M3] = { "fp8_e4m3", 8, 32, 0 },
        [LMQ_T_F8_E5M2] = { "fp8_e5m2", 8, 32, 0 }, [LMQ_T_INT8] = { "int8", 8, 16, 1 },
        [LMQ_T_INT4] = { "int4", 4, 16, 1 },       [LMQ_T_INT3] = { "int3", 3, 16, 1 },
        [LMQ_T_INT2] = { "int2", 2, 16, 1 },
        [LMQ_T_Q4_1] = { "q4_1", 0, 0, 0, 32, 20 }, [LMQ_T_Q5_0] = { "q5_0", 0, 0, 0, 32, 22 },
        [LMQ_T_Q5_1] = { "q5_1", 0, 0, 0, 32, 24 }, [LMQ_T_Q4_K] = { "q4_k", 0, 0, 0, 256, 144 },
        [LMQ_T_Q5_K] = { "q5_k", 0, 0, 0, 256, 176 }, [LMQ_T_Q6_K] = { "q6_k", 0, 0, 0, 256, 210 },
        [LMQ_T_Q8_0] = { "q8_0", 0, 0, 0, 32, 34 }, [LMQ_T_Q4_0] = { "q4_0", 0, 0, 0, 32, 18 },
        [LMQ_T_Q2_K] = { "q2_k", 0, 0, 0, 256, 84 }, [LMQ_T_Q3_K] = { "q3_k", 0, 0, 0, 256, 110 },
        [LMQ_T_IQ4_NL] = { "iq4_nl", 0, 0, 0, 32, 18 }, [LMQ_T_IQ4_XS] = { "iq4_xs", 0, 0, 0, 256, 136 },
    };
    for (unsigned t = 0; t < LMQ_T_COUNT; t++) {
        const lmq_encoding *s = lmq_encoding_of(t);
        if (!want[t].name) { /* 9: the container's carried files, no encoding */
            ck_assert_uint_eq(t, 9);
            ck_assert_ptr_null(s);
            ck_assert_ptr_null(q_scheme_get(t));
            continue;
        }
        ck_assert_ptr_nonnull(s);
        ck_assert_ptr_eq(q_scheme_get(t)->enc, s);
        ck_assert_uint_eq(s->dtype, t);
        ck_assert_str_eq(s->name, want[t].name);
        ck_assert_uint_eq(s->bits, want[t].bits);
        ck_assert_uint_eq(s->scale_bits, want[t].scale_bits);
        ck_assert_int_eq(s->integer, want[t].integer);
        ck_assert_uint_eq(s->block, want[t].block);
        ck_assert_uint_eq(s->block_bytes, want[t].block_bytes);
        ck_assert_ptr_eq(lmq_encoding_find(want[t].name), s);
    }
    ck_assert_ptr_null(q_scheme_get(LMQ_T_COUNT));
    ck_assert_ptr_null(lmq_encoding_of(LMQ_T_COUNT));
    ck_assert_ptr_null(lmq_encoding_find("int5"));
    ck_assert_str_eq(lmq_gran_name(LMQ_GRAN_CHANNEL), "channel");
    ck_assert_str_eq(lmq_gran_name(9), "?");
}
END_TEST

START_TEST(validation_errors)
{
    static const struct {
        lmq_qparams qp;
        const char *msg;
    } bad[] = {
        { { .dtype = LMQ_T_INT4, .gran = LMQ_GRAN_GROUP, .group = 0 }, "power of two >= 16" },
        { { .dtype = LMQ_T_INT4, .gran = LMQ_GRAN_GROUP, .group = 8 }, "power of two >= 16" },
        { { .dtype = LMQ_T_INT4, .gran = LMQ_GRAN_GROUP, .group = 48 }, "group size 48" },
        { { .dtype = LMQ_T_INT8, .gran = LMQ_GRAN_GROUP, .group = 100 }, "power of two" },
        { { .dtype = LMQ_T_INT4, .gran = LMQ_GRAN_CHANNEL, .group = 32 }, "only group takes" },
        { { .dtype = LMQ_T_INT4, .gran = LMQ_GRAN_NONE }, "int4 needs scales" },
        { { .dtype = LMQ_T_F16, .gran = LMQ_GRAN_CHANNEL }, "fp16 stores no scales" },
        { { .dtype = LMQ_T_BF16, .gran = LMQ_GRAN_GROUP, .group = 32 }, "bf16 stores no scales" },
        { { .dtype = LMQ_T_F16, .asym = 1 }, "integer schemes, not fp16" },
        { { .dtype = LMQ_T_F8_E4M3, .gran = LMQ_GRAN_CHANNEL, .asym = 1 }, "not fp8_e4m3" },
        { { .dtype = 42 }, "unknown dtype 42" },
        { { .dtype = LMQ_T_INT8, .gran = 7 }, "unknown granularity 7" },
        { { .dtype = LMQ_T_INT8, .gran = LMQ_GRAN_CHANNEL, .asym = 2 }, "asym must be 0 or 1" },
    };
    lmq_err err;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(lmq_qparams_check(&bad[i].qp, &err), LMQ_E_ARG);
        ck_assert_msg(strstr(err.msg, bad[i].msg), "case %zu: '%s'", i, err.msg);
        lmq_layout L;
        ck_assert_int_eq(lmq_layout_of(&bad[i].qp, 4, 64, &L, &err), LMQ_E_ARG);
    }
    const lmq_qparams good[] = {
        qp_of(LMQ_T_INT4, LMQ_GRAN_GROUP, 16, 0),  qp_of(LMQ_T_INT4, LMQ_GRAN_GROUP, 4096, 1),
        qp_of(LMQ_T_F16, LMQ_GRAN_NONE, 0, 0),     qp_of(LMQ_T_F8_E5M2, LMQ_GRAN_CHANNEL, 0, 0),
        qp_of(LMQ_T_F8_E4M3, LMQ_GRAN_NONE, 0, 0), qp_of(LMQ_T_INT2, LMQ_GRAN_TENSOR, 0, 1),
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        ck_assert_msg(lmq_qparams_check(&good[i], &err) == LMQ_OK, "%s", err.msg);

    /* Shapes: empty, negative, too many weights. */
    lmq_layout L;
    lmq_qparams qp = qp_of(LMQ_T_INT8, LMQ_GRAN_CHANNEL, 0, 0);
    ck_assert_int_eq(lmq_layout_of(&qp, 0, 64, &L, &err), LMQ_E_ARG);
    ck_assert_int_eq(lmq_layout_of(&qp, 4, -1, &L, &err), LMQ_E_ARG);
    ck_assert_int_eq(lmq_layout_of(&qp, INT64_C(1) << 30, INT64_C(1) << 30, &L, &err), LMQ_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.msg, "shape [1073741824, 1073741824]"));

    /* A buffer of the wrong size. */
    float w[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    uint8_t out[64];
    ck_assert_int_eq(q_quantize(&qp, w, 1, 8, out, sizeof out, NULL, &err), LMQ_E_ARG);
}
END_TEST

/* NaN and Inf weights are refused with their index, whatever the scheme. */
START_TEST(nonfinite_weights)
{
    const lmq_qparams qps[] = {
        qp_of(LMQ_T_F32, LMQ_GRAN_NONE, 0, 0),      qp_of(LMQ_T_F16, LMQ_GRAN_NONE, 0, 0),
        qp_of(LMQ_T_BF16, LMQ_GRAN_NONE, 0, 0),     qp_of(LMQ_T_F8_E4M3, LMQ_GRAN_CHANNEL, 0, 0),
        qp_of(LMQ_T_F8_E5M2, LMQ_GRAN_NONE, 0, 0),  qp_of(LMQ_T_INT8, LMQ_GRAN_TENSOR, 0, 0),
        qp_of(LMQ_T_INT4, LMQ_GRAN_GROUP, 16, 1),   qp_of(LMQ_T_INT3, LMQ_GRAN_CHANNEL, 0, 0),
        qp_of(LMQ_T_INT2, LMQ_GRAN_GROUP, 32, 0),
    };
    for (size_t k = 0; k < sizeof qps / sizeof qps[0]; k++) {
        float *w = gauss_matrix(k + 1, 15, 1.0);
        lmq_layout L;
        lmq_err err;
        ck_assert_int_eq(lmq_layout_of(&qps[k], 3, 5, &L, &err), LMQ_OK);
        uint8_t *buf = malloc(L.bytes);
        w[7] = NAN;
        ck_assert_int_eq(q_quantize(&qps[k], w, 3, 5, buf, L.bytes, NULL, &err), LMQ_E_NUMERIC);
        ck_assert_msg(strstr(err.msg, "weight 7 (row 1, col 2) is NaN"), "%s", err.msg);
        w[7] = 0.5f;
        w[14] = -INFINITY;
        ck_assert_int_eq(q_quantize(&qps[k], w, 3, 5, buf, L.bytes, NULL, &err), LMQ_E_NUMERIC);
        ck_assert_msg(strstr(err.msg, "weight 14 (row 2, col 4) is Inf"), "%s", err.msg);
        free(buf);
        free(w);
    }
}
END_TEST

/* Finite weights that a format cannot hold are refused rather than stored as Inf or NaN. */
START_TEST(overflow_refused)
{
    lmq_err err;
    uint8_t buf[64];
    float w[6] = { 1, 2, 3, 70000.0f, 5, 6 };
    lmq_qparams f16 = qp_of(LMQ_T_F16, LMQ_GRAN_NONE, 0, 0);
    ck_assert_int_eq(q_quantize(&f16, w, 2, 3, buf, 12, NULL, &err), LMQ_E_NUMERIC);
    ck_assert_msg(strstr(err.msg, "weight 3 (70000) overflows fp16"), "%s", err.msg);
    /* past the first eight, which fp16's check reads as one vector */
    float wide[2 * 12] = { 0 };
    wide[13] = -70000.0f;
    ck_assert_int_eq(q_quantize(&f16, wide, 2, 12, buf, 48, NULL, &err), LMQ_E_NUMERIC);
    ck_assert_msg(strstr(err.msg, "weight 13 (-70000) overflows fp16"), "%s", err.msg);
    w[3] = FLT_MAX;
    lmq_qparams bf16 = qp_of(LMQ_T_BF16, LMQ_GRAN_NONE, 0, 0);
    ck_assert_int_eq(q_quantize(&bf16, w, 2, 3, buf, 12, NULL, &err), LMQ_E_NUMERIC);
    ck_assert_ptr_nonnull(strstr(err.msg, "overflows bf16"));
    /* int8 symmetric: 1e7 / 127 is beyond the largest half (65504); row 1 is weights 3..5. */
    w[3] = 1e7f;
    lmq_qparams i8 = qp_of(LMQ_T_INT8, LMQ_GRAN_CHANNEL, 0, 0);
    ck_assert_int_eq(q_quantize(&i8, w, 2, 3, buf, 2 * 2 + 6, NULL, &err), LMQ_E_NUMERIC);
    ck_assert_msg(strstr(err.msg, "weights 3..5: ") && strstr(err.msg, "beyond the fp16 range"),
                  "%s", err.msg);
    /* int2 asymmetric: a range of 2e5 over 3 steps needs a scale of 66667. */
    w[3] = -1e5f;
    w[4] = 1e5f;
    lmq_qparams i2 = qp_of(LMQ_T_INT2, LMQ_GRAN_TENSOR, 0, 1);
    ck_assert_int_eq(q_quantize(&i2, w, 2, 3, buf, 2 + 2 + 2, NULL, &err), LMQ_E_NUMERIC);
    /* ...while fp8 saturates by definition. */
    lmq_qparams e4 = qp_of(LMQ_T_F8_E4M3, LMQ_GRAN_NONE, 0, 0);
    float back[6];
    free(roundtrip(&e4, w, 2, 3, back, NULL));
    ck_assert_float_eq(back[3], -448.0f);
    ck_assert_float_eq(back[4], 448.0f);
}
END_TEST

/* ---- storage accounting ------------------------------------------------------------------ */

START_TEST(layout_divisible)
{
    lmq_layout L;
    lmq_err err;
    for (size_t k = 0; k < N_INTS; k++)
        for (int asym = 0; asym <= 1; asym++) {
            unsigned b = ints[k].bits;
            for (uint32_t g = 16; g <= 256; g *= 2) {
                lmq_qparams qp = qp_of(ints[k].t, LMQ_GRAN_GROUP, g, asym);
                ck_assert_int_eq(lmq_layout_of(&qp, 3, 256, &L, &err), LMQ_OK);
                /* b + 16/g bits per weight (+16/g for the zero points): exact in binary. */
                ck_assert_double_eq((double)L.bits / (3 * 256), b + (asym ? 32.0 : 16.0) / g);
                ck_assert_int_eq(L.n_scales, 3 * 256 / g);
                ck_assert_int_eq(L.groups_per_row, 256 / g);
                ck_assert_uint_eq(L.zero_offset, 2 * L.n_scales);
                ck_assert_uint_eq(L.code_offset, (asym ? 4 : 2) * L.n_scales);
                ck_assert_uint_eq(L.bytes, (L.bits + 7) / 8);
            }
            lmq_qparams ch = qp_of(ints[k].t, LMQ_GRAN_CHANNEL, 0, asym);
            ck_assert_int_eq(lmq_layout_of(&ch, 4, 96, &L, &err), LMQ_OK);
            ck_assert_uint_eq(L.bits, 4 * 96 * b + 4 * 16 * (asym ? 2 : 1));
            lmq_qparams te = qp_of(ints[k].t, LMQ_GRAN_TENSOR, 0, asym);
            ck_assert_int_eq(lmq_layout_of(&te, 4, 96, &L, &err), LMQ_OK);
            ck_assert_uint_eq(L.bits, 4 * 96 * b + 16 * (asym ? 2 : 1));
            ck_assert_int_eq(L.n_scales, 1);
        }
    static const struct {
        lmq_dtype t;
        lmq_gran gran;
        uint64_t bits;
    } floats[] = {
        { LMQ_T_F32, LMQ_GRAN_NONE, 32 * 4 * 64 },  { LMQ_T_F16, LMQ_GRAN_NONE, 16 * 4 * 64 },
        { LMQ_T_BF16, LMQ_GRAN_NONE, 16 * 4 * 64 }, { LMQ_T_F8_E4M3, LMQ_GRAN_NONE, 8 * 4 * 64 },
        { LMQ_T_F8_E5M2, LMQ_GRAN_CHANNEL, 8 * 4 * 64 + 32 * 4 }, /* fp32 scales: 8.5 bpw */
    };
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
        lmq_qparams qp = qp_of(floats[i].t, floats[i].gran, 0, 0);
        ck_assert_int_eq(lmq_layout_of(&qp, 4, 64, &L, &err), LMQ_OK);
        ck_assert_uint_eq(L.bits, floats[i].bits);
        ck_assert_uint_eq(L.bytes, floats[i].bits / 8);
    }
}
END_TEST

START_TEST(layout_ragged)
{
    lmq_layout L;
    lmq_err err;
    for (size_t k = 0; k < N_INTS; k++)
        for (int asym = 0; asym <= 1; asym++) {
            uint64_t b = ints[k].bits, z = asym ? 2 : 1;
            /* cols 172, g 32: five groups of 32 and a last one of 12 in each row. */
            lmq_qparams qp = qp_of(ints[k].t, LMQ_GRAN_GROUP, 32, asym);
            ck_assert_int_eq(lmq_layout_of(&qp, 5, 172, &L, &err), LMQ_OK);
            ck_assert_int_eq(L.groups_per_row, 6);
            ck_assert_int_eq(L.group, 32);
            ck_assert_int_eq(L.n_scales, 30);
            ck_assert_uint_eq(L.bits, 5 * 172 * b + 30 * 16 * z);
            ck_assert_uint_eq(L.bytes, 30 * 2 * z + (5 * 172 * b + 7) / 8);
            /* cols 13 < g 16: the group is the whole row. */
            qp.group = 16;
            ck_assert_int_eq(lmq_layout_of(&qp, 3, 13, &L, &err), LMQ_OK);
            ck_assert_int_eq(L.groups_per_row, 1);
            ck_assert_int_eq(L.group, 13);
            ck_assert_uint_eq(L.bits, 3 * 13 * b + 3 * 16 * z);
            /* A 1-D tensor is one row: 1000 weights, g 128 -> 8 groups, the last of 104. */
            qp.group = 128;
            ck_assert_int_eq(lmq_layout_of(&qp, 1, 1000, &L, &err), LMQ_OK);
            ck_assert_int_eq(L.n_scales, 8);
            ck_assert_uint_eq(L.bits, 1000 * b + 8 * 16 * z);
        }
}
END_TEST

/* The golden tables' bits per weight for stories260K's 35 linear matrices and its embedding,
 * recomputed from the checkpoint header's shapes through lmq_layout_of. Each golden scheme name is
 * matched against q_describe() of every candidate integer scheme. */
START_TEST(golden_bpw)
{
    int32_t hdr[7];
    FILE *f = fopen(fixture(STORIES), "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fread(hdr, sizeof hdr, 1, f), 1);
    fclose(f);
    int64_t dim = hdr[0], hidden = hdr[1], layers = hdr[2], heads = hdr[3], kv = hdr[4];
    int64_t vocab = hdr[5] < 0 ? -hdr[5] : hdr[5], kv_dim = dim / heads * kv;
    ck_assert_int_eq(kv_dim, 32);
    const int64_t linear[7][2] = { { dim, dim },    { kv_dim, dim }, { kv_dim, dim },
                                   { dim, dim },    { hidden, dim }, { hidden, dim },
                                   { dim, hidden } };

    json_error_t jerr;
    json_t *root = json_load_file(fixture("golden/stories260K-tinystories-valid.json"), 0, &jerr);
    ck_assert_msg(root != NULL, "%s", jerr.text);
    json_t *schemes = json_object_get(root, "schemes");
    ck_assert(json_is_array(schemes));
    int matched = 0;
    for (size_t i = 0; i < json_array_size(schemes); i++) {
        json_t *row = json_array_get(schemes, i);
        const char *name = json_string_value(json_object_get(row, "scheme"));
        const char *note = json_string_value(json_object_get(row, "note"));
        double bpw = json_real_value(json_object_get(row, "bpw"));
        ck_assert_ptr_nonnull(name);
        /* "emb int8 per-row": the tied embedding alone, one scale per token row. */
        int emb = strncmp(name, "emb ", 4) == 0;
        char want[64];
        snprintf(want, sizeof want, "%s", name + (emb ? 4 : 0));
        char *per_row = strstr(want, "per-row");
        if (per_row)
            snprintf(per_row, sizeof want - (size_t)(per_row - want), "per-channel");
        for (size_t k = 0; k < N_INTS; k++)
            for (int gran = LMQ_GRAN_TENSOR; gran <= LMQ_GRAN_GROUP; gran++)
                for (uint32_t g = gran == LMQ_GRAN_GROUP ? 16 : 0; g <= 256; g = g ? 2 * g : 512)
                    for (int asym = 0; asym <= 1; asym++) {
                        lmq_qparams qp = qp_of(ints[k].t, (lmq_gran)gran, g, asym);
                        char desc[64];
                        if (strcmp(q_describe(&qp, desc, sizeof desc), want) != 0)
                            continue;
                        uint64_t bits = 0, weights = 0;
                        lmq_layout L;
                        lmq_err err;
                        for (int m = 0; m < (emb ? 1 : 7); m++) {
                            int64_t r = emb ? vocab : linear[m][0], c = emb ? dim : linear[m][1];
                            ck_assert_int_eq(lmq_layout_of(&qp, r, c, &L, &err), LMQ_OK);
                            bits += L.bits * (emb ? 1 : (uint64_t)layers);
                            weights += (uint64_t)(r * c) * (emb ? 1 : (uint64_t)layers);
                        }
                        ck_assert_msg((double)bits / (double)weights == bpw, "%s: %.17g vs %.17g",
                                      name, (double)bits / (double)weights, bpw);
                        /* "last group of each row has [12] weights": w2's input is hidden. */
                        static const char last_is[] = "last group of each row has [";
                        const char *last = note ? strstr(note, last_is) : NULL;
                        if (last && !emb) {
                            ck_assert_int_eq(lmq_layout_of(&qp, dim, hidden, &L, &err), LMQ_OK);
                            ck_assert_int_eq(hidden - (L.groups_per_row - 1) * L.group,
                                             atoi(last + strlen(last_is)));
                        }
                        matched++;
                    }
    }
    /* int8 per-tensor / per-channel / g128, int4 per-channel / g128 / g64 / g32 / g32 asym,
     * int3 g32, int2 g32, and the two embedding rows. */
    ck_assert_int_eq(matched, 12);
    json_decref(root);
}
END_TEST

/* ---- integer conventions ----------------------------------------------------------------- */

/* int4 symmetric, per-channel, worked by hand.
 * Row 0: max|w| = 3.5, s = 3.5 / 7 = 0.5 (fp16 0x3800). w / s = 7, -3.5, 0.5, 1.5, -6, 2.5,
 *   0, -1; roundf (half away from zero) = 7, -4, 1, 2, -6, 3, 0, -1; stored q + 8 = 15, 4, 9,
 *   10, 2, 11, 8, 7; packed low nibble first: 0x4f 0xa9 0xb2 0x78; w' = q · 0.5.
 * Row 1: max|w| = 0.7f, 0.7f / 7 rounds to the half 0x2e66 = 0.0999755859375 = s. w / s =
 *   7.0017, 0.50012, -2.5006, 3.5009, 0...; q = 7, 1, -3, 4, 0, 0, 0, 0; stored 15, 9, 5, 12,
 *   8, 8, 8, 8 -> 0x9f 0xc5 0x88 0x88; w' = q · s, e.g. 7 s = 0.6998291015625. */
START_TEST(hand_sym_int4)
{
    const float w[16] = { 3.5f, -1.75f, 0.25f, 0.75f, -3.0f, 1.25f, 0.0f, -0.5f,
                          0.7f, 0.05f, -0.25f, 0.35f, 0, 0, 0, 0 };
    const uint8_t want[] = { 0x00, 0x38, 0x66, 0x2e,                         /* scales */
                             0x4f, 0xa9, 0xb2, 0x78, 0x9f, 0xc5, 0x88, 0x88 }; /* codes */
    const float s1 = 0.0999755859375f;
    const float back_want[16] = { 3.5f, -2.0f, 0.5f, 1.0f, -3.0f, 1.5f, 0.0f, -0.5f,
                                  7 * s1, s1, -3 * s1, 4 * s1, 0, 0, 0, 0 };
    lmq_qparams qp = qp_of(LMQ_T_INT4, LMQ_GRAN_CHANNEL, 0, 0);
    float back[16];
    size_t size;
    uint8_t *buf = roundtrip(&qp, w, 2, 8, back, &size);
    ck_assert_uint_eq(size, sizeof want);
    ck_assert_mem_eq(buf, want, sizeof want);
    for (int i = 0; i < 16; i++)
        ck_assert_float_eq(back[i], back_want[i]);
    ck_assert_float_eq(back[8], 0.6998291015625f);
    free(buf);
}
END_TEST

/* int4 asymmetric, one row: min -1, max 6.5, s = 7.5 / 15 = 0.5 (0x3800), z = roundf(1 / 0.5)
 * = 2. w / s = -2, 1, 4, 13, 0.5, 2, -1.5, 6.5 -> roundf: -2, 1, 4, 13, 1, 2, -2, 7 -> + z:
 * q = 0, 3, 6, 15, 3, 4, 0, 9 -> packed 0x30 0xf6 0x43 0x90. Storage: scale 00 38, zero point
 * 02 00, codes. w' = (q - 2) · 0.5 = -1, 0.5, 2, 6.5, 0.5, 1, -1, 3.5. */
START_TEST(hand_asym_int4)
{
    const float w[8] = { -1.0f, 0.5f, 2.0f, 6.5f, 0.25f, 1.0f, -0.75f, 3.25f };
    const uint8_t want[] = { 0x00, 0x38, 0x02, 0x00, 0x30, 0xf6, 0x43, 0x90 };
    const float back_want[8] = { -1.0f, 0.5f, 2.0f, 6.5f, 0.5f, 1.0f, -1.0f, 3.5f };
    lmq_qparams qp = qp_of(LMQ_T_INT4, LMQ_GRAN_CHANNEL, 0, 1);
    float back[8];
    size_t size;
    uint8_t *buf = roundtrip(&qp, w, 1, 8, back, &size);
    ck_assert_uint_eq(size, sizeof want);
    ck_assert_mem_eq(buf, want, sizeof want);
    for (int i = 0; i < 8; i++)
        ck_assert_float_eq(back[i], back_want[i]);
    free(buf);
}
END_TEST

/* int8 per-tensor vs per-channel on two rows of very different size.
 * Per-tensor: max|w| = 127, s = 1: w' = roundf(w) = 13, -6, 0, 1 | 127, -50, 0, 3.
 * Per-channel: row 0 s = fp16(12.7 / 127) = 0.0999755859375; q = 127, -64 (-63.52), 1 (0.5001),
 *   10 (10.002); row 1 keeps s = 1. Stored codes are q + 128. */
START_TEST(hand_tensor_vs_channel)
{
    const float w[8] = { 12.7f, -6.35f, 0.05f, 1.0f, 127.0f, -50.0f, 0.4f, 3.0f };
    const float s = 0.0999755859375f;
    const float tensor_want[8] = { 13, -6, 0, 1, 127, -50, 0, 3 };
    const float channel_want[8] = { 127 * s, -64 * s, s, 10 * s, 127, -50, 0, 3 };
    float back[8];
    size_t size;
    lmq_qparams te = qp_of(LMQ_T_INT8, LMQ_GRAN_TENSOR, 0, 0);
    uint8_t *buf = roundtrip(&te, w, 2, 4, back, &size);
    const uint8_t te_bytes[] = { 0x00, 0x3c, 141, 122, 128, 129, 255, 78, 128, 131 };
    ck_assert_uint_eq(size, sizeof te_bytes);
    ck_assert_mem_eq(buf, te_bytes, sizeof te_bytes);
    for (int i = 0; i < 8; i++)
        ck_assert_float_eq(back[i], tensor_want[i]);
    free(buf);
    lmq_qparams ch = qp_of(LMQ_T_INT8, LMQ_GRAN_CHANNEL, 0, 0);
    buf = roundtrip(&ch, w, 2, 4, back, &size);
    const uint8_t ch_bytes[] = { 0x66, 0x2e, 0x00, 0x3c, 255, 64, 129, 138, 255, 78, 128, 131 };
    ck_assert_uint_eq(size, sizeof ch_bytes);
    ck_assert_mem_eq(buf, ch_bytes, sizeof ch_bytes);
    for (int i = 0; i < 8; i++)
        ck_assert_float_eq(back[i], channel_want[i]);
    ck_assert_float_eq(back[0], 12.6968994140625f);
    free(buf);
}
END_TEST

/* Every integer scheme, granularity and symmetry on Gaussian weights at odd shapes equals the
 * golden README's convention bit for bit. */
START_TEST(matches_convention)
{
    static const int64_t shapes[][2] = { { 5, 172 }, { 3, 13 }, { 7, 64 }, { 1, 1000 }, { 2, 35 } };
    const lmq_gran grans[] = { LMQ_GRAN_TENSOR, LMQ_GRAN_CHANNEL, LMQ_GRAN_GROUP, LMQ_GRAN_GROUP,
                               LMQ_GRAN_GROUP };
    const uint32_t groups[] = { 0, 0, 16, 32, 128 };
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        int64_t rows = shapes[sh][0], cols = shapes[sh][1];
        size_t n = (size_t)(rows * cols);
        float *w = gauss_matrix(100 + sh, n, 0.05), *back = malloc(n * sizeof *back),
              *ref = malloc(n * sizeof *ref);
        for (size_t k = 0; k < N_INTS; k++)
            for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++)
                for (int asym = 0; asym <= 1; asym++) {
                    lmq_qparams qp = qp_of(ints[k].t, grans[gi], groups[gi], asym);
                    free(roundtrip(&qp, w, rows, cols, back, NULL));
                    ref_matrix(ints[k].bits, &qp, w, rows, cols, ref);
                    for (size_t i = 0; i < n; i++)
                        ck_assert_msg(back[i] == ref[i], "%s [%lld,%lld] i %zu: %.9g vs %.9g",
                                      q_describe(&qp, (char[64]){ 0 }, 64), (long long)rows,
                                      (long long)cols, i, (double)back[i], (double)ref[i]);
                }
        free(w);
        free(back);
        free(ref);
    }
}
END_TEST

/* An int-b scheme uses at most 2^b - 1 (symmetric) or 2^b (asymmetric) distinct values in
 * each group; a large per-tensor group uses nearly all of them. */
START_TEST(level_counts)
{
    const int64_t rows = 6, cols = 200; /* g 32: six groups of 32 and one of 8 per row */
    float *w = gauss_matrix(7, (size_t)(rows * cols), 1.0), back[6 * 200];
    for (size_t k = 0; k < N_INTS; k++)
        for (int asym = 0; asym <= 1; asym++) {
            size_t bound = ((size_t)1 << ints[k].bits) - (asym ? 0 : 1);
            lmq_qparams qp = qp_of(ints[k].t, LMQ_GRAN_GROUP, 32, asym);
            free(roundtrip(&qp, w, rows, cols, back, NULL));
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c = 0; c < cols; c += 32) {
                    size_t n = (size_t)(cols - c < 32 ? cols - c : 32);
                    size_t levels = distinct(back + r * cols + c, n);
                    ck_assert_msg(levels <= bound && levels >= 2, "%zu levels", levels);
                }
            lmq_qparams te = qp_of(ints[k].t, LMQ_GRAN_TENSOR, 0, asym);
            free(roundtrip(&te, w, rows, cols, back, NULL));
            size_t levels = distinct(back, (size_t)(rows * cols));
            ck_assert_msg(levels <= bound && levels + 2 >= (bound < 64 ? bound : 64),
                          "int%u asym %d per-tensor: %zu levels", ints[k].bits, asym, levels);
        }
    free(w);
}
END_TEST

/* Weights already on a group's grid come back exactly. Symmetric: w = q · s with some |q| =
 * qmax, s a half. Asymmetric: w = (q - z) · s with q spanning 0 .. 2^b - 1, including groups
 * wholly positive (z < 0) or negative (z > 2^b - 1). */
START_TEST(grid_exact)
{
    const int64_t rows = 4, cols = 80; /* g 32: groups of 32, 32, 16 */
    float w[4 * 80], back[4 * 80];
    rng r = { 99 };
    for (size_t k = 0; k < N_INTS; k++)
        for (int asym = 0; asym <= 1; asym++) {
            int32_t top = (1 << ints[k].bits) - 1, qmax = top >> 1;
            for (int64_t g = 0; g < rows * 3; g++) {
                int64_t row = g / 3, c0 = (g % 3) * 32, n = g % 3 == 2 ? 16 : 32;
                float s = lmq_f16_to_f32(lmq_f32_to_f16((float)(0.001 + 0.1 * uniform(&r))));
                int32_t z = (int32_t)(g % 4 == 0 ? -20 : g % 4 == 1 ? top + 20 : top / 3);
                for (int64_t i = 0; i < n; i++) {
                    int32_t q = asym ? (int32_t)(next_u64(&r) % (uint64_t)(top + 1)) - z
                                     : (int32_t)(next_u64(&r) % (uint64_t)(2 * qmax + 1)) - qmax;
                    if (i == 0)
                        q = asym ? -z : (g % 2 ? qmax : -qmax); /* the group's extremes */
                    if (i == 1 && asym)
                        q = top - z;
                    w[row * cols + c0 + i] = (float)q * s;
                }
            }
            lmq_qparams qp = qp_of(ints[k].t, LMQ_GRAN_GROUP, 32, asym);
            free(roundtrip(&qp, w, rows, cols, back, NULL));
            for (int64_t i = 0; i < rows * cols; i++)
                ck_assert_msg(back[i] == w[i], "int%u asym %d i %lld: %.9g -> %.9g",
                              ints[k].bits, asym, (long long)i, (double)w[i], (double)back[i]);
        }
}
END_TEST

/* An outlier in one channel (group) leaves every other channel (group) bit-identical; with
 * one scale per tensor it degrades all of them. */
START_TEST(granularity_isolation)
{
    const int64_t rows = 8, cols = 96;
    const size_t n = (size_t)(rows * cols);
    float *w = gauss_matrix(11, n, 0.02), *wo = malloc(n * sizeof *wo);
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    memcpy(wo, w, n * sizeof *w);
    const int64_t orow = 3, ocol = 40; /* group 1 of row 3 when g = 32 */
    wo[orow * cols + ocol] = 2.0f;
    for (size_t k = 0; k < N_INTS; k++) {
        lmq_qparams ch = qp_of(ints[k].t, LMQ_GRAN_CHANNEL, 0, 0);
        free(roundtrip(&ch, w, rows, cols, a, NULL));
        free(roundtrip(&ch, wo, rows, cols, b, NULL));
        for (int64_t r = 0; r < rows; r++)
            if (r != orow)
                ck_assert_mem_eq(a + r * cols, b + r * cols, (size_t)cols * sizeof *a);
        ck_assert(rel_error(w + orow * cols, b + orow * cols, (size_t)cols) >
                  rel_error(w + orow * cols, a + orow * cols, (size_t)cols));

        lmq_qparams gr = qp_of(ints[k].t, LMQ_GRAN_GROUP, 32, 1);
        free(roundtrip(&gr, w, rows, cols, a, NULL));
        free(roundtrip(&gr, wo, rows, cols, b, NULL));
        for (int64_t g = 0; g < rows * 3; g++) {
            size_t off = (size_t)(g * 32);
            if (g != orow * 3 + 1) {
                ck_assert_mem_eq(a + off, b + off, 32 * sizeof *a);
            } else {
                float tmp = w[orow * cols + ocol]; /* error of the other 31 weights */
                b[orow * cols + ocol] = a[orow * cols + ocol] = tmp;
                ck_assert(rel_error(w + off, b + off, 32) > 2 * rel_error(w + off, a + off, 32));
            }
        }

        lmq_qparams te = qp_of(ints[k].t, LMQ_GRAN_TENSOR, 0, 0);
        free(roundtrip(&te, w, rows, cols, a, NULL));
        free(roundtrip(&te, wo, rows, cols, b, NULL));
        /* row 0; int2 and int3 round much of it to zero either way */
        ck_assert(rel_error(w, b, (size_t)cols) >
                  (ints[k].bits >= 4 ? 2 : 1) * rel_error(w, a, (size_t)cols));
    }
    free(w);
    free(wo);
    free(a);
    free(b);
}
END_TEST

/* On an all-positive distribution the asymmetric grid covers only the range in use. */
START_TEST(asym_beats_sym)
{
    const int64_t rows = 16, cols = 256;
    const size_t n = (size_t)(rows * cols);
    float *w = malloc(n * sizeof *w), *back = malloc(n * sizeof *back);
    rng r = { 5 };
    for (size_t i = 0; i < n; i++)
        w[i] = (float)(0.5 + uniform(&r));
    for (size_t k = 0; k < N_INTS; k++) {
        lmq_qparams sym = qp_of(ints[k].t, LMQ_GRAN_GROUP, 32, 0);
        lmq_qparams asym = qp_of(ints[k].t, LMQ_GRAN_GROUP, 32, 1);
        free(roundtrip(&sym, w, rows, cols, back, NULL));
        double es = rel_error(w, back, n);
        free(roundtrip(&asym, w, rows, cols, back, NULL));
        double ea = rel_error(w, back, n);
        /* step 1/(2^b - 1) against 1.5/qmax: about 3x smaller for b >= 3, 4.5x for int2 */
        ck_assert_msg(ea < es / 2.5, "int%u: asym %g sym %g", ints[k].bits, ea, es);
    }
    free(w);
    free(back);
}
END_TEST

/* Degenerate groups (scheme.h): never NaN, each weight within half a step of itself. */
START_TEST(degenerate_groups)
{
    const int64_t cols = 20;
    float w[5 * 20], back[5 * 20];
    for (int i = 0; i < cols; i++) {
        w[0 * cols + i] = 5.0f;                            /* constant */
        w[1 * cols + i] = -3.25f;                          /* constant, negative */
        w[2 * cols + i] = 0.0f;                            /* all zero */
        w[3 * cols + i] = 1.0f + (float)i * 0x1p-20f;      /* z = -1/s far beyond int16 */
        w[4 * cols + i] = 1000.0f + (float)i * 0.001f;     /* tight and far from zero */
    }
    for (size_t k = 0; k < N_INTS; k++) {
        lmq_qparams qp = qp_of(ints[k].t, LMQ_GRAN_CHANNEL, 0, 1);
        size_t size;
        uint8_t *buf = roundtrip(&qp, w, 5, cols, back, &size);
        for (int r = 0; r < 5; r++) {
            float s = lmq_f16_to_f32((uint16_t)(buf[2 * r] | buf[2 * r + 1] << 8));
            ck_assert(s > 0 && isfinite(s));
            for (int i = 0; i < cols; i++) {
                float x = w[r * cols + i], y = back[r * cols + i];
                ck_assert_msg(isfinite(y) && fabsf(y - x) <= s / 2 * 1.0001f,
                              "int%u row %d: %.9g -> %.9g (s %g)", ints[k].bits, r, (double)x,
                              (double)y, (double)s);
            }
        }
        ck_assert_float_eq(back[0], 5.0f); /* s = 2^-13 · 1.25, z = -32768: exactly 5 */
        for (int i = 0; i < cols; i++)
            ck_assert_float_eq(back[2 * cols + i], 0.0f);
        free(buf);
    }
    /* Symmetric: max|w| / 127 below half the smallest half rounds the scale to 0: zeros. */
    float tiny[4] = { 1e-9f, -5e-10f, 0, 2e-10f }, tb[4];
    lmq_qparams sym = qp_of(LMQ_T_INT8, LMQ_GRAN_TENSOR, 0, 0);
    uint8_t *buf = roundtrip(&sym, tiny, 1, 4, tb, NULL);
    ck_assert_uint_eq(buf[0] | buf[1], 0);
    for (int i = 0; i < 4; i++)
        ck_assert_float_eq(tb[i], 0.0f);
    free(buf);
}
END_TEST

/* ---- packing ----------------------------------------------------------------------------- */

START_TEST(pack_known_bytes)
{
    uint8_t buf[4];
    memset(buf, 0xff, sizeof buf);
    q_pack(buf, 0, (const uint32_t[]){ 1, 2, 3 }, 3, 4);
    /* the final byte's unused top nibble is cleared, the byte after it untouched */
    ck_assert_mem_eq(buf, ((const uint8_t[]){ 0x21, 0x03, 0xff }), 3);
    /* int3 1,2,3,4,5: bits 001 010 011 100 101 from bit 0 -> 11 010 001, 0 101 100 0 */
    q_pack(buf, 0, (const uint32_t[]){ 1, 2, 3, 4, 5 }, 5, 3);
    ck_assert_mem_eq(buf, ((const uint8_t[]){ 0xd1, 0x58 }), 2);
    q_pack(buf, 0, (const uint32_t[]){ 0, 1, 2, 3, 3 }, 5, 2);
    ck_assert_mem_eq(buf, ((const uint8_t[]){ 0xe4, 0x03 }), 2);
    q_pack(buf, 4, (const uint32_t[]){ 0xabc }, 1, 12); /* low nibble of byte 0 kept */
    ck_assert_mem_eq(buf, ((const uint8_t[]){ 0xc4, 0xab }), 2);
    /* whole bytes (8 or 16 bits from a byte boundary, a loop of its own): little-endian, the
     * bytes around untouched */
    memset(buf, 0xff, sizeof buf);
    q_pack(buf, 8, (const uint32_t[]){ 0xabcd }, 1, 16);
    ck_assert_mem_eq(buf, ((const uint8_t[]){ 0xff, 0xcd, 0xab, 0xff }), 4);
    q_pack(buf, 0, (const uint32_t[]){ 0x12, 0x34 }, 2, 8);
    ck_assert_mem_eq(buf, ((const uint8_t[]){ 0x12, 0x34, 0xab, 0xff }), 4);
    uint32_t back[2];
    q_unpack(buf, 8, back, 1, 16);
    ck_assert_uint_eq(back[0], 0xab34);
    q_unpack(buf, 16, back, 2, 8);
    ck_assert_uint_eq(back[0], 0xab);
    ck_assert_uint_eq(back[1], 0xff);
}
END_TEST

/* Every width at odd counts and every start offset: codes come back, bits before the start and
 * bytes after the end are untouched, and packing in pieces gives the same bytes as at once. */
START_TEST(pack_round_trip)
{
    static const unsigned widths[] = { 1, 2, 3, 4, 5, 7, 8, 11, 16, 24, 31, 32 };
    static const size_t counts[] = { 1, 7, 13, 173 };
    rng r = { 3 };
    uint32_t codes[173], back[173];
    uint8_t a[800], b[800];
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
            for (unsigned off = 0; off < 8; off++) {
                unsigned bits = widths[wi];
                size_t n = counts[ci];
                uint64_t mask = (1ull << bits) - 1;
                for (size_t i = 0; i < n; i++)
                    codes[i] = (uint32_t)(next_u64(&r) & mask);
                memset(a, 0x5a, sizeof a);
                memset(b, 0x5a, sizeof b);
                q_pack(a, 8 + off, codes, n, bits);
                size_t split = n / 3;
                q_pack(b, 8 + off, codes, split, bits);
                q_pack(b, 8 + off + split * bits, codes + split, n - split, bits);
                ck_assert_mem_eq(a, b, sizeof a);
                q_unpack(a, 8 + off, back, n, bits);
                ck_assert_mem_eq(back, codes, n * sizeof *codes);
                ck_assert_uint_eq(a[0], 0x5a);
                ck_assert_uint_eq(a[1] & ((1u << off) - 1), 0x5a & ((1u << off) - 1));
                size_t end = (8 + off + n * bits + 7) / 8;
                for (size_t i = end; i < sizeof a; i++)
                    ck_assert_uint_eq(a[i], 0x5a);
            }
}
END_TEST

/* Chunked on 1, 2 or 3 threads, quantising gives the same bytes (chunks of whole rows whose codes
 * start mid-byte when the boundary is wrong: 3-bit codes, odd widths), dequantising the same
 * floats, and a bad tensor the same error: the first non-finite weight before any group that
 * overflows, wherever the chunks fall. */
/* The primitives calibrated methods drive: fitting each group with q_fit, encoding with the
 * row's encode and writing with q_store gives q_quantize's bytes; q_store refuses codes wider
 * than the encoding and a buffer of the wrong size. */
START_TEST(store_primitives)
{
    static const lmq_qparams qps[] = {
        { LMQ_T_INT4, LMQ_GRAN_GROUP, 1, 32 }, { LMQ_T_INT2, LMQ_GRAN_GROUP, 0, 16 },
        { LMQ_T_INT8, LMQ_GRAN_CHANNEL, 1, 0 }, { LMQ_T_INT3, LMQ_GRAN_TENSOR, 0, 0 },
        { LMQ_T_F8_E4M3, LMQ_GRAN_GROUP, 0, 32 }, { LMQ_T_F16, LMQ_GRAN_NONE, 0, 0 },
    };
    const int64_t rows = 5, cols = 50;
    float *w = gauss_matrix(123, (size_t)(rows * cols), 1.0);
    uint32_t codes[250];
    q_group groups[250];
    lmq_err err;
    for (size_t k = 0; k < sizeof qps / sizeof qps[0]; k++) {
        const lmq_qparams *qp = &qps[k];
        const q_scheme *s = q_scheme_get(qp->dtype);
        lmq_layout L;
        ck_assert_int_eq(lmq_layout_of(qp, rows, cols, &L, &err), LMQ_OK);
        const int tensor = qp->gran != LMQ_GRAN_CHANNEL && qp->gran != LMQ_GRAN_GROUP;
        if (tensor)
            ck_assert_int_eq(q_fit(qp, w, (size_t)(rows * cols), 0, &groups[0], &err), LMQ_OK);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c0 = 0; c0 < cols; c0 += L.group) {
                const size_t first = (size_t)(r * cols + c0), len = (size_t)(cols - c0 < L.group ? cols - c0 : L.group);
                q_group *g = tensor ? &groups[0] : &groups[r * L.groups_per_row + c0 / L.group];
                if (!tensor)
                    ck_assert_int_eq(q_fit(qp, w + first, len, first, g, &err), LMQ_OK);
                ck_assert_int_eq(s->encode(s, g, w + first, len, first, codes + first, &err), LMQ_OK);
            }
        uint8_t *want = malloc(L.bytes), *got = malloc(L.bytes);
        ck_assert_int_eq(q_quantize(qp, w, rows, cols, want, L.bytes, NULL, &err), LMQ_OK);
        memset(got, 0xa5, L.bytes);
        ck_assert_msg(q_store(qp, rows, cols, groups, codes, got, L.bytes, &err) == LMQ_OK, "%s", err.msg);
        ck_assert_msg(memcmp(got, want, L.bytes) == 0, "scheme %zu", k);
        ck_assert_int_eq(q_store(qp, rows, cols, groups, codes, got, L.bytes + 1, &err), LMQ_E_ARG);
        if (s->enc->bits < 32) {
            codes[77] = 1u << s->enc->bits;
            ck_assert_int_eq(q_store(qp, rows, cols, groups, codes, got, L.bytes, &err), LMQ_E_ARG);
            ck_assert_msg(strstr(err.msg, "code 77"), "%s", err.msg);
        }
        free(want);
        free(got);
    }
    free(w);
}
END_TEST

START_TEST(threads_same_bytes)
{
    const struct {
        int64_t rows, cols;
        lmq_qparams qp;
        float overflow; /* a weight the scheme refuses; 0: none (fp8 saturates) */
    } cases[] = {
        { 700, 37, qp_of(LMQ_T_INT3, LMQ_GRAN_GROUP, 16, 1), 1e9f },
        { 5000, 7, qp_of(LMQ_T_INT3, LMQ_GRAN_GROUP, 16, 0), 1e9f },
        { 5000, 7, qp_of(LMQ_T_INT2, LMQ_GRAN_TENSOR, 0, 1), 1e9f },
        { 1000, 45, qp_of(LMQ_T_INT4, LMQ_GRAN_CHANNEL, 0, 0), 1e9f },
        { 1000, 45, qp_of(LMQ_T_INT8, LMQ_GRAN_TENSOR, 0, 0), 1e9f },
        { 900, 33, qp_of(LMQ_T_F8_E5M2, LMQ_GRAN_GROUP, 16, 0), 0 },
        { 900, 33, qp_of(LMQ_T_F16, LMQ_GRAN_NONE, 0, 0), 1e6f },
    };
    lmq_pool *pools[3] = { NULL };
    lmq_err err, err1;
    ck_assert(lmq_pool_create(2, &pools[1], &err) == LMQ_OK && lmq_pool_create(3, &pools[2], &err) == LMQ_OK);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const int64_t rows = cases[k].rows, cols = cases[k].cols;
        const size_t n = (size_t)(rows * cols);
        float *w = gauss_matrix(31 + k, n, 0.05), *ref = malloc(n * sizeof *ref), *back = malloc(n * sizeof *back);
        size_t size;
        uint8_t *want = roundtrip(&cases[k].qp, w, rows, cols, ref, &size), *got = malloc(size);
        for (int p = 1; p < 3; p++) {
            ck_assert_int_eq(q_quantize(&cases[k].qp, w, rows, cols, got, size, pools[p], &err), LMQ_OK);
            ck_assert_mem_eq(got, want, size);
            ck_assert_int_eq(q_dequantize(&cases[k].qp, got, size, rows, cols, back, pools[p], &err), LMQ_OK);
            ck_assert_mem_eq(back, ref, n * sizeof *back);
        }
        /* A group that overflows fp16 scales early, a NaN in a later chunk: the NaN is named. */
        w[3 * cols + 1] = cases[k].overflow ? cases[k].overflow : w[3 * cols + 1];
        w[n - cols / 2] = NAN;
        ck_assert_int_eq(q_quantize(&cases[k].qp, w, rows, cols, got, size, NULL, &err1), LMQ_E_NUMERIC);
        ck_assert_ptr_nonnull(strstr(err1.msg, "NaN"));
        for (int p = 1; p < 3; p++) {
            ck_assert_int_eq(q_quantize(&cases[k].qp, w, rows, cols, got, size, pools[p], &err), LMQ_E_NUMERIC);
            ck_assert_str_eq(err.msg, err1.msg);
        }
        /* Only the overflow left: the same message from every pool. */
        w[n - cols / 2] = 0;
        for (int p = 0; p < 3 && cases[k].overflow; p++) {
            ck_assert_int_eq(q_quantize(&cases[k].qp, w, rows, cols, got, size, pools[p], &err), LMQ_E_NUMERIC);
            if (p == 0)
                err1 = err;
            ck_assert_str_eq(err.msg, err1.msg);
        }
        free(w);
        free(ref);
        free(back);
        free(want);
        free(got);
    }
    lmq_pool_free(pools[1]);
    lmq_pool_free(pools[2]);
}
END_TEST

/* Every scheme round-trips its own storage at ragged shapes, and dequantising a slice of rows
 * equals the same rows of the whole. */
START_TEST(rows_slice)
{
    const int64_t rows = 5, cols = 50;
    float *w = gauss_matrix(21, 250, 0.1), full[250], part[250];
    const lmq_qparams qps[] = {
        qp_of(LMQ_T_INT3, LMQ_GRAN_GROUP, 16, 0),  qp_of(LMQ_T_INT3, LMQ_GRAN_GROUP, 16, 1),
        qp_of(LMQ_T_INT2, LMQ_GRAN_TENSOR, 0, 1),  qp_of(LMQ_T_INT4, LMQ_GRAN_CHANNEL, 0, 0),
        qp_of(LMQ_T_F8_E4M3, LMQ_GRAN_GROUP, 16, 0), qp_of(LMQ_T_F16, LMQ_GRAN_NONE, 0, 0),
        qp_of(LMQ_T_F32, LMQ_GRAN_NONE, 0, 0),
    };
    for (size_t k = 0; k < sizeof qps / sizeof qps[0]; k++) {
        size_t size;
        lmq_err err;
        uint8_t *buf = roundtrip(&qps[k], w, rows, cols, full, &size);
        for (int64_t r0 = 0; r0 < rows; r0++)
            for (int64_t nr = 0; r0 + nr <= rows; nr++) {
                ck_assert_int_eq(q_dequantize_rows(&qps[k], buf, size, rows, cols, r0, nr, part,
                                                   &err), LMQ_OK);
                ck_assert_mem_eq(part, full + r0 * cols, (size_t)(nr * cols) * sizeof *part);
            }
        ck_assert_int_eq(q_dequantize_rows(&qps[k], buf, size, rows, cols, 3, 3, part, &err),
                         LMQ_E_ARG);
        ck_assert_int_eq(q_dequantize_rows(&qps[k], buf, size, rows, cols, -1, 1, part, &err),
                         LMQ_E_ARG);
        free(buf);
    }
    free(w);
}
END_TEST

/* Stored bytes that are the wrong size or decode to NaN/Inf are refused. */
START_TEST(hostile_bytes)
{
    lmq_err err;
    float out[8];
    lmq_qparams i4 = qp_of(LMQ_T_INT4, LMQ_GRAN_CHANNEL, 0, 0);
    uint8_t buf[6] = { 0x00, 0x3c, 0x12, 0x34, 0x56, 0x78 };
    ck_assert_int_eq(q_dequantize(&i4, buf, 6, 1, 8, out, NULL, &err), LMQ_OK);
    ck_assert_int_eq(q_dequantize(&i4, buf, 5, 1, 8, out, NULL, &err), LMQ_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "has 5 bytes; int4 [1, 8] needs 6"));
    buf[1] = 0x7c; /* scale = +Inf */
    ck_assert_int_eq(q_dequantize(&i4, buf, 6, 1, 8, out, NULL, &err), LMQ_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "element 0 (row 0)"));
    lmq_qparams f16 = qp_of(LMQ_T_F16, LMQ_GRAN_NONE, 0, 0);
    uint8_t h[6] = { 0x00, 0x3c, 0x00, 0x7e, 0x00, 0x00 }; /* 1.0, NaN, 0 */
    ck_assert_int_eq(q_dequantize(&f16, h, 6, 1, 3, out, NULL, &err), LMQ_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "element 1 (row 0)"));
    lmq_qparams e4 = qp_of(LMQ_T_F8_E4M3, LMQ_GRAN_NONE, 0, 0);
    uint8_t e[3] = { 0x38, 0x7e, 0xff }; /* 1.0, 448, NaN */
    ck_assert_int_eq(q_dequantize(&e4, e, 3, 1, 3, out, NULL, &err), LMQ_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "element 2"));
    const lmq_qparams nine = { .dtype = 9 }; /* the container's carried files: no encoding */
    ck_assert_int_eq(q_dequantize(&nine, e, 3, 1, 3, out, NULL, &err), LMQ_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.msg, "unknown dtype 9"));
    ck_assert_int_eq(q_quantize(&nine, out, 1, 3, e, 3, NULL, &err), LMQ_E_ARG);
}
END_TEST

/* ---- float rows -------------------------------------------------------------------------- */

/* f32 / f16 / bf16 rows store exactly common/fp.h's conversion, little-endian. */
static uint32_t f32_bits(float x) { return lmq_f32_bits(x); }
static float f32_back(uint32_t c) { return lmq_bits_f32(c); }
static uint32_t f16_bits(float x) { return lmq_f32_to_f16(x); }
static float f16_back(uint32_t c) { return lmq_f16_to_f32((uint16_t)c); }
static uint32_t bf16_bits(float x) { return lmq_f32_to_bf16(x); }
static float bf16_back(uint32_t c) { return lmq_bf16_to_f32((uint16_t)c); }

START_TEST(float_rows)
{
    enum { N = 200 };
    float w[N], back[N];
    rng r = { 17 };
    /* zeros, the f16 edge (65519 rounds down to 65504), f16 subnormals and the tie below the
     * smallest one, ties to even at 1, and values far below f16's range */
    const float special[] = { 0.0f, -0.0f, 65504.0f, 65519.0f, -65519.0f, 0x1p-24f, 0x1p-25f,
                              1.0f + 0x1p-11f, 1.0f + 0x3p-11f, 1e-30f };
    for (int i = 0; i < N; i++)
        w[i] = i < 10 ? special[i] : (float)(gauss(&r) * pow(10.0, (double)(i % 12) - 8));
    static const struct {
        lmq_dtype t;
        unsigned bytes;
        uint32_t (*code)(float);
        float (*value)(uint32_t);
    } rows[] = { { LMQ_T_F32, 4, f32_bits, f32_back },
                 { LMQ_T_F16, 2, f16_bits, f16_back },
                 { LMQ_T_BF16, 2, bf16_bits, bf16_back } };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        lmq_qparams qp = qp_of(rows[k].t, LMQ_GRAN_NONE, 0, 0);
        size_t size;
        uint8_t *buf = roundtrip(&qp, w, 1, N, back, &size);
        ck_assert_uint_eq(size, (size_t)N * rows[k].bytes);
        for (int i = 0; i < N; i++) {
            uint32_t want = rows[k].code(w[i]), got = 0;
            for (unsigned j = 0; j < rows[k].bytes; j++)
                got |= (uint32_t)buf[(size_t)i * rows[k].bytes + j] << (8 * j);
            ck_assert_uint_eq(got, want);
            ck_assert_uint_eq(lmq_f32_bits(back[i]), lmq_f32_bits(rows[k].value(want)));
        }
        free(buf);
    }
    /* bf16 keeps fp32's range. */
    const float huge[2] = { 1e30f, -3e38f };
    lmq_qparams bf = qp_of(LMQ_T_BF16, LMQ_GRAN_NONE, 0, 0);
    free(roundtrip(&bf, huge, 1, 2, back, NULL));
    ck_assert_float_eq(back[0], lmq_bf16_to_f32(lmq_f32_to_bf16(1e30f)));
    ck_assert_float_eq(back[1], lmq_bf16_to_f32(lmq_f32_to_bf16(-3e38f)));
}
END_TEST

/* All 256 codes of both fp8 formats: known values, order, round trip, ties to even at every
 * midpoint, saturation and underflow. */
START_TEST(fp8_exhaustive)
{
    static const struct {
        const q_fp8_format *f;
        float min_sub;
        uint8_t one, two, three_halves, min_normal;
        float min_normal_value;
    } fmts[] = {
        { &q_fp8_e4m3, 0x1p-9f, 0x38, 0x40, 0x3c, 0x08, 0x1p-6f },
        { &q_fp8_e5m2, 0x1p-16f, 0x3c, 0x40, 0x3e, 0x04, 0x1p-14f },
    };
    for (size_t k = 0; k < 2; k++) {
        const q_fp8_format *f = fmts[k].f;
        ck_assert_float_eq(q_fp8_decode(f, fmts[k].one), 1.0f);
        ck_assert_float_eq(q_fp8_decode(f, fmts[k].one | 0x80), -1.0f);
        ck_assert_float_eq(q_fp8_decode(f, fmts[k].two), 2.0f);
        ck_assert_float_eq(q_fp8_decode(f, fmts[k].three_halves), 1.5f);
        ck_assert_float_eq(q_fp8_decode(f, 0x01), fmts[k].min_sub);
        ck_assert_float_eq(q_fp8_decode(f, fmts[k].min_normal), fmts[k].min_normal_value);
        ck_assert_float_eq(q_fp8_decode(f, f->max_code), f->max);
        int finite = 0;
        for (unsigned c = 0; c < 256; c++) {
            float v = q_fp8_decode(f, (uint8_t)c);
            unsigned a = c & 0x7f;
            if (f->has_inf) { /* e5m2: 0x7c Inf, 0x7d..0x7f NaN */
                ck_assert(!!isinf(v) == (a == 0x7c));
                ck_assert(!!isnan(v) == (a > 0x7c));
            } else { /* e4m3: only S.1111.111 is NaN */
                ck_assert(!isinf(v));
                ck_assert(!!isnan(v) == (a == 0x7f));
            }
            if (isfinite(v)) {
                finite++;
                ck_assert_uint_eq(q_fp8_encode(f, v), c);
                ck_assert(!!signbit(v) == !!(c & 0x80));
            }
        }
        ck_assert_int_eq(finite, 2 * (f->max_code + 1));
        for (unsigned c = 0; c < f->max_code; c++) {
            float lo = q_fp8_decode(f, (uint8_t)c), hi = q_fp8_decode(f, (uint8_t)(c + 1));
            ck_assert(hi > lo);
            float mid = (lo + hi) / 2; /* exact: fp8 values carry at most 4 significant bits */
            uint8_t even = (uint8_t)((c & 1) ? c + 1 : c);
            ck_assert_uint_eq(q_fp8_encode(f, mid), even);
            ck_assert_uint_eq(q_fp8_encode(f, -mid), even | 0x80);
            ck_assert_uint_eq(q_fp8_encode(f, nextafterf(mid, 0)), c);
            ck_assert_uint_eq(q_fp8_encode(f, nextafterf(mid, INFINITY)), c + 1);
        }
        /* Saturation: past the largest value (including where IEEE rounding would give Inf). */
        float next = f->max + (f->max - q_fp8_decode(f, f->max_code - 1));
        const float big[] = { (f->max + next) / 2, nextafterf((f->max + next) / 2, INFINITY),
                              next, 1e30f, INFINITY };
        for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
            ck_assert_uint_eq(q_fp8_encode(f, big[i]), f->max_code);
            ck_assert_uint_eq(q_fp8_encode(f, -big[i]), f->max_code | 0x80);
        }
        ck_assert(isnan(q_fp8_decode(f, q_fp8_encode(f, NAN))));
        /* Underflow: half the smallest subnormal ties to zero; anything above goes up. */
        ck_assert_uint_eq(q_fp8_encode(f, fmts[k].min_sub / 2), 0);
        ck_assert_uint_eq(q_fp8_encode(f, nextafterf(fmts[k].min_sub / 2, 1)), 1);
        ck_assert_uint_eq(q_fp8_encode(f, 1e-30f), 0);
        ck_assert_uint_eq(q_fp8_encode(f, 1e-40f), 0); /* an fp32 subnormal */
        ck_assert_uint_eq(q_fp8_encode(f, -1e-40f), 0x80);
    }
}
END_TEST

/* fp8 rows: s = max|w| / fmax per group in fp32, w' = fp8(w / s) · s; a zero row stays zero. */
START_TEST(fp8_rows)
{
    const int64_t rows = 3, cols = 40;
    float *w = gauss_matrix(31, 120, 0.3), back[120];
    for (int i = 0; i < cols; i++)
        w[cols + i] = 0.0f;
    w[2 * cols + 17] = -3.0f; /* row 2's max|w| */
    static const struct {
        lmq_dtype t;
        const q_fp8_format *f;
        lmq_gran gran;
        uint32_t group;
        double rel; /* half an ulp, relative: 2^-(m+1) */
    } cases[] = {
        { LMQ_T_F8_E4M3, &q_fp8_e4m3, LMQ_GRAN_CHANNEL, 0, 1.0 / 16 },
        { LMQ_T_F8_E5M2, &q_fp8_e5m2, LMQ_GRAN_CHANNEL, 0, 1.0 / 8 },
        { LMQ_T_F8_E4M3, &q_fp8_e4m3, LMQ_GRAN_GROUP, 16, 1.0 / 16 },
        { LMQ_T_F8_E5M2, &q_fp8_e5m2, LMQ_GRAN_TENSOR, 0, 1.0 / 8 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        lmq_qparams qp = qp_of(cases[k].t, cases[k].gran, cases[k].group, 0);
        lmq_layout L;
        lmq_err err;
        ck_assert_int_eq(lmq_layout_of(&qp, rows, cols, &L, &err), LMQ_OK);
        uint8_t *buf = roundtrip(&qp, w, rows, cols, back, NULL);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {
                /* the scale, recomputed from the group's weights and compared with storage */
                int tensor = qp.gran == LMQ_GRAN_TENSOR;
                int64_t gi = c / L.group, idx = tensor ? 0 : r * L.groups_per_row + gi;
                int64_t c0 = tensor ? 0 : r * cols + gi * L.group;
                int64_t left = cols - gi * L.group;
                int64_t len = tensor ? rows * cols : left < L.group ? left : L.group;
                float amax = 0;
                for (int64_t i = 0; i < len; i++)
                    amax = fmaxf(amax, fabsf(w[c0 + i]));
                float s = amax / cases[k].f->max;
                uint32_t stored = 0;
                for (int j = 0; j < 4; j++)
                    stored |= (uint32_t)buf[idx * 4 + j] << (8 * j);
                ck_assert_uint_eq(stored, lmq_f32_bits(s));
                float x = w[r * cols + c], y = back[r * cols + c];
                uint8_t code = buf[L.code_offset + (size_t)(r * cols + c)];
                if (s == 0) {
                    ck_assert_float_eq(y, 0.0f);
                    continue;
                }
                ck_assert_uint_eq(code, q_fp8_encode(cases[k].f, x / s));
                ck_assert_float_eq(y, q_fp8_decode(cases[k].f, code) * s);
                if (fabsf(x) == amax)
                    ck_assert_uint_eq(code & 0x7f, cases[k].f->max_code);
                if (fabsf(x / s) >= q_fp8_decode(cases[k].f, 1u << cases[k].f->man_bits))
                    ck_assert_msg(fabs((double)y - x) <= cases[k].rel * 1.0001 * fabs(x),
                                  "%g -> %g", (double)x, (double)y);
            }
        free(buf);
    }
    free(w);
}
END_TEST

/* ---- descriptions, statistics, speed ----------------------------------------------------- */

START_TEST(describe)
{
    char buf[128];
    lmq_qparams a = qp_of(LMQ_T_INT4, LMQ_GRAN_GROUP, 32, 1);
    ck_assert_str_eq(q_describe(&a, buf, sizeof buf), "int4 g32 asym");
    lmq_qparams b = qp_of(LMQ_T_INT8, LMQ_GRAN_TENSOR, 0, 0);
    ck_assert_str_eq(q_describe(&b, buf, sizeof buf), "int8 per-tensor");
    lmq_qparams c = qp_of(LMQ_T_F8_E4M3, LMQ_GRAN_CHANNEL, 0, 0);
    ck_assert_str_eq(q_describe(&c, buf, sizeof buf), "fp8_e4m3 per-channel");
    lmq_qparams d = qp_of(LMQ_T_BF16, LMQ_GRAN_NONE, 0, 0);
    ck_assert_str_eq(q_describe(&d, buf, sizeof buf), "bf16");
    lmq_qparams e = qp_of(LMQ_T_INT4, LMQ_GRAN_GROUP, 20, 0);
    ck_assert_ptr_nonnull(strstr(q_describe(&e, buf, sizeof buf), "invalid (group size 20"));
}
END_TEST

/* An all-zero group's scale is its first weight's zero over qmax, sign included, wherever zeros
 * of the other sign lie (the fit compares eight weights at a time, and zeros of both signs
 * compare equal). */
START_TEST(fit_zero_sign)
{
    const lmq_qparams qp = { LMQ_T_INT4, LMQ_GRAN_GROUP, 0, 32 };
    float w[32] = { 0 };
    for (int first = 0; first < 2; first++)
        for (int k = 1; k < 32; k++) {
            memset(w, 0, sizeof w);
            w[0] = first ? -0.0f : 0.0f;
            w[k] = -0.0f;
            q_group g;
            lmq_err err;
            ck_assert_int_eq(q_fit(&qp, w, 32, 0, &g, &err), LMQ_OK);
            ck_assert_uint_eq(g.scale_code, first ? 0x8000u : 0u);
        }
}
END_TEST

/* A quotient beyond float's range (a huge weight over a subnormal scale, as a calibrated method
 * may hand encode) clamps like any other, eight at a time as one by one: +Inf to the top code,
 * -Inf to the lowest. */
START_TEST(encode_overflow)
{
    const q_scheme *s = q_scheme_get(LMQ_T_INT4);
    const q_group g = { .scale = 0x1p-24f, .zero = 8, .lo = 1 };
    float w[9];
    uint32_t codes[9];
    lmq_err err;
    for (int i = 0; i < 9; i++)
        w[i] = i % 2 ? -3e38f : 3e38f;
    ck_assert_int_eq(s->encode(s, &g, w, 9, 0, codes, &err), LMQ_OK);
    for (int i = 0; i < 9; i++)
        ck_assert_uint_eq(codes[i], i % 2 ? 1u : 15u);
}
END_TEST

START_TEST(stats_known)
{
    lmq_stats st;
    /* ±1: rms 1, peak 1, m4 / m2^2 = 1 -> excess kurtosis -2; W' = 0.9 W -> error 0.1 */
    const float w[4] = { 1, -1, 1, -1 }, wq[4] = { 0.9f, -0.9f, 0.9f, -0.9f };
    lmq_tensor_stats(w, wq, 4, &st);
    ck_assert_double_eq(st.rms, 1.0);
    ck_assert_double_eq(st.peak, 1.0);
    ck_assert_double_eq(st.kurtosis, -2.0);
    ck_assert_double_eq_tol(st.rel_error, 1.0 - (double)0.9f, 1e-15);
    lmq_tensor_stats(w, NULL, 4, &st);
    ck_assert_double_eq(st.rel_error, 0.0);
    /* zeros: everything 0; a non-zero reconstruction of zero is infinitely wrong */
    const float z[3] = { 0, 0, 0 }, nz[3] = { 0, 1, 0 };
    lmq_tensor_stats(z, z, 3, &st);
    ck_assert(st.rms == 0 && st.peak == 0 && st.kurtosis == 0 && st.rel_error == 0);
    lmq_tensor_stats(z, nz, 3, &st);
    ck_assert(isinf(st.rel_error));

    /* 1..13: the sums run eight at a time, so the peak and the one error sit past the last
     * whole eight; Σ i² = 819. */
    float ramp[13], ramp_q[13];
    for (int i = 0; i < 13; i++)
        ramp[i] = ramp_q[i] = (float)(i + 1);
    ramp_q[12] += 1;
    lmq_tensor_stats(ramp, ramp_q, 13, &st);
    ck_assert_double_eq(st.peak, 13.0);
    ck_assert_double_eq_tol(st.rel_error, sqrt(1.0 / 819), 1e-15);
    ck_assert_double_eq_tol(st.rms, sqrt(819.0 / 13), 1e-14);

    /* One spike among n zeros is Bernoulli(p = 1/n): excess kurtosis (1 - 6pq) / (pq). */
    enum { N = 1000 };
    float *spike = calloc(N, sizeof *spike);
    spike[123] = -7.0f;
    lmq_tensor_stats(spike, NULL, N, &st);
    double p = 1.0 / N, pq = p * (1 - p);
    ck_assert_double_eq_tol(st.kurtosis, (1 - 6 * pq) / pq, 1e-9);
    ck_assert_double_eq(st.peak, 7.0);
    ck_assert_double_eq_tol(st.rms, 7.0 / sqrt(N), 1e-15);
    free(spike);

    /* An evenly spaced grid on [-1, 1] is uniform: kurtosis -1.2, rms 1/sqrt(3). */
    enum { M = 200001 };
    float *u = malloc(M * sizeof *u);
    for (int i = 0; i < M; i++)
        u[i] = (float)(-1.0 + 2.0 * i / (M - 1));
    lmq_tensor_stats(u, NULL, M, &st);
    ck_assert_double_eq_tol(st.kurtosis, -1.2, 1e-4);
    ck_assert_double_eq_tol(st.rms, 1 / sqrt(3.0), 1e-5);
    free(u);

    /* Gaussian: kurtosis 0 (standard error sqrt(24 / n) = 0.005). */
    float *g = gauss_matrix(77, 1000000, 2.0);
    lmq_tensor_stats(g, NULL, 1000000, &st);
    ck_assert_double_eq_tol(st.kurtosis, 0.0, 0.03);
    ck_assert_double_eq_tol(st.rms, 2.0, 0.01);
    free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("schemes");
    TCase *tc = tcase_create("schemes");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, table_rows);
    tcase_add_test(tc, validation_errors);
    tcase_add_test(tc, nonfinite_weights);
    tcase_add_test(tc, overflow_refused);
    tcase_add_test(tc, layout_divisible);
    tcase_add_test(tc, layout_ragged);
    tcase_add_test(tc, golden_bpw);
    tcase_add_test(tc, hand_sym_int4);
    tcase_add_test(tc, hand_asym_int4);
    tcase_add_test(tc, hand_tensor_vs_channel);
    tcase_add_test(tc, matches_convention);
    tcase_add_test(tc, level_counts);
    tcase_add_test(tc, grid_exact);
    tcase_add_test(tc, granularity_isolation);
    tcase_add_test(tc, asym_beats_sym);
    tcase_add_test(tc, degenerate_groups);
    tcase_add_test(tc, pack_known_bytes);
    tcase_add_test(tc, pack_round_trip);
    tcase_add_test(tc, rows_slice);
    tcase_add_test(tc, store_primitives);
    tcase_add_test(tc, threads_same_bytes);
    tcase_add_test(tc, hostile_bytes);
    tcase_add_test(tc, float_rows);
    tcase_add_test(tc, fp8_exhaustive);
    tcase_add_test(tc, fp8_rows);
    tcase_add_test(tc, describe);
    tcase_add_test(tc, stats_known);
    tcase_add_test(tc, fit_zero_sign);
    tcase_add_test(tc, encode_overflow);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
