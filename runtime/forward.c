/* The state and the forward pass over a backend (runtime/forward.h): the checks every backend
 * shares, the positions each sequence holds, and the call the backend runs. */
#include "runtime/forward.h"

#include <stdlib.h>

#include "runtime/backend.h"
#include "runtime/kv.h"

struct rt_state {
    const rt_backend *be;
    void *impl; /* the backend's own state */
    const rt_model *m;
    rt_exec ex;
    int max_tokens, seqs;
    int *fill;    /* [seqs]: positions sequence q holds */
    int32_t *ids; /* [2 × max(max_tokens, seqs)]: a call's positions and sequences */
};

const rt_model *rt_state_model(const rt_state *s) { return s->m; }
int rt_state_max_tokens(const rt_state *s) { return s->max_tokens; }
const rt_exec *rt_state_exec(const rt_state *s) { return &s->ex; }

void rt_state_free(rt_state *s)
{
    if (!s)
        return;
    if (s->impl)
        s->be->state_free(s->impl);
    free(s->fill);
    free(s->ids);
    free(s);
}

lmq_code rt_state_create(const rt_model *m, const rt_exec *ex, int max_tokens, rt_state **out, lmq_err *err)
{
    return rt_state_create_seqs(m, ex, max_tokens, 1, out, err);
}

lmq_code rt_state_create_seqs(const rt_model *m, const rt_exec *ex, int max_tokens, int seqs, rt_state **out,
                              lmq_err *err)
{
    *out = NULL;
    const rt_backend *be = ex->backend ? ex->backend : &rt_cpu_backend;
    if (max_tokens == 0)
        max_tokens = m->arch.max_seq;
    if (max_tokens < 1 || max_tokens > m->arch.max_seq)
        return lmq_fail(err, LMQ_E_ARG, "state for %d tokens: the model's context is 1..%d", max_tokens,
                        m->arch.max_seq);
    if (seqs < 1)
        return lmq_fail(err, LMQ_E_ARG, "a state for %d sequences", seqs);
    if (seqs > be->max_seqs)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "a state for %d sequences: the %s backend decodes %d at a time "
                        "(batched decoding: the cuda device)", seqs, be->name, be->max_seqs);
    rt_state *s = calloc(1, sizeof *s);
    const size_t rows = (size_t)(max_tokens > seqs ? max_tokens : seqs);
    if (s) {
        s->fill = calloc((size_t)seqs, sizeof *s->fill);
        s->ids = malloc(2 * rows * sizeof *s->ids);
    }
    if (!s || !s->fill || !s->ids) {
        rt_state_free(s);
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory for the runtime state");
    }
    *s = (rt_state){ .be = be, .m = m, .ex = *ex, .max_tokens = max_tokens, .seqs = seqs, .fill = s->fill,
                     .ids = s->ids };
    /* fp32 named or not is the same cache: a backend sees NULL for it */
    const rt_kv_format *fp32 = rt_kv_find("fp32");
    s->ex.kv_k = ex->kv_k == fp32 ? NULL : ex->kv_k;
    s->ex.kv_v = ex->kv_v == fp32 ? NULL : ex->kv_v;
    lmq_code c = be->state_create(m, &s->ex, max_tokens, seqs, &s->impl, err);
    if (c) {
        rt_state_free(s);
        return c;
    }
    *out = s;
    return LMQ_OK;
}

/* The arguments of a pass of n tokens (NULL: the residual stream as it stands) at pos0 over a
 * sequence holding `filled` positions. */
static lmq_code check_call(const rt_state *s, const int32_t *tokens, int n, int pos0, int filled, rt_logits which,
                           const float *logits, lmq_err *err)
{
    const int T = s->max_tokens, vocab = s->m->arch.vocab_size;
    if (n < 1 || pos0 < 0 || pos0 > filled || pos0 > T - n)
        return lmq_fail(err, LMQ_E_ARG, "forward of %d tokens at position %d: the state holds %d of %d positions",
                        n, pos0, filled, T);
    for (int i = 0; tokens && i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= vocab)
            return lmq_fail(err, LMQ_E_ARG, "token %d at position %d is outside the vocabulary (%d)", tokens[i],
                            pos0 + i, vocab);
    if (which != RT_LOGITS_NONE && !logits)
        return lmq_fail(err, LMQ_E_ARG, "forward: no logits buffer");
    return LMQ_OK;
}

