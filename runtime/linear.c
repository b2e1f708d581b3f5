#include "runtime/linear.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/fp.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

/* Work split: tasks are blocks of W_BLOCK rows of W (× X_BLOCK rows of x when the weight is
 * used as stored), W-block-major so that neighbouring tasks share a block of W while x stays
 * in cache. X_BLOCK is a multiple of every tile height. */
#define W_BLOCK 64
#define X_BLOCK 48
/* Up to this many activation rows the fused kernels decode W in registers for every tile;
 * beyond it a block of W is decoded once into scratch and reused by every row. */
#define FUSED_ROWS 4
/* How far ahead of the rows being read the fused kernels ask for memory: about what is in flight
 * between a request and its arrival at one core's share of the bandwidth. */
#define PREFETCH_BYTES 8192

lmq_code rt_weight_of(const lmq_tensor *t, const float *b, rt_weight *W, lmq_err *err)
{
    memset(W, 0, sizeof *W);
    if (t->ndim != 2 || t->shape[0] > INT32_MAX || t->shape[1] > INT32_MAX)
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: a linear layer's weight is a matrix", t->name);
    lmq_code c = lmq_layout_of(&t->q, t->shape[0], t->shape[1], &W->L, err);
    if (c)
        return lmq_err_prefix(err, "tensor %s: ", t->name);
    const q_scheme *s = q_scheme_get(t->q.dtype);
    if (W->L.bytes != t->raw_size || (!s->decode && !s->decode_block)) /* bytes: no numbers */
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: %zu bytes do not hold a %s [%lld, %lld]", t->name,
                        t->raw_size, lmq_encoding_of(t->q.dtype)->name, (long long)t->shape[0],
                        (long long)t->shape[1]);
    W->name = t->name;
    W->q = t->q;
    W->data = t->raw;
    W->b = b;
    W->out = (int)t->shape[0];
    W->in = (int)t->shape[1];
    W->act = t->act;
    if (W->act.scheme >= LMQ_ACT_COUNT || W->act.gran >= LMQ_ACT_GRAN_COUNT)
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: unknown activation quantisation (%u, %u)", t->name,
                        (unsigned)W->act.scheme, (unsigned)W->act.gran);
    return LMQ_OK;
}

/* ---------------------------------------------------------------- activation quantisation */

/* roundf(v) (half away from zero) clamped to [-127, 127]: truncation and its exact remainder,
 * cheaper than a call. v is clamped first (a subnormal max makes its scale inexact, and NaN goes
 * to -127 as through fmaxf). */
static inline int round_clamp127(float v)
{
    v = fminf(fmaxf(v, -127.5f), 127.5f);
    const int t = (int)v;
    const float f = v - (float)t;
    const int r = t + (f >= 0.5f) - (f <= -0.5f);
    return r > 127 ? 127 : r < -127 ? -127 : r;
}

/* The int8 activation scale of x[0..len): max|x| / 127 (0 for a zero max). */
static float act_scale(const float *x, size_t len)
{
    float mx = 0.0f;
    for (size_t i = 0; i < len; i++)
        mx = fmaxf(mx, fabsf(x[i]));
    return mx / 127.0f;
}

/* x[0..len) on the int8 grid of its own max|x| (the golden README's W8A8), into out. */
static void act_int8(const float *x, size_t len, float *out)
{
    const float s = act_scale(x, len);
    for (size_t i = 0; i < len; i++)
        out[i] = s > 0.0f ? (float)round_clamp127(x[i] / s) * s : 0.0f;
}

/* x[n × in] quantised as W->act says, into out: per token each row alone, per tensor all at once. */
static void act_quantize(const rt_weight *W, const float *x, int n, float *out)
{
    const size_t in = (size_t)W->in, span = W->act.gran == LMQ_ACT_TENSOR ? (size_t)n * in : in;
    for (size_t k = 0; k < (size_t)n * in; k += span)
        act_int8(x + k, span, out + k);
}

/* ---------------------------------------------------------------- fused kernels (AVX-512) */

typedef void (*tiles_fn)(const rt_weight *W, const float *x, size_t ldx, int m, int j0, int cols, float *y,
                         size_t ldy);
typedef void (*decode_fn)(const rt_weight *W, int j0, int cols, float *out);

