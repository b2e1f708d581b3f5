#include "calibrate/transform.h"

#include <math.h>
#include <stdio.h>

/* The norm in front of each input a norm feeds. */
static const char *const NORMS[LMQ_IN_COUNT] = { [LMQ_IN_ATTN] = "attn_norm", [LMQ_IN_FFN] = "ffn_norm" };

static lmq_code check_scales(const char *what, const float *s, int n, lmq_err *err)
{
    for (int j = 0; j < n; j++)
        if (!(s[j] > 0.0f) || !isfinite(s[j]))
            return lmq_fail(err, LMQ_E_ARG, "%s: scale %g of channel %d is not finite and positive", what,
                            (double)s[j], j);
    return LMQ_OK;
}

/* t as writable fp32 values: a matrix of `cols` columns (cols > 0), or a vector of at least `len`. */
static lmq_code writable(lmq_tensor *t, int64_t cols, int64_t len, lmq_err *err)
{
    if (t->q.dtype != LMQ_T_F32)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "tensor %s: is not fp32; scale inputs before quantising", t->name);
    if (cols ? t->ndim != 2 || t->shape[1] != cols : t->ndim != 1 || t->shape[0] < len)
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: not a %s of width %lld", t->name, cols ? "matrix" : "vector",
                        (long long)(cols ? cols : len));
    return lmq_tensor_own(t, err);
}

/* Element or row row0 + j of t × s_j. */
static void mul_rows(lmq_tensor *t, int64_t row0, int n, const float *s)
{
    const int64_t width = t->ndim == 2 ? t->shape[1] : 1;
    for (int j = 0; j < n; j++)
        for (int64_t k = 0; k < width; k++)
            t->data[(row0 + j) * width + k] *= s[j];
}

static void div_columns(lmq_tensor *const *t, int n, const float *s)
{
    for (int i = 0; i < n; i++) {
        const int64_t cols = t[i]->shape[1];
        for (int64_t r = 0; r < t[i]->shape[0]; r++)
            for (int64_t j = 0; j < cols; j++)
                t[i]->data[r * cols + j] /= s[j];
    }
}

lmq_code cal_scale_columns(lmq_tensor *const *t, int n, const float *s, lmq_err *err)
{
    lmq_code c = n ? check_scales(t[0]->name, s, (int)t[0]->shape[1], err) : LMQ_OK;
    for (int i = 0; i < n && !c; i++)
        c = writable(t[i], t[0]->shape[1], 0, err);
    if (!c)
        div_columns(t, n, s);
    return c;
}

lmq_code cal_scale_rows(lmq_tensor *w, lmq_tensor *b, int64_t row0, int n, const float *s, lmq_err *err)
{
    lmq_code c = check_scales(w->name, s, n, err);
    if (!c && (w->ndim != 2 || row0 < 0 || row0 + n > w->shape[0]))
        c = lmq_fail(err, LMQ_E_ARG, "tensor %s: rows %lld..%lld are not all there", w->name, (long long)row0,
                     (long long)(row0 + n - 1));
    if (c || (c = writable(w, w->shape[1], 0, err)) || (b && (c = writable(b, 0, w->shape[0], err))))
        return c;
    mul_rows(w, row0, n, s);
    if (b)
        mul_rows(b, row0, n, s);
    return LMQ_OK;
}

lmq_code cal_scale_norm_input(lmq_model *m, int layer, lmq_input which, const float *s, lmq_err *err)
{
    const int dim = m->arch.dim;
    char name[2][LMQ_NAME_MAX];
    lmq_tensor *readers[CAL_MAX_READERS];
    const int n = NORMS[which] && layer >= 0 && layer < m->arch.n_layers ? cal_input_readers(m, layer, which, readers) : 0;
    if (!n)
        return lmq_fail(err, LMQ_E_ARG, "block %d of this %d-layer model has no %s fed by a norm", layer,
                        m->arch.n_layers, lmq_input_names[which]);
    snprintf(name[0], sizeof name[0], "blk.%d.%s.weight", layer, NORMS[which]);
    snprintf(name[1], sizeof name[1], "blk.%d.%s.bias", layer, NORMS[which]);
    lmq_tensor *norm[2] = { lmq_model_find(m, name[0]), lmq_model_find(m, name[1]) };
    if (!norm[0])
        return lmq_fail(err, LMQ_E_FORMAT, "%s is missing", name[0]);
    lmq_code c = check_scales(name[0], s, dim, err);
    for (int i = 0; i < 2 && !c; i++)
        if (norm[i])
            c = writable(norm[i], 0, dim, err);
    for (int i = 0; i < n && !c; i++)
        c = writable(readers[i], dim, 0, err);
    if (c)
        return c;
    for (int i = 0; i < 2; i++)
        if (norm[i])
            mul_rows(norm[i], 0, dim, s);
    div_columns(readers, n, s);
    return LMQ_OK;
}
