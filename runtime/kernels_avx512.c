/* The AVX-512 kernel sets (runtime/kernels.h): fused linear kernels 16 lanes a vector, steps of 32
 * columns; "avx512vnni" multiplies W8A8 with VNNI. Their other kernels are the AVX2 set's. */
#include "runtime/linear_impl.h"

#if LMQ_X86
#include <immintrin.h>

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
    r->sahead = W->q.gran <= LMQ_GRAN_TENSOR || !ahead
                    ? 0
                    : (size_t)W->ahead_tiles * 4 * (size_t)r->groups * enc_scale_bytes(enc);
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
        __builtin_prefetch(r->r.sc + enc_scale_bytes(enc) * gi + r->sahead, 0, 3);
        if (r->r.zp)
            __builtin_prefetch(r->r.zp + 2 * gi + r->sahead, 0, 3);
        const __mmask16 m = lanes16(r->groups - gi);
        if (enc_fp8(enc)) { /* IEEE single scales, no zero codes */
            _mm512_storeu_ps(r->gs, _mm512_maskz_loadu_ps(m, r->r.sc + 4 * gi));
        } else {
            const __m512 s = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, r->r.sc + 2 * gi));
            const __m512 z =
                r->r.zp ? _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm256_maskz_loadu_epi16(m, r->r.zp + 2 * gi)))
                        : _mm512_set1_ps((float)(1 << (bits - 1)));
            _mm512_storeu_ps(r->gs, s);
            if (narrow8)
                _mm512_storeu_ps(r->gn, _mm512_mul_ps(z, _mm512_sub_ps(_mm512_setzero_ps(), s)));
            else
                _mm512_storeu_ps(r->gz, z);
        }
    }
    r->s = _mm512_set1_ps(r->gs[i]);
    if (narrow8)
        r->tab = _mm512_set1_ps(r->gn[i]);
    else if (!enc_fp8(enc))
        r->z = _mm512_set1_ps(r->gz[i]);
    if (enc == ENC_I8X) /* what 2^23 + code less 2^23 + zero leaves: see row_step16 */
        r->tab = _mm512_add_ps(r->z, _mm512_set1_ps(8388608.0f));
    if (enc_looked_up(enc)) { /* the table repeats every 2^bits entries: see row_step16 */
        const __m512 codes = enc_bits(enc) == 4 ? _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
                             : enc == ENC_I3    ? _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7)
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

/* 16 fp8 codes as fp16 bits h (f8_form) to weights: widened, times the form's unit and the group's
 * scale s, each product exact or rounded once as q_dequantize's decode(code)·scale; zero in lanes
 * not live. */
AVX512_INLINE __m512 f8_weights16(const f8_form *f, __m256i h, __m512 s, __mmask16 live)
{
    __m512 v = _mm512_cvtph_ps(h);
    if (f->unit != 1.0f)
        v = _mm512_mul_ps(v, _mm512_set1_ps(f->unit));
    return _mm512_maskz_mul_ps(live, v, s);
}

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
    case ENC_F8E4:
    case ENC_F8E5: { /* the 32 codes' fp16 bits in 16-bit lanes, NaN codes set to fp16's NaN (f8_form) */
        const f8_form *f = f8_form_of(enc);
        const __m512i c = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8((__mmask32)m0 | (__mmask32)m1 << 16, p));
        const __mmask32 nan = _mm512_cmpgt_epu16_mask(_mm512_and_si512(c, _mm512_set1_epi16(0x7F)),
                                                      _mm512_set1_epi16((short)f->finite));
        __m512i h = _mm512_and_si512(_mm512_slli_epi16(c, (unsigned)f->shift), _mm512_set1_epi16((short)f->keep));
        h = _mm512_mask_mov_epi16(h, nan, _mm512_ternarylogic_epi32(h, _mm512_set1_epi16((short)0x8000),
                                                                    _mm512_set1_epi16(F8_NAN16), 0xEA));
        *w0 = f8_weights16(f, _mm512_castsi512_si256(h), r->s, m0);
        *w1 = f8_weights16(f, _mm512_extracti64x4_epi64(h, 1), r->s, m1);
        break;
    }
    case ENC_I3:
    case ENC_I2: { /* whole 32-blocks only (12 or 8 bytes), in column order. Every 128-bit lane gets
                    a copy of the bytes; each 32-bit lane picks the two holding its code (vpshufb)
                    and shifts the code to bit 0; vpermps reads 4 bits, the code's and the next
                    one's low bits, which the repeating table ignores. */
        const int bits = enc_bits(enc);
        const __m512i all = _mm512_broadcast_i32x4(_mm_maskz_loadu_epi8((__mmask16)((1u << (4 * bits)) - 1), p));
        const __m512i *narrow = NARROW[enc == ENC_I3 ? 0 : 1].v;
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

/* out[i][c] = the 16 lanes of a0[i][c] + a1[i][c] summed, for i < MR, in _mm512_reduce_add_ps's
 * order (lane l with l + 8, then with l + 4, l + 2, l + 1: the tile's sums as decode's, bit for
 * bit), but the twelve at once: each level pairs the lanes of several sums in one add, about
 * half the instructions of twelve reductions (K = 64 prefill, 512 tokens: 0.57 -> 0.52 ms). */
AVX512_INLINE void tile_sums(int MR, __m512 a0[TILE_X][4], __m512 a1[TILE_X][4], float out[TILE_X][4])
{
    __m512 u[4]; /* u[c], 128-bit lane i: row i's sums of column c over lanes l and l + 8, l + 4 */
    RT_UNROLL for (int c = 0; c < 4; c++) {
        __m512 v[4];
        RT_UNROLL for (int i = 0; i < 4; i++)
            v[i] = i < MR ? _mm512_add_ps(a0[i][c], a1[i][c]) : _mm512_setzero_ps();
        const __m512 t01 = _mm512_add_ps(_mm512_shuffle_f32x4(v[0], v[1], 0x44), _mm512_shuffle_f32x4(v[0], v[1], 0xEE));
        const __m512 t23 = _mm512_add_ps(_mm512_shuffle_f32x4(v[2], v[3], 0x44), _mm512_shuffle_f32x4(v[2], v[3], 0xEE));
        u[c] = _mm512_add_ps(_mm512_shuffle_f32x4(t01, t23, 0x88), _mm512_shuffle_f32x4(t01, t23, 0xDD));
    }
    const __m512 w01 = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(u[0]), _mm512_castps_pd(u[1]))),
                                     _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(u[0]), _mm512_castps_pd(u[1]))));
    const __m512 w23 = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(u[2]), _mm512_castps_pd(u[3]))),
                                     _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(u[2]), _mm512_castps_pd(u[3]))));
    const __m512 z = _mm512_add_ps(_mm512_shuffle_ps(w01, w23, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(w01, w23, _MM_SHUFFLE(3, 1, 3, 1)));
    /* 128-bit lane i holds out[i]: plain stores of a row each, which the driver's loads of single
     * sums read back */
    _mm_storeu_ps(out[0], _mm512_castps512_ps128(z));
    if (MR > 1)
        _mm_storeu_ps(out[1], _mm512_extractf32x4_ps(z, 1));
    if (MR > 2)
        _mm_storeu_ps(out[2], _mm512_extractf32x4_ps(z, 2));
}

