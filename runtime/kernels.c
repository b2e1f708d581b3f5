#include "runtime/kernels.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

rt_isa rt_isa_best(void)
{
#if HAVE_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return RT_ISA_AVX2;
#endif
    return RT_ISA_SCALAR;
}

const char *rt_isa_name(rt_isa isa)
{
    return isa == RT_ISA_AVX2 ? "avx2+fma" : "scalar";
}

/* ---------------------------------------------------------------- scalar reference versions */

static void gemm_nt_scalar(const float *x, size_t ldx, const float *w, size_t ldw, const float *b, float *y,
                           size_t ldy, int m, int cols, int k)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < cols; j++) {
            float s = 0.0f;
            for (int kk = 0; kk < k; kk++)
                s += x[i * ldx + kk] * w[j * ldw + kk];
            y[i * ldy + j] = b ? s + b[j] : s;
        }
}

static void wsum_rows_scalar(const float *w, int n, const float *x, size_t ldx, float *y, int d)
{
    for (int c = 0; c < d; c++) {
        float s = 0.0f;
        for (int j = 0; j < n; j++)
            s += w[j] * x[j * ldx + c];
        y[c] = s;
    }
}

static void softmax_scalar(float *x, int n)
{
    float mx = x[0], sum = 0.0f;
    for (int i = 1; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    for (int i = 0; i < n; i++)
        x[i] /= sum;
}

static const float GELU_C = 0.7978845608028654f; /* sqrt(2/pi) */

static void gelu_scalar(float *x, int n)
{
    for (int i = 0; i < n; i++) {
        float v = x[i];
        x[i] = 0.5f * v * (1.0f + tanhf(GELU_C * (v + 0.044715f * v * v * v)));
    }
}

static void silu_mul_scalar(float *g, const float *u, int n)
{
    for (int i = 0; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static int row_stats_scalar(const float *l, int n, rt_rowstat *st)
{
    float mx = l[0];
    int arg = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(l[i]))
            return -1;
        if (l[i] > mx)
            mx = l[i], arg = i;
    }
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += exp((double)l[i] - mx);
    *st = (rt_rowstat){ .max = mx, .argmax = arg, .sumexp = s };
    return 0;
}

/* Below this |Δ'| the term p·expm1(−Δ') comes from expm1 of a small argument; above it from
 * exp(a − Δ') − exp(a), whose argument stays bounded even where p underflows. */
#define KL_SMALL 0.25

static double kl_row_scalar(const float *lr, const rt_rowstat *sr, const float *lq, int n)
{
    double mu = 0.0, s = 0.0;
    for (int i = 0; i < n; i++)
        mu += exp((double)lr[i] - sr->max) * ((double)lr[i] - lq[i]);
    mu /= sr->sumexp;
    for (int i = 0; i < n; i++) {
        double a = (double)lr[i] - sr->max, d = (double)lr[i] - lq[i] - mu;
        s += fabs(d) <= KL_SMALL ? exp(a) * expm1(-d) : exp(a - d) - exp(a);
    }
    double kl = log1p(s / sr->sumexp);
    return kl > 0.0 ? kl : 0.0;
}

/* ---------------------------------------------------------------- AVX2 + FMA versions */
#if HAVE_X86
#define AVX2 __attribute__((target("avx2,fma")))
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma")))

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

/* One tile: MR rows of x against 4 rows of w (w[j] may repeat a row to pad a short tile),
 * 8 lanes per output over k, then hsum4. Every output sees the same operation order whatever
 * MR is, so a row's result does not depend on its neighbours. */
#define MR 3
AVX2_INLINE void tile(const int mr, const float *x, size_t ldx, const float *const w[4], int k, __m128 out[MR])
{
    __m256 acc[MR][4];
#pragma GCC unroll 3
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            acc[r][j] = _mm256_setzero_ps();
    int kk = 0;
    for (; kk + 8 <= k; kk += 8) {
        __m256 xv[MR];
#pragma GCC unroll 3
        for (int r = 0; r < mr; r++)
            xv[r] = _mm256_loadu_ps(x + r * ldx + kk);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            __m256 wv = _mm256_loadu_ps(w[j] + kk);
#pragma GCC unroll 3
            for (int r = 0; r < mr; r++)
                acc[r][j] = _mm256_fmadd_ps(xv[r], wv, acc[r][j]);
        }
    }
    if (kk < k) {
        __m256i m = tail_mask(k - kk);
        __m256 xv[MR];
#pragma GCC unroll 3
        for (int r = 0; r < mr; r++)
            xv[r] = _mm256_maskload_ps(x + r * ldx + kk, m);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            __m256 wv = _mm256_maskload_ps(w[j] + kk, m);
#pragma GCC unroll 3
            for (int r = 0; r < mr; r++)
                acc[r][j] = _mm256_fmadd_ps(xv[r], wv, acc[r][j]);
        }
    }
