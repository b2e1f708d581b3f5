/* lmq quantize: an artefact and a recipe in, a quantised artefact out. */
#include <stdio.h>
#include <sys/resource.h>

#include "calibrate/methods.h"
#include "common/clock.h"
#include "common/file.h"
#include "common/pool.h"
#include "quantize/quantize.h"
#include "tools/args.h"
#include "tools/cmd.h"
#include "tools/progress.h"

static const char usage[] =
    "usage: lmq quantize IN.lmq --recipe R.yaml -o OUT.lmq [--stats STATS.lmq [--calib-text FILE]]\n"
    "                    [--threads N]\n"
    "Applies the recipe (recipes/README.md) tensor by tensor and writes OUT.lmq atomically, with a\n"
    "manifest of what was done to each tensor. Recipes with calibrated methods (gptq, awq) or\n"
    "smoothquant need the statistics `lmq calibrate` took on IN.lmq (--stats; recipes that round to\n"
    "nearest leave them unused). GPTQ runs the calibration windows again block by block, from the\n"
    "text the statistics name or --calib-text (the same text, elsewhere: its checksum is checked).\n"
    "Each tensor is quantised on N threads (default 0: one per CPU); the bytes do not depend on N.\n";

static void on_progress(void *ctx, int done, int total, const char *name)
{
    progress_show(ctx, done, total, name);
}

static void on_stage(void *ctx, const char *stage, int done, int total)
{
    progress_show(ctx, done, total, stage);
}

/* Warnings go to stderr, under the progress line (cleared first when it is shown). */
static void on_warn(void *ctx, const char *tensor, const char *msg)
{
    progress_end(ctx);
    fprintf(stderr, "lmq quantize: warning: tensor %s: %s\n", tensor, msg);
}

int cmd_quantize(int argc, char **argv)
{
    const char *out = NULL, *recipe = NULL, *stats = NULL, *calib_text = NULL, *threads_s = "0", *in[1];
    int n;
    const arg_opt opts[] = { { "--output", "-o", &out, NULL },       { "--recipe", "-r", &recipe, NULL },
                             { "--stats", NULL, &stats, NULL },       { "--calib-text", NULL, &calib_text, NULL },
                             { "--threads", NULL, &threads_s, NULL }, { 0 } };
    int rc = args_parse(argc, argv, opts, in, 1, &n, usage);
    if (rc >= 0)
        return rc;
    long threads;
    if (!args_int("quantize", "--threads", threads_s, 0, LMQ_POOL_MAX_THREADS, &threads))
        return 2;
    if (n != 1 || !out || !recipe || (calib_text && !stats)) {
        fprintf(stderr, "lmq quantize: need IN.lmq, --recipe R.yaml and -o OUT.lmq (--calib-text goes with "
                        "--stats)\n%s", usage);
        return 2;
    }
    lmq_err err;
    const char *inputs[] = { in[0], recipe, stats ? stats : in[0], calib_text ? calib_text : in[0] };
    if (lmq_output_check(out, inputs, 4, &err)) {
        fprintf(stderr, "lmq quantize: %s\n", err.msg);
        return 1;
    }
    progress pr;
    progress_init(&pr, "quantize");
    q_opts qo = { .progress = on_progress, .progress_ctx = &pr, .threads = (int)threads, .warn = on_warn,
                  .warn_ctx = &pr };
    cal_quantize_opts co = { .q = qo, .calib_text = calib_text, .progress = on_stage, .progress_ctx = &pr };
    const double t0 = lmq_now();
    lmq_code c = stats ? cal_quantize_file(in[0], recipe, stats, out, &co, &err)
                       : q_quantize_file(in[0], recipe, out, &qo, &err);
    progress_end(&pr);
    if (c) {
        fprintf(stderr, "lmq quantize: %s\n", err.msg);
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("%s: written with %s (%.2f s, peak RSS %.1f MiB)\n", out, recipe,
           lmq_now() - t0, ru.ru_maxrss / 1024.0);
    return 0;
}
