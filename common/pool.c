#include "common/pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

/* Workers spin this many rounds on the job word before sleeping: a decode step issues dozens
 * of small parallel loops back to back, and a condition-variable wake-up costs more than one. */
#define SPIN_ROUNDS 2000

/* The job word: generation (high 32 bits), an open flag, and how many workers have joined.
 * Workers join only an open job of the generation they saw, with a compare-and-swap; the
 * caller runs chunks itself, closes the job when none are left, and waits only for workers
 * that joined. A worker that wakes late (a busy machine) finds the job closed and costs the
 * caller nothing. */
#define ST_OPEN ((uint64_t)1 << 31)
#define ST_GEN(s) ((s) >> 32)
#define ST_ACTIVE(s) ((s) & (ST_OPEN - 1))

struct lmq_pool {
    int threads;
    pthread_t *tids;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    int sleepers; /* under mu */
    atomic_uint_fast64_t state;
    atomic_int stop;
    /* The current job: written before it opens, read only by workers that joined it. */
    lmq_task_fn fn;
    void *ctx;
    int64_t n, grain;
    atomic_int_fast64_t next;
};

typedef struct {
    lmq_pool *p;
    int thread;
} worker_arg;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Chunks shrink as the work runs out (guided): a thread takes a 2·threads-th of what is left,
 * in whole grains. Early chunks are long stretches, which memory streams faster than items dealt
 * out alternately; the last are single grains, so that threads finish together. */
static void run_chunks(lmq_pool *p, int thread)
{
    int64_t b = atomic_load(&p->next), e;
    for (;;) {
        do {
            if (b >= p->n)
                return;
            const int64_t share = (p->n - b) / (2 * p->threads) / p->grain * p->grain;
            e = b + (share > p->grain ? share : p->grain);
            e = e < p->n ? e : p->n;
        } while (!atomic_compare_exchange_weak(&p->next, &b, e));
        p->fn(p->ctx, b, e, thread);
        b = atomic_load(&p->next);
    }
}

static void *worker(void *v)
{
    worker_arg a = *(worker_arg *)v;
    free(v);
    lmq_pool *p = a.p;
    uint_fast64_t seen = 0;
    for (;;) {
        uint_fast64_t s = atomic_load(&p->state);
        for (int i = 0; i < SPIN_ROUNDS && ST_GEN(s) == seen && !atomic_load(&p->stop); i++) {
            cpu_relax();
            s = atomic_load(&p->state);
        }
        if (ST_GEN(s) == seen) {
            pthread_mutex_lock(&p->mu);
            p->sleepers++;
            while (ST_GEN(atomic_load(&p->state)) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->wake, &p->mu);
            p->sleepers--;
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop))
            return NULL;
        s = atomic_load(&p->state);
        seen = ST_GEN(s);
        int joined = 0;
        while (!joined && (s & ST_OPEN) && ST_GEN(s) == seen)
            joined = atomic_compare_exchange_weak(&p->state, &s, s + 1);
        if (!joined)
            continue;
        run_chunks(p, a.thread);
        s = atomic_fetch_sub(&p->state, 1) - 1;
        if (!(s & ST_OPEN) && ST_ACTIVE(s) == 0) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

int lmq_online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > LMQ_POOL_MAX_THREADS ? LMQ_POOL_MAX_THREADS : (int)n;
}

/* The thread count when none is asked for: LMQ_THREADS, or one per online CPU. */
static lmq_code default_threads(int *threads, lmq_err *err)
{
    const char *env = getenv("LMQ_THREADS");
    if (!env) {
        *threads = lmq_online_cpus();
        return LMQ_OK;
    }
    char *end;
    errno = 0;
    const long n = strtol(env, &end, 10);
    if (errno || end == env || *end || n < 1 || n > LMQ_POOL_MAX_THREADS)
        return lmq_fail(err, LMQ_E_ARG, "LMQ_THREADS must be an integer from 1 to %d, not '%s'",
                        LMQ_POOL_MAX_THREADS, env);
    *threads = (int)n;
    return LMQ_OK;
}

lmq_code lmq_pool_create(int threads, lmq_pool **out, lmq_err *err)
{
    *out = NULL;
    lmq_code c;
    if (threads <= 0 && (c = default_threads(&threads, err)))
        return c;
    if (threads > LMQ_POOL_MAX_THREADS)
        return lmq_fail(err, LMQ_E_ARG, "thread count %d is more than %d", threads, LMQ_POOL_MAX_THREADS);
    lmq_pool *p = calloc(1, sizeof *p);
    if (!p || !(p->tids = calloc((size_t)threads, sizeof *p->tids))) {
        free(p);
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory for a pool of %d threads", threads);
    }
    p->threads = 1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    for (int t = 1; t < threads; t++) {
        worker_arg *a = malloc(sizeof *a);
        if (!a || (a->p = p, a->thread = t, pthread_create(&p->tids[t], NULL, worker, a))) {
            free(a);
            lmq_pool_free(p);
            return lmq_fail(err, LMQ_E_NOMEM, "could not start worker thread %d of %d", t, threads);
        }
        p->threads++;
    }
    *out = p;
    return LMQ_OK;
}

void lmq_pool_free(lmq_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int t = 1; t < p->threads; t++)
        pthread_join(p->tids[t], NULL);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    free(p->tids);
    free(p);
}

int lmq_pool_threads(const lmq_pool *p)
{
    return p ? p->threads : 1;
}

void lmq_pool_for(lmq_pool *p, int64_t n, int64_t grain, lmq_task_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    if (!p || p->threads == 1 || n <= grain) {
        for (int64_t b = 0; b < n; b += grain)
            fn(ctx, b, b + grain < n ? b + grain : n, 0);
        return;
    }
    /* No worker is inside the previous job (the caller waited for them), so the fields and
     * the job word can be rewritten. */
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->grain = grain;
    atomic_store(&p->next, 0);
    atomic_store(&p->state, ((ST_GEN(atomic_load(&p->state)) + 1) << 32) | ST_OPEN);
    pthread_mutex_lock(&p->mu);
    if (p->sleepers)
        pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    run_chunks(p, 0);
    uint_fast64_t s = atomic_fetch_and(&p->state, ~(uint_fast64_t)ST_OPEN) & ~(uint_fast64_t)ST_OPEN;
    for (int i = 0; i < SPIN_ROUNDS && ST_ACTIVE(s); i++) {
        cpu_relax();
        s = atomic_load(&p->state);
    }
    if (ST_ACTIVE(s)) {
        pthread_mutex_lock(&p->mu);
        while (ST_ACTIVE(atomic_load(&p->state)))
            pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}

typedef struct {
    lmq_try_fn fn;
    void *ctx;
    atomic_int failed;
} try_job;

static void try_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    try_job *j = ctx;
    lmq_err scratch;
    if (!atomic_load(&j->failed) && j->fn(j->ctx, begin, end, thread, &scratch))
        atomic_store(&j->failed, 1);
}

lmq_code lmq_pool_try(lmq_pool *p, int64_t n, int64_t grain, lmq_try_fn fn, void *ctx, lmq_err *err)
{
    if (n <= 0)
        return LMQ_OK;
    if (lmq_pool_threads(p) > 1 && n > grain) {
        try_job j = { .fn = fn, .ctx = ctx };
        atomic_init(&j.failed, 0);
        lmq_pool_for(p, n, grain, try_task, &j);
        if (!atomic_load(&j.failed))
            return LMQ_OK;
    }
    return fn(ctx, 0, n, 0, err);
}
