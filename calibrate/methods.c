#include "calibrate/methods.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate/awq.h"
#include "calibrate/gptq.h"
#include "calibrate/stats.h"
#include "calibrate/transform.h"
#include "quantize/recipe.h"
#include "runtime/artefact.h"
#include "runtime/forward.h"
#include "schemes/scheme.h"
#include "tokenizer/stream.h"

/* One tensor of the model under way. */
typedef struct {
    const float *orig;  /* its values as loaded (fp32 tensors), to tell whether a transform changed them */
    float *values;      /* the fp32 values its encoding was chosen from (after the transforms) */
    uint8_t *bytes;     /* the encoding a method (or the sequential pass) chose; owned */
    lmq_manifest_calib calib;
    const q_plan_entry *plan;
} entry;

typedef struct {
    const cal_quantize_opts *o;
    q_recipe recipe;
    q_plan plan;
    cal_stats st;
    lmq_model m;
    lmq_pool *pool;
    entry *e; /* e[i] for m.tensors[i] */
    float *xscale[LMQ_IN_COUNT]; /* per layer: x_now = x_stats · xscale (NULL rows: 1) */
    int L;
    /* target_bpw's estimates: the statistics of the input at hand (one at a time) */
    struct {
        int l, w;
        double *G;
        float *imp;
    } est;
} job;

static entry *entry_of(job *j, const lmq_tensor *t) { return &j->e[t - j->m.tensors]; }

static const q_plan_entry *plan_of(const job *j, const char *name)
{
    for (int i = 0; i < j->plan.n; i++)
        if (!strcmp(j->plan.entries[i].name, name))
            return &j->plan.entries[i];
    return NULL;
}

static lmq_method method_of(const entry *e)
{
    return e->plan && !e->plan->keep_reason ? e->plan->method.method : LMQ_METHOD_RTN;
}

/* ---------------------------------------------------------------- statistics, rescaled */

/* The current scale of input (l, w) relative to the statistics, or NULL (all ones). */
static float *xscale(job *j, int l, lmq_input w, int dim, int create)
{
    float **row = &j->xscale[w];
    if (!*row && create) {
        const size_t n = (size_t)j->L * (size_t)dim;
        if (!(*row = malloc(n * sizeof **row)))
            return NULL;
        for (size_t i = 0; i < n; i++)
            (*row)[i] = 1.0f;
    }
    return *row ? *row + (size_t)l * dim : NULL;
}

/* Records that x ← x·s at input (l, w). */
static lmq_code rescaled(job *j, int l, lmq_input w, int dim, const float *s, lmq_err *err)
{
    float *x = xscale(j, l, w, dim, 1);
    if (!x)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    for (int i = 0; i < dim; i++)
        x[i] *= s[i];
    return LMQ_OK;
}

/* A per-channel statistic (max_abs, mean_abs: of |x|; mean_sq: of x², rescaled by s²). */
static lmq_code stat_vector(job *j, int l, lmq_input w, const char *what, int dim, float **out, lmq_err *err)
{
    lmq_code c = cal_stats_vector(&j->st, l, w, what, dim, out, err);
    const float *x = c ? NULL : xscale(j, l, w, dim, 0);
    const int squared = !strcmp(what, "mean_sq");
    for (int i = 0; x && i < dim; i++)
        (*out)[i] *= squared ? x[i] * x[i] : fabsf(x[i]);
    return c;
}

static lmq_code stat_gram(job *j, int l, lmq_input w, int dim, double **out, lmq_err *err)
{
    lmq_code c = cal_stats_gram(&j->st, l, w, dim, out, err);
    const float *x = c ? NULL : xscale(j, l, w, dim, 0);
    for (int a = 0; x && a < dim; a++)
        for (int b = 0; b < dim; b++)
            (*out)[(size_t)a * dim + b] *= (double)x[a] * x[b];
    return c;
}

/* ---------------------------------------------------------------- SmoothQuant */

