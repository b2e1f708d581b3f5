#include "schemes/scheme.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/fp.h"
#include "common/le.h"
#include "common/vec.h"
#include "schemes/fp8.h"
#include "schemes/gguf_blocks.h"
#include "schemes/gguf_quant.h"
#include "schemes/pack.h"

/* Codes are encoded and decoded through a small buffer, so a group of any size (a whole
 * tensor, per-tensor) needs no allocation. */
enum { CHUNK = 1024 };

/* ---- scales ---------------------------------------------------------------------------- */

static float scale_value(const q_scheme *s, uint32_t code)
{
    return s->enc->scale_bits == 16 ? lmq_f16_to_f32((uint16_t)code) : lmq_bits_f32(code);
}

static void set_scale_code(const q_scheme *s, q_group *g, uint32_t code)
{
    g->scale_code = code;
    g->scale = scale_value(s, code);
}

/* Rounds v to the stored scale format (fp16 round-to-nearest-even, or fp32 as is). */
static void set_scale(const q_scheme *s, q_group *g, float v)
{
    set_scale_code(s, g, s->enc->scale_bits == 16 ? lmq_f32_to_f16(v) : lmq_f32_bits(v));
}

/* ---- integer codes ----------------------------------------------------------------------- */

/* roundf (halves away from zero), inline and without a branch that mispredicts: the libm call
 * cost as much as the rest of encoding. Below 2^23, |x| + 0.5 is exact in double, so truncating
 * it rounds; from 2^23 on every float is an integer already. Equal to roundf for all floats. */
static inline float round_half_away(float x)
{
    float a = fabsf(x);
    if (!(a < 0x1p23f))
        return x;
    return copysignf((float)(int32_t)((double)a + 0.5), x);
}

/* Whether z = roundf(-mn / s) exists and fits the int16 zero point. */
static int zero_fits(float mn, float s)
{
    if (!(s > 0))
        return 0;
    float z = round_half_away(-mn / s);
    return z >= -32768.0f && z <= 32767.0f;
}

/* b's lanes where m is set, a's elsewhere. */
static inline void blend8(v8f *a, const v8i *m, const v8f *b)
{
    *a = (v8f)(((v8i)*b & *m) | ((v8i)*a & ~*m));
}

/* The least and the greatest of w[0..n) (finite, checked before), the first of equals as the
 * scalar loop keeps it. Eight lanes at a time, then the scalar loop again only where the answer
 * is a zero, whose sign the lanes could have taken from another element than the first. */
VEC_CLONES
static void min_max(const float *w, size_t n, float *lo, float *hi)
{
    float mn = w[0], mx = w[0];
    size_t i = 1;
    if (n >= 2 * VEC_LANES) {
        v8f a, b;
        memcpy(&a, w, sizeof a);
        b = a;
        for (i = VEC_LANES; i + VEC_LANES <= n; i += VEC_LANES) {
            v8f x;
            memcpy(&x, w + i, sizeof x);
            const v8i less = x < a, more = x > b;
            blend8(&a, &less, &x);
            blend8(&b, &more, &x);
        }
        for (int l = 0; l < VEC_LANES; l++) {
            mn = a[l] < mn ? a[l] : mn;
            mx = b[l] > mx ? b[l] : mx;
        }
        if (mn == 0 || mx == 0)
            i = 1, mn = mx = w[0];
    }
    for (; i < n; i++) {
        mn = w[i] < mn ? w[i] : mn;
        mx = w[i] > mx ? w[i] : mx;
    }
    *lo = mn;
    *hi = mx;
}

static lmq_code int_fit(const q_scheme *s, int asym, const float *w, size_t n, q_group *g,
                        lmq_err *err)
{
    float mn, mx;
    min_max(w, n, &mn, &mx);
    uint32_t top = (1u << s->enc->bits) - 1;
    if (!asym) {
        uint32_t qmax = top >> 1;
        set_scale(s, g, (-mn > mx ? -mn : mx) / (float)qmax);
        g->zero = (int32_t)qmax + 1;
        g->lo = 1;
    } else {
        set_scale(s, g, (mx - mn) / (float)top);
        /* Degenerate groups (see scheme.h): the smallest scale whose zero point fits int16. */
        if (isfinite(g->scale) && !zero_fits(mn, g->scale)) {
            float least = fabsf(mn) / 32767.0f;
            set_scale(s, g, least > 0x1p-24f ? least : 0x1p-24f);
            while (isfinite(g->scale) && !zero_fits(mn, g->scale))
                set_scale_code(s, g, g->scale_code + 1);
        }
        g->lo = 0;
    }
    if (!isfinite(g->scale))
        return lmq_fail(err, LMQ_E_NUMERIC,
                        "weights in [%g, %g] need a %s scale beyond the fp16 range", (double)mn,
                        (double)mx, s->enc->name);
    if (asym)
        g->zero = (int32_t)round_half_away(-mn / g->scale);
    return LMQ_OK;
}