#if HAVE_X86
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define AVX512_INLINE static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
/* Loops over rows of a tile are unrolled so that their accumulators live in registers. */
#define UNROLL _Pragma("GCC unroll 4")

enum { ENC_F32, ENC_F16, ENC_BF16, ENC_I8, ENC_I4 };

/* One row of W as the fused step walks it: where its values or codes start, where its scales
 * and zero points start, and the current group's parameters. */
typedef struct {
    const uint8_t *p, *sc, *zp;
    __m512 s, tab; /* int8: the scale; int4: the 16 values a code can stand for */
    __m512i z;     /* int8: the zero code */
} wrow;

AVX512_INLINE void row_init(int enc, const rt_weight *W, int j, wrow *r)
{
    const lmq_layout *L = &W->L;
    const size_t in = (size_t)W->in;
    static const unsigned bytes_x2[] = { [ENC_F32] = 8, [ENC_F16] = 4, [ENC_BF16] = 4, [ENC_I8] = 2, [ENC_I4] = 1 };
    r->p = W->data + L->code_offset + (size_t)j * in * bytes_x2[enc] / 2;
    const size_t sidx = W->q.gran == LMQ_GRAN_TENSOR ? 0 : (size_t)j * (size_t)L->groups_per_row;
    r->sc = W->data + sidx * 2;
    r->zp = W->q.asym ? W->data + L->zero_offset + sidx * 2 : NULL;
    r->s = r->tab = _mm512_setzero_ps(); /* set by row_group before a quantised step */
    r->z = _mm512_setzero_si512();
}

/* The parameters of group gi; the values are (code − zero)·scale, rounded as q_dequantize does
 * (the code − zero differences are small integers, exact as floats). */
AVX512_INLINE void row_group(int enc, wrow *r, int64_t gi, unsigned bits)
{
    uint16_t h;
    memcpy(&h, r->sc + 2 * gi, 2);
    const __m512 s = _mm512_cvtph_ps(_mm256_set1_epi16((short)h));
    __m512i z = _mm512_set1_epi32(1 << (bits - 1));
    if (r->zp) {
        int16_t z16;
        memcpy(&z16, r->zp + 2 * gi, 2);
        z = _mm512_set1_epi32(z16);
    }
    if (enc == ENC_I8) {
        r->s = s;
        r->z = z;
    } else if (!r->zp) { /* symmetric int4: the code − 8 table is a constant */
        r->tab = _mm512_mul_ps(_mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7), s);
    } else {
        const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        r->tab = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(iota, z)), s);
    }
}

/* 32 weights of the row from column k: w0 then w1, zero in dead lanes. int4 gives the even
 * columns of the 32 in w0 and the odd ones in w1 (low nibbles, then high): x is reordered the
 * same way before the product. */
AVX512_INLINE void row_step(int enc, const wrow *r, int64_t k, __mmask16 m0, __mmask16 m1, __m512 *w0, __m512 *w1)
{
    switch (enc) {
    case ENC_F32:
        *w0 = _mm512_maskz_loadu_ps(m0, r->p + 4 * k);
        *w1 = _mm512_maskz_loadu_ps(m1, r->p + 4 * (k + 16));
        break;
    case ENC_F16:
        *w0 = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m0, r->p + 2 * k));
        *w1 = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m1, r->p + 2 * (k + 16)));
        break;
    case ENC_BF16:
        *w0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m0, r->p + 2 * k)), 16));
        *w1 = _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m1, r->p + 2 * (k + 16))), 16));
        break;
    case ENC_I8: {
        __m512i c0 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m0, r->p + k));
        __m512i c1 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m1, r->p + k + 16));
        *w0 = _mm512_maskz_mul_ps(m0, _mm512_cvtepi32_ps(_mm512_sub_epi32(c0, r->z)), r->s);
        *w1 = _mm512_maskz_mul_ps(m1, _mm512_cvtepi32_ps(_mm512_sub_epi32(c1, r->z)), r->s);
        break;
    }
    default: { /* ENC_I4: whole 32-blocks only */
        /* vpermps reads the low 4 bits of each index: the low nibble needs no mask */
        __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(r->p + k / 2)));
        *w0 = _mm512_permutexvar_ps(c, r->tab);
        *w1 = _mm512_permutexvar_ps(_mm512_srli_epi32(c, 4), r->tab);
        break;
    }
    }
}

