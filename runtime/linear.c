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
/* The most rows of x a tile takes: three rows of x against four of W keep 24 AVX-512 accumulators
 * in registers and read each vector of W for three products (prefill +22 % over two rows). */
#define TILE_X 3
/* Up to this many activation rows the fused kernels decode W in registers for every tile;
 * beyond it a block of W is decoded once into scratch and reused by every row (int4 and int8
 * 3072 × 768: 5 to 8 rows fused take two thirds of the time staged; at 16 they are even). */
#define FUSED_ROWS 8
/* How far ahead of the rows being read the fused kernels ask for memory: about what is in flight
 * between a request and its arrival at one core's share of the bandwidth. */
#define PREFETCH_BYTES 8192
/* Zero codes up to this size times an 11-bit fp16 scale fit fp32's 24 bits exactly. */
#define ZERO_EXACT 8192

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
    const size_t tile_bytes = 4 * (size_t)W->in * lmq_encoding_of(t->q.dtype)->bits / 8;
    W->ahead_tiles = tile_bytes ? (int)((PREFETCH_BYTES + tile_bytes - 1) / tile_bytes) : 0;
    for (size_t i = 0; W->q.asym && i < (size_t)W->L.n_scales && !W->wide_zeros; i++) {
        int16_t z;
        memcpy(&z, W->data + W->L.zero_offset + 2 * i, 2);
        W->wide_zeros = z > ZERO_EXACT || z < -ZERO_EXACT;
    }
    if (W->act.scheme >= LMQ_ACT_COUNT || W->act.gran >= LMQ_ACT_GRAN_COUNT)
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: unknown activation quantisation (%u, %u)", t->name,
                        (unsigned)W->act.scheme, (unsigned)W->act.gran);
    return LMQ_OK;
}

/* ---------------------------------------------------------------- activation quantisation */

/* roundf(v) (half away from zero) clamped to [-127, 127]: truncation and its exact remainder,
 * cheaper than a call. v is clamped first (a subnormal max makes its scale inexact, and NaN goes
 * to -127 as through fmaxf; comparisons, not fmaxf, so that the compiler inlines them). */
static inline int round_clamp127(float v)
{
    v = v > -127.5f ? v : -127.5f;
    v = v < 127.5f ? v : 127.5f;
    const int t = (int)v;
    const float f = v - (float)t;
    const int r = t + (f >= 0.5f) - (f <= -0.5f);
    return r > 127 ? 127 : r < -127 ? -127 : r;
}

/* The int8 activation scale of x[0..len): max|x| / 127 (0 for a zero max; NaN passed over). */
static float act_scale(const float *x, size_t len)
{
    float mx = 0.0f;
    for (size_t i = 0; i < len; i++) {
        const float a = fabsf(x[i]);
        mx = a > mx ? a : mx;
    }
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

/* ---------------------------------------------------------------- fused kernels */

/* Shared by every kernel set: where a row's bytes, scales and zero points are, a group's
 * parameters, prefetching, and the loops over tiles and rows. Each kernel set supplies a tile
 * (MR ≤ TILE_X rows of x against 4 rows of W) and a row decoder built on its own step. */

/* MR rows of x [MR × ldx] against rows j[0..3] of W into out[i][c], without bias. */
typedef void (*tile_fn)(int MR, const rt_weight *W, const int j[4], const float *x, size_t ldx,
                        float out[TILE_X][4]);
/* Row j of W decoded into out[in], in the kernel set's order. */
typedef void (*row_fn)(const rt_weight *W, int j, float *out);
/* Columns [k0, k1) of a tile whose 4 rows of W every tile of x in a task reuses (prefill): the
 * rows are in cache, so nothing is prefetched (asking for them again cost a fifth), and a long row
 * goes in stretches, its accumulators waiting in acc between them, so that the rows' stretch stays
 * in L1 while the tiles of x pass. */
typedef struct {
    int64_t k0, k1;
    float *acc; /* [2][TILE_X][4][16] */
} kspan;
/* As tile_fn over a stretch (fp32 on AVX-512: the products of prefill). */
typedef void (*span_fn)(int MR, const rt_weight *W, const int j[4], const float *x, size_t ldx, const kspan *ks,
                        float out[TILE_X][4]);

/* ENC_I8X, ENC_I4X: int8 read in blocks of 64 columns, int4 in blocks of 128 (see row_step16). */
enum { ENC_F32, ENC_F16, ENC_BF16, ENC_I8, ENC_I8X, ENC_I4, ENC_I4X, ENC_I3, ENC_I2 };
static const unsigned BITS[] = { [ENC_F32] = 32, [ENC_F16] = 16, [ENC_BF16] = 16, [ENC_I8] = 8, [ENC_I8X] = 8,
                                 [ENC_I4] = 4,   [ENC_I4X] = 4,  [ENC_I3] = 3,   [ENC_I2] = 2 };
/* The columns an ENC_I8X or ENC_I4X step reads a row in: one 64-byte block (0: any step alone). */
static const int BLOCK[] = { [ENC_F32] = 0, [ENC_I8X] = 64, [ENC_I4X] = 128, [ENC_I2] = 0 };

/* One row of W as a step walks it: where its values or codes start, where its scales and zero
 * points start. */
typedef struct {
    const uint8_t *p, *sc, *zp;
} rowptr;

static inline void row_ptr(int enc, const rt_weight *W, int j, rowptr *r)
{
    const size_t in = (size_t)W->in;
    r->p = W->data + W->L.code_offset + (size_t)j * in * BITS[enc] / 8;
    const size_t sidx = W->q.gran == LMQ_GRAN_TENSOR ? 0 : (size_t)j * (size_t)W->L.groups_per_row;
    r->sc = W->data + sidx * 2;
    r->zp = W->q.asym ? W->data + W->L.zero_offset + sidx * 2 : NULL;
}

/* Where column k of the row starts. */
static inline const uint8_t *row_at(int enc, const uint8_t *p, int64_t k)
{
    return p + (size_t)k * BITS[enc] / 8;
}

/* Group gi's scale (fp16 bits, which a kernel set widens in a register) and zero code; the
 * weights are (code − zero)·scale, rounded as q_dequantize does (the differences are small
 * integers, exact as floats). AVX-512 reads them 16 groups at a time instead (row_group16). */
static inline void group_of(const rowptr *r, int64_t gi, unsigned bits, uint16_t *s, int *z)
{
    memcpy(s, r->sc + 2 * gi, 2);
    *z = 1 << (bits - 1);
    if (r->zp) {
        int16_t z16;
        memcpy(&z16, r->zp + 2 * gi, 2);
        *z = z16;
    }
}

/* Rows are short streams the hardware prefetcher learns late: a tile asks for what it reads
 * W->ahead_tiles tiles on (a product, not the division a tile of short rows would pay for it:
 * int4 768 columns from cache +4 %). */
static inline size_t prefetch_ahead(int enc, const rt_weight *W)
{
    return (size_t)W->ahead_tiles * 4 * (size_t)W->in * BITS[enc] / 8;
}

/* The requests of a tile's step over columns [k, k + n), whose rows start at p and follow one
 * another: the lines starting in the stretch of the tile's bytes that the step's share is, `ahead`
 * bytes on. The tile is read as one stream in address order, not four rows in step: memory serves
 * that faster (fp32 and int8 from memory +10-15 %). */
static inline void prefetch_step(int enc, const uint8_t *p, int64_t k, int n, size_t ahead)
{
    if (!ahead) /* rows in cache */
        return;
    const size_t len = (size_t)n * 4 * BITS[enc] / 8;
    const uint8_t *a = p + ahead + (size_t)k * 4 * BITS[enc] / 8;
    if (len % 64 == 0) { /* whole lines (constants fold it): every call starts where the last ended */
        for (size_t b = 0; b < len; b += 64)
            __builtin_prefetch(a + b, 0, 3);
        return;
    }
    for (uintptr_t line = ((uintptr_t)a + 63) & ~(uintptr_t)63; line < (uintptr_t)a + len; line += 64)
        __builtin_prefetch((const void *)line, 0, 3);
}

/* Rows [j0, j0 + cols) of W against m rows of x: tiles of 4 rows of W (a short last tile repeats
 * its last row) and TILE_X rows of x (fewer at the end); an output's operations depend on neither.
 * sc: the rows' scales when the tiles' sums are to be scaled (sc[i] row j0 + i's), else NULL.
 * With a span tile (m ≤ X_BLOCK), the rows go in stretches of KSPAN columns (4 rows of fp32: 16 KiB,
 * beside a stretch of x and the accumulators in L1; longer stretches or none were slower), the
 * accumulators of tile i of x waiting in acc[i]. */
#define KSPAN 1024
typedef float span_acc[2 * TILE_X * 4 * 16];
static void tiles_loop(tile_fn tile, span_fn span, span_acc *acc, const rt_weight *W, const float *x, size_t ldx,
                       int m, int j0, int cols, const float *sc, float *y, size_t ldy)
{
    const int64_t K = W->in, stretch = span ? KSPAN : K;
    for (int jb = j0; jb < j0 + cols; jb += 4) {
        const int nr = j0 + cols - jb < 4 ? j0 + cols - jb : 4;
        const int j[4] = { jb, jb + (nr > 1), jb + (nr > 2 ? 2 : nr - 1), jb + (nr > 3 ? 3 : nr - 1) };
        float out[TILE_X][4];
        for (int64_t k0 = 0; k0 < K; k0 += stretch) {
            kspan ks = { k0, K - k0 < stretch ? K : k0 + stretch, NULL };
            for (int i = 0; i < m;) {
                const int rows = m - i >= TILE_X ? TILE_X : m - i;
                if (span) {
                    ks.acc = acc[i / TILE_X];
                    span(rows, W, j, x + (size_t)i * ldx, ldx, &ks, out);
                } else {
                    tile(rows, W, j, x + (size_t)i * ldx, ldx, out);
                }
                for (int r = 0; r < rows && ks.k1 == K; r++)
                    for (int c = 0; c < nr; c++) {
                        const float v = sc ? out[r][c] * sc[jb - j0 + c] : out[r][c];
                        y[(size_t)(i + r) * ldy + jb - j0 + c] = W->b ? v + W->b[jb + c] : v;
                    }
                i += rows;
            }
        }
    }
}

#if HAVE_X86

/* ---- AVX-512: steps of 32 columns */
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define AVX512_INLINE static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))

