#include "verify/sample_stats.h"

#include <math.h>
#include <stdlib.h>

static double mean_of(const double *x, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += x[i];
    return n ? s / (double)n : 0.0;
}

/* The samples the mean ± SE is of: a[i] − b[i] (b NULL: a[i]), or a[i]² when squares. */
static double sample(const double *a, const double *b, int squares, int64_t i)
{
    return squares ? a[i] * a[i] : a[i] - (b ? b[i] : 0.0);
}

static vf_est two_pass(const double *a, const double *b, int squares, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += sample(a, b, squares, i);
    vf_est e = { n ? s / (double)n : 0.0, 0.0 };
    if (n < 2)
        return e;
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double d = sample(a, b, squares, i) - e.value;
        ss += d * d;
    }
    e.se = sqrt(ss / ((double)n * (double)(n - 1)));
    return e;
}

vf_est vf_mean_se(const double *x, int64_t n)
{
    return two_pass(x, NULL, 0, n);
}

vf_est vf_mean_diff_se(const double *a, const double *b, int64_t n)
{
    return two_pass(a, b, 0, n);
}

double vf_mean_cov(const double *x, const double *y, int64_t n)
{
    if (n < 2)
        return 0.0;
    const double mx = mean_of(x, n), my = mean_of(y, n);
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += (x[i] - mx) * (y[i] - my);
    return s / ((double)n * (double)(n - 1));
}

vf_est vf_rms_se(const double *x, int64_t n)
{
    const vf_est ms = two_pass(x, NULL, 1, n);
    const double rms = sqrt(ms.value);
    return (vf_est){ rms, rms > 0 ? ms.se / (2.0 * rms) : 0.0 };
}

vf_est vf_fraction_se(int64_t k, int64_t n)
{
    if (n < 1)
        return (vf_est){ 0.0, 0.0 };
    const double p = (double)k / (double)n;
    return (vf_est){ p, n < 2 ? 0.0 : sqrt(p * (1.0 - p) / (double)(n - 1)) };
}

double vf_percentile(const double *sorted, int64_t n, double q)
{
    const double rank = q * (double)(n - 1);
    int64_t lo = (int64_t)rank;
    if (lo >= n - 1)
        return sorted[n - 1];
    return sorted[lo] + (rank - (double)lo) * (sorted[lo + 1] - sorted[lo]);
}

static int ascending(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void vf_sort(double *x, int64_t n)
{
    qsort(x, (size_t)n, sizeof *x, ascending);
}
