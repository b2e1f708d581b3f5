/* An lmq model as a GGUF file holds it (formats/gguf_model.h). */
#include "formats/gguf_model.h"

#include <stdio.h>
#include <string.h>

/* ---- encodings ------------------------------------------------------------------------------ */

/* lmq's int rows that hold a ggml block type's grid re-laid out, symmetric in groups of 32. */
static const struct {
    lmq_dtype dtype;
    uint32_t ggml;
} REPACKED[] = {
    { LMQ_T_INT8, GGML_Q8_0 },
    { LMQ_T_INT4, GGML_Q4_0 },
};
#define N_REPACKED (sizeof REPACKED / sizeof REPACKED[0])

static lmq_qparams g32(lmq_dtype dtype)
{
    return (lmq_qparams){ .dtype = dtype, .gran = LMQ_GRAN_GROUP, .group = 32 };
}

/* REPACKED's row for q, or -1. */
static int repacked(const lmq_qparams *q)
{
    for (size_t i = 0; i < N_REPACKED; i++) {
        const lmq_qparams r = g32(REPACKED[i].dtype);
        if (!memcmp(q, &r, sizeof r))
            return (int)i;
    }
    return -1;
}

int lmq_gguf_type_for(const lmq_qparams *q)
{
    const int r = repacked(q);
    if (r >= 0)
        return (int)REPACKED[r].ggml;
    const lmq_encoding *e = lmq_encoding_of(q->dtype);
    const lmq_qparams plain = { .dtype = q->dtype };
    return e && !memcmp(q, &plain, sizeof plain) ? e->ggml : -1;
}

/* Whether every block of a Q8_0 / Q4_0 tensor has a scale d (its first half) with the sign bit
 * clear: then lmq's int8 / int4 symmetric g32 row holds it exactly. */
static int scales_nonneg(const gf_tensor *t)
{
    const unsigned bb = gf_type_of(t->type).block_bytes;
    for (uint64_t b = 0; b < t->size / bb; b++)
        if (t->data[b * bb + 1] & 0x80)
            return 0;
    return 1;
}

int lmq_gguf_names_row(const lmq_qparams *q)
{
    for (size_t i = 0; i < N_REPACKED; i++)
        if (lmq_encoding_of_ggml(REPACKED[i].ggml)->dtype == q->dtype)
            return 1;
    return 0;
}

/* Whether f's LMQ_GGUF_BLOCK_ROWS names tensor `name`. */
static int named_row(const gf_file *f, const char *name)
{
    const gf_kv *kv = gf_find(f, LMQ_GGUF_BLOCK_ROWS);
    const uint8_t *pos = kv && kv->type == GGUF_ARRAY && kv->elem_type == GGUF_STRING ? kv->val : NULL;
    for (uint64_t i = 0; pos && i < kv->n; i++)
        if (gf_str_eq(gf_arr_next_str(&pos), name))
            return 1;
    return 0;
}

int lmq_gguf_encoding_of(const gf_file *f, const gf_tensor *t, lmq_qparams *q)
{
    for (size_t i = 0; i < N_REPACKED; i++)
        if (REPACKED[i].ggml == t->type && scales_nonneg(t) && !named_row(f, t->name)) {
            *q = g32(REPACKED[i].dtype);
            return 1;
        }
    const lmq_encoding *e = lmq_encoding_of_ggml(t->type);
    if (e)
        *q = (lmq_qparams){ .dtype = e->dtype };
    return e != NULL;
}

void lmq_gguf_repack(const lmq_qparams *q, const lmq_layout *L, int to_gguf, const uint8_t *src, uint8_t *dst)
{
    const int r = repacked(q);
    if (r < 0) {
        memcpy(dst, src, L->bytes); /* the same bytes: row-major floats, or GGUF blocks */
        return;
    }
    const unsigned bits = lmq_encoding_of(q->dtype)->bits, bb = lmq_encoding_of_ggml(REPACKED[r].ggml)->block_bytes;
    const unsigned mask = (1u << bits) - 1, flip = bits == 8 ? 0x80 : 0;
    const size_t blocks = (size_t)(L->rows * L->groups_per_row);
    memset(dst, 0, to_gguf ? blocks * bb : L->bytes);
    for (size_t b = 0; b < blocks; b++) {
        /* d: the block's first two bytes, the group's scale in lmq's scales section */
        memcpy(dst + (to_gguf ? b * bb : b * 2), src + (to_gguf ? b * 2 : b * bb), 2);
        const size_t e0 = b / (size_t)L->groups_per_row * (size_t)L->cols + b % (size_t)L->groups_per_row * 32;
        for (size_t j = 0; j < 32; j++) {
            /* weight j's code: in the block, byte j (Q8_0) or the low (j < 16) or high nibble of
             * byte j % 16 (Q4_0); in lmq's codes, packed along the row */
            const size_t e = e0 + j, at_lmq = L->code_offset + e * bits / 8;
            const size_t at_gguf = b * bb + 2 + (bits == 4 ? j % 16 : j);
            const unsigned sh_lmq = (unsigned)(e * bits % 8), sh_gguf = bits == 4 ? (unsigned)(j / 16) * 4 : 0;
            const unsigned code = (src[to_gguf ? at_lmq : at_gguf] >> (to_gguf ? sh_lmq : sh_gguf) & mask) ^ flip;
            dst[to_gguf ? at_gguf : at_lmq] |= (uint8_t)(code << (to_gguf ? sh_gguf : sh_lmq));
        }
    }
}