/* Per output, two 16-lane accumulators over steps of 32 (w0's products in one, w1's in the
 * other, so that no chain of dependent FMAs sets the pace), added and reduced once at the end in
 * a fixed order. Whole steps run with constant masks (plain loads); a row's last, partial step
 * with live-lane masks. */
AVX512_INLINE void tile16_span(int enc, int wide, int MR, const rt_weight *W, const int j[4], const float *x,
                               size_t ldx, const kspan *ks, float out[TILE_X][4])
{
    const int64_t K = W->in, group = enc_grouped(enc) ? W->L.group : K, end = ks ? ks->k1 : K;
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
    const int64_t SPAN = 512 / enc_bits(enc) > 32 ? 512 / enc_bits(enc) / 32 * 32 : 32;
    int64_t k = ks ? ks->k0 : 0, group_end = 0, gi = 0;
    /* ENC_I8X, ENC_I4X: the tensor's last block goes below, read without going past its end. */
    const int64_t whole_end = enc_block(enc) && j[3] == W->out - 1 ? end - enc_block(enc) : end;
    for (; k + SPAN <= whole_end; k += SPAN) {
        prefetch_step(enc, r[0].r.p, k, SPAN, ahead);
        RT_UNROLL for (int64_t s = k; s < k + SPAN; s += 32) {
            if (enc_grouped(enc) && s == group_end) {
                RT_UNROLL for (int c = 0; c < 4; c++)
                    row_group16(enc, wide, &r[c], gi, enc_bits(enc));
                group_end += group, gi++;
            }
            tile_step16(enc, wide, MR, r, x, ldx, s, 0xFFFF, 0xFFFF, 0, a0, a1);
        }
    }
    for (; k < end; k += 32) {
        if (enc_grouped(enc) && k == group_end) {
            RT_UNROLL for (int c = 0; c < 4; c++)
                row_group16(enc, wide, &r[c], gi, enc_bits(enc));
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
    tile_sums(MR, a0, a1, out);
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
    const int64_t K = W->in, group = enc_grouped(enc) ? W->L.group : K;
    wrow16 r;
    row_ptr16(enc, W, j, 0, &r);
    for (int64_t k = 0, group_end = 0, gi = 0; k < K; k += 32) {
        const __mmask16 m0 = lanes16(K - k), m1 = lanes16(K - k - 16);
        if (enc_grouped(enc) && k == group_end)
            row_group16(enc, wide, &r, gi++, enc_bits(enc)), group_end += group;
        __m512 w0, w1;
        row_step16(enc, wide, &r, k, m0, m1, enc_block(enc) && j == W->out - 1 && k >= K - enc_block(enc), &w0, &w1);
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

/* ---- W8A8 on the avx512vnni set */
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

/* a8b_dot_fn's fp32 steps for one sub-block, the 16 rows of W in the lanes: acc + (float)s·(d·dw)
 * [+ (float)(c / 128)·(d·wm) where min] for the rows' exact sums s, scales dw and mins wm, x's
 * scale d and 128·Σ codes c. */
VNNI_INLINE __m512 a8b_step(__m512 acc, __m512i s, float dx, int32_t c, __m512 dw, int min, __m512 wm)
{
    const __m512 d = _mm512_set1_ps(dx);
    acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, dw)));
    if (min)
        acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_set1_ps((float)(c / 128)), _mm512_mul_ps(d, wm)));
    return acc;
}

/* a8b_dot_scalar on VNNI: a lane a row of W, its sub-block sum SUB / 4 vpdpbusd of the row's
 * unsigned codes u = qw + 128 with 4 of x's codes broadcast, less 128·Σ codes of x's sub-block
 * (cx); then the scalar set's fp32 steps, 16 rows at once. SUB and MIN (wm given) are constants
 * where it is inlined. */
VNNI_INLINE void a8b_vnni(int MR, int SUB, int MIN, const uint8_t *wq, const float *wd, const float *wm, int nb,
                          const int8_t *qx, size_t ldq, const float *dx, const int32_t *cx, size_t lds,
                          float out[A8B_MR][A8B_ROWS])
{
    __m512 acc[A8B_MR];
    RT_UNROLL for (int i = 0; i < MR; i++)
        acc[i] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m512i s[A8B_MR];
        RT_UNROLL for (int i = 0; i < MR; i++)
            s[i] = _mm512_setzero_si512();
        RT_UNROLL for (int v = 0; v < SUB / 4; v++) {
            const __m512i w = _mm512_load_si512((const void *)(wq + (size_t)b * A8B_ROWS * SUB + 64 * v));
            RT_UNROLL for (int i = 0; i < MR; i++) {
                int32_t q4;
                memcpy(&q4, qx + (size_t)i * ldq + (size_t)b * SUB + 4 * v, 4);
                s[i] = _mm512_dpbusd_epi32(s[i], w, _mm512_set1_epi32(q4));
            }
        }
        RT_UNROLL for (int i = 0; i < MR; i++) {
            const int32_t c = cx[(size_t)i * lds + b];
            acc[i] = a8b_step(acc[i], _mm512_sub_epi32(s[i], _mm512_set1_epi32(c)), dx[(size_t)i * lds + b], c,
                              _mm512_load_ps(wd + (size_t)b * A8B_ROWS), MIN,
                              MIN ? _mm512_load_ps(wm + (size_t)b * A8B_ROWS) : _mm512_setzero_ps());
        }
    }
    RT_UNROLL for (int i = 0; i < MR; i++)
        _mm512_storeu_ps(out[i], acc[i]);
}

VNNI static void a8b_dot_vnni(const uint8_t *wq, const float *wd, const float *wm, int nb, int sub, const int8_t *qx,
                              size_t ldq, const float *dx, const int32_t *cx, size_t lds, int mr,
                              float out[A8B_MR][A8B_ROWS])
{
    A8B_SPECIALISED(a8b_vnni, sub, wm != NULL, mr, wq, wd, wm, nb, qx, ldq, dx, cx, lds, out);
}

/* The 4 × 4 dwords in each 128-bit lane of r[0..3] transposed: dword v of lane L of x[i] is dword
 * i of lane L of r[v]. */
AVX512_INLINE void transpose4_lanes(const __m512i r[4], __m512i x[4])
{
    const __m512i t0 = _mm512_unpacklo_epi32(r[0], r[1]), t1 = _mm512_unpackhi_epi32(r[0], r[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(r[2], r[3]), t3 = _mm512_unpackhi_epi32(r[2], r[3]);
    x[0] = _mm512_unpacklo_epi64(t0, t2), x[1] = _mm512_unpackhi_epi64(t0, t2);
    x[2] = _mm512_unpacklo_epi64(t1, t3), x[3] = _mm512_unpackhi_epi64(t1, t3);
}

/* 16 codes of 16 rows, rows p, 4 + p, 8 + p, 12 + p in the lanes of c[p], as the 4 × 64 bytes at o
 * of a8b_dot_fn's layout: 4 × 4 transposes of dwords within lanes, so that lane l of vector v holds
 * row l's codes 4v..4v+3. */
AVX512_INLINE void a8b_interleave(const __m512i c[4], uint8_t *o)
{
    __m512i x[4];
    transpose4_lanes(c, x);
    RT_UNROLL for (int v = 0; v < 4; v++)
        _mm512_store_si512((void *)(o + 64 * v), x[v]);
}

/* Rows j[0..15]' offsets, `stride` units apart, one a lane (W's bytes fit int32: a8b_pack_fn). */
AVX512_INLINE __m512i rows_at(const int j[A8B_ROWS], size_t stride)
{
    return _mm512_mullo_epi32(_mm512_loadu_si512(j), _mm512_set1_epi32((int)stride));
}

/* IQ4_NL's code book in each 128-bit lane, for vpshufb. */
AVX512_INLINE __m512i iq4_book(void)
{
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)q_iq4nl_values));
}

