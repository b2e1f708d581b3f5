#include "audit/audit.h"

#include <stdio.h>

#include "runtime/artefact.h"

typedef struct {
    lmq_audit_fn fn;
    void *ctx;
    const char *check; /* the check running, named in its problems */
    int n;
    const lmq_container *c;
    const lmq_manifest *man; /* NULL when the manifest does not parse */
    lmq_audit_subject subject;
    const lmq_audit_rules *rules;
} run;

static void issue(void *ctx, const char *tensor, lmq_code code, const char *msg)
{
    run *r = ctx;
    r->n++;
    r->fn(r->ctx, r->check, tensor, code, msg);
}

/* Every tensor checksum (zstd decoded) and the whole-file checksum. */
static void checksums(run *r)
{
    int before = r->n;
    lmq_err err = { 0 };
    if (lmq_container_verify(r->c, issue, r, &err) && r->n == before)
        issue(r, NULL, err.code, err.msg); /* failed before checking any tensor */
}

/* The built-in base policy: the manifest against the index (keys, types and enum values were
 * checked by the parse); then, when its fields are sound (the base policy names those that are
 * not), the architecture against the tensors, as every reader checks it (lmq_artefact_check). */
static void manifest(run *r)
{
    lmq_err err;
    if (r->man && !lmq_policy_check_base(&r->subject, issue, r) &&
        lmq_manifest_check_tensors(r->man, r->c->tensors, r->c->n_tensors, &err))
        issue(r, NULL, err.code, err.msg);
}

static void values(run *r)
{
    rt_audit_values(r->c, issue, r);
}

static void files(run *r)
{
    lmq_container_check_files(r->c, issue, r);
}

/* The carried tokenizer opens as generate and verify open it. */
static void tokenizer(run *r)
{
    if (r->man)
        rt_audit_tokenizer(r->c, r->man, issue, r);
}

static void policies(run *r)
{
    for (int i = 0; r->man && r->rules && i < r->rules->n_policies; i++)
        lmq_policy_check(r->rules->policies[i], &r->subject, issue, r);
}

/* Each policy's required verification record. Whatever is wrong with it is the same failure to
 * the caller (LMQ_E_RECIPE): no current record meeting the requirement. */
static void verification(run *r)
{
    for (int i = 0; r->man && r->rules && i < r->rules->n_policies; i++) {
        const vr_require *req = lmq_policy_verification(r->rules->policies[i]);
        lmq_err err = { 0 };
        if (req && vr_require_check(r->subject.path, req, &err))
            issue(r, NULL, err.code == LMQ_E_NOMEM ? LMQ_E_NOMEM : LMQ_E_RECIPE, err.msg);
    }
}

static void expect_difference(void *ctx, const char *tensor, const char *key, const char *a, const char *b)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s: expected %s, found %s", key, b, a);
    issue(ctx, tensor, LMQ_E_RECIPE, msg);
}

/* The manifest against its expected manifest, by lmq diff's engine at tolerance 0. */
static void expect(run *r)
{
    if (!r->man || !r->rules || !r->rules->expect)
        return;
    char path[4096];
    lmq_expect_path(r->rules->expect, r->subject.path, path, sizeof path);
    lmq_mdoc want;
    lmq_err err = { 0 };
    if (lmq_mdoc_load(path, &want, &err)) {
        /* a missing expected manifest is the artefact failing the rule; a broken one, bad input */
        issue(r, NULL, err.code == LMQ_E_IO ? LMQ_E_RECIPE : err.code, err.msg);
        return;
    }
    lmq_mdoc_diff(r->subject.doc, &want, 0, expect_difference, r);
    lmq_mdoc_free(&want);
}

static const struct {
    const char *name;
    void (*run)(run *r);
} checks[] = {
    { "checksum", checksums }, { "manifest", manifest },   { "values", values }, { "files", files },
    { "tokenizer", tokenizer }, { "policy", policies }, { "verification", verification }, { "expect", expect },
};

int lmq_audit_artefact(const char *path, const lmq_audit_rules *rules, lmq_audit_fn fn, void *ctx,
                       int *n_entries)
{
    run r = { .fn = fn, .ctx = ctx, .check = "open", .rules = rules };
    lmq_container c;
    lmq_mdoc doc;
    lmq_err err = { 0 };
    const int opened = lmq_container_open(&c, path, &err) == LMQ_OK;
    if (n_entries)
        *n_entries = opened ? c.n_tensors : -1;
    if (!opened) {
        issue(&r, NULL, err.code, err.msg);
        return r.n;
    }
    r.c = &c;
    r.subject = (lmq_audit_subject){ .path = path, .format_version = c.version };
    if (lmq_mdoc_from_container(&c, &doc, &err) == LMQ_OK) {
        r.man = &doc.man;
        r.subject.doc = &doc;
    } else {
        r.check = "parse";
        issue(&r, NULL, err.code, err.msg); /* "manifest: <key>: ..." */
    }
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        r.check = checks[i].name;
        checks[i].run(&r);
    }
    if (r.man)
        lmq_mdoc_free(&doc);
    lmq_container_close(&c);
    return r.n;
}
