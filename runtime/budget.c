/* Serving memory arithmetic (runtime/budget.h): integers throughout, so that every count is exact. */
#include "runtime/budget.h"

#include <string.h>

#include "formats/manifest.h"

void rt_budget_model_of(const lmq_manifest *man, rt_budget_model *m)
{
    const lmq_arch *a = &man->arch;
    m->n_layers = a->n_layers;
    m->n_kv_heads = a->n_kv_heads;
    m->head_dim = a->n_heads > 0 ? a->dim / a->n_heads : 0;
    m->weight_bytes = man->totals.tensor_bytes;
}

/* Limits that keep every product below 2^64: (free % pages) · n < 2^44 · 2^20. */
#define MAX_CTX (1 << 24)
#define MAX_SEQS ((size_t)1 << 20)

lmq_code rt_budget_plan(const rt_budget_model *m, const rt_budget_opts *o, rt_budget *out, lmq_err *err)
{
    memset(out, 0, sizeof *out);
    if (m->n_layers < 1 || m->n_kv_heads < 1 || m->head_dim < 1)
        return lmq_fail(err, LMQ_E_ARG, "budget: model shape (%d layers, %d kv heads, head dim %d) is not one",
                        m->n_layers, m->n_kv_heads, m->head_dim);
    if (o->ctx < 1 || o->ctx > MAX_CTX)
        return lmq_fail(err, LMQ_E_ARG, "budget: ctx %d outside 1..%d", o->ctx, MAX_CTX);
    if (o->page < 1 || o->page > o->ctx)
        return lmq_fail(err, LMQ_E_ARG, "budget: page %d outside 1..ctx (%d)", o->page, o->ctx);
    if (o->n_lengths < 1 || o->n_lengths > MAX_SEQS)
        return lmq_fail(err, LMQ_E_ARG, "budget: %zu lengths, expected 1..%zu", o->n_lengths, MAX_SEQS);
    if (o->memory < m->weight_bytes)
        return lmq_fail(err, LMQ_E_ARG, "budget: the weights (%llu bytes) do not fit in %llu bytes of memory",
                        (unsigned long long)m->weight_bytes, (unsigned long long)o->memory);
    const uint64_t page = (uint64_t)o->page, ctx = (uint64_t)o->ctx;
    out->kv_token_bytes = rt_kv_token_bytes(o->kv, o->kv, m->n_layers, m->n_kv_heads, m->head_dim);
    out->kv_seq_bytes = ctx * out->kv_token_bytes;
    out->free_bytes = o->memory - m->weight_bytes;
    out->seqs_at_ctx = out->free_bytes / out->kv_seq_bytes;

    uint64_t pages = 0;
    for (size_t i = 0; i < o->n_lengths; i++) {
        const int32_t L = o->lengths[i];
        if (L < 1 || (uint64_t)L > ctx)
            return lmq_fail(err, LMQ_E_ARG, "budget: length %zu is %d, outside 1..ctx (%d)", i + 1, (int)L, o->ctx);
        out->used_tokens += (uint64_t)L;
        pages += ((uint64_t)L + page - 1) / page;
    }
    const uint64_t n = o->n_lengths;
    out->contiguous_tokens = n * ctx;
    out->paged_tokens = pages * page;
    out->contiguous_waste = 1.0 - (double)out->used_tokens / (double)out->contiguous_tokens;
    out->paged_waste = 1.0 - (double)out->used_tokens / (double)out->paged_tokens;
    const uint64_t free_pages = out->free_bytes / (page * out->kv_token_bytes);
    out->seqs_paged = free_pages / pages * n + free_pages % pages * n / pages;
    return LMQ_OK;
}
