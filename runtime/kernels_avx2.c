/* The AVX2+FMA+F16C kernel set (runtime/kernels.h): 8 lanes a vector. */
#include "runtime/linear_impl.h"

#if LMQ_X86
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

/* Lanes i < n set (n may exceed 8). */
AVX2_INLINE __m256i tail_mask(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* exp in single precision (Cephes' expf polynomial, ~1 ulp); arguments clamped to
 * [-87.3, 88] so that the result is always a finite normal number. */
AVX2_INLINE __m256 exp_ps(__m256 x)
{
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* Whole vector or masked tail. */
AVX2_INLINE __m256 ld8(const float *p, int full, __m256i m)
{
    return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}

/* The four 8-lane sums of a0..a3, as one 4-vector, in a fixed order. */
AVX2_INLINE __m128 hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3)
{
    __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

AVX2_INLINE float hsum8(__m256 a)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}

AVX2_INLINE double hsum4d(__m256d a)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

/* One tile: rows of x against 4 rows of w (w[j] may repeat a row to pad a short tile), 8 lanes
 * per output over k, then hsum4. Every output sees the same operation order whatever the number
 * of rows, so a row's result does not depend on its neighbours. The accumulators are named
 * variables, not arrays, so that they stay in registers even in the -O1 sanitizer build.
 * ROWS(X) applies X to each row index; the tail (k % 8) goes through masked loads. */
#define TILE_DECL(r)                                                                                              \
    const float *x##r = x + (r) * ldx;                                                                            \
    __m256 a##r##0 = _mm256_setzero_ps(), a##r##1 = a##r##0, a##r##2 = a##r##0, a##r##3 = a##r##0, xv##r;
#define TILE_LOADX(r) xv##r = ld8(x##r + kk, full, m);
#define TILE_FMA0(r) a##r##0 = _mm256_fmadd_ps(xv##r, wv, a##r##0);
#define TILE_FMA1(r) a##r##1 = _mm256_fmadd_ps(xv##r, wv, a##r##1);
#define TILE_FMA2(r) a##r##2 = _mm256_fmadd_ps(xv##r, wv, a##r##2);
#define TILE_FMA3(r) a##r##3 = _mm256_fmadd_ps(xv##r, wv, a##r##3);
#define TILE_STEP(ROWS)                                                                                           \
    do {                                                                                                          \
        ROWS(TILE_LOADX)                                                                                          \
        __m256 wv = ld8(w[0] + kk, full, m);                                                                      \
        ROWS(TILE_FMA0)                                                                                           \
        wv = ld8(w[1] + kk, full, m);                                                                             \
        ROWS(TILE_FMA1)                                                                                           \
        wv = ld8(w[2] + kk, full, m);                                                                             \
        ROWS(TILE_FMA2)                                                                                           \
        wv = ld8(w[3] + kk, full, m);                                                                             \
        ROWS(TILE_FMA3)                                                                                           \
    } while (0)
#define TILE_OUT(r) out[r] = hsum4(a##r##0, a##r##1, a##r##2, a##r##3);
#define DEFINE_TILE(name, ROWS)                                                                                   \
    AVX2_INLINE void name(const float *x, size_t ldx, const float *const w[4], int k, __m128 *out)                \
    {                                                                                                             \
        ROWS(TILE_DECL)                                                                                           \
        int kk = 0;                                                                                               \
        for (; kk + 8 <= k; kk += 8) {                                                                            \
            const int full = 1;                                                                                   \
            const __m256i m = _mm256_setzero_si256();                                                             \
            TILE_STEP(ROWS);                                                                                      \
        }                                                                                                         \
        if (kk < k) {                                                                                             \
            const int full = 0;                                                                                   \
            const __m256i m = tail_mask(k - kk);                                                                  \
            TILE_STEP(ROWS);                                                                                      \
        }                                                                                                         \
        ROWS(TILE_OUT)                                                                                            \
    }
#define ROWS3(X) X(0) X(1) X(2)
#define ROWS1(X) X(0)
#define GEMM_MR 3
DEFINE_TILE(tile3, ROWS3)
DEFINE_TILE(tile1, ROWS1)

AVX2_INLINE void store_tile(__m128 v, const float *b, int j0, int nr, float *y)
{
    if (nr == 4) {
        if (b)
            v = _mm_add_ps(v, _mm_loadu_ps(b + j0));
        _mm_storeu_ps(y + j0, v);
        return;
    }
    float t[4];
    _mm_storeu_ps(t, v);
    for (int j = 0; j < nr; j++)
        y[j0 + j] = b ? t[j] + b[j0 + j] : t[j];
}

AVX2 void rt_avx2_gemm_nt(const float *x, size_t ldx, const float *w, size_t ldw, const float *b, float *y, size_t ldy,
                          int m, int cols, int k)
{
    for (int j0 = 0; j0 < cols; j0 += 4) {
        const int nr = cols - j0 < 4 ? cols - j0 : 4;
        const float *wr[4];
        for (int j = 0; j < 4; j++)
            wr[j] = w + (size_t)(j0 + (j < nr ? j : nr - 1)) * ldw;
        __m128 out[GEMM_MR];
        int i = 0;
        for (; i + GEMM_MR <= m; i += GEMM_MR) {
            tile3(x + (size_t)i * ldx, ldx, wr, k, out);
            for (int r = 0; r < GEMM_MR; r++)
                store_tile(out[r], b, j0, nr, y + (size_t)(i + r) * ldy);
        }
        for (; i < m; i++) {
            tile1(x + (size_t)i * ldx, ldx, wr, k, out);
            store_tile(out[0], b, j0, nr, y + (size_t)i * ldy);
        }
    }
}

/* Runs the body for every 8 elements: whole vectors first (full = 1), then the tail with masked
 * loads and stores (full = 0). Both go through the same arithmetic, so an element's result does
 * not depend on where it sits in the array. */
#define MAP_AVX2(n, ...)                                                                                          \
    do {                                                                                                          \
        int i = 0;                                                                                                \
        for (; i + 8 <= (n); i += 8) {                                                                            \
            const int full = 1;                                                                                   \
            const __m256i m = _mm256_set1_epi32(-1);                                                              \
            __VA_ARGS__                                                                                           \
        }                                                                                                         \
        if (i < (n)) {                                                                                            \
            const int full = 0;                                                                                   \
            const __m256i m = tail_mask((n) - i);                                                                 \
            __VA_ARGS__                                                                                           \
        }                                                                                                         \
    } while (0)

AVX2_INLINE void st8(float *p, int full, __m256i m, __m256 v)
{
    if (full)
        _mm256_storeu_ps(p, v);
    else
        _mm256_maskstore_ps(p, m, v);
}

/* v where the lane is live, else `dead`. */
AVX2_INLINE __m256 live(__m256 v, int full, __m256i m, __m256 dead)
{
    return full ? v : _mm256_blendv_ps(dead, v, _mm256_castsi256_ps(m));
}

AVX2_INLINE float hmax8(__m256 v)
{
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_max_ss(h, _mm_shuffle_ps(h, h, 1)));
}

/* acc += the 8 floats of v, widened to double. */
AVX2_INLINE void add_pd8(__m256d acc[2], __m256 v)
{
    acc[0] = _mm256_add_pd(acc[0], _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    acc[1] = _mm256_add_pd(acc[1], _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

/* y[c] = scale·Σ_j w[j]·x[j·ldx + c] for V·8 columns (the last vector live as full/m says); keys
 * j go round-robin into four accumulators (summed (a0 + a1) + (a2 + a3)) so the chain of
 * dependent FMAs is short. A lane's sum does not depend on V. */
AVX2_INLINE void wsum_cols(int V, const float *w, int n, const float *x, size_t ldx, float scale, float *y, int full,
                           __m256i m)
{
    __m256 a[4][2];
    RT_UNROLL for (int q = 0; q < 4; q++)
        RT_UNROLL for (int v = 0; v < V; v++)
            a[q][v] = _mm256_setzero_ps();
    const float *xc = x;
    int j = 0;
    for (; j + 4 <= n; j += 4, xc += 4 * ldx)
        RT_UNROLL for (int q = 0; q < 4; q++)
            RT_UNROLL for (int v = 0; v < V; v++)
                a[q][v] = _mm256_fmadd_ps(_mm256_set1_ps(w[j + q]), ld8(xc + q * ldx + 8 * v, v < V - 1 || full, m),
                                          a[q][v]);
    for (; j < n; j++, xc += ldx)
        RT_UNROLL for (int v = 0; v < V; v++)
            a[0][v] = _mm256_fmadd_ps(_mm256_set1_ps(w[j]), ld8(xc + 8 * v, v < V - 1 || full, m), a[0][v]);
    RT_UNROLL for (int v = 0; v < V; v++) {
        const __m256 sum = _mm256_add_ps(_mm256_add_ps(a[0][v], a[1][v]), _mm256_add_ps(a[2][v], a[3][v]));
        st8(y + 8 * v, v < V - 1 || full, m, _mm256_mul_ps(sum, _mm256_set1_ps(scale)));
    }
}

/* 16 columns a pass where there are (a row's whole cache line of a 64-float head: the rows are
 * read half as many times as 8 at a time), then 8. */
AVX2 void rt_avx2_wsum_rows(const float *w, int n, const float *x, size_t ldx, float scale, float *y, int d)
{
    int c = 0;
    for (; c + 16 <= d; c += 16)
        wsum_cols(2, w, n, x + c, ldx, scale, y + c, 1, _mm256_set1_epi32(-1));
    const float *xr = x + c;
    float *yr = y + c;
    MAP_AVX2(d - c, { wsum_cols(1, w, n, xr + i, ldx, scale, yr + i, full, m); });
}

/* GRAM_COLS columns a pass, their sums in four vectors over every token, then the scalar tail. */
AVX2 void rt_avx2_gram_row(double *g, const float *x, size_t ldx, int n, int i, int d)
{
    int c = i;
    for (; c + GRAM_COLS <= d; c += GRAM_COLS) {
        __m256d s[4];
        RT_UNROLL for (int v = 0; v < 4; v++)
            s[v] = _mm256_loadu_pd(g + c + 4 * v);
        for (int t = 0; t < n; t++) {
            const float *row = x + (size_t)t * ldx;
            const __m256d xi = _mm256_set1_pd((double)row[i]);
            RT_UNROLL for (int v = 0; v < 4; v++)
                s[v] = _mm256_add_pd(s[v], _mm256_mul_pd(xi, _mm256_cvtps_pd(_mm_loadu_ps(row + c + 4 * v))));
        }
        RT_UNROLL for (int v = 0; v < 4; v++)
            _mm256_storeu_pd(g + c + 4 * v, s[v]);
    }
    rt_gram_cols(g, x, ldx, n, i, c, d);
}

AVX2 float rt_avx2_softmax_unnorm(float *x, int n, float scale)
{
    __m256 mx = _mm256_set1_ps(-INFINITY);
    MAP_AVX2(n, { mx = _mm256_max_ps(mx, live(ld8(x + i, full, m), full, m, _mm256_set1_ps(-INFINITY))); });
    const __m256 vmax = _mm256_set1_ps(hmax8(mx)), vs = _mm256_set1_ps(scale);
    __m256 sum = _mm256_setzero_ps();
    MAP_AVX2(n, {
        __m256 e = exp_ps(_mm256_mul_ps(vs, _mm256_sub_ps(ld8(x + i, full, m), vmax)));
        e = live(e, full, m, _mm256_setzero_ps());
        st8(x + i, full, m, e);
        sum = _mm256_add_ps(sum, e);
    });
    return hsum8(sum);
}

/* gelu_tanh(x) = 0.5x(1 + tanh(u)) = x / (1 + exp(−2u)): no cancellation near u = 0. */
AVX2 void rt_avx2_gelu_tanh(float *x, int n)
{
    MAP_AVX2(n, {
        __m256 v = ld8(x + i, full, m);
        __m256 v3 = _mm256_mul_ps(_mm256_mul_ps(v, v), v);
        __m256 u = _mm256_mul_ps(_mm256_set1_ps(GELU_C), _mm256_add_ps(v, _mm256_mul_ps(_mm256_set1_ps(0.044715f), v3)));
        __m256 e = exp_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f), u));
        st8(x + i, full, m, _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e)));
    });
}

