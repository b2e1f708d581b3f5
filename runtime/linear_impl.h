/* What rt_linear (runtime/linear.c, the driver) and the kernel sets' linear kernels
 * (runtime/kernels_*.c) share: a set's kernels for the linear layers (rt_linear_kernels: a row of
 * fused kernels per encoding and way of reading it, the fp32 product over stretches, the W8A8
 * product's two kernels), the step kinds the fused kernels are specialised on, where a row's
 * bytes, scales and zero points are, a group's parameters, prefetching, and the activations'
 * int8 rounding. Each set supplies a tile (MR ≤ TILE_X rows of x against 4 rows of W) and a row
 * decoder built on its own step; the driver runs the loops over tiles and rows. */
#ifndef LMQ_RT_LINEAR_IMPL_H
#define LMQ_RT_LINEAR_IMPL_H

#include <string.h>

#include "common/le.h"
#include "runtime/kernels_impl.h"
#include "runtime/linear.h"
#include "schemes/gguf_blocks.h"

/* The most rows of x a tile takes: three rows of x against four of W keep 24 AVX-512 accumulators
 * in registers and read each vector of W for three products (prefill +22 % over two rows). */
#define TILE_X 3

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

/* One kernel set's kernels for an encoding. reorder: x is reordered as the step delivers W, or NULL.
 * scaled: the row decoder gives code − zero and the tile sums over those; the row's one scale
 * (per channel or per tensor) multiplies the sum (the driver's tiles_loop). */
typedef struct {
    void (*reorder)(const float *x, int n, int in, float *out);
    tile_fn tile;
    row_fn row;
    int scaled;
} fused_kernels;

/* A fused encoding of a kernel set: a row per way of reading one, with the kernels for weights
 * with wide zero codes where they differ (rt_weight.wide_zeros; else empty). block: rows are read
 * in whole blocks of that many columns (1: rows of any length); groups must be a multiple of it
 * and of 32 long, so that a step never spans two; scaled kernels take rows with one scale (per
 * channel or per tensor) only. */
typedef struct {
    lmq_dtype dtype;
    int block;
    fused_kernels k, wide;
} rt_fused;

/* The W8A8 product (rt_linear's integer path): out[i][r] = Σ q_i[k]·c_r[k] over k < in for the mr
 * (1..TILE_X) rows q_i of codes, ldq apart, and the four rows c[0..3] (a short tile repeats its
 * last row), codes unsigned (the stored bytes); ahead: how far on the rows' bytes are prefetched. */
typedef void (*dot4_fn)(const uint8_t *const c[4], const int8_t *q, size_t ldq, int mr, size_t in, size_t ahead,
                        int32_t out[TILE_X][4]);
/* x[0..in) as int8 codes on the grid of its own scale (act_scale), into q; returns Σ codes. A zero
 * scale leaves q as it is (zeros). Bit for bit the same codes on every kernel set. */
typedef int32_t (*codes_fn)(const float *x, size_t in, float *scale, int8_t *q);

/* The a8 block product (int8 activations per block against weights in blocks with a scale each,
 * rt_linear's integer path for them): 16 rows of W packed by the driver (A8B_ROWS) a sub-block of
 * `sub` codes at a time (32, or 16: Q2_K, Q3_K, Q6_K), for each sub-block b sub / 4 vectors of 64
 * bytes, vector v's bytes 4l..4l+3 row l's codes 4v..4v+3 of the sub-block as qw + 128 (an
 * unsigned byte whatever the weight kind), wd[b][l] row l's scale of sub-block b and, for kinds
 * with a min (w = scale·qw + min: Q4_1, Q5_1, Q2_K, Q4_K, Q5_K), wm[b][l] its min. So that no
 * lane sums across rows: a lane of an integer vector holds one row's whole sub-block sum, and the
 * 16 rows' fp32 sums are 16 lanes. */
#define A8B_ROWS 16
#define A8B_BLOCK 32 /* the most codes a sub-block holds */
#define A8B_PACKED (A8B_ROWS * A8B_BLOCK) /* bytes of one sub-block of 32 of a packed tile */
/* The most rows of x a call takes: 4 rows of x against the 16 of W keep 8 integer and float
 * accumulators beside the 8 vectors of a block of W. */
