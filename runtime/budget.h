/* Serving memory arithmetic from a model's shape alone (no weights read, no device): how many
 * bytes the KV cache takes per token, how many sequences fit beside the weights, and what
 * contiguous preallocation wastes against paging for a distribution of sequence lengths.
 *
 *   kv bytes per token  = 2 (K and V) · layers · kv_heads · (head_dim · elem + scale)
 *                         elem and scale from the KV format's row (runtime/kv.h): fp32 4 + 0,
 *                         fp16 and bf16 2 + 0, fp8 1 + 0, int8 1 and int4 ½ + 2 per block of
 *                         32 elements of a head (one fp16 scale; a shorter head is one block)
 *   free                = memory − weight bytes (as stored)
 *   sequences at ctx    = ⌊free / (ctx · kv bytes per token)⌋
 * For lengths L_1..L_n (each 1..ctx):
 *   contiguous  reserves ctx per sequence:            waste = 1 − ΣL / (n · ctx)
 *   paged       reserves ⌈L/page⌉ · page per sequence: waste = 1 − ΣL / Σ⌈L/page⌉·page
 *   sequences of that mix that fit, paged = ⌊⌊free / (page · kv bytes per token)⌋ · n / Σ⌈L/page⌉⌋
 *   (contiguous: the sequences at ctx). Activations and workspace are not counted. */
#ifndef LMQ_RT_BUDGET_H
#define LMQ_RT_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "runtime/kv.h"

/* What the arithmetic needs of a model. */
typedef struct {
    int n_layers, n_kv_heads, head_dim;
    uint64_t weight_bytes; /* every tensor as stored */
} rt_budget_model;

struct lmq_manifest;
/* The shape and stored size an artefact's manifest gives (head_dim = dim / heads; weight bytes:
 * the totals' tensor_bytes, carried files excluded). */
void rt_budget_model_of(const struct lmq_manifest *man, rt_budget_model *m);

typedef struct {
    uint64_t memory; /* bytes available for weights and cache */
    int ctx;         /* the context every sequence may reach */
    int page;        /* tokens per page */
    const rt_kv_format *kv;
    const int32_t *lengths; /* the length distribution: one entry per sequence, each 1..ctx */
    size_t n_lengths;
} rt_budget_opts;

typedef struct {
    uint64_t kv_token_bytes; /* per token, all layers, K and V */
    uint64_t kv_seq_bytes;   /* ctx tokens of it */
    uint64_t free_bytes;     /* memory − weight bytes */
    uint64_t seqs_at_ctx;    /* sequences at full ctx that fit in free */
    /* over the length distribution */
    uint64_t used_tokens;       /* ΣL */
    uint64_t contiguous_tokens; /* n · ctx */
    uint64_t paged_tokens;      /* Σ⌈L/page⌉·page */
    double contiguous_waste, paged_waste; /* fractions of the reserved tokens left unused */
    uint64_t seqs_paged;                  /* sequences of the mix that fit, paged */
} rt_budget;

/* Fills *out. LMQ_E_ARG (naming what) for a shape or option out of range, a length outside
 * 1..ctx (naming its index), or weights that do not fit in memory. */
lmq_code rt_budget_plan(const rt_budget_model *m, const rt_budget_opts *o, rt_budget *out, lmq_err *err);

#endif
