#include "quantize/quantize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pool.h"
#include "common/stats.h"
#include "formats/artefact.h"
#include "formats/container.h"
#include "formats/manifest.h"
#include "quantize/recipe.h"
#include "runtime/artefact.h"
#include "schemes/scheme.h"

/* One run: the input, the recipe's plan and the output under construction. */
typedef struct {
    lmq_container in;
    lmq_manifest src, out;
    q_recipe recipe;
    q_plan plan;
    lmq_writer *w;
    lmq_pool *pool;
    const q_opts *opts; /* may be NULL */
    /* A tensor's encoding and its reconstruction, kept from tensor to tensor: fresh buffers
     * each time cost a page fault and a zeroed page per 4 KiB. */
    uint8_t *enc;
    float *back;
    size_t enc_cap, back_cap;
    /* target_bpw's estimates: the tensor whose weights are at hand (one tensor's at a time) */
    const lmq_tensor_entry *at;
    const float *at_w;
    void *at_buf;
} q_run;

/* The input tensor t as fp32 [rows, cols]. fp32 is used as stored (the container checked its
 * size); other encodings are dequantised into a buffer. *buf as for lmq_container_view. */
static lmq_code input_f32(const q_run *r, const lmq_tensor_entry *t, int64_t rows, int64_t cols, const float **w,
                          void **buf, lmq_err *err)
{
    const void *raw;
    lmq_code c = lmq_container_view(&r->in, t, &raw, buf, err);
    if (c || t->q.dtype == LMQ_T_F32) {
        *w = raw;
        return c;
    }
    float *f = malloc((size_t)(rows * cols) * sizeof *f);
    if (!f)
        c = lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory", t->name);
    else if ((c = q_dequantize(&t->q, raw, t->raw_size, rows, cols, f, r->pool, err))) {
        free(f);
        f = NULL;
    }
    free(*buf);
    *buf = f;
    *w = f;
    return c;
}

/* A tensor as [rows, cols]: its first dimension by the rest (1-D: one row). */
static void rows_cols(const lmq_tensor_entry *t, int64_t *rows, int64_t *cols)
{
    const int64_t n = lmq_entry_numel(t);
    *rows = t->ndim > 1 ? t->shape[0] : 1;
    *cols = n / *rows;
}

/* Grows *buf to hold size bytes (at least 1). */
static lmq_code reserve(void **buf, size_t *cap, size_t size, lmq_err *err)
{
    if (size <= *cap && *buf)
        return LMQ_OK;
    free(*buf);
    *buf = malloc(size ? size : 1);
    *cap = *buf ? size : 0;
    return *buf ? LMQ_OK : lmq_fail(err, LMQ_E_NOMEM, "out of memory (%zu bytes)", size);
}

/* The two steps after encoding a tensor, each one pass that cannot be split (the statistics are
 * sums in a fixed order, the same doubles for any thread count; the writer streams), and
 * independent of each other: they run side by side. */
typedef struct {
    q_run *r;
    const lmq_tensor_entry *t;
    const char *name;
    const lmq_qparams *qp;
    const float *w;
    size_t n, bytes;
    lmq_stats *stats;
    lmq_code c;
    lmq_err *err;
} finish_job;

static void finish_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    finish_job *j = ctx;
    for (int64_t i = begin; i < end; i++)
        if (i == 0)
            lmq_tensor_stats(j->w, j->r->back, j->n, j->stats);
        else
            j->c = lmq_writer_add(j->r->w, j->name, *j->qp, j->t->ndim, j->t->shape, j->r->enc, j->bytes,
                                  LMQ_CODEC_NONE, j->err);
}

static int all_zero(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (x[i] != 0.0f)
            return 0;
    return 1;
}

/* Writes one tensor under `name`: the input's bytes as they are when the plan keeps it,
 * else its fp32 values encoded as the plan says. Records it in the manifest. */
/* A tensor kept at fp32 whose values a transform changed: written and described afresh. */
static lmq_code write_changed_f32(q_run *r, const lmq_tensor_entry *t, const char *name, const q_plan_entry *p,
                                  const q_override *o, lmq_err *err)
{
    lmq_tensor desc = { .ndim = t->ndim, .q = { .dtype = LMQ_T_F32, .gran = LMQ_GRAN_NONE } };
    snprintf(desc.name, sizeof desc.name, "%s", name);
    memcpy(desc.shape, t->shape, sizeof desc.shape);
    lmq_code c = lmq_writer_add(r->w, name, desc.q, t->ndim, t->shape, o->values,
                                (size_t)lmq_entry_numel(t) * sizeof(float), LMQ_CODEC_NONE, err);
    if (c || (c = lmq_manifest_add_plain(&r->out, &desc, o->values, err)))
        return c;
    lmq_manifest_tensor *m = &r->out.tensors[r->out.n_tensors - 1];
    m->calib = o->calib;
    snprintf(m->reason, sizeof m->reason, "%s", p->keep_reason);
    return LMQ_OK;
}