#define A8B_MR 4
/* For mr (1..A8B_MR) rows of codes qx (ldq apart), their sub-blocks' scales dx (the activation
 * block's that holds them: fp16-rounded for Q8_0, fp32 for Q8_K) and 128·Σ codes cx (lds apart,
 * one a sub-block), against nb sub-blocks of a packed tile: out[i][l] = Σ_b ((float)s_ilb ·
 * (dx_ib · wd_bl) [+ (float)(cx_ib / 128) · (dx_ib · wm_bl)]) with s the exact sub-block sum
 * Σ qx·qw, the min's term (wm not NULL) added after the scale's, in sub-block order, each product
 * and sum rounded apart (no fused multiply-add): the same bits on every set. */
typedef void (*a8b_dot_fn)(const uint8_t *wq, const float *wd, const float *wm, int nb, int sub, const int8_t *qx,
                           size_t ldq, const float *dx, const int32_t *cx, size_t lds, int mr,
                           float out[A8B_MR][A8B_ROWS]);

/* A kernel set's a8b_dot over its kernel K(MR, SUB, MIN, args...) specialised on constants: the
 * rows of codes (1..A8B_MR), the sub-block length (16 or 32) and whether mins are added. */
_Static_assert(A8B_MR == 4, "A8B_SPECIALISED: 1 to 4 rows of codes");
#define A8B_SPECIALISED_MR(K, SUB, MIN, mr, ...)                                                             \
    do {                                                                                                       \
        if ((mr) == 4)                                                                                         \
            K(4, SUB, MIN, __VA_ARGS__);                                                                       \
        else if ((mr) == 3)                                                                                    \
            K(3, SUB, MIN, __VA_ARGS__);                                                                       \
        else if ((mr) == 2)                                                                                    \
            K(2, SUB, MIN, __VA_ARGS__);                                                                       \
        else                                                                                                   \
            K(1, SUB, MIN, __VA_ARGS__);                                                                       \
    } while (0)
#define A8B_SPECIALISED(K, sub, min, mr, ...)                                                                \
    do {                                                                                                       \
        if ((sub) == 16 && (min))                                                                              \
            A8B_SPECIALISED_MR(K, 16, 1, mr, __VA_ARGS__);                                                     \
        else if ((sub) == 16)                                                                                  \
            A8B_SPECIALISED_MR(K, 16, 0, mr, __VA_ARGS__);                                                     \
        else if (min)                                                                                          \
            A8B_SPECIALISED_MR(K, 32, 1, mr, __VA_ARGS__);                                                     \
        else                                                                                                   \
            A8B_SPECIALISED_MR(K, 32, 0, mr, __VA_ARGS__);                                                     \
    } while (0)

/* Rows j[0..15] of W packed for a8b_dot_fn into wq, wd and (kinds with mins) wm, the same bytes as
 * the driver's portable packing (a kernel set's faster one for a weight kind, where it has one).
 * W's bytes are fewer than 2^31 (the driver packs larger ones itself): offsets fit int32 lanes. */
typedef void (*a8b_pack_fn)(const rt_weight *W, const int j[A8B_ROWS], uint8_t *wq, float *wd, float *wm);

/* Decode's a8 block product (one row of codes qx, scales dx, 128·Σ codes cx) straight from rows
 * j[0..15] of W as stored, without packing them: out[l] a8b_dot_fn's for mr = 1, the same bits;
 * scratch: a thread's packing space (the driver's a8b_job). W's bytes fit int32, as a8b_pack_fn's. */
typedef void (*a8b_row_fn)(const rt_weight *W, const int j[A8B_ROWS], const int8_t *qx, const float *dx,
                           const int32_t *cx, void *scratch, float out[A8B_ROWS]);

/* The driver's portable reading of a weight kind (runtime/linear_a8b.c): row j's b-th `block`
 * codes (a GGUF block, or 32 of a group) as qw + 128 into u, the scale of each of its sub-blocks
 * of `sub` into d and, for kinds with mins, each one's min into m. */
