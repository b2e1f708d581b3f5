/* lmq probe: this machine's memory read bandwidth, with one thread and with all of them: the
 * ceiling that decode speed (every weight read once per token) is measured against. */
#include <stdio.h>

#include "runtime/backend.h"
#include "runtime/kernels.h"
#include "common/pool.h"
#include "runtime/probe.h"
#include "tools/args.h"
#include "tools/cmd.h"

static const char usage[] =
    "usage: lmq probe [--device cpu|cuda] [--mib N] [--threads N] [--rounds R] [--json]\n"
    "Measures memory read bandwidth STREAM-style: fills a buffer, then sums it with vector code,\n"
    "first on one thread, then on all; prints the best round of each in GB/s (10^9 bytes/s).\n"
    "  --device D    cpu (default), or cuda: device 0's copy bandwidth, a buffer copied to another\n"
    "                on the device, (read + written bytes) / time of the best round\n"
    "  --mib N       buffer size in MiB (default 1024; use at least 8x the last-level cache)\n"
    "  --threads N   threads for the all-threads figure (default 0: one per CPU)\n"
    "  --rounds R    rounds of reading, the best counts (default 5)\n"
    "  --json        print {\"threads\":N,\"read_gbps_1\":x,\"read_gbps_all\":y} only\n"
    "                (cuda: {\"device\":\"NAME\",\"copy_gbps\":x,\"l2_bytes\":N})\n";

/* --device cuda (or any row with a probe of its own). */
static int probe_device(const rt_backend *b, long mib, long rounds, int json)
{
    double gbps;
    char desc[256];
    size_t cache;
    lmq_err err;
    if (b->probe((size_t)mib << 20, (int)rounds, &gbps, desc, sizeof desc, &cache, &err)) {
        fprintf(stderr, "lmq probe: %s: %s\n", b->name, err.msg);
        return 1;
    }
    if (json)
        printf("{\"device\":\"%s\",\"copy_gbps\":%.3f,\"l2_bytes\":%zu}\n", desc, gbps, cache);
    else
        printf("%s copy bandwidth: %s, %ld MiB buffer, best of %ld rounds\n  %-12s %8.2f GB/s\n", b->name, desc,
               mib, rounds, "copy:", gbps);
    return 0;
}

int cmd_probe(int argc, char **argv)
{
    const char *mib_s = "1024", *threads_s = "0", *rounds_s = "5", *device_s = "cpu", *pos[1];
    int json = 0, n;
    const arg_opt opts[] = { { "--mib", NULL, &mib_s, NULL },       { "--threads", NULL, &threads_s, NULL },
                             { "--rounds", NULL, &rounds_s, NULL }, { "--json", NULL, NULL, &json },
                             { "--device", NULL, &device_s, NULL },
                             { 0 } };
    int rc = args_parse(argc, argv, opts, pos, 0, &n, usage);
    if (rc >= 0)
        return rc;
    long mib, threads, rounds;
    if (!args_int("probe", "--mib", mib_s, 1, 1L << 20, &mib) ||
        !args_int("probe", "--threads", threads_s, 0, LMQ_POOL_MAX_THREADS, &threads) ||
        !args_int("probe", "--rounds", rounds_s, 1, 1000, &rounds))
        return 2;
    const rt_backend *b;
    lmq_err err;
    lmq_code c = rt_backend_get(device_s, &b, &err);
    if (c == LMQ_E_ARG) {
        fprintf(stderr, "lmq probe: %s\n", err.msg);
        return 2;
    }
    if (c) {
        fprintf(stderr, "lmq probe: %s: %s\n", device_s, err.msg);
        return 1;
    }
    if (b->probe)
        return probe_device(b, mib, rounds, json);
    const size_t bytes = (size_t)mib << 20;
    size_t llc = 0;
    if (rt_probe_llc(&llc, &err)) {
        fprintf(stderr, "lmq probe: %s\n", err.msg);
        return 1;
    }
    if (llc && bytes < 8 * llc)
        fprintf(stderr, "lmq probe: note: %ld MiB is less than 8x the last-level cache (%zu MiB): caches inflate "
                        "the figures\n", mib, llc >> 20);
    lmq_pool *pool = NULL;
    double one = 0, all = 0;
    c = rt_probe_read_bw(NULL, bytes, (int)rounds, &one, &err);
    if (!c)
        c = lmq_pool_create((int)threads, &pool, &err);
    const int nt = pool ? lmq_pool_threads(pool) : 1;
    if (!c)
        c = nt > 1 ? rt_probe_read_bw(pool, bytes, (int)rounds, &all, &err) : (all = one, LMQ_OK);
    lmq_pool_free(pool);
    if (c) {
        fprintf(stderr, "lmq probe: %s\n", err.msg);
        return 1;
    }
    if (json) {
        printf("{\"threads\":%d,\"read_gbps_1\":%.3f,\"read_gbps_all\":%.3f}\n", nt, one, all);
        return 0;
    }
    printf("memory read bandwidth: %ld MiB buffer, best of %ld rounds, %s\n", mib, rounds,
           rt_isa_best()->name);
    char label[32];
    snprintf(label, sizeof label, "%d threads:", nt);
    printf("  %-12s %8.2f GB/s\n  %-12s %8.2f GB/s\n", "1 thread:", one, label, all);
    return 0;
}