/* int_encode's rule for 8 weights (the weights are finite, checked before), lane by lane the
 * scalar loop's operations: the division, round_half_away, the zero, the clamp. Encoding was a
 * quarter of quantize's time one weight at a time. */
static inline void encode8(const float *w, float scale, float z, float lo, float hi, uint32_t *codes)
{
    v8f x, q;
    memcpy(&x, w, sizeof x);
    x /= scale;
    const v8f a = (v8f)((v8i)x & INT32_MAX), big = { 0x1p23f, 0x1p23f, 0x1p23f, 0x1p23f,
                                                     0x1p23f, 0x1p23f, 0x1p23f, 0x1p23f };
    const v8i whole = a >= big; /* integers already (and ±Inf) */
    v8f am = a;
    blend8(&am, &whole, &big); /* keeps the conversion in range */
    const v8d half = __builtin_convertvector(am, v8d) + 0.5;
    q = (v8f)((v8i)__builtin_convertvector(__builtin_convertvector(half, v8i), v8f) | ((v8i)x & INT32_MIN));
    blend8(&q, &whole, &x);
    q += z;
    const v8f vlo = { lo, lo, lo, lo, lo, lo, lo, lo }, vhi = { hi, hi, hi, hi, hi, hi, hi, hi };
    const v8i below = q < vlo;
    blend8(&q, &below, &vlo);
    const v8i above = q > vhi;
    blend8(&q, &above, &vhi);
    const v8u c = __builtin_convertvector(q, v8u);
    memcpy(codes, &c, sizeof c);
}

/* One rule for both symmetries: code = clamp(roundf(w / s) + zero, lo, 2^b - 1). Symmetric
 * codes are q + 2^(b-1) with lo = 1, i.e. q clamped to [-qmax, qmax]; every term is an integer
 * held exactly in a float. */
VEC_CLONES
static lmq_code int_encode(const q_scheme *s, const q_group *g, const float *w, size_t n,
                           size_t first, uint32_t *codes, lmq_err *err)
{
    (void)first;
    (void)err;
    if (g->scale == 0) { /* symmetric all-zero (or underflowed) group: q = 0 */
        for (size_t i = 0; i < n; i++)
            codes[i] = (uint32_t)g->zero;
        return LMQ_OK;
    }
    const float lo = (float)g->lo, hi = (float)((1u << s->enc->bits) - 1), z = (float)g->zero;
    size_t i = 0;
    for (; i + VEC_LANES <= n; i += VEC_LANES)
        encode8(w + i, g->scale, z, lo, hi, codes + i);
    for (; i < n; i++) {
        float q = round_half_away(w[i] / g->scale) + z;
        q = q < lo ? lo : q > hi ? hi : q;
        codes[i] = (uint32_t)q;
    }
    return LMQ_OK;
}

VEC_CLONES
static void int_decode(const q_scheme *s, const q_group *g, const uint32_t *codes, size_t n,
                       float *out)
{
    (void)s;
    size_t i = 0;
    for (; i + VEC_LANES <= n; i += VEC_LANES) {
        v8i c;
        memcpy(&c, codes + i, sizeof c);
        const v8f v = __builtin_convertvector(c - g->zero, v8f) * g->scale;
        memcpy(out + i, &v, sizeof v);
    }
    for (; i < n; i++)
        out[i] = (float)((int32_t)codes[i] - g->zero) * g->scale;
}

/* ---- float codes ------------------------------------------------------------------------- */

/* fp8 scales: the group's max|w| maps onto the format's largest finite value. */
static lmq_code float_fit(const q_scheme *s, int asym, const float *w, size_t n, q_group *g,
                          lmq_err *err)
{
    (void)asym;
    (void)err;
    float amax = 0;
    for (size_t i = 0; i < n; i++)
        amax = fabsf(w[i]) > amax ? fabsf(w[i]) : amax;
    set_scale(s, g, amax / s->enc->fmax);
    return LMQ_OK;
}

