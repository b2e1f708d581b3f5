#include "calibrate/awq.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#include "schemes/scheme.h"

/* ---- scale search ------------------------------------------------------------------------ */

/* The candidate scales for exponent ratio into s. */
static void candidate_scales(const float *mean_abs_x, int64_t cols, double ratio, float *s)
{
    double mx = 0, mn = INFINITY;
    for (int64_t j = 0; j < cols; j++) {
        double v = fmax(pow(mean_abs_x[j], ratio), CAL_AWQ_MIN_SCALE);
        mx = fmax(mx, v);
        mn = fmin(mn, v);
    }
    const double norm = 1.0 / sqrt(mx * mn);
    for (int64_t j = 0; j < cols; j++)
        s[j] = (float)(fmax(pow(mean_abs_x[j], ratio), CAL_AWQ_MIN_SCALE) * norm);
}

lmq_code cal_awq_scales(const lmq_qparams *const *qp, const float *const *W, const int64_t *rows, int n_w,
                        int64_t cols, const double *G, const float *mean_abs_x, const cal_awq_params *p,
                        lmq_pool *pool, float *s, double *r, lmq_err *err)
{
    if (p->grid < 1 || n_w < 1)
        return lmq_fail(err, LMQ_E_ARG, "AWQ: grid %d and %d layers: both are >= 1", p->grid, n_w);
    for (int64_t j = 0; j < cols; j++)
        if (!(mean_abs_x[j] >= 0) || !isfinite(mean_abs_x[j]))
            return lmq_fail(err, LMQ_E_NUMERIC, "AWQ: mean |x| of input %" PRId64 " is %g", j,
                            (double)mean_abs_x[j]);
    lmq_code rc = cal_check_gram(G, cols, err);
    if (rc)
        return rc;
    size_t most = 0, most_bytes = 0, *size = malloc((size_t)n_w * sizeof *size);
    if (!size)
        return lmq_fail(err, LMQ_E_NOMEM, "AWQ: no memory for %d layers", n_w);
    for (int l = 0; l < n_w; l++) {
        lmq_layout L;
        if ((rc = lmq_layout_of(qp[l], rows[l], cols, &L, err))) {
            free(size);
            return lmq_err_prefix(err, "AWQ layer %d: ", l);
        }
        size[l] = L.bytes;
        most = (size_t)(rows[l] * cols) > most ? (size_t)(rows[l] * cols) : most;
        most_bytes = L.bytes > most_bytes ? L.bytes : most_bytes;
    }
    float *cand = malloc((size_t)cols * sizeof *cand), *Ws = malloc(most * sizeof *Ws),
          *Wq = malloc(most * sizeof *Wq);
    uint8_t *bytes = malloc(most_bytes);
    if (!cand || !Ws || !Wq || !bytes) {
        rc = lmq_fail(err, LMQ_E_NOMEM, "AWQ: no memory for %zu weights", most);
        goto done;
    }
    double best = INFINITY;
    for (int k = 0; k < p->grid; k++) {
        candidate_scales(mean_abs_x, cols, (double)k / p->grid, cand);
        double total = 0;
        for (int l = 0; l < n_w && !rc; l++) {
            const size_t n = (size_t)(rows[l] * cols);
            for (size_t i = 0; i < n; i++)
                Ws[i] = W[l][i] * cand[i % (size_t)cols];
            if ((rc = cal_rtn(qp[l], Ws, rows[l], cols, bytes, size[l], Wq, pool, err))) {
                lmq_err_prefix(err, "AWQ layer %d, r = %d/%d: ", l, k, p->grid);
                break;
            }
            for (size_t i = 0; i < n; i++)
                Wq[i] /= cand[i % (size_t)cols];
            double num;
            cal_error_terms(W[l], Wq, rows[l], cols, G, pool, &num, NULL);
            total += num;
        }
        if (rc)
            goto done;
        if (k == 0 || total < best) {
            best = total;
            *r = (double)k / p->grid;
            for (int64_t j = 0; j < cols; j++)
                s[j] = cand[j];
        }
    }
done:
    free(size);
    free(cand);
    free(Ws);
    free(Wq);
    free(bytes);
    return rc;
}

