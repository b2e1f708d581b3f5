/* lmq export: an artefact written in another tool's format, one row per target. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/gguf.h"
#include "export/compressed_tensors.h"
#include "tools/args.h"
#include "tools/cmd.h"

static const char usage[] =
    "usage: lmq export A.lmq --to TARGET -o OUT [--allow-requantize]\n"
    "Writes the artefact for another runtime. Targets:\n"
    "  gguf                OUT is a GGUF file (llama.cpp). Encodings map exactly where the grids\n"
    "                      coincide (fp32, fp16, bf16; int8 and int4 symmetric g32 as Q8_0 and\n"
    "                      Q4_0; GGUF's own block types imported earlier); any other is refused,\n"
    "                      naming the tensor, unless --allow-requantize re-quantises it (to Q8_0;\n"
    "                      F32 where a row is not a whole number of 32-weight blocks), listing\n"
    "                      each such tensor here and in the output's metadata (lmq.requantized).\n"
    "  compressed-tensors  OUT is a directory: model.safetensors in the compressed-tensors layout\n"
    "                      vLLM loads (pack-quantized int4/int8, int-quantized W8A8), config.json\n"
    "                      with the Hugging Face architecture and quantization_config, and the\n"
    "                      tokenizer files the artefact carries. Grids the format cannot hold\n"
    "                      exactly (embeddings quantised, fp8, zero points outside the code range)\n"
    "                      are refused, naming the tensor (no --allow-requantize).\n";

static lmq_code export_gguf(const char *in, const char *out, int allow_requantize, lmq_err *err)
{
    lmq_gguf_report rep;
    lmq_code c = lmq_gguf_export(in, out, allow_requantize, &rep, err);
    if (!c && rep.requantized)
        printf("re-quantised (--allow-requantize):\n%s", rep.log);
    if (!c)
        printf("%s: gguf, %d tensors, %d re-quantised\n", out, rep.tensors, rep.requantized);
    free(rep.log);
    return c;
}

/* OUT is a directory: ct_export checks each file it writes. */
static lmq_code export_ct(const char *in, const char *out, int allow_requantize, lmq_err *err)
{
    (void)allow_requantize; /* refused by the table's requantizes = 0 */
    ct_summary s;
    lmq_code c = ct_export(in, out, &s, err);
    if (!c)
        printf("%s: %d quantised Linear modules (%s, %d config group%s), %d float tensors\n", out, s.quantized,
               s.format ? s.format : "no quantization_config", s.groups, s.groups == 1 ? "" : "s", s.plain);
    return c;
}

static const struct {
    const char *name;
    lmq_code (*run)(const char *in, const char *out, int allow_requantize, lmq_err *err);
    int requantizes; /* takes --allow-requantize */
} targets[] = {
    { "gguf", export_gguf, 1 },
    { "compressed-tensors", export_ct, 0 },
};

int cmd_export(int argc, char **argv)
{
    const char *to = NULL, *out = NULL, *in[1];
    int allow = 0, n;
    const arg_opt opts[] = { { "--to", NULL, &to, NULL }, { "--output", "-o", &out, NULL },
                             { "--allow-requantize", NULL, NULL, &allow }, { 0 } };
    int rc = args_parse(argc, argv, opts, in, 1, &n, usage);
    if (rc >= 0)
        return rc;
    if (n != 1 || !to || !out) {
        fprintf(stderr, "lmq export: need A.lmq, --to TARGET and -o OUT\n%s", usage);
        return 2;
    }
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
        if (!strcmp(to, targets[i].name)) {
            if (allow && !targets[i].requantizes) {
                fprintf(stderr, "lmq export: --allow-requantize does not apply to %s\n", to);
                return 2;
            }
            lmq_err err;
            if (targets[i].run(in[0], out, allow, &err)) {
                fprintf(stderr, "lmq export: %s\n", err.msg);
                return 1;
            }
            return 0;
        }
    fprintf(stderr, "lmq export: unknown target '%s'\n%s", to, usage);
    return 2;
}
