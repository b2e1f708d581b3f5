/* lmq audit: runs every check in the table below on each artefact; prints one line per problem
 * naming the file and tensor, then an OK or FAILED line per file. Exit 0 when all pass, 1 when
 * any check failed, 2 for usage errors. */
#include <stdio.h>
#include <string.h>

#include "formats/container.h"
#include "formats/manifest.h"
#include "runtime/artefact.h"
#include "tools/cmd.h"

typedef struct {
    const char *path;
    const char *check; /* the check running, named in its problem lines */
    const lmq_container *c;
    const lmq_manifest *man; /* NULL when the manifest does not parse */
    int problems;
} audit;

static void report(void *ctx, const char *tensor, lmq_code code, const char *msg)
{
    audit *a = ctx;
    (void)code;
    a->problems++;
    if (tensor)
        printf("%s: %s: tensor %s: %s\n", a->path, a->check, tensor, msg);
    else
        printf("%s: %s: %s\n", a->path, a->check, msg);
}

/* Every tensor checksum (zstd decoded) and the whole-file checksum. */
static void check_checksums(audit *a)
{
    lmq_container_verify(a->c, report, a, NULL);
}

/* Keys, types and enum values (parse), then the manifest against the index. */
static void check_manifest(audit *a)
{
    if (!a->man)
        return;
    lmq_manifest_check(a->man, a->c->tensors, a->c->n_tensors, a->c->version, report, a);
}

/* What a loader checks of the stored numbers (runtime/artefact.h). */
static void check_values(audit *a)
{
    rt_audit_values(a->c, report, a);
}

/* Carried-file names: plain names only. */
static void check_files(audit *a)
{
    lmq_container_check_files(a->c, report, a);
}

/* The carried tokenizer opens as generate and verify open it. */
static void check_tokenizer(audit *a)
{
    if (a->man)
        rt_audit_tokenizer(a->c, a->man, report, a);
}

/* Policy checks (manifests/ policies) become rows here. */
static const struct {
    const char *name;
    void (*run)(audit *);
} checks[] = {
    { "checksum", check_checksums },
    { "manifest", check_manifest },
    { "values", check_values },
    { "files", check_files },
    { "tokenizer", check_tokenizer },
};

static int audit_file(const char *path)
{
    audit a = { .path = path };
    lmq_container c;
    lmq_manifest man;
    lmq_err err = { 0 };
    if (lmq_container_open(&c, path, &err)) {
        printf("%s\n", err.msg); /* names the file already */
        printf("%s: FAILED (cannot open)\n", path);
        return 1;
    }
    a.c = &c;
    if (lmq_manifest_parse(c.manifest, c.manifest_size, &man, &err) == LMQ_OK) {
        a.man = &man;
    } else {
        printf("%s: %s\n", path, err.msg); /* "manifest: <key>: <what is wrong>" */
        a.problems++;
    }
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        a.check = checks[i].name;
        checks[i].run(&a);
    }
    if (a.problems)
        printf("%s: FAILED (%d problem%s)\n", path, a.problems, a.problems == 1 ? "" : "s");
    else
        printf("%s: OK (%d entries, checksums, manifest, values, file names and tokenizer verified)\n", path,
               c.n_tensors);
    if (a.man)
        lmq_manifest_free(&man);
    lmq_container_close(&c);
    return a.problems ? 1 : 0;
}

int cmd_audit(int argc, char **argv)
{
    static const char usage[] = "usage: lmq audit A.lmq [B.lmq ...]\n"
                                "Verifies every tensor checksum, the file checksum and the manifest\n"
                                "(keys, types, ranges, one entry per tensor, true bits per weight,\n"
                                "totals), then what a loader checks: every stored scale, zero point\n"
                                "and float decodes to a finite number (one tensor in memory at a\n"
                                "time), carried files have plain names, the tokenizer parses and fits\n"
                                "the vocabulary.\n"
                                "Exit status: 0 all passed, 1 a check failed, 2 usage error.\n";
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(usage, stdout);
        return 0;
    }
    for (int i = 1; i < argc; i++)
        if (argv[i][0] == '-') {
            fprintf(stderr, "lmq audit: unknown option '%s'\n%s", argv[i], usage);
            return 2;
        }
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    int failed = 0;
    for (int i = 1; i < argc; i++)
        failed |= audit_file(argv[i]);
    return failed ? 1 : 0;
}