static lmq_code smoothquant(job *j, double alpha, lmq_err *err)
{
    static const lmq_input FOLDED[] = { LMQ_IN_ATTN, LMQ_IN_FFN };
    static const struct {
        lmq_input in;
        const char *why;
    } LEFT[] = {
        { LMQ_IN_ATTN_OUT, "not smoothed: its input is attention's output, no norm in front to fold the scales into" },
        { LMQ_IN_FFN_DOWN, "not smoothed: its input is the activation's output, no norm in front to fold the scales into" },
    };
    lmq_code c = LMQ_OK;
    for (int l = 0; l < j->L && !c; l++) {
        for (size_t k = 0; k < sizeof FOLDED / sizeof FOLDED[0] && !c; k++) {
            lmq_tensor *r[CAL_MAX_READERS];
            const int n = cal_input_readers(&j->m, l, FOLDED[k], r), d = n ? (int)r[0]->shape[1] : 0;
            float *mx = NULL, *s = NULL;
            if (!n || (c = stat_vector(j, l, FOLDED[k], "max_abs", d, &mx, err)))
                continue;
            if (!(s = malloc((size_t)d * sizeof *s))) {
                free(mx);
                return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
            }
            for (int i = 0; i < d; i++) {
                float wmax = 0.0f;
                for (int t = 0; t < n; t++)
                    for (int64_t row = 0; row < r[t]->shape[0]; row++)
                        wmax = fmaxf(wmax, fabsf(r[t]->data[row * d + i]));
                const double si = pow(mx[i], alpha) / pow(wmax, 1.0 - alpha);
                /* x ← x / s; an unused channel (either max 0) keeps its scale */
                s[i] = si > 0 && isfinite(si) ? (float)(1.0 / fmax(si, 1e-5)) : 1.0f;
            }
            if (!(c = cal_scale_norm_input(&j->m, l, FOLDED[k], s, err)) &&
                !(c = rescaled(j, l, FOLDED[k], d, s, err)))
                for (int t = 0; t < n; t++)
                    entry_of(j, r[t])->calib.smooth_alpha = alpha;
            free(mx);
            free(s);
        }
        for (size_t k = 0; k < sizeof LEFT / sizeof LEFT[0]; k++) {
            lmq_tensor *r[CAL_MAX_READERS];
            const int n = cal_input_readers(&j->m, l, LEFT[k].in, r);
            for (int t = 0; t < n; t++)
                snprintf(entry_of(j, r[t])->calib.note, LMQ_REASON_MAX, "%s", LEFT[k].why);
        }
    }
    return c;
}

/* ---------------------------------------------------------------- AWQ */

/* What produces input (l, w), where x ← x / s can be folded into it: the norm for the inputs a norm
 * feeds; the value rows (and bias) for the attention output when every head has its own values; the
 * up rows for Llama's down projection. Returns NULL with the reason otherwise. */
static lmq_tensor *producer(job *j, int l, lmq_input w, int64_t *row0, lmq_tensor **bias, const char **why)
{
    char name[LMQ_NAME_MAX];
    *row0 = 0;
    *bias = NULL;
    *why = NULL;
    const lmq_arch *a = &j->m.arch;
    if (w == LMQ_IN_ATTN_OUT) {
        if (a->n_kv_heads != a->n_heads) {
            *why = "AWQ scales not applied: heads share value rows (grouped-query attention), so one scale per "
                   "channel cannot be folded into them";
            return NULL;
        }
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", l);
        lmq_tensor *v = lmq_model_find(&j->m, name);
        snprintf(name, sizeof name, "blk.%d.attn_%s.bias", l, v ? "v" : "qkv");
        *bias = lmq_model_find(&j->m, name);
        if (v)
            return v;
        *row0 = 2 * (int64_t)a->dim; /* fused q|k|v rows */
        snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", l);
        return lmq_model_find(&j->m, name);
    }
    if (w == LMQ_IN_FFN_DOWN) {
        snprintf(name, sizeof name, "blk.%d.ffn_gate.weight", l);
        if (!lmq_model_find(&j->m, name)) {
            *why = "AWQ scales not applied: the activation in front (GELU) does not commute with a scale";
            return NULL;
        }
        snprintf(name, sizeof name, "blk.%d.ffn_up.weight", l);
        return lmq_model_find(&j->m, name);
    }
    return NULL; /* a norm: cal_scale_norm_input */
}