static lmq_code overflow(const q_scheme *s, size_t index, float w, lmq_err *err)
{
    return lmq_fail(err, LMQ_E_NUMERIC, "weight %zu (%g) overflows %s", index, (double)w, s->enc->name);
}

static lmq_code float_encode(const q_scheme *s, const q_group *g, const float *w, size_t n,
                             size_t first, uint32_t *codes, lmq_err *err)
{
    for (size_t i = 0; i < n; i++) {
        float x = g->scale != 0 ? w[i] / g->scale : 0.0f;
        codes[i] = s->to_code(x);
        if (!isfinite(s->from_code(codes[i])))
            return overflow(s, first + i, w[i], err);
    }
    return LMQ_OK;
}

static void float_decode(const q_scheme *s, const q_group *g, const uint32_t *codes, size_t n,
                         float *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = s->from_code(codes[i]) * g->scale;
}

/* The first of the n values whose exponent field (mask) is all ones (Inf or NaN), else n:
 * eight at a time without an exit each, the lanes' tests gathered and looked at once (a test
 * and a branch per weight had been a sixth of an fp16 recipe's quantize). bits: 16 or 32. */
VEC_CLONES
static size_t first_special(const void *v, size_t n, unsigned bits, uint32_t mask)
{
    v8i any = { 0 };
    size_t i = 0;
    for (; i + VEC_LANES <= n; i += VEC_LANES) {
        v8u b;
        if (bits == 16) {
            v8h h;
            memcpy(&h, (const uint16_t *)v + i, sizeof h);
            b = __builtin_convertvector(h, v8u);
        } else {
            memcpy(&b, (const uint32_t *)v + i, sizeof b);
        }
        any |= (b & mask) == mask;
    }
    int hit = 0;
    for (int l = 0; l < VEC_LANES; l++)
        hit |= any[l];
    for (i = hit ? 0 : i; i < n; i++) {
        uint32_t b = 0;
        memcpy(&b, (const uint8_t *)v + i * bits / 8, bits / 8);
        if ((b & mask) == mask)
            return i;
    }
    return n;
}

/* fp16 unscaled (every fp16 tensor: the scale is 1, w / 1 = w): float_encode's and
 * float_decode's bits, the conversions 8 at a time (common/fp.h) and the codes widened and
 * narrowed by the packer's loops; quantize spends most of an fp16 recipe's time here. */
static lmq_code f16_encode(const q_scheme *s, const q_group *g, const float *w, size_t n, size_t first,
                           uint32_t *codes, lmq_err *err)
{
    if (g->scale != 1.0f)
        return float_encode(s, g, w, n, first, codes, err);
    uint16_t h[CHUNK];
    for (size_t k = 0; k < n; k += CHUNK) {
        const size_t m = n - k < CHUNK ? n - k : CHUNK;
        lmq_f32_to_f16_n(w + k, h, m);
        const size_t i = first_special(h, m, 16, 0x7c00);
        if (i < m)
            return overflow(s, first + k + i, w[k + i], err);
        q_unpack((const uint8_t *)h, 0, codes + k, m, 16);
    }
    return LMQ_OK;
}

static void f16_decode(const q_scheme *s, const q_group *g, const uint32_t *codes, size_t n, float *out)
{
    (void)s;
    uint16_t h[CHUNK];
    for (size_t k = 0; k < n; k += CHUNK) {
        const size_t m = n - k < CHUNK ? n - k : CHUNK;
        q_pack((uint8_t *)h, 0, codes + k, m, 16);
        lmq_f16_to_f32_n(h, out + k, m);
        for (size_t i = 0; g->scale != 1.0f && i < m; i++)
            out[k + i] *= g->scale;
    }
}

static uint32_t f32_code(float x) { return lmq_f32_bits(x); }
static float f32_value(uint32_t c) { return lmq_bits_f32(c); }
static uint32_t f16_code(float x) { return lmq_f32_to_f16(x); }
static float f16_value(uint32_t c) { return lmq_f16_to_f32((uint16_t)c); }
static uint32_t bf16_code(float x) { return lmq_f32_to_bf16(x); }
static float bf16_value(uint32_t c) { return lmq_bf16_to_f32((uint16_t)c); }
static uint32_t e4m3_code(float x) { return q_fp8_encode(&q_fp8_e4m3, x); }
static float e4m3_value(uint32_t c) { return q_fp8_decode(&q_fp8_e4m3, (uint8_t)c); }
static uint32_t e5m2_code(float x) { return q_fp8_encode(&q_fp8_e5m2, x); }
static float e5m2_value(uint32_t c) { return q_fp8_decode(&q_fp8_e5m2, (uint8_t)c); }

