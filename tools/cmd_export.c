/* lmq export: an artefact in another tool's format. One row per target format. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/file.h"
#include "convert/gguf.h"
#include "tools/args.h"
#include "tools/cmd.h"

static const char usage[] =
    "usage: lmq export A.lmq --to FORMAT -o OUT [--allow-requantize]\n"
    "FORMAT: gguf (llama.cpp). Encodings map exactly where the grids coincide (fp32, fp16, bf16;\n"
    "int8 and int4 symmetric g32 as Q8_0 and Q4_0; GGUF's own block types imported earlier);\n"
    "any other is refused, naming the tensor, unless --allow-requantize re-quantises it (to Q8_0;\n"
    "F32 where a row is not a whole number of 32-weight blocks), listing each such tensor here\n"
    "and in the output's metadata (lmq.requantized).\n";

static int export_gguf(const char *in, const char *out, int allow_requantize)
{
    lmq_err err;
    lmq_gguf_report rep;
    if (lmq_gguf_export(in, out, allow_requantize, &rep, &err)) {
        fprintf(stderr, "lmq export: %s\n", err.msg);
        return 1;
    }
    if (rep.requantized)
        printf("re-quantised (--allow-requantize):\n%s", rep.log);
    printf("%s: gguf, %d tensors, %d re-quantised\n", out, rep.tensors, rep.requantized);
    free(rep.log);
    return 0;
}

static const struct {
    const char *name;
    int (*run)(const char *in, const char *out, int allow_requantize);
} targets[] = {
    { "gguf", export_gguf },
};

int cmd_export(int argc, char **argv)
{
    const char *out = NULL, *to = NULL, *src[1];
    int allow = 0, n;
    const arg_opt opts[] = { { "--output", "-o", &out, NULL }, { "--to", NULL, &to, NULL },
                             { "--allow-requantize", NULL, NULL, &allow }, { 0 } };
    int rc = args_parse(argc, argv, opts, src, 1, &n, usage);
    if (rc >= 0)
        return rc;
    if (n != 1 || !out || !to) {
        fprintf(stderr, "lmq export: need A.lmq, --to FORMAT and -o OUT\n%s", usage);
        return 2;
    }
    lmq_err err;
    if (lmq_output_check(out, src, 1, &err)) {
        fprintf(stderr, "lmq export: %s\n", err.msg);
        return 1;
    }
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
        if (!strcmp(to, targets[i].name))
            return targets[i].run(src[0], out, allow);
    fprintf(stderr, "lmq export: unknown format '%s'\n%s", to, usage);
    return 2;
}
