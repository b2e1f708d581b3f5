/* A persistent pool of worker threads with one operation, a parallel for over [0, n).
 *
 * Work is handed out in chunks of `grain` items from a shared counter; each item is processed
 * entirely by one thread, so as long as a task computes every output from its own item alone,
 * results do not depend on the thread count or on which thread ran what. */
#ifndef LMQ_RT_POOL_H
#define LMQ_RT_POOL_H

#include <stdint.h>

#include "common/err.h"

typedef struct rt_pool rt_pool;

/* fn(ctx, begin, end, thread): process items [begin, end); thread is 0..threads-1 (0 = caller),
 * for per-thread scratch buffers. */
typedef void (*rt_task_fn)(void *ctx, int64_t begin, int64_t end, int thread);

/* threads <= 0 means one per online CPU. The caller's thread is one of them. */
lmq_code rt_pool_create(int threads, rt_pool **out, lmq_err *err);
void rt_pool_free(rt_pool *p);
/* A NULL pool is a valid single-threaded pool. */
int rt_pool_threads(const rt_pool *p);
int rt_online_cpus(void);

/* Runs fn over [0, n) and returns when every item is done. Runs inline (no hand-off) when the
 * pool is NULL or single-threaded, or when n <= grain. The caller's thread takes chunks too
 * and never waits for a worker that has not started on the job (a busy machine delays nothing).
 * One caller at a time per pool, and fn must not call it (not reentrant). */
void rt_pool_for(rt_pool *p, int64_t n, int64_t grain, rt_task_fn fn, void *ctx);

#endif