/* The driver's a8 block packing of the 32-blocks (kind: their dtype), 16 rows a block at a time:
 * the block's codes of rows p, 4 + p, 8 + p, 12 + p in the four 128-bit lanes of two vectors,
 * codes 0-15 in one and 16-31 in the other, as u (A8B_B32), then a8b_interleave. Scales (and mins)
 * gathered 16 rows at once (lmq's: a group's serves its blocks); a fifth bit k of row 4L + p is
 * bit k % 8 of byte k / 8 of the word gathered into dword p of lane L. */
AVX512_INLINE void a8b_pack_blocks(int kind, const rt_weight *W, const int j[A8B_ROWS], uint8_t *wq, float *wd,
                                   float *wm)
{
    const int nb = W->in / A8B_BLOCK, lmq = kind == LMQ_T_INT4 || kind == LMQ_T_INT8, nibbles = A8B_B32[kind].nibbles;
    /* bytes of codes a block, from one block of a row to the next, and of a GGUF block's header */
    const size_t codes = nibbles ? A8B_BLOCK / 2 : A8B_BLOCK, head = A8B_B32[kind].head;
    const size_t step = codes + head, row_bytes = (size_t)nb * step;
    const uint8_t *row[A8B_ROWS];
    for (int l = 0; l < A8B_ROWS; l++)
        row[l] = lmq ? W->data + W->L.code_offset + (size_t)j[l] * row_bytes : W->data + (size_t)j[l] * row_bytes + head;
    const uint8_t *next = row[0] - head + A8B_ROWS * row_bytes;
    const size_t snext_len = lmq ? A8B_ROWS * (size_t)W->L.groups_per_row * 2 : 0;
    const uint8_t *snext = W->data + (size_t)(j[0] + A8B_ROWS) * (size_t)W->L.groups_per_row * 2;
    const __m512i vidx = rows_at(j, lmq ? (size_t)W->L.groups_per_row : row_bytes), nib = _mm512_set1_epi8(0x0F);
    const __m512i off = _mm512_set1_epi8(A8B_B32[kind].off), book = iq4_book();
    const __m512i bits = _mm512_set1_epi64(0x8040201008040201), sixteen = _mm512_set1_epi8(16);
    const __m512i halves = _mm512_set_epi64(BYTES8(1), 0, BYTES8(1), 0, BYTES8(1), 0, BYTES8(1), 0); /* bytes 8-15 of a lane: 1 */
    __m512 d = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blocks = W->data + (size_t)b * step; /* the rows' blocks b at vidx */
        if (lmq) {
            const int64_t k = (int64_t)b * A8B_BLOCK;
            if (k % W->L.group == 0) {
                const __m512i gi = _mm512_add_epi32(vidx, _mm512_set1_epi32((int)(k / W->L.group)));
                const __m512i h = _mm512_i32gather_epi32(gi, (const void *)W->data, 2);
                d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h));
            }
        } else {
            const __m512i h = _mm512_i32gather_epi32(vidx, (const void *)blocks, 1);
            d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h));
            if (A8B_B32[kind].mins)
                _mm512_store_ps(wm + (size_t)b * A8B_ROWS, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h, 16))));
        }
        _mm512_store_ps(wd + (size_t)b * A8B_ROWS, d);
        const __m512i qh = A8B_B32[kind].qh ? _mm512_i32gather_epi32(vidx, (const void *)(blocks + A8B_B32[kind].qh), 1)
                                        : _mm512_setzero_si512();
        __m512i lo[4], hi[4];
        /* The next tile's rows follow this one's in memory, and its scales too (lmq's): ask for
         * them spread over this tile's blocks, so that a tile starts on its rows in cache (the
         * hardware prefetcher learns 16 short streams late, and a gather of scales from memory
         * stalls). */
        for (size_t c = 0; c < step * A8B_ROWS; c += 64)
            __builtin_prefetch(next + (size_t)b * step * A8B_ROWS + c, 0, 3);
        if (lmq && (size_t)b * 64 < snext_len)
            __builtin_prefetch(snext + (size_t)b * 64, 0, 3);
        RT_UNROLL for (int p = 0; p < 4; p++) {
            const size_t o = (size_t)b * step;
            __m512i x[2];
            RT_UNROLL for (int h = 0; h < 2 - nibbles; h++) {
                x[h] = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(row[p] + o + 16 * h)));
                x[h] = _mm512_inserti32x4(x[h], _mm_loadu_si128((const __m128i *)(row[4 + p] + o + 16 * h)), 1);
                x[h] = _mm512_inserti32x4(x[h], _mm_loadu_si128((const __m128i *)(row[8 + p] + o + 16 * h)), 2);
                x[h] = _mm512_inserti32x4(x[h], _mm_loadu_si128((const __m128i *)(row[12 + p] + o + 16 * h)), 3);
            }
            if (nibbles) {
                const __m512i l4 = _mm512_and_si512(x[0], nib), h4 = _mm512_and_si512(_mm512_srli_epi16(x[0], 4), nib);
                x[0] = kind == LMQ_T_INT4 ? _mm512_unpacklo_epi8(l4, h4) : l4;
                x[1] = kind == LMQ_T_INT4 ? _mm512_unpackhi_epi8(l4, h4) : h4;
            }
            RT_UNROLL for (int h = 0; h < 2; h++) {
                if (A8B_B32[kind].book)
                    x[h] = _mm512_shuffle_epi8(book, x[h]);
                if (A8B_B32[kind].qh) { /* codes 16h.. : bytes 4p + 2h, 4p + 2h + 1 of each lane's word p */
                    const __m512i by = _mm512_shuffle_epi8(qh, _mm512_add_epi8(halves, _mm512_set1_epi8((char)(4 * p + 2 * h))));
                    x[h] = _mm512_mask_add_epi8(x[h], _mm512_test_epi8_mask(by, bits), x[h], sixteen);
                }
            }
            lo[p] = _mm512_add_epi8(x[0], off);
            hi[p] = _mm512_add_epi8(x[1], off);
        }
        uint8_t *o = wq + (size_t)b * A8B_PACKED;
        a8b_interleave(lo, o);
        a8b_interleave(hi, o + 256);
    }
}

