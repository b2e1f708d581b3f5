/* A model in memory as lmq sees it: an architecture descriptor, fp32 tensors under canonical
 * names in [out, in] orientation, and the tokenizer files it needs. convert/ produces it,
 * runtime/ consumes it, the container stores it.
 *
 * Canonical names (i = layer index):
 *   tok_embd.weight [vocab, dim]        pos_embd.weight [ctx, dim] (gpt2)
 *   blk.i.attn_norm.weight [dim]        blk.i.attn_norm.bias (gpt2)
 *   llama: blk.i.attn_q.weight [heads*hd, dim], attn_k / attn_v [kv_heads*hd, dim];
 *          optional (Qwen2), all three or none: blk.i.attn_q.bias [heads*hd], attn_k / attn_v .bias
 *   gpt2:  blk.i.attn_qkv.weight [3*dim, dim] (q|k|v rows), blk.i.attn_qkv.bias [3*dim], or
 *          (lmq convert --split-qkv) blk.i.attn_q / attn_k / attn_v .weight [dim, dim] + .bias [dim]
 *   blk.i.attn_out.weight [dim, dim]    (+ .bias gpt2)
 *   blk.i.ffn_norm.weight [dim]         (+ .bias gpt2)
 *   blk.i.ffn_gate.weight [hidden, dim] (llama w1)
 *   blk.i.ffn_up.weight [hidden, dim]   (llama w3, gpt2 c_fc; + .bias gpt2)
 *   blk.i.ffn_down.weight [dim, hidden] (llama w2, gpt2 mlp.c_proj; + .bias gpt2)
 *   out_norm.weight [dim]               (+ .bias gpt2)
 *   output.weight [vocab, dim]          only when the classifier is not tied to tok_embd
 */
#ifndef LMQ_MODEL_H
#define LMQ_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/file.h"
#include "formats/dtype.h"

#define LMQ_MAX_DIMS 4
#define LMQ_NAME_MAX 128

typedef enum { LMQ_FAMILY_GPT2 = 1, LMQ_FAMILY_LLAMA = 2 } lmq_family;

/* Where the two halves of each rotated pair sit inside a head:
 * interleaved = (2i, 2i+1) as llama2.c; half = (i, i + hd/2) as Hugging Face's rotate_half. */
typedef enum { LMQ_ROPE_NONE = 0, LMQ_ROPE_INTERLEAVED = 1, LMQ_ROPE_HALF = 2 } lmq_rope;

typedef enum {
    LMQ_TOK_NONE = 0,
    LMQ_TOK_LLAMA2C = 1,
    LMQ_TOK_GPT2 = 2,
    LMQ_TOK_HF_JSON = 3,
    LMQ_TOK_SPM = 4, /* SentencePiece tokenizer.model */
} lmq_tok_kind;

typedef struct {
    lmq_family family;
    int dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, max_seq;
    float norm_eps, rope_theta;
    int tied_embedding; /* 1: the classifier is tok_embd.weight */
    lmq_rope rope;
    lmq_tok_kind tokenizer;
    int bos_id, eos_id; /* -1 when the tokenizer has none */
} lmq_arch;

/* A tensor in its stored encoding. Tensors built in memory (convert/) are fp32 and own their
 * values; tensors read from an artefact are views into its mapping (or own their decompressed
 * bytes), never widened: the runtime reads the packed bytes through the scheme table. */
typedef struct {
    char name[LMQ_NAME_MAX];
    int ndim;
    int64_t shape[LMQ_MAX_DIMS];
    lmq_qparams q;      /* the encoding of raw */
    const uint8_t *raw; /* the stored bytes (layout: schemes/scheme.h) */
    size_t raw_size;
    float *data;        /* the values when q is fp32 (then raw == data), else NULL */
    void *owned;        /* what lmq_model_free releases for this tensor, or NULL */
    lmq_act act;        /* quantisation of the input of the linear layer reading it (manifest) */
} lmq_tensor;

/* A file carried with the model (tokenizer.bin, vocab.json, merges.txt, tokenizer.json). */
typedef struct {
    char name[LMQ_NAME_MAX];
    uint8_t *data; /* owned */
    size_t size;
} lmq_file;

typedef struct {
    lmq_arch arch;
    lmq_tensor *tensors;
    int n_tensors, cap_tensors;
    lmq_file *files;
    int n_files, cap_files;
    uint64_t source_checksum; /* XXH3-64 over the source checkpoint's bytes */
    char source[512];         /* what was imported, for the manifest */
    char notes[1024];         /* what the import did (transpositions, rope layout), for the manifest */
    lmq_blob mapping;         /* the artefact the tensor views point into, when read from one */
} lmq_model;

void lmq_model_init(lmq_model *m);
void lmq_model_free(lmq_model *m);

/* Adds a zero-filled tensor (data allocated) and returns it via out. */
lmq_code lmq_model_add(lmq_model *m, const char *name, int ndim, const int64_t *shape,
                       lmq_tensor **out, lmq_err *err);
/* Adds a tensor stored as raw_size bytes at raw in encoding q; raw must outlive the model, or
 * be `owned` (malloc'd, freed with the model). Sizes are the caller's to check. */
lmq_code lmq_model_add_view(lmq_model *m, const char *name, int ndim, const int64_t *shape, lmq_qparams q,
                            const void *raw, size_t raw_size, void *owned, lmq_tensor **out, lmq_err *err);
/* Checks that name is a plain file name: 1..LMQ_NAME_MAX-1 bytes, no '/' or '\\', not "." or
 * "..", no control byte. A carried file may be written out beside the artefact by someone: a
 * name must not reach outside that directory. */
lmq_code lmq_file_name_check(const char *name, lmq_err *err);
/* Takes ownership of data (malloc'd, size bytes); name must pass lmq_file_name_check. */
lmq_code lmq_model_add_file(lmq_model *m, const char *name, uint8_t *data, size_t size, lmq_err *err);

/* Makes t's bytes its own: a view (into a read-only mapping, or borrowed) is replaced by an owned
 * copy, so that fp32 values can be changed in place. A no-op for a tensor that owns them. */
lmq_code lmq_tensor_own(lmq_tensor *t, lmq_err *err);

lmq_tensor *lmq_model_find(const lmq_model *m, const char *name);
const lmq_file *lmq_model_find_file(const lmq_model *m, const char *name);
int64_t lmq_tensor_numel(const lmq_tensor *t);

/* Checks the architecture's fields against one another: counts positive, dim a multiple of n_heads,
 * n_kv_heads dividing n_heads, norm_eps > 0, the family's rope layout (llama: an even head size and
 * rope_theta > 0), bos/eos inside the vocabulary. Errors name the field ("architecture.n_heads"). */
lmq_code lmq_arch_validate(const lmq_arch *a, lmq_err *err);
/* Checks the architecture (lmq_arch_validate), that every tensor it needs is present with the right
 * shape and that no other is (a block at or past n_layers, another family's tensor, output.weight
 * beside tied_embedding), and that
 * every fp32 weight is finite (a loader checks the other encodings' scales and codes: see
 * runtime/artefact.h; tensors described without values, data NULL, are checked for shape only).
 * Errors name the tensor. */
lmq_code lmq_model_validate(const lmq_model *m, lmq_err *err);
/* The fp32 check of lmq_model_validate for t's values (t->data, or values produced apart). */
lmq_code lmq_tensor_finite(const lmq_tensor *t, const float *values, lmq_err *err);

#endif
