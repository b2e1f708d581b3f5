/* The runtime model for the two families lmq imports (GPT-2 and Llama), its state, and the CPU
 * backend of the forward pass (runtime/pass.h).
 *
 * rt_model is a view of an lmq_model: it looks the tensors up by their canonical names, checks
 * their shapes and keeps typed views of the weights in their stored encodings (no copy; only
 * norm and bias vectors stored in another encoding are decoded), so the lmq_model must outlive
 * it. rt_state holds
 * the activations and the KV cache for up to max_tokens positions. rt_forward evaluates n
 * tokens at positions pos0.. in one pass (prefill as matrix-matrix products); rt_decode is its
 * one-token case. A token's logits are bit-identical whether it was evaluated alone from the
 * cache or inside a longer batch, and for any thread count (except under per-tensor activation
 * quantisation, whose scale is the call's by definition: runtime/linear.h). */
#ifndef LMQ_RT_FORWARD_H
#define LMQ_RT_FORWARD_H

#include "formats/model.h"
#include "runtime/linear.h"

/* The weights a pass reads, by name (runtime/pass.h): a block's matrices in the order a token
 * reads them (index rt_layer.w), then the model's own. */
typedef enum {
    RT_W_QKV,  /* attn_qkv: q|k|v fused (GPT-2 as imported by default) */
    RT_W_Q,    /* attn_q, attn_k, attn_v: otherwise (biases: GPT-2, Qwen2) */
    RT_W_K,
    RT_W_V,
    RT_W_OUT,  /* attn_out */
    RT_W_GATE, /* ffn_gate: Llama */
    RT_W_UP,   /* ffn_up */
    RT_W_DOWN, /* ffn_down */
    RT_W_BLOCK, /* a block's count; the model's own follow */
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

typedef struct rt_state rt_state;

/* A state for up to max_tokens positions (<= arch.max_seq; 0 = arch.max_seq). ex says where
 * the kernels run; it is copied. With ex->device = RT_DEVICE_CUDA the model's weights are
 * uploaded to the CUDA plugin's device 0 (runtime/backend.h) and every pass runs there
 * (the same pass, runtime/pass.h, on the CUDA backend's ops; not bit-identical to the CPU's:
 * runtime/cuda/cuda.h); m must then stay unchanged while the state lives. */
lmq_code rt_state_create(const rt_model *m, const rt_exec *ex, int max_tokens, rt_state **out, lmq_err *err);
/* The same with `seqs` sequences, each its own KV cache of max_tokens positions (batched
 * decoding): more than one on the cuda device only. */
lmq_code rt_state_create_seqs(const rt_model *m, const rt_exec *ex, int max_tokens, int seqs, rt_state **out,
                              lmq_err *err);
void rt_state_free(rt_state *s);
const rt_model *rt_state_model(const rt_state *s);
int rt_state_max_tokens(const rt_state *s);
const rt_exec *rt_state_exec(const rt_state *s);

typedef enum {
    RT_LOGITS_ALL,  /* logits for every evaluated position: [n × vocab] */
    RT_LOGITS_LAST, /* only the last position's: [vocab] */
    RT_LOGITS_NONE, /* fill the cache only */
} rt_logits;

/* Evaluates tokens[0..n) at positions pos0..pos0+n-1. The cache must hold positions 0..pos0-1
 * from earlier calls (pos0 = 0 starts afresh); positions >= pos0 are overwritten. */
lmq_code rt_forward(rt_state *s, const int32_t *tokens, int n, int pos0, rt_logits which, float *logits,
                    lmq_err *err);
/* rt_forward on sequence seq of the state (0 on the CPU). */
lmq_code rt_forward_seq(rt_state *s, int seq, const int32_t *tokens, int n, int pos0, rt_logits which, float *logits,
                        lmq_err *err);
/* One token for each of sequences 0..n-1, each at the position after what it holds, in one
 * pass: logits [n × vocab]. The cuda device only (LMQ_E_UNSUPPORTED on the CPU). */
lmq_code rt_decode_batch(rt_state *s, int n, const int32_t *tokens, float *logits, lmq_err *err);
/* tokens[0..n) from position 0 through the embeddings and the first `blocks` blocks, nothing after
 * (the calibrate stage observes a block's inputs and needs no more). The cache holds no complete
 * position afterwards: the next rt_forward starts at position 0. */
lmq_code rt_forward_blocks(rt_state *s, const int32_t *tokens, int n, int blocks, lmq_err *err);
/* The residual stream, [max_tokens × dim]: after rt_forward_blocks(.., blocks) its first n rows
 * are block `blocks`' input. */
float *rt_state_stream(rt_state *s);
/* Blocks [first, last) over the first n rows of the residual stream as it stands (positions
 * 0..n-1), nothing else: a pass taken a block at a time, its stream kept between the calls,
 * computes what rt_forward_blocks computes in one (bit for bit). The cache as rt_forward_blocks
 * leaves it. */
lmq_code rt_forward_from(rt_state *s, int n, int first, int last, lmq_err *err);
/* One token at position pos from the cache: logits [vocab]. */
lmq_code rt_decode(rt_state *s, int32_t token, int pos, float *logits, lmq_err *err);

#endif
