/* lmq calibrate: a model and calibration text in, activation statistics out. */
#include <stdio.h>
#include <sys/resource.h>

#include "calibrate/calibrate.h"
#include "common/clock.h"
#include "common/file.h"
#include "common/pool.h"
#include "tools/args.h"
#include "tools/cmd.h"
#include "tools/progress.h"

static const char usage[] =
    "usage: lmq calibrate MODEL.lmq --text FILE -o STATS.lmq [--windows N] [--ctx C] [--threads N]\n"
    "                     [--gram-mib M]\n"
    "Runs the model over the first N windows (default 128) of C tokens (default 256) of the text, cut\n"
    "as protocol P1 cuts it, and writes the statistics of every linear layer's input (per-channel\n"
    "max|x|, mean|x|, mean x², each token's max|x|, the Gram matrix XᵀX) to STATS.lmq, which\n"
    "`lmq quantize --stats` reads. The fp64 Gram matrices of one pass over the text take at most M MiB\n"
    "(default 2048): a model whose matrices need more is calibrated in several passes.\n";

static void on_progress(void *ctx, int pass, int passes, int done, int total)
{
    char what[48];
    snprintf(what, sizeof what, "windows (pass %d of %d)", pass, passes);
    progress_show(ctx, done, total, what);
}

int cmd_calibrate(int argc, char **argv)
{
    const char *out = NULL, *text = NULL, *windows_s = "128", *ctx_s = "256", *threads_s = "0", *gram_s = "2048",
               *in[1];
    int n;
    const arg_opt opts[] = { { "--output", "-o", &out, NULL },      { "--text", NULL, &text, NULL },
                             { "--windows", NULL, &windows_s, NULL }, { "--ctx", NULL, &ctx_s, NULL },
                             { "--threads", NULL, &threads_s, NULL }, { "--gram-mib", NULL, &gram_s, NULL },
                             { 0 } };
    int rc = args_parse(argc, argv, opts, in, 1, &n, usage);
    if (rc >= 0)
        return rc;
    long windows, ctx, threads, gram;
    if (!args_int("calibrate", "--windows", windows_s, 1, 1 << 20, &windows) ||
        !args_int("calibrate", "--ctx", ctx_s, 2, 1 << 20, &ctx) ||
        !args_int("calibrate", "--threads", threads_s, 0, LMQ_POOL_MAX_THREADS, &threads) ||
        !args_int("calibrate", "--gram-mib", gram_s, 1, 1 << 24, &gram))
        return 2;
    if (n != 1 || !out || !text) {
        fprintf(stderr, "lmq calibrate: need MODEL.lmq, --text FILE and -o STATS.lmq\n%s", usage);
        return 2;
    }
    lmq_err err;
    const char *inputs[] = { in[0], text };
    if (lmq_output_check(out, inputs, 2, &err)) {
        fprintf(stderr, "lmq calibrate: %s\n", err.msg);
        return 1;
    }
    progress pr;
    progress_init(&pr, "calibrate");
    cal_opts co = { .windows = (int)windows, .ctx = (int)ctx, .threads = (int)threads,
                    .gram_bytes = (uint64_t)gram << 20, .progress = on_progress, .progress_ctx = &pr };
    cal_summary sum;
    const double t0 = lmq_now();
    lmq_code c = cal_calibrate_file(in[0], text, out, &co, &sum, &err);
    progress_end(&pr);
    if (c) {
        fprintf(stderr, "lmq calibrate: %s\n", err.msg);
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("%s: statistics of %d inputs over %d windows (%llu tokens) in %d pass%s (%.2f s, peak RSS %.1f MiB)\n",
           out, sum.records, sum.windows, (unsigned long long)sum.tokens, sum.passes, sum.passes == 1 ? "" : "es",
           lmq_now() - t0, ru.ru_maxrss / 1024.0);
    return 0;
}