AVX2 void rt_avx2_silu_mul(float *g, const float *u, int n)
{
    MAP_AVX2(n, {
        __m256 v = ld8(g + i, full, m);
        __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), v));
        __m256 s = _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
        st8(g + i, full, m, _mm256_mul_ps(s, ld8(u + i, full, m)));
    });
}

/* Pass 1: finiteness and the maximum, in four independent lanes sets (32 elements a step) so
 * that no chain of dependent max operations limits the loop. Pass 2 (the row is still in L2):
 * the exponentials summed in double, and the first index that holds the maximum. */
AVX2 int rt_avx2_row_stats(const float *l, int n, rt_rowstat *st)
{
    const __m256 ninf = _mm256_set1_ps(-INFINITY), zero = _mm256_setzero_ps();
    __m256 m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf, bad = zero;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 v0 = _mm256_loadu_ps(l + i), v1 = _mm256_loadu_ps(l + i + 8);
        __m256 v2 = _mm256_loadu_ps(l + i + 16), v3 = _mm256_loadu_ps(l + i + 24);
        /* v − v is NaN exactly for inf and NaN */
        bad = _mm256_or_ps(bad, _mm256_or_ps(_mm256_or_ps(_mm256_sub_ps(v0, v0), _mm256_sub_ps(v1, v1)),
                                             _mm256_or_ps(_mm256_sub_ps(v2, v2), _mm256_sub_ps(v3, v3))));
        m0 = _mm256_max_ps(m0, v0);
        m1 = _mm256_max_ps(m1, v1);
        m2 = _mm256_max_ps(m2, v2);
        m3 = _mm256_max_ps(m3, v3);
    }
    for (; i < n; i += 8) {
        const __m256i m = tail_mask(n - i);
        __m256 v = _mm256_maskload_ps(l + i, m); /* dead lanes read 0 */
        bad = _mm256_or_ps(bad, _mm256_sub_ps(v, v));
        m0 = _mm256_max_ps(m0, _mm256_blendv_ps(ninf, v, _mm256_castsi256_ps(m)));
    }
    if (_mm256_movemask_ps(_mm256_cmp_ps(bad, bad, _CMP_UNORD_Q)))
        return -1;
    const float fmax = hmax8(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
    const __m256 vmax = _mm256_set1_ps(fmax);
    int arg = -1;
    __m256d s[2] = { _mm256_setzero_pd(), _mm256_setzero_pd() };
    MAP_AVX2(n, {
        const __m256 v = ld8(l + i, full, m);
        if (arg < 0) {
            int eq = _mm256_movemask_ps(live(_mm256_cmp_ps(v, vmax, _CMP_EQ_OQ), full, m, zero));
            if (eq)
                arg = i + __builtin_ctz((unsigned)eq);
        }
        add_pd8(s, live(exp_ps(_mm256_sub_ps(v, vmax)), full, m, zero));
    });
    *st = (rt_rowstat){ .max = fmax, .argmax = arg, .sumexp = hsum4d(_mm256_add_pd(s[0], s[1])) };
    return 0;
}

