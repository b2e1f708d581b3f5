/* lmq export: an artefact written in another tool's format, one row per target. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/gguf.h"
#include "export/compressed_tensors.h"
#include "tools/args.h"
#include "tools/cmd.h"

static const char usage[] =
    "usage: lmq export A.lmq --to TARGET -o OUT [--allow-requantize] [--force]\n"
    "Writes the artefact for another runtime. Targets:\n"
    "  gguf                OUT is a GGUF file (llama.cpp). Encodings map exactly where the grids\n"
    "                      coincide (fp32, fp16, bf16; int8 and int4 symmetric g32 as Q8_0 and\n"
    "                      Q4_0; GGUF's block types, imported or quantised by a recipe, as they\n"
    "                      are: q8_0 ... q6_k, iq4_nl, iq4_xs); any other is refused,\n"
    "                      naming the tensor, unless --allow-requantize re-quantises it (to Q8_0;\n"
    "                      F32 where a row is not a whole number of 32-weight blocks), listing\n"
    "                      each such tensor here and in the output's metadata (lmq.requantized).\n"
    "  compressed-tensors  OUT is a directory: model.safetensors in the compressed-tensors layout\n"
    "                      vLLM loads (pack-quantized int4/int8, int-quantized W8A8, naive-quantized\n"
    "                      int3/int2; mixed-precision, a format per config group, where they mix),\n"
    "                      config.json with the Hugging Face architecture and quantization_config,\n"
    "                      and the tokenizer files the artefact carries. Grids the format cannot\n"
    "                      hold exactly (embeddings quantised, fp8, zero points outside the code\n"
    "                      range, groups that do not divide a row) are refused, naming the tensor\n"
    "                      (no --allow-requantize). The directory is written whole under another\n"
    "                      name and renamed into place; OUT must be absent or empty, or --force\n"
    "                      replaces an earlier export whole (never one holding A.lmq, never a link).\n";

/* The command's options a target may take. */
typedef struct {
    int allow_requantize, force;
} export_opts;

static lmq_code export_gguf(const char *in, const char *out, const export_opts *o, lmq_err *err)
{
    lmq_gguf_report rep;
    lmq_code c = lmq_gguf_export(in, out, o->allow_requantize, &rep, err);
    if (!c && rep.requantized)
        printf("re-quantised (--allow-requantize):\n%s", rep.log);
    if (!c)
        printf("%s: gguf, %d tensors, %d re-quantised\n", out, rep.tensors, rep.requantized);
    free(rep.log);
    return c;
}

/* OUT is a directory, written whole (ct_export). */
static lmq_code export_ct(const char *in, const char *out, const export_opts *o, lmq_err *err)
{
    ct_summary s;
    lmq_code c = ct_export(in, out, o->force, &s, err);
    if (!c)
        printf("%s: %d quantised Linear modules (%s, %d config group%s), %d float tensors\n", out, s.quantized,
               s.format ? s.format : "no quantization_config", s.groups, s.groups == 1 ? "" : "s", s.plain);
    return c;
}

static const struct {
    const char *name;
    lmq_code (*run)(const char *in, const char *out, const export_opts *o, lmq_err *err);
    int requantizes; /* takes --allow-requantize */
    int replaces;    /* takes --force */
} targets[] = {
    { "gguf", export_gguf, 1, 0 },
    { "compressed-tensors", export_ct, 0, 1 },
};

int cmd_export(int argc, char **argv)
{
    const char *to = NULL, *out = NULL, *in[1];
    int n;
    export_opts o = { 0 };
    const arg_opt opts[] = { { "--to", NULL, &to, NULL },
                             { "--output", "-o", &out, NULL },
                             { "--allow-requantize", NULL, NULL, &o.allow_requantize },
                             { "--force", NULL, NULL, &o.force },
                             { 0 } };
    int rc = args_parse(argc, argv, opts, in, 1, &n, usage);
    if (rc >= 0)
        return rc;
    if (n != 1 || !to || !out) {
        fprintf(stderr, "lmq export: need A.lmq, --to TARGET and -o OUT\n%s", usage);
        return 2;
    }
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
        if (!strcmp(to, targets[i].name)) {
            if ((o.allow_requantize && !targets[i].requantizes) || (o.force && !targets[i].replaces)) {
                fprintf(stderr, "lmq export: %s does not apply to %s\n", o.force ? "--force" : "--allow-requantize", to);
                return 2;
            }
            lmq_err err;
            if (targets[i].run(in[0], out, &o, &err)) {
                fprintf(stderr, "lmq export: %s\n", err.msg);
                return 1;
            }
            return 0;
        }
    fprintf(stderr, "lmq export: unknown target '%s'\n%s", to, usage);
    return 2;
}