static lmq_code awq_scale(job *j, int l, lmq_input w, lmq_err *err)
{
    lmq_tensor *r[CAL_MAX_READERS];
    const int n = cal_input_readers(&j->m, l, w, r), d = n ? (int)r[0]->shape[1] : 0;
    const lmq_qparams *qp[CAL_MAX_READERS];
    const float *W[CAL_MAX_READERS];
    int64_t rows[CAL_MAX_READERS];
    const q_method *pm = NULL;
    int k = 0;
    for (int t = 0; t < n; t++) {
        const entry *e = entry_of(j, r[t]);
        if (method_of(e) != LMQ_METHOD_AWQ)
            continue;
        pm = pm ? pm : &e->plan->method;
        qp[k] = &e->plan->qp;
        W[k] = r[t]->data;
        rows[k++] = r[t]->shape[0];
    }
    if (!k)
        return LMQ_OK;
    int64_t row0;
    lmq_tensor *bias, *src = NULL;
    const char *why = NULL;
    if (w == LMQ_IN_ATTN_OUT || w == LMQ_IN_FFN_DOWN)
        if (!(src = producer(j, l, w, &row0, &bias, &why))) {
            for (int t = 0; t < n; t++)
                snprintf(entry_of(j, r[t])->calib.note, LMQ_REASON_MAX, "%s", why);
            return LMQ_OK;
        }
    double *G = NULL, ratio = 0;
    float *mean = NULL, *s = malloc((size_t)d * sizeof *s);
    lmq_code c = s ? LMQ_OK : lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    const cal_awq_params ap = { .grid = (int)pm->grid, .clip = pm->clip, .clip_grid = 20, .max_shrink = 0.5 };
    if (!c && !(c = stat_gram(j, l, w, d, &G, err)) && !(c = stat_vector(j, l, w, "mean_abs", d, &mean, err)) &&
        !(c = cal_awq_scales(qp, W, rows, k, d, G, mean, &ap, j->pool, s, &ratio, err))) {
        /* The layers now read x / s: their columns take s, what produces x takes 1 / s. */
        for (int i = 0; i < d; i++)
            s[i] = 1.0f / s[i];
        c = src ? cal_scale_rows(src, bias, row0, d, s, err) : cal_scale_norm_input(&j->m, l, w, s, err);
        if (!c && src)
            c = cal_scale_columns(r, n, s, err);
        if (!c)
            c = rescaled(j, l, w, d, s, err);
        for (int t = 0; t < n && !c; t++)
            if (method_of(entry_of(j, r[t])) == LMQ_METHOD_AWQ)
                entry_of(j, r[t])->calib.awq_ratio = ratio;
    }
    free(G);
    free(mean);
    free(s);
    return c ? lmq_err_prefix(err, "AWQ, blk.%d.%s: ", l, lmq_input_names[w]) : LMQ_OK;
}

static lmq_code awq_clip(job *j, int l, lmq_input w, lmq_err *err)
{
    lmq_tensor *r[CAL_MAX_READERS];
    const int n = cal_input_readers(&j->m, l, w, r), d = n ? (int)r[0]->shape[1] : 0;
    double *G = NULL;
    lmq_code c = LMQ_OK;
    for (int t = 0; t < n && !c; t++) {
        entry *e = entry_of(j, r[t]);
        if (method_of(e) != LMQ_METHOD_AWQ)
            continue;
        const q_method *pm = &e->plan->method;
        const cal_awq_params ap = { .grid = (int)pm->grid, .clip = pm->clip, .clip_grid = 20, .max_shrink = 0.5 };
        lmq_layout L;
        cal_result res;
        if ((!G && (c = stat_gram(j, l, w, d, &G, err))) ||
            (c = lmq_layout_of(&e->plan->qp, r[t]->shape[0], d, &L, err)))
            break;
        if (!(e->bytes = malloc(L.bytes))) {
            c = lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", r[t]->name);
            break;
        }
        c = cal_awq_clip(&e->plan->qp, r[t]->data, r[t]->shape[0], d, G, &ap, e->bytes, L.bytes, j->pool,
                         &e->calib.clip_mean, &e->calib.clip_min, &res, err);
        e->calib.method = LMQ_METHOD_AWQ;
        e->calib.out_error_rtn = res.err_rtn;
        e->calib.out_error = res.err;
        if (c)
            lmq_err_prefix(err, "AWQ, %s: ", r[t]->name);
    }
    free(G);
    return c;
}

