#include "calibrate/stats.h"
#include "formats/artefact.h"
#include "runtime/kernels.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- collecting */

uint64_t cal_gram_bytes(const lmq_model *m, int l0, int l1)
{
    uint64_t bytes = 0;
    for (int l = l0; l < l1; l++)
        for (int i = 0; i < LMQ_IN_COUNT; i++) {
            uint64_t d = (uint64_t)cal_input_dim(m, l, (lmq_input)i);
            bytes += d * d * sizeof(double);
        }
    return bytes;
}

void cal_collector_free(cal_collector *c)
{
    for (int i = 0; i < c->n; i++) {
        cal_record *r = &c->rec[i];
        free(r->max_abs);
        free(r->sum_abs);
        free(r->sum_sq);
        free(r->gram);
        free(r->token_max);
    }
    free(c->rec);
    memset(c, 0, sizeof *c);
}

lmq_code cal_collector_init(cal_collector *c, const lmq_model *m, int l0, int l1, int gram, lmq_pool *pool,
                            lmq_err *err)
{
    memset(c, 0, sizeof *c);
    c->pool = pool;
    if (!(c->rec = calloc((size_t)(l1 - l0) * LMQ_IN_COUNT + 1, sizeof *c->rec)))
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory for the statistics");
    for (int l = l0; l < l1; l++)
        for (int i = 0; i < LMQ_IN_COUNT; i++) {
            lmq_tensor *readers[CAL_MAX_READERS];
            if (!cal_input_readers(m, l, (lmq_input)i, readers))
                continue;
            cal_record *r = &c->rec[c->n++];
            const size_t d = (size_t)readers[0]->shape[1];
            r->layer = l;
            r->which = (lmq_input)i;
            r->dim = (int)d;
            snprintf(r->first, sizeof r->first, "%s", readers[0]->name);
            r->max_abs = calloc(d, sizeof *r->max_abs);
            r->sum_abs = calloc(d, sizeof *r->sum_abs);
            r->sum_sq = calloc(d, sizeof *r->sum_sq);
            r->gram = gram ? calloc(d * d, sizeof *r->gram) : NULL;
            if (!r->max_abs || !r->sum_abs || !r->sum_sq || (gram && !r->gram)) {
                cal_collector_free(c);
                return lmq_fail(err, LMQ_E_NOMEM, "out of memory for the statistics of blk.%d.%s (%zu channels)", l,
                                lmq_input_names[i], d);
            }
        }
    return LMQ_OK;
}

static cal_record *collector_find(const cal_collector *c, int layer, lmq_input which)
{
    for (int i = 0; i < c->n; i++)
        if (c->rec[i].layer == layer && c->rec[i].which == which)
            return &c->rec[i];
    return NULL;
}

typedef struct {
    rt_gram_row_fn *gram_row;
    double *g;
    const float *x;
    int n, d;
} gram_job;

/* Task p adds the products of rows p and d-1-p of the upper triangle (balanced work): G[i][j] +=
 * Σ_t x_t,i·x_t,j over this call's tokens in order, so every element's sum has one fixed order. */
static void gram_task(void *v, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const gram_job *j = v;
    for (int64_t p = begin; p < end; p++) {
        const int rows[2] = { (int)p, j->d - 1 - (int)p };
        for (int k = 0; k < (rows[0] == rows[1] ? 1 : 2); k++)
            j->gram_row(j->g + (size_t)rows[k] * j->d, j->x, (size_t)j->d, j->n, rows[k], j->d);
    }
}