/* AVX-512 int8 kernels with one scale a row and rows in blocks of 64 sum code − zero and scale
 * the sum once (ENC_I8X). Others come in two kinds by the weights' zero codes (rt_weight.wide_zeros).
 * Narrow: a weight (code − zero)·scale is one FMA, code·scale − zero·scale, as both products are
 * exact (at most 8 and 13 bits times fp16's 11) and the FMA rounds once, as q_dequantize does: a
 * vector op less per 16 weights than subtracting first (+20 %). Wide, and the int4 family's
 * tables (built once a group, where that op is not worth saving): the code minus the zero, then
 * times the scale. */
typedef struct {
    rowptr r;
    int64_t groups;                /* the row's */
    size_t sahead;                 /* where the parameters of the row the codes' prefetch reaches are */
    float gs[16], gz[16], gn[16];  /* scales, zero codes and −zero·scale of groups 16·⌊gi/16⌋ on */
    __m512 s, z, tab;              /* the group's scale and zero code (wide) or −zero·scale (narrow, int8);
                                      int4 and narrower: the 16 values a code can stand for */
} wrow16;

AVX512_INLINE __mmask16 lanes16(int64_t n)
{
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* Row j's pointers; its parameters are prefetched `ahead` bytes of codes on (0: not at all). */
AVX512_INLINE void row_ptr16(int enc, const rt_weight *W, int j, size_t ahead, wrow16 *r)
{
    row_ptr(enc, W, j, &r->r);
    r->groups = W->q.gran == LMQ_GRAN_GROUP ? W->L.groups_per_row : 1;
    r->sahead = W->q.gran == LMQ_GRAN_TENSOR || !ahead ? 0 : (size_t)W->ahead_tiles * 4 * (size_t)r->groups * 2;
    r->s = r->z = r->tab = _mm512_setzero_ps();
}

/* Group gi's parameters, asked for in order from group 0. Its row's scales and zero codes are
 * read and widened 16 at a time: one group at a time, that work cost a 32-column step of int4 as
 * much as its products (int4 g32 decode +60 %, g128 +20 %). */
AVX512_INLINE void row_group16(int enc, int wide, wrow16 *r, int64_t gi, unsigned bits)
{
    const int64_t i = gi % 16;
    const int narrow8 = enc == ENC_I8 && !wide; /* needs −zero·scale, not the zero code */
    if (i == 0) {
        /* Parameters are a stream of their own, which the hardware does not learn in time. */
        __builtin_prefetch(r->r.sc + 2 * gi + r->sahead, 0, 3);
        if (r->r.zp)
            __builtin_prefetch(r->r.zp + 2 * gi + r->sahead, 0, 3);
        const __mmask16 m = lanes16(r->groups - gi);
        const __m512 s = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, r->r.sc + 2 * gi));
        const __m512 z = r->r.zp ? _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm256_maskz_loadu_epi16(m, r->r.zp + 2 * gi)))
                                 : _mm512_set1_ps((float)(1 << (bits - 1)));
        _mm512_storeu_ps(r->gs, s);
        if (narrow8)
            _mm512_storeu_ps(r->gn, _mm512_mul_ps(z, _mm512_sub_ps(_mm512_setzero_ps(), s)));
        else
            _mm512_storeu_ps(r->gz, z);
    }
    r->s = _mm512_set1_ps(r->gs[i]);
    if (narrow8)
        r->tab = _mm512_set1_ps(r->gn[i]);
    else
        r->z = _mm512_set1_ps(r->gz[i]);
    if (enc == ENC_I8X) /* what 2^23 + code less 2^23 + zero leaves: see row_step16 */
        r->tab = _mm512_add_ps(r->z, _mm512_set1_ps(8388608.0f));
    if (enc >= ENC_I4) { /* the table repeats every 2^bits entries: see row_step16 */
        const __m512 codes = BITS[enc] == 4  ? _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
                             : enc == ENC_I3 ? _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7)
                                             : _mm512_setr_ps(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3);
        r->tab = _mm512_mul_ps(_mm512_sub_ps(codes, r->z), r->s);
    }
}

/* For the 3- and 2-bit steps: the bytes each lane of the first and the second 16 codes of 32 takes
 * (vpshufb indices: code c's bits start at bit c·bits, in byte c·bits/8; 0x80 gives 0), and the
 * shift that brings its code to bit 0. */
#define NARROW_LANE(c, bits) ((c) * (bits) / 8 | ((c) * (bits) / 8 + 1) << 8 | 0x80 << 16 | 0x80u << 24)
#define NARROW_ROW(o, bits)                                                                                       \
    { NARROW_LANE(o + 0, bits),  NARROW_LANE(o + 1, bits),  NARROW_LANE(o + 2, bits),  NARROW_LANE(o + 3, bits),  \
      NARROW_LANE(o + 4, bits),  NARROW_LANE(o + 5, bits),  NARROW_LANE(o + 6, bits),  NARROW_LANE(o + 7, bits),  \
      NARROW_LANE(o + 8, bits),  NARROW_LANE(o + 9, bits),  NARROW_LANE(o + 10, bits), NARROW_LANE(o + 11, bits), \
      NARROW_LANE(o + 12, bits), NARROW_LANE(o + 13, bits), NARROW_LANE(o + 14, bits), NARROW_LANE(o + 15, bits) }