static lmq_code write_tensor(q_run *r, const lmq_tensor_entry *t, const char *name, const q_plan_entry *p,
                             const q_opts *opts, lmq_err *err)
{
    q_override o = { 0 };
    lmq_code c = opts && opts->override ? opts->override(opts->override_ctx, name, &o, err) : LMQ_OK;
    if (c)
        return c;
    if (p->keep_reason && o.values)
        return write_changed_f32(r, t, name, p, &o, err);
    lmq_manifest_tensor *m;
    if ((c = lmq_manifest_add_tensor(&r->out, name, &m, err)))
        return c;
    const lmq_manifest_tensor *was = lmq_manifest_find(&r->src, t->name);
    int64_t n = lmq_entry_numel(t), rows, cols;
    rows_cols(t, &rows, &cols);
    const void *raw;
    void *buf = NULL;
    if (p->keep_reason) { /* source precision: the same bytes, the same record */
        if ((c = lmq_container_view(&r->in, t, &raw, &buf, err)))
            return c;
        c = lmq_writer_add(r->w, name, t->q, t->ndim, t->shape, raw, t->raw_size, LMQ_CODEC_NONE, err);
        free(buf);
        if (was)
            *m = *was;
        m->calib = o.calib;
        snprintf(m->name, sizeof m->name, "%s", name);
        m->linear = lmq_is_linear(name, t->ndim);
        /* Only fp32 carries a reason (the manifest's rule); an earlier recipe's encoding keeps
         * its own record. */
        if (t->q.dtype == LMQ_T_F32)
            snprintf(m->reason, sizeof m->reason, "%s", p->keep_reason);
        return c;
    }
    const float *w = o.values;
    lmq_layout L;
    if ((c = lmq_layout_of(&p->qp, rows, cols, &L, err)) ||
        (!o.values && (c = input_f32(r, t, rows, cols, &w, &buf, err))) ||
        (c = reserve((void **)&r->enc, &r->enc_cap, L.bytes, err)) ||
        (c = reserve((void **)&r->back, &r->back_cap, (size_t)n * sizeof *r->back, err)))
        goto done;
    if (o.bytes)
        memcpy(r->enc, o.bytes, L.bytes);
    else if ((c = q_quantize(&p->qp, w, rows, cols, r->enc, L.bytes, r->pool, err)))
        goto done;
    if ((c = q_dequantize(&p->qp, r->enc, L.bytes, rows, cols, r->back, r->pool, err)))
        goto done;
    m->q = p->qp;
    m->calib = o.calib;
    m->act = p->act;
    q_describe(&p->qp, m->scheme, sizeof m->scheme);
    m->linear = lmq_is_linear(name, t->ndim);
    m->bits = L.bits;
    m->bpw = (double)L.bits / (double)n;
    if (p->qp.dtype == LMQ_T_F32) /* asked for by a rule: the manifest wants every fp32 tensor's reason */
        snprintf(m->reason, sizeof m->reason, "fp32 by the recipe's rule at line %d", p->rule_line);
    finish_job j = { r, t, name, &p->qp, w, (size_t)n, L.bytes, &m->stats, LMQ_OK, err };
    lmq_pool_for(r->pool, 2, 1, finish_task, &j);
    c = j.c;
    if (!c && m->stats.peak > 0 && r->opts && r->opts->warn && all_zero(r->back, (size_t)n)) {
        char msg[200];
        snprintf(msg, sizeof msg, "every weight dequantises to 0 (peak |w| %g is below the smallest step %s "
                 "stores): the tensor is lost (rel_error %g)", m->stats.peak, m->scheme, m->stats.rel_error);
        r->opts->warn(r->opts->warn_ctx, name, msg);
    }
done:
    if (c)
        lmq_err_prefix(err, "tensor %s: ", name);
    free(buf);
    return c;
}

static const q_plan_entry *plan_for(const q_plan *p, const char *name)
{
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->entries[i].name, name))
            return &p->entries[i];
    return NULL;
}

/* The input tensor behind plan entry e (the classifier use of a tied table is the table). */
static const lmq_tensor_entry *tensor_of(const q_run *r, const q_plan_entry *e)
{
    return lmq_container_find(&r->in, e->derived_from_tied ? "tok_embd.weight" : e->name);
}