/* Where step k of the row starts. */
AVX512_INLINE const uint8_t *row_at(int enc, const wrow *r, int64_t k)
{
    static const unsigned bytes_x2[] = { [ENC_F32] = 8, [ENC_F16] = 4, [ENC_BF16] = 4, [ENC_I8] = 2, [ENC_I4] = 1 };
    return r->p + (size_t)k * bytes_x2[enc] / 2;
}

AVX512_INLINE __mmask16 lanes(int64_t n)
{
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* One step of a tile: 32 columns from k of MR rows of x against the tile's 4 rows of W. */
AVX512_INLINE void tile_step(int enc, int MR, wrow r[4], const float *x, size_t ldx, int64_t k, __mmask16 m0,
                             __mmask16 m1, size_t ahead, __m512 a0[2][4], __m512 a1[2][4])
{
    __m512 x0[2], x1[2];
    UNROLL for (int i = 0; i < MR; i++) {
        x0[i] = _mm512_maskz_loadu_ps(m0, x + (size_t)i * ldx + k);
        x1[i] = _mm512_maskz_loadu_ps(m1, x + (size_t)i * ldx + k + 16);
    }
    UNROLL for (int c = 0; c < 4; c++) {
        __m512 w0, w1;
        /* One request per cache line: a step of int8 reads half a line, of int4 a quarter, of
         * fp32 two lines. */
        if ((enc != ENC_I8 || k % 64 == 0) && (enc != ENC_I4 || k % 128 == 0))
            _mm_prefetch((const char *)row_at(enc, &r[c], k) + ahead, _MM_HINT_T0);
        if (enc == ENC_F32)
            _mm_prefetch((const char *)row_at(enc, &r[c], k) + ahead + 64, _MM_HINT_T0);
        row_step(enc, &r[c], k, m0, m1, &w0, &w1);
        UNROLL for (int i = 0; i < MR; i++) {
            a0[i][c] = _mm512_fmadd_ps(x0[i], w0, a0[i][c]);
            a1[i][c] = _mm512_fmadd_ps(x1[i], w1, a1[i][c]);
        }
    }
}

/* MR rows of x against rows j[0..3] of W: per output, two 16-lane accumulators over steps of 32
 * (w0's products in one, w1's in the other, so that no chain of dependent FMAs sets the pace),
 * added and reduced once at the end in a fixed order. An output's operations do not depend on MR
 * or on its neighbours, so every tiling gives the same result. Whole steps run with constant
 * masks (plain loads); a row's last, partial step with live-lane masks. */
AVX512_INLINE void tile(int enc, int MR, const rt_weight *W, const int j[4], const float *x, size_t ldx, float out[2][4])
{
    const int64_t K = W->in, group = enc >= ENC_I8 ? W->L.group : K;
    const unsigned bits = enc == ENC_I8 ? 8 : 4;
    wrow r[4];
    UNROLL for (int c = 0; c < 4; c++)
        row_init(enc, W, j[c], &r[c]);
    /* Rows are short streams the hardware prefetcher learns late: ask for the rows a few tiles
     * on (same column) while this one runs, at least PREFETCH_BYTES ahead. */
    const size_t tile_bytes = 4 * (size_t)(row_at(enc, &r[0], K) - r[0].p);
    const size_t ahead = (PREFETCH_BYTES + tile_bytes - 1) / tile_bytes * tile_bytes;
    __m512 a0[2][4], a1[2][4];
    UNROLL for (int i = 0; i < MR; i++)
        UNROLL for (int c = 0; c < 4; c++)
            a0[i][c] = a1[i][c] = _mm512_setzero_ps();
    int64_t k = 0;
    for (int64_t group_end = 0; k < K; k += 32) {
        if (enc >= ENC_I8 && k == group_end) {
            UNROLL for (int c = 0; c < 4; c++)
                row_group(enc, &r[c], k / group, bits);
            group_end += group;
        }
        if (k + 32 <= K)
            tile_step(enc, MR, r, x, ldx, k, 0xFFFF, 0xFFFF, ahead, a0, a1);
        else
            tile_step(enc, MR, r, x, ldx, k, lanes(K - k), lanes(K - k - 16), ahead, a0, a1);
    }
    UNROLL for (int i = 0; i < MR; i++)
        UNROLL for (int c = 0; c < 4; c++)
            out[i][c] = _mm512_reduce_add_ps(_mm512_add_ps(a0[i][c], a1[i][c]));
}

AVX512_INLINE void tiles(int enc, const rt_weight *W, const float *x, size_t ldx, int m, int j0, int cols, float *y,
                         size_t ldy)
{
    for (int jb = j0; jb < j0 + cols; jb += 4) {
        const int nr = j0 + cols - jb < 4 ? j0 + cols - jb : 4;
        const int j[4] = { jb, jb + (nr > 1), jb + (nr > 2 ? 2 : nr - 1), jb + (nr > 3 ? 3 : nr - 1) };
        float out[2][4];
        for (int i = 0; i < m;) {
            const int rows = m - i >= 2 ? 2 : 1;
            if (rows == 2)
                tile(enc, 2, W, j, x + (size_t)i * ldx, ldx, out);
            else
                tile(enc, 1, W, j, x + (size_t)i * ldx, ldx, out);
            for (int r = 0; r < rows; r++)
                for (int c = 0; c < nr; c++)
                    y[(size_t)(i + r) * ldy + jb - j0 + c] = W->b ? out[r][c] + W->b[jb + c] : out[r][c];
            i += rows;
        }
    }
}

/* Rows [j0, j0 + cols) decoded by the same step into out (cols × in, the kernel's order). */
AVX512_INLINE void decode(int enc, const rt_weight *W, int j0, int cols, float *out)
{
    const int64_t K = W->in, group = enc >= ENC_I8 ? W->L.group : K;
    for (int c = 0; c < cols; c++) {
        wrow r;
        row_init(enc, W, j0 + c, &r);
        float *o = out + (size_t)c * (size_t)K;
        for (int64_t k = 0; k < K; k += 32) {
            const __mmask16 m0 = lanes(K - k), m1 = lanes(K - k - 16);
            if (enc >= ENC_I8 && k % group == 0)
                row_group(enc, &r, k / group, enc == ENC_I8 ? 8 : 4);
            __m512 w0, w1;
            row_step(enc, &r, k, m0, m1, &w0, &w1);
            _mm512_mask_storeu_ps(o + k, m0, w0);
            _mm512_mask_storeu_ps(o + k + 16, m1, w1);
        }
    }
}

/* x reordered within each 32 columns as the int4 step delivers W: even columns, then odd. */
AVX512 static void permute32(const float *x, int n, int in, float *out)
{
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    for (size_t k = 0; k < (size_t)n * (size_t)in; k += 32) { /* in is a multiple of 32 */
        const __m512 a = _mm512_loadu_ps(x + k), b = _mm512_loadu_ps(x + k + 16);
        _mm512_storeu_ps(out + k, _mm512_permutex2var_ps(a, even, b));
        _mm512_storeu_ps(out + k + 16, _mm512_permutex2var_ps(a, odd, b));
    }
}

#define FUSED(enc, name)                                                                                        \
    AVX512 static void tiles_##name(const rt_weight *W, const float *x, size_t ldx, int m, int j0, int cols,   \
                                    float *y, size_t ldy)                                                     \
    {                                                                                                         \
        tiles(enc, W, x, ldx, m, j0, cols, y, ldy);                                                           \
    }                                                                                                         \
    AVX512 static void decode_##name(const rt_weight *W, int j0, int cols, float *out)                         \
    {                                                                                                         \
        decode(enc, W, j0, cols, out);                                                                        \
    }