#define A8B_PACK_OF(T)                                                                                         \
    AVX512 static void a8b_pack_##T(const rt_weight *W, const int j[A8B_ROWS], uint8_t *wq, float *wd, float *wm) \
    {                                                                                                          \
        a8b_pack_blocks(LMQ_T_##T, W, j, wq, wd, wm);                                                          \
    }
A8B_B32_TYPES(A8B_PACK_OF)

/* The 256-blocks the AVX-512 set reads as stored (ggml-common.h's layouts), and what k_units adds
 * to a weight code (bias): Q4_K and Q5_K, d and dmin, 12 bytes of 6-bit scales and mins, Q5_K's 32
 * bytes of fifth bits, then 128 of nibbles: 8 sub-blocks of 32, w = (d·sc)·q − (dmin·m); Q6_K, 128
 * bytes of nibbles, 64 of two-bit tops, 16 int8 scales and d: 16 sub-blocks of 16, w = (d·sc)·(q −
 * 32); Q2_K, 16 bytes of 4-bit scales and mins, 64 of two-bit codes, d and dmin: 16 of 16, w =
 * (d·sc)·q − (dmin·m); Q3_K, 32 bytes of third bits, 64 of two-bit codes, 12 of 6-bit scales and
 * d: 16 of 16, w = (d·(sc − 32))·(q − 4); IQ4_XS, d, 6-bit scales in 2 + 4 bytes, 128 of nibbles
 * looked up in IQ4_NL's book: 8 of 32, w = (d·(ls − 32))·v. Sub-blocks and mins as
 * rt_a8b_readings have them, as constants the kernels are specialised on. */
static const struct {
    uint8_t subs, mins, bias;
} K256[LMQ_T_COUNT] = {
    [LMQ_T_Q2_K] = { 16, 1, 0 }, [LMQ_T_Q3_K] = { 16, 0, 4 },  [LMQ_T_Q4_K] = { 8, 1, 0 },
    [LMQ_T_Q5_K] = { 8, 1, 0 },  [LMQ_T_Q6_K] = { 16, 0, 32 }, [LMQ_T_IQ4_XS] = { 8, 0, 128 },
};

/* Bit `bit` (a power of two) of each byte of h << sh (sh < 0: >> −sh), from the byte's own bits. */
AVX512_INLINE __m256i bit_to(__m256i h, int sh, int bit)
{
    const __m256i b = sh > 0 ? _mm256_slli_epi16(h, sh) : sh < 0 ? _mm256_srli_epi16(h, -sh) : h;
    return _mm256_and_si256(b, _mm256_set1_epi8((char)bit));
}

/* Two 32-byte halves as one vector. */
AVX512_INLINE __m512i join(__m256i lo, __m256i hi)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* One block's 256 codes in order, 64 a vector, as unsigned bytes: the weight code + K256's bias.
 * Q4_K / Q5_K: qs's 32 bytes at 32c hold codes 64c.. (low nibbles, sub-block 2c) and 64c + 32..
 * (high, 2c + 1), sub-block t's fifth bits bit t of qh's bytes; Q6_K: half n the 64 bytes of ql
 * (low nibbles codes 128n.., high 128n + 64..) under bits 2c of qh's 32 at 32n for its quarter c
 * of 32 codes; Q2_K / Q3_K: half n's quarter c bits 2c, 2c + 1 of qs's 32 bytes at 32n (Q3_K: 4 ×
 * bit 4n + c of hmask's 32 above them); IQ4_XS: sub-block t the 16 bytes at 16t (low nibbles codes
 * 0-15, high 16-31) through the book. */
AVX512_INLINE void k_units(int kind, const uint8_t *p, __m512i u[4])
{
    const __m512i nib = _mm512_set1_epi8(0x0F);
    if (kind == LMQ_T_Q2_K || kind == LMQ_T_Q3_K) {
        const uint8_t *qs = p + (kind == LMQ_T_Q3_K ? 32 : 16);
        const __m256i three = _mm256_set1_epi8(3), hm = _mm256_loadu_si256((const __m256i *)p);
        RT_UNROLL for (int v = 0; v < 4; v++) {
            const int n = v / 2, c = 2 * (v % 2);
            const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * n));
            u[v] = join(_mm256_and_si256(_mm256_srli_epi16(q, 2 * c), three),
                        _mm256_and_si256(_mm256_srli_epi16(q, 2 * c + 2), three));
            if (kind == LMQ_T_Q3_K)
                u[v] = _mm512_or_si512(u[v], join(bit_to(hm, 2 - (4 * n + c), 4), bit_to(hm, 1 - (4 * n + c), 4)));
        }
        return;
    }
    if (kind == LMQ_T_IQ4_XS) {
        const __m512i book = iq4_book(), unit = _mm512_set1_epi8((char)K256[LMQ_T_IQ4_XS].bias);
        RT_UNROLL for (int c = 0; c < 4; c++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(p + 8 + 32 * c));
            const __m512i x = _mm512_shuffle_i64x2(join(q, q), join(q, q), _MM_SHUFFLE(1, 1, 0, 0)); /* A A B B */
            const __m512i y = _mm512_mask_blend_epi64(0xCC, x, _mm512_srli_epi16(x, 4)); /* lanes 1, 3: high */
            u[c] = _mm512_add_epi8(_mm512_shuffle_epi8(book, _mm512_and_si512(y, nib)), unit);
        }
        return;
    }
    if (kind != LMQ_T_Q6_K) {
        const uint8_t *qs = p + (kind == LMQ_T_Q5_K ? 48 : 16);
        const __m256i h = kind == LMQ_T_Q5_K ? _mm256_loadu_si256((const __m256i *)(p + 16)) : _mm256_setzero_si256();
        RT_UNROLL for (int c = 0; c < 4; c++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            u[c] = _mm512_and_si512(join(q, _mm256_srli_epi16(q, 4)), nib);
            if (kind == LMQ_T_Q5_K)
                u[c] = _mm512_or_si512(u[c], join(bit_to(h, 4 - 2 * c, 0x10), bit_to(h, 3 - 2 * c, 0x10)));
        }
        return;
    }
    const __m512i two = _mm512_set1_epi8(0x30);
    RT_UNROLL for (int n = 0; n < 2; n++) {
        const __m512i l = _mm512_loadu_si512(p + 64 * n);
        const __m256i h = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * n));
        const __m512i h01 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_slli_epi16(h, 4)), _mm256_slli_epi16(h, 2), 1);
        const __m512i h23 = _mm512_inserti64x4(_mm512_castsi256_si512(h), _mm256_srli_epi16(h, 2), 1);
        u[2 * n] = _mm512_or_si512(_mm512_and_si512(l, nib), _mm512_and_si512(h01, two));
        u[2 * n + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), nib), _mm512_and_si512(h23, two));
    }
}

/* A K-type's (kind) sub-block scales of one block of 16 rows, and its mins, one row a lane, as
 * the portable readings compute them: p the block's bytes in the first row's place, at the rows'
 * byte offsets from there. Q4_K / Q5_K's 6-bit scales and mins in blk_k4_scale's layout (sub-block
 * t < 4 the low six bits of bytes t and t + 4, t >= 4 a nibble of byte t + 4 under the top two bits
 * of byte t − 4 or t); Q6_K's and Q3_K's d read with the bytes before it, so that no gather reads
 * past the block; Q2_K's 4-bit scale and min of sub-block t the low and high nibble of byte t;
 * Q3_K's blk_q3_scale's, IQ4_XS's blk_xs_scale's. */
