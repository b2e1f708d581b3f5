/* Wall-clock seconds from a monotonic clock, for the speed numbers lmq reports. */
#ifndef LMQ_CLOCK_H
#define LMQ_CLOCK_H

#include <time.h>

static inline double lmq_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#endif