FUSED(ENC_F32, f32)
FUSED(ENC_F16, f16)
FUSED(ENC_BF16, bf16)
FUSED(ENC_I8, i8)
FUSED(ENC_I4, i4)
#define ROW(dt, name, perm, tails) { dt, (perm) ? permute32 : NULL, tails, tiles_##name, decode_##name }
#else
#define ROW(dt, name, perm, tails) { dt, NULL, tails, NULL, NULL }
#endif

/* The fused encodings: one row each. reorder: x is reordered as the step delivers W (int4: even
 * columns of each 32, then odd), or NULL; tails: rows of any length (else a multiple of 32).
 * Groups must be a multiple of 32 long so that a step never spans two. */
static const struct fused_row {
    lmq_dtype dtype;
    void (*reorder)(const float *x, int n, int in, float *out);
    int tails;
    tiles_fn tiles;
    decode_fn decode;
} FUSED_ROWS_TABLE[] = {
    ROW(LMQ_T_F32, f32, 0, 1),
    ROW(LMQ_T_F16, f16, 0, 1),
    ROW(LMQ_T_BF16, bf16, 0, 1),
    ROW(LMQ_T_INT8, i8, 0, 1),
    ROW(LMQ_T_INT4, i4, 1, 0),
};

static const struct fused_row *fused_row(rt_isa isa, const rt_weight *W)
{
    if (isa != RT_ISA_AVX512 || (W->q.gran == LMQ_GRAN_GROUP && W->q.group % 32))
        return NULL;
    for (size_t i = 0; i < sizeof FUSED_ROWS_TABLE / sizeof FUSED_ROWS_TABLE[0]; i++) {
        const struct fused_row *f = &FUSED_ROWS_TABLE[i];
        if (f->dtype == W->q.dtype && f->tiles && (f->tails || W->in % 32 == 0))
            return f;
    }
    return NULL;
}

