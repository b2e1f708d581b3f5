/* Statistics of per-position samples, with the definitions llama-perplexity --kl-divergence
 * prints (its README and tools/perplexity): a mean with its standard error, percentiles by
 * linear interpolation between order statistics, a covariance of two means.
 *
 * Every function reads its samples in index order in two passes (mean, then deviations), so a
 * result depends only on the values and their order, never on how they were computed. */
#ifndef LMQ_VF_SAMPLE_STATS_H
#define LMQ_VF_SAMPLE_STATS_H

#include <stdint.h>

/* A value and its standard error. */
typedef struct {
    double value, se;
} vf_est;

/* Mean of x[0..n) ± its standard error sqrt(Σ(x − mean)² / (n (n − 1))); se = 0 when n < 2.
 * n = 0 gives { 0, 0 }. */
vf_est vf_mean_se(const double *x, int64_t n);

/* Covariance of the means of x and y: Σ(x − x̄)(y − ȳ) / (n (n − 1)); 0 when n < 2. */
double vf_mean_cov(const double *x, const double *y, int64_t n);

/* Mean of a − b ± its standard error: the standard error of the difference of two correlated
 * means, sqrt(se_a² + se_b² − 2 cov(a, b)) (llama-perplexity's ln(PPL(Q)/PPL(base)) error when
 * a, b are the per-position NLLs), computed from the differences themselves so that it cannot
 * go negative under rounding. */
vf_est vf_mean_diff_se(const double *a, const double *b, int64_t n);

/* Root mean square of x ± its standard error by the delta method: se(mean x²) / (2 rms);
 * se = 0 when rms = 0. */
vf_est vf_rms_se(const double *x, int64_t n);

/* A fraction k/n ± the binomial standard error sqrt(p (1 − p) / (n − 1)); se = 0 when n < 2. */
vf_est vf_fraction_se(int64_t k, int64_t n);

/* The q-quantile (0 <= q <= 1) of sorted[0..n), n >= 1, by linear interpolation between the
 * order statistics at rank q (n − 1) (numpy's default "linear"; the median of an even count is
 * the mean of the middle two). */
double vf_percentile(const double *sorted, int64_t n, double q);

/* Sorts x[0..n) ascending in place. */
void vf_sort(double *x, int64_t n);

#endif