typedef struct {
    int block, sub, mins;
    void (*read)(const rt_weight *W, int j, int b, uint8_t *u, float *d, float *m);
} a8b_reading;
/* By dtype; block 0: none. */
extern const a8b_reading rt_a8b_readings[LMQ_T_COUNT];

/* lmq's symmetric int8 / int4 per group: the fp16 scale of row j's codes [32b, 32b + 32). */
static inline const uint8_t *a8b_group_scale(const rt_weight *W, int j, int b)
{
    return W->data + 2 * ((size_t)j * (size_t)W->L.groups_per_row + (size_t)b * A8B_BLOCK / (size_t)W->L.group);
}

/* The 32-blocks as the kernel sets' own packings read them (lmq's int4 and int8 groups: codes
 * alone; GGUF's blocks: ggml-common.h's layouts): the bytes before a block's codes, where its word
 * of fifth bits is (0: none; bit k code k's), whether its fp16 min follows its fp16 scale, whether
 * codes are nibbles (lmq's int4: code k in byte k / 2, low nibble first; GGUF's: the low nibbles
 * codes 0-15, the high ones 16-31) looked up in IQ4_NL's book, and what a code (with its fifth bit)
 * plus `off` is: u = qw + 128, as rt_a8b_readings make it (constants, which the kernels are
 * specialised on). */
typedef struct {
    uint8_t head, qh, mins, nibbles, book;
    int8_t off;
} a8b_block32;
static const a8b_block32 A8B_B32[LMQ_T_COUNT] = {
    [LMQ_T_INT8] = { 0, 0, 0, 0, 0, 0 },    [LMQ_T_INT4] = { 0, 0, 0, 1, 0, 120 },
    [LMQ_T_Q8_0] = { 2, 0, 0, 0, 0, -128 }, [LMQ_T_Q4_0] = { 2, 0, 0, 1, 0, 120 },
    [LMQ_T_Q4_1] = { 4, 0, 1, 1, 0, -128 }, [LMQ_T_Q5_0] = { 6, 2, 0, 1, 0, 112 },
    [LMQ_T_Q5_1] = { 8, 4, 1, 1, 0, -128 }, [LMQ_T_IQ4_NL] = { 2, 0, 0, 1, 1, -128 },
};
#define A8B_B32_TYPES(X) X(INT4) X(INT8) X(Q8_0) X(Q4_0) X(Q4_1) X(Q5_0) X(Q5_1) X(IQ4_NL)
/* And the 256-blocks. */
#define A8B_K_TYPES(X) X(Q2_K) X(Q3_K) X(Q4_K) X(Q5_K) X(Q6_K) X(IQ4_XS)
/* Eight bytes of v as a 64-bit lane (vpshufb's picks of a word's bytes for its fifth bits). */
#define BYTES8(v) ((long long)(0x0101010101010101ull * (unsigned)(v)))

/* The AVX2 set's, which the AVX-512 set without VNNI takes as it is (runtime/kernels_avx2.c). */
void rt_avx2_a8b_dot(const uint8_t *wq, const float *wd, const float *wm, int nb, int sub, const int8_t *qx,
                     size_t ldq, const float *dx, const int32_t *cx, size_t lds, int mr, float out[A8B_MR][A8B_ROWS]);
void rt_avx2_dot4(const uint8_t *const c[4], const int8_t *q, size_t ldq, int mr, size_t in, size_t ahead,
                  int32_t out[TILE_X][4]);

struct rt_linear_kernels {
    const rt_fused *fused; /* the fused encodings, the first row that applies taken */
    size_t n_fused;
    span_fn f32_span;      /* the fp32 tile over stretches (staged products), or NULL: gemm_nt */
    codes_fn act_codes;
    dot4_fn dot4;
    a8b_dot_fn a8b_dot;
    const a8b_pack_fn *a8b_pack; /* [LMQ_T_COUNT], NULL entries (or none): the driver's packing */
    const a8b_row_fn *a8b_row;   /* [LMQ_T_COUNT], NULL entries (or none): one row of x packs too */
};

