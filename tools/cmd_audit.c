/* lmq audit: runs every check in the table below on each artefact (files, and *.lmq files found
 * under directories), records each problem with its kind, and writes the report as text, JSON
 * or JUnit XML. The exit status is the code of the most severe kind found (the kinds table). */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "audit/audit.h"
#include "common/file.h"
#include "formats/container.h"
#include "formats/manifest.h"
#include "runtime/artefact.h"
#include "tools/args.h"
#include "tools/cmd.h"

/* Failure kinds, least severe first: a root cause (unreadable file, damaged bytes) outranks what
 * follows from it (values that decode to NaN), and a sound artefact's verdict under a rule the
 * user chose (a policy, an expected manifest, a required verification record) comes last; the
 * most severe kind's code is the exit status. */
typedef enum { K_POLICY, K_VERIFY, K_VALUES, K_MANIFEST, K_CHECKSUM, K_FORMAT, K_IO, K_COUNT } kind;
static const struct {
    const char *name;
    int exit;
} kinds[K_COUNT] = {
    [K_POLICY] = { "policy", 8 },     [K_VERIFY] = { "verification", 9 }, [K_VALUES] = { "values", 3 },
    [K_MANIFEST] = { "manifest", 4 }, [K_CHECKSUM] = { "checksum", 5 },   [K_FORMAT] = { "format", 6 },
    [K_IO] = { "io", 7 },
};

typedef struct {
    kind k;
    char *check, *tensor, *msg; /* tensor: NULL when the problem is not about one */
} problem;

typedef struct {
    char *path;
    int opened, n_tensors;
    problem *p;
    int n, cap;
    int worst; /* -1: passed */
} artefact;

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void add(artefact *a, kind k, const char *check, const char *tensor, const char *msg)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 8;
        problem *p = realloc(a->p, (size_t)a->cap * sizeof *p);
        if (!p) {
            fputs("lmq audit: out of memory\n", stderr);
            exit(kinds[K_IO].exit);
        }
        a->p = p;
    }
    a->p[a->n++] = (problem){ k, strdup(check), dup_or_null(tensor), strdup(msg) };
    if ((int)k > a->worst)
        a->worst = (int)k;
}

/* The kind of each check's problems (audit/audit.h: lmq_audit_artefact). */
static const struct {
    const char *check;
    kind k;
} check_kinds[] = {
    { "open", K_FORMAT },   { "parse", K_FORMAT },   { "checksum", K_CHECKSUM }, { "manifest", K_MANIFEST },
    { "values", K_VALUES }, { "files", K_VALUES },   { "tokenizer", K_VALUES },  { "policy", K_POLICY },
    { "verification", K_VERIFY }, { "expect", K_POLICY },
};

/* An error from opening or parsing, without the "path: " its message may start with. */
static const char *unprefixed(const char *msg, const char *path)
{
    size_t n = strlen(path);
    return !strncmp(msg, path, n) && !strncmp(msg + n, ": ", 2) ? msg + n + 2 : msg;
}

/* The kind is the check's, except that a file that cannot be read (or memory that runs out) is
 * an I/O problem, an artefact that fails to open on a checksum is a checksum problem, a tensor
 * blob the checksum pass cannot even decode is damage to the format, and so is an expected
 * manifest that is not one (a rule broken comes as LMQ_E_RECIPE). */
static void report(void *ctx, const char *check, const char *tensor, lmq_code code, const char *msg)
{
    artefact *a = ctx;
    kind k = K_FORMAT;
    for (size_t i = 0; i < sizeof check_kinds / sizeof check_kinds[0]; i++)
        if (!strcmp(check, check_kinds[i].check))
            k = check_kinds[i].k;
    if (code == LMQ_E_IO || code == LMQ_E_NOMEM)
        k = K_IO;
    else if (!strcmp(check, "open") && code == LMQ_E_CHECKSUM)
        k = K_CHECKSUM;
    else if ((k == K_CHECKSUM && code != LMQ_E_CHECKSUM) || (k == K_POLICY && code != LMQ_E_RECIPE))
        k = K_FORMAT;
    add(a, k, check, tensor, strcmp(check, "open") ? msg : unprefixed(msg, a->path));
}

static void audit_file(artefact *a, const lmq_audit_rules *ru)
{
    lmq_audit_artefact(a->path, ru, report, a, &a->n_tensors);
    a->opened = a->n_tensors >= 0;
}

/* ---- the artefacts named on the command line ---- */

typedef struct {
    artefact *a;
    int n, cap;
} list;