#pragma GCC unroll 3
    for (int r = 0; r < mr; r++)
        out[r] = hsum4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
}

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

AVX2 static void gemm_nt_avx2(const float *x, size_t ldx, const float *w, size_t ldw, const float *b, float *y,
                              size_t ldy, int m, int cols, int k)
{
    for (int j0 = 0; j0 < cols; j0 += 4) {
        const int nr = cols - j0 < 4 ? cols - j0 : 4;
        const float *wr[4];
        for (int j = 0; j < 4; j++)
            wr[j] = w + (size_t)(j0 + (j < nr ? j : nr - 1)) * ldw;
        __m128 out[MR];
        int i = 0;
        for (; i + MR <= m; i += MR) {
            tile(MR, x + (size_t)i * ldx, ldx, wr, k, out);
            for (int r = 0; r < MR; r++)
                store_tile(out[r], b, j0, nr, y + (size_t)(i + r) * ldy);
        }
        for (; i < m; i++) {
            tile(1, x + (size_t)i * ldx, ldx, wr, k, out);
            store_tile(out[0], b, j0, nr, y + (size_t)i * ldy);
        }
    }
}

/* Runs the body for every 8 elements; the tail goes through the same arithmetic with masked
 * loads and stores, so an element's result does not depend on where it sits in the array. */
#define MAP_AVX2(n, ...)                                                                                          \
    for (int i = 0; i < (n); i += 8) {                                                                            \
        const int full = (n) - i >= 8;                                                                            \
        const __m256i m = tail_mask((n) - i);                                                                     \
        __VA_ARGS__                                                                                               \
    }

AVX2_INLINE __m256 ld8(const float *p, int full, __m256i m)
{
    return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}

AVX2_INLINE void st8(float *p, int full, __m256i m, __m256 v)
{
    if (full)
        _mm256_storeu_ps(p, v);
    else
        _mm256_maskstore_ps(p, m, v);
}

/* y[c] = Σ_j w[j]·x[j·ldx + c], 8 columns at a time; keys j go round-robin into four
 * accumulators (summed (a0 + a1) + (a2 + a3)) so the chain of dependent FMAs is short. */
