#include "formats/llama2c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/file.h"
#include "common/le.h"

/* Describes `name` (one matrix per layer when per_layer) from the fp32 weight stream at *pos. */
static lmq_code take(lmq_plan *p, const uint8_t *w, size_t *pos, const char *name, int per_layer, int64_t rows,
                     int64_t cols, lmq_err *err)
{
    int n_layers = per_layer ? p->model.arch.n_layers : 1;
    for (int l = 0; l < n_layers; l++) {
        char full[LMQ_NAME_MAX];
        if (per_layer)
            snprintf(full, sizeof full, "blk.%d.%s", l, name);
        else
            snprintf(full, sizeof full, "%s", name);
        int64_t shape[2] = { rows, cols };
        const lmq_source s = { .src = w + *pos * sizeof(float), .dtype = ST_F32, .rows = rows, .cols = cols ? cols : 1 };
        lmq_code c = lmq_plan_add(p, full, cols ? 2 : 1, shape, &s, err);
        if (c)
            return c;
        *pos += (size_t)(rows * (cols ? cols : 1));
    }
    return LMQ_OK;
}

/* The header's seven int32 fields, as llama2.c's Config names them. */
static const char *const header_fields[7] = { "dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads",
                                              "vocab_size", "seq_len" };

static lmq_code plan(const char *path, const lmq_blob *b, lmq_plan *p, lmq_err *err)
{
    lmq_model *m = &p->model;
    int32_t h[7];
    if (b->size < sizeof h)
        return lmq_fail(err, LMQ_E_FORMAT, "truncated header (%zu bytes)", b->size);
    for (int i = 0; i < 7; i++)
        h[i] = lmq_le_i32(b->data + 4 * i);
    /* Bound every dimension first so the size arithmetic below cannot overflow (and abs() of
     * the vocabulary size is defined: not INT_MIN). */
    for (int i = 0; i < 7; i++)
        if (h[i] == 0 || h[i] > (1 << 20) || h[i] < (i == 5 ? -(1 << 20) : 1))
            return lmq_fail(err, LMQ_E_FORMAT, "implausible header field %s = %d", header_fields[i], (int)h[i]);
    lmq_arch *a = &m->arch;
    *a = (lmq_arch){ .family = LMQ_FAMILY_LLAMA, .dim = h[0], .hidden_dim = h[1], .n_layers = h[2],
                     .n_heads = h[3], .n_kv_heads = h[4], .vocab_size = abs(h[5]), .max_seq = h[6],
                     .norm_eps = 1e-5f, .rope_theta = 10000.0f, .tied_embedding = h[5] > 0,
                     .rope = LMQ_ROPE_INTERLEAVED, .tokenizer = LMQ_TOK_LLAMA2C, .bos_id = 1, .eos_id = 2 };
    lmq_code c = lmq_arch_validate(a, err);
    if (c)
        return c;
    const int64_t d = a->dim, hd = a->hidden_dim, L = a->n_layers, V = a->vocab_size;
    const int64_t kv = d / a->n_heads * a->n_kv_heads, rope = (int64_t)a->max_seq * (d / a->n_heads);
    const int64_t want = V * d + L * (2 * d + 2 * d * d + 2 * kv * d + 3 * hd * d) + d + rope +
                         (a->tied_embedding ? 0 : V * d);
    if ((b->size - sizeof h) % 4 || (int64_t)((b->size - sizeof h) / 4) != want)
        return lmq_fail(err, LMQ_E_FORMAT, "%zu bytes of weights, the header implies %lld", b->size - sizeof h,
                        (long long)(want * 4));
    /* The file's order, one row per stored kind. */
    const struct { const char *name; int per_layer; int64_t rows, cols; } order[] = {
        { "tok_embd.weight", 0, V, d },  { "attn_norm.weight", 1, d, 0 }, { "attn_q.weight", 1, d, d },
        { "attn_k.weight", 1, kv, d },   { "attn_v.weight", 1, kv, d },   { "attn_out.weight", 1, d, d },
        { "ffn_norm.weight", 1, d, 0 },  { "ffn_gate.weight", 1, hd, d }, { "ffn_down.weight", 1, d, hd },
        { "ffn_up.weight", 1, hd, d },   { "out_norm.weight", 0, d, 0 },
    };
    size_t pos = 0;
    for (size_t i = 0; i < sizeof order / sizeof order[0] && !c; i++)
        c = take(p, b->data + sizeof h, &pos, order[i].name, order[i].per_layer, order[i].rows, order[i].cols, err);
    pos += (size_t)rope;
    if (!c && !a->tied_embedding)
        c = take(p, b->data + sizeof h, &pos, "output.weight", 0, V, d, err);
    if (c)
        return c;
    snprintf(m->source, sizeof m->source, "%s", path);
    snprintf(m->notes, sizeof m->notes, "llama2.c checkpoint; weights already [out, in]; rope: interleaved pairs "
             "(2i, 2i+1); freq_cis tables dropped (recomputed); classifier %s",
             a->tied_embedding ? "tied to the token embedding" : "separate");
    XXH3_state_t *s = XXH3_createState();
    if (!s || XXH3_64bits_reset(s) != XXH_OK) {
        XXH3_freeState(s);
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    }
    lmq_source_hash(s, b);
    m->source_checksum = XXH3_64bits_digest(s);
    XXH3_freeState(s);
    return lmq_model_validate(m, err);
}

lmq_code l2c_plan(const char *path, lmq_plan *out, lmq_err *err)
{
    lmq_plan_init(out);
    lmq_code c = lmq_blob_open(path, &out->blob, err);
    if (!c)
        c = plan(path, &out->blob, out, err);
    if (c) {
        lmq_plan_free(out);
        return lmq_err_prefix(err, "%s: ", path);
    }
    snprintf(out->where, sizeof out->where, "%s", path);
    return LMQ_OK;
}

lmq_code l2c_load(const char *path, lmq_model *out, lmq_err *err)
{
    lmq_plan p;
    lmq_code c = l2c_plan(path, &p, err);
    if (c) {
        lmq_model_init(out);
        return c;
    }
    return lmq_plan_load(&p, out, err);
}