/* ---- the table --------------------------------------------------------------------------- */

#define FLOAT_ROW(T, cv)                                                                     \
    [T] = { .enc = &lmq_encodings[T], .to_code = cv##_code, .from_code = cv##_value,           \
            .fit = float_fit, .encode = float_encode, .decode = float_decode }
#define INT_ROW(T) [T] = { .enc = &lmq_encodings[T], .fit = int_fit, .encode = int_encode, .decode = int_decode }
#define BLOCK_ROW(T, nm) [T] = { .enc = &lmq_encodings[T], .decode_block = q_gguf_##nm, .codec = &q_gguf_##nm##_codec }

static const q_scheme table[LMQ_T_COUNT] = {
    FLOAT_ROW(LMQ_T_F32, f32),
    [LMQ_T_F16] = { .enc = &lmq_encodings[LMQ_T_F16], .to_code = f16_code, .from_code = f16_value,
                    .fit = float_fit, .encode = f16_encode, .decode = f16_decode },
    FLOAT_ROW(LMQ_T_BF16, bf16),
    FLOAT_ROW(LMQ_T_F8_E4M3, e4m3),
    FLOAT_ROW(LMQ_T_F8_E5M2, e5m2),
    INT_ROW(LMQ_T_INT8),
    INT_ROW(LMQ_T_INT4),
    INT_ROW(LMQ_T_INT3),
    INT_ROW(LMQ_T_INT2),
    BLOCK_ROW(LMQ_T_Q4_1, q4_1),
    BLOCK_ROW(LMQ_T_Q5_0, q5_0),
    BLOCK_ROW(LMQ_T_Q5_1, q5_1),
    BLOCK_ROW(LMQ_T_Q4_K, q4_k),
    BLOCK_ROW(LMQ_T_Q5_K, q5_k),
    BLOCK_ROW(LMQ_T_Q6_K, q6_k),
    BLOCK_ROW(LMQ_T_Q8_0, q8_0),
    BLOCK_ROW(LMQ_T_Q4_0, q4_0),
    BLOCK_ROW(LMQ_T_Q2_K, q2_k),
    BLOCK_ROW(LMQ_T_Q3_K, q3_k),
    BLOCK_ROW(LMQ_T_IQ4_NL, iq4_nl),
    BLOCK_ROW(LMQ_T_IQ4_XS, iq4_xs),
};

const q_scheme *q_scheme_get(unsigned dtype)
{
    return lmq_encoding_of(dtype) ? &table[dtype] : NULL;
}

/* ---- quantise and dequantise ------------------------------------------------------------- */

/* Scale groups in storage order: group gi of row r covers cols [gi·group, +len). */
static int64_t scale_index(const lmq_qparams *qp, const lmq_layout *L, int64_t r, int64_t gi)
{
    return qp->gran == LMQ_GRAN_TENSOR ? 0 : r * L->groups_per_row + gi;
}

static int64_t group_len(const lmq_layout *L, int64_t gi)
{
    int64_t left = L->cols - gi * L->group;
    return left < L->group ? left : L->group;
}

static void store_group(const q_scheme *s, const lmq_qparams *qp, const lmq_layout *L, int64_t idx,
                        const q_group *g, uint8_t *out)
{
    lmq_put_le(out + (size_t)idx * (s->enc->scale_bits / 8), g->scale_code, s->enc->scale_bits / 8);
    if (qp->asym)
        lmq_put_le(out + L->zero_offset + (size_t)idx * 2, (uint16_t)(int16_t)g->zero, 2);
}

static q_group load_group(const q_scheme *s, const lmq_qparams *qp, const lmq_layout *L,
                          int64_t idx, const uint8_t *data)
{
    q_group g = { .scale = 1.0f };
    if (L->n_scales)
        set_scale_code(s, &g, lmq_le(data + (size_t)idx * (s->enc->scale_bits / 8), s->enc->scale_bits / 8));
    if (qp->asym)
        g.zero = (int16_t)lmq_le(data + L->zero_offset + (size_t)idx * 2, 2);
    else if (s->enc->integer)
        g.zero = 1 << (s->enc->bits - 1);
    return g;
}