/* ---------------------------------------------------------------- importance matrix */

/* The layers of input (l, w) whose rule says imatrix: each GGUF block's scale search weighted
 * per input column by the channel's mean x² on the calibration text (what llama-imatrix
 * accumulates), q_quantize_weighted; the output errors of that and of RTN through the Gram matrix
 * for the manifest. */
static lmq_code imatrix_input(job *j, int l, lmq_input w, lmq_err *err)
{
    lmq_tensor *r[CAL_MAX_READERS];
    const int n = cal_input_readers(&j->m, l, w, r), d = n ? (int)r[0]->shape[1] : 0;
    float *imp = NULL, *Wq = NULL;
    double *G = NULL;
    lmq_code c = LMQ_OK;
    for (int t = 0; t < n && !c; t++) {
        entry *e = entry_of(j, r[t]);
        if (method_of(e) != LMQ_METHOD_IMATRIX)
            continue;
        const lmq_qparams *qp = &e->plan->qp;
        const int64_t rows = r[t]->shape[0];
        lmq_layout L;
        if ((!imp && (c = stat_vector(j, l, w, "mean_sq", d, &imp, err))) ||
            (!G && (c = stat_gram(j, l, w, d, &G, err))) || (c = lmq_layout_of(qp, rows, d, &L, err)))
            break;
        free(Wq);
        if (!(Wq = malloc((size_t)(rows * d) * sizeof *Wq)) || !(e->bytes = malloc(L.bytes))) {
            c = lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", r[t]->name);
            break;
        }
        double num, den;
        if (!(c = cal_rtn(qp, r[t]->data, rows, d, e->bytes, L.bytes, Wq, j->pool, err))) {
            cal_error_terms(r[t]->data, Wq, rows, d, G, j->pool, &num, &den);
            e->calib.out_error_rtn = cal_relative_error(num, den);
        }
        if (!c && !(c = q_quantize_weighted(qp, r[t]->data, imp, rows, d, e->bytes, L.bytes, j->pool, err)) &&
            !(c = q_dequantize(qp, e->bytes, L.bytes, rows, d, Wq, j->pool, err))) {
            cal_error_terms(r[t]->data, Wq, rows, d, G, j->pool, &num, NULL);
            e->calib.out_error = cal_relative_error(num, den);
        }
        e->calib.method = LMQ_METHOD_IMATRIX;
        if (c)
            lmq_err_prefix(err, "imatrix, %s: ", r[t]->name);
    }
    free(imp);
    free(Wq);
    free(G);
    return c;
}

/* ---------------------------------------------------------------- GPTQ, block by block */

/* The calibration windows and, for each, the residual stream at the input of the block before
 * the one under way ([windows × ctx × dim]): one block's worth, advanced a block at a time, so
 * that the pass evaluates each block twice (as it is observed, then as quantised), not every
 * block before it again. */
typedef struct {
    int32_t *ids;
    int windows, ctx;
    float *x;
} calib_windows;

static lmq_code read_windows(job *j, calib_windows *cw, lmq_err *err)
{
    const lmq_manifest *sm = &j->st.man;
    const char *path = j->o->calib_text ? j->o->calib_text : sm->calibration;
    size_t n;
    int docs;
    uint64_t sum;
    lmq_code c = tok_stream_read(&j->m, path, &cw->ids, &n, &docs, &sum, err);
    if (c)
        return lmq_err_prefix(err, "GPTQ's calibration text: ");
    if (sum != sm->calibration_checksum)
        return lmq_fail(err, LMQ_E_ARG, "%s: checksum %016llx, the statistics were taken on text %016llx (%s)", path,
                        (unsigned long long)sum, (unsigned long long)sm->calibration_checksum, sm->calibration);
    cw->ctx = sm->calib_ctx;
    cw->windows = sm->calib_windows;
    if (cw->ctx < 2 || cw->windows < 1 || n / (size_t)cw->ctx < (size_t)cw->windows)
        return lmq_fail(err, LMQ_E_FORMAT, "%s: %zu tokens do not give the %d windows of %d the statistics name",
                        path, n, cw->windows, cw->ctx);
    if (!(cw->x = malloc((size_t)cw->windows * cw->ctx * j->m.arch.dim * sizeof *cw->x)))
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory for the activations of %d windows of %d", cw->windows,
                        cw->ctx);
    return LMQ_OK;
}

