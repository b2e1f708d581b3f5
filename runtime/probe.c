/* Memory read bandwidth (runtime/probe.h). */
#include "runtime/probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "runtime/kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

#define CHUNK ((size_t)256 << 10) /* bytes: one work item */
#define SLOT 8                      /* sums between threads' partial sums: one cache line each */
/* Half the rounds read with software prefetches this far ahead, as the fused kernels do
 * (runtime/linear.c): on a busy virtual machine they streamed 7-10 % more with 2 threads, and
 * less with one; the probe keeps the best of both. */
#define AHEAD 8192

typedef struct {
    const rt_span *items; /* the spans cut into work items of at most CHUNK bytes */
    rt_isa isa;
    int prefetch;
    uint64_t *partial; /* [threads * SLOT] */
} probe_ctx;

/* One request per cache line of p[0..256), AHEAD bytes on. */
static inline void ask_ahead(const uint8_t *p, int prefetch)
{
    for (int l = 0; prefetch && l < 4; l++)
        __builtin_prefetch(p + 64 * l + AHEAD, 0, 3);
}

/* The sum of p[0..n) (n a multiple of 256) as 64-bit words: integers, so any bytes do, weights
 * included. Four independent accumulators: the additions do not wait on each other. */
static uint64_t sum_plain(const uint8_t *p, size_t n, int prefetch)
{
    uint64_t acc[4] = { 0 };
    for (size_t i = 0; i < n; i += 256) {
        ask_ahead(p + i, prefetch);
        for (int j = 0; j < 32; j++) {
            uint64_t w;
            memcpy(&w, p + i + 8 * j, 8);
            acc[j % 4] += w;
        }
    }
    return acc[0] + acc[1] + acc[2] + acc[3];
}

#if HAVE_X86
__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint8_t *p, size_t n, int prefetch)
{
    __m256i a[4];
    for (int j = 0; j < 4; j++)
        a[j] = _mm256_setzero_si256();
    for (size_t i = 0; i < n; i += 256) {
        ask_ahead(p + i, prefetch);
        for (int j = 0; j < 8; j++)
            a[j % 4] = _mm256_add_epi64(a[j % 4], _mm256_loadu_si256((const __m256i *)(p + i + 32 * j)));
    }
    uint64_t lanes[4], s = 0;
    _mm256_storeu_si256((__m256i *)lanes, _mm256_add_epi64(_mm256_add_epi64(a[0], a[1]), _mm256_add_epi64(a[2], a[3])));
    for (int j = 0; j < 4; j++)
        s += lanes[j];
    return s;
}

/* Whole cache lines a load: the widest reads this CPU has. */
__attribute__((target("avx512f"))) static uint64_t sum_avx512(const uint8_t *p, size_t n, int prefetch)
{
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += 256) {
        ask_ahead(p + i, prefetch);
        a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(p + i));
        a1 = _mm512_add_epi64(a1, _mm512_loadu_si512(p + i + 64));
        a2 = _mm512_add_epi64(a2, _mm512_loadu_si512(p + i + 128));
        a3 = _mm512_add_epi64(a3, _mm512_loadu_si512(p + i + 192));
    }
    uint64_t lanes[8], s = 0; /* not _mm512_reduce_add_epi64: its additions are signed, and overflow */
    _mm512_storeu_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
    for (int j = 0; j < 8; j++)
        s += lanes[j];
    return s;
}
#endif

static void sum_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    probe_ctx *x = ctx;
    uint64_t s = 0;
    for (int64_t b = begin; b < end; b++) {
        const uint8_t *p = x->items[b].p;
        const size_t n = x->items[b].bytes & ~(size_t)255;
#if HAVE_X86
        s += x->isa == RT_ISA_AVX512 ? sum_avx512(p, n, x->prefetch)
             : x->isa == RT_ISA_AVX2 ? sum_avx2(p, n, x->prefetch)
                                     : sum_plain(p, n, x->prefetch);
#else
        s += sum_plain(p, n, x->prefetch);
#endif
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
    probe_ctx x = { .items = item, .isa = rt_isa_best(), .partial = calloc((size_t)threads * SLOT, sizeof(uint64_t)) };
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
        x.prefetch = r % 2;
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

size_t rt_probe_llc_bytes(void)
{
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
    if (best)
        return best;
    /* glibc's figure comes from CPUID, which a virtual machine may report for the whole host. */
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l3 > 0 ? (size_t)l3 : l2 > 0 ? (size_t)l2 : 0;
}
