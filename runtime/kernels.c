#include "runtime/kernels.h"

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


rt_isa rt_isa_best(void)
{
    rt_isa best = RT_ISA_SCALAR;
#if HAVE_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && lmq_cpu_has_f16c())
        best = RT_ISA_AVX2;
    if (best == RT_ISA_AVX2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        best = RT_ISA_AVX512;
#endif
    const char *want = getenv("LMQ_ISA");
    for (rt_isa i = RT_ISA_SCALAR; want && i < best; i++)
        if (!strcmp(want, rt_isa_name(i)))
            best = i;
    return best;
}

const char *rt_isa_name(rt_isa isa)
{
    static const char *const names[] = { "scalar", "avx2", "avx512" };
    return names[isa];
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

static void wsum_rows_scalar(const float *w, int n, const float *x, size_t ldx, float scale, float *y, int d)
{
    for (int c = 0; c < d; c++) {
        float s = 0.0f;
        for (int j = 0; j < n; j++)
            s += w[j] * x[j * ldx + c];
        y[c] = s * scale;
    }
}

static float softmax_unnorm_scalar(float *x, int n, float scale)
{
    float mx = x[0], sum = 0.0f;
    for (int i = 1; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < n; i++) {
        x[i] = expf(scale * (x[i] - mx));
        sum += x[i];
    }
    return sum;
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

/* KL(P || Q) = x + log1p(R − x) with d_v = (lr_v − lq_v) − c for any constant c,
 * x = Σ p_v d_v and R = Σ p_v r(d_v), r(d) = e^(−d) − 1 + d >= 0. Taking c = Δ at P's argmax
 * keeps the d_v small for close models, R is a sum of non-negative terms (no cancellation),
 * and errors in x cancel to first order. Where |d| is large, p·e^(−d) is formed as
 * exp(a − d) with a = lr − max, which stays finite even where p underflows. */
#define KL_SMALL 0.25f

/* KL = x + log1p(R − x). R − x = Σ p e^(−d) − 1 >= p_argmax − 1 = 1/sumexp − 1 (d = 0 at the
 * argmax); holding it there keeps rounding in extreme rows (logit gaps ~1e3) from reaching
 * log1p(−1). */
static double kl_finish(double x, double R, double sumexp)
{
    double y = R - x;
    if (!(y >= 1.0 / sumexp - 1.0))
        y = 1.0 / sumexp - 1.0;
    const double kl = x + log1p(y);
    return kl > 0.0 ? kl : 0.0;
}

static double kl_row_scalar(const float *lr, const rt_rowstat *sr, const float *lq, int n)
{
    const float c = lr[sr->argmax] - lq[sr->argmax];
    double x = 0.0, R = 0.0;
    for (int i = 0; i < n; i++) {
        const double a = (double)lr[i] - sr->max, e = exp(a), d = (double)(lr[i] - lq[i]) - c;
        x += e * d;
        R += fabs(d) <= KL_SMALL ? e * (expm1(-d) + d) : exp(a - d) - e + e * d;
    }
    x /= sr->sumexp;
    return kl_finish(x, R / sr->sumexp, sr->sumexp);
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
#define MR 3
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
            tile3(x + (size_t)i * ldx, ldx, wr, k, out);
            for (int r = 0; r < MR; r++)
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
AVX2 static void wsum_rows_avx2(const float *w, int n, const float *x, size_t ldx, float scale, float *y, int d)
{
    int c = 0;
    for (; c + 16 <= d; c += 16)
        wsum_cols(2, w, n, x + c, ldx, scale, y + c, 1, _mm256_set1_epi32(-1));
    const float *xr = x + c;
    float *yr = y + c;
    MAP_AVX2(d - c, { wsum_cols(1, w, n, xr + i, ldx, scale, yr + i, full, m); });
}

AVX2 static float softmax_unnorm_avx2(float *x, int n, float scale)
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
AVX2 static void gelu_avx2(float *x, int n)
{
    MAP_AVX2(n, {
        __m256 v = ld8(x + i, full, m);
        __m256 v3 = _mm256_mul_ps(_mm256_mul_ps(v, v), v);
        __m256 u = _mm256_mul_ps(_mm256_set1_ps(GELU_C), _mm256_add_ps(v, _mm256_mul_ps(_mm256_set1_ps(0.044715f), v3)));
        __m256 e = exp_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f), u));
        st8(x + i, full, m, _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e)));
    });
}

AVX2 static void silu_mul_avx2(float *g, const float *u, int n)
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
AVX2 static int row_stats_avx2(const float *l, int n, rt_rowstat *st)
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
AVX2 static double kl_row_avx2(const float *lr, const rt_rowstat *sr, const float *lq, int n)
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
#endif /* HAVE_X86 */

/* ---------------------------------------------------------------- dispatch */
#if HAVE_X86
#define DISPATCH(isa, avx2_call, scalar_call) ((isa) >= RT_ISA_AVX2 ? (avx2_call) : (scalar_call))
#else
#define DISPATCH(isa, avx2_call, scalar_call) ((void)(isa), (scalar_call))
#endif

void rt_gemm_nt(rt_isa isa, const float *x, size_t ldx, const float *w, size_t ldw, const float *b, float *y,
                size_t ldy, int m, int cols, int k)
{
    DISPATCH(isa, gemm_nt_avx2(x, ldx, w, ldw, b, y, ldy, m, cols, k),
             gemm_nt_scalar(x, ldx, w, ldw, b, y, ldy, m, cols, k));
}

void rt_wsum_rows(rt_isa isa, const float *w, int n, const float *x, size_t ldx, float scale, float *y, int d)
{
    DISPATCH(isa, wsum_rows_avx2(w, n, x, ldx, scale, y, d), wsum_rows_scalar(w, n, x, ldx, scale, y, d));
}

float rt_softmax_unnorm(rt_isa isa, float *x, int n, float scale)
{
    return DISPATCH(isa, softmax_unnorm_avx2(x, n, scale), softmax_unnorm_scalar(x, n, scale));
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

