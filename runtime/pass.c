/* The forward pass (runtime/pass.h), read top to bottom. */
#include "runtime/pass.h"

#define TRY(call)                                                                                                  \
    do {                                                                                                           \
        const lmq_code c_ = (call);                                                                                \
        if (c_)                                                                                                    \
            return c_;                                                                                             \
    } while (0)

lmq_code rt_pass(const rt_ops *o, void *be, const rt_pass_rows *p, lmq_err *err)
{
    const int n = p->n;
    /* Token (and, for GPT-2, learned position) embeddings. */
    if (p->embed) {
        TRY(o->embed(be, RT_W_TOK, err));
        if (o->has(be, -1, RT_W_POS))
            TRY(o->embed(be, RT_W_POS, err));
    }
    for (int l = p->from; l < p->to; l++) {
        /* Attention: q for the new rows; k and v appended to the cache. */
        TRY(o->norm(be, l, RT_NORM_ATTN, RT_BUF_XB, RT_BUF_X, 0, n, err));
        const int fused = o->has(be, l, RT_W_QKV);
        if (fused) {
            TRY(o->linear(be, l, RT_W_QKV, RT_BUF_XB, 0, n, RT_BUF_QKV, err));
        } else {
            TRY(o->linear(be, l, RT_W_Q, RT_BUF_XB, 0, n, RT_BUF_Q, err));
            TRY(o->linear(be, l, RT_W_K, RT_BUF_XB, 0, n, RT_BUF_K, err));
            TRY(o->linear(be, l, RT_W_V, RT_BUF_XB, 0, n, RT_BUF_V, err));
        }
        TRY(o->rope_store(be, l, fused, err));
        TRY(o->attention(be, l, err));
        TRY(o->linear(be, l, RT_W_OUT, RT_BUF_XB2, 0, n, RT_BUF_XB, err));
        TRY(o->add(be, RT_BUF_X, RT_BUF_XB, err));

        /* Feed-forward: GELU(x·up)·down for GPT-2, (silu(x·gate) ⊙ x·up)·down for Llama. */
        TRY(o->norm(be, l, RT_NORM_FFN, RT_BUF_XB, RT_BUF_X, 0, n, err));
        const int gated = o->has(be, l, RT_W_GATE);
        TRY(o->linear(be, l, gated ? RT_W_GATE : RT_W_UP, RT_BUF_XB, 0, n, RT_BUF_HB, err));
        if (gated)
            TRY(o->linear(be, l, RT_W_UP, RT_BUF_XB, 0, n, RT_BUF_HB2, err));
        TRY(o->activation(be, gated, err));
        TRY(o->linear(be, l, RT_W_DOWN, RT_BUF_HB, 0, n, RT_BUF_XB, err));
        TRY(o->add(be, RT_BUF_X, RT_BUF_XB, err));
    }
    if (p->logits_from >= n)
        return LMQ_OK;

    /* Final norm and classifier for rows [logits_from, n). */
    const int r0 = p->logits_from, rows = n - r0;
    TRY(o->norm(be, -1, RT_NORM_OUT, RT_BUF_XB, RT_BUF_X, r0, rows, err));
    return o->linear(be, -1, RT_W_CLS, RT_BUF_XB, r0, rows, RT_BUF_LOGITS, err);
}