/* Codes of n consecutive weights, the first being element `first` of the tensor. */
static void store_codes(const q_scheme *s, const lmq_layout *L, size_t first, const uint32_t *codes,
                        size_t n, uint8_t *out)
{
    q_pack(out, (uint64_t)L->code_offset * 8 + (uint64_t)first * s->enc->bits, codes, n, s->enc->bits);
}

lmq_code q_fit(const lmq_qparams *qp, const float *w, size_t n, size_t first, q_group *g, lmq_err *err)
{
    const q_scheme *s = q_scheme_get(qp->dtype);
    if (qp->gran == LMQ_GRAN_NONE) {
        *g = (q_group){ .scale = 1.0f };
        return LMQ_OK;
    }
    if (s->fit(s, qp->asym, w, n, g, err))
        return lmq_err_prefix(err, "weights %zu..%zu: ", first, first + n - 1);
    return LMQ_OK;
}

/* ---- chunked passes ---------------------------------------------------------------------- */

/* Weights per chunk of a parallel pass: enough to amortise the hand-off, small enough that two
 * threads share the work of one matrix evenly. */
enum { PAR_WEIGHTS = 1 << 14 };

/* Rows per chunk: about PAR_WEIGHTS weights, rounded up to a whole number of rows whose codes
 * end on a byte boundary (at most 8 rows), so that chunks pack disjoint bytes. It depends on
 * the shape alone, never on the thread count. */
static int64_t chunk_rows(const q_scheme *s, int64_t cols)
{
    int64_t step = 1, r = (PAR_WEIGHTS + cols - 1) / cols;
    while ((uint64_t)(step * cols) * s->enc->bits % 8)
        step *= 2;
    return (r + step - 1) / step * step;
}

/* One pass over rows [r0, r1) of a tensor. */
typedef lmq_code (*rows_fn)(const void *job, int64_t r0, int64_t r1, lmq_err *err);

typedef struct {
    rows_fn fn;
    const void *job;
    int64_t rows, chunk;
} par_pass;

static lmq_code par_task(void *ctx, int64_t begin, int64_t end, int thread, lmq_err *err)
{
    (void)thread;
    const par_pass *p = ctx;
    return p->fn(p->job, begin * p->chunk, end * p->chunk < p->rows ? end * p->chunk : p->rows, err);
}

/* Runs fn over every row, in chunks on the pool's threads (the error reported is the one a
 * single thread meets first: lmq_pool_try). */
static lmq_code par_rows(lmq_pool *pool, rows_fn fn, const void *job, int64_t rows, int64_t chunk,
                         lmq_err *err)
{
    par_pass p = { .fn = fn, .job = job, .rows = rows, .chunk = chunk };
    return lmq_pool_try(pool, (rows + chunk - 1) / chunk, 1, par_task, &p, err);
}

/* ---- quantise and dequantise ------------------------------------------------------------- */

enum { CHECK = 1, ENCODE = 2 };

typedef struct {
    const q_scheme *s;
    const lmq_qparams *qp;
    const lmq_layout *L;
    const float *w;
    const float *imp; /* block encodings: each column's importance, or NULL */
    uint8_t *out;
    q_group tensor; /* the one group of a per-tensor scale, fitted before ENCODE */
    unsigned what;  /* CHECK (NaN or Inf), ENCODE, or both: every row checked first */
} quant_job;

/* Rows [r0, r1) of a block encoding, block by block. */
static lmq_code quantize_blocks(const quant_job *j, int64_t r0, int64_t r1, lmq_err *err)
{
    const unsigned n = j->s->enc->block, bytes = j->s->enc->block_bytes;
    const int64_t per_row = j->L->cols / n;
    for (int64_t b = r0 * per_row; b < r1 * per_row; b++) {
        const float *x = j->w + b * n;
        if (q_block_encode(j->s->codec, x, j->imp ? j->imp + b % per_row * n : NULL, j->out + (size_t)b * bytes)) {
            float mn, mx;
            min_max(x, n, &mn, &mx);
            return lmq_fail(err, LMQ_E_NUMERIC, "weights %" PRId64 "..%" PRId64 " (row %" PRId64 ", %s block %"
                            PRId64 ") in [%g, %g] need a %s scale beyond the fp16 range", b * n, b * n + n - 1,
                            b / per_row, j->s->enc->name, b % per_row, (double)mn, (double)mx, j->s->enc->name);
        }
    }
    return LMQ_OK;
}