/* See kl_row_scalar. r(d) for |d| <= KL_SMALL from its series d²(1/2 − d/6 + d²/24 − ...),
 * relative error < 2e-8; the exp of the large-|d| branch is only computed when a lane needs it. */
AVX2 double rt_avx2_kl_row(const float *lr, const rt_rowstat *sr, const float *lq, int n)
{
    const __m256 vmax = _mm256_set1_ps(sr->max), zero = _mm256_setzero_ps();
    const __m256 c = _mm256_set1_ps(lr[sr->argmax] - lq[sr->argmax]), sign = _mm256_set1_ps(-0.0f);
    __m256d x[2] = { _mm256_setzero_pd(), _mm256_setzero_pd() }, R[2] = { x[0], x[0] };
    MAP_AVX2(n, {
        __m256 r = ld8(lr + i, full, m), a = _mm256_sub_ps(r, vmax);
        __m256 e = live(exp_ps(a), full, m, zero);
        __m256 d = live(_mm256_sub_ps(_mm256_sub_ps(r, ld8(lq + i, full, m)), c), full, m, zero);
        __m256 p = _mm256_set1_ps(-1.0f / 5040);
        p = _mm256_fmadd_ps(p, d, _mm256_set1_ps(1.0f / 720));
        p = _mm256_fmadd_ps(p, d, _mm256_set1_ps(-1.0f / 120));
        p = _mm256_fmadd_ps(p, d, _mm256_set1_ps(1.0f / 24));
        p = _mm256_fmadd_ps(p, d, _mm256_set1_ps(-1.0f / 6));
        p = _mm256_fmadd_ps(p, d, _mm256_set1_ps(0.5f));
        __m256 ed = _mm256_mul_ps(e, d), term = _mm256_mul_ps(_mm256_mul_ps(ed, d), p);
        __m256 big = _mm256_cmp_ps(_mm256_andnot_ps(sign, d), _mm256_set1_ps(KL_SMALL), _CMP_GT_OQ);
        if (_mm256_movemask_ps(big)) {
            __m256 t = _mm256_add_ps(_mm256_sub_ps(exp_ps(_mm256_sub_ps(a, d)), e), ed);
            term = _mm256_blendv_ps(term, t, big);
        }
        add_pd8(x, ed);
        add_pd8(R, term);
    });
    return kl_finish(hsum4d(_mm256_add_pd(x[0], x[1])) / sr->sumexp, hsum4d(_mm256_add_pd(R[0], R[1])) / sr->sumexp,
                     sr->sumexp);
}

AVX2 static uint64_t sum_words_avx2(const uint8_t *p, size_t n, int prefetch)
{
    __m256i a[4];
    for (int j = 0; j < 4; j++)
        a[j] = _mm256_setzero_si256();
    for (size_t i = 0; i < n; i += 256) {
        sum_ask_ahead(p + i, prefetch);
        for (int j = 0; j < 8; j++)
            a[j % 4] = _mm256_add_epi64(a[j % 4], _mm256_loadu_si256((const __m256i *)(p + i + 32 * j)));
    }
    uint64_t lanes[4], s = 0;
    _mm256_storeu_si256((__m256i *)lanes, _mm256_add_epi64(_mm256_add_epi64(a[0], a[1]), _mm256_add_epi64(a[2], a[3])));
    for (int j = 0; j < 4; j++)
        s += lanes[j];
    return s;
}

/* ---------------------------------------------------------------- linear layers */

/* Fused kernels: steps of 8 columns, in order, one 8-lane accumulator per output and the reduction
 * of rt_avx2_gemm_nt's tiles, so that a fused product is bit for bit the fp32 product over the
 * decoded rows (which prefill runs). */
typedef struct {
    rowptr r;
    __m256 s;
    __m256i z;
} wrow8;

AVX2_INLINE void row_group8(int enc, wrow8 *r, int64_t gi)
{
    if (enc_fp8(enc)) { /* an IEEE single scale, no zero code */
        float s;
        memcpy(&s, r->r.sc + 4 * gi, 4);
        r->s = _mm256_set1_ps(s);
        return;
    }
    uint16_t s;
    int z;
    group_of(&r->r, gi, enc_bits(enc), &s, &z);
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
        memcpy(part, p, (size_t)n * enc_bits(enc) / 8);
        p = part;
    }
    __m256 w;
    if (enc == ENC_F16) {
        w = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    } else if (enc == ENC_BF16) {
        w = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
    } else if (enc_fp8(enc)) { /* the codes' fp16 bits, NaN codes fp16's NaN (f8_form), times unit and scale */
        const f8_form *f = f8_form_of(enc);
        const __m128i c = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)p));
        const __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(c, _mm_set1_epi16(0x7F)), _mm_set1_epi16((short)f->finite));
        const __m128i h = _mm_and_si128(_mm_slli_epi16(c, f->shift), _mm_set1_epi16((short)f->keep));
        const __m128i hn = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16((short)0x8000)), _mm_set1_epi16(F8_NAN16));
        w = _mm256_cvtph_ps(_mm_blendv_epi8(h, hn, nan));
        if (f->unit != 1.0f)
            w = _mm256_mul_ps(w, _mm256_set1_ps(f->unit));
        w = _mm256_mul_ps(w, r->s);
        if (n < 8)
            w = _mm256_and_ps(w, _mm256_castsi256_ps(tail_mask(n)));
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
            w = _mm256_and_ps(w, _mm256_castsi256_ps(tail_mask(n)));
    }
    return w;
}