int rt_linear_fused(rt_isa isa, const rt_weight *W)
{
    return fused_row(isa, W) != NULL;
}

lmq_code rt_weight_rows(rt_isa isa, const rt_weight *W, int r0, int n, float *out, lmq_err *err)
{
    const struct fused_row *f = fused_row(isa, W);
    if (f && !f->reorder && r0 >= 0 && n >= 0 && r0 <= W->out - n) { /* the same values, in order */
        f->decode(W, r0, n, out);
        return LMQ_OK;
    }
    lmq_code c = q_dequantize_rows(&W->q, W->data, W->L.bytes, W->out, W->in, r0, n, out, err);
    return c ? lmq_err_prefix(err, "tensor %s: ", W->name) : LMQ_OK;
}

/* ---------------------------------------------------------------- the linear layer */

typedef struct {
    rt_isa isa;
    const struct fused_row *f; /* NULL: generic */
    const rt_weight *W;
    const float *x; /* reordered when f->reorder */
    float *y;
    int n, x_blocks, staged;
    float *scratch; /* [threads × W_BLOCK × in] when staged */
    int *held;      /* [threads]: the first row of the block a thread's scratch holds, or -1 */
    int failed;
} linear_job;

/* The fp32 product of x rows against `cols` decoded rows at w (in the kernel set's own order):
 * the fused fp32 tiles on AVX-512, rt_gemm_nt otherwise. */
static void f32_product(const linear_job *j, const float *x, int m, const float *w, int c0, int cols, float *y)
{
    const rt_weight *W = j->W;
    const int in = W->in;
    if (j->isa == RT_ISA_AVX512 && FUSED_ROWS_TABLE[0].tiles) {
        rt_weight S = { .q = { .dtype = LMQ_T_F32 }, .data = (const uint8_t *)w, .b = W->b ? W->b + c0 : NULL,
                        .out = cols, .in = in };
        FUSED_ROWS_TABLE[0].tiles(&S, x, (size_t)in, m, 0, cols, y, (size_t)W->out);
    } else {
        rt_gemm_nt(j->isa, x, (size_t)in, w, (size_t)in, W->b ? W->b + c0 : NULL, y, (size_t)W->out, m, cols, in);
    }
}

static void linear_task(void *v, int64_t begin, int64_t end, int thread)
{
    linear_job *j = v;
    const rt_weight *W = j->W;
    const size_t in = (size_t)W->in;
    for (int64_t t = begin; t < end; t++) {
        const int c0 = (int)(t / j->x_blocks) * W_BLOCK, cols = W->out - c0 < W_BLOCK ? W->out - c0 : W_BLOCK;
        const int r0 = (int)(t % j->x_blocks) * X_BLOCK, rows = j->n - r0 < X_BLOCK ? j->n - r0 : X_BLOCK;
        const float *x = j->x + (size_t)r0 * in;
        float *y = j->y + (size_t)r0 * W->out + c0;
        if (!j->staged) { /* W as stored: fp32, or fused for a few rows */
            if (j->f)
                j->f->tiles(W, x, in, rows, c0, cols, y, (size_t)W->out);
            else
                f32_product(j, x, rows, (const float *)W->data + (size_t)c0 * in, c0, cols, y);
            continue;
        }
        /* Tasks run block-major, so a thread mostly finds its block decoded already. */
        float *s = j->scratch + (size_t)thread * W_BLOCK * in;
        if (j->held[thread] != c0) {
            j->held[thread] = c0;
            if (j->f)
                j->f->decode(W, c0, cols, s);
            else if (q_dequantize_rows(&W->q, W->data, W->L.bytes, W->out, W->in, c0, cols, s, NULL))
                j->failed = 1, j->held[thread] = -1;
        }
        if (j->held[thread] == c0)
            f32_product(j, x, rows, s, c0, cols, y);
    }
}