static lmq_code record_add(cal_record *r, lmq_pool *pool, const float *x, int n, lmq_err *err)
{
    const int d = r->dim;
    if (r->tokens + n > r->token_cap) {
        int64_t cap = r->token_cap ? r->token_cap : 4096;
        while (cap < r->tokens + n)
            cap *= 2;
        float *grown = realloc(r->token_max, (size_t)cap * sizeof *grown);
        if (!grown)
            return lmq_fail(err, LMQ_E_NOMEM, "out of memory for the statistics of %s", r->first);
        r->token_max = grown;
        r->token_cap = cap;
    }
    for (int t = 0; t < n; t++) {
        const float *row = x + (size_t)t * d;
        float peak = 0.0f;
        for (int i = 0; i < d; i++) {
            const float a = fabsf(row[i]);
            peak = a > peak ? a : peak;
            r->max_abs[i] = a > r->max_abs[i] ? a : r->max_abs[i];
            r->sum_abs[i] += a;
            r->sum_sq[i] += (double)row[i] * row[i];
        }
        r->token_max[r->tokens + t] = peak;
    }
    r->tokens += n;
    if (r->gram) {
        gram_job j = { rt_isa_best()->gram_row, r->gram, x, n, d };
        const int64_t work = (int64_t)n * d * d / 2;
        lmq_pool_for(work < 65536 ? NULL : pool, (d + 1) / 2, 1, gram_task, &j);
    }
    return LMQ_OK;
}

lmq_code cal_collector_observe(void *ctx, const rt_weight *W, const float *x, int n, lmq_err *err)
{
    cal_collector *c = ctx;
    int layer;
    lmq_input which;
    if (!cal_input_of(W->name, &layer, &which))
        return LMQ_OK;
    cal_record *r = collector_find(c, layer, which);
    if (!r || strcmp(r->first, W->name))
        return LMQ_OK;
    if (W->in != r->dim)
        return lmq_fail(err, LMQ_E_ARG, "%s reads %d channels, its input has %d", W->name, W->in, r->dim);
    return record_add(r, c->pool, x, n, err);
}

/* ---------------------------------------------------------------- the stats file */

static const char *const VECTORS[] = { "max_abs", "mean_abs", "mean_sq" };

static void tensor_name(char *buf, size_t size, int layer, lmq_input which, const char *what)
{
    snprintf(buf, size, "stats.blk.%d.%s.%s", layer, lmq_input_names[which], what);
}

static lmq_code write_f32(lmq_writer *w, lmq_manifest *man, const char *name, int ndim, const int64_t *shape,
                          const float *v, lmq_err *err)
{
    lmq_tensor t = { .ndim = ndim, .q = { .dtype = LMQ_T_F32, .gran = LMQ_GRAN_NONE } };
    snprintf(t.name, sizeof t.name, "%s", name);
    memcpy(t.shape, shape, (size_t)ndim * sizeof *shape);
    const size_t n = (size_t)lmq_tensor_numel(&t);
    lmq_code c = lmq_writer_add(w, name, t.q, ndim, shape, v, n * sizeof *v, LMQ_CODEC_NONE, err);
    if (!c && !(c = lmq_manifest_add_plain(man, &t, v, err)))
        snprintf(man->tensors[man->n_tensors - 1].reason, LMQ_REASON_MAX, "calibration statistic");
    return c;
}

lmq_code cal_record_write(const cal_record *r, lmq_writer *w, lmq_manifest *man, lmq_err *err)
{
    const size_t d = (size_t)r->dim;
    const double inv = r->tokens ? 1.0 / (double)r->tokens : 0.0;
    const size_t cells = r->gram ? d * d : 0;
    float *buf = malloc((cells > 2 * d ? cells : 2 * d) * sizeof *buf);
    if (!buf)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory writing the statistics of %s", r->first);
    char name[LMQ_NAME_MAX];
    const int64_t vec[1] = { r->dim }, toks[1] = { r->tokens }, sq[2] = { r->dim, r->dim };
    lmq_code c;
    tensor_name(name, sizeof name, r->layer, r->which, VECTORS[0]);
    c = write_f32(w, man, name, 1, vec, r->max_abs, err);
    for (size_t i = 0; i < d; i++) {
        buf[i] = (float)(r->sum_abs[i] * inv);
        buf[d + i] = (float)(r->sum_sq[i] * inv);
    }
    for (int k = 1; k < 3 && !c; k++) {
        tensor_name(name, sizeof name, r->layer, r->which, VECTORS[k]);
        c = write_f32(w, man, name, 1, vec, buf + (size_t)(k - 1) * d, err);
    }
    if (!c) {
        tensor_name(name, sizeof name, r->layer, r->which, "token_max");
        c = write_f32(w, man, name, 1, toks, r->token_max, err);
    }
    if (!c && r->gram) { /* the upper triangle was summed; the lower is its mirror */
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j < d; j++)
                buf[i * d + j] = (float)(j >= i ? r->gram[i * d + j] : r->gram[j * d + i]);
        tensor_name(name, sizeof name, r->layer, r->which, "gram");
        c = write_f32(w, man, name, 2, sq, buf, err);
    }
    free(buf);
    return c;
}