static artefact *push(list *l, const char *path)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        artefact *a = realloc(l->a, (size_t)l->cap * sizeof *a);
        if (!a) {
            fputs("lmq audit: out of memory\n", stderr);
            exit(kinds[K_IO].exit);
        }
        l->a = a;
    }
    l->a[l->n] = (artefact){ .path = strdup(path), .worst = -1 };
    return &l->a[l->n++];
}

static int by_name(const struct dirent **x, const struct dirent **y)
{
    return strcmp((*x)->d_name, (*y)->d_name);
}

static int is_lmq(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && !strcmp(name + n - 4, ".lmq");
}

/* *.lmq files under dir, in name order at every level. Links to directories are not followed
 * (no loops); a directory that cannot be listed is an I/O problem of its own. */
static void walk(list *l, const char *dir)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, by_name);
    if (n < 0) {
        char msg[600];
        snprintf(msg, sizeof msg, "cannot list the directory: %s", strerror(errno));
        add(push(l, dir), K_IO, "open", NULL, msg);
        return;
    }
    for (int i = 0; i < n; i++) {
        const char *name = ents[i]->d_name;
        size_t len = strlen(dir) + strlen(name) + 2;
        char *path = malloc(len);
        struct stat st;
        if (path && strcmp(name, ".") && strcmp(name, "..")) {
            snprintf(path, len, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", name);
            if (!lstat(path, &st) && S_ISDIR(st.st_mode))
                walk(l, path);
            else if (is_lmq(name))
                push(l, path);
        }
        free(path);
        free(ents[i]);
    }
    free(ents);
}

/* ---- reports ---- */

static int exit_code(const list *l, int *by_kind)
{
    int worst = -1;
    for (int i = 0; i < l->n; i++)
        if (l->a[i].worst >= 0) {
            by_kind[l->a[i].worst]++;
            if (l->a[i].worst > worst)
                worst = l->a[i].worst;
        }
    return worst < 0 ? 0 : kinds[worst].exit;
}

/* "audit: 5 artefacts, 3 passed, 2 failed (io 0, format 1, ...)": each failed artefact counted
 * once, under its most severe kind. */
static void summary(FILE *f, const list *l, const int *by_kind)
{
    int failed = 0;
    for (int k = 0; k < K_COUNT; k++)
        failed += by_kind[k];
    fprintf(f, "audit: %d artefact%s, %d passed, %d failed (", l->n, l->n == 1 ? "" : "s", l->n - failed, failed);
    for (int k = K_COUNT - 1; k >= 0; k--)
        fprintf(f, "%s %d%s", kinds[k].name, by_kind[k], k ? ", " : ")\n");
}

/* s with its control bytes written as \n or \xHH: a name or message from a file (a file name
 * with a newline) stays on its line of the text report. */
static void put_line_safe(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p == '\n')
            fputs("\\n", f);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
}

static void write_text(FILE *f, const list *l, const int *by_kind, int code)
{
    (void)code;
    for (int i = 0; i < l->n; i++) {
        const artefact *a = &l->a[i];
        for (int j = 0; j < a->n; j++) {
            const problem *p = &a->p[j];
            put_line_safe(f, a->path);
            fprintf(f, ": %s: %s", p->check, p->tensor ? "tensor " : "");
            if (p->tensor) {
                put_line_safe(f, p->tensor);
                fputs(": ", f);
            }
            put_line_safe(f, p->msg);
            fputc('\n', f);
        }
        put_line_safe(f, a->path);
        if (!a->opened)
            fputs(": FAILED (cannot open)\n", f);
        else if (a->n)
            fprintf(f, ": FAILED (%d problem%s)\n", a->n, a->n == 1 ? "" : "s");
        else
            fprintf(f, ": OK (%d entries, checksums, manifest, values, file names and tokenizer verified)\n",
                    a->n_tensors);
    }
    summary(f, l, by_kind);
}

/* Names and messages come from untrusted files: bytes that are not valid UTF-8, and control
 * characters, become '?' so that the JSON and XML stay well-formed. */