AVX512_INLINE void k_scales(int kind, const uint8_t *p, __m512i at, __m512 *d, __m512 *m)
{
    const __m512i six = _mm512_set1_epi32(63), four = _mm512_set1_epi32(0xF), top = _mm512_set1_epi32(3);
    const __m512 neg = _mm512_set1_ps(-0.0f);
    if (kind == LMQ_T_Q2_K) {
        const __m512i h = _mm512_i32gather_epi32(at, (const void *)(p + 80), 1);
        const __m512 dd = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h));
        const __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h, 16)));
        RT_UNROLL for (int w = 0; w < 4; w++) {
            const __m512i sc = _mm512_i32gather_epi32(at, (const void *)(p + 4 * w), 1);
            RT_UNROLL for (int k = 0; k < 4; k++) {
                d[4 * w + k] = _mm512_mul_ps(dd, _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(sc, 8 * k), four)));
                m[4 * w + k] = _mm512_xor_ps(
                    _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(sc, 8 * k + 4), four))), neg);
            }
        }
        return;
    }
    if (kind == LMQ_T_Q3_K || kind == LMQ_T_IQ4_XS) {
        const int q3 = kind == LMQ_T_Q3_K;
        const __m512i h = _mm512_i32gather_epi32(at, (const void *)(p + (q3 ? 106 : 0)), 1);
        const __m512 dd = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(q3 ? _mm512_srli_epi32(h, 16) : h));
        const __m512i hi = q3 ? _mm512_i32gather_epi32(at, (const void *)(p + 104), 1) : _mm512_srli_epi32(h, 16);
        const __m512i lo0 = _mm512_i32gather_epi32(at, (const void *)(p + (q3 ? 96 : 4)), 1);
        const __m512i lo1 = q3 ? _mm512_i32gather_epi32(at, (const void *)(p + 100), 1) : lo0;
        const __m512i bias = _mm512_set1_epi32(32);
        for (int t = 0; t < 16 / (2 - q3); t++) {
            /* the low nibble's place in its word, the top two bits' in theirs */
            const int ls = q3 ? 8 * (t % 4) + 4 * (t / 8) : 4 * t, hs = q3 ? 8 * (t % 4) + 2 * (t / 4) : 2 * t;
            const __m512i lw = q3 && t % 8 >= 4 ? lo1 : lo0;
            const __m512i sc = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(lw, ls), four),
                                               _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(hi, hs), top), 4));
            d[t] = _mm512_mul_ps(dd, _mm512_cvtepi32_ps(_mm512_sub_epi32(sc, bias)));
        }
        return;
    }
    if (kind == LMQ_T_Q6_K) {
        const __m512 dd = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(
            _mm512_srli_epi32(_mm512_i32gather_epi32(at, (const void *)(p + 206), 1), 16)));
        RT_UNROLL for (int w = 0; w < 4; w++) {
            const __m512i sc = _mm512_i32gather_epi32(at, (const void *)(p + 192 + 4 * w), 1);
            RT_UNROLL for (int k = 0; k < 4; k++)
                d[4 * w + k] = _mm512_mul_ps(dd, _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(sc, 24 - 8 * k), 24)));
        }
        return;
    }
    const __m512i h = _mm512_i32gather_epi32(at, (const void *)p, 1);
    const __m512 dd = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h));
    const __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h, 16)));
    const __m512i w0 = _mm512_i32gather_epi32(at, (const void *)(p + 4), 1);
    const __m512i w1 = _mm512_i32gather_epi32(at, (const void *)(p + 8), 1);
    const __m512i w2 = _mm512_i32gather_epi32(at, (const void *)(p + 12), 1);
    RT_UNROLL for (int t = 0; t < 8; t++) {
        const int sh = 8 * (t % 4);
        __m512i sc, mn;
        if (t < 4) {
            sc = _mm512_and_si512(_mm512_srli_epi32(w0, sh), six);
            mn = _mm512_and_si512(_mm512_srli_epi32(w1, sh), six);
        } else {
            sc = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, sh), four),
                                 _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w0, sh + 6), top), 4));
            mn = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, sh + 4), four),
                                 _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w1, sh + 6), top), 4));
        }
        d[t] = _mm512_mul_ps(dd, _mm512_cvtepi32_ps(sc));
        m[t] = _mm512_xor_ps(_mm512_mul_ps(dmin, _mm512_cvtepi32_ps(mn)), neg); /* −(dmin·m), as the reading */
    }
}

/* The driver's a8 block packing of the K-types (kind), a block of 256 of the 16 rows at a time:
 * each row's codes (k_units) as qw + 128 into an L1 buffer, the scales and mins (k_scales), then
 * the buffer's 16 chunks of 16 codes through a8b_interleave; chunk g of a block lands 256 g bytes
 * into the block's 4096. */
AVX512_INLINE void a8b_pack_k(int kind, const rt_weight *W, const int j[A8B_ROWS], uint8_t *wq, float *wd,
                              float *wm)
{
    const size_t bytes = lmq_encoding_of((unsigned)kind)->block_bytes, nbb = (size_t)W->in / 256;
    const size_t row_bytes = nbb * bytes, per = K256[kind].subs;
    const __m512i off = _mm512_set1_epi8((char)(128 - K256[kind].bias));
    _Alignas(64) uint8_t u[A8B_ROWS][256];
    const uint8_t *next = W->data + (size_t)(j[0] + A8B_ROWS) * row_bytes;
    const __m512i at = rows_at(j, row_bytes);
    for (size_t bb = 0; bb < nbb; bb++) {
        /* the next tile's rows, spread over this tile's blocks (see a8b_pack_blocks) */
        for (size_t c = 0; c < bytes * A8B_ROWS; c += 64)
            __builtin_prefetch(next + bb * bytes * A8B_ROWS + c, 0, 3);
        for (int l = 0; l < A8B_ROWS; l++) {
            __m512i v[4];
            k_units(kind, W->data + (size_t)j[l] * row_bytes + bb * bytes, v);
            RT_UNROLL for (int c = 0; c < 4; c++)
                _mm512_store_si512((void *)(u[l] + 64 * c), _mm512_add_epi8(v[c], off));
        }
        __m512 d[16], m[16];
        k_scales(kind, W->data + bb * bytes, at, d, m);
        for (size_t t = 0; t < per; t++) {
            _mm512_store_ps(wd + (bb * per + t) * A8B_ROWS, d[t]);
            if (K256[kind].mins)
                _mm512_store_ps(wm + (bb * per + t) * A8B_ROWS, m[t]);
        }
        RT_UNROLL for (int g = 0; g < 16; g++) {
            __m512i c[4];
            RT_UNROLL for (int q = 0; q < 4; q++) {
                c[q] = _mm512_castsi128_si512(_mm_load_si128((const __m128i *)(u[q] + 16 * g)));
                RT_UNROLL for (int lane = 1; lane < 4; lane++)
                    c[q] = _mm512_inserti32x4(c[q], _mm_load_si128((const __m128i *)(u[4 * lane + q] + 16 * g)), lane);
            }
            a8b_interleave(c, wq + bb * 4096 + 256 * (size_t)g);
        }
    }
}