/* The Gram matrices of block l's inputs with the model as it now stands (blocks < l quantised):
 * each window's stream goes through block l - 1 (quantised at the last step) to block l's input,
 * kept, and on through block l, observed. */
static lmq_code collect_block(job *j, calib_windows *cw, int l, cal_collector *col, lmq_err *err)
{
    memset(col, 0, sizeof *col);
    rt_model rm;
    lmq_code c = rt_model_init(&rm, &j->m, err);
    if (c)
        return c;
    rt_state *st = NULL;
    rt_exec ex = { .pool = j->pool, .isa = rt_isa_best(), .observe = cal_collector_observe, .observe_ctx = col };
    const size_t size = (size_t)cw->ctx * j->m.arch.dim * sizeof *cw->x;
    if (!(c = cal_collector_init(col, &j->m, l, l + 1, 1, j->pool, err)) &&
        !(c = rt_state_create(&rm, &ex, cw->ctx, &st, err)))
        for (int w = 0; w < cw->windows && !c; w++) {
            float *x = cw->x + (size_t)w * cw->ctx * j->m.arch.dim;
            if (l == 0) { /* the embeddings */
                c = rt_forward_blocks(st, cw->ids + (size_t)w * cw->ctx, cw->ctx, 0, err);
            } else {
                memcpy(rt_state_stream(st), x, size);
                c = rt_forward_from(st, cw->ctx, l - 1, l, err);
            }
            if (c)
                break;
            memcpy(x, rt_state_stream(st), size);
            c = rt_forward_from(st, cw->ctx, l, l + 1, err);
        }
    rt_state_free(st);
    rt_model_free(&rm);
    return c;
}

/* Block l's layers in their final encodings from now on: the next blocks' inputs come through them. */
static lmq_code settle_block(job *j, int l, lmq_err *err)
{
    for (int w = 0; w < LMQ_IN_COUNT; w++) {
        lmq_tensor *r[CAL_MAX_READERS];
        const int n = cal_input_readers(&j->m, l, (lmq_input)w, r);
        for (int t = 0; t < n; t++) {
            entry *e = entry_of(j, r[t]);
            if (!e->plan || e->plan->keep_reason)
                continue;
            lmq_layout L;
            lmq_code c = lmq_layout_of(&e->plan->qp, r[t]->shape[0], r[t]->shape[1], &L, err);
            if (!c && !e->bytes && !(e->bytes = malloc(L.bytes)))
                c = lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", r[t]->name);
            else if (!c && method_of(e) == LMQ_METHOD_RTN)
                c = q_quantize(&e->plan->qp, r[t]->data, r[t]->shape[0], r[t]->shape[1], e->bytes, L.bytes, j->pool,
                               err);
            if (c)
                return lmq_err_prefix(err, "%s: ", r[t]->name);
            e->values = r[t]->data;
            r[t]->q = e->plan->qp;
            r[t]->raw = e->bytes;
            r[t]->raw_size = L.bytes;
            r[t]->data = NULL;
        }
    }
    return LMQ_OK;
}

