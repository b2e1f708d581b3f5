/* What the kernel sets (runtime/kernels_*.c) share with each other and with the code that picks
 * and drives them (runtime/kernels.c, linear.c, probe.c); no interface for the rest of lmq. */
#ifndef LMQ_RT_KERNELS_IMPL_H
#define LMQ_RT_KERNELS_IMPL_H

#include <math.h>

#include "common/cpu.h"
#include "runtime/kernels.h"

/* Every set, each a superset of the one before (runtime/kernels.c takes them in this order). Off
 * x86 the others hold their name and needs alone, which no CPU there meets. */
extern const rt_kernels rt_kernels_avx2, rt_kernels_avx512, rt_kernels_avx512vnni;
#define RT_AVX2_NEEDS (LMQ_CPU_AVX2 | LMQ_CPU_FMA | LMQ_CPU_F16C)
#define RT_AVX512_NEEDS (RT_AVX2_NEEDS | LMQ_CPU_AVX512)

/* The AVX2 set's kernels that the AVX-512 sets take as they are (runtime/kernels_avx2.c). */
rt_gemm_nt_fn rt_avx2_gemm_nt;
rt_wsum_rows_fn rt_avx2_wsum_rows;
rt_softmax_unnorm_fn rt_avx2_softmax_unnorm;
rt_gelu_tanh_fn rt_avx2_gelu_tanh;
rt_silu_mul_fn rt_avx2_silu_mul;
rt_row_stats_fn rt_avx2_row_stats;
rt_kl_row_fn rt_avx2_kl_row;
rt_gram_row_fn rt_avx2_gram_row;
#define RT_AVX2_FLOAT_KERNELS                                                                                   \
    .gemm_nt = rt_avx2_gemm_nt, .wsum_rows = rt_avx2_wsum_rows, .softmax_unnorm = rt_avx2_softmax_unnorm,      \
    .gelu_tanh = rt_avx2_gelu_tanh, .silu_mul = rt_avx2_silu_mul, .row_stats = rt_avx2_row_stats,              \
    .kl_row = rt_avx2_kl_row, .gram_row = rt_avx2_gram_row

/* Unrolls the short loop after it (up to 4 trips) for the kernels of any set, so that arrays
 * of vector accumulators live in registers. */
#define RT_UNROLL _Pragma("GCC unroll 4")

static const float GELU_C = 0.7978845608028654f; /* sqrt(2/pi) */

/* KL(P || Q) = x + log1p(R − x) with d_v = (lr_v − lq_v) − c for any constant c,
 * x = Σ p_v d_v and R = Σ p_v r(d_v), r(d) = e^(−d) − 1 + d >= 0. Taking c = Δ at P's argmax
 * keeps the d_v small for close models, R is a sum of non-negative terms (no cancellation),
 * and errors in x cancel to first order. Where |d| is large, p·e^(−d) is formed as
 * exp(a − d) with a = lr − max, which stays finite even where p underflows. */
#define KL_SMALL 0.25f

/* KL = x + log1p(R − x). R − x = Σ p e^(−d) − 1 >= p_argmax − 1 = 1/sumexp − 1 (d = 0 at the
 * argmax); holding it there keeps rounding in extreme rows (logit gaps ~1e3) from reaching
 * log1p(−1). */
static inline double kl_finish(double x, double R, double sumexp)
{
    double y = R - x;
    if (!(y >= 1.0 / sumexp - 1.0))
        y = 1.0 / sumexp - 1.0;
    const double kl = x + log1p(y);
    return kl > 0.0 ? kl : 0.0;
}

/* gram_row (runtime/kernels.h) over columns [c0, c1), GRAM_COLS at a time, their sums kept apart
 * over every token: the scalar set's kernel and the vector sets' tail. */
#define GRAM_COLS 16
static inline void rt_gram_cols(double *g, const float *x, size_t ldx, int n, int i, int c0, int c1)
{
    for (int c = c0; c < c1; c += GRAM_COLS) {
        const int w = c1 - c < GRAM_COLS ? c1 - c : GRAM_COLS;
        double s[GRAM_COLS];
        for (int k = 0; k < w; k++)
            s[k] = g[c + k];
        for (int t = 0; t < n; t++) {
            const float *row = x + (size_t)t * ldx;
            const double xi = row[i];
            for (int k = 0; k < w; k++)
                s[k] += xi * (double)row[c + k];
        }
        for (int k = 0; k < w; k++)
            g[c + k] = s[k];
    }
}

/* The probe's reads (sum_words) ask for memory this far ahead when asked to, as the fused kernels
 * do (runtime/linear_impl.h): on a busy virtual machine they streamed 7-10 % more with 2 threads,
 * and less with one; the probe keeps the best of both. */
#define SUM_AHEAD 8192

/* One request per cache line of p[0..256), SUM_AHEAD bytes on. */
static inline void sum_ask_ahead(const uint8_t *p, int prefetch)
{
    for (int l = 0; prefetch && l < 4; l++)
        __builtin_prefetch(p + 64 * l + SUM_AHEAD, 0, 3);
}

#endif