AVX2 static void wsum_rows_avx2(const float *w, int n, const float *x, size_t ldx, float *y, int d)
{
    MAP_AVX2(d, {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        const float *xc = x + i;
        int j = 0;
        for (; j + 4 <= n; j += 4, xc += 4 * ldx) {
            a0 = _mm256_fmadd_ps(_mm256_set1_ps(w[j]), ld8(xc, full, m), a0);
            a1 = _mm256_fmadd_ps(_mm256_set1_ps(w[j + 1]), ld8(xc + ldx, full, m), a1);
            a2 = _mm256_fmadd_ps(_mm256_set1_ps(w[j + 2]), ld8(xc + 2 * ldx, full, m), a2);
            a3 = _mm256_fmadd_ps(_mm256_set1_ps(w[j + 3]), ld8(xc + 3 * ldx, full, m), a3);
        }
        for (; j < n; j++, xc += ldx)
            a0 = _mm256_fmadd_ps(_mm256_set1_ps(w[j]), ld8(xc, full, m), a0);
        st8(y + i, full, m, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    })
}

AVX2 static void softmax_avx2(float *x, int n)
{
    __m256 mx = _mm256_set1_ps(-INFINITY);
    MAP_AVX2(n, {
        __m256 v = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), ld8(x + i, full, m), _mm256_castsi256_ps(m));
        mx = _mm256_max_ps(mx, v);
    })
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    const __m256 vmax = _mm256_set1_ps(_mm_cvtss_f32(_mm_max_ss(h, _mm_shuffle_ps(h, h, 1))));
    __m256 sum = _mm256_setzero_ps();
    MAP_AVX2(n, {
        __m256 e = exp_ps(_mm256_sub_ps(ld8(x + i, full, m), vmax));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(m));
        st8(x + i, full, m, e);
        sum = _mm256_add_ps(sum, e);
    })
    const __m256 inv = _mm256_set1_ps(1.0f / hsum8(sum));
    MAP_AVX2(n, { st8(x + i, full, m, _mm256_mul_ps(ld8(x + i, full, m), inv)); })
}

/* gelu_tanh(x) = 0.5x(1 + tanh(u)) = x / (1 + exp(−2u)): no cancellation near u = 0. */
AVX2 static void gelu_avx2(float *x, int n)
{
    MAP_AVX2(n, {
        __m256 v = ld8(x + i, full, m);
        __m256 v3 = _mm256_mul_ps(_mm256_mul_ps(v, v), v);
        __m256 u = _mm256_mul_ps(_mm256_set1_ps(GELU_C), _mm256_add_ps(v, _mm256_mul_ps(_mm256_set1_ps(0.044715f), v3)));
        __m256 e = exp_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f), u));
        st8(x + i, full, m, _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e)));
    })
}

AVX2 static void silu_mul_avx2(float *g, const float *u, int n)
{
    MAP_AVX2(n, {
        __m256 v = ld8(g + i, full, m);
        __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), v));
        __m256 s = _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
        st8(g + i, full, m, _mm256_mul_ps(s, ld8(u + i, full, m)));
    })
}

AVX2 static int row_stats_avx2(const float *l, int n, rt_rowstat *st)
{
    __m256 mx = _mm256_set1_ps(-INFINITY), bad = _mm256_setzero_ps();
    MAP_AVX2(n, {
        __m256 v = _mm256_blendv_ps(_mm256_setzero_ps(), ld8(l + i, full, m), _mm256_castsi256_ps(m));
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_sub_ps(v, v), _mm256_setzero_ps(), _CMP_NEQ_UQ)); /* inf, NaN */
        mx = _mm256_max_ps(mx, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), v, _mm256_castsi256_ps(m)));
    })
    if (_mm256_movemask_ps(bad))
        return -1;
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    const float fmax = _mm_cvtss_f32(_mm_max_ss(h, _mm_shuffle_ps(h, h, 1)));
    const __m256 vmax = _mm256_set1_ps(fmax);
    int arg = -1;
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    MAP_AVX2(n, {
        __m256 v = ld8(l + i, full, m);
        int eq = _mm256_movemask_ps(_mm256_and_ps(_mm256_cmp_ps(v, vmax, _CMP_EQ_OQ), _mm256_castsi256_ps(m)));
        if (arg < 0 && eq)
            arg = i + __builtin_ctz((unsigned)eq);
        __m256 e = _mm256_and_ps(exp_ps(_mm256_sub_ps(v, vmax)), _mm256_castsi256_ps(m));
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    })
    *st = (rt_rowstat){ .max = fmax, .argmax = arg, .sumexp = hsum4d(_mm256_add_pd(s0, s1)) };
    return 0;
}

