/* lmq: the command line. Dispatches to one subcommand per pipeline stage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/file.h"
#include "formats/manifest.h"
#include "tools/cmd.h"

#ifdef __SANITIZE_ADDRESS__
/* Under AddressSanitizer (make check-asan) the CUDA driver must be able to map the range ASan
 * protects as its shadow gap, or it fails to initialise; ASan asks the program for this when it
 * starts, before the plugin is opened (the program's, so liblmq.so exports only lmq.h). */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "protect_shadow_gap=0";
}
#endif

static const struct {
    const char *name;
    int (*run)(int, char **);
    const char *what;
} commands[] = {
    { "convert", cmd_convert, "import a checkpoint as an fp32 artefact" },
    { "calibrate", cmd_calibrate, "activation statistics for calibrated recipes" },
    { "quantize", cmd_quantize, "apply a recipe" },
    { "export", cmd_export, "another tool's format: GGUF (llama.cpp), compressed-tensors (vLLM)" },
    { "verify", cmd_verify, "perplexity, top-1, KL and speed, side by side" },
    { "generate", cmd_generate, "continue a prompt" },
    { "tokenize", cmd_tokenize, "the token ids of a text, as verify's tokenizer gives them" },
    { "inspect", cmd_inspect, "manifest and tensor table" },
    { "manifest", cmd_manifest, "the manifest alone (YAML or JSON)" },
    { "audit", cmd_audit, "checksums, manifest, loader and policy checks, for CI" },
    { "diff", cmd_diff, "what differs between two manifests" },
    { "synth", cmd_synth, "a real-shape checkpoint of random weights" },
    { "outliers", cmd_outliers, "a test model with activation outliers" },
    { "budget", cmd_budget, "KV-cache sizing: how many sequences fit" },
    { "probe", cmd_probe, "memory (or CUDA device copy) bandwidth" },
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

/* The synopsis of command i: the "usage:" lines of its own --help text (the line and those
 * that continue it, indented), read from a child that runs the command with --help, so the
 * options listed here are the ones the command parses. */
static void print_synopsis(FILE *f, size_t i)
{
    int fd[2];
    fflush(NULL);
    pid_t pid = pipe(fd) ? -1 : fork();
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], STDOUT_FILENO);
        char *argv[] = { (char *)commands[i].name, "--help", NULL };
        int rc = commands[i].run(2, argv);
        fflush(stdout);
        _exit(rc);
    }
    if (pid < 0) {
        fprintf(f, "  lmq %s ...  (%s)\n", commands[i].name, commands[i].what);
        return;
    }
    close(fd[1]);
    FILE *in = fdopen(fd[0], "r");
    char line[1024];
    int in_usage = 0;
    while (in && fgets(line, sizeof line, in)) {
        const int starts = !strncmp(line, "usage: ", 7);
        in_usage = starts || (in_usage && line[0] == ' ');
        /* "usage: " gives way to a 2-space indent; continuation lines move with it. */
        if (in_usage)
            fprintf(f, "  %s", starts ? line + 7 : line + (strspn(line, " ") >= 7 ? 7 : 0));
    }
    if (in)
        fclose(in);
    else
        close(fd[0]);
    waitpid(pid, NULL, 0);
    fprintf(f, "      %s\n", commands[i].what);
}

static void usage(FILE *f)
{
    fprintf(f, "%s: quantise language models and prove what they are worth\n\n"
               "usage: lmq COMMAND [ARGS]   lmq help [COMMAND]   lmq --version\n\n", LMQ_TOOL_VERSION);
    for (size_t i = 0; i < N_COMMANDS; i++)
        print_synopsis(f, i);
    fprintf(f, "\n'lmq help COMMAND' (or 'lmq COMMAND --help') describes a command and its options.\n");
}

static void on_stale(void *user, const char *path, int removed)
{
    (void)user;
    fprintf(stderr, "lmq: %s: removed %d stale temporary file%s of an interrupted run\n", path, removed,
            removed == 1 ? "" : "s");
}

static int find(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(name, commands[i].name))
            return (int)i;
    return -1;
}

static int unknown(const char *name)
{
    fprintf(stderr, "lmq: unknown command '%s'\n\n", name);
    usage(stderr);
    return 2;
}

int main(int argc, char **argv)
{
    lmq_atomic_on_stale(on_stale, NULL);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *a = argv[1];
    if (!strcmp(a, "--version") || !strcmp(a, "-V") || !strcmp(a, "version")) {
        printf("%s\n", LMQ_TOOL_VERSION);
        return 0;
    }
    if (!strcmp(a, "--help") || !strcmp(a, "-h") || (!strcmp(a, "help") && argc == 2)) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(a, "help")) {
        int i = find(argv[2]);
        if (i < 0 || argc > 3)
            return i < 0 ? unknown(argv[2]) : (fprintf(stderr, "usage: lmq help [COMMAND]\n"), 2);
        char *help[] = { argv[2], "--help", NULL };
        return commands[i].run(2, help);
    }
    int i = find(a);
    return i < 0 ? unknown(a) : commands[i].run(argc - 1, argv + 1);
}
