/* The public API (include/lmq.h): thin wrappers over the stages, turning lmq_err into
 * lmq_status and internal structures into opaque handles. */
#include "include/lmq.h"

#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "calibrate/methods.h"
#include "common/err.h"
#include "convert/convert.h"
#include "export/compressed_tensors.h"
#include "export/gguf.h"
#include "formats/artefact.h"
#include "formats/container.h"
#include "formats/manifest.h"
#include "quantize/quantize.h"
#include "runtime/artefact.h"
#include "verify/run.h"

/* The public codes are lmq_code's values. */
#define SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME(LMQ_STATUS_OK, LMQ_OK) && SAME(LMQ_STATUS_IO, LMQ_E_IO) && SAME(LMQ_STATUS_FORMAT, LMQ_E_FORMAT) &&
                   SAME(LMQ_STATUS_CHECKSUM, LMQ_E_CHECKSUM) && SAME(LMQ_STATUS_NOMEM, LMQ_E_NOMEM) &&
                   SAME(LMQ_STATUS_ARG, LMQ_E_ARG) && SAME(LMQ_STATUS_UNSUPPORTED, LMQ_E_UNSUPPORTED) &&
                   SAME(LMQ_STATUS_NUMERIC, LMQ_E_NUMERIC) && SAME(LMQ_STATUS_RECIPE, LMQ_E_RECIPE),
               "include/lmq.h's codes follow common/err.h");
_Static_assert(sizeof(((lmq_status *)0)->message) == sizeof(((lmq_err *)0)->msg), "one message size");

/* Copies err into st (when given) and returns the code. */
static int done(lmq_code c, const lmq_err *err, lmq_status *st)
{
    if (st) {
        st->code = (int)c;
        memcpy(st->message, c ? err->msg : "", c ? sizeof st->message : 1);
    }
    return (int)c;
}

static int fail(lmq_code c, const char *msg, lmq_status *st)
{
    lmq_err err;
    return done(lmq_fail(&err, c, "%s", msg), &err, st);
}

const char *lmq_version(void)
{
    return LMQ_TOOL_VERSION;
}

const char *lmq_status_name(int code)
{
    return lmq_code_name((lmq_code)code);
}

int lmq_convert_file(const char *src, const char *out_path, const lmq_convert_options *opts, lmq_status *st)
{
    const lmq_convert_options o = opts ? *opts : (lmq_convert_options){ 0 };
    const lmq_convert_opts co = { .tokenizer = o.tokenizer, .split_qkv = o.split_qkv, .zstd = o.zstd };
    lmq_err err;
    lmq_plan p;
    lmq_code c = lmq_convert_write(src, out_path, &co, &p, &err);
    if (!c)
        lmq_plan_free(&p);
    return done(c, &err, st);
}

int lmq_quantize_file(const char *in_path, const char *recipe_path, const char *out_path,
                      const lmq_quantize_options *opts, lmq_status *st)
{
    const lmq_quantize_options o = opts ? *opts : (lmq_quantize_options){ 0 };
    const char *inputs[] = { in_path, recipe_path, o.stats, o.calib_text };
    const q_opts qo = { .threads = o.threads };
    const cal_quantize_opts co = { .q = qo, .calib_text = o.calib_text };
    lmq_err err;
    lmq_code c = lmq_output_check(out_path, inputs, 4, &err);
    if (!c)
        c = o.stats ? cal_quantize_file(in_path, recipe_path, o.stats, out_path, &co, &err)
                    : q_quantize_file(in_path, recipe_path, out_path, &qo, &err);
    return done(c, &err, st);
}

/* ---- verify ---- */

struct lmq_verify_report {
    vf_report r;
};

int lmq_verify(const char *reference, const char *const *candidates, int n_candidates, const char *text_path,
               const lmq_verify_options *opts, lmq_verify_report **out, lmq_status *st)
{
    const lmq_verify_options o = opts ? *opts : (lmq_verify_options){ 0 };
    const vf_run_opts vo = { .ctx = o.ctx, .threads = o.threads, .speed_only = o.speed_only,
                             .bandwidth_gbps = o.bandwidth_gbps, .device = o.device };
    *out = NULL;
    lmq_verify_report *r = calloc(1, sizeof *r);
    if (!r)
        return fail(LMQ_E_NOMEM, "out of memory", st);
    lmq_err err;
    lmq_code c = vf_run(reference, candidates, n_candidates, text_path, &vo, &r->r, &err);
    if (c)
        free(r);
    else
        *out = r;
    return done(c, &err, st);
}