AVX2_INLINE void tile_step8(int enc, int MR, wrow8 r[4], const float *x, size_t ldx, int64_t k, int n, size_t ahead,
                            __m256 a[TILE_X][4])
{
    __m256 xv[TILE_X];
    RT_UNROLL for (int i = 0; i < MR; i++)
        xv[i] = n == 8 ? _mm256_loadu_ps(x + (size_t)i * ldx + k) : _mm256_maskload_ps(x + (size_t)i * ldx + k, tail_mask(n));
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
    const int64_t K = W->in, group = enc_grouped(enc) ? W->L.group : K;
    wrow8 r[4] = { 0 };
    RT_UNROLL for (int c = 0; c < 4; c++)
        row_ptr(enc, W, j[c], &r[c].r);
    const size_t ahead = prefetch_ahead(enc, W);
    __m256 a[TILE_X][4];
    RT_UNROLL for (int i = 0; i < MR; i++)
        RT_UNROLL for (int c = 0; c < 4; c++)
            a[i][c] = _mm256_setzero_ps();
    for (int64_t k = 0, group_end = 0, gi = 0; k < K; k += 8) {
        if (enc_grouped(enc) && k == group_end) {
            RT_UNROLL for (int c = 0; c < 4; c++)
                row_group8(enc, &r[c], gi);
            group_end += group, gi++;
        }
        if (k + 8 <= K)
            tile_step8(enc, MR, r, x, ldx, k, 8, ahead, a);
        else
            tile_step8(enc, MR, r, x, ldx, k, (int)(K - k), ahead, a);
    }
    RT_UNROLL for (int i = 0; i < MR; i++) /* rt_avx2_gemm_nt's reduction: the four sums in one order */
        _mm_storeu_ps(out[i], hsum4(a[i][0], a[i][1], a[i][2], a[i][3]));
}

AVX2_INLINE void row8(int enc, const rt_weight *W, int j, float *o)
{
    const int64_t K = W->in, group = enc_grouped(enc) ? W->L.group : K;
    wrow8 r = { 0 };
    row_ptr(enc, W, j, &r.r);
    for (int64_t k = 0, group_end = 0, gi = 0; k < K; k += 8) {
        const int n = K - k >= 8 ? 8 : (int)(K - k);
        if (enc_grouped(enc) && k == group_end)
            row_group8(enc, &r, gi++), group_end += group;
        const __m256 w = row_step8(enc, &r, k, n);
        if (n == 8)
            _mm256_storeu_ps(o + k, w);
        else
            _mm256_maskstore_ps(o + k, tail_mask(n), w);
    }
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

AVX2 void rt_avx2_dot4(const uint8_t *const c[4], const int8_t *q, size_t ldq, int mr, size_t in, size_t ahead,
                       int32_t out[TILE_X][4])
{
    for (int i = 0; i < mr; i++)
        dot4_avx2_row(c, q + (size_t)i * ldq, in, ahead, out[i]);
}

/* a8b_dot_scalar on AVX2, 8 rows of W a pass: the codes back to signed (u ^ 0x80), the products of
 * |w| with x carrying w's sign (vpmaddubsw, exact: 2·128·127 fits int16) added in pairs, then in
 * int32 (vpmaddwd with ones) into each row's sub-block sum; the same fp32 steps as the scalar
 * set's. SUB (codes a sub-block) and MIN (wm given) are constants where it is inlined. */
AVX2_INLINE void a8b_avx2_half(int MR, int SUB, int MIN, const uint8_t *wq, const float *wd, const float *wm, int nb,
                               const int8_t *qx, size_t ldq, const float *dx, const int32_t *cx, size_t lds,
                               float out[A8B_MR][A8B_ROWS])
{
    const __m256i flip = _mm256_set1_epi8((char)0x80), ones = _mm256_set1_epi16(1);
    __m256 acc[A8B_MR];
    RT_UNROLL for (int i = 0; i < MR; i++)
        acc[i] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m256i s[A8B_MR];
        RT_UNROLL for (int i = 0; i < MR; i++)
            s[i] = _mm256_setzero_si256();
        RT_UNROLL for (int v = 0; v < SUB / 4; v++) {
            const __m256i w =
                _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wq + (size_t)b * A8B_ROWS * SUB + 64 * v)), flip);
            const __m256i aw = _mm256_abs_epi8(w);
            RT_UNROLL for (int i = 0; i < MR; i++) {
                int32_t q4;
                memcpy(&q4, qx + (size_t)i * ldq + (size_t)b * SUB + 4 * v, 4);
                const __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(_mm256_set1_epi32(q4), w));
                s[i] = _mm256_add_epi32(s[i], _mm256_madd_epi16(p, ones));
            }
        }
        const __m256 dw = _mm256_loadu_ps(wd + (size_t)b * A8B_ROWS);
        RT_UNROLL for (int i = 0; i < MR; i++) {
            const __m256 d = _mm256_set1_ps(dx[(size_t)i * lds + b]);
            acc[i] = _mm256_add_ps(acc[i], _mm256_mul_ps(_mm256_cvtepi32_ps(s[i]), _mm256_mul_ps(d, dw)));
            if (MIN) {
                const __m256 pm = _mm256_mul_ps(d, _mm256_loadu_ps(wm + (size_t)b * A8B_ROWS));
                const __m256 sq = _mm256_set1_ps((float)(cx[(size_t)i * lds + b] / 128));
                acc[i] = _mm256_add_ps(acc[i], _mm256_mul_ps(sq, pm));
            }
        }
    }
    RT_UNROLL for (int i = 0; i < MR; i++)
        _mm256_storeu_ps(out[i], acc[i]);
}

_Static_assert(A8B_MR == 4 && A8B_ROWS == 16, "rt_avx2_a8b_dot: 1 to 4 rows of x, two passes of 8 rows of W");
AVX2 void rt_avx2_a8b_dot(const uint8_t *wq, const float *wd, const float *wm, int nb, int sub, const int8_t *qx,
                          size_t ldq, const float *dx, const int32_t *cx, size_t lds, int mr,
                          float out[A8B_MR][A8B_ROWS])
{
    float hi[A8B_MR][A8B_ROWS];
    for (int h = 0; h < 2; h++) {
        float (*o)[A8B_ROWS] = h ? hi : out;
        const uint8_t *q = wq + 32 * h;
        const float *d = wd + 8 * h, *m = wm ? wm + 8 * h : NULL;
        A8B_SPECIALISED(a8b_avx2_half, sub, m != NULL, mr, q, d, m, nb, qx, ldq, dx, cx, lds, o);
    }
    for (int i = 0; i < mr; i++)
        memcpy(out[i] + 8, hi[i], 8 * sizeof(float));
}

/* ---- the a8 block packing (a8b_pack_fn) */

/* The 8 × 8 dwords of r[0..7] transposed in place: dword l of r[k] becomes r[l]'s dword k. */
AVX2_INLINE void transpose8(__m256i r[8])
{
    __m256i t[8], u[8];
    RT_UNROLL for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    RT_UNROLL for (int i = 0; i < 8; i += 4) { /* u[i + k]: dword k (lane 1: k + 4) of rows i..i + 3 */
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]), u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]), u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    RT_UNROLL for (int k = 0; k < 4; k++) {
        r[k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x20);
        r[4 + k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x31);
    }
}