#define A8B_PACK_K(T)                                                                                          \
    AVX512 static void a8b_pack_##T(const rt_weight *W, const int j[A8B_ROWS], uint8_t *wq, float *wd, float *wm) \
    {                                                                                                          \
        a8b_pack_k(LMQ_T_##T, W, j, wq, wd, wm);                                                               \
    }
A8B_K_TYPES(A8B_PACK_K)

#define VNNI_AVX512_INLINE \
    static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512vnni")))
#define VNNI_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512vnni")))

/* The four 128-bit lanes' sums of s[0..3]: dword 4k + v of the result is lane k of s[v] summed. */
AVX512_INLINE __m512i lane_sums(const __m512i s[4])
{
    const __m512i t01 = _mm512_add_epi32(_mm512_unpacklo_epi32(s[0], s[1]), _mm512_unpackhi_epi32(s[0], s[1]));
    const __m512i t23 = _mm512_add_epi32(_mm512_unpacklo_epi32(s[2], s[3]), _mm512_unpackhi_epi32(s[2], s[3]));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(t01, t23), _mm512_unpackhi_epi64(t01, t23));
}

/* The 16 × 16 dwords at m (rows ld apart) transposed into col: lane l of col[k] is row l's dword k.
 * 4 × 4 transposes of dwords within 128-bit lanes, then of the lanes. */
AVX512_INLINE void transpose16(const int32_t *m, size_t ld, __m512i col[16])
{
    __m512i x[4][4]; /* x[g][v], lane L: rows 4g..4g + 3 of column 4L + v */
    RT_UNROLL for (int g = 0; g < 4; g++) {
        __m512i r[4];
        RT_UNROLL for (int i = 0; i < 4; i++)
            r[i] = _mm512_load_si512((const void *)(m + (size_t)(4 * g + i) * ld));
        transpose4_lanes(r, x[g]);
    }
    RT_UNROLL for (int v = 0; v < 4; v++) {
        const __m512i p0 = _mm512_shuffle_i32x4(x[0][v], x[1][v], 0x44), p1 = _mm512_shuffle_i32x4(x[0][v], x[1][v], 0xEE);
        const __m512i p2 = _mm512_shuffle_i32x4(x[2][v], x[3][v], 0x44), p3 = _mm512_shuffle_i32x4(x[2][v], x[3][v], 0xEE);
        col[v] = _mm512_shuffle_i32x4(p0, p2, 0x88), col[4 + v] = _mm512_shuffle_i32x4(p0, p2, 0xDD);
        col[8 + v] = _mm512_shuffle_i32x4(p1, p3, 0x88), col[12 + v] = _mm512_shuffle_i32x4(p1, p3, 0xDD);
    }
}

/* Where k_sums leaves sub-block t's sum: sub-blocks of 32 are two lanes of one product, the even
 * ones' pairs added into lane 0 and the odd ones' into lane 2; those of 16 a lane each. */
#define K_SUM_AT(kind, t) (K256[kind].subs == 8 ? ((t) & 1) * 8 + (t) / 2 : 4 * ((t) & 3) + (t) / 4)

/* One block at p of a row against x's 256 codes qx: its sub-blocks' exact sums Σ u·qx at
 * K_SUM_AT, u the unsigned codes k_units gives, in the order x's codes are. */
VNNI_AVX512_INLINE __m512i k_sums(int kind, const uint8_t *p, const int8_t *qx)
{
    __m512i u[4], s[4];
    k_units(kind, p, u);
    RT_UNROLL for (int c = 0; c < 4; c++)
        s[c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[c], _mm512_loadu_si512(qx + 64 * c));
    const __m512i l = lane_sums(s);
    return K256[kind].subs == 16 ? l : _mm512_add_epi32(l, _mm512_shuffle_i32x4(l, l, _MM_SHUFFLE(2, 3, 0, 1)));
}

/* Decode's a8 block product of the K-types (kind): one row of x against rows j[0..15] of W as
 * they are stored, no packing (which cost decode three fifths of its time). Row by row, as memory
 * holds them, each block's sums (k_sums) go to scratch; then a8b_step over the sub-blocks in order,
 * the 16 rows' sums transposed into lanes beside their scales (k_scales): a8b_dot_fn's bits for
 * one row of codes. The sums less bias·Σ qx (K256) are Σ qw·qx. */
VNNI_AVX512_INLINE void a8b_row_k(int kind, const rt_weight *W, const int j[A8B_ROWS], const int8_t *qx,
                                  const float *dx, const int32_t *cx, void *scratch, float out[A8B_ROWS])
{
    const size_t bytes = lmq_encoding_of((unsigned)kind)->block_bytes, nbb = (size_t)W->in / 256;
    const size_t row_bytes = nbb * bytes, per = K256[kind].subs;
    const int mins = K256[kind].mins;
    int32_t *sums = scratch; /* [A8B_ROWS][nbb][16] */
    const uint8_t *next = W->data + (size_t)(j[0] + A8B_ROWS) * row_bytes;
    for (int l = 0; l < A8B_ROWS; l++)
        for (size_t bb = 0; bb < nbb; bb++) {
            /* the next tile's rows, a block's bytes of them a block (see a8b_pack_blocks) */
            for (size_t c = 0; c < bytes; c += 64)
                __builtin_prefetch(next + ((size_t)l * nbb + bb) * bytes + c, 0, 3);
            _mm512_store_si512((void *)(sums + ((size_t)l * nbb + bb) * 16),
                               k_sums(kind, W->data + (size_t)j[l] * row_bytes + bb * bytes, qx + 256 * bb));
        }
    const __m512i at = rows_at(j, row_bytes);
    __m512 acc = _mm512_setzero_ps();
    for (size_t bb = 0; bb < nbb; bb++) {
        __m512 d[16], m[16];
        k_scales(kind, W->data + bb * bytes, at, d, m);
        __m512i col[16];
        transpose16(sums + bb * 16, nbb * 16, col);
        _Pragma("GCC unroll 16") for (size_t t = 0; t < per; t++) {
            const size_t b = bb * per + t;
            __m512i s = col[K_SUM_AT(kind, t)];
            if (K256[kind].bias) /* cx[b]: 128·Σ qx, exactly */
                s = _mm512_sub_epi32(s, _mm512_set1_epi32(cx[b] / 128 * K256[kind].bias));
            acc = a8b_step(acc, s, dx[b], cx[b], d[t], mins, mins ? m[t] : d[t]);
        }
    }
    _mm512_storeu_ps(out, acc);
}

#define A8B_ROW_K(T)                                                                                           \
    VNNI_AVX512 static void a8b_row_##T(const rt_weight *W, const int j[A8B_ROWS], const int8_t *qx,           \
                                        const float *dx, const int32_t *cx, void *scratch, float out[A8B_ROWS]) \
    {                                                                                                          \
        a8b_row_k(LMQ_T_##T, W, j, qx, dx, cx, scratch, out);                                                  \
    }
A8B_K_TYPES(A8B_ROW_K)

#define A8B_ENTRY(T, kind) [LMQ_T_##T] = kind##_##T,
#define A8B_ROW_ENTRY(T) A8B_ENTRY(T, a8b_row)
#define A8B_PACK_ENTRY(T) A8B_ENTRY(T, a8b_pack)
static const a8b_row_fn A8B_ROW[LMQ_T_COUNT] = { A8B_K_TYPES(A8B_ROW_ENTRY) };
static const a8b_pack_fn A8B_PACK[LMQ_T_COUNT] = { A8B_B32_TYPES(A8B_PACK_ENTRY) A8B_K_TYPES(A8B_PACK_ENTRY) };

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

/* Whole cache lines a load: the widest reads this CPU has. */
AVX512 static uint64_t sum_words_avx512(const uint8_t *p, size_t n, int prefetch)
{
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += 256) {
        sum_ask_ahead(p + i, prefetch);
        a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(p + i));
        a1 = _mm512_add_epi64(a1, _mm512_loadu_si512(p + i + 64));
        a2 = _mm512_add_epi64(a2, _mm512_loadu_si512(p + i + 128));
        a3 = _mm512_add_epi64(a3, _mm512_loadu_si512(p + i + 192));
    }
    uint64_t lanes[8], s = 0; /* not _mm512_reduce_add_epi64: its additions are signed, and overflow */
    _mm512_storeu_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
    for (int j = 0; j < 8; j++)
        s += lanes[j];
    return s;
}