#define NARROW_SHIFT(bits)                                                                                          \
    { 0 * (bits) % 8,  1 * (bits) % 8,  2 * (bits) % 8,  3 * (bits) % 8,  4 * (bits) % 8,  5 * (bits) % 8,          \
      6 * (bits) % 8,  7 * (bits) % 8,  8 * (bits) % 8,  9 * (bits) % 8,  10 * (bits) % 8, 11 * (bits) % 8,         \
      12 * (bits) % 8, 13 * (bits) % 8, 14 * (bits) % 8, 15 * (bits) % 8 }
static const union {
    uint32_t u[3][16];
    __m512i v[3];
} NARROW[2] = {
    { .u = { NARROW_ROW(0, 3), NARROW_ROW(16, 3), NARROW_SHIFT(3) } },
    { .u = { NARROW_ROW(0, 2), NARROW_ROW(16, 2), NARROW_SHIFT(2) } },
};

/* 32 weights of the row from column k: w0 then w1, zero in dead lanes. int4 gives the even
 * columns of the 32 in w0 and the odd ones in w1 (low nibbles, then high); ENC_I4X, the s-th 32
 * of a block of 128 columns c = 8·d + e (lane d, e = 0..7 in the block's eight vectors): e = 2s
 * in w0, 2s + 1 in w1; ENC_I8X, the s-th 32 of a block of 64 columns c = 4·d + e: e = 2s in w0,
 * 2s + 1 in w1, as code − zero (the row's scale multiplies its product once). x is reordered the
 * same way before the product. last: the step is in the tensor's last block (ENC_I8X and ENC_I4X
 * read it without going past its end). */
AVX512_INLINE void row_step16(int enc, int wide, const wrow16 *r, int64_t k, __mmask16 m0, __mmask16 m1, int last,
                              __m512 *w0, __m512 *w1)
{
    const uint8_t *p = row_at(enc, r->r.p, k), *p1 = row_at(enc, r->r.p, k + 16);
    switch (enc) {
    case ENC_F32:
        *w0 = _mm512_maskz_loadu_ps(m0, p);
        *w1 = _mm512_maskz_loadu_ps(m1, p1);
        break;
    case ENC_F16:
        *w0 = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m0, p));
        *w1 = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m1, p1));
        break;
    case ENC_BF16:
        *w0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m0, p)), 16));
        *w1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m1, p1)), 16));
        break;
    case ENC_I8: {
        __m512 c0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m0, p)));
        __m512 c1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m1, p1)));
        if (!wide) {
            *w0 = _mm512_maskz_fmadd_ps(m0, c0, r->s, r->tab);
            *w1 = _mm512_maskz_fmadd_ps(m1, c1, r->s, r->tab);
        } else {
            *w0 = _mm512_maskz_mul_ps(m0, _mm512_sub_ps(c0, r->z), r->s);
            *w1 = _mm512_maskz_mul_ps(m1, _mm512_sub_ps(c1, r->z), r->s);
        }
        break;
    }
    case ENC_I8X: { /* whole 64-blocks. The 32-bit lane d loaded from byte e of the block has byte
                     4·d + e at its bottom; kept and put under the exponent of 2^23 (one vpternlogd) it
                     is the float 2^23 + code, and less 2^23 + zero, exactly code − zero: three vector
                     ops per 16 weights with the product's FMA, none of them on the shuffle port,
                     where ENC_I8 takes four with the scale's (int8 768 × 768 from cache, one core of
                     an Intel Xeon: 17 GB/s as ENC_I8, 21 as ENC_I8X). */
        const int e = (int)(k / 16 % 4);
        const uint8_t *b = r->r.p + k / 64 * 64 + e;
        const __m512i c0 = last ? _mm512_maskz_loadu_epi8(~0ull >> e, b) : _mm512_loadu_si512(b);
        const __m512i c1 = last ? _mm512_maskz_loadu_epi8(~0ull >> (e + 1), b + 1) : _mm512_loadu_si512(b + 1);
        const __m512i low = _mm512_set1_epi32(0xFF), two23 = _mm512_set1_epi32(0x4B000000);
        *w0 = _mm512_sub_ps(_mm512_castsi512_ps(_mm512_ternarylogic_epi32(c0, low, two23, 0xEA)), r->tab);
        *w1 = _mm512_sub_ps(_mm512_castsi512_ps(_mm512_ternarylogic_epi32(c1, low, two23, 0xEA)), r->tab);
        break;
    }
    case ENC_I3:
    case ENC_I2: { /* whole 32-blocks only (12 or 8 bytes), in column order. Every 128-bit lane gets
                    a copy of the bytes; each 32-bit lane picks the two holding its code (vpshufb)
                    and shifts the code to bit 0; vpermps reads 4 bits, the code's and the next
                    one's low bits, which the repeating table ignores. */
        const int bits = BITS[enc];
        const __m512i all = _mm512_broadcast_i32x4(_mm_maskz_loadu_epi8((__mmask16)((1u << (4 * bits)) - 1), p));
        const __m512i *narrow = NARROW[enc - ENC_I3].v;
        *w0 = _mm512_permutexvar_ps(_mm512_srlv_epi32(_mm512_shuffle_epi8(all, narrow[0]), narrow[2]), r->tab);
        *w1 = _mm512_permutexvar_ps(_mm512_srlv_epi32(_mm512_shuffle_epi8(all, narrow[1]), narrow[2]), r->tab);
        break;
    }
    default: { /* ENC_I4, whole 32-blocks; ENC_I4X, whole 128-blocks */
        /* vpermps reads the low 4 bits of each index: the low nibble needs no mask. ENC_I4X's
         * 32-bit lane d loaded from byte s on in the block's 64 has byte 4·d + s at the bottom
         * (columns 8·d + 2·s and one on): a load where ENC_I4 widens 16 bytes on the shuffle
         * port, the bottleneck with the lookups (int4 g128 768 × 768 from cache, one core of an
         * Intel Xeon: 10.4-10.7 GB/s as ENC_I4, 12.0-12.1 as ENC_I4X). */
        __m512i c;
        if (enc == ENC_I4) {
            c = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
        } else {
            const int s = (int)(k / 32 % 4);
            const uint8_t *b = r->r.p + k / 128 * 64 + s;
            c = last ? _mm512_maskz_loadu_epi8(~0ull >> s, b) : _mm512_loadu_si512(b);
        }
        *w0 = _mm512_permutexvar_ps(c, r->tab);
        *w1 = _mm512_permutexvar_ps(_mm512_srli_epi32(c, 4), r->tab);
        break;
    }
    }
}

/* One step of a tile: 32 columns from k of MR rows of x against the tile's 4 rows of W. */
AVX512_INLINE void tile_step16(int enc, int wide, int MR, wrow16 r[4], const float *x, size_t ldx, int64_t k, __mmask16 m0,
                               __mmask16 m1, int last, __m512 a0[TILE_X][4], __m512 a1[TILE_X][4])
{
    __m512 x0[TILE_X], x1[TILE_X];
    RT_UNROLL for (int i = 0; i < MR; i++) {
        x0[i] = _mm512_maskz_loadu_ps(m0, x + (size_t)i * ldx + k);
        x1[i] = _mm512_maskz_loadu_ps(m1, x + (size_t)i * ldx + k + 16);
    }
    RT_UNROLL for (int c = 0; c < 4; c++) {
        __m512 w0, w1;
        row_step16(enc, wide, &r[c], k, m0, m1, last, &w0, &w1);
        RT_UNROLL for (int i = 0; i < MR; i++) {
            a0[i][c] = _mm512_fmadd_ps(x0[i], w0, a0[i][c]);
            a1[i][c] = _mm512_fmadd_ps(x1[i], w1, a1[i][c]);
        }
    }
}

