/* lmq convert: a checkpoint in, an fp32 artefact out (canonical names, [out, in] weights, the
 * tokenizer carried inside, a manifest saying what the import did). */
#include <stdio.h>

#include "common/clock.h"
#include "convert/convert.h"
#include "formats/container.h"
#include "tools/args.h"
#include "tools/cmd.h"
#include "tools/progress.h"

static const char usage[] =
    "usage: lmq convert SRC -o OUT.lmq [--tokenizer FILE|DIR] [--zstd] [--split-qkv]\n"
    "SRC is a Hugging Face model directory (config.json + model.safetensors, or a sharded\n"
    "checkpoint with model.safetensors.index.json), a .safetensors file with config.json beside\n"
    "it, a llama2.c .bin checkpoint, or a GGUF file (.gguf: encodings kept). The tokenizer is\n"
    "found beside the checkpoint unless --tokenizer names it. --zstd compresses each tensor where that makes it smaller.\n"
    "--split-qkv (GPT-2) stores the fused c_attn as separate attn_q, attn_k, attn_v tensors.\n";

static void show(void *ctx, int done, int total, const char *name)
{
    progress_show(ctx, done, total, name);
}

int cmd_convert(int argc, char **argv)
{
    const char *out = NULL, *tokenizer = NULL, *src[1];
    int zstd = 0, split_qkv = 0, n;
    const arg_opt opts[] = { { "--output", "-o", &out, NULL }, { "--tokenizer", NULL, &tokenizer, NULL },
                             { "--zstd", NULL, NULL, &zstd },
                             { "--split-qkv", NULL, NULL, &split_qkv }, { 0 } };
    int rc = args_parse(argc, argv, opts, src, 1, &n, usage);
    if (rc >= 0)
        return rc;
    if (n != 1 || !out) {
        fprintf(stderr, "lmq convert: need SRC and -o OUT.lmq\n%s", usage);
        return 2;
    }
    lmq_err err;
    const double t0 = lmq_now();
    lmq_plan p;
    progress pr;
    progress_init(&pr, "convert");
    const lmq_convert_opts co = { .tokenizer = tokenizer, .split_qkv = split_qkv, .zstd = zstd,
                                  .progress = show, .progress_ctx = &pr };
    lmq_code c = lmq_convert_write(src[0], out, &co, &p, &err);
    progress_end(&pr);
    if (c) {
        fprintf(stderr, "lmq convert: %s\n", err.msg);
        return 1;
    }
    const lmq_model m = p.model;
    long long params = 0;
    for (int i = 0; i < m.n_tensors; i++)
        params += lmq_tensor_numel(&m.tensors[i]);
    printf("%s: %s, %d layers, dim %d, vocab %d: %d tensors, %lld parameters, %d carried file%s (%.2f s)\n", out,
           m.arch.family == LMQ_FAMILY_GPT2 ? "gpt2" : "llama", m.arch.n_layers, m.arch.dim, m.arch.vocab_size,
           m.n_tensors, params, m.n_files, m.n_files == 1 ? "" : "s",
           lmq_now() - t0);
    lmq_plan_free(&p);
    return 0;
}