/* IQ4_NL's code book in each 128-bit lane, for vpshufb. */
AVX2_INLINE __m256i iq4_book8(void)
{
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)q_iq4nl_values));
}

/* Row j's 32-block b (kind: A8B_B32's) as u = qw + 128, codes in order, and its scale (and min)
 * into d and m, as rt_a8b_readings give them. A fifth bit k is bit k % 8 of the word's byte k / 8. */
AVX2_INLINE __m256i b32_units(int kind, const rt_weight *W, int j, int b, float *d, float *m)
{
    const a8b_block32 *f = &A8B_B32[kind];
    const int lmq = kind == LMQ_T_INT4 || kind == LMQ_T_INT8;
    const size_t codes = f->nibbles ? A8B_BLOCK / 2 : A8B_BLOCK, step = codes + f->head;
    const size_t at = (size_t)j * (size_t)(W->in / A8B_BLOCK) + (size_t)b;
    const uint8_t *blk = W->data + (lmq ? W->L.code_offset : 0) + at * step, *c = blk + f->head;
    __m256i x;
    if (f->nibbles) {
        const __m128i q = _mm_loadu_si128((const __m128i *)c), nib = _mm_set1_epi8(0x0F);
        const __m128i lo = _mm_and_si128(q, nib), hi = _mm_and_si128(_mm_srli_epi16(q, 4), nib);
        x = lmq ? _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi)) : _mm256_set_m128i(hi, lo);
    } else {
        x = _mm256_loadu_si256((const __m256i *)c);
    }
    if (f->book)
        x = _mm256_shuffle_epi8(iq4_book8(), x);
    if (f->qh) {
        const __m256i bits = _mm256_set1_epi64x(0x8040201008040201);
        const __m256i pick = _mm256_setr_epi64x(0, BYTES8(1), BYTES8(2), BYTES8(3));
        const __m256i by = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)lmq_le32(blk + f->qh)), pick), bits);
        x = _mm256_add_epi8(x, _mm256_and_si256(_mm256_cmpeq_epi8(by, bits), _mm256_set1_epi8(16)));
    }
    d[0] = _cvtsh_ss(lmq_le16(lmq ? a8b_group_scale(W, j, b) : blk));
    if (f->mins)
        m[0] = _cvtsh_ss(lmq_le16(blk + 2));
    return _mm256_add_epi8(x, _mm256_set1_epi8(f->off));
}

/* Bit `from` of each byte of h as bit `to` (the rest 0). */
AVX2_INLINE __m256i bit_as(__m256i h, int from, int to)
{
    const __m256i b = to > from ? _mm256_slli_epi16(h, to - from) : to < from ? _mm256_srli_epi16(h, from - to) : h;
    return _mm256_and_si256(b, _mm256_set1_epi8((char)(1 << to)));
}

/* Row j's 256-block bb (kind) as u = qw + 128, codes in order, and its sub-blocks' scales and mins,
 * as rt_a8b_readings give them (ggml-common.h's layouts, as the AVX-512 set's k_units reads them):
 * Q4_K / Q5_K's qs bytes at 32c the low nibbles of codes 64c.. and the high of 64c + 32.. (Q5_K:
 * sub-block t's fifth bits bit t of qh's bytes); Q6_K's half n the 64 bytes of ql (low nibbles
 * codes 128n.., high 128n + 64..) under bits 2c of qh's 32 at 32n for quarter c; Q2_K / Q3_K's half
 * n quarter c bits 2c, 2c + 1 of qs's 32 bytes at 32n (Q3_K: 4 × bit 4n + c of hmask's 32 above,
 * less 4); IQ4_XS's sub-block t the 16 bytes at 16t (low nibbles first) through the book. */
AVX2_INLINE void k_units_avx2(int kind, const rt_weight *W, int j, int bb, uint8_t *u, float *d, float *m)
{
    const size_t bytes = lmq_encoding_of((unsigned)kind)->block_bytes;
    const uint8_t *p = W->data + ((size_t)j * (size_t)(W->in / 256) + (size_t)bb) * bytes;
    const __m256i nib = _mm256_set1_epi8(0x0F);
    if (kind == LMQ_T_Q2_K || kind == LMQ_T_Q3_K) {
        const int q3 = kind == LMQ_T_Q3_K;
        const __m256i three = _mm256_set1_epi8(3), hm = _mm256_loadu_si256((const __m256i *)p);
        const __m256i off = _mm256_set1_epi8((char)(q3 ? 128 - 4 : 128));
        for (int n = 0; n < 2; n++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(p + (q3 ? 32 : 16) + 32 * n));
            RT_UNROLL for (int c = 0; c < 4; c++) {
                __m256i x = _mm256_and_si256(_mm256_srli_epi16(q, 2 * c), three);
                if (q3)
                    x = _mm256_or_si256(x, bit_as(hm, 4 * n + c, 2));
                _mm256_store_si256((__m256i *)(u + 128 * n + 32 * c), _mm256_add_epi8(x, off));
            }
        }
        if (q3) {
            const float dd = _cvtsh_ss(lmq_le16(p + 108));
            for (int t = 0; t < 16; t++)
                d[t] = dd * (float)(blk_q3_scale(p + 96, t) - 32);
        } else {
            const float dd = _cvtsh_ss(lmq_le16(p + 80)), dmin = _cvtsh_ss(lmq_le16(p + 82));
            for (int t = 0; t < 16; t++) {
                d[t] = dd * (float)(p[t] & 0xF);
                m[t] = -(dmin * (float)(p[t] >> 4));
            }
        }
        return;
    }
    if (kind == LMQ_T_IQ4_XS) {
        const __m256i book = iq4_book8();
        const float dd = _cvtsh_ss(lmq_le16(p));
        for (int t = 0; t < 8; t++) {
            const __m128i q = _mm_loadu_si128((const __m128i *)(p + 8 + 16 * t));
            const __m256i x = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), nib);
            _mm256_store_si256((__m256i *)(u + 32 * t),
                               _mm256_add_epi8(_mm256_shuffle_epi8(book, x), _mm256_set1_epi8((char)128)));
            d[t] = dd * (float)(blk_xs_scale(p, t) - 32);
        }
        return;
    }
    if (kind == LMQ_T_Q6_K) {
        const __m256i two = _mm256_set1_epi8(0x30), off = _mm256_set1_epi8(128 - 32);
        for (int n = 0; n < 2; n++) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(p + 64 * n));
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(p + 64 * n + 32));
            const __m256i h = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * n));
            const __m256i q[4] = { _mm256_or_si256(_mm256_and_si256(l0, nib), _mm256_and_si256(_mm256_slli_epi16(h, 4), two)),
                                   _mm256_or_si256(_mm256_and_si256(l1, nib), _mm256_and_si256(_mm256_slli_epi16(h, 2), two)),
                                   _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), nib), _mm256_and_si256(h, two)),
                                   _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), nib),
                                                   _mm256_and_si256(_mm256_srli_epi16(h, 2), two)) };
            RT_UNROLL for (int c = 0; c < 4; c++)
                _mm256_store_si256((__m256i *)(u + 128 * n + 32 * c), _mm256_add_epi8(q[c], off));
        }
        const float dd = _cvtsh_ss(lmq_le16(p + 208));
        for (int t = 0; t < 16; t++)
            d[t] = dd * (float)(int8_t)p[192 + t];
        return;
    }
    const uint8_t *qs = p + (kind == LMQ_T_Q5_K ? 48 : 16);
    const __m256i h = kind == LMQ_T_Q5_K ? _mm256_loadu_si256((const __m256i *)(p + 16)) : _mm256_setzero_si256();
    const __m256i off = _mm256_set1_epi8((char)128);
    RT_UNROLL for (int c = 0; c < 4; c++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
        __m256i lo = _mm256_and_si256(q, nib), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), nib);
        if (kind == LMQ_T_Q5_K) {
            lo = _mm256_or_si256(lo, bit_as(h, 2 * c, 4));
            hi = _mm256_or_si256(hi, bit_as(h, 2 * c + 1, 4));
        }
        _mm256_store_si256((__m256i *)(u + 64 * c), _mm256_add_epi8(lo, off));
        _mm256_store_si256((__m256i *)(u + 64 * c + 32), _mm256_add_epi8(hi, off));
    }
    const float dd = _cvtsh_ss(lmq_le16(p)), dmin = _cvtsh_ss(lmq_le16(p + 2));
    for (int t = 0; t < 8; t++) {
        int sc, mn;
        blk_k4_scale(p + 4, t, &sc, &mn);
        d[t] = dd * (float)sc;
        m[t] = -(dmin * (float)mn);
    }
}

