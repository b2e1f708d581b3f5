/* A persistent pool of worker threads with one operation, a parallel for over [0, n).
 *
 * Work is handed out from a shared counter in chunks of whole `grain`s, long while much is left
 * and shrinking to one grain at the end (guided); each item is processed entirely by one thread,
 * so as long as a task computes every output from its own item alone, results do not depend on
 * the thread count or on which thread ran what. */
#ifndef LMQ_POOL_H
#define LMQ_POOL_H

#include <stdint.h>

#include "common/err.h"

typedef struct lmq_pool lmq_pool;

/* fn(ctx, begin, end, thread): process items [begin, end); thread is 0..threads-1 (0 = caller),
 * for per-thread scratch buffers. */
typedef void (*lmq_task_fn)(void *ctx, int64_t begin, int64_t end, int thread);

/* The most threads a pool has. */
#define LMQ_POOL_MAX_THREADS 256

/* threads <= 0 means LMQ_THREADS from the environment when it is set (an integer from 1 to
 * LMQ_POOL_MAX_THREADS; anything else is an error naming it), else one per online CPU. The
 * caller's thread is one of them. */
lmq_code lmq_pool_create(int threads, lmq_pool **out, lmq_err *err);
void lmq_pool_free(lmq_pool *p);
/* A NULL pool is a valid single-threaded pool. */
int lmq_pool_threads(const lmq_pool *p);
int lmq_online_cpus(void);

/* Runs fn over [0, n) and returns when every item is done. Runs inline (no hand-off) when the
 * pool is NULL or single-threaded, or when n <= grain. The caller's thread takes chunks too
 * and never waits for a worker that has not started on the job (a busy machine delays nothing).
 * One caller at a time per pool, and fn must not call it (not reentrant). */
void lmq_pool_for(lmq_pool *p, int64_t n, int64_t grain, lmq_task_fn fn, void *ctx);

/* Work that can fail: fn processes [begin, end) and returns an error code (setting err). */
typedef lmq_code (*lmq_try_fn)(void *ctx, int64_t begin, int64_t end, int thread, lmq_err *err);
/* lmq_pool_for for work that can fail. When a chunk fails, fn runs again on the caller's thread
 * over all of [0, n) at once, so the error reported is the one a single thread meets first,
 * whatever the thread count (fn must be safe to rerun: same inputs, same outputs). */
lmq_code lmq_pool_try(lmq_pool *p, int64_t n, int64_t grain, lmq_try_fn fn, void *ctx, lmq_err *err);

#endif
