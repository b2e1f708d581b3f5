/* How fast this machine reads memory, STREAM-style. Decoding one token streams every weight
 * once, so this rate over the bytes of the weights bounds decode speed from above. */
#ifndef LMQ_RT_PROBE_H
#define LMQ_RT_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/pool.h"

/* Bytes in memory: a stretch to read. */
typedef struct {
    const void *p;
    size_t bytes;
} rt_span;

/* Reads spans[0..n) `rounds` times with every thread of pool (NULL: the caller's thread alone),
 * adding them up as 64-bit words with the best kernel set's sum_words (runtime/kernels.h), every
 * other round with software prefetches as the fused kernels issue them. *gbps gets the best
 * round's rate in 10^9 bytes per second, *sum (unless NULL) the sum of every round: the bytes
 * are really read. On spans well beyond the last-level cache that rate is the memory's. */
lmq_code rt_probe_read_spans(lmq_pool *pool, const rt_span *spans, int n, int rounds, double *gbps, uint64_t *sum,
                             lmq_err *err);

/* The same over a buffer of `bytes` (rounded down to a multiple of 256 KiB, at least that) filled
 * for the purpose: the machine's read bandwidth when the buffer is well beyond the last-level
 * cache (which a virtual machine's host may make larger than /sys says: 1 GiB is safe). */
lmq_code rt_probe_read_bw(lmq_pool *pool, size_t bytes, int rounds, double *gbps, lmq_err *err);

/* The size of the CPU's largest cache level in bytes into *bytes, 0 when the system does not say:
 * $LMQ_LLC_BYTES when set (bytes, or 32M and the like), for a virtual machine whose CPUID reports
 * the host's whole L3 (hundreds of MiB, which would exempt most models from the roofline); LMQ_E_ARG
 * for a value that is not a size. */
lmq_code rt_probe_llc(size_t *bytes, lmq_err *err);

#endif