/* Each kernel set's tile and row decoder for one encoding, tile_<name> and row_<name>, as plain
 * functions the driver's loops call: tile<W_> and row<W_> with the kernel set's leading arguments
 * after the name (AVX-512: the step kind and whether its zero codes are wide; AVX2: the step kind,
 * exact for any zero code), made with the set's target attribute. RT_FUSED_KERNELS names them in
 * a table row. */
_Static_assert(TILE_X == 3, "RT_FUSED makes tiles of 1, 2 and 3 rows of x");
#define RT_FUSED(TARGET, W_, name, ...)                                                                        \
    TARGET static void tile_##name(int MR, const rt_weight *W, const int j[4], const float *x, size_t ldx,     \
                                   float out[TILE_X][4])                                                       \
    {                                                                                                          \
        if (MR == 3)                                                                                           \
            tile##W_(__VA_ARGS__, 3, W, j, x, ldx, out);                                                       \
        else if (MR == 2)                                                                                      \
            tile##W_(__VA_ARGS__, 2, W, j, x, ldx, out);                                                       \
        else                                                                                                   \
            tile##W_(__VA_ARGS__, 1, W, j, x, ldx, out);                                                       \
    }                                                                                                          \
    TARGET static void row_##name(const rt_weight *W, int j, float *out)                                       \
    {                                                                                                          \
        row##W_(__VA_ARGS__, W, j, out);                                                                       \
    }
#define RT_FUSED_KERNELS(name, perm, ...) { .reorder = perm, .tile = tile_##name, .row = row_##name, __VA_ARGS__ }

/* ---------------------------------------------------------------- steps */

/* The step kinds a fused kernel is specialised on at compile time: an encoding (formats/dtype.h)
 * with its bits a code, and how a step reads its rows, plainly or in blocks of 64 or 128 columns
 * (ENC_I8X: int8 in blocks of 64, ENC_I4X: int4 in blocks of 128; see row_step16 in
 * runtime/kernels_avx512.c). Ordered by bits, most first: a kind's tests of its width are
 * comparisons with a constant (other forms of the same test changed the kernels' code). */
#define STEP_WIDTH(bits) ((32 - (bits)) << 16)
#define STEP_KIND(T, block) (STEP_WIDTH(T##_BITS) | (T) << 8 | (block))
enum {
    ENC_F32 = STEP_KIND(LMQ_T_F32, 0),
    ENC_F16 = STEP_KIND(LMQ_T_F16, 0),
    ENC_BF16 = STEP_KIND(LMQ_T_BF16, 0),
    ENC_F8E4 = STEP_KIND(LMQ_T_F8_E4M3, 0),
    ENC_F8E5 = STEP_KIND(LMQ_T_F8_E5M2, 0),
    ENC_I8 = STEP_KIND(LMQ_T_INT8, 0),
    ENC_I8X = STEP_KIND(LMQ_T_INT8, 64),
    ENC_I4 = STEP_KIND(LMQ_T_INT4, 0),
    ENC_I4X = STEP_KIND(LMQ_T_INT4, 128),
    ENC_I3 = STEP_KIND(LMQ_T_INT3, 0),
    ENC_I2 = STEP_KIND(LMQ_T_INT2, 0),
};
/* Bits a code: the encoding row's (formats/encoding.h), a constant in a specialised kernel. */
#define enc_bits(enc) (32 - ((unsigned)(enc) >> 16))
/* Whether the kind's codes come in groups with scales (and zero points): 8 bits or fewer; and
 * whether a step looks them up in a table of 16 values: 4 bits or fewer. */
#define enc_grouped(enc) ((enc) >= STEP_WIDTH(8))
#define enc_looked_up(enc) ((enc) >= STEP_WIDTH(4))
/* The columns an ENC_I8X or ENC_I4X step reads a row in: one 64-byte block (0: any step alone). */
#define enc_block(enc) ((enc) & 0xFF)
/* Whether the kind's codes are 8-bit floats, whose scales are IEEE single (else half). */
#define enc_fp8(enc) ((enc) == ENC_F8E4 || (enc) == ENC_F8E5)
#define enc_scale_bytes(enc) (enc_fp8(enc) ? 4 : 2)