static lmq_code gptq_block(job *j, calib_windows *cw, int l, lmq_err *err)
{
    cal_collector col;
    lmq_code c = collect_block(j, cw, l, &col, err);
    for (int i = 0; i < col.n && !c; i++) {
        cal_record *rec = &col.rec[i];
        lmq_tensor *r[CAL_MAX_READERS];
        const int n = cal_input_readers(&j->m, l, rec->which, r);
        for (int k = 0; k < rec->dim; k++) /* the upper triangle was summed */
            for (int m = 0; m < k; m++)
                rec->gram[(size_t)k * rec->dim + m] = rec->gram[(size_t)m * rec->dim + k];
        for (int t = 0; t < n && !c; t++) {
            entry *e = entry_of(j, r[t]);
            if (method_of(e) != LMQ_METHOD_GPTQ)
                continue;
            const q_method *pm = &e->plan->method;
            const cal_gptq_params gp = { .damp = pm->damp, .block = (int)pm->block, .act_order = pm->act_order };
            lmq_layout L;
            cal_result res;
            if ((c = lmq_layout_of(&e->plan->qp, r[t]->shape[0], rec->dim, &L, err)))
                break;
            if (!(e->bytes = malloc(L.bytes))) {
                c = lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", r[t]->name);
                break;
            }
            if ((c = cal_gptq(&e->plan->qp, r[t]->data, r[t]->shape[0], rec->dim, rec->gram, &gp, e->bytes, L.bytes,
                              j->pool, &res, err))) {
                lmq_err_prefix(err, "GPTQ, %s: ", r[t]->name);
                break;
            }
            e->calib.method = LMQ_METHOD_GPTQ;
            e->calib.damp = pm->damp;
            e->calib.damp_used = res.damp_used;
            e->calib.block = pm->block;
            e->calib.act_order = pm->act_order;
            e->calib.out_error_rtn = res.err_rtn;
            e->calib.out_error = res.err;
        }
    }
    cal_collector_free(&col);
    return c ? c : settle_block(j, l, err);
}

/* ---------------------------------------------------------------- target_bpw */

/* The tensor behind plan entry e (the classifier use of a tied table is the table). */
static const lmq_tensor *tensor_of(const job *j, const q_plan_entry *e)
{
    return lmq_model_find(&j->m, e->derived_from_tied ? "tok_embd.weight" : e->name);
}

/* Loads the Gram matrix (and mean x²) of the input that tensor t reads. */
static lmq_code est_input(job *j, const lmq_tensor *t, lmq_err *err)
{
    for (int l = 0; l < j->L; l++)
        for (int w = 0; w < LMQ_IN_COUNT; w++) {
            lmq_tensor *r[CAL_MAX_READERS];
            const int n = cal_input_readers(&j->m, l, (lmq_input)w, r);
            for (int k = 0; k < n; k++) {
                if (r[k] != t)
                    continue;
                if (j->est.G && j->est.l == l && j->est.w == w)
                    return LMQ_OK;
                free(j->est.G);
                free(j->est.imp);
                j->est.G = NULL;
                j->est.imp = NULL;
                j->est.l = l;
                j->est.w = w;
                const int d = (int)t->shape[1];
                lmq_code c = stat_gram(j, l, (lmq_input)w, d, &j->est.G, err);
                return c ? c : stat_vector(j, l, (lmq_input)w, "mean_sq", d, &j->est.imp, err);
            }
        }
    return lmq_fail(err, LMQ_E_ARG, "%s: no statistics record its input", t->name);
}

/* A candidate's error: the tensor quantised as qp by the rule's method, its relative output error
 * tr(dW G dWᵀ) / tr(W G Wᵀ) on the calibration inputs, times its weights. Relative, not absolute:
 * layers whose outputs feed the residual stream and those inside a block (q/k/v, up) work at
 * different scales, and on the fixtures the absolute sum spends the bits where KL gains least.
 * AWQ is estimated by round to nearest (its scales are searched once the encodings are chosen). */