static lmq_code quantize_rows(const void *job, int64_t r0, int64_t r1, lmq_err *err)
{
    const quant_job *j = job;
    const q_scheme *s = j->s;
    const lmq_layout *L = j->L;
    const int64_t cols = L->cols;
    const float *w = j->w;
    lmq_code rc;
    if (j->what & CHECK) {
        const size_t n = (size_t)((r1 - r0) * cols);
        const size_t i = (size_t)(r0 * cols) + first_special(w + r0 * cols, n, 32, 0x7f800000);
        if (i < (size_t)(r1 * cols))
            return lmq_fail(err, LMQ_E_NUMERIC, "weight %zu (row %zu, col %zu) is %s", i,
                            i / (size_t)cols, i % (size_t)cols, isnan(w[i]) ? "NaN" : "Inf");
    }
    if (!(j->what & ENCODE))
        return LMQ_OK;
    if (s->codec)
        return quantize_blocks(j, r0, r1, err);
    const int per_group = j->qp->gran == LMQ_GRAN_CHANNEL || j->qp->gran == LMQ_GRAN_GROUP;
    q_group g = j->tensor;
    uint32_t codes[CHUNK];
    for (int64_t r = r0; r < r1; r++)
        for (int64_t gi = 0; gi < L->groups_per_row; gi++) {
            size_t first = (size_t)(r * cols + gi * L->group), len = (size_t)group_len(L, gi);
            if (per_group) {
                if ((rc = q_fit(j->qp, w + first, len, first, &g, err)))
                    return rc;
                store_group(s, j->qp, L, scale_index(j->qp, L, r, gi), &g, j->out);
            }
            for (size_t k = 0; k < len; k += CHUNK) {
                size_t m = len - k < CHUNK ? len - k : CHUNK;
                if ((rc = s->encode(s, &g, w + first + k, m, first + k, codes, err)))
                    return rc;
                store_codes(s, L, first + k, codes, m, j->out);
            }
        }
    return LMQ_OK;
}

/* The layout of a tensor about to be written into an output buffer of out_size bytes, which
 * must be exactly its size. */
static lmq_code output_layout(const lmq_qparams *qp, int64_t rows, int64_t cols, size_t out_size,
                              lmq_layout *L, lmq_err *err)
{
    lmq_code rc = lmq_layout_of(qp, rows, cols, L, err);
    if (!rc && out_size != L->bytes)
        rc = lmq_fail(err, LMQ_E_ARG, "output buffer has %zu bytes; the layout needs %zu", out_size,
                      L->bytes);
    return rc;
}

lmq_code q_quantize(const lmq_qparams *qp, const float *w, int64_t rows, int64_t cols,
                    uint8_t *out, size_t out_size, lmq_pool *pool, lmq_err *err)
{
    return q_quantize_weighted(qp, w, NULL, rows, cols, out, out_size, pool, err);
}

lmq_code q_quantize_weighted(const lmq_qparams *qp, const float *w, const float *imp, int64_t rows, int64_t cols,
                             uint8_t *out, size_t out_size, lmq_pool *pool, lmq_err *err)
{
    lmq_layout L;
    lmq_code rc = output_layout(qp, rows, cols, out_size, &L, err);
    if (rc)
        return rc;
    const q_scheme *s = q_scheme_get(qp->dtype);
    if (imp && !s->codec)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "%s fits no error to weight: importance applies to GGUF's block "
                        "encodings", s->enc->name);
    for (int64_t c = 0; imp && c < cols; c++)
        if (!(imp[c] >= 0) || !isfinite(imp[c]))
            return lmq_fail(err, LMQ_E_ARG, "importance of column %" PRId64 " is %g: must be finite and >= 0", c,
                            (double)imp[c]);
    memset(out, 0, out_size);
    quant_job j = { .s = s, .qp = qp, .L = &L, .w = w, .imp = imp, .out = out, .tensor = { .scale = 1.0f },
                    .what = CHECK | ENCODE };
    const int64_t chunk = chunk_rows(s, cols);
    if (qp->gran != LMQ_GRAN_TENSOR)
        return par_rows(pool, quantize_rows, &j, rows, chunk, err);
    /* One scale for the whole tensor: every weight checked, then the scale fitted, then the
     * codes. */
    j.what = CHECK;
    if ((rc = par_rows(pool, quantize_rows, &j, rows, chunk, err)) ||
        (rc = q_fit(qp, w, (size_t)(rows * cols), 0, &j.tensor, err)))
        return rc;
    store_group(s, qp, &L, 0, &j.tensor, out);
    j.what = ENCODE;
    return par_rows(pool, quantize_rows, &j, rows, chunk, err);
}

