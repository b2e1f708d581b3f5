/* lmq export: an artefact written in another tool's format, one row per target. */
#include <stdio.h>
#include <string.h>

#include "export/compressed_tensors.h"
#include "tools/args.h"
#include "tools/cmd.h"

static const char usage[] =
    "usage: lmq export A.lmq --to TARGET -o OUT\n"
    "Writes the artefact for another runtime. Targets:\n"
    "  compressed-tensors  OUT is a directory: model.safetensors in the compressed-tensors layout\n"
    "                      vLLM loads (pack-quantized int4/int8, int-quantized W8A8), config.json\n"
    "                      with the Hugging Face architecture and quantization_config, and the\n"
    "                      tokenizer files the artefact carries. Grids the format cannot hold\n"
    "                      exactly (embeddings quantised, fp8, zero points outside the code range)\n"
    "                      are refused, naming the tensor.\n";

static lmq_code export_ct(const char *in, const char *out, lmq_err *err)
{
    ct_summary s;
    lmq_code c = ct_export(in, out, &s, err);
    if (!c)
        printf("%s: %d quantised Linear modules (%s, %d config group%s), %d float tensors\n", out, s.quantized,
               s.format ? s.format : "no quantization_config", s.groups, s.groups == 1 ? "" : "s", s.plain);
    return c;
}

static const struct {
    const char *name;
    lmq_code (*run)(const char *in, const char *out, lmq_err *err);
} targets[] = {
    { "compressed-tensors", export_ct },
};

int cmd_export(int argc, char **argv)
{
    const char *to = NULL, *out = NULL, *in[1];
    int n;
    const arg_opt opts[] = { { "--to", NULL, &to, NULL }, { "--output", "-o", &out, NULL }, { 0 } };
    int rc = args_parse(argc, argv, opts, in, 1, &n, usage);
    if (rc >= 0)
        return rc;
    if (n != 1 || !to || !out) {
        fprintf(stderr, "lmq export: need A.lmq, --to TARGET and -o OUT\n%s", usage);
        return 2;
    }
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
        if (!strcmp(to, targets[i].name)) {
            lmq_err err;
            if (targets[i].run(in[0], out, &err)) {
                fprintf(stderr, "lmq export: %s\n", err.msg);
                return 1;
            }
            return 0;
        }
    fprintf(stderr, "lmq export: unknown target '%s'\n%s", to, usage);
    return 2;
}
