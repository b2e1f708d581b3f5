/* lmq audit's built-in checks on one artefact, in the library so that the command and the
 * public API (include/lmq.h) run the same ones. */
#include "runtime/artefact.h"

typedef struct {
    rt_audit_fn fn;
    void *ctx;
    const char *check;
    int n;
} run;

static void issue(void *ctx, const char *tensor, lmq_code code, const char *msg)
{
    run *r = ctx;
    r->n++;
    r->fn(r->ctx, r->check, tensor, code, msg);
}

static void checksums(run *r, const lmq_container *c, const lmq_manifest *man)
{
    (void)man;
    int before = r->n;
    lmq_err err = { 0 };
    if (lmq_container_verify(c, issue, r, &err) && r->n == before)
        issue(r, NULL, err.code, err.msg); /* failed before checking any tensor */
}

static void manifest(run *r, const lmq_container *c, const lmq_manifest *man)
{
    if (man)
        lmq_manifest_check(man, c->tensors, c->n_tensors, c->version, issue, r);
}

static void values(run *r, const lmq_container *c, const lmq_manifest *man)
{
    (void)man;
    rt_audit_values(c, issue, r);
}

static void files(run *r, const lmq_container *c, const lmq_manifest *man)
{
    (void)man;
    lmq_container_check_files(c, issue, r);
}

static void tokenizer(run *r, const lmq_container *c, const lmq_manifest *man)
{
    if (man)
        rt_audit_tokenizer(c, man, issue, r);
}

static const struct {
    const char *name;
    void (*run)(run *r, const lmq_container *c, const lmq_manifest *man);
} checks[] = {
    { "checksum", checksums }, { "manifest", manifest }, { "values", values },
    { "files", files },        { "tokenizer", tokenizer },
};

int rt_audit_artefact(const char *path, rt_audit_fn fn, void *ctx, int *n_entries)
{
    run r = { fn, ctx, "open", 0 };
    lmq_container c;
    lmq_manifest man;
    lmq_err err = { 0 };
    const int opened = lmq_container_open(&c, path, &err) == LMQ_OK;
    if (n_entries)
        *n_entries = opened ? c.n_tensors : -1;
    if (!opened) {
        issue(&r, NULL, err.code, err.msg);
        return r.n;
    }
    const int parsed = lmq_manifest_parse(c.manifest, c.manifest_size, &man, &err) == LMQ_OK;
    if (!parsed) {
        r.check = "parse";
        issue(&r, NULL, err.code, err.msg);
    }
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        r.check = checks[i].name;
        checks[i].run(&r, &c, parsed ? &man : NULL);
    }
    if (parsed)
        lmq_manifest_free(&man);
    lmq_container_close(&c);
    return r.n;
}