static void drop_at(q_run *r)
{
    if (r->at)
        lmq_container_release(&r->in, r->at);
    free(r->at_buf);
    r->at = NULL;
    r->at_buf = NULL;
}

/* target_bpw without statistics: a candidate's error is its weights' relative squared error
 * Σ (w' - w)² / Σ w², times its weights (the Gram estimate of calibrate/methods.c with XᵀX = I). */
static lmq_code weight_error(void *ctx, int entry, const lmq_qparams *qp, const q_method *m, double *out, lmq_err *err)
{
    (void)m; /* round to nearest: a recipe with a calibrated method has statistics, and calibrate/ estimates */
    q_run *r = ctx;
    const lmq_tensor_entry *t = tensor_of(r, &r->plan.entries[entry]);
    int64_t rows, cols;
    rows_cols(t, &rows, &cols);
    lmq_layout L;
    lmq_code c = LMQ_OK;
    if (t != r->at) {
        drop_at(r);
        r->at = t;
        c = input_f32(r, t, rows, cols, &r->at_w, &r->at_buf, err);
    }
    const size_t n = (size_t)(rows * cols);
    if (c || (c = lmq_layout_of(qp, rows, cols, &L, err)) || (c = reserve((void **)&r->enc, &r->enc_cap, L.bytes, err)) ||
        (c = reserve((void **)&r->back, &r->back_cap, n * sizeof *r->back, err)) ||
        (c = q_quantize(qp, r->at_w, rows, cols, r->enc, L.bytes, r->pool, err)) ||
        (c = q_dequantize(qp, r->enc, L.bytes, rows, cols, r->back, r->pool, err)))
        return lmq_err_prefix(err, "tensor %s: ", t->name);
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)r->back[i] - (double)r->at_w[i];
        num += d * d;
        den += (double)r->at_w[i] * r->at_w[i];
    }
    *out = (den > 0 ? num / den : num > 0) * (double)n;
    return LMQ_OK;
}

/* target_bpw: the free tensors' encodings, as the caller chose them or chosen here. */
static lmq_code plan_target(q_run *r, const q_opts *opts, lmq_err *err)
{
    const int n = r->plan.n;
    lmq_code c = LMQ_OK;
    if (opts && opts->chosen) {
        for (int i = 0; i < n && !c; i++) {
            q_plan_entry *e = &r->plan.entries[i];
            int k = 0;
            while (k < opts->chosen->n && strcmp(opts->chosen->entries[k].name, e->name))
                k++;
            if (k == opts->chosen->n)
                c = lmq_fail(err, LMQ_E_ARG, "%s: target_bpw's plan has no tensor %s", r->recipe.path, e->name);
            else
                *e = opts->chosen->entries[k];
        }
        return c;
    }
    int64_t *rows = malloc((size_t)(n + 1) * sizeof *rows), *cols = malloc((size_t)(n + 1) * sizeof *cols);
    if (!rows || !cols)
        c = lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    for (int i = 0; i < n && !c; i++)
        rows_cols(tensor_of(r, &r->plan.entries[i]), &rows[i], &cols[i]);
    q_bpw_report rep;
    if (!c && !(c = lmq_pool_create(opts ? opts->threads : 0, &r->pool, err)) &&
        !(c = q_bpw_assign(&r->recipe, &r->plan, rows, cols, weight_error, r, &rep, err))) {
        if (opts && opts->report)
            opts->report(opts->report_ctx, &r->plan, &rep);
        q_bpw_report_free(&rep);
    }
    drop_at(r);
    free(rows);
    free(cols);
    return c;
}

static lmq_code resolve(q_run *r, int check, lmq_err *err)
{
    q_tensor_ref *refs = calloc((size_t)r->in.n_tensors + 1, sizeof *refs);
    if (!refs)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    int n = 0;
    for (int k = 0; k < r->in.n_tensors; k++) {
        const lmq_tensor_entry *t = &r->in.tensors[r->in.by_offset[k]];
        if (!lmq_entry_is_file(t))
            refs[n++] = (q_tensor_ref){ t->name, t->ndim, t->shape[t->ndim - 1], (int)r->src.arch.family };
    }
    lmq_code c = (check ? q_recipe_resolve : q_recipe_plan)(&r->recipe, refs, n, r->src.arch.tied_embedding,
                                                            &r->plan, err);
    free(refs);
    return c;
}

/* The first tensor of the input that is not fp32 (carried files aside), or NULL. */
static const lmq_tensor_entry *first_quantised(const lmq_container *in)
{
    for (int k = 0; k < in->n_tensors; k++) {
        const lmq_tensor_entry *t = &in->tensors[in->by_offset[k]];
        if (!lmq_entry_is_file(t) && t->q.dtype != LMQ_T_F32)
            return t;
    }
    return NULL;
}

