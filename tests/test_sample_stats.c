/* verify/sample_stats: mean ± standard error, covariance, the error of a difference of means,
 * RMS ± error, fractions and percentiles on small arrays worked out by hand, then on random
 * arrays against brute-force references written another way (one-pass sums in long double as
 * llama-perplexity accumulates them; order statistics found by counting, without sorting). */
#include <math.h>
#include <stdlib.h>

#include "tests/testutil.h"
#include "verify/sample_stats.h"

/* ---- by hand ------------------------------------------------------------------------------ */

START_TEST(mean_se_by_hand)
{
    /* {4,1,3,1,6}: mean 3, squared deviations 1+4+0+4+9 = 18, se = sqrt(18 / (5·4)). */
    const double x[] = { 4, 1, 3, 1, 6 };
    vf_est e = vf_mean_se(x, 5);
    ck_assert_double_eq_tol(e.value, 3.0, 1e-15);
    ck_assert_double_eq_tol(e.se, sqrt(0.9), 1e-15);
    e = vf_mean_se(x, 1); /* one sample: no spread to estimate */
    ck_assert(e.value == 4.0 && e.se == 0.0);
    e = vf_mean_se(x, 0);
    ck_assert(e.value == 0.0 && e.se == 0.0);
    const double c[] = { 2, 2, 2, 2 };
    e = vf_mean_se(c, 4);
    ck_assert(e.value == 2.0 && e.se == 0.0);
}
END_TEST

START_TEST(covariance_and_difference_by_hand)
{
    /* x = {1,2,3}, y = {2,4,7}: x̄ = 2, ȳ = 13/3, Σ(x−x̄)(y−ȳ) = 7/3 + 8/3 = 5, over n(n−1) = 6.
     * x − y = {−1,−2,−4}: mean −7/3, squared deviations 42/9, se² = (42/9)/6 = 7/9, which is
     * se_x² + se_y² − 2 cov = 1/3 + 19/9 − 5/3. */
    const double x[] = { 1, 2, 3 }, y[] = { 2, 4, 7 };
    ck_assert_double_eq_tol(vf_mean_cov(x, y, 3), 5.0 / 6.0, 1e-15);
    ck_assert_double_eq_tol(vf_mean_cov(x, x, 3), 1.0 / 3.0, 1e-15);
    vf_est d = vf_mean_diff_se(x, y, 3);
    ck_assert_double_eq_tol(d.value, -7.0 / 3.0, 1e-15);
    ck_assert_double_eq_tol(d.se, sqrt(7.0 / 9.0), 1e-15);
    const vf_est sx = vf_mean_se(x, 3), sy = vf_mean_se(y, 3);
    ck_assert_double_eq_tol(sx.se * sx.se + sy.se * sy.se - 2 * vf_mean_cov(x, y, 3), 7.0 / 9.0, 1e-14);
    d = vf_mean_diff_se(x, x, 3); /* a model against itself: exactly 0 ± 0, never NaN */
    ck_assert(d.value == 0.0 && d.se == 0.0);
    ck_assert(vf_mean_cov(x, y, 1) == 0.0);
}
END_TEST

START_TEST(rms_and_fraction_by_hand)
{
    /* {3,−4}: squares {9,16}, mean 12.5 ± sqrt((3.5² + 3.5²) / 2) = 3.5; rms = sqrt(12.5) and
     * its error 3.5 / (2 sqrt(12.5)). */
    const double x[] = { 3, -4 }, z[] = { 0, 0, 0 };
    vf_est r = vf_rms_se(x, 2);
    ck_assert_double_eq_tol(r.value, sqrt(12.5), 1e-15);
    ck_assert_double_eq_tol(r.se, 3.5 / (2 * sqrt(12.5)), 1e-15);
    r = vf_rms_se(z, 3);
    ck_assert(r.value == 0.0 && r.se == 0.0);
    vf_est f = vf_fraction_se(3, 4); /* sqrt(0.75 · 0.25 / 3) = 0.25 */
    ck_assert_double_eq_tol(f.value, 0.75, 1e-15);
    ck_assert_double_eq_tol(f.se, 0.25, 1e-15);
    f = vf_fraction_se(5, 5);
    ck_assert(f.value == 1.0 && f.se == 0.0);
    f = vf_fraction_se(0, 0);
    ck_assert(f.value == 0.0 && f.se == 0.0);
}
END_TEST