static lmq_code gram_error(void *ctx, int entry, const lmq_qparams *qp, const q_method *m, double *out, lmq_err *err)
{
    job *j = ctx;
    const lmq_tensor *t = tensor_of(j, &j->plan.entries[entry]);
    const int64_t rows = t->shape[0], d = t->shape[1];
    const int block = lmq_encoding_of(qp->dtype)->block != 0;
    lmq_layout L;
    uint8_t *bytes = NULL;
    float *Wq = NULL;
    cal_result res;
    const cal_gptq_params gp = { .damp = m->damp, .block = (int)m->block, .act_order = m->act_order };
    lmq_code c = est_input(j, t, err);
    if (!c && !(c = lmq_layout_of(qp, rows, d, &L, err)) &&
        (!(bytes = malloc(L.bytes)) || !(Wq = malloc((size_t)(rows * d) * sizeof *Wq))))
        c = lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    if (!c)
        c = block && m->method == LMQ_METHOD_IMATRIX
                ? q_quantize_weighted(qp, t->data, j->est.imp, rows, d, bytes, L.bytes, j->pool, err)
            : block && m->method == LMQ_METHOD_GPTQ
                ? cal_gptq(qp, t->data, rows, d, j->est.G, &gp, bytes, L.bytes, j->pool, &res, err)
                : q_quantize(qp, t->data, rows, d, bytes, L.bytes, j->pool, err);
    double num, den;
    if (!c && !(c = q_dequantize(qp, bytes, L.bytes, rows, d, Wq, j->pool, err))) {
        cal_error_terms(t->data, Wq, rows, d, j->est.G, j->pool, &num, &den);
        *out = cal_relative_error(num, den) * (double)(rows * d);
    }
    free(bytes);
    free(Wq);
    return c ? lmq_err_prefix(err, "target_bpw, %s: ", t->name) : LMQ_OK;
}

static lmq_code plan_target(job *j, lmq_err *err)
{
    const int n = j->plan.n;
    int64_t *rows = malloc((size_t)(n + 1) * sizeof *rows), *cols = malloc((size_t)(n + 1) * sizeof *cols);
    lmq_code c = rows && cols ? LMQ_OK : lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    for (int i = 0; i < n && !c; i++) {
        const lmq_tensor *t = tensor_of(j, &j->plan.entries[i]);
        rows[i] = t->ndim > 1 ? t->shape[0] : 1;
        cols[i] = t->shape[t->ndim - 1];
    }
    q_bpw_report rep;
    if (!c && !(c = q_bpw_assign(&j->recipe, &j->plan, rows, cols, gram_error, j, &rep, err))) {
        if (j->o->q.report)
            j->o->q.report(j->o->q.report_ctx, &j->plan, &rep);
        q_bpw_report_free(&rep);
    }
    free(rows);
    free(cols);
    return c;
}

static int uses(const job *j, lmq_method m)
{
    for (int i = 0; i < j->plan.n; i++)
        if (!j->plan.entries[i].keep_reason && j->plan.entries[i].method.method == m)
            return 1;
    return 0;
}

/* ---------------------------------------------------------------- the run */

static lmq_code override(void *ctx, const char *name, q_override *o, lmq_err *err)
{
    (void)err;
    job *j = ctx;
    const lmq_tensor *t = lmq_model_find(&j->m, name);
    if (!t)
        return LMQ_OK;
    const entry *e = entry_of(j, t);
    const float *now = e->values ? e->values : t->data;
    o->values = now != e->orig ? now : NULL;
    o->bytes = method_of(e) != LMQ_METHOD_RTN ? e->bytes : NULL;
    o->calib = e->calib;
    return LMQ_OK;
}

static void progress(const job *j, const char *stage, int done, int total)
{
    if (j->o->progress)
        j->o->progress(j->o->progress_ctx, stage, done, total);
}

