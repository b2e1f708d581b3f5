#include "calibrate/transform.h"

#include <math.h>
#include <stdio.h>

/* Per family and input: the norm's name and the readers' names, "blk.<l>." before each. GPT-2
 * has fused qkv or, converted with --split-qkv, q, k, v apart: both are listed, the fused first,
 * and the first that the model has is used. */
static const struct {
    lmq_family family;
    cal_norm_input which;
    const char *norm;
    const char *readers[2][CAL_MAX_READERS]; /* alternatives; NULL ends a list */
} INPUTS[] = {
    { LMQ_FAMILY_LLAMA, CAL_IN_ATTN, "attn_norm", { { "attn_q", "attn_k", "attn_v" } } },
    { LMQ_FAMILY_LLAMA, CAL_IN_FFN, "ffn_norm", { { "ffn_gate", "ffn_up" } } },
    { LMQ_FAMILY_GPT2, CAL_IN_ATTN, "attn_norm", { { "attn_qkv" }, { "attn_q", "attn_k", "attn_v" } } },
    { LMQ_FAMILY_GPT2, CAL_IN_FFN, "ffn_norm", { { "ffn_up" } } },
};
#define N_INPUTS (int)(sizeof INPUTS / sizeof INPUTS[0])

static int input_of(const lmq_model *m, cal_norm_input which)
{
    for (int i = 0; i < N_INPUTS; i++)
        if (INPUTS[i].family == m->arch.family && INPUTS[i].which == which)
            return i;
    return -1;
}

static lmq_tensor *find(const lmq_model *m, int layer, const char *what, const char *suffix)
{
    char name[LMQ_NAME_MAX];
    snprintf(name, sizeof name, "blk.%d.%s.%s", layer, what, suffix);
    return lmq_model_find(m, name);
}

int cal_norm_readers(const lmq_model *m, int layer, cal_norm_input which, lmq_tensor **out)
{
    const int k = input_of(m, which);
    if (k < 0 || layer < 0 || layer >= m->arch.n_layers)
        return 0;
    for (int alt = 0; alt < 2; alt++) {
        int n = 0;
        while (n < CAL_MAX_READERS && INPUTS[k].readers[alt][n] &&
               (out[n] = find(m, layer, INPUTS[k].readers[alt][n], "weight")))
            n++;
        if (n && (n == CAL_MAX_READERS || !INPUTS[k].readers[alt][n]))
            return n;
    }
    return 0;
}

/* t as writable fp32 values of the expected shape (in columns when cols > 0, else a [dim] vector). */
static lmq_code writable(lmq_tensor *t, int64_t cols, int64_t dim, lmq_err *err)
{
    if (t->q.dtype != LMQ_T_F32)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "tensor %s: is not fp32; scale inputs before quantising", t->name);
    if (cols ? t->ndim != 2 || t->shape[1] != cols : t->ndim != 1 || t->shape[0] != dim)
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: not a %s of the model's width %lld", t->name,
                        cols ? "matrix" : "vector", (long long)dim);
    return lmq_tensor_own(t, err);
}

lmq_code cal_scale_norm_input(lmq_model *m, int layer, cal_norm_input which, const float *s, lmq_err *err)
{
    const int k = input_of(m, which);
    const int64_t dim = m->arch.dim;
    if (k < 0 || layer < 0 || layer >= m->arch.n_layers)
        return lmq_fail(err, LMQ_E_ARG, "no %s input in layer %d of this %d-layer model",
                        which == CAL_IN_ATTN ? "attention" : "feed-forward", layer, m->arch.n_layers);
    for (int64_t j = 0; j < dim; j++)
        if (!(s[j] > 0.0f) || !isfinite(s[j]))
            return lmq_fail(err, LMQ_E_ARG, "blk.%d.%s: scale %g of channel %lld is not finite and positive", layer,
                            INPUTS[k].norm, (double)s[j], (long long)j);
    lmq_tensor *readers[CAL_MAX_READERS], *norm[2] = { find(m, layer, INPUTS[k].norm, "weight"),
                                                       find(m, layer, INPUTS[k].norm, "bias") };
    const int n = cal_norm_readers(m, layer, which, readers);
    if (!n || !norm[0])
        return lmq_fail(err, LMQ_E_FORMAT, "blk.%d.%s: the norm or the layers it feeds are missing", layer,
                        INPUTS[k].norm);
    /* Check (and own) everything first, so that an error leaves the model as it was. */
    lmq_code c = LMQ_OK;
    for (int i = 0; i < 2 && !c; i++)
        if (norm[i])
            c = writable(norm[i], 0, dim, err);
    for (int i = 0; i < n && !c; i++)
        c = writable(readers[i], dim, dim, err);
    if (c)
        return c;
    for (int i = 0; i < 2; i++)
        for (int64_t j = 0; norm[i] && j < dim; j++)
            norm[i]->data[j] *= s[j];
    for (int i = 0; i < n; i++)
        for (int64_t r = 0; r < readers[i]->shape[0]; r++)
            for (int64_t j = 0; j < dim; j++)
                readers[i]->data[r * dim + j] /= s[j];
    return LMQ_OK;
}