/* ---------------------------------------------------------------- int8 × int8 (W8A8 per token) */

/* Symmetric int8 weights per channel with int8 activations per token: every output is an exact
 * integer sum Σ q_x·q_w (q_w = code − 128) scaled once, ((float)sum · s_x) · s_w (+ b). Integer
 * sums do not depend on their order, so every kernel set gives the same bits: AVX-512 VNNI where
 * the CPU has it, a plain loop otherwise. */
typedef struct {
    const rt_weight *W;
    const int8_t *qx;   /* [n × ldq] codes, zero beyond in */
    const float *sx;    /* [n] */
    const int32_t *sum; /* [n]: Σ q_x, for the −128 of the codes */
    size_t ldq;
    int n, vnni;
    float *y;
} int8_job;

/* Up to this many inputs a row's sum of code·q (at most 255·127 each) fits in int32. */
#define INT8_MAX_IN 65536

/* Σ q[k]·c[k] over k < in, codes c unsigned (the stored bytes). */
static int32_t dot_u8s8_scalar(const uint8_t *c, const int8_t *q, size_t in)
{
    int32_t acc = 0;
    for (size_t k = 0; k < in; k++)
        acc += (int32_t)c[k] * q[k];
    return acc;
}

#if HAVE_X86
/* The same 64 codes at a time (vpdpbusd: unsigned × signed bytes into int32 lanes, exact). */
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static int32_t dot_u8s8_vnni(const uint8_t *c, const int8_t *q,
                                                                                     size_t in)
{
    __m512i acc = _mm512_setzero_si512();
    for (size_t k = 0; k < in; k += 64) {
        const __mmask64 m = in - k >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (in - k)) - 1);
        acc = _mm512_dpbusd_epi32(acc, _mm512_maskz_loadu_epi8(m, c + k), _mm512_loadu_si512(q + k));
    }
    return _mm512_reduce_add_epi32(acc);
}

static int have_vnni(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni");
}
#else
static int32_t dot_u8s8_vnni(const uint8_t *c, const int8_t *q, size_t in) { return dot_u8s8_scalar(c, q, in); }
static int have_vnni(void) { return 0; }
#endif

static void int8_task(void *v, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const int8_job *j = v;
    const rt_weight *W = j->W;
    const size_t in = (size_t)W->in;
    for (int64_t t = begin; t < end; t++)
        for (int r = (int)t * W_BLOCK; r < W->out && r < (int)(t + 1) * W_BLOCK; r++) {
            uint16_t h;
            memcpy(&h, W->data + 2 * (size_t)r, 2);
            const float sw = lmq_f16_to_f32(h);
            const uint8_t *c = W->data + W->L.code_offset + (size_t)r * in;
            for (int i = 0; i < j->n; i++) {
                const int8_t *q = j->qx + (size_t)i * j->ldq;
                const int32_t dot = (j->vnni ? dot_u8s8_vnni(c, q, in) : dot_u8s8_scalar(c, q, in)) - 128 * j->sum[i];
                const float out = (float)dot * j->sx[i] * sw;
                j->y[(size_t)i * W->out + r] = W->b ? out + W->b[r] : out;
            }
        }
}

static int int8_path(const rt_weight *W)
{
    return W->q.dtype == LMQ_T_INT8 && W->q.gran == LMQ_GRAN_CHANNEL && !W->q.asym &&
           W->act.scheme == LMQ_ACT_INT8 && W->act.gran == LMQ_ACT_TOKEN && W->in <= INT8_MAX_IN;
}

