/* Memory read bandwidth (runtime/probe.h). */
#include "runtime/probe.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "runtime/kernels.h"

#define CHUNK ((size_t)256 << 10) /* bytes: one work item */
#define SLOT 8                      /* sums between threads' partial sums: one cache line each */

typedef struct {
    const rt_span *items; /* the spans cut into work items of at most CHUNK bytes */
    rt_sum_words_fn *sum_words; /* the best kernel set's */
    int prefetch;
    uint64_t *partial; /* [threads * SLOT] */
} probe_ctx;

static void sum_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    probe_ctx *x = ctx;
    uint64_t s = 0;
    for (int64_t b = begin; b < end; b++) {
        const uint8_t *p = x->items[b].p;
        const size_t n = x->items[b].bytes & ~(size_t)255;
        s += x->sum_words(p, n, x->prefetch);
        for (size_t i = n; i < x->items[b].bytes; i++) /* the last bytes of a span */
            s += p[i];
    }
    x->partial[thread * SLOT] += s;
}

lmq_code rt_probe_read_spans(lmq_pool *pool, const rt_span *spans, int n, int rounds, double *gbps, uint64_t *sum,
                             lmq_err *err)
{
    if (rounds < 1 || n < 0)
        return lmq_fail(err, LMQ_E_ARG, "probe: %d rounds of %d spans", rounds, n);
    size_t items = 0, bytes = 0;
    for (int i = 0; i < n; i++) {
        items += (spans[i].bytes + CHUNK - 1) / CHUNK;
        bytes += spans[i].bytes;
    }
    const int threads = lmq_pool_threads(pool);
    rt_span *item = malloc((items ? items : 1) * sizeof *item);
    probe_ctx x = { .items = item, .sum_words = rt_isa_best()->sum_words,
                    .partial = calloc((size_t)threads * SLOT, sizeof(uint64_t)) };
    if (!item || !x.partial) {
        free(item);
        free(x.partial);
        return lmq_fail(err, LMQ_E_NOMEM, "probe: out of memory for %zu work items", items);
    }
    items = 0;
    for (int i = 0; i < n; i++)
        for (size_t o = 0; o < spans[i].bytes; o += CHUNK) {
            const size_t left = spans[i].bytes - o;
            item[items++] = (rt_span){ (const uint8_t *)spans[i].p + o, left < CHUNK ? left : CHUNK };
        }
    /* Each thread reads long stretches, as the linear layers do (common/pool.c hands them out). */
    double best = 0;
    for (int r = 0; r < rounds; r++) {
        x.prefetch = r % 2; /* every other round asks ahead (runtime/kernels_impl.h's SUM_AHEAD) */
        const double t0 = lmq_now();
        lmq_pool_for(pool, (int64_t)items, 1, sum_task, &x);
        const double t = lmq_now() - t0;
        if (t > 0 && bytes / t > best)
            best = bytes / t;
    }
    uint64_t total = 0;
    for (int i = 0; i < threads; i++)
        total += x.partial[i * SLOT];
    free(item);
    free(x.partial);
    if (sum)
        *sum = total;
    *gbps = best / 1e9;
    return LMQ_OK;
}

/* Each thread touches first the stretches it will read (on NUMA machines, its own node's memory). */
static void fill_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    uint64_t *buf = ctx;
    for (int64_t i = begin * (int64_t)(CHUNK / 8); i < end * (int64_t)(CHUNK / 8); i++)
        buf[i] = 1;
}

lmq_code rt_probe_read_bw(lmq_pool *pool, size_t bytes, int rounds, double *gbps, lmq_err *err)
{
    if (rounds < 1) /* before allocating */
        return rt_probe_read_spans(pool, NULL, 0, rounds, gbps, NULL, err);
    const size_t chunks = bytes / CHUNK ? bytes / CHUNK : 1, size = chunks * CHUNK;
    uint64_t *buf = aligned_alloc(64, size), sum = 0;
    if (!buf)
        return lmq_fail(err, LMQ_E_NOMEM, "probe: cannot allocate %zu MiB", size >> 20);
    lmq_pool_for(pool, (int64_t)chunks, 1, fill_task, buf);
    lmq_code c = rt_probe_read_spans(pool, &(rt_span){ buf, size }, 1, rounds, gbps, &sum, err);
    free(buf);
    /* Every word is 1: anything but their number each round means a stretch went unread. */
    if (!c && sum != (uint64_t)rounds * (size / 8))
        c = lmq_fail(err, LMQ_E_NUMERIC, "probe: the buffer summed to %llu, not %llu", (unsigned long long)sum,
                     (unsigned long long)rounds * (size / 8));
    return c;
}

/* The sizes in /sys are what the kernel was told about this machine's caches ("32768K"). */
static size_t sys_cache(int index, int *level)
{
    char path[96], unit = 0;
    unsigned long size = 0;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", index);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = fscanf(f, "%d", level) == 1;
    fclose(f);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
    if (!ok || !(f = fopen(path, "r")))
        return 0;
    ok = fscanf(f, "%lu%c", &size, &unit) >= 1;
    fclose(f);
    if (!ok)
        return 0;
    return unit == 'K' ? size << 10 : unit == 'M' ? size << 20 : size;
}

/* LMQ_LLC_BYTES: a size in bytes, or with K, M or G (powers of 1024). */
static lmq_code llc_from_env(const char *s, size_t *bytes, lmq_err *err)
{
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(s, &end, 10);
    const int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    if (shift)
        end++;
    if (end == s || *end || errno || !v || !isdigit((unsigned char)*s) || v > (SIZE_MAX >> shift))
        return lmq_fail(err, LMQ_E_ARG, "LMQ_LLC_BYTES='%s': expected a cache size in bytes, such as 33554432 or 32M", s);
    *bytes = (size_t)v << shift;
    return LMQ_OK;
}

lmq_code rt_probe_llc(size_t *bytes, lmq_err *err)
{
    const char *env = getenv("LMQ_LLC_BYTES");
    if (env)
        return llc_from_env(env, bytes, err);
    size_t best = 0;
    int best_level = 0;
    for (int i = 0; i < 16; i++) {
        int level = 0;
        const size_t s = sys_cache(i, &level);
        if (s && level >= best_level) {
            best = s;
            best_level = level;
        }
    }
    /* glibc's figure comes from CPUID, which a virtual machine may report for the whole host. */
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    *bytes = best ? best : l3 > 0 ? (size_t)l3 : l2 > 0 ? (size_t)l2 : 0;
    return LMQ_OK;
}