lmq_code q_input_check(const lmq_container *in, const char *in_path, const q_opts *opts, lmq_err *err)
{
    const lmq_tensor_entry *q = first_quantised(in);
    char scheme[LMQ_SCHEME_MAX];
    if (!q || (opts && opts->requantize))
        return LMQ_OK;
    return lmq_fail(err, LMQ_E_ARG, "%s: already quantised (tensor %s is %s): quantising it again compounds the "
                    "errors; give --requantize to do it anyway (the manifest then records the input's lineage)",
                    in_path, q->name, q_describe(&q->q, scheme, sizeof scheme));
}

/* The manifest's lineage section: what the already quantised input was. */
static lmq_code record_lineage(q_run *r, const char *in_path, lmq_err *err)
{
    const lmq_manifest *src = &r->src;
    lmq_manifest *o = &r->out;
    char schemes[1024] = "";
    uint64_t bits = 0;
    for (int i = 0; i < src->n_tensors; i++) {
        const char *s = src->tensors[i].scheme;
        bits += src->tensors[i].bits;
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = !strcmp(src->tensors[j].scheme, s);
        if (!seen)
            snprintf(schemes + strlen(schemes), sizeof schemes - strlen(schemes), "%s%s", *schemes ? ", " : "", s);
    }
    o->lineage_file_checksum = r->in.file_checksum;
    o->lineage_recipe_checksum = src->recipe_checksum;
    o->lineage_bpw = src->totals.params ? (double)bits / (double)src->totals.params : 0;
    o->lineage_linear_bpw = src->totals.linear_bpw;
    q_recipe was = { 0 };
    lmq_err ignored;
    /* Its recipe's name, when the embedded text still parses (it did when it was applied). */
    const char *name = src->recipe && !q_recipe_parse(src->recipe, strlen(src->recipe), in_path, &was, &ignored)
                           ? was.name : NULL;
    lmq_code c;
    (void)((c = lmq_manifest_set(&o->lineage_path, in_path, err)) ||
           (c = lmq_manifest_set(&o->lineage_recipe, name, err)) ||
           (c = lmq_manifest_set(&o->lineage_schemes, schemes, err)));
    q_recipe_free(&was);
    return c;
}

static lmq_code start_manifest(q_run *r, const q_opts *opts, lmq_err *err)
{
    lmq_manifest *o = &r->out;
    o->arch = r->src.arch;
    o->source_checksum = r->src.source_checksum;
    o->recipe_checksum = r->recipe.checksum;
    lmq_code c;
    (void)((c = lmq_manifest_set(&o->source, r->src.source, err)) ||
           (c = lmq_manifest_set(&o->source_notes, r->src.source_notes, err)) ||
           (c = lmq_manifest_set(&o->recipe, r->recipe.text, err)));
    const lmq_manifest *cal = opts && opts->stats ? opts->stats : r->src.calibration ? &r->src : NULL;
    if (!c && cal) {
        o->calibration_checksum = cal->calibration_checksum;
        o->calib_model_checksum = cal->calib_model_checksum;
        o->calib_stats_checksum = opts && opts->stats ? opts->stats_checksum : cal->calib_stats_checksum;
        o->calib_windows = cal->calib_windows;
        o->calib_ctx = cal->calib_ctx;
        o->calib_tokens = cal->calib_tokens;
        c = lmq_manifest_set(&o->calibration, cal->calibration, err);
    }
    return c;
}