/* An 8-bit float code as fp16 bits (schemes/fp8.h's formats; they differ in these constants alone):
 * the code sign-extended to 16 bits, shifted left by `shift` and masked by `keep`, has its sign,
 * exponent and mantissa in fp16's places. e5m2 is fp16's top byte; e4m3's 4-bit exponent read
 * under fp16's bias of 15 instead of 7 is its value times 2^-8, subnormals too, which fp16 holds
 * and the conversion to fp32 widens exactly; times `unit` (2^8, exact) it is the value. Codes
 * whose low 7 bits exceed `finite` are NaN (e4m3's S.1111.111; e5m2's past infinity): they become
 * fp16's NaN F8_NAN16 with their sign, which widens to q_fp8_decode's sign | 0x7FC00000. */
typedef struct {
    int shift;
    uint16_t keep, finite;
    float unit;
} f8_form;
static const f8_form F8_FORMS[2] = { { 7, 0xBF80, 0x7E, 256.0f }, { 8, 0xFFFF, 0x7C, 1.0f } };
#define F8_NAN16 0x7E00
#define f8_form_of(enc) (&F8_FORMS[(enc) == ENC_F8E5])

/* One row of W as a step walks it: where its values or codes start, where its scales and zero
 * points start. */
typedef struct {
    const uint8_t *p, *sc, *zp;
} rowptr;

static inline void row_ptr(int enc, const rt_weight *W, int j, rowptr *r)
{
    const size_t in = (size_t)W->in;
    r->p = W->data + W->L.code_offset + (size_t)j * in * enc_bits(enc) / 8;
    static const float one = 1.0f; /* the scale of weights that store none (fp8 unscaled) */
    const size_t sidx = W->q.gran == LMQ_GRAN_TENSOR ? 0 : (size_t)j * (size_t)W->L.groups_per_row;
    r->sc = W->L.n_scales ? W->data + sidx * enc_scale_bytes(enc) : (const uint8_t *)&one;
    r->zp = W->q.asym ? W->data + W->L.zero_offset + sidx * 2 : NULL;
}

/* Where column k of the row starts. */
static inline const uint8_t *row_at(int enc, const uint8_t *p, int64_t k)
{
    return p + (size_t)k * enc_bits(enc) / 8;
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
    return (size_t)W->ahead_tiles * 4 * (size_t)W->in * enc_bits(enc) / 8;
}

/* The lines starting in [a, a + len). */
static inline void prefetch_lines(const uint8_t *a, size_t len)
{
    if (len % 64 == 0) { /* whole lines (constants fold it): every call starts where the last ended */
        for (size_t b = 0; b < len; b += 64)
            __builtin_prefetch(a + b, 0, 3);
        return;
    }
    for (uintptr_t line = ((uintptr_t)a + 63) & ~(uintptr_t)63; line < (uintptr_t)a + len; line += 64)
        __builtin_prefetch((const void *)line, 0, 3);
}

/* The requests of a tile's step over columns [k, k + n), whose rows start at p and follow one
 * another: the lines starting in the stretch of the tile's bytes that the step's share is, `ahead`
 * bytes on. The tile is read as one stream in address order, not four rows in step: memory serves
 * that faster (fp32 and int8 from memory +10-15 %). */
static inline void prefetch_step(int enc, const uint8_t *p, int64_t k, int n, size_t ahead)
{
    if (!ahead) /* rows in cache */
        return;
    const size_t len = (size_t)n * 4 * enc_bits(enc) / 8;
    const uint8_t *a = p + ahead + (size_t)k * 4 * enc_bits(enc) / 8;
    prefetch_lines(a, len);
}

/* ---------------------------------------------------------------- GGUF blocks */

/* GGUF's block encodings (formats/encoding.h: a row is cols / block blocks of block_bytes, ggml's
 * layout). Their fused kernels (blk in the kernel sets) decode each block of a tile's rows once,
 * into a block's floats in L1, with a decoder of the set's (block_fn, gguf_blocks.h's q_block_fn:
 * the same values bit for bit), and multiply it as the set's fp32 product does, in its order, so
 * that decode and the staged prefill (which decodes rows with the same decoder) give the same
 * bits. No fp32 copy of a row exists. */