/* The driver's a8 block packing on AVX2, a weight block of 8 rows at a time: each row's codes as
 * u = qw + 128 into an L1 buffer (b32_units, k_units_avx2), then
 * 8 rows' 32 codes at a time transposed into the dwords a8b_dot_fn's vectors hold (rows 8h.. in
 * the second 32 bytes of each for half h), scales and mins beside them. */
AVX2_INLINE void a8b_pack_avx2(int kind, unsigned sub, const rt_weight *W, const int j[A8B_ROWS], uint8_t *wq,
                               float *wd, float *wm)
{
    const a8b_reading *r = &rt_a8b_readings[kind];
    const int per = r->block / (int)sub, b32 = r->block == A8B_BLOCK;
    _Alignas(32) uint8_t u[8][BLK_MAX];
    float d[8][BLK_MAX / 16], m[8][BLK_MAX / 16];
    const int nbb = W->in / r->block, lmq = kind == LMQ_T_INT4 || kind == LMQ_T_INT8;
    const size_t row_bytes = lmq ? (size_t)W->in / (kind == LMQ_T_INT4 ? 2 : 1)
                                 : (size_t)nbb * lmq_encoding_of((unsigned)kind)->block_bytes;
    const size_t chunk = row_bytes / (size_t)nbb * A8B_ROWS; /* of the next tile's rows, a block */
    const uint8_t *next = W->data + (lmq ? W->L.code_offset : 0) + (size_t)(j[0] + A8B_ROWS) * row_bytes;
    for (int bb = 0; bb < nbb; bb++) {
        /* the next tile's rows, spread over this tile's blocks (see the AVX-512 set's packing) */
        for (size_t c = 0; c < chunk; c += 64)
            __builtin_prefetch(next + (size_t)bb * chunk + c, 0, 3);
        for (int h = 0; h < 2; h++) {
            for (int l = 0; l < 8; l++) {
                if (b32)
                    _mm256_store_si256((__m256i *)u[l], b32_units(kind, W, j[8 * h + l], bb, d[l], m[l]));
                else
                    k_units_avx2(kind, W, j[8 * h + l], bb, u[l], d[l], m[l]);
            }
            for (int t = 0; t < per; t++)
                for (int l = 0; l < 8; l++) {
                    const size_t o = ((size_t)bb * (size_t)per + (size_t)t) * A8B_ROWS + 8 * (size_t)h + (size_t)l;
                    wd[o] = d[l][t];
                    if (r->mins)
                        wm[o] = m[l][t];
                }
            for (int g = 0; g < r->block / 32; g++) {
                __m256i x[8];
                RT_UNROLL for (int l = 0; l < 8; l++)
                    x[l] = _mm256_load_si256((const __m256i *)(u[l] + 32 * g));
                transpose8(x);
                RT_UNROLL for (int k = 0; k < 8; k++) {
                    const unsigned c = 32 * (unsigned)g + 4 * (unsigned)k; /* codes c..: sub-block c / sub, vector c % sub / 4 */
                    uint8_t *o = wq + ((size_t)bb * (size_t)per + c / sub) * A8B_ROWS * sub;
                    _mm256_storeu_si256((__m256i *)(o + 64 * (c % sub / 4) + 32 * h), x[k]);
                }
            }
        }
    }
}