/* 1/k! for k = 11 down to 1: expm1(y) = y·Σ y^(k-1)/k!, exact to ~1e-16 relative for |y| <= 0.25. */
static const double EXPM1_C[11] = { 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040,
                                    1.0 / 720,      1.0 / 120,     1.0 / 24,     1.0 / 6,     1.0 / 2, 1.0 };

AVX2_INLINE __m256d expm1_small_pd(__m256d y)
{
    __m256d p = _mm256_set1_pd(EXPM1_C[0]);
    for (int c = 1; c < 11; c++)
        p = _mm256_fmadd_pd(p, y, _mm256_set1_pd(EXPM1_C[c]));
    return _mm256_mul_pd(p, y);
}

#define LO_PD(v) _mm256_cvtps_pd(_mm256_castps256_ps128(v))
#define HI_PD(v) _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))

AVX2 static double kl_row_avx2(const float *lr, const rt_rowstat *sr, const float *lq, int n)
{
    const __m256 vmax = _mm256_set1_ps(sr->max);
    __m256d m0 = _mm256_setzero_pd(), m1 = _mm256_setzero_pd();
    MAP_AVX2(n, {
        __m256 r = ld8(lr + i, full, m), q = ld8(lq + i, full, m);
        __m256 e = _mm256_and_ps(exp_ps(_mm256_sub_ps(r, vmax)), _mm256_castsi256_ps(m));
        m0 = _mm256_fmadd_pd(LO_PD(e), _mm256_sub_pd(LO_PD(r), LO_PD(q)), m0);
        m1 = _mm256_fmadd_pd(HI_PD(e), _mm256_sub_pd(HI_PD(r), HI_PD(q)), m1);
    })
    const __m256d mu = _mm256_set1_pd(hsum4d(_mm256_add_pd(m0, m1)) / sr->sumexp);
    const __m256d small = _mm256_set1_pd(KL_SMALL), sign = _mm256_set1_pd(-0.0);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    MAP_AVX2(n, {
        __m256 r = ld8(lr + i, full, m), q = ld8(lq + i, full, m);
        __m256 a = _mm256_sub_ps(r, vmax);
        __m256 e = _mm256_and_ps(exp_ps(a), _mm256_castsi256_ps(m));
        __m256d d0 = _mm256_sub_pd(_mm256_sub_pd(LO_PD(r), LO_PD(q)), mu);
        __m256d d1 = _mm256_sub_pd(_mm256_sub_pd(HI_PD(r), HI_PD(q)), mu);
        __m256 big = exp_ps(_mm256_set_m128(_mm256_cvtpd_ps(_mm256_sub_pd(HI_PD(a), d1)),
                                            _mm256_cvtpd_ps(_mm256_sub_pd(LO_PD(a), d0))));
        big = _mm256_and_ps(big, _mm256_castsi256_ps(m));
        __m256d t0 = _mm256_blendv_pd(_mm256_sub_pd(LO_PD(big), LO_PD(e)),
                                      _mm256_mul_pd(LO_PD(e), expm1_small_pd(_mm256_xor_pd(d0, sign))),
                                      _mm256_cmp_pd(_mm256_andnot_pd(sign, d0), small, _CMP_LE_OQ));
        __m256d t1 = _mm256_blendv_pd(_mm256_sub_pd(HI_PD(big), HI_PD(e)),
                                      _mm256_mul_pd(HI_PD(e), expm1_small_pd(_mm256_xor_pd(d1, sign))),
                                      _mm256_cmp_pd(_mm256_andnot_pd(sign, d1), small, _CMP_LE_OQ));
        s0 = _mm256_add_pd(s0, t0);
        s1 = _mm256_add_pd(s1, t1);
    })
    double kl = log1p(hsum4d(_mm256_add_pd(s0, s1)) / sr->sumexp);
    return kl > 0.0 ? kl : 0.0;
}
#endif /* HAVE_X86 */