int lmq_verify_rows(const lmq_verify_report *r)
{
    return r ? r->r.n_rows : 0;
}

int lmq_verify_row_get(const lmq_verify_report *r, int i, lmq_verify_row *row)
{
    if (!r || i < 0 || i >= r->r.n_rows)
        return LMQ_STATUS_ARG;
    const vf_row *v = &r->r.rows[i];
    *row = (lmq_verify_row){ .path = v->path,
                             .scheme = v->scheme,
                             .linear_bpw = v->linear_bpw,
                             .mib = v->mib,
                             .ppl = v->res.ppl,
                             .dppl_pct = v->dppl_pct,
                             .top1 = v->res.top1,
                             .kl_mean = v->res.kl_mean,
                             .prefill_tps = v->prefill_tps,
                             .decode_tps = v->decode_tps };
    return LMQ_STATUS_OK;
}

void lmq_verify_free(lmq_verify_report *r)
{
    if (r)
        free((void *)r->r.rows);
    free(r);
}

/* ---- audit ---- */

typedef struct {
    char *check, *tensor, *message;
    int code;
} problem;

struct lmq_audit_report {
    problem *p;
    int n, cap, nomem;
};

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void on_problem(void *ctx, const char *check, const char *tensor, lmq_code code, const char *msg)
{
    struct lmq_audit_report *r = ctx;
    if (r->n == r->cap) {
        problem *p = realloc(r->p, (size_t)(r->cap ? 2 * r->cap : 8) * sizeof *p);
        if (!p) {
            r->nomem = 1;
            return;
        }
        r->p = p;
        r->cap = r->cap ? 2 * r->cap : 8;
    }
    problem *p = &r->p[r->n++];
    *p = (problem){ strdup(check), dup_or_null(tensor), strdup(msg), (int)code };
    r->nomem |= !p->check || !p->message || (tensor && !p->tensor);
}

int lmq_audit(const char *path, lmq_audit_report **out, lmq_status *st)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return fail(LMQ_E_NOMEM, "out of memory", st);
    lmq_audit_artefact(path, NULL, on_problem, *out, NULL);
    if ((*out)->nomem) {
        lmq_audit_free(*out);
        *out = NULL;
        return fail(LMQ_E_NOMEM, "out of memory", st);
    }
    return done(LMQ_OK, NULL, st);
}

int lmq_audit_problems(const lmq_audit_report *r)
{
    return r ? r->n : 0;
}

int lmq_audit_problem_get(const lmq_audit_report *r, int i, lmq_audit_problem *p)
{
    if (!r || i < 0 || i >= r->n)
        return LMQ_STATUS_ARG;
    *p = (lmq_audit_problem){ r->p[i].check, r->p[i].tensor, r->p[i].code, r->p[i].message };
    return LMQ_STATUS_OK;
}

void lmq_audit_free(lmq_audit_report *r)
{
    for (int i = 0; r && i < r->n; i++) {
        free(r->p[i].check);
        free(r->p[i].tensor);
        free(r->p[i].message);
    }
    if (r)
        free(r->p);
    free(r);
}

/* ---- artefacts ---- */

struct lmq_artefact {
    lmq_container c;
};

int lmq_artefact_open(const char *path, lmq_artefact **out, lmq_status *st)
{
    *out = NULL;
    lmq_artefact *a = calloc(1, sizeof *a);
    if (!a)
        return fail(LMQ_E_NOMEM, "out of memory", st);
    lmq_err err;
    lmq_code c = lmq_container_open(&a->c, path, &err);
    if (c)
        free(a);
    else
        *out = a;
    return done(c, &err, st);
}

int lmq_artefact_tensors(const lmq_artefact *a)
{
    return a->c.n_tensors;
}

const char *lmq_artefact_manifest(const lmq_artefact *a, size_t *size)
{
    *size = a->c.manifest_size;
    return a->c.manifest;
}

void lmq_artefact_close(lmq_artefact *a)
{
    if (a)
        lmq_container_close(&a->c);
    free(a);
}

/* ---- export ---- */

int lmq_export_compressed_tensors(const char *in_path, const char *out_dir, lmq_status *st)
{
    lmq_err err;
    return done(ct_export(in_path, out_dir, 0, NULL, &err), &err, st);
}

int lmq_export_gguf(const char *in_path, const char *out_path, int allow_requantize, lmq_status *st)
{
    lmq_err err;
    return done(lmq_gguf_export(in_path, out_path, allow_requantize, NULL, &err), &err, st);
}