static char *clean(const char *s)
{
    size_t n = strlen(s);
    unsigned char *o = malloc(n + 1);
    if (!o)
        return NULL;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        /* Lead byte: sequence length and the range of the second byte (no overlong forms, no
         * surrogates, nothing above U+10FFFF), as RFC 3629's table. */
        int len = u[i] < 0x80 ? 1 : u[i] < 0xc2 ? 0 : u[i] < 0xe0 ? 2 : u[i] < 0xf0 ? 3 : u[i] < 0xf5 ? 4 : 0;
        unsigned lo = u[i] == 0xe0 ? 0xa0 : u[i] == 0xf0 ? 0x90 : 0x80;
        unsigned hi = u[i] == 0xed ? 0x9f : u[i] == 0xf4 ? 0x8f : 0xbf;
        for (int k = 1; k < len; k++)
            if (i + (size_t)k >= n || u[i + k] < (k == 1 ? lo : 0x80) || u[i + k] > (k == 1 ? hi : 0xbf))
                len = 0;
        if (len == 1 && (u[i] < 0x20 || u[i] == 0x7f) && u[i] != '\t' && u[i] != '\n')
            len = 0;
        if (!len) {
            o[i++] = '?';
            continue;
        }
        memcpy(o + i, u + i, (size_t)len);
        i += (size_t)len;
    }
    o[n] = 0;
    return (char *)o;
}

static json_t *jstr(const char *s)
{
    if (!s)
        return json_null();
    char *c = clean(s);
    json_t *j = c ? json_string(c) : NULL;
    free(c);
    return j;
}

static void write_json(FILE *f, const list *l, const int *by_kind, int code)
{
    json_t *arts = json_array(), *kinds_obj = json_object();
    int failed = 0;
    for (int k = 0; k < K_COUNT; k++) {
        json_object_set_new(kinds_obj, kinds[k].name, json_integer(by_kind[k]));
        failed += by_kind[k];
    }
    for (int i = 0; i < l->n; i++) {
        const artefact *a = &l->a[i];
        json_t *probs = json_array();
        for (int j = 0; j < a->n; j++)
            json_array_append_new(probs, json_pack("{s:s,s:o,s:o,s:o}", "kind", kinds[a->p[j].k].name, "check",
                                                   jstr(a->p[j].check), "tensor", jstr(a->p[j].tensor), "message",
                                                   jstr(a->p[j].msg)));
        json_array_append_new(arts, json_pack("{s:o,s:s,s:o,s:i,s:o}", "path", jstr(a->path), "status",
                                              a->n ? "failed" : "passed", "kind",
                                              a->n ? json_string(kinds[a->worst].name) : json_null(), "exit",
                                              a->n ? kinds[a->worst].exit : 0, "problems", probs));
    }
    json_t *root = json_pack("{s:{s:i,s:i,s:i,s:o,s:i},s:o}", "summary", "artefacts", l->n, "passed", l->n - failed,
                             "failed", failed, "failed_by_kind", kinds_obj, "exit", code, "artefacts", arts);
    json_dumpf(root, f, JSON_INDENT(2));
    fputc('\n', f);
    json_decref(root);
}

static void xml_text(FILE *f, const char *s)
{
    static const struct {
        char c;
        const char *esc;
    } ents[] = { { '&', "&amp;" }, { '<', "&lt;" }, { '>', "&gt;" }, { '"', "&quot;" }, { '\'', "&apos;" } };
    char *c = clean(s);
    for (const char *p = c ? c : "?"; *p; p++) {
        size_t e = 0;
        while (e < sizeof ents / sizeof ents[0] && ents[e].c != *p)
            e++;
        if (e < sizeof ents / sizeof ents[0])
            fputs(ents[e].esc, f);
        else if (*p == '\n' || *p == '\t')
            fprintf(f, "&#%d;", *p); /* kept inside attribute values */
        else
            fputc(*p, f);
    }
    free(c);
}

/* A problem as one line of text: check, tensor and message. */
static void xml_problem(FILE *f, const problem *p)
{
    xml_text(f, p->check);
    fputs(": ", f);
    if (p->tensor) {
        fputs("tensor ", f);
        xml_text(f, p->tensor);
        fputs(": ", f);
    }
    xml_text(f, p->msg);
}

/* Check c on artefact a: its first problem's index, -1 when it passed, -2 when it did not run
 * (every check but open after a failed open). */
static int junit_case(const artefact *a, size_t c)
{
    for (int j = 0; j < a->n; j++)
        if (!strcmp(a->p[j].check, check_kinds[c].check))
            return j;
    return !a->opened && c ? -2 : -1;
}

/* One testcase per artefact and check (classname the artefact's path, name the check), so that
 * failures count the failed checks and never exceed the tests; a failed check has one <failure>
 * (type: its kind; message: its first problem; its text: every problem of that check, a line
 * each); the checks an artefact that does not open cannot run are skipped. */
