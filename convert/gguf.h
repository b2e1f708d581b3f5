/* GGUF export and import (formats/gguf.h has the file format).
 *
 * Export writes an lmq artefact of the llama or GPT-2 family as a GGUF file llama.cpp loads:
 * its tensor names (token_embd, position_embd, blk.N.attn_output, output_norm, ...), the
 * <arch>.* hyperparameter keys, and the tokenizer as tokenizer.ggml.* metadata ("llama" from
 * a llama2.c tokenizer.bin, "gpt2" from vocab.json + merges.txt). A llama model stored with
 * Hugging Face's rope order (half-split pairs) has the rows of attn_q and attn_k permuted to
 * the interleaved order GGUF's llama expects; a GPT-2 model with q, k, v apart (--split-qkv) has
 * them fused into attn_qkv. Encodings map exactly where the grids coincide:
 *   fp32, fp16, bf16               -> F32, F16, BF16 (1-D tensors always F32: exact)
 *   int8 symmetric g32 (cols % 32 = 0) -> Q8_0   (d = the fp16 scale, qs = code - 128)
 *   int4 symmetric g32 (cols % 32 = 0) -> Q4_0   (d = the fp16 scale, nibble = code)
 *   q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k (imported from GGUF) -> the same GGUF type,
 *                                  bytes as is
 * Any other encoding is refused naming the tensor, unless allow_requantize: then its
 * dequantised weights are quantised to Q8_0 (lmq's int8 symmetric g32 quantiser; F32, exact,
 * when cols % 32 != 0), and the file's metadata lists each such tensor in lmq.requantized.
 *
 * Import reads a GGUF file of the llama or gpt2 architecture: F32, F16, BF16 tensors stay
 * fp32 / fp16 / bf16; Q8_0 and Q4_0 become lmq's int8 / int4 symmetric g32 when every block's
 * d is >= 0 (the same grid: d is the group's fp16 scale; GGUF's codes -128 and -8 are lmq codes
 * 0, which lmq's decoder and kernels read as -128·s and -8·s although its own quantiser never
 * emits them), and otherwise (llama.cpp's Q4_0 quantiser makes d negative in most blocks) keep
 * GGUF's blocks as rows q8_0 / q4_0; Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K keep GGUF's block bytes
 * as the encoding rows of the same names. Nothing is widened on disk. The tokenizer is rebuilt from the metadata (tokenizer.bin for "llama",
 * vocab.json + merges.txt for "gpt2") and carried. */
#ifndef LMQ_CONVERT_GGUF_H
#define LMQ_CONVERT_GGUF_H

#include "common/err.h"
#include "formats/model.h"

typedef struct {
    int tensors;     /* written */
    int requantized; /* of which re-quantised */
    char *log;       /* one line per re-quantised tensor ("name: int4 g64 -> q8_0"), malloc'd or NULL */
} lmq_gguf_report;

/* Exports the artefact at in as a GGUF file at out (written atomically), one tensor's GGUF
 * bytes in memory at a time (each is made twice: once for its type and size, once as it is
 * written). rep may be NULL; its log is the caller's to free. */
lmq_code lmq_gguf_export(const char *in, const char *out, int allow_requantize, lmq_gguf_report *rep,
                         lmq_err *err);

/* Imports the GGUF file at src into out (initialised here): tensors as views in their kept
 * encodings (owned), tokenizer files carried, arch, source and notes set. */
lmq_code lmq_gguf_load(const char *src, lmq_model *out, lmq_err *err);
/* The artefact at out_path (written atomically) from the GGUF file at src, tensor by tensor:
 * memory holds one tensor's bytes and values at a time, not the model. The manifest records
 * the source (path, XXH3-64 of the file) and each tensor's kept encoding; zstd asks for zstd
 * blobs. summary (may be NULL) receives the model as planned: arch, carried files, tensors
 * described without bytes (lmq_model_free it). */
lmq_code lmq_gguf_convert(const char *src, const char *out_path, int zstd, lmq_model *summary, lmq_err *err);

/* The GGUF type that holds exactly what lmq's encoding q holds (the table above), or -1. */
int lmq_gguf_type_for(const lmq_qparams *q);

/* SentencePiece's word boundary, U+2581, which GGUF's "llama" vocabulary keeps and llama2.c's
 * tokenizer.bin spells as a space. */
#define LMQ_SPM_SPACE "\xe2\x96\x81"

/* lmq's canonical tensor name for a GGUF one (to_gguf = 0) or the reverse (1), into out
 * (LMQ_NAME_MAX bytes). */
void lmq_gguf_name(const char *name, int to_gguf, char *out);

#endif
