/* lmq: the command line. Dispatches to one subcommand per pipeline stage. */
#include <stdio.h>
#include <string.h>

#include "common/file.h"
#include "tools/cmd.h"

static const struct {
    const char *name;
    int (*run)(int, char **);
    const char *usage;
} commands[] = {
    { "convert", cmd_convert, "convert SRC -o OUT.lmq [--tokenizer FILE]   import a checkpoint" },
    { "calibrate", cmd_calibrate, "calibrate MODEL.lmq --text FILE -o STATS.lmq  activation statistics" },
    { "quantize", cmd_quantize, "quantize IN.lmq --recipe R.yaml -o OUT.lmq  apply a recipe" },
    { "export", cmd_export, "export A.lmq --to gguf -o OUT.gguf [--allow-requantize]  for llama.cpp" },
    { "verify", cmd_verify, "verify A.lmq [B.lmq ...] --text FILE [--reference REF.lmq] [--ctx N]" },
    { "generate", cmd_generate, "generate MODEL.lmq [--prompt TEXT] [-n N] [--temp T] [--top-p P] [--seed S]" },
    { "inspect", cmd_inspect, "inspect A.lmq                               manifest and tensor table" },
    { "manifest", cmd_manifest, "manifest A.lmq [--json]                     the manifest alone (YAML or JSON)" },
    { "audit", cmd_audit, "audit PATH [...] [--policy P ...] [--expect FILE|DIR] [--format text|json|junit] [--output FILE]  checksums, manifest, loader and policy checks" },
    { "diff", cmd_diff, "diff A.lmq B.lmq|EXPECTED.yaml [--json] [--tolerance T]  what differs between two manifests" },
    { "synth", cmd_synth, "synth --shape SHAPE -o DIR [--seed S]       a real-shape checkpoint of random weights" },
    { "outliers", cmd_outliers, "outliers IN.lmq -o OUT.lmq [--channels 4] [--factor 30] [--seed 1]  a test model with activation outliers" },
    { "budget", cmd_budget, "budget MODEL.lmq|--shape S --memory 80GiB [--ctx N] [--kv fp16|int8]  KV-cache sizing" },
    { "export", cmd_export, "export A.lmq --to TARGET -o OUT             another tool's format (compressed-tensors)" },
    { "probe", cmd_probe, "probe [--device cpu|cuda] [--mib N] [--threads N] [--json]  memory (or device copy) bandwidth" },
};

static void usage(FILE *f)
{
    fprintf(f, "usage: lmq COMMAND [ARGS]\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  lmq %s\n", commands[i].usage);
    fprintf(f, "\n'lmq COMMAND --help' describes a command's options.\n");
}

static void on_stale(void *user, const char *path, int removed)
{
    (void)user;
    fprintf(stderr, "lmq: %s: removed %d stale temporary file%s of an interrupted run\n", path, removed,
            removed == 1 ? "" : "s");
}

int main(int argc, char **argv)
{
    lmq_atomic_on_stale(on_stale, NULL);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "lmq: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