/* The first row whose logits a call returns: every row's, the last's, or none (n). */
static int logits_from(rt_logits which, int n)
{
    return which == RT_LOGITS_ALL ? 0 : which == RT_LOGITS_LAST ? n - 1 : n;
}

/* n rows of sequence seq at positions pos0.. through blocks [from, to): from the embeddings of
 * tokens, or (tokens NULL) from the residual stream as the state holds it. Afterwards the
 * sequence holds positions up to pos0 + n when the pass went through every block from the
 * tokens, else none (a partial pass leaves other blocks' cache stale). */
static lmq_code run(rt_state *s, int seq, const int32_t *tokens, int n, int pos0, int from, int to, rt_logits which,
                    float *logits, lmq_err *err)
{
    const int layers = s->m->arch.n_layers;
    if (seq < 0 || seq >= s->seqs)
        return lmq_fail(err, LMQ_E_ARG, "forward of sequence %d: the state holds %d", seq, s->seqs);
    if (from < 0 || from > to || to > layers)
        return lmq_fail(err, LMQ_E_ARG, "forward through blocks %d..%d of %d", from, to - 1, layers);
    lmq_code c = check_call(s, tokens, n, pos0, s->fill[seq], which, logits, err);
    if (c)
        return c;
    int32_t *pos = s->ids, *seqs = s->ids + n;
    for (int i = 0; i < n; i++) {
        pos[i] = pos0 + i;
        seqs[i] = seq;
    }
    const rt_call call = { .n = n, .tokens = tokens, .seqs = seqs, .pos = pos, .from = from, .to = to,
                           .logits_from = logits_from(which, n), .logits = logits };
    c = s->be->forward(s->impl, &call, err);
    s->fill[seq] = !c && tokens && from == 0 && to == layers ? pos0 + n : 0;
    return c;
}

lmq_code rt_forward(rt_state *s, const int32_t *tokens, int n, int pos0, rt_logits which, float *logits,
                    lmq_err *err)
{
    return rt_forward_seq(s, 0, tokens, n, pos0, which, logits, err);
}

lmq_code rt_forward_seq(rt_state *s, int seq, const int32_t *tokens, int n, int pos0, rt_logits which, float *logits,
                        lmq_err *err)
{
    return run(s, seq, tokens, n, pos0, 0, s->m->arch.n_layers, which, logits, err);
}

lmq_code rt_decode_batch(rt_state *s, int n, const int32_t *tokens, float *logits, lmq_err *err)
{
    if (n < 1 || n > s->seqs)
        return lmq_fail(err, LMQ_E_ARG, "decode of %d sequences: the state holds %d", n, s->seqs);
    int32_t *pos = s->ids, *seqs = s->ids + n;
    lmq_code c = LMQ_OK;
    for (int i = 0; i < n && !c; i++) {
        pos[i] = s->fill[i];
        seqs[i] = i;
        c = check_call(s, &tokens[i], 1, s->fill[i], s->fill[i], RT_LOGITS_LAST, logits, err);
    }
    const rt_call call = { .n = n, .tokens = tokens, .seqs = seqs, .pos = pos, .from = 0,
                           .to = s->m->arch.n_layers, .logits_from = 0, .logits = logits };
    if (!c)
        c = s->be->forward(s->impl, &call, err);
    for (int i = 0; i < n; i++)
        s->fill[i] = c ? 0 : s->fill[i] + 1;
    return c;
}

lmq_code rt_forward_blocks(rt_state *s, const int32_t *tokens, int n, int blocks, lmq_err *err)
{
    return run(s, 0, tokens, n, 0, 0, blocks, RT_LOGITS_NONE, NULL, err);
}

float *rt_state_stream(rt_state *s)
{
    return s->be->stream ? s->be->stream(s->impl) : NULL;
}

lmq_code rt_forward_from(rt_state *s, int n, int first, int last, lmq_err *err)
{
    return run(s, 0, NULL, n, 0, first, last, RT_LOGITS_NONE, NULL, err);
}

lmq_code rt_decode(rt_state *s, int32_t token, int pos, float *logits, lmq_err *err)
{
    return rt_forward(s, &token, 1, pos, RT_LOGITS_LAST, logits, err);
}