static lmq_code run(job *j, const char *in_path, const char *recipe_path, const char *stats_path, const char *out_path,
                    lmq_err *err)
{
    lmq_container in;
    lmq_code c = lmq_container_open(&in, in_path, err);
    if (c)
        return c;
    const uint64_t in_sum = in.file_checksum;
    if (!(c = q_recipe_load(recipe_path, &j->recipe, err)) && !(c = cal_stats_open(&j->st, stats_path, err)) &&
        j->st.man.calib_model_checksum != in_sum)
        c = lmq_fail(err, LMQ_E_ARG, "%s: statistics of another model (checksum %016llx; %s is %016llx)", stats_path,
                     (unsigned long long)j->st.man.calib_model_checksum, in_path, (unsigned long long)in_sum);
    if (!c)
        c = q_input_check(&in, in_path, &j->o->q, err); /* before any calibrated work */
    lmq_container_close(&in);
    if (c)
        return c;
    /* round to nearest: the statistics have nothing to add, unless target_bpw estimates with them */
    if (!q_recipe_needs_stats(&j->recipe) && !(j->recipe.target_bpw > 0))
        return q_quantize_file(in_path, recipe_path, out_path, &j->o->q, err);
    if ((c = rt_load_artefact(in_path, &j->m, err)) || (c = q_recipe_resolve_model(&j->recipe, &j->m, &j->plan, err)))
        return c;
    j->L = j->m.arch.n_layers;
    if (!(j->e = calloc((size_t)j->m.n_tensors + 1, sizeof *j->e)))
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    for (int i = 0; i < j->m.n_tensors; i++) {
        lmq_tensor *t = &j->m.tensors[i];
        j->e[i].orig = t->data;
        j->e[i].plan = plan_of(j, t->name);
        if (j->e[i].plan && j->e[i].plan->method.method != LMQ_METHOD_RTN && t->q.dtype != LMQ_T_F32)
            return lmq_fail(err, LMQ_E_UNSUPPORTED, "%s: %s works from fp32 weights; %s is %s", in_path,
                            lmq_method_names[j->e[i].plan->method.method], t->name, lmq_encoding_of(t->q.dtype)->name);
    }
    if ((c = lmq_pool_create(j->o->q.threads, &j->pool, err)))
        return c;
    if (j->recipe.smooth_alpha > 0 && (c = smoothquant(j, j->recipe.smooth_alpha, err)))
        return c;
    /* The encodings first (from the weights SmoothQuant left): AWQ's search and the methods work in them. */
    if (j->recipe.target_bpw > 0 && (c = plan_target(j, err)))
        return c;
    if (j->o->q.plan_only)
        return LMQ_OK;
    if (uses(j, LMQ_METHOD_AWQ)) {
        for (int l = 0; l < j->L && !c; l++) {
            for (int w = 0; w < LMQ_IN_COUNT && !c; w++)
                c = awq_scale(j, l, (lmq_input)w, err);
            progress(j, "AWQ scales", l + 1, j->L);
        }
        for (int l = 0; l < j->L && !c; l++) {
            for (int w = 0; w < LMQ_IN_COUNT && !c; w++)
                c = awq_clip(j, l, (lmq_input)w, err);
            progress(j, "AWQ clip", l + 1, j->L);
        }
    }
    if (!c && uses(j, LMQ_METHOD_IMATRIX))
        for (int l = 0; l < j->L && !c; l++) {
            for (int w = 0; w < LMQ_IN_COUNT && !c; w++)
                c = imatrix_input(j, l, (lmq_input)w, err);
            progress(j, "imatrix", l + 1, j->L);
        }
    if (!c && uses(j, LMQ_METHOD_GPTQ)) {
        calib_windows cw = { 0 };
        c = read_windows(j, &cw, err);
        for (int l = 0; l < j->L && !c; l++) {
            c = gptq_block(j, &cw, l, err);
            progress(j, "GPTQ", l + 1, j->L);
        }
        free(cw.ids);
        free(cw.x);
    }
    if (c)
        return c;
    q_opts qo = j->o->q;
    qo.override = override;
    qo.override_ctx = j;
    qo.stats = &j->st.man;
    qo.stats_checksum = j->st.file_checksum;
    qo.chosen = j->recipe.target_bpw > 0 ? &j->plan : NULL;
    return q_quantize_file(in_path, recipe_path, out_path, &qo, err);
}

lmq_code cal_quantize_file(const char *in_path, const char *recipe_path, const char *stats_path, const char *out_path,
                           const cal_quantize_opts *opts, lmq_err *err)
{
    const cal_quantize_opts none = { 0 };
    job j;
    memset(&j, 0, sizeof j);
    j.o = opts ? opts : &none;
    lmq_code c = run(&j, in_path, recipe_path, stats_path, out_path, err);
    for (int i = 0; j.e && i < j.m.n_tensors; i++)
        free(j.e[i].bytes);
    free(j.e);
    for (int w = 0; w < LMQ_IN_COUNT; w++)
        free(j.xscale[w]);
    free(j.est.G);
    free(j.est.imp);
    lmq_pool_free(j.pool);
    lmq_model_free(&j.m);
    cal_stats_close(&j.st);
    q_plan_free(&j.plan);
    q_recipe_free(&j.recipe);
    return c;
}
