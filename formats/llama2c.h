/* llama2.c checkpoints (the legacy fp32 "version 0" layout of run.c):
 * 7 × int32 header (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len; a
 * negative vocab_size means the classifier is stored separately), then the fp32 weights layer-
 * stacked per kind, each matrix [out, in] row-major: token embedding, attention RMS weights,
 * wq, wk, wv, wo, FFN RMS weights, w1, w2, w3, final RMS weight, the RoPE freq_cis tables
 * (seq_len × head_size/2, real then imaginary; recomputed by the runtime, so skipped), and the
 * classifier when not shared. */
#ifndef LMQ_LLAMA2C_H
#define LMQ_LLAMA2C_H

#include "common/err.h"
#include "formats/model.h"
#include "formats/source.h"

/* Plans the import of path's weights (canonical names, rope interleaved; formats/source.h). The
 * tokenizer, which the checkpoint does not hold, is convert/'s business. */
lmq_code l2c_plan(const char *path, lmq_plan *out, lmq_err *err);
/* The same with every tensor loaded into out. */
lmq_code l2c_load(const char *path, lmq_model *out, lmq_err *err);

#endif