typedef void (*block_fn)(const uint8_t *block, float *out);
#define BLK_MAX 256 /* the most weights a block holds (the K-types, IQ4_XS) */

/* The AVX2 set's decoders by dtype, which the AVX-512 sets take as they are (runtime/kernels_avx2.c). */
extern const block_fn rt_avx2_blocks[LMQ_T_COUNT];

/* The block encodings, X(name, dtype) each, and their rows in a kernel set's table (their kernels
 * tile_<name> and row_<name>; blocks of 1: the layout holds rows of whole blocks). */
#define RT_BLOCK_TYPES(X)                                                                                      \
    X(q8_0, LMQ_T_Q8_0) X(q4_0, LMQ_T_Q4_0) X(q4_1, LMQ_T_Q4_1) X(q5_0, LMQ_T_Q5_0) X(q5_1, LMQ_T_Q5_1)         \
    X(q2_k, LMQ_T_Q2_K) X(q3_k, LMQ_T_Q3_K) X(q4_k, LMQ_T_Q4_K) X(q5_k, LMQ_T_Q5_K) X(q6_k, LMQ_T_Q6_K)         \
    X(iq4_nl, LMQ_T_IQ4_NL) X(iq4_xs, LMQ_T_IQ4_XS)
#define RT_BLOCK_ROW(name, T) { T, 1, .k = RT_FUSED_KERNELS(name, NULL) },

/* A block encoding's row: where row j's first block is, the bytes a block, the weights a block. */
typedef struct {
    const uint8_t *p;
    size_t bytes;
    int n;
} blkrow;

static inline void blk_row(const rt_weight *W, int j, blkrow *r)
{
    const lmq_encoding *e = lmq_encoding_of(W->q.dtype);
    r->bytes = e->block_bytes;
    r->n = (int)e->block;
    r->p = W->data + (size_t)j * (size_t)(W->in / r->n) * r->bytes;
}

/* The prefetch of a tile's block b (of rows following one another from p, `ahead` bytes on): the
 * tile's bytes as one stream in address order, as prefetch_step asks for them. */
static inline void blk_prefetch(const blkrow *r, int64_t b, size_t ahead)
{
    if (ahead)
        prefetch_lines(r->p + ahead + (size_t)b * 4 * r->bytes, 4 * r->bytes);
}

/* K-quants' 6-bit scale and min of sub-block j (Q4_K, Q5_K) from their 12 packed bytes s: j < 4
 * the low six bits of bytes j and j + 4; j >= 4 a nibble of byte j + 4 under the top two bits of
 * byte j − 4 (scale) or j (min). */
static inline void blk_k4_scale(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* Q3_K's 6-bit scale of sub-block j: nibble j / 8 of byte j % 8 under bits 2(j / 4), +1 of byte
 * 8 + j % 4. */
static inline int blk_q3_scale(const uint8_t *s, int j)
{
    return (j < 8 ? s[j] & 0xF : s[j - 8] >> 4) | (s[8 + j % 4] >> (2 * (j / 4)) & 3) << 4;
}

/* IQ4_XS's 6-bit scale of sub-block j: nibble j % 2 of scales_l[j / 2] under bits 2j, 2j + 1 of
 * scales_h (the block's bytes 2-3). */
static inline int blk_xs_scale(const uint8_t *b, int j)
{
    const unsigned sh = (unsigned)b[2] | (unsigned)b[3] << 8;
    return (b[4 + j / 2] >> (4 * (j % 2)) & 0xF) | (int)(sh >> (2 * j) & 3) << 4;
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

/* max|x| over x[0..len) (0 for none; NaN passed over). */
static inline float act_max(const float *x, size_t len)
{
    float mx = 0.0f;
    for (size_t i = 0; i < len; i++) {
        const float a = fabsf(x[i]);
        mx = a > mx ? a : mx;
    }
    return mx;
}

/* The int8 activation scale of x[0..len): max|x| / 127. */
static inline float act_scale(const float *x, size_t len)
{
    return act_max(x, len) / 127.0f;
}

#endif