#define A8B_PACK_AVX2(T)                                                                                       \
    AVX2 static void a8b_pack_##T(const rt_weight *W, const int j[A8B_ROWS], uint8_t *wq, float *wd, float *wm) \
    {                                                                                                          \
        if (rt_a8b_readings[LMQ_T_##T].sub == 16) /* the sub-block a constant */                              \
            a8b_pack_avx2(LMQ_T_##T, 16, W, j, wq, wd, wm);                                                    \
        else                                                                                                   \
            a8b_pack_avx2(LMQ_T_##T, 32, W, j, wq, wd, wm);                                                    \
    }
A8B_B32_TYPES(A8B_PACK_AVX2)
A8B_K_TYPES(A8B_PACK_AVX2)
#define A8B_PACK_ENTRY(T) [LMQ_T_##T] = a8b_pack_##T,
static const a8b_pack_fn A8B_PACK[LMQ_T_COUNT] = { A8B_B32_TYPES(A8B_PACK_ENTRY) A8B_K_TYPES(A8B_PACK_ENTRY) };

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

/* ---- GGUF blocks (runtime/linear_impl.h): decoders 8 weights a vector, each weight computed as
 * schemes/gguf_blocks.c computes it (products of a scale and a small integer are exact in fp32,
 * so where the reference multiplies and then adds, one FMA gives the same bits). */
AVX2_INLINE float half8(const uint8_t *p)
{
    return _cvtsh_ss(lmq_le16(p));
}

/* 8 bytes from p widened to int32 lanes. */
AVX2_INLINE __m256i u8x8(const uint8_t *p)
{
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

AVX2_INLINE __m256i srl8(__m256i v, int n)
{
    return _mm256_srl_epi32(v, _mm_cvtsi32_si128(n));
}

/* Codes 8t .. 8t + 7 of a 32-weight block's nibbles qs (weight l < 16: the low nibble of qs[l], l >= 16
 * the high one of qs[l − 16]), with bit l of qh (a u32) as a fifth bit where qh is given. */
AVX2_INLINE __m256i nib8(const uint8_t *qs, const uint8_t *qh, int t)
{
    const __m256i v = u8x8(qs + 8 * (t % 2));
    __m256i q = t < 2 ? _mm256_and_si256(v, _mm256_set1_epi32(15)) : _mm256_srli_epi32(v, 4);
    if (qh) {
        const __m256i bit = _mm256_srlv_epi32(_mm256_set1_epi32((int)lmq_le32(qh)),
                                              _mm256_add_epi32(_mm256_set1_epi32(8 * t), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
        q = _mm256_or_si256(q, _mm256_slli_epi32(_mm256_and_si256(bit, _mm256_set1_epi32(1)), 4));
    }
    return q;
}

/* Q4_0, Q5_0: (q − zero)·d; Q4_1, Q5_1: q·d + m. */
AVX2_INLINE void q45_8(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, int zero, int min, float *y)
{
    const __m256 d = _mm256_set1_ps(half8(b)), m = _mm256_set1_ps(min ? half8(b + 2) : 0.0f);
    RT_UNROLL for (int t = 0; t < 4; t++) {
        const __m256i q = nib8(qs, qh, t);
        _mm256_storeu_ps(y + 8 * t, min ? _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), d, m)
                                        : _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, _mm256_set1_epi32(zero))), d));
    }
}

AVX2 static void blk8_q4_0(const uint8_t *b, float *y)
{
    q45_8(b, NULL, b + 2, 8, 0, y);
}

AVX2 static void blk8_q4_1(const uint8_t *b, float *y)
{
    q45_8(b, NULL, b + 4, 0, 1, y);
}

AVX2 static void blk8_q5_0(const uint8_t *b, float *y)
{
    q45_8(b, b + 2, b + 6, 16, 0, y);
}

AVX2 static void blk8_q5_1(const uint8_t *b, float *y)
{
    q45_8(b, b + 4, b + 8, 0, 1, y);
}

AVX2 static void blk8_q8_0(const uint8_t *b, float *y)
{
    const __m256 d = _mm256_set1_ps(half8(b));
    RT_UNROLL for (int l = 0; l < 32; l += 8) {
        const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 2 + l)));
        _mm256_storeu_ps(y + l, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
    }
}

/* 32 IQ4 weights: the 16 bytes of nibbles at qs index the levels (vpshufb), times dl. */
AVX2_INLINE void iq4_8(const uint8_t *qs, float dl, float *y)
{
    const __m128i lv = _mm_loadu_si128((const __m128i *)q_iq4nl_values), m4 = _mm_set1_epi8(15);
    const __m128i v = _mm_loadu_si128((const __m128i *)qs);
    const __m128i lo = _mm_shuffle_epi8(lv, _mm_and_si128(v, m4)), hi = _mm_shuffle_epi8(lv, _mm_and_si128(_mm_srli_epi16(v, 4), m4));
    const __m256 d = _mm256_set1_ps(dl);
    _mm256_storeu_ps(y, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo))));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)))));
    _mm256_storeu_ps(y + 16, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi))));
    _mm256_storeu_ps(y + 24, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))));
}

AVX2 static void blk8_iq4_nl(const uint8_t *b, float *y)
{
    iq4_8(b + 2, half8(b), y);
}

AVX2 static void blk8_iq4_xs(const uint8_t *b, float *y)
{
    const float d = half8(b);
    for (int j = 0; j < 8; j++)
        iq4_8(b + 8 + 16 * j, d * (float)(blk_xs_scale(b, j) - 32), y + 32 * j);
}

/* Q4_K, Q5_K: chunk c of 64 weights is sub-blocks 2c (low nibbles of qs[32c ..]) and 2c + 1 (high
 * ones), weight l's fifth bit bit 2c + h of qh[l]; (d·sc)·q − dmin·m. */
AVX2_INLINE void k4_8(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, float *y)
{
    const float d = half8(b), dmin = half8(b + 2);
    for (int s = 0; s < 8; s++) {
        int sc, m;
        blk_k4_scale(b + 4, s, &sc, &m);
        const __m256 d1 = _mm256_set1_ps(d * (float)sc), m1 = _mm256_set1_ps(dmin * (float)m);
        const uint8_t *q4 = qs + 32 * (s / 2);
        RT_UNROLL for (int l = 0; l < 32; l += 8) {
            const __m256i v = u8x8(q4 + l);
            __m256i q = s % 2 ? _mm256_srli_epi32(v, 4) : _mm256_and_si256(v, _mm256_set1_epi32(15));
            if (qh)
                q = _mm256_or_si256(q, _mm256_slli_epi32(_mm256_and_si256(srl8(u8x8(qh + l), s), _mm256_set1_epi32(1)), 4));
            _mm256_storeu_ps(y + 32 * s + l, _mm256_fmsub_ps(_mm256_cvtepi32_ps(q), d1, m1));
        }
    }
}

AVX2 static void blk8_q4_k(const uint8_t *b, float *y)
{
    k4_8(b, NULL, b + 16, y);
}

AVX2 static void blk8_q5_k(const uint8_t *b, float *y)
{
    k4_8(b, b + 16, b + 48, y);
}

/* Q6_K: half n, part k, weight l: low bits from ql[64n + l + 32(k & 1)] (low nibble for k < 2), top
 * two bits 2k of qh[32n + l]; (d·sc)·(q − 32) with sub-block (l / 16 + 2k)'s int8 scale. */
AVX2 static void blk8_q6_k(const uint8_t *b, float *y)
{
    const float d = half8(b + 208);
    const int8_t *sc = (const int8_t *)(b + 192);
    for (int n = 0; n < 2; n++)
        for (int k = 0; k < 4; k++)
            RT_UNROLL for (int l = 0; l < 32; l += 8) {
                const __m256i lo = u8x8(b + 64 * n + l + 32 * (k & 1)), hi = u8x8(b + 128 + 32 * n + l);
                const __m256i nib = k < 2 ? _mm256_and_si256(lo, _mm256_set1_epi32(15)) : _mm256_srli_epi32(lo, 4);
                const __m256i top = _mm256_and_si256(srl8(hi, 2 * k), _mm256_set1_epi32(3));
                const __m256i q = _mm256_sub_epi32(_mm256_or_si256(nib, _mm256_slli_epi32(top, 4)), _mm256_set1_epi32(32));
                const float dl = d * (float)sc[8 * n + l / 16 + 2 * k];
                _mm256_storeu_ps(y + 128 * n + 32 * k + l, _mm256_mul_ps(_mm256_set1_ps(dl), _mm256_cvtepi32_ps(q)));
            }
}

/* Q2_K and Q3_K's 2-bit codes of weights 16j + l .. + 7 (l = 0, 8): bits 2((j % 8) / 2) of
 * qs[32(j / 8) + 16(j % 2) + l ..]. */
