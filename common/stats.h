/* Weight statistics for the manifest: how a tensor is distributed and how far its quantised
 * version lies from it. All sums in double. */
#ifndef LMQ_COMMON_STATS_H
#define LMQ_COMMON_STATS_H

#include <stddef.h>

typedef struct {
    double rel_error; /* ||W - W'||_F / ||W||_F; 0 when W' == W (also when both are zero),
                         +Inf when W is zero and W' is not; 0 when no W' was given */
    double peak;      /* max |w| */
    double rms;       /* sqrt(mean w^2) */
    double kurtosis;  /* excess kurtosis m4 / m2^2 - 3 of the central moments; 0 when m2 == 0 */
} lmq_stats;

/* Statistics of the n weights w and, when wq is not NULL, of their reconstruction wq. */
void lmq_tensor_stats(const float *w, const float *wq, size_t n, lmq_stats *out);

#endif