/* GGUF blocks decoded in registers (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K): a block's 32-column steps in
 * column order, 16 weights a vector, each as schemes/gguf_blocks.c computes it (a scale times a
 * small integer is exact, so its FMA with a min rounds once, as the reference's product and
 * difference do). A block's scales first (blk_prep16), then its steps (blk_step16). */
typedef struct {
    float d[16], m[16]; /* Q4_K, Q5_K: sub-block s's d·sc and dmin·m; Q6_K: sub-block i's d·sc */
} blk16;

#define BLK_IN_REGISTERS(dt)                                                                                   \
    ((dt) == LMQ_T_Q8_0 || (dt) == LMQ_T_Q4_0 || (dt) == LMQ_T_Q4_K || (dt) == LMQ_T_Q5_K || (dt) == LMQ_T_Q6_K)

AVX512_INLINE void blk_prep16(int dt, const uint8_t *b, blk16 *p)
{
    if (dt == LMQ_T_Q8_0 || dt == LMQ_T_Q4_0) {
        p->d[0] = _cvtsh_ss(lmq_le16(b));
    } else if (dt == LMQ_T_Q6_K) {
        const float d = _cvtsh_ss(lmq_le16(b + 208));
        const int8_t *sc = (const int8_t *)(b + 192);
        for (int i = 0; i < 16; i++)
            p->d[i] = d * (float)sc[i];
    } else { /* Q4_K, Q5_K */
        const float d = _cvtsh_ss(lmq_le16(b)), dmin = _cvtsh_ss(lmq_le16(b + 2));
        for (int s = 0; s < 8; s++) {
            int sc, m;
            blk_k4_scale(b + 4, s, &sc, &m);
            p->d[s] = d * (float)sc;
            p->m[s] = dmin * (float)m;
        }
    }
}

AVX512_INLINE __m512i u8x16(const uint8_t *p)
{
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
}

AVX512_INLINE __m512i srl16(__m512i v, int n)
{
    return _mm512_srl_epi32(v, _mm_cvtsi32_si128(n));
}

/* Columns 32t .. 32t + 31 of block b: w0 the first 16, w1 the rest. */
AVX512_INLINE void blk_step16(int dt, const blk16 *p, const uint8_t *b, int t, __m512 *w0, __m512 *w1)
{
    const __m512i m15 = _mm512_set1_epi32(15);
    if (dt == LMQ_T_Q8_0) {
        const __m512 d = _mm512_set1_ps(p->d[0]);
        *w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 2)))), d);
        *w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 18)))), d);
    } else if (dt == LMQ_T_Q4_0) {
        const __m512 d = _mm512_set1_ps(p->d[0]);
        const __m512i v = u8x16(b + 2), eight = _mm512_set1_epi32(8);
        *w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_and_si512(v, m15), eight)), d);
        *w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srli_epi32(v, 4), eight)), d);
    } else if (dt == LMQ_T_Q6_K) { /* half n, part k: see blk8_q6_k */
        const int n = t / 4, k = t % 4;
        const uint8_t *ql = b + 64 * n + 32 * (k & 1), *qh = b + 128 + 32 * n;
        __m512i q[2];
        RT_UNROLL for (int h = 0; h < 2; h++) {
            const __m512i lo = u8x16(ql + 16 * h), hi = u8x16(qh + 16 * h);
            const __m512i nib = k < 2 ? _mm512_and_si512(lo, m15) : _mm512_srli_epi32(lo, 4);
            const __m512i top = _mm512_and_si512(srl16(hi, 2 * k), _mm512_set1_epi32(3));
            q[h] = _mm512_sub_epi32(_mm512_or_si512(nib, _mm512_slli_epi32(top, 4)), _mm512_set1_epi32(32));
        }
        *w0 = _mm512_mul_ps(_mm512_set1_ps(p->d[2 * t]), _mm512_cvtepi32_ps(q[0]));
        *w1 = _mm512_mul_ps(_mm512_set1_ps(p->d[2 * t + 1]), _mm512_cvtepi32_ps(q[1]));
    } else { /* Q4_K, Q5_K: sub-block t, see k4_8 */
        const uint8_t *qs = b + (dt == LMQ_T_Q5_K ? 48 : 16) + 32 * (t / 2);
        __m512i q[2];
        RT_UNROLL for (int h = 0; h < 2; h++) {
            q[h] = _mm512_and_si512(srl16(u8x16(qs + 16 * h), 4 * (t % 2)), m15);
            if (dt == LMQ_T_Q5_K)
                q[h] = _mm512_or_si512(q[h], _mm512_slli_epi32(_mm512_and_si512(srl16(u8x16(b + 16 + 16 * h), t),
                                                                                _mm512_set1_epi32(1)), 4));
        }
        const __m512 d1 = _mm512_set1_ps(p->d[t]), m1 = _mm512_set1_ps(p->m[t]);
        *w0 = _mm512_fmsub_ps(_mm512_cvtepi32_ps(q[0]), d1, m1);
        *w1 = _mm512_fmsub_ps(_mm512_cvtepi32_ps(q[1]), d1, m1);
    }
}

/* A tile over GGUF block rows (runtime/linear_impl.h) with the fp32 tile's products (steps of 32,
 * two accumulators, the same reduction), so that the fused product is bit for bit the staged one:
 * the steps decoded in registers where blk_step16 takes the type, else each block of the four rows
 * decoded once into L1 (AVX2's decoders). */
