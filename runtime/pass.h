/* The forward pass as a short list of ops: the one definition of the two model families (GPT-2,
 * Llama) that every backend runs, the CPU's (runtime/cpu.c) and the CUDA plugin's
 * (runtime/cuda/forward.cu). The pass names buffers and weights; a backend holds them, the KV
 * cache and the call's rows (tokens, positions), and resolves the names into its own memory. */
#ifndef LMQ_RT_PASS_H
#define LMQ_RT_PASS_H

#include "common/err.h"
#include "runtime/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Activation buffers, rows of the call: X the residual stream; XB, XB2 [dim]; Q [dim], K and
 * V [kv_dim] (the backend may place K and V in the layer's cache); QKV the fused product;
 * HB, HB2 [hidden]; LOGITS [vocab]. */
typedef enum { RT_BUF_X, RT_BUF_XB, RT_BUF_XB2, RT_BUF_Q, RT_BUF_K, RT_BUF_V, RT_BUF_QKV, RT_BUF_HB, RT_BUF_HB2,
               RT_BUF_LOGITS, RT_BUF_COUNT } rt_buf;
typedef enum { RT_NORM_ATTN, RT_NORM_FFN, RT_NORM_OUT } rt_norm;

/* A backend's ops; be is its state for the call. layer -1 names the model's own weights and
 * norm. Every op but has returns an lmq_code. */
typedef struct {
    /* Whether the model has weight w (rt_model_weight's data is set). */
    int (*has)(void *be, int layer, rt_wslot w);
    /* X ← the rows of tok_embd for the call's tokens (RT_W_TOK); X += the rows of pos_embd
     * for their positions (RT_W_POS). */
    lmq_code (*embed)(void *be, rt_wslot w, lmq_err *err);
    /* Rows [r0, r0 + rows) of y ← LayerNorm (a bias) or RMSNorm of those of x. */
    lmq_code (*norm)(void *be, int layer, rt_norm which, rt_buf y, rt_buf x, int r0, int rows, lmq_err *err);
    /* Rows [0, rows) of y ← rows [r0, r0 + rows) of x · Wᵀ (+ b). */
    lmq_code (*linear)(void *be, int layer, rt_wslot w, rt_buf x, int r0, int rows, rt_buf y, lmq_err *err);
    /* q and k of the call's rows rotated by their positions (the model's rope; none for
     * GPT-2), k and v stored in the layer's cache, from Q, K, V or (fused) QKV's thirds; Q
     * holds the rotated q. */
    lmq_code (*rope_store)(void *be, int layer, int fused, lmq_err *err);
    /* XB2 ← each head's causal attention of Q's rows over the layer's cache. */
    lmq_code (*attention)(void *be, int layer, lmq_err *err);
    /* HB ← GELU(HB) (tanh form), or silu(HB) ⊙ HB2 (gated). */
    lmq_code (*activation)(void *be, int gated, lmq_err *err);
    /* x += y over the call's rows of the residual width. */
    lmq_code (*add)(void *be, rt_buf x, rt_buf y, lmq_err *err);
} rt_ops;

/* What a call runs: n rows, from their embeddings (embed) or from X as it stands, through
 * blocks [from, to), and LOGITS for rows [logits_from, n) (n: none, nor the final norm). */
typedef struct {
    int n, embed, from, to, logits_from;
} rt_pass_rows;

lmq_code rt_pass(const rt_ops *ops, void *be, const rt_pass_rows *p, lmq_err *err);

#ifdef __cplusplus
}
#endif

#endif