lmq_code q_store(const lmq_qparams *qp, int64_t rows, int64_t cols, const q_group *groups,
                 const uint32_t *codes, uint8_t *out, size_t out_size, lmq_err *err)
{
    lmq_layout L;
    lmq_code rc = output_layout(qp, rows, cols, out_size, &L, err);
    if (rc)
        return rc;
    const q_scheme *s = q_scheme_get(qp->dtype);
    if (!s->encode)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "%s stores whole blocks, not scale groups and codes: q_quantize "
                        "writes them", s->enc->name);
    const size_t n = (size_t)(rows * cols);
    if (s->enc->bits < 32)
        for (size_t i = 0; i < n; i++)
            if (codes[i] >> s->enc->bits)
                return lmq_fail(err, LMQ_E_ARG, "code %zu (%" PRIu32 ") does not fit %u bits", i,
                                codes[i], s->enc->bits);
    memset(out, 0, out_size);
    for (int64_t i = 0; i < L.n_scales; i++)
        store_group(s, qp, &L, i, &groups[i], out);
    store_codes(s, &L, 0, codes, n, out);
    return LMQ_OK;
}

/* The layout of a stored [rows, cols] tensor of size bytes, which must be exactly its size. */
static lmq_code stored_layout(const lmq_qparams *qp, size_t size, int64_t rows, int64_t cols, lmq_layout *L,
                              lmq_err *err)
{
    lmq_code rc = lmq_layout_of(qp, rows, cols, L, err);
    if (!rc && size != L->bytes)
        rc = lmq_fail(err, LMQ_E_FORMAT, "stored tensor has %zu bytes; %s [%" PRId64 ", %" PRId64 "] needs %zu",
                      size, lmq_encoding_of(qp->dtype)->name, rows, cols, L->bytes);
    return rc;
}

/* Blocks [b0, b0 + n) of a tensor in a block encoding (row-major, cols / block per row) into
 * out, each weight checked finite (a block's fp16 scales may be Inf or NaN). */
static lmq_code decode_blocks(const q_scheme *s, const uint8_t *data, int64_t cols, int64_t b0, int64_t n,
                              float *out, lmq_err *err)
{
    const int64_t per_row = cols / s->enc->block;
    for (int64_t b = b0; b < b0 + n; b++) {
        float *o = out + (b - b0) * s->enc->block;
        s->decode_block(data + (size_t)b * s->enc->block_bytes, o);
        for (unsigned i = 0; i < s->enc->block; i++)
            if (!isfinite(o[i]))
                return lmq_fail(err, LMQ_E_FORMAT, "element %" PRId64 " (row %" PRId64 ", %s block %" PRId64
                                ") decodes to %g", (b % per_row) * s->enc->block + i + b / per_row * cols,
                                b / per_row, s->enc->name, b % per_row, (double)o[i]);
    }
    return LMQ_OK;
}

lmq_code q_dequantize_rows(const lmq_qparams *qp, const uint8_t *data, size_t size, int64_t rows,
                           int64_t cols, int64_t row0, int64_t nrows, float *out, lmq_err *err)
{
    lmq_layout L;
    lmq_code rc = stored_layout(qp, size, rows, cols, &L, err);
    if (rc)
        return rc;
    const q_scheme *s = q_scheme_get(qp->dtype);
    if (row0 < 0 || nrows < 0 || row0 > rows - nrows)
        return lmq_fail(err, LMQ_E_ARG, "rows %" PRId64 " + %" PRId64 " outside a tensor of %"
                        PRId64 " rows", row0, nrows, rows);
    if (s->decode_block)
        return decode_blocks(s, data, cols, row0 * (cols / s->enc->block), nrows * (cols / s->enc->block), out,
                             err);
    uint32_t codes[CHUNK];
    for (int64_t r = row0; r < row0 + nrows; r++)
        for (int64_t gi = 0; gi < L.groups_per_row; gi++) {
            q_group g = load_group(s, qp, &L, scale_index(qp, &L, r, gi), data);
            size_t first = (size_t)(r * cols + gi * L.group), len = (size_t)group_len(&L, gi);
            float *o = out + (first - (size_t)(row0 * cols));
            for (size_t k = 0; k < len; k += CHUNK) {
                size_t m = len - k < CHUNK ? len - k : CHUNK;
                q_unpack(data, (uint64_t)L.code_offset * 8 + (uint64_t)(first + k) * s->enc->bits,
                         codes, m, s->enc->bits);
                s->decode(s, &g, codes, m, o + k);
                for (size_t i = 0; i < m; i++)
                    if (!isfinite(o[k + i]))
                        return lmq_fail(err, LMQ_E_FORMAT, "element %zu (row %" PRId64
                                        ") decodes to %g", first + k + i, r, (double)o[k + i]);
            }
        }
    return LMQ_OK;
}