static void write_junit(FILE *f, const list *l, const int *by_kind, int code)
{
    const size_t n_checks = sizeof check_kinds / sizeof check_kinds[0];
    int failures = 0, skipped = 0;
    for (int i = 0; i < l->n; i++)
        for (size_t c = 0; c < n_checks; c++) {
            const int j = junit_case(&l->a[i], c);
            failures += j >= 0;
            skipped += j == -2;
        }
    (void)by_kind, (void)code;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<testsuite name=\"lmq audit\" tests=\"%d\" failures=\"%d\" errors=\"0\" skipped=\"%d\">\n",
            l->n * (int)n_checks, failures, skipped);
    for (int i = 0; i < l->n; i++)
        for (size_t c = 0; c < n_checks; c++) {
            const artefact *a = &l->a[i];
            const int j = junit_case(a, c);
            fputs("  <testcase classname=\"", f);
            xml_text(f, a->path);
            fprintf(f, "\" name=\"%s\"%s", check_kinds[c].check, j == -1 ? "/>\n" : ">\n");
            if (j == -2)
                fputs("    <skipped/>\n  </testcase>\n", f);
            if (j < 0)
                continue;
            fprintf(f, "    <failure type=\"%s\" message=\"", kinds[a->p[j].k].name);
            xml_problem(f, &a->p[j]);
            fputs("\">", f);
            for (int k = j; k < a->n; k++)
                if (!strcmp(a->p[k].check, a->p[j].check)) {
                    fputs("\n", f);
                    xml_problem(f, &a->p[k]);
                }
            fputs("\n    </failure>\n  </testcase>\n", f);
        }
    fputs("</testsuite>\n", f);
}

static const struct {
    const char *name;
    void (*write)(FILE *, const list *, const int *by_kind, int code);
} formats[] = { { "text", write_text }, { "json", write_json }, { "junit", write_junit } };

static void free_list(list *l)
{
    for (int i = 0; i < l->n; i++) {
        for (int j = 0; j < l->a[i].n; j++) {
            free(l->a[i].p[j].check);
            free(l->a[i].p[j].tensor);
            free(l->a[i].p[j].msg);
        }
        free(l->a[i].p);
        free(l->a[i].path);
    }
    free(l->a);
}

/* The report goes to stdout, or to --output (written atomically; the summary line then goes to
 * stdout). Returns 0, or the I/O exit code when the output cannot be written. */
static int emit(size_t fi, const char *output, const list *l, const int *by_kind, int code)
{
    if (!output) {
        formats[fi].write(stdout, l, by_kind, code);
        return fflush(stdout) ? kinds[K_IO].exit : 0;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) {
        fputs("lmq audit: out of memory\n", stderr);
        return kinds[K_IO].exit;
    }
    formats[fi].write(mem, l, by_kind, code);
    fclose(mem);
    lmq_atomic out;
    lmq_err err = { 0 };
    lmq_code rc = lmq_atomic_open(&out, output, &err);
    if (!rc && (rc = lmq_atomic_write(&out, buf, len, &err)) == LMQ_OK)
        rc = lmq_atomic_commit(&out, &err);
    else if (!rc)
        lmq_atomic_abort(&out);
    free(buf);
    if (rc) {
        fprintf(stderr, "lmq audit: %s\n", err.msg);
        return kinds[K_IO].exit;
    }
    summary(stdout, l, by_kind);
    return 0;
}

