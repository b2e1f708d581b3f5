/* lmq outliers: an fp32 artefact in, the same model with activation outliers out (a test model for
 * SmoothQuant and W8A8; calibrate/outliers.h). */
#include <float.h>
#include <limits.h>
#include <stdio.h>

#include "calibrate/outliers.h"
#include "common/file.h"
#include "tools/args.h"
#include "tools/cmd.h"

static const char usage[] =
    "usage: lmq outliers IN.lmq -o OUT.lmq [--channels 4] [--factor 30] [--seed 1]\n"
    "Writes the fp32 model IN.lmq with activation outliers: in every block, for both norm-fed\n"
    "inputs (attention and feed-forward), CHANNELS distinct channels chosen from SEED are scaled\n"
    "by FACTOR at the norm's output (its weight and bias) and the columns of the layers reading\n"
    "them divided by FACTOR, so the model computes the same function while those activations\n"
    "grow FACTOR times. The manifest's source notes record the channels.\n";

int cmd_outliers(int argc, char **argv)
{
    const char *out = NULL, *channels_s = "4", *factor_s = "30", *seed_s = "1", *in[1];
    int n;
    const arg_opt opts[] = { { "--output", "-o", &out, NULL },
                             { "--channels", NULL, &channels_s, NULL },
                             { "--factor", NULL, &factor_s, NULL },
                             { "--seed", NULL, &seed_s, NULL },
                             { 0 } };
    int rc = args_parse(argc, argv, opts, in, 1, &n, usage);
    if (rc >= 0)
        return rc;
    long channels;
    double factor;
    uint64_t seed;
    /* Ranges here only keep the values representable; the library says what is allowed. */
    if (!args_int("outliers", "--channels", channels_s, INT_MIN, INT_MAX, &channels) ||
        !args_double("outliers", "--factor", factor_s, -FLT_MAX, FLT_MAX, &factor) ||
        !args_u64("outliers", "--seed", seed_s, &seed))
        return 2;
    if (n != 1 || !out) {
        fprintf(stderr, "lmq outliers: need IN.lmq and -o OUT.lmq\n%s", usage);
        return 2;
    }
    lmq_err err;
    const char *inputs[] = { in[0] };
    cal_outlier_opts o = { .channels = (int)channels, .factor = (float)factor, .seed = seed };
    if (lmq_output_check(out, inputs, 1, &err) || cal_outliers_file(in[0], out, &o, &err)) {
        fprintf(stderr, "lmq outliers: %s\n", err.msg);
        return 1;
    }
    printf("%s: %s with %d channel%s per block and input scaled by %g (seed %llu)\n", out, in[0], o.channels,
           o.channels == 1 ? "" : "s", (double)o.factor, (unsigned long long)seed);
    return 0;
}