typedef struct {
    const lmq_qparams *qp;
    const uint8_t *data;
    size_t size;
    int64_t rows, cols;
    float *out;
} dequant_job;

static lmq_code dequantize_rows(const void *job, int64_t r0, int64_t r1, lmq_err *err)
{
    const dequant_job *j = job;
    return q_dequantize_rows(j->qp, j->data, j->size, j->rows, j->cols, r0, r1 - r0,
                             j->out + r0 * j->cols, err);
}

lmq_code q_dequantize(const lmq_qparams *qp, const uint8_t *data, size_t size, int64_t rows,
                      int64_t cols, float *out, lmq_pool *pool, lmq_err *err)
{
    lmq_layout L;
    lmq_code rc = lmq_layout_of(qp, rows, cols, &L, err);
    if (rc)
        return rc;
    dequant_job j = { qp, data, size, rows, cols, out };
    return par_rows(pool, dequantize_rows, &j, rows, chunk_rows(q_scheme_get(qp->dtype), cols), err);
}

lmq_code q_validate(const lmq_qparams *qp, const uint8_t *data, size_t size, int64_t rows, int64_t cols,
                    lmq_err *err)
{
    lmq_layout L;
    lmq_code rc = stored_layout(qp, size, rows, cols, &L, err);
    if (rc)
        return rc;
    const q_scheme *s = q_scheme_get(qp->dtype);
    if (s->decode_block) { /* every block decoded and checked */
        float block[256];
        for (int64_t b = 0; b < rows * (cols / s->enc->block) && !rc; b++)
            rc = decode_blocks(s, data, cols, b, 1, block, err);
        return rc;
    }
    if (!s->decode)
        return LMQ_OK;
    for (int64_t i = 0; i < L.n_scales; i++) {
        float v = scale_value(s, (uint32_t)lmq_le(data + (size_t)i * (s->enc->scale_bits / 8), s->enc->scale_bits / 8));
        if (!(v >= 0.0f) || !isfinite(v))
            return lmq_fail(err, LMQ_E_FORMAT, "scale %" PRId64 " is %g: scales are finite and >= 0", i, (double)v);
    }
    /* Integer codes are bounded, so finite scales make every weight finite; float codes (times
     * their scale) are decoded and checked chunk by chunk, never the whole tensor at once. */
    if (s->enc->integer)
        return LMQ_OK;
    uint32_t codes[CHUNK];
    float out[CHUNK];
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0, n; k < cols; k += n) { /* a chunk never spans two groups */
            const int64_t gi = k / L.group, end = (gi + 1) * L.group < cols ? (gi + 1) * L.group : cols;
            n = end - k < CHUNK ? end - k : CHUNK;
            q_group g = load_group(s, qp, &L, scale_index(qp, &L, r, gi), data);
            q_unpack(data, (uint64_t)L.code_offset * 8 + (uint64_t)(r * cols + k) * s->enc->bits, codes, (size_t)n,
                     s->enc->bits);
            s->decode(s, &g, codes, (size_t)n, out);
            for (int64_t i = 0; i < n; i++)
                if (!isfinite(out[i]))
                    return lmq_fail(err, LMQ_E_FORMAT, "element %" PRId64 " (row %" PRId64 ") decodes to %g",
                                    r * cols + k + i, r, (double)out[i]);
        }
    return LMQ_OK;
}

char *q_describe(const lmq_qparams *qp, char *buf, size_t size)
{
    lmq_err err;
    if (lmq_qparams_check(qp, &err)) {
        snprintf(buf, size, "invalid (%s)", err.msg);
        return buf;
    }
    const char *name = lmq_encoding_of(qp->dtype)->name, *asym = qp->asym ? " asym" : "";
    if (qp->gran == LMQ_GRAN_GROUP)
        snprintf(buf, size, "%s g%" PRIu32 "%s", name, qp->group, asym);
    else if (qp->gran == LMQ_GRAN_NONE)
        snprintf(buf, size, "%s", name);
    else
        snprintf(buf, size, "%s per-%s%s", name, lmq_gran_name(qp->gran), asym);
    return buf;
}
