/* Memory read bandwidth (runtime/probe.h). */
#include "runtime/probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/clock.h"
#include "runtime/kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

#define BLOCK_FLOATS 65536 /* 256 KiB: one work item */
#define SLOT 8             /* doubles between threads' partial sums: one cache line each */
/* Half the rounds read with software prefetches this far ahead, as the fused kernels do
 * (runtime/linear.c): on a busy virtual machine they streamed 7-10 % more with 2 threads, and
 * less with one; the probe keeps the best of both. */
#define AHEAD 8192

typedef struct {
    float *buf;
    rt_isa isa;
    int prefetch;
    double *partial; /* [threads * SLOT] */
} probe_ctx;

/* One request per cache line of p[i..i + 64), AHEAD bytes on. */
static inline void ask_ahead(const float *p, size_t i, int prefetch)
{
    for (int l = 0; prefetch && l < 4; l++)
        __builtin_prefetch((const char *)(p + i + 16 * l) + AHEAD, 0, 3);
}

/* Sums one block. Sixteen independent accumulators: the additions do not wait on each other,
 * and the compiler turns each group of them into vector adds. */
static float sum_plain(const float *p, int prefetch)
{
    float acc[16] = { 0 };
    for (size_t i = 0; i < BLOCK_FLOATS; i += 16) {
        if (i % 64 == 0)
            ask_ahead(p, i, prefetch);
        for (int j = 0; j < 16; j++)
            acc[j] += p[i + j];
    }
    float s = 0;
    for (int j = 0; j < 16; j++)
        s += acc[j];
    return s;
}

#if HAVE_X86
__attribute__((target("avx2"))) static float sum_avx2(const float *p, int prefetch)
{
    __m256 a[8];
    for (int j = 0; j < 8; j++)
        a[j] = _mm256_setzero_ps();
    for (size_t i = 0; i < BLOCK_FLOATS; i += 64) {
        ask_ahead(p, i, prefetch);
        for (int j = 0; j < 8; j++)
            a[j] = _mm256_add_ps(a[j], _mm256_load_ps(p + i + 8 * j));
    }
    for (int j = 1; j < 8; j++)
        a[0] = _mm256_add_ps(a[0], a[j]);
    float lanes[8], s = 0;
    _mm256_storeu_ps(lanes, a[0]);
    for (int j = 0; j < 8; j++)
        s += lanes[j];
    return s;
}

/* Whole cache lines a load: the widest reads this CPU has. */
__attribute__((target("avx512f"))) static float sum_avx512(const float *p, int prefetch)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < BLOCK_FLOATS; i += 64) {
        ask_ahead(p, i, prefetch);
        a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}
#endif

static void sum_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    probe_ctx *x = ctx;
    double s = 0;
    for (int64_t b = begin; b < end; b++) {
        const float *p = x->buf + b * BLOCK_FLOATS;
#if HAVE_X86
        s += x->isa == RT_ISA_AVX512 ? sum_avx512(p, x->prefetch)
             : x->isa == RT_ISA_AVX2 ? sum_avx2(p, x->prefetch)
                                     : sum_plain(p, x->prefetch);
#else
        s += sum_plain(p, x->prefetch);
#endif
    }
    x->partial[thread * SLOT] += s;
}

/* Each thread touches first the blocks it will read (on NUMA machines, its own node's memory). */
static void fill_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    probe_ctx *x = ctx;
    (void)thread;
    for (int64_t i = begin * BLOCK_FLOATS; i < end * BLOCK_FLOATS; i++)
        x->buf[i] = 1.0f;
}

lmq_code rt_probe_read_bw(lmq_pool *pool, size_t bytes, int rounds, double *gbps, lmq_err *err)
{
    if (rounds < 1)
        return lmq_fail(err, LMQ_E_ARG, "probe: %d rounds", rounds);
    const int64_t blocks = bytes / (BLOCK_FLOATS * sizeof(float)) ? (int64_t)(bytes / (BLOCK_FLOATS * sizeof(float))) : 1;
    const size_t size = (size_t)blocks * BLOCK_FLOATS * sizeof(float);
    const int threads = lmq_pool_threads(pool);
    probe_ctx x = { .buf = aligned_alloc(64, size), .isa = rt_isa_best(),
                    .partial = calloc((size_t)threads * SLOT, sizeof(double)) };
    if (!x.buf || !x.partial) {
        free(x.buf);
        free(x.partial);
        return lmq_fail(err, LMQ_E_NOMEM, "probe: cannot allocate %zu MiB", size >> 20);
    }
    /* Each thread reads long stretches, as the linear layers do (common/pool.c hands them out). */
    lmq_pool_for(pool, blocks, 1, fill_task, &x);
    double best = 0, total = 0;
    for (int r = 0; r < rounds; r++) {
        x.prefetch = r % 2;
        const double t0 = lmq_now();
        lmq_pool_for(pool, blocks, 1, sum_task, &x);
        const double t = lmq_now() - t0;
        if (t > 0 && size / t > best)
            best = size / t;
    }
    for (int i = 0; i < threads; i++)
        total += x.partial[i * SLOT];
    free(x.buf);
    free(x.partial);
    /* Every element is 1 and every partial sum exact: anything else means a block went unread. */
    if (total != (double)rounds * (double)blocks * BLOCK_FLOATS)
        return lmq_fail(err, LMQ_E_NUMERIC, "probe: the buffer summed to %.0f, not %.0f", total,
                        (double)rounds * (double)blocks * BLOCK_FLOATS);
    *gbps = best / 1e9;
    return LMQ_OK;
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