/* Per output, two 16-lane accumulators over steps of 32 (w0's products in one, w1's in the
 * other, so that no chain of dependent FMAs sets the pace), added and reduced once at the end in
 * a fixed order. Whole steps run with constant masks (plain loads); a row's last, partial step
 * with live-lane masks. */
AVX512_INLINE void tile16_span(int enc, int wide, int MR, const rt_weight *W, const int j[4], const float *x,
                               size_t ldx, const kspan *ks, float out[TILE_X][4])
{
    const int64_t K = W->in, group = enc >= ENC_I8 ? W->L.group : K, end = ks ? ks->k1 : K;
    const size_t ahead = ks ? 0 : prefetch_ahead(enc, W);
    wrow16 r[4]; /* the parameters: set by row_group16 before a quantised step */
    RT_UNROLL for (int c = 0; c < 4; c++)
        row_ptr16(enc, W, j[c], ahead, &r[c]);
    __m512 a0[TILE_X][4], a1[TILE_X][4];
    const int resume = ks && ks->k0 > 0;
    RT_UNROLL for (int i = 0; i < MR; i++)
        RT_UNROLL for (int c = 0; c < 4; c++) {
            a0[i][c] = resume ? _mm512_load_ps(ks->acc + (i * 4 + c) * 16) : _mm512_setzero_ps();
            a1[i][c] = resume ? _mm512_load_ps(ks->acc + ((TILE_X + i) * 4 + c) * 16) : _mm512_setzero_ps();
        }
    /* Whole spans of SPAN columns (a cache line of every row, at least a step) run without a test
     * per step: one prefetch per line, the group's start the only branch. A stretch (fp32 only)
     * starts at a multiple of the step. */
    const int64_t SPAN = 512 / BITS[enc] > 32 ? 512 / BITS[enc] / 32 * 32 : 32;
    int64_t k = ks ? ks->k0 : 0, group_end = 0, gi = 0;
    /* ENC_I8X, ENC_I4X: the tensor's last block goes below, read without going past its end. */
    const int64_t whole_end = BLOCK[enc] && j[3] == W->out - 1 ? end - BLOCK[enc] : end;
    for (; k + SPAN <= whole_end; k += SPAN) {
        prefetch_step(enc, r[0].r.p, k, SPAN, ahead);
        RT_UNROLL for (int64_t s = k; s < k + SPAN; s += 32) {
            if (enc >= ENC_I8 && s == group_end) {
                RT_UNROLL for (int c = 0; c < 4; c++)
                    row_group16(enc, wide, &r[c], gi, BITS[enc]);
                group_end += group, gi++;
            }
            tile_step16(enc, wide, MR, r, x, ldx, s, 0xFFFF, 0xFFFF, 0, a0, a1);
        }
    }
    for (; k < end; k += 32) {
        if (enc >= ENC_I8 && k == group_end) {
            RT_UNROLL for (int c = 0; c < 4; c++)
                row_group16(enc, wide, &r[c], gi, BITS[enc]);
            group_end += group, gi++;
        }
        prefetch_step(enc, r[0].r.p, k, 32, ahead);
        tile_step16(enc, wide, MR, r, x, ldx, k, lanes16(K - k), lanes16(K - k - 16), 1, a0, a1);
    }
    if (end < K) { /* the stretch's sums wait for the next */
        RT_UNROLL for (int i = 0; i < MR; i++)
            RT_UNROLL for (int c = 0; c < 4; c++) {
                _mm512_store_ps(ks->acc + (i * 4 + c) * 16, a0[i][c]);
                _mm512_store_ps(ks->acc + ((TILE_X + i) * 4 + c) * 16, a1[i][c]);
            }
        return;
    }
    RT_UNROLL for (int i = 0; i < MR; i++)
        RT_UNROLL for (int c = 0; c < 4; c++)
            out[i][c] = _mm512_reduce_add_ps(_mm512_add_ps(a0[i][c], a1[i][c]));
}

AVX512_INLINE void tile16(int enc, int wide, int MR, const rt_weight *W, const int j[4], const float *x, size_t ldx,
                          float out[TILE_X][4])
{
    tile16_span(enc, wide, MR, W, j, x, ldx, NULL, out);
}

/* fp32 over a stretch (ks: see kspan). */
AVX512 static void span_avx512_f32(int MR, const rt_weight *W, const int j[4], const float *x, size_t ldx,
                                   const kspan *ks, float out[TILE_X][4])
{
    if (MR == 3)
        tile16_span(ENC_F32, 0, 3, W, j, x, ldx, ks, out);
    else if (MR == 2)
        tile16_span(ENC_F32, 0, 2, W, j, x, ldx, ks, out);
    else
        tile16_span(ENC_F32, 0, 1, W, j, x, ldx, ks, out);
}

AVX512_INLINE void row16(int enc, int wide, const rt_weight *W, int j, float *o)
{
    const int64_t K = W->in, group = enc >= ENC_I8 ? W->L.group : K;
    wrow16 r;
    row_ptr16(enc, W, j, 0, &r);
    for (int64_t k = 0, group_end = 0, gi = 0; k < K; k += 32) {
        const __mmask16 m0 = lanes16(K - k), m1 = lanes16(K - k - 16);
        if (enc >= ENC_I8 && k == group_end)
            row_group16(enc, wide, &r, gi++, BITS[enc]), group_end += group;
        __m512 w0, w1;
        row_step16(enc, wide, &r, k, m0, m1, BLOCK[enc] && j == W->out - 1 && k >= K - BLOCK[enc], &w0, &w1);
        _mm512_mask_storeu_ps(o + k, m0, w0);
        _mm512_mask_storeu_ps(o + k + 16, m1, w1);
    }
}

/* x reordered within each 128 columns as the ENC_I4X step delivers W: column 8·d + e to 16·e + d. */
AVX512 static void permute128(const float *x, int n, int in, float *out)
{
    const __m512i d8 = _mm512_setr_epi32(0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120);
    for (size_t k = 0; k < (size_t)n * (size_t)in; k += 128) /* in is a multiple of 128 */
        for (int e = 0; e < 8; e++)
            _mm512_storeu_ps(out + k + 16 * e, _mm512_i32gather_ps(d8, x + k + e, 4));
}

/* x reordered within each 64 columns as the ENC_I8X step delivers W: column 4·d + e to 16·e + d. */
AVX512 static void permute64(const float *x, int n, int in, float *out)
{
    const __m512i d4 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60);
    for (size_t k = 0; k < (size_t)n * (size_t)in; k += 64) /* in is a multiple of 64 */
        for (int e = 0; e < 4; e++)
            _mm512_storeu_ps(out + k + 16 * e, _mm512_i32gather_ps(d4, x + k + e, 4));
}

/* x reordered within each 32 columns as the ENC_I4 step delivers W: even columns, then odd. */
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

/* ---- AVX2 + FMA + F16C: steps of 8 columns, in order, one 8-lane accumulator per output and
 * the reduction of rt_gemm_nt's AVX2 tiles, so that a fused product is bit for bit the fp32
 * product over the decoded rows (which prefill runs). */
#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

typedef struct {
    rowptr r;
    __m256 s;
    __m256i z;
} wrow8;

AVX2_INLINE __m256i lanes8(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

AVX2_INLINE void row_group8(wrow8 *r, int64_t gi, unsigned bits)
{
    uint16_t s;
    int z;
    group_of(&r->r, gi, bits, &s, &z);
    r->s = _mm256_cvtph_ps(_mm_set1_epi16((short)s));
    r->z = _mm256_set1_epi32(z);
}

/* The n (1..8) weights of the row from column k, +0 in dead lanes (as the fp32 product's masked
 * loads give). A partial step reads its bytes through a copy, never past the row. int4: code l
 * of the 8 is nibble l of their 4 bytes (low nibble first), so one variable shift puts every
 * code in its lane in column order. */
AVX2_INLINE __m256 row_step8(int enc, const wrow8 *r, int64_t k, int n)
{
    const uint8_t *p = row_at(enc, r->r.p, k);
    uint8_t part[16] = { 0 };
    if (n < 8) {
        memcpy(part, p, (size_t)n * BITS[enc] / 8);
        p = part;
    }
    __m256 w;
    if (enc == ENC_F16) {
        w = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    } else if (enc == ENC_BF16) {
        w = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
    } else {
        __m256i c;
        if (enc == ENC_I8) {
            c = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
        } else { /* ENC_I4: whole steps only */
            int32_t v;
            memcpy(&v, p, 4);
            c = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(v), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                 _mm256_set1_epi32(15));
        }
        w = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(c, r->z)), r->s);
        if (n < 8)
            w = _mm256_and_ps(w, _mm256_castsi256_ps(lanes8(n)));
    }
    return w;
}