int cmd_audit(int argc, char **argv)
{
    static const char usage[] =
        "usage: lmq audit PATH [PATH ...] [--policy P ...] [--expect FILE|DIR] [--format text|json|junit]\n"
        "                 [--output FILE]\n"
        "Audits each artefact named, and every *.lmq file under each directory named (recursively,\n"
        "in name order; a directory holding none is a usage error). Verifies every tensor checksum,\n"
        "the file checksum and the manifest (keys, types, ranges, one entry per tensor, true bits\n"
        "per weight, totals), then what a loader checks: every stored scale, zero point and float\n"
        "decodes to a finite number (one tensor in memory at a time), carried files have plain\n"
        "names, the tokenizer parses and fits the vocabulary. Every problem names the file, the\n"
        "tensor or key, and the rule; a summary line counts artefacts passed and failed.\n"
        "--policy P (repeatable) applies the policy file P (keys in manifests/README.md) on top of\n"
        "the built-in base policy; --expect compares each manifest with an expected manifest (YAML\n"
        "as lmq manifest prints it; for a folder, <folder>/<artefact name without .lmq>.yaml) by\n"
        "lmq diff's rules at tolerance 0.\n"
        "--output writes the report atomically (never over an audited file) and prints the summary.\n"
        "Exit status, the most severe kind found winning (policy, then verification, the least):\n"
        "  0 all passed   2 usage   3 values (loader: NaN scales, file names, tokenizer)\n"
        "  4 manifest (schema: the base policy)   5 checksum mismatch\n"
        "  6 format (damaged container, manifest that does not parse)   7 I/O (cannot open or read)\n"
        "  8 policy (a --policy rule, a difference from --expect)\n"
        "  9 verification (a record a policy requires is missing, stale or fails its limits)\n";
    const char *format = "text", *output = NULL;
    const char *expect = NULL;
    const arg_opt opts[] = { { "--format", NULL, &format, NULL },
                             { "--output", "-o", &output, NULL },
                             { "--expect", NULL, &expect, NULL },
                             { 0 } };
    const char **pos = calloc((size_t)argc, sizeof *pos), **policy_paths = calloc((size_t)argc, sizeof *pos);
    lmq_policy **policies = calloc((size_t)argc, sizeof *policies);
    arg_list pl = { policy_paths, 0, argc };
    int n_pos = 0;
    if (!pos || !policy_paths || !policies) {
        fputs("lmq audit: out of memory\n", stderr);
        free(pos), free(policy_paths), free(policies);
        return kinds[K_IO].exit;
    }
    int rc = args_take(&argc, argv, "--policy", &pl);
    if (rc < 0)
        rc = args_parse(argc, argv, opts, pos, argc, &n_pos, usage);
    size_t fi = 0;
    while (rc < 0 && fi < sizeof formats / sizeof formats[0] && strcmp(formats[fi].name, format))
        fi++;
    if (rc < 0 && fi == sizeof formats / sizeof formats[0]) {
        fprintf(stderr, "lmq audit: --format is text, json or junit, not '%s'\n", format);
        rc = 2;
    }
    if (rc < 0 && !n_pos) {
        fputs(usage, stderr);
        rc = 2;
    }
    /* A policy that does not load is bad input to this command, like an unknown option. */
    lmq_audit_rules ru = { policies, 0, expect };
    for (int i = 0; rc < 0 && i < pl.n; i++) {
        lmq_err err = { 0 };
        if (lmq_policy_load(pl.v[i], &policies[ru.n_policies], &err)) {
            fprintf(stderr, "lmq audit: %s\n", err.msg);
            rc = err.code == LMQ_E_NOMEM ? kinds[K_IO].exit : 2;
        } else {
            ru.n_policies++;
        }
    }
    struct stat est;
    if (rc < 0 && expect && stat(expect, &est)) {
        fprintf(stderr, "lmq audit: --expect %s: %s\n", expect, strerror(errno));
        rc = 2;
    }
    list l = { 0 };
    for (int i = 0; rc < 0 && i < n_pos; i++) {
        struct stat st;
        int before = l.n;
        if (stat(pos[i], &st) || !S_ISDIR(st.st_mode)) {
            push(&l, pos[i]); /* a missing file fails to open: an I/O problem, reported */
            continue;
        }
        walk(&l, pos[i]);
        if (l.n == before) {
            fprintf(stderr, "lmq audit: %s: no *.lmq file under this directory\n", pos[i]);
            rc = 2;
        }
    }
    if (rc < 0 && output) {
        /* The output must name none of the audited files nor the folders they were found in. */
        const char **inputs = malloc(((size_t)l.n + (size_t)n_pos) * sizeof *inputs);
        lmq_err err = { 0 };
        if (!inputs) {
            fputs("lmq audit: out of memory\n", stderr);
            rc = kinds[K_IO].exit;
        } else {
            for (int i = 0; i < l.n; i++)
                inputs[i] = l.a[i].path;
            memcpy(inputs + l.n, pos, (size_t)n_pos * sizeof *inputs);
            if (lmq_output_check(output, inputs, l.n + n_pos, &err)) {
                fprintf(stderr, "lmq audit: %s\n", err.msg);
                rc = 2;
            }
            free(inputs);
        }
    }
    if (rc < 0) {
        for (int i = 0; i < l.n; i++)
            if (!l.a[i].n) /* (a directory that could not be listed has its problem already) */
                audit_file(&l.a[i], &ru);
        int by_kind[K_COUNT] = { 0 };
        rc = exit_code(&l, by_kind);
        int out = emit(fi, output, &l, by_kind, rc);
        if (out > rc)
            rc = out;
    }
    free_list(&l);
    for (int i = 0; i < ru.n_policies; i++)
        lmq_policy_free(policies[i]);
    free(policies);
    free(policy_paths);
    free(pos);
    return rc;
}