/* ---------------------------------------------------------------- dispatch */
#if HAVE_X86
#define DISPATCH(isa, avx2_call, scalar_call) ((isa) == RT_ISA_AVX2 ? (avx2_call) : (scalar_call))
#else
#define DISPATCH(isa, avx2_call, scalar_call) ((void)(isa), (scalar_call))
#endif

void rt_gemm_nt(rt_isa isa, const float *x, size_t ldx, const float *w, size_t ldw, const float *b, float *y,
                size_t ldy, int m, int cols, int k)
{
    DISPATCH(isa, gemm_nt_avx2(x, ldx, w, ldw, b, y, ldy, m, cols, k),
             gemm_nt_scalar(x, ldx, w, ldw, b, y, ldy, m, cols, k));
}

void rt_wsum_rows(rt_isa isa, const float *w, int n, const float *x, size_t ldx, float *y, int d)
{
    DISPATCH(isa, wsum_rows_avx2(w, n, x, ldx, y, d), wsum_rows_scalar(w, n, x, ldx, y, d));
}

void rt_softmax(rt_isa isa, float *x, int n)
{
    DISPATCH(isa, softmax_avx2(x, n), softmax_scalar(x, n));
}

void rt_gelu_tanh(rt_isa isa, float *x, int n)
{
    DISPATCH(isa, gelu_avx2(x, n), gelu_scalar(x, n));
}

void rt_silu_mul(rt_isa isa, float *g, const float *u, int n)
{
    DISPATCH(isa, silu_mul_avx2(g, u, n), silu_mul_scalar(g, u, n));
}

int rt_row_stats(rt_isa isa, const float *l, int n, rt_rowstat *st)
{
    return DISPATCH(isa, row_stats_avx2(l, n, st), row_stats_scalar(l, n, st));
}

double rt_kl_row(rt_isa isa, const float *lr, const rt_rowstat *sr, const float *lq, int n)
{
    return DISPATCH(isa, kl_row_avx2(lr, sr, lq, n), kl_row_scalar(lr, sr, lq, n));
}

/* ---------------------------------------------------------------- the linear layer */

/* Task tiles: ROWS_PER_TASK rows of x (a multiple of the kernel's 3) against COLS_PER_TASK rows
 * of W. Tasks run W-block-major, so neighbouring tasks share a W block while x stays cached. */
#define ROWS_PER_TASK 96
#define COLS_PER_TASK 32

typedef struct {
    const rt_exec *ex;
    const float *x;
    const rt_weight *W;
    float *y;
    int n, row_blocks;
} linear_job;

static void linear_task(void *v, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const linear_job *j = v;
    const rt_weight *W = j->W;
    for (int64_t t = begin; t < end; t++) {
        int c0 = (int)(t / j->row_blocks) * COLS_PER_TASK, r0 = (int)(t % j->row_blocks) * ROWS_PER_TASK;
        int cols = W->out - c0 < COLS_PER_TASK ? W->out - c0 : COLS_PER_TASK;
        int rows = j->n - r0 < ROWS_PER_TASK ? j->n - r0 : ROWS_PER_TASK;
        rt_gemm_nt(j->ex->isa, j->x + (size_t)r0 * W->in, (size_t)W->in, W->w + (size_t)c0 * W->in, (size_t)W->in,
                   W->b ? W->b + c0 : NULL, j->y + (size_t)r0 * W->out + c0, (size_t)W->out, rows, cols, W->in);
    }
}

void rt_linear(const rt_exec *ex, const float *x, int n, const rt_weight *W, float *y)
{
    linear_job j = { .ex = ex, .x = x, .W = W, .y = y, .n = n,
                     .row_blocks = (n + ROWS_PER_TASK - 1) / ROWS_PER_TASK };
    int64_t tasks = (int64_t)j.row_blocks * ((W->out + COLS_PER_TASK - 1) / COLS_PER_TASK);
    /* Small products are not worth waking the workers for. */
    int64_t macs = (int64_t)n * W->out * W->in;
    rt_pool_for(macs < 32768 ? NULL : ex->pool, tasks, 1, linear_task, &j);
}