AVX2_INLINE void tile_step8(int enc, int MR, wrow8 r[4], const float *x, size_t ldx, int64_t k, int n, size_t ahead,
                            __m256 a[TILE_X][4])
{
    __m256 xv[TILE_X];
    RT_UNROLL for (int i = 0; i < MR; i++)
        xv[i] = n == 8 ? _mm256_loadu_ps(x + (size_t)i * ldx + k) : _mm256_maskload_ps(x + (size_t)i * ldx + k, lanes8(n));
    prefetch_step(enc, r[0].r.p, k, 8, ahead);
    RT_UNROLL for (int c = 0; c < 4; c++) {
        const __m256 w = row_step8(enc, &r[c], k, n);
        RT_UNROLL for (int i = 0; i < MR; i++)
            a[i][c] = _mm256_fmadd_ps(xv[i], w, a[i][c]);
    }
}

AVX2_INLINE void tile8(int enc, int MR, const rt_weight *W, const int j[4], const float *x, size_t ldx,
                       float out[TILE_X][4])
{
    const int64_t K = W->in, group = enc >= ENC_I8 ? W->L.group : K;
    wrow8 r[4] = { 0 };
    RT_UNROLL for (int c = 0; c < 4; c++)
        row_ptr(enc, W, j[c], &r[c].r);
    const size_t ahead = prefetch_ahead(enc, W);
    __m256 a[TILE_X][4];
    RT_UNROLL for (int i = 0; i < MR; i++)
        RT_UNROLL for (int c = 0; c < 4; c++)
            a[i][c] = _mm256_setzero_ps();
    for (int64_t k = 0, group_end = 0, gi = 0; k < K; k += 8) {
        if (enc >= ENC_I8 && k == group_end) {
            RT_UNROLL for (int c = 0; c < 4; c++)
                row_group8(&r[c], gi, enc == ENC_I8 ? 8 : 4);
            group_end += group, gi++;
        }
        if (k + 8 <= K)
            tile_step8(enc, MR, r, x, ldx, k, 8, ahead, a);
        else
            tile_step8(enc, MR, r, x, ldx, k, (int)(K - k), ahead, a);
    }
    RT_UNROLL for (int i = 0; i < MR; i++) { /* hsum4 of runtime/kernels.c: the four sums in one order */
        const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a[i][0], a[i][1]), _mm256_hadd_ps(a[i][2], a[i][3]));
        _mm_storeu_ps(out[i], _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
    }
}

AVX2_INLINE void row8(int enc, const rt_weight *W, int j, float *o)
{
    const int64_t K = W->in, group = enc >= ENC_I8 ? W->L.group : K;
    wrow8 r = { 0 };
    row_ptr(enc, W, j, &r.r);
    for (int64_t k = 0, group_end = 0, gi = 0; k < K; k += 8) {
        const int n = K - k >= 8 ? 8 : (int)(K - k);
        if (enc >= ENC_I8 && k == group_end)
            row_group8(&r, gi++, enc == ENC_I8 ? 8 : 4), group_end += group;
        const __m256 w = row_step8(enc, &r, k, n);
        if (n == 8)
            _mm256_storeu_ps(o + k, w);
        else
            _mm256_maskstore_ps(o + k, lanes8(n), w);
    }
}

_Static_assert(TILE_X == 3, "FUSED below makes tiles of 1, 2 and 3 rows of x");
/* Each kernel set's tile and row decoder for one encoding, as plain functions the shared loops
 * call; the kernel set's leading arguments follow the name (AVX-512: the encoding and whether its
 * zero codes are wide; AVX2: the encoding, exact for any zero code). */
#define FUSED(isa, TARGET, W_, name, ...)                                                                      \
    TARGET static void tile_##isa##_##name(int MR, const rt_weight *W, const int j[4], const float *x,         \
                                           size_t ldx, float out[TILE_X][4])                                   \
    {                                                                                                          \
        if (MR == 3)                                                                                           \
            tile##W_(__VA_ARGS__, 3, W, j, x, ldx, out);                                                       \
        else if (MR == 2)                                                                                      \
            tile##W_(__VA_ARGS__, 2, W, j, x, ldx, out);                                                       \
        else                                                                                                   \
            tile##W_(__VA_ARGS__, 1, W, j, x, ldx, out);                                                       \
    }                                                                                                          \
    TARGET static void row_##isa##_##name(const rt_weight *W, int j, float *out)                               \
    {                                                                                                          \
        row##W_(__VA_ARGS__, W, j, out);                                                                       \
    }
FUSED(avx512, AVX512, 16, f32, ENC_F32, 0)
FUSED(avx512, AVX512, 16, f16, ENC_F16, 0)
FUSED(avx512, AVX512, 16, bf16, ENC_BF16, 0)
FUSED(avx512, AVX512, 16, i8, ENC_I8, 0)
FUSED(avx512, AVX512, 16, i8w, ENC_I8, 1)
FUSED(avx512, AVX512, 16, i8x, ENC_I8X, 0)
FUSED(avx512, AVX512, 16, i4, ENC_I4, 0)
FUSED(avx512, AVX512, 16, i4x, ENC_I4X, 0)
FUSED(avx512, AVX512, 16, i3, ENC_I3, 0)
FUSED(avx512, AVX512, 16, i2, ENC_I2, 0)
FUSED(avx2, AVX2, 8, f16, ENC_F16)
FUSED(avx2, AVX2, 8, bf16, ENC_BF16)
FUSED(avx2, AVX2, 8, i8, ENC_I8)
FUSED(avx2, AVX2, 8, i4, ENC_I4)
#define KERNELS(isa, name, perm, ...) { perm, tile_##isa##_##name, row_##isa##_##name, __VA_ARGS__ }
#define PERMUTE32 permute32
#define PERMUTE64 permute64
#define PERMUTE128 permute128
#define F32_SPAN span_avx512_f32
#else
#define F32_SPAN NULL
#define KERNELS(isa, name, perm, ...) { NULL, NULL, NULL, 0 }
#endif

/* One kernel set's kernels for an encoding. reorder: x is reordered as the step delivers W, or NULL.
 * scaled: the row decoder gives code − zero and the tile sums over those; the row's one scale
 * (per channel or per tensor) multiplies the sum (tiles_loop). */
typedef struct {
    void (*reorder)(const float *x, int n, int in, float *out);
    tile_fn tile;
    row_fn row;
    int scaled;
} fused_kernels;

/* The fused encodings: a row per way of reading one, a column per kernel set (empty: none), and
 * the kernels for weights with wide zero codes where they differ (rt_weight.wide_zeros); the first
 * row that applies is taken. block: rows are read in whole blocks of that many columns (1: rows of
 * any length); groups must be a multiple of it and of 32 long, so that a step never spans two;
 * scaled kernels take rows with one scale (per channel or per tensor) only. fp32 on AVX2 is rt_gemm_nt's own product. */
