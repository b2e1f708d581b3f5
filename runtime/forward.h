/* The runtime's state and the forward pass over it, on any backend (runtime/backend.h).
 *
 * rt_state holds the activations and the KV cache for up to max_tokens positions of each of its
 * sequences, in the memory of the backend it was made on. rt_forward evaluates n tokens at
 * positions pos0.. in one pass (prefill as matrix-matrix products); rt_decode is its one-token
 * case. A token's logits are bit-identical whether it was evaluated alone from the cache or inside
 * a longer batch, and for any thread count (except under per-tensor activation quantisation,
 * whose scale is the call's by definition: runtime/linear.h), on the CPU; another backend's are
 * not the CPU's bits (runtime/cuda/cuda.h). */
#ifndef LMQ_RT_FORWARD_H
#define LMQ_RT_FORWARD_H

#include "runtime/model.h"

typedef struct rt_state rt_state;

/* A state for up to max_tokens positions (<= arch.max_seq; 0 = arch.max_seq) on the backend
 * ex->backend names (NULL: the CPU); ex says where the host's kernels run and is copied. m must
 * stay unchanged while the state lives (a device backend uploads its weights once). */
lmq_code rt_state_create(const rt_model *m, const rt_exec *ex, int max_tokens, rt_state **out, lmq_err *err);
/* The same with `seqs` sequences, each its own KV cache of max_tokens positions (batched
 * decoding): up to the backend's max_seqs. */
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
/* rt_forward on sequence seq of the state. */
lmq_code rt_forward_seq(rt_state *s, int seq, const int32_t *tokens, int n, int pos0, rt_logits which, float *logits,
                        lmq_err *err);
/* One token for each of sequences 0..n-1, each at the position after what it holds, in one
 * pass: logits [n × vocab]. */
lmq_code rt_decode_batch(rt_state *s, int n, const int32_t *tokens, float *logits, lmq_err *err);
/* tokens[0..n) from position 0 through the embeddings and the first `blocks` blocks, nothing after
 * (the calibrate stage observes a block's inputs and needs no more). The cache holds no complete
 * position afterwards: the next rt_forward starts at position 0. Backends with a host stream
 * only (the CPU). */
lmq_code rt_forward_blocks(rt_state *s, const int32_t *tokens, int n, int blocks, lmq_err *err);
/* The residual stream, [max_tokens × dim]: after rt_forward_blocks(.., blocks) its first n rows
 * are block `blocks`' input. NULL on a backend that keeps it in device memory. */
float *rt_state_stream(rt_state *s);
/* Blocks [first, last) over the first n rows of the residual stream as it stands (positions
 * 0..n-1), nothing else: a pass taken a block at a time, its stream kept between the calls,
 * computes what rt_forward_blocks computes in one (bit for bit). The cache as rt_forward_blocks
 * leaves it. */
lmq_code rt_forward_from(rt_state *s, int n, int first, int last, lmq_err *err);
/* One token at position pos from the cache: logits [vocab]. */
lmq_code rt_decode(rt_state *s, int32_t token, int pos, float *logits, lmq_err *err);

#endif
