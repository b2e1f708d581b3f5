/* GGUF export (formats/gguf.h has the file format, formats/gguf_model.h the mapping import and
 * export share, convert/gguf.h the import).
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
 * A file with any quantised tensor carries general.quantization_version, as GGUF requires. */
#ifndef LMQ_EXPORT_GGUF_H
#define LMQ_EXPORT_GGUF_H

#include "common/err.h"

typedef struct {
    int tensors;     /* written */
    int requantized; /* of which re-quantised */
    char *log;       /* one line per re-quantised tensor ("name: int4 g64 -> q8_0"), malloc'd or NULL */
} lmq_gguf_report;

/* Exports the artefact at in as a GGUF file at out (written atomically; an out that is in, or
 * not a regular file, is refused: lmq_output_check), one tensor's GGUF bytes in memory at a time
 * (each is made twice: once for its type and size, once as it is written). rep may be NULL; its
 * log is the caller's to free. */
lmq_code lmq_gguf_export(const char *in, const char *out, int allow_requantize, lmq_gguf_report *rep,
                         lmq_err *err);

#endif