/* ---- clip search ------------------------------------------------------------------------- */

typedef struct {
    const q_scheme *s;
    const lmq_qparams *qp;
    const lmq_layout *L;
    const cal_awq_params *p;
    const float *W;
    const double *G;
    int64_t nrows; /* rows per scale group: all of them per tensor, else 1 */
    q_group *groups;
    uint32_t *codes;
    double *ratio; /* per scale group, the ratio kept */
} clip_job;

/* Scratch for one scale group of nrows × len weights. */
typedef struct {
    float *w, *clamped, *dq;
    uint32_t *codes, *best;
} clip_scratch;

/* Scale group idx (storage order): its weights from rows [r0, r0 + nrows), cols [c0, c0 + len). */
static lmq_code clip_group(const clip_job *j, int64_t idx, clip_scratch *b, lmq_err *err)
{
    const lmq_layout *L = j->L;
    const q_scheme *s = j->s;
    const int64_t cols = L->cols, gi = idx % L->groups_per_row;
    const int64_t r0 = j->nrows == 1 ? idx / L->groups_per_row : 0, c0 = gi * L->group;
    const int64_t len = cols - c0 < L->group ? cols - c0 : L->group;
    const size_t n = (size_t)(j->nrows * len), first = (size_t)(r0 * cols + c0);
    float mn = INFINITY, mx = -INFINITY;
    for (int64_t r = 0; r < j->nrows; r++)
        for (int64_t c = 0; c < len; c++) {
            float x = j->W[(r0 + r) * cols + c0 + c];
            b->w[r * len + c] = x;
            mn = fminf(mn, x);
            mx = fmaxf(mx, x);
        }
    if (!j->qp->asym) { /* symmetric: the range is ±max|w| */
        mx = fmaxf(-mn, mx);
        mn = -mx;
    }
    double best = INFINITY;
    lmq_code rc;
    for (int k = 0; k < j->p->clip_grid; k++) {
        const float ratio = (float)(1.0 - j->p->max_shrink * k / j->p->clip_grid);
        const float lo = mn * ratio, hi = mx * ratio;
        for (size_t i = 0; i < n; i++)
            b->clamped[i] = fminf(fmaxf(b->w[i], lo), hi);
        q_group g;
        if ((rc = q_fit(j->qp, b->clamped, n, first, &g, err)) ||
            (rc = s->encode(s, &g, b->w, n, first, b->codes, err)))
            return rc;
        s->decode(s, &g, b->codes, n, b->dq);
        const double e = cal_quad(j->G + c0 * cols + c0, cols, b->dq, b->w, len, j->nrows, len);
        if (k == 0 || e < best) {
            best = e;
            j->groups[idx] = g;
            j->ratio[idx] = ratio;
            uint32_t *t = b->best;
            b->best = b->codes;
            b->codes = t;
        }
    }
    for (int64_t r = 0; r < j->nrows; r++)
        for (int64_t c = 0; c < len; c++)
            j->codes[(r0 + r) * cols + c0 + c] = b->best[r * len + c];
    return LMQ_OK;
}

static lmq_code clip_task(void *ctx, int64_t begin, int64_t end, int thread, lmq_err *err)
{
    (void)thread;
    const clip_job *j = ctx;
    const size_t n = (size_t)(j->nrows * j->L->group);
    clip_scratch b = { malloc(n * sizeof *b.w), malloc(n * sizeof *b.clamped), malloc(n * sizeof *b.dq),
                       malloc(n * sizeof *b.codes), malloc(n * sizeof *b.best) };
    lmq_code rc = b.w && b.clamped && b.dq && b.codes && b.best
                      ? LMQ_OK
                      : lmq_fail(err, LMQ_E_NOMEM, "AWQ: no memory for a group of %zu weights", n);
    for (int64_t idx = begin; !rc && idx < end; idx++)
        rc = clip_group(j, idx, &b, err);
    free(b.w);
    free(b.clamped);
    free(b.dq);
    free(b.codes);
    free(b.best);
    return rc;
}