AVX2_INLINE __m256i code2_8(const uint8_t *qs, int j, int l)
{
    return _mm256_and_si256(srl8(u8x8(qs + 32 * (j / 8) + 16 * (j % 2) + l), 2 * (j % 8 / 2)), _mm256_set1_epi32(3));
}

AVX2 static void blk8_q2_k(const uint8_t *b, float *y)
{
    const float d = half8(b + 80), dmin = half8(b + 82);
    for (int j = 0; j < 16; j++) {
        const __m256 dl = _mm256_set1_ps(d * (float)(b[j] & 0xF)), ml = _mm256_set1_ps(dmin * (float)(b[j] >> 4));
        RT_UNROLL for (int l = 0; l < 16; l += 8)
            _mm256_storeu_ps(y + 16 * j + l, _mm256_fmsub_ps(_mm256_cvtepi32_ps(code2_8(b + 16, j, l)), dl, ml));
    }
}

/* Q3_K: weight i's third bit is bit i / 32 of hmask[i % 32]; without it the code is 4 lower. */
AVX2 static void blk8_q3_k(const uint8_t *b, float *y)
{
    const float d = half8(b + 108);
    for (int j = 0; j < 16; j++) {
        const __m256 dl = _mm256_set1_ps(d * (float)(blk_q3_scale(b + 96, j) - 32));
        RT_UNROLL for (int l = 0; l < 16; l += 8) {
            const __m256i h = _mm256_and_si256(srl8(u8x8(b + 16 * (j % 2) + l), j / 2), _mm256_set1_epi32(1));
            const __m256i q = _mm256_sub_epi32(code2_8(b + 32, j, l), _mm256_slli_epi32(_mm256_xor_si256(h, _mm256_set1_epi32(1)), 2));
            _mm256_storeu_ps(y + 16 * j + l, _mm256_mul_ps(dl, _mm256_cvtepi32_ps(q)));
        }
    }
}

const block_fn rt_avx2_blocks[LMQ_T_COUNT] = {
    [LMQ_T_Q8_0] = blk8_q8_0, [LMQ_T_Q4_0] = blk8_q4_0, [LMQ_T_Q4_1] = blk8_q4_1,   [LMQ_T_Q5_0] = blk8_q5_0,
    [LMQ_T_Q5_1] = blk8_q5_1, [LMQ_T_Q2_K] = blk8_q2_k, [LMQ_T_Q3_K] = blk8_q3_k,   [LMQ_T_Q4_K] = blk8_q4_k,
    [LMQ_T_Q5_K] = blk8_q5_k, [LMQ_T_Q6_K] = blk8_q6_k, [LMQ_T_IQ4_NL] = blk8_iq4_nl, [LMQ_T_IQ4_XS] = blk8_iq4_xs,
};

/* A tile over block rows: each block of the four rows decoded once, then rt_avx2_gemm_nt's
 * products over it (one 8-lane accumulator an output, hsum4). */
AVX2_INLINE void tileblk8(int dt, int MR, const rt_weight *W, const int j[4], const float *x, size_t ldx,
                          float out[TILE_X][4])
{
    const block_fn dec = rt_avx2_blocks[dt];
    blkrow r[4];
    RT_UNROLL for (int c = 0; c < 4; c++)
        blk_row(W, j[c], &r[c]);
    const int64_t nb = W->in / r[0].n;
    const size_t ahead = (size_t)W->ahead_tiles * 4 * (size_t)nb * r[0].bytes;
    _Alignas(32) float w[4][BLK_MAX];
    __m256 a[TILE_X][4];
    RT_UNROLL for (int i = 0; i < MR; i++)
        RT_UNROLL for (int c = 0; c < 4; c++)
            a[i][c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        blk_prefetch(&r[0], b, ahead);
        RT_UNROLL for (int c = 0; c < 4; c++)
            dec(r[c].p + (size_t)b * r[c].bytes, w[c]);
        const float *xb = x + b * r[0].n;
        for (int t = 0; t < r[0].n; t += 8) {
            __m256 xv[TILE_X];
            RT_UNROLL for (int i = 0; i < MR; i++)
                xv[i] = _mm256_loadu_ps(xb + (size_t)i * ldx + t);
            RT_UNROLL for (int c = 0; c < 4; c++) {
                const __m256 wv = _mm256_load_ps(w[c] + t);
                RT_UNROLL for (int i = 0; i < MR; i++)
                    a[i][c] = _mm256_fmadd_ps(xv[i], wv, a[i][c]);
            }
        }
    }
    RT_UNROLL for (int i = 0; i < MR; i++)
        _mm_storeu_ps(out[i], hsum4(a[i][0], a[i][1], a[i][2], a[i][3]));
}

AVX2_INLINE void rowblk8(int dt, const rt_weight *W, int j, float *o)
{
    blkrow r;
    blk_row(W, j, &r);
    for (int64_t b = 0; b < W->in / r.n; b++)
        rt_avx2_blocks[dt](r.p + (size_t)b * r.bytes, o + b * r.n);
}

RT_FUSED(AVX2, 8, f16, ENC_F16)
RT_FUSED(AVX2, 8, bf16, ENC_BF16)
RT_FUSED(AVX2, 8, f8e4, ENC_F8E4)
RT_FUSED(AVX2, 8, f8e5, ENC_F8E5)
RT_FUSED(AVX2, 8, i8, ENC_I8)
RT_FUSED(AVX2, 8, i4, ENC_I4)
#define BLK_KERNELS(name, T) RT_FUSED(AVX2, blk8, name, T)
RT_BLOCK_TYPES(BLK_KERNELS)

/* fp32 is rt_avx2_gemm_nt's own product. */
static const rt_fused FUSED[] = {
    { LMQ_T_F16, 1, .k = RT_FUSED_KERNELS(f16, NULL) },
    { LMQ_T_BF16, 1, .k = RT_FUSED_KERNELS(bf16, NULL) },
    { LMQ_T_F8_E4M3, 1, .k = RT_FUSED_KERNELS(f8e4, NULL) },
    { LMQ_T_F8_E5M2, 1, .k = RT_FUSED_KERNELS(f8e5, NULL) },
    { LMQ_T_INT8, 1, .k = RT_FUSED_KERNELS(i8, NULL) },
    { LMQ_T_INT4, 32, .k = RT_FUSED_KERNELS(i4, NULL) },
    RT_BLOCK_TYPES(RT_BLOCK_ROW)
};

static const struct rt_linear_kernels LINEAR = {
    .fused = FUSED, .n_fused = sizeof FUSED / sizeof FUSED[0], .act_codes = act_codes_avx2, .dot4 = rt_avx2_dot4, .a8b_dot = rt_avx2_a8b_dot,
    .a8b_pack = A8B_PACK
};

const rt_kernels rt_kernels_avx2 = {
    .name = "avx2", .needs = RT_AVX2_NEEDS, RT_AVX2_FLOAT_KERNELS, .sum_words = sum_words_avx2, .linear = &LINEAR
};
#else /* not x86: a set no CPU here runs */
const rt_kernels rt_kernels_avx2 = { .name = "avx2", .needs = RT_AVX2_NEEDS };
#endif