AVX512_INLINE void tileblk16(int dt, int MR, const rt_weight *W, const int j[4], const float *x, size_t ldx,
                             float out[TILE_X][4])
{
    if (BLK_IN_REGISTERS(dt)) {
        blkrow r[4];
        RT_UNROLL for (int c = 0; c < 4; c++)
            blk_row(W, j[c], &r[c]);
        const int64_t nb = W->in / r[0].n;
        const int steps = dt == LMQ_T_Q8_0 || dt == LMQ_T_Q4_0 ? 1 : 8;
        const size_t ahead = (size_t)W->ahead_tiles * 4 * (size_t)nb * r[0].bytes;
        __m512 a0[TILE_X][4], a1[TILE_X][4];
        RT_UNROLL for (int i = 0; i < MR; i++)
            RT_UNROLL for (int c = 0; c < 4; c++)
                a0[i][c] = a1[i][c] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            blk_prefetch(&r[0], b, ahead);
            blk16 p[4];
            const uint8_t *bp[4];
            RT_UNROLL for (int c = 0; c < 4; c++) {
                bp[c] = r[c].p + (size_t)b * r[c].bytes;
                blk_prep16(dt, bp[c], &p[c]);
            }
            const float *xb = x + b * 32 * steps;
            for (int t = 0; t < steps; t++) {
                __m512 x0[TILE_X], x1[TILE_X];
                RT_UNROLL for (int i = 0; i < MR; i++) {
                    x0[i] = _mm512_loadu_ps(xb + (size_t)i * ldx + 32 * t);
                    x1[i] = _mm512_loadu_ps(xb + (size_t)i * ldx + 32 * t + 16);
                }
                RT_UNROLL for (int c = 0; c < 4; c++) {
                    __m512 w0, w1;
                    blk_step16(dt, &p[c], bp[c], t, &w0, &w1);
                    RT_UNROLL for (int i = 0; i < MR; i++) {
                        a0[i][c] = _mm512_fmadd_ps(x0[i], w0, a0[i][c]);
                        a1[i][c] = _mm512_fmadd_ps(x1[i], w1, a1[i][c]);
                    }
                }
            }
        }
        tile_sums(MR, a0, a1, out);
        return;
    }
    const block_fn dec = rt_avx2_blocks[dt];
    blkrow r[4];
    RT_UNROLL for (int c = 0; c < 4; c++)
        blk_row(W, j[c], &r[c]);
    const int64_t nb = W->in / r[0].n;
    const size_t ahead = (size_t)W->ahead_tiles * 4 * (size_t)nb * r[0].bytes;
    _Alignas(64) float w[4][BLK_MAX];
    __m512 a0[TILE_X][4], a1[TILE_X][4];
    RT_UNROLL for (int i = 0; i < MR; i++)
        RT_UNROLL for (int c = 0; c < 4; c++)
            a0[i][c] = a1[i][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        blk_prefetch(&r[0], b, ahead);
        RT_UNROLL for (int c = 0; c < 4; c++)
            dec(r[c].p + (size_t)b * r[c].bytes, w[c]);
        const float *xb = x + b * r[0].n;
        for (int t = 0; t < r[0].n; t += 32) {
            __m512 x0[TILE_X], x1[TILE_X];
            RT_UNROLL for (int i = 0; i < MR; i++) {
                x0[i] = _mm512_loadu_ps(xb + (size_t)i * ldx + t);
                x1[i] = _mm512_loadu_ps(xb + (size_t)i * ldx + t + 16);
            }
            RT_UNROLL for (int c = 0; c < 4; c++) {
                const __m512 w0 = _mm512_load_ps(w[c] + t), w1 = _mm512_load_ps(w[c] + t + 16);
                RT_UNROLL for (int i = 0; i < MR; i++) {
                    a0[i][c] = _mm512_fmadd_ps(x0[i], w0, a0[i][c]);
                    a1[i][c] = _mm512_fmadd_ps(x1[i], w1, a1[i][c]);
                }
            }
        }
    }
    tile_sums(MR, a0, a1, out);
}

AVX512_INLINE void rowblk16(int dt, const rt_weight *W, int j, float *o)
{
    blkrow r;
    blk_row(W, j, &r);
    for (int64_t b = 0; b < W->in / r.n; b++)
        rt_avx2_blocks[dt](r.p + (size_t)b * r.bytes, o + b * r.n);
}

RT_FUSED(AVX512, 16, f32, ENC_F32, 0)
RT_FUSED(AVX512, 16, f16, ENC_F16, 0)
RT_FUSED(AVX512, 16, bf16, ENC_BF16, 0)
RT_FUSED(AVX512, 16, f8e4, ENC_F8E4, 0)
RT_FUSED(AVX512, 16, f8e5, ENC_F8E5, 0)
RT_FUSED(AVX512, 16, i8, ENC_I8, 0)
RT_FUSED(AVX512, 16, i8w, ENC_I8, 1)
RT_FUSED(AVX512, 16, i8x, ENC_I8X, 0)
RT_FUSED(AVX512, 16, i4, ENC_I4, 0)
RT_FUSED(AVX512, 16, i4x, ENC_I4X, 0)
RT_FUSED(AVX512, 16, i3, ENC_I3, 0)
RT_FUSED(AVX512, 16, i2, ENC_I2, 0)
#define BLK_KERNELS(name, T) RT_FUSED(AVX512, blk16, name, T)
RT_BLOCK_TYPES(BLK_KERNELS)

static const rt_fused FUSED[] = {
    { LMQ_T_F32, 1, .k = RT_FUSED_KERNELS(f32, NULL) },
    { LMQ_T_F16, 1, .k = RT_FUSED_KERNELS(f16, NULL) },
    { LMQ_T_BF16, 1, .k = RT_FUSED_KERNELS(bf16, NULL) },
    { LMQ_T_F8_E4M3, 1, .k = RT_FUSED_KERNELS(f8e4, NULL) },
    { LMQ_T_F8_E5M2, 1, .k = RT_FUSED_KERNELS(f8e5, NULL) },
    { LMQ_T_INT8, 64, .k = RT_FUSED_KERNELS(i8x, permute64, .scaled = 1) },
    { LMQ_T_INT8, 1, .k = RT_FUSED_KERNELS(i8, NULL), .wide = RT_FUSED_KERNELS(i8w, NULL) },
    { LMQ_T_INT4, 128, .k = RT_FUSED_KERNELS(i4x, permute128) },
    { LMQ_T_INT4, 32, .k = RT_FUSED_KERNELS(i4, permute32) },
    { LMQ_T_INT3, 32, .k = RT_FUSED_KERNELS(i3, NULL) },
    { LMQ_T_INT2, 32, .k = RT_FUSED_KERNELS(i2, NULL) },
    RT_BLOCK_TYPES(RT_BLOCK_ROW)
};

/* The two sets differ in the integer products alone (W8A8, a8 block): VNNI's, or AVX2's. */
#define LINEAR_AVX512(dot4_kernel, a8b_kernel, a8b_rows)                                                         \
    { .fused = FUSED, .n_fused = sizeof FUSED / sizeof FUSED[0], .f32_span = span_avx512_f32,                    \
      .act_codes = act_codes_avx512, .dot4 = dot4_kernel, .a8b_dot = a8b_kernel, .a8b_pack = A8B_PACK,         \
      .a8b_row = a8b_rows }
static const struct rt_linear_kernels LINEAR = LINEAR_AVX512(rt_avx2_dot4, rt_avx2_a8b_dot, NULL),
                                      LINEAR_VNNI = LINEAR_AVX512(dot4_u8s8_vnni, a8b_dot_vnni, A8B_ROW);

const rt_kernels rt_kernels_avx512 = { .name = "avx512", .needs = RT_AVX512_NEEDS, RT_AVX2_FLOAT_KERNELS,
                                       .sum_words = sum_words_avx512, .linear = &LINEAR };
const rt_kernels rt_kernels_avx512vnni = { .name = "avx512vnni", .needs = RT_AVX512_NEEDS | LMQ_CPU_AVX512VNNI,
                                           RT_AVX2_FLOAT_KERNELS, .sum_words = sum_words_avx512,
                                           .linear = &LINEAR_VNNI };
#else /* not x86: sets no CPU here runs */
const rt_kernels rt_kernels_avx512 = { .name = "avx512", .needs = RT_AVX512_NEEDS };
const rt_kernels rt_kernels_avx512vnni = { .name = "avx512vnni", .needs = RT_AVX512_NEEDS | LMQ_CPU_AVX512VNNI };
#endif