lmq_code cal_awq_clip(const lmq_qparams *qp, const float *W, int64_t rows, int64_t cols, const double *G,
                      const cal_awq_params *p, uint8_t *out, size_t out_size, lmq_pool *pool,
                      double *clip_mean, double *clip_min, cal_result *res, lmq_err *err)
{
    if (p->clip && (p->clip_grid < 1 || !(p->max_shrink >= 0 && p->max_shrink < 1)))
        return lmq_fail(err, LMQ_E_ARG, "AWQ: clip_grid %d, max_shrink %g: clip_grid >= 1, max_shrink in [0, 1)",
                        p->clip_grid, p->max_shrink);
    lmq_layout L;
    lmq_code rc = lmq_layout_of(qp, rows, cols, &L, err);
    if (rc || (rc = cal_check_gram(G, cols, err)))
        return rc;
    const size_t nw = (size_t)(rows * cols);
    float *Wq = malloc(nw * sizeof *Wq);
    uint32_t *codes = NULL;
    q_group *groups = NULL;
    double *ratio = NULL;
    *res = (cal_result){ 0 };
    *clip_mean = *clip_min = 1.0;
    if (!Wq) {
        rc = lmq_fail(err, LMQ_E_NOMEM, "AWQ: no memory for %zu weights", nw);
        goto done;
    }
    if ((rc = cal_rtn(qp, W, rows, cols, out, out_size, Wq, pool, err)))
        goto done;
    double num, den;
    cal_error_terms(W, Wq, rows, cols, G, pool, &num, &den);
    res->err = res->err_rtn = cal_relative_error(num, den);
    const q_scheme *s = q_scheme_get(qp->dtype);
    if (p->clip && s->codec) { /* GGUF blocks: the blocks' own scale search, weighted by Σx² per column */
        float *imp = malloc((size_t)cols * sizeof *imp);
        if (!imp) {
            rc = lmq_fail(err, LMQ_E_NOMEM, "AWQ: no memory for %" PRId64 " importances", cols);
            goto done;
        }
        for (int64_t c = 0; c < cols; c++)
            imp[c] = (float)G[c * cols + c];
        if (!(rc = q_quantize_weighted(qp, W, imp, rows, cols, out, out_size, pool, err)) &&
            !(rc = q_dequantize(qp, out, out_size, rows, cols, Wq, pool, err))) {
            cal_error_terms(W, Wq, rows, cols, G, pool, &num, NULL);
            res->err = cal_relative_error(num, den);
        }
        free(imp);
        goto done;
    }
    if (!p->clip || qp->gran == LMQ_GRAN_NONE)
        goto done;

    codes = malloc(nw * sizeof *codes);
    groups = malloc((size_t)L.n_scales * sizeof *groups);
    ratio = malloc((size_t)L.n_scales * sizeof *ratio);
    if (!codes || !groups || !ratio) {
        rc = lmq_fail(err, LMQ_E_NOMEM, "AWQ: no memory for %zu codes", nw);
        goto done;
    }
    clip_job j = { .s = s, .qp = qp, .L = &L, .p = p, .W = W, .G = G,
                   .nrows = qp->gran == LMQ_GRAN_TENSOR ? rows : 1, .groups = groups,
                   .codes = codes, .ratio = ratio };
    /* About 2^12 weights of groups per hand-off (each costs clip_grid × group² flops), decided
     * by the shape alone. */
    const int64_t grain = 1 + ((INT64_C(1) << 12) / (j.nrows * L.group));
    if ((rc = lmq_pool_try(pool, L.n_scales, grain, clip_task, &j, err)) ||
        (rc = q_store(qp, rows, cols, groups, codes, out, out_size, err)) ||
        (rc = q_dequantize(qp, out, out_size, rows, cols, Wq, pool, err)))
        goto done;
    cal_error_terms(W, Wq, rows, cols, G, pool, &num, NULL);
    res->err = cal_relative_error(num, den);
    double sum = 0;
    for (int64_t i = 0; i < L.n_scales; i++) {
        sum += ratio[i];
        *clip_min = fmin(*clip_min, ratio[i]);
    }
    *clip_mean = sum / (double)L.n_scales;
done:
    free(Wq);
    free(codes);
    free(groups);
    free(ratio);
    return rc;
}
