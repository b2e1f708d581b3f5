/* lmq diff: what differs between two manifests (artefacts or expected manifests), by the engine
 * lmq audit --expect uses (audit/diff.h). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "audit/diff.h"
#include "tools/args.h"
#include "tools/cmd.h"

typedef struct {
    json_t *rows; /* --json: the differences; NULL: printed as found */
} out;

/* A side's value as JSON holds it (the engine's text is JSON), null when the side lacks it. */
static json_t *value(const char *v)
{
    return strcmp(v, "(absent)") ? json_loads(v, JSON_DECODE_ANY, NULL) : json_null();
}

static void difference(void *ctx, const char *tensor, const char *key, const char *a, const char *b)
{
    out *o = ctx;
    if (o->rows)
        json_array_append_new(o->rows, json_pack("{s:s?,s:s,s:o,s:o}", "tensor", tensor, "key", key, "a", value(a), "b",
                                                 value(b)));
    else
        printf("%s%s%s%s: %s -> %s\n", tensor ? "tensor " : "", tensor ? tensor : "", tensor ? ": " : "", key, a, b);
}

int cmd_diff(int argc, char **argv)
{
    static const char usage[] =
        "usage: lmq diff A.lmq B.lmq|EXPECTED.yaml [--json] [--tolerance T]\n"
        "Compares two manifests (an artefact's, or an expected manifest as lmq manifest prints it):\n"
        "architecture, source and calibration checksums, recipe, totals, and per tensor its scheme,\n"
        "bits per weight, relative error, statistics and (two artefacts) the stored bytes' checksum.\n"
        "Input paths (source.path, calibration.source) are not compared. Each difference prints as\n"
        "'[tensor NAME: ]KEY: A -> B' (values as JSON); --json prints {a, b, tolerance, equal,\n"
        "differences: [{tensor, key, a, b}]}, a and b the values themselves (null: that side lacks it).\n"
        "--tolerance T: relative errors and bits per weight within T (absolute) are equal, and the\n"
        "byte checksums are left out (values, not bytes, are compared). Default 0: exact.\n"
        "Exit status: 0 equal, 1 different, 2 usage, 6 a side is not a valid artefact or manifest,\n"
        "7 a side cannot be read.\n";
    int json = 0;
    const char *tol_s = "0";
    const arg_opt opts[] = { { "--json", NULL, NULL, &json }, { "--tolerance", NULL, &tol_s, NULL }, { 0 } };
    const char *pos[2];
    int n_pos;
    double tol;
    int rc = args_parse(argc, argv, opts, pos, 2, &n_pos, usage);
    if (rc >= 0)
        return rc;
    if (n_pos != 2) {
        fputs(usage, stderr);
        return 2;
    }
    if (!args_double("diff", "--tolerance", tol_s, 0, 1e9, &tol))
        return 2;
    lmq_mdoc d[2];
    for (int i = 0; i < 2; i++) {
        lmq_err err = { 0 };
        if (lmq_mdoc_load(pos[i], &d[i], &err)) {
            fprintf(stderr, "lmq diff: %s\n", err.msg);
            if (i)
                lmq_mdoc_free(&d[0]);
            return err.code == LMQ_E_IO || err.code == LMQ_E_NOMEM ? 7 : 6;
        }
    }
    out o = { json ? json_array() : NULL };
    int n = lmq_mdoc_diff(&d[0], &d[1], tol, difference, &o);
    if (json) {
        json_t *root = json_pack("{s:s,s:s,s:f,s:b,s:o}", "a", pos[0], "b", pos[1], "tolerance", tol, "equal", !n,
                                 "differences", o.rows);
        if (!root) { /* (the values are ASCII: a path that is not UTF-8) */
            fputs("lmq diff: --json needs file names in UTF-8\n", stderr);
            n = -1;
        } else {
            json_dumpf(root, stdout, JSON_INDENT(2));
            putchar('\n');
            json_decref(root);
        }
    } else {
        printf("diff: %s and %s %s", pos[0], pos[1], n ? "differ: " : "are equal\n");
        if (n)
            printf("%d difference%s\n", n, n == 1 ? "" : "s");
    }
    lmq_mdoc_free(&d[0]);
    lmq_mdoc_free(&d[1]);
    return n < 0 ? 2 : fflush(stdout) ? 7 : n ? 1 : 0;
}
