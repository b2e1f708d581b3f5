/* The runtime model for the two families lmq imports (GPT-2 and Llama): a view of an lmq_model.
 *
 * rt_model looks the tensors up by their canonical names, checks their shapes and keeps typed
 * views of the weights in their stored encodings (no copy; only norm and bias vectors stored in
 * another encoding are decoded), so the lmq_model must outlive it. Every backend
 * (runtime/backend.h) runs its passes over this view. */
#ifndef LMQ_RT_MODEL_H
#define LMQ_RT_MODEL_H

#include "formats/model.h"
#include "formats/roles.h"
#include "runtime/linear.h"

/* The weights a pass reads, by name (runtime/pass.h): a block's matrices by role
 * (formats/roles.h, index rt_layer.w), then the model's own. */
typedef enum {
    RT_W_QKV = LMQ_ROLE_QKV,
    RT_W_Q = LMQ_ROLE_Q,
    RT_W_K = LMQ_ROLE_K,
    RT_W_V = LMQ_ROLE_V,
    RT_W_OUT = LMQ_ROLE_OUT,
    RT_W_GATE = LMQ_ROLE_GATE,
    RT_W_UP = LMQ_ROLE_UP,
    RT_W_DOWN = LMQ_ROLE_DOWN,
    RT_W_BLOCK = LMQ_ROLE_COUNT, /* a block's count; the model's own follow */
    RT_W_TOK = RT_W_BLOCK, /* tok_embd */
    RT_W_POS,  /* pos_embd: GPT-2 */
    RT_W_CLS,  /* the classifier */
} rt_wslot;

typedef struct {
    const float *attn_norm_w, *attn_norm_b; /* b: GPT-2 only */
    const float *ffn_norm_w, *ffn_norm_b;
    rt_weight w[RT_W_BLOCK]; /* data NULL where the block has none */
} rt_layer;

typedef struct {
    lmq_arch arch;
    int head_dim, kv_dim;
    rt_weight tok_embd; /* [vocab × dim], read a row at a time */
    rt_weight pos_embd; /* [max_seq × dim], GPT-2 only */
    rt_layer *layers;
    const float *out_norm_w, *out_norm_b;
    rt_weight classifier; /* output.weight, or tok_embd when tied */
    void **owned;         /* decoded vectors */
    int n_owned;
} rt_model;

/* Validates m (shapes, finite weights, a supported rope layout) and points rm into it. */
lmq_code rt_model_init(rt_model *rm, const lmq_model *m, lmq_err *err);
void rt_model_free(rt_model *rm);
/* Weight w of block `layer` (a block's slot), or the model's own (RT_W_TOK.., layer ignored);
 * its data is NULL where the model has none. */
const rt_weight *rt_model_weight(const rt_model *rm, int layer, rt_wslot w);
/* The stored weight matrices one decoded token streams from memory, in the order it reads them:
 * every linear layer, then the classifier (the embeddings give one row each). fn(W, ctx) each. */
void rt_model_each_streamed(const rt_model *rm, void (*fn)(const rt_weight *W, void *ctx), void *ctx);
/* Their bytes: the roofline's numerator. */
uint64_t rt_model_weight_bytes(const rt_model *rm);

#endif
