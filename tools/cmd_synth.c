/* lmq synth: a checkpoint with a real model's shape and pseudo-random weights, for measuring
 * speed where the real weights are not at hand. */
#include <stdio.h>

#include "common/clock.h"
#include "convert/synth.h"
#include "tools/args.h"
#include "tools/cmd.h"
#include "tools/progress.h"

static const char usage[] =
    "usage: lmq synth --shape SHAPE -o DIR [--seed S]\n"
    "Writes a Hugging Face checkpoint directory that lmq convert reads like any other:\n"
    "config.json, model.safetensors (F32, pseudo-random: normal-ish, std 0.02 for matrices, norms\n"
    "near 1) and a generated tokenizer with the model's vocabulary size. For speed benchmarks:\n"
    "what it generates is noise. The same shape and seed give byte-identical files.\n"
    "  --shape SHAPE   gpt2-124m  (12 layers, dim 768, vocab 50257, tied; 0.5 GB)\n"
    "                  llama-1b   (16 layers, dim 2048, 32/8 heads, vocab 32000; 4.4 GB)\n"
    "                  llama-7b   (32 layers, dim 4096, 32/32 heads, vocab 32000; 27 GB)\n"
    "                  tiny-gpt2, tiny-llama  (2 layers, dim 64, vocab 512: for tests)\n"
    "  --output, -o DIR  the directory (created when missing)\n"
    "  --seed S        0 to 2^64-1 (default 0)\n";

static void on_progress(void *ctx, int done, int total, const char *name)
{
    progress_show(ctx, done, total, name);
}

int cmd_synth(int argc, char **argv)
{
    const char *shape_s = NULL, *out = NULL, *seed_s = "0", *pos[1];
    int n;
    const arg_opt opts[] = { { "--shape", NULL, &shape_s, NULL },
                             { "--output", "-o", &out, NULL },
                             { "--seed", NULL, &seed_s, NULL },
                             { 0 } };
    int rc = args_parse(argc, argv, opts, pos, 0, &n, usage);
    if (rc >= 0)
        return rc;
    if (!shape_s || !out) {
        fprintf(stderr, "lmq synth: need --shape and -o DIR\n%s", usage);
        return 2;
    }
    const cv_synth_shape *shape = cv_synth_find(shape_s);
    if (!shape) {
        char names[256];
        fprintf(stderr, "lmq synth: unknown shape '%s' (%s)\n", shape_s, cv_synth_names(names, sizeof names));
        return 2;
    }
    cv_synth_opts so = { .progress = on_progress };
    if (!args_u64("synth", "--seed", seed_s, &so.seed))
        return 2;
    const double t0 = lmq_now();
    progress pr;
    progress_init(&pr, "synth");
    so.progress_ctx = &pr;
    cv_synth_info info;
    lmq_err err;
    lmq_code c = cv_synth_write(shape, out, &so, &info, &err);
    progress_end(&pr);
    if (c) {
        fprintf(stderr, "lmq synth: %s\n", err.msg);
        return 1;
    }
    printf("%s: %s (%s, %d layers, dim %d, vocab %d), seed %llu: %d tensors, %lld parameters, %.1f MB of "
           "weights (%.2f s)\n",
           out, shape->name, shape->family == LMQ_FAMILY_GPT2 ? "gpt2" : "llama", shape->n_layers, shape->dim,
           shape->vocab_size, (unsigned long long)so.seed, info.n_tensors, (long long)info.params,
           (double)info.weight_bytes / 1e6, lmq_now() - t0);
    return 0;
}