static lmq_code int8_linear(const rt_exec *ex, const float *x, int n, const rt_weight *W, float *y, lmq_err *err)
{
    const size_t in = (size_t)W->in, ldq = (in + 63) / 64 * 64;
    int8_job j = { .W = W, .ldq = ldq, .n = n, .vnni = ex->isa == RT_ISA_AVX512 && have_vnni(), .y = y };
    int8_t *qx = calloc((size_t)n * ldq, 1);
    float *sx = malloc((size_t)n * sizeof *sx);
    int32_t *sum = malloc((size_t)n * sizeof *sum);
    if (!qx || !sx || !sum) {
        free(qx), free(sx), free(sum);
        return lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory for the activations", W->name);
    }
    for (int i = 0; i < n; i++) {
        const float *xi = x + (size_t)i * in;
        sx[i] = act_scale(xi, in);
        sum[i] = 0;
        for (size_t k = 0; k < in && sx[i] > 0.0f; k++)
            sum[i] += qx[(size_t)i * ldq + k] = (int8_t)round_clamp127(xi[k] / sx[i]);
    }
    j.qx = qx, j.sx = sx, j.sum = sum;
    const int64_t tasks = (W->out + W_BLOCK - 1) / W_BLOCK, macs = (int64_t)n * W->out * W->in;
    lmq_pool_for(macs < RT_PARALLEL_MIN_WORK ? NULL : ex->pool, tasks, 1, int8_task, &j);
    free(qx), free(sx), free(sum);
    return LMQ_OK;
}

/* Room for len activations: local when they fit (cap floats), else aligned heap memory (NULL when
 * there is none). */
static float *activations(float *local, size_t cap, size_t len)
{
    return len <= cap ? local : aligned_alloc(64, (len * sizeof(float) + 63) / 64 * 64);
}

lmq_code rt_linear(const rt_exec *ex, const float *x, int n, const rt_weight *W, float *y, lmq_err *err)
{
    lmq_code c = ex->observe ? ex->observe(ex->observe_ctx, W, x, n, err) : LMQ_OK;
    if (c)
        return c;
    if (int8_path(W))
        return int8_linear(ex, x, n, W, y, err);
    linear_job j = { .isa = ex->isa, .f = fused_row(ex->isa, W), .W = W, .x = x, .y = y, .n = n };
    const int direct = W->q.dtype == LMQ_T_F32 || (j.f && n <= FUSED_ROWS);
    j.staged = !direct;
    j.x_blocks = (n + X_BLOCK - 1) / X_BLOCK;
    const int threads = lmq_pool_threads(ex->pool);
    int held[LMQ_POOL_MAX_THREADS];
    /* A decoded token's quantised and reordered activations fit on the stack. */
    _Alignas(64) float local[2][4096];
    float *xq = NULL, *xp = NULL;
    const size_t len = (size_t)n * (size_t)W->in, cap = sizeof local[0] / sizeof local[0][0];
    /* Aligned like the mapping's blobs: a vector load of a row never straddles two lines. */
    const size_t scratch = ((size_t)threads * W_BLOCK * (size_t)W->in * sizeof *j.scratch + 63) / 64 * 64;
    if (W->act.scheme != LMQ_ACT_NONE) {
        if (!(xq = activations(local[0], cap, len))) {
            c = lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory for the activations", W->name);
            goto done;
        }
        act_quantize(W, x, n, xq);
        j.x = xq;
    }
    if (j.f && j.f->reorder) {
        if (!(xp = activations(local[1], cap, len))) {
            c = lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory for the activations", W->name);
            goto done;
        }
        j.f->reorder(j.x, n, W->in, xp);
        j.x = xp;
    }
    if (j.staged && !(j.scratch = aligned_alloc(64, scratch))) {
        c = lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory for a block of rows", W->name);
        goto done;
    }
    for (int t = 0; t < threads; t++)
        held[t] = -1;
    j.held = held;
    const int64_t tasks = (int64_t)j.x_blocks * ((W->out + W_BLOCK - 1) / W_BLOCK);
    const int64_t macs = (int64_t)n * W->out * W->in;
    /* Runs of neighbouring blocks per hand-out: each thread streams long stretches of W, which
     * memory serves faster than blocks dealt out alternately (+25 % decode on 2 cores). */
    const int64_t grain = tasks / (4 * threads) > 1 ? tasks / (4 * threads) : 1;
    lmq_pool_for(macs < RT_PARALLEL_MIN_WORK ? NULL : ex->pool, tasks, grain, linear_task, &j);
    if (j.failed)
        c = lmq_fail(err, LMQ_E_FORMAT, "tensor %s: stored rows do not decode", W->name);
done:
    free(j.scratch);
    if (xq != local[0])
        free(xq);
    if (xp != local[1])
        free(xp);
    return c;
}
