/* An lmq model as a Hugging Face checkpoint names it: one row per architecture (model_type),
 * with its tensor names (Hugging Face pattern <-> canonical name, how the tensor is stored) and
 * the config.json keys of lmq_arch's fields. The import (convert/hf.c), the compressed-tensors
 * export (export/compressed_tensors.c) and recipes (Hugging Face module names as patterns) read
 * the same table. */
#ifndef LMQ_HF_MODEL_H
#define LMQ_HF_MODEL_H

#include <stddef.h>

#include "common/err.h"
#include "formats/model.h"

typedef enum {
    LMQ_HF_COPY,       /* same layout */
    LMQ_HF_TRANSPOSE,  /* GPT-2 Conv1D: stored [in, out], canonical [out, in] */
    LMQ_HF_IGNORE,     /* a buffer, not a weight */
    LMQ_HF_CLASSIFIER, /* lm_head: output.weight unless it merely repeats the tied embedding */
} lmq_hf_map;

/* "{L}" in a pattern stands for the layer index. */
typedef struct {
    const char *hf, *canon; /* canon NULL: not a weight (LMQ_HF_IGNORE) */
    lmq_hf_map kind;
} lmq_hf_name_row;

/* The lmq_arch fields config.json holds, and the keys lmq writes that hold none. */
typedef enum {
    LMQ_HK_VOCAB_SIZE,
    LMQ_HK_DIM,
    LMQ_HK_HIDDEN_DIM,
    LMQ_HK_N_LAYERS,
    LMQ_HK_N_HEADS,
    LMQ_HK_N_KV_HEADS,
    LMQ_HK_MAX_SEQ,
    LMQ_HK_MAX_SEQ_OLD, /* GPT-2's older name of max_seq (n_ctx); max_seq's key wins when both are given */
    LMQ_HK_NORM_EPS,
    LMQ_HK_ROPE_THETA,
    LMQ_HK_ACTIVATION,  /* the value is the row's: the one activation lmq runs */
    LMQ_HK_ATTN_BIAS,   /* false: lmq runs none */
    LMQ_HK_MLP_BIAS,    /* false: lmq runs none */
    LMQ_HK_TIED,
    LMQ_HK_BOS,
    LMQ_HK_EOS,
} lmq_hf_field;

typedef struct {
    lmq_hf_field field;
    const char *key;
    const char *value; /* LMQ_HK_ACTIVATION's */
} lmq_hf_key;

/* When a family's fused tensors (the canonical stems attn_qkv, ffn_gate_up) are split into their
 * row blocks at import: GPT-2 keeps c_attn fused unless --split-qkv asks. */
typedef enum { LMQ_HF_FUSED_NONE = 0, LMQ_HF_FUSED_ON_REQUEST, LMQ_HF_FUSED_SPLIT } lmq_hf_fused;

typedef struct {
    const char *model_type, *architecture, *prefix;
    lmq_family family;                   /* what lmq runs it as */
    const lmq_hf_name_row *names[2];     /* the family's table rows: the base table and its additions */
    size_t n_names[2];
    const lmq_hf_key *keys;              /* config.json's, in the order export writes them */
    size_t n_keys;
    const char *window;                  /* the flag that turns its sliding window on ("": always on;
                                            NULL: it has none) */
    lmq_hf_fused fused;
    const char *notes;                   /* what the import notes about the layout */
} lmq_hf_family;

/* The supported families, in the order the import tries them. */
extern const lmq_hf_family lmq_hf_families[];
extern const size_t lmq_hf_n_families;

/* The family that writes lmq's family (its first row); NULL for an unknown one. */
const lmq_hf_family *lmq_hf_family_of(lmq_family family);
/* The key of field in f's config.json, or NULL when f has none. */
const lmq_hf_key *lmq_hf_key_of(const lmq_hf_family *f, lmq_hf_field field);

/* The row of f's table for checkpoint tensor name (family prefix optional), or NULL; *layer gets
 * its layer (-1 for none). */
const lmq_hf_name_row *lmq_hf_lookup(const lmq_hf_family *f, const char *name, int *layer);
/* A row's pattern with layer for its "{L}", into out. */
void lmq_hf_expand(const char *pattern, int layer, char *out, size_t cap);
/* The checkpoint name of canonical tensor canon in family f (the family prefix when prefixed;
 * never on the classifier, which HF keeps outside the base model) into out; its row, or NULL (out
 * untouched). */
const lmq_hf_name_row *lmq_hf_reverse(const lmq_hf_family *f, const char *canon, int prefixed, char *out,
                                      size_t cap);

/* The Hugging Face checkpoint name of canonical tensor canon ("model.layers.0.mlp.up_proj.weight";
 * lm_head unprefixed) in the family that writes lmq's family, with *transpose = 1 when HF stores
 * it [in, out] (GPT-2 Conv1D). LMQ_E_UNSUPPORTED, naming the tensor, when the family has none
 * (GPT-2's split attn_q). */
lmq_code lmq_hf_name(lmq_family family, const char *canon, char *out, size_t cap, int *transpose, lmq_err *err);

/* Recipes may name tensors as Hugging Face modules: writes to out the canonical name pattern for
 * hf ("lm_head" -> "output.weight", "model.layers.*.mlp.down_proj" -> "blk.*.ffn_down.weight";
 * the family prefix and ".weight" optional, the layer an index or wildcards). Returns 0 when hf
 * names no module of a supported family. */
int lmq_hf_canonical(const char *hf, char *out, size_t cap);
/* The other way: the Hugging Face name (ending in ".weight" or ".bias"; with the family prefix
 * when prefixed) of canonical tensor name canon in supported family number family (0, 1, ...),
 * into out and returns 1; 0 when that family has no such tensor, -1 past the last family. */
int lmq_hf_name_of(const char *canon, int family, int prefixed, char *out, size_t cap);

#endif
