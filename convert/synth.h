/* Synthetic checkpoints with the shapes of real models, for speed benchmarks where the real
 * weights are not at hand: a Hugging Face directory that lmq convert reads like any other.
 *
 *   config.json          the keys convert/hf.c reads for the family (formats/hf_model.h)
 *   model.safetensors    F32 weights, pseudo-random from the seed (normal-ish, std 0.02 for
 *                        matrices, norms near 1, small biases), written tensor by tensor
 *   vocab.json, merges.txt   GPT-2 shapes: a byte-level BPE with exactly vocab_size tokens
 *   tokenizer.bin            Llama shapes: a llama2.c tokenizer with exactly vocab_size pieces
 *
 * The same shape and seed give byte-identical files. Memory stays small whatever the shape:
 * no tensor is ever held whole. Every file is written to a temporary and renamed. */
#ifndef LMQ_CONVERT_SYNTH_H
#define LMQ_CONVERT_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "formats/encoding.h"
#include "formats/model.h"

typedef struct {
    const char *name; /* what --shape takes: "gpt2-124m" */
    lmq_family family;
    int n_layers, dim, hidden_dim, n_heads, n_kv_heads, vocab_size, max_seq;
    int tied; /* the classifier is the token embedding (no lm_head.weight) */
} cv_synth_shape;

/* The shape called name, or NULL. */
const cv_synth_shape *cv_synth_find(const char *name);
/* Every shape's name joined by ", " into buf (for messages that list what is known). Returns buf. */
char *cv_synth_names(char *buf, size_t size);

/* The bytes the shape's tensors take as stored: every matrix in `matrices` (lmq_layout_of), every
 * vector in fp32, as a recipe that quantises everything 2-D leaves them. */
lmq_code cv_synth_stored_bytes(const cv_synth_shape *s, const lmq_qparams *matrices, uint64_t *bytes, lmq_err *err);

typedef struct {
    uint64_t seed;
    /* Called before each tensor is written (may be NULL): done of total, the tensor's name. */
    void (*progress)(void *ctx, int done, int total, const char *name);
    void *progress_ctx;
} cv_synth_opts;

/* What cv_synth_write wrote. */
typedef struct {
    int n_tensors;
    int64_t params;
    uint64_t weight_bytes; /* the size of model.safetensors */
} cv_synth_info;

/* Writes the checkpoint into dir (created when missing; files of an earlier run are replaced).
 * Refuses a dir holding files lmq convert would read instead of these (a sharded index, or for
 * Llama a GPT-2 / tokenizer.json tokenizer). info may be NULL. */
lmq_code cv_synth_write(const cv_synth_shape *shape, const char *dir, const cv_synth_opts *opts,
                        cv_synth_info *info, lmq_err *err);

#endif