static const struct fused_row {
    lmq_dtype dtype;
    int block;
    fused_kernels isa[RT_ISA_AVX512 + 1], wide[RT_ISA_AVX512 + 1];
} FUSED_ROWS_TABLE[] = {
    { LMQ_T_F32, 1, .isa = { [RT_ISA_AVX512] = KERNELS(avx512, f32, NULL) } },
    { LMQ_T_F16, 1, .isa = { [RT_ISA_AVX2] = KERNELS(avx2, f16, NULL), [RT_ISA_AVX512] = KERNELS(avx512, f16, NULL) } },
    { LMQ_T_BF16, 1, .isa = { [RT_ISA_AVX2] = KERNELS(avx2, bf16, NULL), [RT_ISA_AVX512] = KERNELS(avx512, bf16, NULL) } },
    { LMQ_T_INT8, 64, .isa = { [RT_ISA_AVX512] = KERNELS(avx512, i8x, PERMUTE64, 1) } },
    { LMQ_T_INT8, 1, .isa = { [RT_ISA_AVX2] = KERNELS(avx2, i8, NULL), [RT_ISA_AVX512] = KERNELS(avx512, i8, NULL) },
      .wide = { [RT_ISA_AVX512] = KERNELS(avx512, i8w, NULL) } },
    { LMQ_T_INT4, 128, .isa = { [RT_ISA_AVX512] = KERNELS(avx512, i4x, PERMUTE128) } },
    { LMQ_T_INT4, 32, .isa = { [RT_ISA_AVX2] = KERNELS(avx2, i4, NULL), [RT_ISA_AVX512] = KERNELS(avx512, i4, PERMUTE32) } },
    { LMQ_T_INT3, 32, .isa = { [RT_ISA_AVX512] = KERNELS(avx512, i3, NULL) } },
    { LMQ_T_INT2, 32, .isa = { [RT_ISA_AVX512] = KERNELS(avx512, i2, NULL) } },
};

static const fused_kernels *fused_row(rt_isa isa, const rt_weight *W)
{
    const int64_t group = W->q.gran == LMQ_GRAN_GROUP ? W->q.group : 0;
    if (group % 32)
        return NULL;
    for (size_t i = 0; i < sizeof FUSED_ROWS_TABLE / sizeof FUSED_ROWS_TABLE[0]; i++) {
        const struct fused_row *f = &FUSED_ROWS_TABLE[i];
        if (f->dtype == W->q.dtype && f->isa[isa].tile && W->in % f->block == 0 && group % f->block == 0 &&
            !(f->isa[isa].scaled && group))
            return W->wide_zeros && f->wide[isa].tile ? &f->wide[isa] : &f->isa[isa];
    }
    return NULL;
}

/* Rows [j0, j0 + cols) decoded by the kernel set's step into out (cols × in, its order). */
static void decode_rows(const fused_kernels *f, const rt_weight *W, int j0, int cols, float *out)
{
    for (int c = 0; c < cols; c++)
        f->row(W, j0 + c, out + (size_t)c * (size_t)W->in);
}

int rt_linear_fused(rt_isa isa, const rt_weight *W)
{
    return fused_row(isa, W) != NULL;
}

lmq_code rt_weight_rows(rt_isa isa, const rt_weight *W, int r0, int n, float *out, lmq_err *err)
{
    const fused_kernels *f = fused_row(isa, W);
    if (f && !f->reorder && r0 >= 0 && n >= 0 && r0 <= W->out - n) { /* the same values, in order */
        decode_rows(f, W, r0, n, out);
        return LMQ_OK;
    }
    lmq_code c = q_dequantize_rows(&W->q, W->data, W->L.bytes, W->out, W->in, r0, n, out, err);
    return c ? lmq_err_prefix(err, "tensor %s: ", W->name) : LMQ_OK;
}

/* ---------------------------------------------------------------- the linear layer */

typedef struct {
    rt_isa isa;
    const fused_kernels *f; /* NULL: generic */
    const rt_weight *W;
    const float *x; /* reordered when f->reorder */
    float *y;
    int n, x_blocks, staged;
    float *scratch; /* [threads × W_BLOCK × in] when staged */
    int *held;      /* [threads]: the first row of the block a thread's scratch holds, or -1 */
    int failed;
} linear_job;

/* Rows [c0, c0 + cols)'s scales into sc when the kernel set's product is scaled (see tiles_loop),
 * else NULL. */
static const float *row_scales(const linear_job *j, int c0, int cols, float sc[W_BLOCK])
{
    if (!j->f || !j->f->scaled)
        return NULL;
    const size_t step = j->W->q.gran == LMQ_GRAN_TENSOR ? 0 : 2;
    for (int c = 0; c < cols; c++) {
        uint16_t h;
        memcpy(&h, j->W->data + step * (size_t)(c0 + c), 2);
        sc[c] = lmq_f16_to_f32(h);
    }
    return sc;
}

/* The fp32 product of x rows against `cols` decoded rows at w (in the kernel set's own order):
 * the fused fp32 tile over stretches on AVX-512 (the same sums as its tile), rt_gemm_nt otherwise
 * (no kernel set without the fused fp32 tile has scaled kernels). */