static lmq_code run(q_run *r, const char *in_path, const char *recipe_path, const char *out_path,
                    const q_opts *opts, lmq_err *err)
{
    lmq_code c;
    r->opts = opts;
    if ((c = lmq_container_open_manifest(&r->in, &r->src, in_path, err)))
        return c;
    if ((c = rt_artefact_check(&r->in, &r->src, err))) /* nothing audit refuses is passed on */
        return lmq_err_prefix(err, "%s: ", in_path);
    const lmq_tensor_entry *q = first_quantised(&r->in);
    if ((c = q_input_check(&r->in, in_path, opts, err)))
        return c;
    if ((c = q_recipe_load(recipe_path, &r->recipe, err)) || (c = resolve(r, 1, err)) ||
        (c = start_manifest(r, opts, err)) || (q && (c = record_lineage(r, in_path, err))))
        return c;
    if (q_recipe_needs_stats(&r->recipe) && !(opts && opts->override))
        return q_recipe_stats_error(&r->recipe, err);
    if (r->recipe.target_bpw > 0 && (c = plan_target(r, opts, err)))
        return c;
    if (opts && opts->plan_only)
        return LMQ_OK;
    const q_plan_entry *lookup = plan_for(&r->plan, "tok_embd.weight"), *classifier = plan_for(&r->plan, "output.weight");
    const int split = r->src.arch.tied_embedding && lookup && classifier && !q_plan_entry_same(lookup, classifier);
    if (split)
        r->out.arch.tied_embedding = 0; /* each use now has a tensor of its own */
    if ((!r->pool && (c = lmq_pool_create(opts ? opts->threads : 0, &r->pool, err))) ||
        (c = lmq_writer_open(&r->w, out_path, err)))
        return c;
    const int total = r->in.n_tensors + split;
    for (int k = 0; k < r->in.n_tensors && !c; k++) {
        const lmq_tensor_entry *t = &r->in.tensors[r->in.by_offset[k]];
        if (lmq_entry_is_file(t)) { /* verbatim */
            const void *raw;
            void *buf;
            if (!(c = lmq_container_view(&r->in, t, &raw, &buf, err))) {
                c = lmq_writer_add_file(r->w, lmq_entry_file_name(t), raw, t->raw_size, LMQ_CODEC_NONE, err);
                free(buf);
            }
            if (!c)
                c = lmq_manifest_add_file(&r->out, lmq_entry_file_name(t), t->raw_size, err);
        } else {
            c = write_tensor(r, t, t->name, plan_for(&r->plan, t->name), opts, err);
        }
        lmq_container_release(&r->in, t); /* read once: resident memory stays about one tensor */
        if (!c && opts && opts->progress)
            opts->progress(opts->progress_ctx, k + 1, total, t->name);
    }
    if (!c && split) {
        c = write_tensor(r, lmq_container_find(&r->in, "tok_embd.weight"), "output.weight", classifier, opts, err);
        if (!c && opts && opts->progress)
            opts->progress(opts->progress_ctx, total, total, "output.weight");
    }
    if (c)
        return c;
    c = lmq_writer_finish(r->w, &r->out, err);
    r->w = NULL; /* finish frees it, whatever the outcome */
    return c;
}

lmq_code q_quantize_file(const char *in_path, const char *recipe_path, const char *out_path, const q_opts *opts,
                         lmq_err *err)
{
    q_run r;
    memset(&r, 0, sizeof r);
    lmq_manifest_init(&r.src);
    lmq_manifest_init(&r.out);
    lmq_code c = run(&r, in_path, recipe_path, out_path, opts, err);
    lmq_writer_abort(r.w);
    lmq_pool_free(r.pool);
    free(r.enc);
    free(r.back);
    q_plan_free(&r.plan);
    q_recipe_free(&r.recipe);
    lmq_manifest_free(&r.out);
    lmq_manifest_free(&r.src);
    if (r.in.data)
        lmq_container_close(&r.in);
    return c;
}

lmq_code q_explain_open(const char *in_path, const char *recipe_path, q_explain *x, lmq_err *err)
{
    q_run r;
    memset(&r, 0, sizeof r);
    memset(x, 0, sizeof *x);
    lmq_manifest_init(&r.src);
    lmq_code c = lmq_container_open_manifest(&r.in, &r.src, in_path, err);
    if (!c && !(c = q_recipe_load(recipe_path, &r.recipe, err)) && !(c = resolve(&r, 0, err)) &&
        !(x->refs = calloc((size_t)r.plan.n + 1, sizeof *x->refs)))
        c = lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    if (!c) {
        const lmq_tensor_entry *q = first_quantised(&r.in);
        snprintf(x->quantised, sizeof x->quantised, "%s", q ? q->name : "");
        x->recipe = r.recipe;
        x->plan = r.plan;
        x->n_refs = r.plan.n;
        for (int i = 0; i < r.plan.n; i++) {
            const char *name = r.plan.entries[i].derived_from_tied ? "tok_embd.weight" : r.plan.entries[i].name;
            const lmq_tensor_entry *t = lmq_container_find(&r.in, name);
            x->refs[i] = (q_tensor_ref){ x->plan.entries[i].name, t->ndim, t->shape[t->ndim - 1],
                                         (int)r.src.arch.family };
        }
    } else {
        q_plan_free(&r.plan);
        q_recipe_free(&r.recipe);
    }
    lmq_manifest_free(&r.src);
    if (r.in.data)
        lmq_container_close(&r.in);
    return c;
}

void q_explain_free(q_explain *x)
{
    q_plan_free(&x->plan);
    q_recipe_free(&x->recipe);
    free(x->refs);
    memset(x, 0, sizeof *x);
}
