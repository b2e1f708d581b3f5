/* GGUF import (formats/gguf.h has the file format; export/gguf.h writes GGUF), and the facts
 * import and export share: tensor names and the encodings that coincide with ggml types.
 *
 * Import reads a GGUF file of the llama or gpt2 architecture: F32, F16, BF16 tensors stay
 * fp32 / fp16 / bf16; Q8_0 and Q4_0 become lmq's int8 / int4 symmetric g32 when every block's
 * d is >= 0 (the same grid: d is the group's fp16 scale; GGUF's codes -128 and -8 are lmq codes
 * 0, which lmq's decoder and kernels read as -128·s and -8·s although its own quantiser never
 * emits them), and otherwise (llama.cpp's Q4_0 quantiser makes d negative in most blocks) keep
 * GGUF's blocks as rows q8_0 / q4_0; Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K keep GGUF's block bytes
 * as the encoding rows of the same names. Nothing is widened on disk. The tokenizer is rebuilt
 * from the metadata (tokenizer.bin for "llama", vocab.json + merges.txt for "gpt2") and carried. */
#ifndef LMQ_CONVERT_GGUF_H
#define LMQ_CONVERT_GGUF_H

#include "common/err.h"
#include "formats/model.h"

/* Imports the GGUF file at src into out (initialised here): tensors as views in their kept
 * encodings (owned), tokenizer files carried, arch, source and notes set. */
lmq_code lmq_gguf_load(const char *src, lmq_model *out, lmq_err *err);
/* The artefact at out_path (written atomically) from the GGUF file at src, tensor by tensor:
 * memory holds one tensor's bytes and values at a time, not the model. The manifest records
 * the source (path, XXH3-64 of the file) and each tensor's kept encoding; zstd asks for zstd
 * blobs. summary (may be NULL) receives the model as planned: arch, carried files, tensors
 * described without bytes (lmq_model_free it). */
lmq_code lmq_gguf_convert(const char *src, const char *out_path, int zstd, lmq_model *summary, lmq_err *err);

/* The GGUF type that holds exactly what lmq's encoding q holds (export/gguf.h lists them), or -1. */
int lmq_gguf_type_for(const lmq_qparams *q);

/* SentencePiece's word boundary, U+2581, which GGUF's "llama" vocabulary keeps and llama2.c's
 * tokenizer.bin spells as a space. */
#define LMQ_SPM_SPACE "\xe2\x96\x81"

/* lmq's canonical tensor name for a GGUF one (to_gguf = 0) or the reverse (1), into out
 * (LMQ_NAME_MAX bytes). */
void lmq_gguf_name(const char *name, int to_gguf, char *out);

#endif