static void f32_product(const linear_job *j, const float *x, int m, const float *w, int c0, int cols, float *y)
{
    const rt_weight *W = j->W;
    const int in = W->in;
    const fused_kernels *f32 = &FUSED_ROWS_TABLE[0].isa[j->isa];
    if (f32->tile) {
        rt_weight S = { .q = { .dtype = LMQ_T_F32 }, .data = (const uint8_t *)w, .b = W->b ? W->b + c0 : NULL,
                        .out = cols, .in = in };
        _Alignas(64) span_acc acc[X_BLOCK / TILE_X];
        float sc[W_BLOCK];
        tiles_loop(NULL, F32_SPAN, acc, &S, x, (size_t)in, m, 0, cols, row_scales(j, c0, cols, sc), y, (size_t)W->out);
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
            float sc[W_BLOCK];
            if (j->f)
                tiles_loop(j->f->tile, NULL, NULL, W, x, in, rows, c0, cols, row_scales(j, c0, cols, sc), y,
                           (size_t)W->out);
            else
                f32_product(j, x, rows, (const float *)W->data + (size_t)c0 * in, c0, cols, y);
            continue;
        }
        /* Tasks run block-major, so a thread mostly finds its block decoded already. */
        float *s = j->scratch + (size_t)thread * W_BLOCK * in;
        if (j->held[thread] != c0) {
            j->held[thread] = c0;
            if (W->q.dtype == LMQ_T_F32) /* a copy: every kernel set's fp32 order */
                memcpy(s, W->data + (size_t)c0 * in * sizeof *s, (size_t)cols * in * sizeof *s);
            else if (j->f)
                decode_rows(j->f, W, c0, cols, s);
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
 * the CPU has it, AVX2's 16-bit pair products, a plain loop otherwise. */
/* out[i][r] = Σ q_i[k]·c_r[k] over k < in for the mr (1..TILE_X) rows q_i of codes, ldq apart, and
 * the four rows c[0..3] (a short tile repeats its last row), codes unsigned (the stored bytes);
 * ahead: how far on the rows' bytes are prefetched. */
typedef void (*dot4_fn)(const uint8_t *const c[4], const int8_t *q, size_t ldq, int mr, size_t in, size_t ahead,
                        int32_t out[TILE_X][4]);

typedef struct {
    const rt_weight *W;
    const int8_t *qx;   /* [n × ldq] codes, zero beyond in */
    const float *sx;    /* [n] */
    const int32_t *sum; /* [n]: Σ q_x, for the −128 of the codes */
    size_t ldq;
    int n;
    dot4_fn dot4;
    float *y;
} int8_job;

/* Up to this many inputs a row's sum of code·q (at most 255·127 each) fits in int32. */
#define INT8_MAX_IN 65536

static void dot4_u8s8_scalar(const uint8_t *const c[4], const int8_t *q, size_t ldq, int mr, size_t in, size_t ahead,
                             int32_t out[TILE_X][4])
{
    (void)ahead;
    for (int i = 0; i < mr; i++)
        for (int r = 0; r < 4; r++) {
            int32_t acc = 0;
            for (size_t k = 0; k < in; k++)
                acc += (int32_t)c[r][k] * q[(size_t)i * ldq + k];
            out[i][r] = acc;
        }
}

/* x[0..in) as int8 codes on the grid of its own scale (act_scale), into q; returns Σ codes. A zero
 * scale leaves q as it is (zeros). */
typedef int32_t (*codes_fn)(const float *x, size_t in, float *scale, int8_t *q);

static int32_t act_codes_scalar(const float *x, size_t in, float *scale, int8_t *q)
{
    const float s = *scale = act_scale(x, in);
    int32_t sum = 0;
    for (size_t k = 0; k < in && s > 0.0f; k++)
        sum += q[k] = (int8_t)round_clamp127(x[k] / s);
    return sum;
}

#if HAVE_X86
#define VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))
#define VNNI_INLINE static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vnni")))
/* 64 codes of each row at a time (vpdpbusd: unsigned × signed bytes into int32 lanes, exact), the
 * activations loaded once for the four; the tile's rows follow one another and are prefetched as
 * one stream, as the fused tiles do. The four sums are reduced together. */
/* Columns [k, k + 64) of the four rows c against those of the MR rows of codes q into acc: whole
 * steps with plain loads (masked ones cost decode a fifth), the last with the live lanes m; each
 * vector of W loaded once, right before its products. */
VNNI_INLINE void vnni_step(int MR, int whole, __mmask64 m, const uint8_t *const c[4], const int8_t *q, size_t ldq,
                           size_t k, __m512i acc[TILE_X][4])
{
    __m512i qk[TILE_X];
    RT_UNROLL for (int i = 0; i < MR; i++)
        qk[i] = _mm512_loadu_si512(q + (size_t)i * ldq + k); /* zero beyond in */
    RT_UNROLL for (int r = 0; r < 4; r++) {
        const __m512i w = whole ? _mm512_loadu_si512(c[r] + k) : _mm512_maskz_loadu_epi8(m, c[r] + k);
        RT_UNROLL for (int i = 0; i < MR; i++)
            acc[i][r] = _mm512_dpbusd_epi32(acc[i][r], w, qk[i]);
    }
}

VNNI_INLINE void dot4_vnni(int MR, const uint8_t *const c[4], const int8_t *q, size_t ldq, size_t in, size_t ahead,
                           int32_t out[TILE_X][4])
{
    __m512i acc[TILE_X][4];
    RT_UNROLL for (int i = 0; i < MR; i++)
        RT_UNROLL for (int r = 0; r < 4; r++)
            acc[i][r] = _mm512_setzero_si512();
    size_t k = 0;
    for (; k + 64 <= in; k += 64) {
        prefetch_step(ENC_I8, c[0], (int64_t)k, 64, ahead);
        vnni_step(MR, 1, 0, c, q, ldq, k, acc);
    }
    if (k < in)
        vnni_step(MR, 0, ((__mmask64)1 << (in - k)) - 1, c, q, ldq, k, acc);
    /* each 128-bit lane: row 0, 1, 2, 3's sums of its four int32; then the four lanes added */
    RT_UNROLL for (int i = 0; i < MR; i++) {
        const __m512i *a = acc[i];
        const __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(a[0], a[1]), _mm512_unpackhi_epi32(a[0], a[1]));
        const __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2], a[3]), _mm512_unpackhi_epi32(a[2], a[3]));
        const __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
        const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(u), _mm512_extracti64x4_epi64(u, 1));
        _mm_storeu_si128((__m128i *)out[i], _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
    }
}

_Static_assert(TILE_X == 3, "dot4_u8s8_vnni takes 1 to 3 rows of codes");
VNNI static void dot4_u8s8_vnni(const uint8_t *const c[4], const int8_t *q, size_t ldq, int mr, size_t in, size_t ahead,
                                int32_t out[TILE_X][4])
{
    if (mr == 3)
        dot4_vnni(3, c, q, ldq, in, ahead, out);
    else if (mr == 2)
        dot4_vnni(2, c, q, ldq, in, ahead, out);
    else
        dot4_vnni(1, c, q, ldq, in, ahead, out);
}

/* act_codes_scalar 16 lanes at a time, bit for bit: the maximum is exact in any order (maxps keeps
 * its second operand, the running maximum, where a lane is NaN, as the comparison does), the
 * quotient is IEEE's, and round_clamp127's steps are done as there. */
AVX512 static int32_t act_codes_avx512(const float *x, size_t in, float *scale, int8_t *q)
{
    const __m512 sign = _mm512_set1_ps(-0.0f);
    __m512 mx = _mm512_setzero_ps();
    for (size_t k = 0; k < in; k += 16)
        mx = _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_maskz_loadu_ps(lanes16((int64_t)(in - k)), x + k)), mx);
    const float s = *scale = _mm512_reduce_max_ps(mx) / 127.0f;
    if (!(s > 0.0f))
        return 0;
    const __m512 vs = _mm512_set1_ps(s), lo = _mm512_set1_ps(-127.5f), hi = _mm512_set1_ps(127.5f);
    const __m512 half = _mm512_set1_ps(0.5f), mhalf = _mm512_set1_ps(-0.5f);
    const __m512i one = _mm512_set1_epi32(1), c127 = _mm512_set1_epi32(127), m127 = _mm512_set1_epi32(-127);
    __m512i sum = _mm512_setzero_si512();
    for (size_t k = 0; k < in; k += 16) {
        const __mmask16 m = lanes16((int64_t)(in - k));
        __m512 v = _mm512_div_ps(_mm512_maskz_loadu_ps(m, x + k), vs);
        v = _mm512_min_ps(_mm512_max_ps(v, lo), hi); /* NaN: lo, as v > lo ? v : lo */
        __m512i r = _mm512_cvttps_epi32(v);
        const __m512 f = _mm512_sub_ps(v, _mm512_cvtepi32_ps(r));
        r = _mm512_mask_add_epi32(r, _mm512_cmp_ps_mask(f, half, _CMP_GE_OQ), r, one);
        r = _mm512_mask_sub_epi32(r, _mm512_cmp_ps_mask(f, mhalf, _CMP_LE_OQ), r, one);
        r = _mm512_min_epi32(_mm512_max_epi32(r, m127), c127);
        _mm512_mask_cvtepi32_storeu_epi8(q + k, m, r);
        sum = _mm512_add_epi32(sum, r); /* dead lanes are 0 */
    }
    return _mm512_reduce_add_epi32(sum);
}

/* dot4_u8s8_scalar 16 codes at a time on AVX2: codes widened to 16 bits, pairs of products added
 * into int32 lanes (vpmaddwd: exact, 2·255·127 fits), the activations widened once for the four
 * rows; the last in % 16 codes one at a time. */
AVX2_INLINE void dot4_avx2_row(const uint8_t *const c[4], const int8_t *q, size_t in, size_t ahead, int32_t out[4])
{
    __m256i acc[4];
    RT_UNROLL for (int r = 0; r < 4; r++)
        acc[r] = _mm256_setzero_si256();
    size_t k = 0;
    for (; k + 16 <= in; k += 16) {
        if (k % 64 == 0)
            prefetch_step(ENC_I8, c[0], (int64_t)k, 64, ahead);
        const __m256i qk = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(q + k)));
        RT_UNROLL for (int r = 0; r < 4; r++) {
            const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(c[r] + k)));
            acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(w, qk));
        }
    }
    /* each 128-bit lane: row 0, 1, 2, 3's sums of its four int32; then the two lanes added */
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(acc[0], acc[1]), _mm256_hadd_epi32(acc[2], acc[3]));
    _mm_storeu_si128((__m128i *)out, _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
    for (; k < in; k++)
        RT_UNROLL for (int r = 0; r < 4; r++)
            out[r] += (int32_t)c[r][k] * q[k];
}

