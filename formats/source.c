#include "formats/source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lmq_plan_init(lmq_plan *p)
{
    memset(p, 0, sizeof *p);
    lmq_model_init(&p->model);
}

void lmq_plan_free(lmq_plan *p)
{
    lmq_model_free(&p->model);
    free(p->sources);
    if (p->blob.data)
        lmq_blob_close(&p->blob);
    for (int i = 0; i < p->n_shards; i++)
        st_close(&p->shards[i]);
    free(p->shards);
    lmq_plan_init(p);
}

lmq_code lmq_plan_add(lmq_plan *p, const char *name, int ndim, const int64_t *shape, const lmq_source *s,
                      lmq_err *err)
{
    if (p->model.n_tensors == p->cap_sources) {
        int nc = p->cap_sources ? 2 * p->cap_sources : 64;
        lmq_source *q = realloc(p->sources, (size_t)nc * sizeof *q);
        if (!q)
            return lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory", name);
        p->sources = q;
        p->cap_sources = nc;
    }
    lmq_tensor *t;
    lmq_code c = lmq_model_add_view(&p->model, name, ndim, shape, (lmq_qparams){ .dtype = LMQ_T_F32 }, NULL, 0,
                                    NULL, &t, err);
    if (c)
        return c;
    t->raw_size = (size_t)lmq_tensor_numel(t) * sizeof(float);
    p->sources[p->model.n_tensors - 1] = *s;
    return LMQ_OK;
}

static size_t source_bytes(const lmq_source *s)
{
    return (size_t)(s->rows * s->cols) * (size_t)st_dtype_bits(s->dtype) / 8;
}

int lmq_source_equal(const lmq_source *a, const lmq_source *b, int64_t n)
{
    enum { CHUNK = 4096 };
    float x[CHUNK], y[CHUNK];
    const size_t wa = (size_t)st_dtype_bits(a->dtype) / 8, wb = (size_t)st_dtype_bits(b->dtype) / 8;
    int same = 1;
    for (int64_t i = 0; i < n && same; i += CHUNK) {
        const size_t k = (size_t)(n - i < CHUNK ? n - i : CHUNK);
        st_decode(a->dtype, a->src + (size_t)i * wa, x, k);
        st_decode(b->dtype, b->src + (size_t)i * wb, y, k);
        same = !memcmp(x, y, k * sizeof *x);
    }
    lmq_map_drop(a->src, source_bytes(a));
    lmq_map_drop(b->src, source_bytes(b));
    return same;
}

void lmq_source_hash(XXH3_state_t *s, const lmq_blob *b)
{
    const size_t piece = (size_t)64 << 20;
    for (size_t off = 0; off < b->size; off += piece) {
        const size_t n = b->size - off < piece ? b->size - off : piece;
        XXH3_64bits_update(s, b->data + off, n);
        if (b->mapped)
            lmq_map_drop(b->data + off, n);
    }
}

lmq_code lmq_plan_produce(void *plan, int i, float *out, lmq_err *err)
{
    const lmq_plan *p = plan;
    const lmq_tensor *t = &p->model.tensors[i];
    const lmq_source *s = &p->sources[i];
    const size_t n = (size_t)lmq_tensor_numel(t);
    if (!s->transpose) {
        st_decode(s->dtype, s->src + (size_t)s->first * (size_t)st_dtype_bits(s->dtype) / 8, out, n);
    } else {
        float *tmp = malloc((size_t)(s->rows * s->cols) * sizeof *tmp);
        if (!tmp)
            return lmq_fail(err, LMQ_E_NOMEM, "%s: tensor %s: out of memory", p->where, t->name);
        st_decode(s->dtype, s->src, tmp, (size_t)(s->rows * s->cols));
        size_t k = 0; /* canonical row j is source column j */
        for (int64_t j = s->first / s->rows; k < n; j++)
            for (int64_t r = 0; r < s->rows; r++)
                out[k++] = tmp[r * s->cols + j];
        free(tmp);
    }
    lmq_map_drop(s->src, source_bytes(s));
    lmq_code c = lmq_tensor_finite(t, out, err);
    if (c && s->origin) {
        size_t len = strlen(err->msg);
        snprintf(err->msg + len, sizeof err->msg - len, " (checkpoint tensor %s)", s->origin);
    }
    return c ? lmq_err_prefix(err, "%s: ", p->where) : LMQ_OK;
}

lmq_code lmq_plan_load(lmq_plan *p, lmq_model *out, lmq_err *err)
{
    lmq_code c = LMQ_OK;
    for (int i = 0; i < p->model.n_tensors && !c; i++) {
        lmq_tensor *t = &p->model.tensors[i];
        float *v = malloc(t->raw_size);
        if (!v)
            c = lmq_fail(err, LMQ_E_NOMEM, "%s: tensor %s: out of memory", p->where, t->name);
        else
            c = lmq_plan_produce(p, i, v, err);
        t->raw = (const uint8_t *)v; /* owned even after a failure, so that freeing the model frees it */
        t->data = t->owned = v;
    }
    *out = p->model;
    lmq_model_init(&p->model);
    lmq_plan_free(p);
    if (c)
        lmq_model_free(out);
    return c;
}
