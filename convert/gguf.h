/* GGUF import (formats/gguf.h has the file format; formats/gguf_model.h what import and export
 * share: the encodings that coincide with ggml types, tensor names, the <arch>.* keys; export/gguf.h
 * writes GGUF).
 *
 * Import reads a GGUF file of the llama or gpt2 architecture: F32, F16, BF16 tensors stay
 * fp32 / fp16 / bf16; Q8_0 and Q4_0 become lmq's int8 / int4 symmetric g32 when every block's
 * d is >= 0 (the same grid), and otherwise keep GGUF's blocks as rows q8_0 / q4_0; Q4_1, Q5_0,
 * Q5_1, Q4_K, Q5_K, Q6_K keep GGUF's block bytes as the encoding rows of the same names. Nothing
 * is widened on disk. The tokenizer is rebuilt from the metadata (tokenizer.bin for "llama",
 * vocab.json + merges.txt for "gpt2") and carried. */
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

#endif