START_TEST(percentiles_by_hand)
{
    double x[] = { 4, 1, 3, 1, 6 };
    vf_sort(x, 5);
    ck_assert(x[0] == 1 && x[1] == 1 && x[2] == 3 && x[3] == 4 && x[4] == 6);
    /* rank q·(n−1): 0.5 → 2 (3); 0.25 → 1 (1); 0.9 → 3.6 (4 + 0.6·2); 0.999 → 3.996; 0 and 1 the ends. */
    ck_assert(vf_percentile(x, 5, 0.5) == 3.0);
    ck_assert(vf_percentile(x, 5, 0.25) == 1.0);
    ck_assert_double_eq_tol(vf_percentile(x, 5, 0.9), 5.2, 1e-14);
    ck_assert_double_eq_tol(vf_percentile(x, 5, 0.999), 5.992, 1e-14);
    ck_assert(vf_percentile(x, 5, 0.0) == 1.0 && vf_percentile(x, 5, 1.0) == 6.0);
    /* An even count's median is the mean of the middle two (rank 1.5 of {1,2,10,20}). */
    const double e[] = { 1, 2, 10, 20 };
    ck_assert(vf_percentile(e, 4, 0.5) == 6.0);
    ck_assert_double_eq_tol(vf_percentile(e, 4, 0.01), 1.03, 1e-14);
    const double one[] = { 7 };
    ck_assert(vf_percentile(one, 1, 0.0) == 7.0 && vf_percentile(one, 1, 0.999) == 7.0);
}
END_TEST

/* ---- brute force -------------------------------------------------------------------------- */

/* llama-perplexity's way: running Σx, Σx², Σxy, then (Σx²/n − mean²)/(n − 1), here in long double. */
typedef struct {
    long double s, s2;
} sums;

static sums sums_of(const double *x, int n)
{
    sums r = { 0, 0 };
    for (int i = 0; i < n; i++) {
        r.s += x[i];
        r.s2 += (long double)x[i] * x[i];
    }
    return r;
}

static double se_from(sums a, int n)
{
    const long double m = a.s / n;
    return (double)sqrtl((a.s2 / n - m * m) / (n - 1));
}

/* The order statistic of rank r (0-based) of x, found by counting what lies below each value. */
static double order_stat(const double *x, int n, int r)
{
    for (int j = 0; j < n; j++) {
        int below = 0, equal = 0;
        for (int i = 0; i < n; i++) {
            below += x[i] < x[j];
            equal += x[i] == x[j];
        }
        if (below <= r && r < below + equal)
            return x[j];
    }
    ck_abort_msg("no order statistic of rank %d", r);
    return 0;
}

START_TEST(against_brute_force)
{
    enum { N = 301 };
    uint64_t st = 12345;
    double a[N], b[N], sq[N], sorted[N];
    for (int i = 0; i < N; i++) {
        a[i] = 2.0 + test_gauss(&st);
        b[i] = 0.7 * a[i] + 0.3 * test_gauss(&st) + (i % 7 == 0 ? 5.0 : 0.0); /* correlated, skewed */
        sq[i] = b[i] * b[i];
        sorted[i] = b[i];
    }
    const sums sa = sums_of(a, N), sb = sums_of(b, N);
    long double sab = 0;
    for (int i = 0; i < N; i++)
        sab += (long double)a[i] * b[i];
    const double cov = (double)((sab / N - (sa.s / N) * (sb.s / N)) / (N - 1));

    vf_est e = vf_mean_se(a, N);
    ck_assert_double_eq_tol(e.value, (double)(sa.s / N), 1e-13);
    ck_assert_double_eq_tol(e.se, se_from(sa, N), 1e-12);
    ck_assert_double_eq_tol(vf_mean_cov(a, b, N), cov, 1e-12);
    vf_est d = vf_mean_diff_se(a, b, N);
    const double sea = se_from(sa, N), seb = se_from(sb, N);
    ck_assert_double_eq_tol(d.value, (double)((sa.s - sb.s) / N), 1e-13);
    ck_assert_double_eq_tol(d.se, sqrt(sea * sea + seb * seb - 2 * cov), 1e-12);
    vf_est r = vf_rms_se(b, N);
    const sums s4 = sums_of(sq, N);
    const double ms = (double)(s4.s / N);
    ck_assert_double_eq_tol(r.value, sqrt(ms), 1e-12);
    ck_assert_double_eq_tol(r.se, 0.5 / sqrt(ms) * se_from(s4, N), 1e-12);

    vf_sort(sorted, N);
    const double qs[] = { 0.001, 0.01, 0.05, 0.1, 0.5, 0.9, 0.95, 0.99, 0.999 };
    for (size_t k = 0; k < sizeof qs / sizeof qs[0]; k++) {
        const double rank = qs[k] * (N - 1);
        const int lo = (int)floor(rank);
        const double lo_v = order_stat(b, N, lo), hi_v = order_stat(b, N, lo + 1 < N ? lo + 1 : lo);
        const double want = lo_v * (1 - (rank - lo)) + hi_v * (rank - lo);
        ck_assert_msg(fabs(vf_percentile(sorted, N, qs[k]) - want) <= 1e-12 * (1 + fabs(want)), "q %g: %.17g, want %.17g",
                      qs[k], vf_percentile(sorted, N, qs[k]), want);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sample_stats");
    TCase *tc = tcase_create("stats");
    tcase_add_test(tc, mean_se_by_hand);
    tcase_add_test(tc, covariance_and_difference_by_hand);
    tcase_add_test(tc, rms_and_fraction_by_hand);
    tcase_add_test(tc, percentiles_by_hand);
    tcase_add_test(tc, against_brute_force);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
