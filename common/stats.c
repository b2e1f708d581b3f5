#include "common/stats.h"

#include <math.h>
#include <string.h>

#include "common/vec.h"

/* Every sum runs in LANES interleaved accumulators (common/vec.h), combined in lane order at the
 * end: eight independent chains instead of one chain of scalar additions (which held quantize to
 * a third of its input rate), in one order of operations on every machine. */
#define LANES VEC_LANES

typedef struct {
    v8d sum, sq, diff, peak, m2, m4;
} lanes;

static double lane_sum(const v8d *a)
{
    double s = 0;
    for (int l = 0; l < LANES; l++)
        s += (*a)[l];
    return s;
}

/* Elements [i, i + k) of p, k ≤ LANES, as doubles in lanes 0..k-1 (zeros beyond). */
static inline void load8(const float *p, size_t i, size_t k, v8d *out)
{
    v8f f = { 0 };
    memcpy(&f, p + i, k * sizeof *p);
    *out = __builtin_convertvector(f, v8d);
}

/* The raw sums over elements [i, i + k); dead lanes add zeros. wq NULL: no difference. */
static inline void raw8(lanes *a, const float *w, const float *wq, size_t i, size_t k)
{
    v8d x, r;
    load8(w, i, k, &x);
    load8(wq ? wq : w, i, k, &r);
    const v8d e = r - x, m = (v8d)((v8l)x & INT64_MAX); /* |x| */
    const v8l take = m > a->peak; /* the scalar `m > peak ? m : peak`: NaN never wins */
    a->sum += x;
    a->sq += x * x;
    a->peak = (v8d)(((v8l)m & take) | ((v8l)a->peak & ~take));
    a->diff += e * e;
}

static inline void central8(lanes *a, const float *w, double mean, size_t i, size_t k)
{
    v8d d;
    load8(w, i, k, &d);
    d -= mean;
    for (size_t l = k; l < LANES; l++) /* dead lanes: no deviation */
        d[l] = 0;
    const v8d dd = d * d;
    a->m2 += dd;
    a->m4 += dd * dd;
}

/* GCC exports the dispatcher of a function with clones whatever -fvisibility says: the clones
 * are static, behind lmq_tensor_stats. */
VEC_CLONES
static void tensor_stats(const float *w, const float *wq, size_t n, lmq_stats *out)
{
    lmq_stats st = { 0 };
    lanes a = { 0 };
    const size_t whole = n / LANES * LANES;
    for (size_t i = 0; i < whole; i += LANES)
        raw8(&a, w, wq, i, LANES);
    raw8(&a, w, wq, whole, n - whole);
    for (int l = 0; l < LANES; l++)
        st.peak = a.peak[l] > st.peak ? a.peak[l] : st.peak;
    const double sq = lane_sum(&a.sq), diff = lane_sum(&a.diff);
    if (n) {
        const double mean = lane_sum(&a.sum) / (double)n;
        for (size_t i = 0; i < whole; i += LANES)
            central8(&a, w, mean, i, LANES);
        central8(&a, w, mean, whole, n - whole);
        const double m2 = lane_sum(&a.m2) / (double)n, m4 = lane_sum(&a.m4) / (double)n;
        st.rms = sqrt(sq / (double)n);
        st.kurtosis = m2 > 0 ? m4 / (m2 * m2) - 3.0 : 0.0;
    }
    st.rel_error = diff == 0 ? 0.0 : sq > 0 ? sqrt(diff / sq) : INFINITY;
    *out = st;
}

void lmq_tensor_stats(const float *w, const float *wq, size_t n, lmq_stats *out)
{
    tensor_stats(w, wq, n, out);
}
