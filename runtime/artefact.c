#include "runtime/artefact.h"

#include <stdlib.h>
#include <string.h>

#include "formats/artefact.h"
#include "tokenizer/tokenizer.h"
#include "schemes/scheme.h"

/* The container has checked each tensor's size against its encoding's layout; what is left is
 * the values: scales (and float codes) finite. fp32 values are checked by lmq_model_validate
 * when a runtime model is built. */
static lmq_code check_values(const lmq_tensor_entry *t, const void *raw, lmq_err *err)
{
    if (t->q.dtype == LMQ_T_F32)
        return LMQ_OK;
    const int64_t rows = t->ndim > 1 ? t->shape[0] : 1;
    return q_validate(&t->q, raw, t->raw_size, rows, lmq_entry_numel(t) / rows, err);
}

lmq_code rt_load_artefact(const char *path, lmq_model *out, lmq_err *err)
{
    return lmq_container_read_model(path, check_values, out, err);
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
        if (t->q.dtype == LMQ_T_BYTES)
            continue;
        const void *raw;
        void *owned;
        lmq_err e;
        lmq_code rc = lmq_container_view(c, t, &raw, &owned, &e);
        if (!rc && t->q.dtype == LMQ_T_F32) {
            lmq_tensor view = { .ndim = t->ndim };
            memcpy(view.name, t->name, sizeof view.name);
            memcpy(view.shape, t->shape, sizeof view.shape);
            rc = lmq_tensor_finite(&view, raw, &e);
        } else if (!rc) {
            rc = check_values(t, raw, &e);
        }
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
        if (t->q.dtype != LMQ_T_BYTES || strncmp(t->name, LMQ_FILE_PREFIX, LMQ_FILE_PREFIX_LEN) ||
            lmq_file_name_check(t->name + LMQ_FILE_PREFIX_LEN, &e))
            continue;
        lmq_code rc = lmq_container_read_alloc(c, t, &data, &e);
        if (rc == LMQ_E_NOMEM)
            return rc;
        if (!rc && (rc = lmq_model_add_file(m, t->name + LMQ_FILE_PREFIX_LEN, data, t->raw_size, &e)))
            return rc;
    }
    return LMQ_OK;
}

int rt_audit_tokenizer(const lmq_container *c, const lmq_manifest *man, lmq_issue_fn fn, void *ctx)
{
    if (man->arch.tokenizer == LMQ_TOK_NONE || man->kind == LMQ_KIND_STATS) /* statistics carry no model */
        return 0;
    lmq_model m;
    lmq_model_init(&m);
    m.arch = man->arch;
    tok_tokenizer *tok = NULL;
    lmq_err e;
    lmq_code rc = carried_files(c, &m);
    if (rc)
        lmq_fail(&e, rc, "out of memory reading the carried files");
    else
        rc = tok_open_model(&m, &tok, &e);
    tok_free(tok);
    lmq_model_free(&m);
    if (!rc)
        return 0;
    report(fn, ctx, NULL, &e);
    return 1;
}