/* llama.h's LLAMA_FTYPE_MOSTLY_<type> (ALL_F32 for F32), by ggml type; the K-types as the loader
 * guesses them (llama-model-loader.cpp: the _M mixes). */
static const struct {
    uint32_t ggml;
    int ftype;
} FILE_TYPES[] = {
    { GGML_F32, 0 },     { GGML_F16, 1 },     { GGML_Q4_0, 2 },  { GGML_Q4_1, 3 },    { GGML_Q8_0, 7 },
    { GGML_Q5_0, 8 },    { GGML_Q5_1, 9 },    { GGML_Q2_K, 10 }, { GGML_Q3_K, 12 },   { GGML_Q4_K, 15 },
    { GGML_Q5_K, 17 },   { GGML_Q6_K, 18 },   { GGML_IQ4_NL, 25 }, { GGML_IQ4_XS, 30 }, { GGML_BF16, 32 },
};

int lmq_gguf_file_type(uint32_t type)
{
    for (size_t i = 0; i < sizeof FILE_TYPES / sizeof FILE_TYPES[0]; i++)
        if (FILE_TYPES[i].ggml == type)
            return FILE_TYPES[i].ftype;
    return -1;
}

/* ---- names ---------------------------------------------------------------------------------- */

/* Names that differ between lmq and GGUF (llama.cpp's LLM_TENSOR_NAMES); the rest agree. */
static const struct {
    const char *lmq, *gguf;
} RENAMES[] = {
    { "tok_embd.", "token_embd." },
    { "pos_embd.", "position_embd." },
    { "out_norm.", "output_norm." },
    { ".attn_out.", ".attn_output." },
};

void lmq_gguf_name(const char *name, int to_gguf, char *out)
{
    snprintf(out, LMQ_NAME_MAX, "%s", name);
    for (size_t i = 0; i < sizeof RENAMES / sizeof RENAMES[0]; i++) {
        const char *from = to_gguf ? RENAMES[i].lmq : RENAMES[i].gguf, *to = to_gguf ? RENAMES[i].gguf : RENAMES[i].lmq;
        const char *at = strstr(name, from);
        if (at && (from[0] == '.' || at == name)) {
            snprintf(out, LMQ_NAME_MAX, "%.*s%s%s", (int)(at - name), name, to, at + strlen(from));
            return;
        }
    }
}

/* ---- hyper-parameters ----------------------------------------------------------------------- */

static const lmq_gguf_key LLAMA_KEYS[] = {
    { LMQ_GK_MAX_SEQ, "context_length" },
    { LMQ_GK_DIM, "embedding_length" },
    { LMQ_GK_N_LAYERS, "block_count" },
    { LMQ_GK_HIDDEN_DIM, "feed_forward_length" },
    { LMQ_GK_N_HEADS, "attention.head_count" },
    { LMQ_GK_N_KV_HEADS, "attention.head_count_kv" },
    { LMQ_GK_NORM_EPS, "attention.layer_norm_rms_epsilon" },
    { LMQ_GK_ROPE_THETA, "rope.freq_base" },
    { LMQ_GK_ROPE_DIMS, "rope.dimension_count" },
    { LMQ_GK_VOCAB_SIZE, "vocab_size" },
};

static const lmq_gguf_key GPT2_KEYS[] = {
    { LMQ_GK_MAX_SEQ, "context_length" },
    { LMQ_GK_DIM, "embedding_length" },
    { LMQ_GK_N_LAYERS, "block_count" },
    { LMQ_GK_HIDDEN_DIM, "feed_forward_length" },
    { LMQ_GK_N_HEADS, "attention.head_count" },
    { LMQ_GK_NORM_EPS, "attention.layer_norm_epsilon" },
};

static const lmq_gguf_arch ARCHS[] = {
    { "llama", LMQ_FAMILY_LLAMA, LLAMA_KEYS, sizeof LLAMA_KEYS / sizeof LLAMA_KEYS[0] },
    { "gpt2", LMQ_FAMILY_GPT2, GPT2_KEYS, sizeof GPT2_KEYS / sizeof GPT2_KEYS[0] },
};

const lmq_gguf_arch *lmq_gguf_arch_of(lmq_family family)
{
    for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0]; i++)
        if (ARCHS[i].family == family)
            return &ARCHS[i];
    return NULL;
}

const lmq_gguf_arch *lmq_gguf_arch_named(gf_str name)
{
    for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0]; i++)
        if (gf_str_eq(name, ARCHS[i].name))
            return &ARCHS[i];
    return NULL;
}

const char *lmq_gguf_key_name(const lmq_gguf_arch *a, lmq_gguf_field field, char *out, size_t cap)
{
    for (size_t i = 0; i < a->n_keys; i++)
        if (a->keys[i].field == field) {
            snprintf(out, cap, "%s.%s", a->name, a->keys[i].key);
            return out;
        }
    return NULL;
}