AVX2 static void dot4_u8s8_avx2(const uint8_t *const c[4], const int8_t *q, size_t ldq, int mr, size_t in, size_t ahead,
                                int32_t out[TILE_X][4])
{
    for (int i = 0; i < mr; i++)
        dot4_avx2_row(c, q + (size_t)i * ldq, in, ahead, out[i]);
}

/* act_codes_scalar 8 lanes at a time on AVX2, bit for bit as act_codes_avx512 (the last in % 8
 * one at a time). */
AVX2 static int32_t act_codes_avx2(const float *x, size_t in, float *scale, int8_t *q)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 mv = _mm256_setzero_ps();
    size_t k = 0;
    for (; k + 8 <= in; k += 8)
        mv = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)), mv);
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    float m = _mm_cvtss_f32(_mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1)));
    for (size_t t = k; t < in; t++) {
        const float a = fabsf(x[t]);
        m = a > m ? a : m;
    }
    const float s = *scale = m / 127.0f;
    if (!(s > 0.0f))
        return 0;
    const __m256 vs = _mm256_set1_ps(s), lo = _mm256_set1_ps(-127.5f), hi = _mm256_set1_ps(127.5f);
    const __m256 half = _mm256_set1_ps(0.5f), mhalf = _mm256_set1_ps(-0.5f);
    const __m256i c127 = _mm256_set1_epi32(127), m127 = _mm256_set1_epi32(-127);
    __m256i sum = _mm256_setzero_si256();
    for (k = 0; k + 8 <= in; k += 8) {
        __m256 v = _mm256_div_ps(_mm256_loadu_ps(x + k), vs);
        v = _mm256_min_ps(_mm256_max_ps(v, lo), hi); /* NaN: lo, as v > lo ? v : lo */
        __m256i r = _mm256_cvttps_epi32(v);
        const __m256 f = _mm256_sub_ps(v, _mm256_cvtepi32_ps(r));
        r = _mm256_sub_epi32(r, _mm256_castps_si256(_mm256_cmp_ps(f, half, _CMP_GE_OQ))); /* true is −1 */
        r = _mm256_add_epi32(r, _mm256_castps_si256(_mm256_cmp_ps(f, mhalf, _CMP_LE_OQ)));
        r = _mm256_min_epi32(_mm256_max_epi32(r, m127), c127);
        const __m128i p = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
        _mm_storel_epi64((__m128i *)(q + k), _mm_packs_epi16(p, p));
        sum = _mm256_add_epi32(sum, r);
    }
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    int32_t total = _mm_cvtsi128_si32(_mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1)));
    for (; k < in; k++)
        total += q[k] = (int8_t)round_clamp127(x[k] / s);
    return total;
}

static int have_vnni(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni");
}
#else
#define dot4_u8s8_vnni dot4_u8s8_scalar
#define dot4_u8s8_avx2 dot4_u8s8_scalar
#define act_codes_avx512 act_codes_scalar
#define act_codes_avx2 act_codes_scalar
static int have_vnni(void) { return 0; }
#endif

static void int8_task(void *v, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const int8_job *j = v;
    const rt_weight *W = j->W;
    const size_t in = (size_t)W->in, ahead = prefetch_ahead(ENC_I8, W);
    for (int64_t t = begin; t < end; t++) {
        const int r1 = (int)(t + 1) * W_BLOCK < W->out ? (int)(t + 1) * W_BLOCK : W->out;
        for (int r0 = (int)t * W_BLOCK; r0 < r1; r0 += 4) {
            const int nr = r1 - r0 < 4 ? r1 - r0 : 4;
            const uint8_t *c[4];
            float sw[4];
            for (int r = 0; r < 4; r++) {
                const int row = r0 + (r < nr ? r : nr - 1);
                uint16_t h;
                memcpy(&h, W->data + 2 * (size_t)row, 2);
                sw[r] = lmq_f16_to_f32(h);
                c[r] = W->data + W->L.code_offset + (size_t)row * in;
            }
            for (int i0 = 0; i0 < j->n; i0 += TILE_X) {
                const int mr = j->n - i0 < TILE_X ? j->n - i0 : TILE_X;
                int32_t dot[TILE_X][4];
                /* the first tile of tokens streams the rows; the rest find them in cache (+7 %) */
                j->dot4(c, j->qx + (size_t)i0 * j->ldq, j->ldq, mr, in, i0 ? 0 : ahead, dot);
                for (int i = i0; i < i0 + mr; i++)
                    for (int r = 0; r < nr; r++) {
                        const float out = (float)(dot[i - i0][r] - 128 * j->sum[i]) * j->sx[i] * sw[r];
                        j->y[(size_t)i * W->out + r0 + r] = W->b ? out + W->b[r0 + r] : out;
                    }
            }
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
    int8_job j = { .W = W, .ldq = ldq, .n = n, .y = y,
                   .dot4 = ex->isa == RT_ISA_AVX512 && have_vnni() ? dot4_u8s8_vnni
                           : ex->isa >= RT_ISA_AVX2                 ? dot4_u8s8_avx2
                                                                    : dot4_u8s8_scalar };
    const codes_fn codes = ex->isa == RT_ISA_AVX512 ? act_codes_avx512
                           : ex->isa == RT_ISA_AVX2 ? act_codes_avx2
                                                    : act_codes_scalar;
    int8_t *qx = calloc((size_t)n * ldq, 1);
    float *sx = malloc((size_t)n * sizeof *sx);
    int32_t *sum = malloc((size_t)n * sizeof *sum);
    if (!qx || !sx || !sum) {
        free(qx), free(sx), free(sum);
        return lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory for the activations", W->name);
    }
    for (int i = 0; i < n; i++)
        sum[i] = codes(x + (size_t)i * in, in, &sx[i], qx + (size_t)i * ldq);
    j.qx = qx, j.sx = sx, j.sum = sum;
    const int64_t tasks = (W->out + W_BLOCK - 1) / W_BLOCK, macs = (int64_t)n * W->out * W->in;
    lmq_pool_for(macs < RT_PARALLEL_MIN_WORK ? NULL : ex->pool, tasks, 1, int8_task, &j);
    free(qx), free(sx), free(sum);
    return LMQ_OK;
}

/* x reordered for a kernel set, rows shared out (prefill's x is megabytes). */
typedef struct {
    const fused_kernels *f;
    const float *x;
    float *out;
    int in;
} reorder_job;

static void reorder_task(void *v, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const reorder_job *r = v;
    r->f->reorder(r->x + begin * r->in, (int)(end - begin), r->in, r->out + begin * r->in);
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
    /* W as stored for a few rows (fp32: up to a block of x, W streamed once); else staged: blocks
     * of W copied or decoded once and reused from cache by many rows. */
    const int direct = (n <= FUSED_ROWS && j.f) || (W->q.dtype == LMQ_T_F32 && n <= X_BLOCK);
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
        reorder_job r = { j.f, j.x, xp, W->in };
        lmq_pool_for(n > FUSED_ROWS ? ex->pool : NULL, n, X_BLOCK, reorder_task, &r);
        j.x = xp;
    }
    if (j.staged && !(j.scratch = aligned_alloc(64, scratch))) {
        c = lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory for a block of rows", W->name);
        goto done;
    }
    for (int t = 0; t < threads; t++)
        held[t] = -1;
    j.held = held;
    const int64_t w_blocks = (W->out + W_BLOCK - 1) / W_BLOCK, tasks = (int64_t)j.x_blocks * w_blocks;
    const int64_t macs = (int64_t)n * W->out * W->in;
    /* Staged, a thread takes a block of W with all its tasks where there are blocks enough to
     * share out, so that each block is decoded once, not by every thread. */
    const int64_t grain = j.staged && w_blocks >= 4 * threads ? j.x_blocks : 1;
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
