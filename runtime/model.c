/* The model view (runtime/model.h). */
#include "runtime/model.h"

#include <stdlib.h>
#include <string.h>

/* Norm weights and biases as fp32: the stored values when fp32, else decoded once into a buffer
 * the model owns (vectors are small; matrices are never copied). */
static lmq_code vector(rt_model *rm, const lmq_model *m, const char *name, const float **out, lmq_err *err)
{
    *out = NULL;
    const lmq_tensor *t = lmq_model_find(m, name);
    if (!t || t->data) {
        *out = t ? t->data : NULL;
        return LMQ_OK;
    }
    const int64_t n = lmq_tensor_numel(t);
    float *v = malloc((size_t)n * sizeof *v);
    void **grown = realloc(rm->owned, (size_t)(rm->n_owned + 1) * sizeof *grown);
    if (!v || !grown) {
        free(v);
        if (grown)
            rm->owned = grown;
        return lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory", name);
    }
    rm->owned = grown;
    rm->owned[rm->n_owned++] = v;
    if (q_dequantize(&t->q, t->raw, t->raw_size, 1, n, v, NULL, err))
        return lmq_err_prefix(err, "tensor %s: ", name);
    *out = v;
    return LMQ_OK;
}

static lmq_code weight(rt_model *rm, const lmq_model *m, const char *name, const char *bias, rt_weight *W,
                       lmq_err *err)
{
    const float *b = NULL;
    lmq_code c = bias ? vector(rm, m, bias, &b, err) : LMQ_OK;
    return c ? c : rt_weight_of(lmq_model_find(m, name), b, W, err);
}

/* Block l's norms and matrices. lmq_model_validate checked which the model has: GPT-2 q, k, v
 * fused or not, Llama biases on all three or none. */
static lmq_code layer_init(rt_model *rm, const lmq_model *m, int l, lmq_err *err)
{
    const int gpt2 = rm->arch.family == LMQ_FAMILY_GPT2;
    rt_layer *L = &rm->layers[l];
    char n[2][LMQ_NAME_MAX];
#define NAME(i, what, part) (snprintf(n[i], sizeof n[i], "blk.%d.%s%s", l, what, part), n[i])
    const unsigned family = 1u << rm->arch.family | (lmq_model_find(m, NAME(1, "attn_q", ".bias")) ? LMQ_ROLE_QKV_BIAS : 0);
    lmq_code c;
    if ((c = vector(rm, m, NAME(0, "attn_norm", ".weight"), &L->attn_norm_w, err)) ||
        (c = vector(rm, m, NAME(0, "ffn_norm", ".weight"), &L->ffn_norm_w, err)) ||
        (gpt2 && (c = vector(rm, m, NAME(0, "attn_norm", ".bias"), &L->attn_norm_b, err))) ||
        (gpt2 && (c = vector(rm, m, NAME(0, "ffn_norm", ".bias"), &L->ffn_norm_b, err))))
        return c;
    for (int w = 0; w < RT_W_BLOCK; w++) {
        const lmq_role_row *r = &lmq_roles[w];
        if ((r->in & family) && lmq_model_find(m, NAME(0, r->name, ".weight")) &&
            (c = weight(rm, m, n[0], r->bias & family ? NAME(1, r->name, ".bias") : NULL, &L->w[w], err)))
            return c;
    }
    return LMQ_OK;
#undef NAME
}

lmq_code rt_model_init(rt_model *rm, const lmq_model *m, lmq_err *err)
{
    memset(rm, 0, sizeof *rm);
    lmq_code c = lmq_model_validate(m, err);
    if (c)
        return c;
    const lmq_arch *a = &m->arch;
    const int gpt2 = a->family == LMQ_FAMILY_GPT2;
    rm->arch = *a;
    rm->head_dim = a->dim / a->n_heads;
    rm->kv_dim = rm->head_dim * a->n_kv_heads;
    rm->layers = calloc((size_t)a->n_layers, sizeof *rm->layers);
    if (!rm->layers)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory for %d layers", a->n_layers);
    /* A tied classifier reads tok_embd.weight (quantize gives it a copy of its own only untied). */
    const char *cls = a->tied_embedding ? "tok_embd.weight" : "output.weight";
    if ((c = weight(rm, m, "tok_embd.weight", NULL, &rm->tok_embd, err)) ||
        (gpt2 && (c = weight(rm, m, "pos_embd.weight", NULL, &rm->pos_embd, err))) ||
        (c = vector(rm, m, "out_norm.weight", &rm->out_norm_w, err)) ||
        (gpt2 && (c = vector(rm, m, "out_norm.bias", &rm->out_norm_b, err))) ||
        (c = weight(rm, m, cls, NULL, &rm->classifier, err)))
        goto fail;
    for (int l = 0; l < a->n_layers; l++)
        if ((c = layer_init(rm, m, l, err)))
            goto fail;
    return LMQ_OK;
fail:
    rt_model_free(rm);
    return c;
}

void rt_model_free(rt_model *rm)
{
    for (int i = 0; i < rm->n_owned; i++)
        free(rm->owned[i]);
    free(rm->owned);
    free(rm->layers);
    memset(rm, 0, sizeof *rm);
}

const rt_weight *rt_model_weight(const rt_model *rm, int layer, rt_wslot w)
{
    return w == RT_W_TOK ? &rm->tok_embd
           : w == RT_W_POS ? &rm->pos_embd
           : w == RT_W_CLS ? &rm->classifier
                           : &rm->layers[layer].w[w];
}

void rt_model_each_streamed(const rt_model *rm, void (*fn)(const rt_weight *W, void *ctx), void *ctx)
{
    for (int l = 0; l < rm->arch.n_layers; l++)
        for (int w = 0; w < RT_W_BLOCK; w++)
            if (rm->layers[l].w[w].data)
                fn(&rm->layers[l].w[w], ctx);
    fn(&rm->classifier, ctx);
}

static void add_bytes(const rt_weight *W, void *bytes)
{
    *(uint64_t *)bytes += W->L.bytes;
}

uint64_t rt_model_weight_bytes(const rt_model *rm)
{
    uint64_t bytes = 0;
    rt_model_each_streamed(rm, add_bytes, &bytes);
    return bytes;
}
