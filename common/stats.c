#include "common/stats.h"

#include <math.h>

void lmq_tensor_stats(const float *w, const float *wq, size_t n, lmq_stats *out)
{
    lmq_stats st = { 0 };
    double sum = 0, sq = 0, diff = 0;
    for (size_t i = 0; i < n; i++) {
        double x = w[i];
        sum += x;
        sq += x * x;
        st.peak = fabs(x) > st.peak ? fabs(x) : st.peak;
        if (wq)
            diff += ((double)wq[i] - x) * ((double)wq[i] - x);
    }
    if (n) {
        double mean = sum / (double)n, m2 = 0, m4 = 0;
        for (size_t i = 0; i < n; i++) {
            double d = (double)w[i] - mean, d2 = d * d;
            m2 += d2;
            m4 += d2 * d2;
        }
        m2 /= (double)n;
        m4 /= (double)n;
        st.rms = sqrt(sq / (double)n);
        st.kurtosis = m2 > 0 ? m4 / (m2 * m2) - 3.0 : 0.0;
    }
    st.rel_error = diff == 0 ? 0.0 : sq > 0 ? sqrt(diff / sq) : INFINITY;
    *out = st;
}
