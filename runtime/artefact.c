#include "runtime/artefact.h"

#include <stdlib.h>
#include <string.h>

#include "formats/artefact.h"
#include "tokenizer/tokenizer.h"
#include "schemes/scheme.h"

/* The container has checked each tensor's size against its encoding's layout; what is left is
 * the values: fp32 weights finite, scales (and float codes) finite and >= 0. The loader and audit
 * both check with this. */
static lmq_code check_values(const lmq_tensor_entry *t, const void *raw, lmq_err *err)
{
    if (t->q.dtype == LMQ_T_F32) {
        lmq_tensor view = { .ndim = t->ndim };
        memcpy(view.name, t->name, sizeof view.name);
        memcpy(view.shape, t->shape, sizeof view.shape);
        return lmq_tensor_finite(&view, raw, err);
    }
    const int64_t rows = t->ndim > 1 ? t->shape[0] : 1;
    return q_validate(&t->q, raw, t->raw_size, rows, lmq_entry_numel(t) / rows, err);
}

/* The tokenizer m->arch names, opened from m's files as generate and verify open it. */
static lmq_code tokenizer_opens(const lmq_model *m, lmq_err *err)
{
    if (m->arch.tokenizer == LMQ_TOK_NONE)
        return LMQ_OK;
    tok_tokenizer *tok = NULL;
    lmq_code rc = tok_open_model(m, &tok, err);
    tok_free(tok);
    return rc;
}

lmq_code rt_load_artefact(const char *path, lmq_model *out, lmq_err *err)
{
    lmq_code rc = lmq_container_read_model(path, check_values, out, err);
    if (!rc && (rc = tokenizer_opens(out, err))) {
        lmq_err_prefix(err, "%s: ", path);
        lmq_model_free(out);
    }
    return rc;
}

/* An lmq_issue_fn keeping the first problem in the lmq_err ctx, the tensor or file named. */
static void keep_first(void *ctx, const char *tensor, lmq_code code, const char *msg)
{
    lmq_err *e = ctx;
    if (!e->code)
        lmq_fail(e, code, "%s%s%s", tensor ? tensor : "", tensor ? ": " : "", msg);
}

static void report(lmq_issue_fn fn, void *ctx, const char *name, const lmq_err *e)
{
    if (fn)
        fn(ctx, name, e->code, e->msg);
}

int rt_audit_values(const lmq_container *c, lmq_issue_fn fn, void *ctx)
{
    int bad = 0;
    for (int k = 0; k < c->n_tensors; k++) {
        const lmq_tensor_entry *t = &c->tensors[c->by_offset[k]];
        if (lmq_entry_is_file(t))
            continue;
        const void *raw;
        void *owned;
        lmq_err e;
        lmq_code rc = lmq_container_view(c, t, &raw, &owned, &e);
        if (!rc)
            rc = check_values(t, raw, &e);
        free(owned);
        lmq_container_release(c, t);
        if (rc && rc != LMQ_E_CHECKSUM) {
            bad++;
            report(fn, ctx, t->q.dtype == LMQ_T_F32 ? NULL : t->name, &e); /* (lmq_tensor_finite names it) */
        }
    }
    return bad;
}

/* The carried files, as a model holding nothing else for tok_open_model. Files whose checksum or
 * name is bad are left out: the checksum and files checks name them. */
static lmq_code carried_files(const lmq_container *c, lmq_model *m)
{
    for (int i = 0; i < c->n_tensors; i++) {
        const lmq_tensor_entry *t = &c->tensors[i];
        void *data;
        lmq_err e;
        if (!lmq_entry_is_file(t) || lmq_file_name_check(lmq_entry_file_name(t), &e))
            continue;
        lmq_code rc = lmq_container_read_alloc(c, t, &data, &e);
        if (rc == LMQ_E_NOMEM)
            return rc;
        if (!rc && (rc = lmq_model_add_file(m, lmq_entry_file_name(t), data, t->raw_size, &e)))
            return rc;
    }
    return LMQ_OK;
}

lmq_code rt_artefact_check(const lmq_container *c, const lmq_manifest *man, lmq_err *err)
{
    lmq_err first = { 0 };
    if (rt_audit_values(c, keep_first, &first) || lmq_container_check_files(c, keep_first, &first) ||
        rt_audit_tokenizer(c, man, keep_first, &first))
        return lmq_fail(err, first.code, "%s", first.msg);
    return LMQ_OK;
}

int rt_audit_tokenizer(const lmq_container *c, const lmq_manifest *man, lmq_issue_fn fn, void *ctx)
{
    if (man->kind == LMQ_KIND_STATS) /* statistics carry no model */
        return 0;
    lmq_model m;
    lmq_model_init(&m);
    m.arch = man->arch;
    lmq_err e;
    lmq_code rc = carried_files(c, &m);
    if (rc)
        lmq_fail(&e, rc, "out of memory reading the carried files");
    else
        rc = tokenizer_opens(&m, &e);
    lmq_model_free(&m);
    if (!rc)
        return 0;
    report(fn, ctx, NULL, &e);
    return 1;
}