/* ---------------------------------------------------------------- reading it back */

lmq_code cal_stats_open(cal_stats *s, const char *path, lmq_err *err)
{
    memset(s, 0, sizeof *s);
    lmq_code c = lmq_container_open_manifest(&s->c, &s->man, path, err);
    if (c)
        return c;
    s->file_checksum = s->c.file_checksum;
    if (s->man.kind != LMQ_KIND_STATS || !s->man.calibration) {
        cal_stats_close(s);
        return lmq_fail(err, LMQ_E_ARG, "%s: not a stats file (lmq calibrate writes them)", path);
    }
    return LMQ_OK;
}

void cal_stats_close(cal_stats *s)
{
    if (s->c.data) {
        lmq_manifest_free(&s->man);
        lmq_container_close(&s->c);
    }
    memset(s, 0, sizeof *s);
}

/* Tensor `what` of a record, checked to be fp32 with `cells` elements, read into a malloc'd buffer. */
static lmq_code read_f32(const cal_stats *s, int layer, lmq_input which, const char *what, int64_t cells,
                         float **out, lmq_err *err)
{
    char name[LMQ_NAME_MAX];
    tensor_name(name, sizeof name, layer, which, what);
    *out = NULL;
    const lmq_tensor_entry *t = lmq_container_find(&s->c, name);
    if (!t)
        return lmq_fail(err, LMQ_E_ARG, "%s: no %s (the statistics do not cover this model's layer)", s->c.path, name);
    if (t->q.dtype != LMQ_T_F32 || lmq_entry_numel(t) != cells)
        return lmq_fail(err, LMQ_E_FORMAT, "%s: %s is not %" PRId64 " fp32 values", s->c.path, name, cells);
    lmq_code c = lmq_container_read_alloc(&s->c, t, (void **)out, err);
    for (int64_t i = 0; !c && i < cells; i++)
        if (!isfinite((*out)[i]))
            c = lmq_fail(err, LMQ_E_FORMAT, "%s: %s[%" PRId64 "] is not finite", s->c.path, name, i);
    if (c) {
        free(*out);
        *out = NULL;
    }
    return c;
}

lmq_code cal_stats_vector(const cal_stats *s, int layer, lmq_input which, const char *what, int want_dim,
                          float **out, lmq_err *err)
{
    return read_f32(s, layer, which, what, want_dim, out, err);
}

lmq_code cal_stats_gram(const cal_stats *s, int layer, lmq_input which, int want_dim, double **out, lmq_err *err)
{
    const size_t cells = (size_t)want_dim * (size_t)want_dim;
    float *f;
    *out = NULL;
    lmq_code c = read_f32(s, layer, which, "gram", (int64_t)cells, &f, err);
    if (c)
        return c;
    if ((*out = malloc(cells * sizeof **out)))
        for (size_t i = 0; i < cells; i++)
            (*out)[i] = f[i];
    free(f);
    return *out ? LMQ_OK : lmq_fail(err, LMQ_E_NOMEM, "out of memory for a %d × %d Gram matrix", want_dim, want_dim);
}
