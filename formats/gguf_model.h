/* An lmq model as a GGUF file holds it (formats/gguf.h has the file format): what GGUF import
 * (convert/gguf.h) and export (export/gguf.h) both read, so that neither calls the other.
 *
 * Encodings map exactly where the grids coincide:
 *   an encoding row with a ggml type (formats/encoding.h: fp32, fp16, bf16, the block rows
 *   q4_1 ... q6_k, q8_0, q4_0) <-> that type, the bytes as they are;
 *   int8 / int4 symmetric g32 <-> Q8_0 / Q4_0, re-laid out (lmq_gguf_repack): d is the group's
 *   fp16 scale; Q8_0's qs are the codes as two's complement (lmq's offset binary XOR 0x80), Q4_0's
 *   nibbles the codes themselves (q + 8 both ways). GGUF's codes -128 and -8 are lmq codes 0,
 *   which lmq's decoder and kernels read as -128·s and -8·s although its own quantiser never
 *   emits them; a block with d < 0 (llama.cpp's Q4_0 quantiser makes d negative in most blocks)
 *   is off lmq's grid, so such a tensor is imported as the row q8_0 / q4_0 instead.
 * Tensor names are lmq's but for a few (lmq_gguf_name); the hyper-parameters are the
 * <arch>.* keys of lmq_gguf_arch's table. */
#ifndef LMQ_GGUF_MODEL_H
#define LMQ_GGUF_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "formats/encoding.h"
#include "formats/gguf.h"
#include "formats/model.h"

/* The GGUF type that holds exactly what lmq's encoding q holds, or -1. */
int lmq_gguf_type_for(const lmq_qparams *q);
/* The string array key in which lmq's export names the GGUF tensors it held in the block rows
 * q8_0 / q4_0, which import would otherwise take as int8 / int4 g32 (the same values, another
 * layout), so that they come back as they went. */
#define LMQ_GGUF_BLOCK_ROWS "lmq.block_rows"
/* Whether lmq holds a tensor of encoding q in a GGUF file under LMQ_GGUF_BLOCK_ROWS. */
int lmq_gguf_names_row(const lmq_qparams *q);
/* The encoding GGUF tensor t of file f is imported as, into *q: int8 / int4 symmetric g32 for
 * Q8_0 / Q4_0 when every block's d is >= 0 and f's LMQ_GGUF_BLOCK_ROWS does not name t, else the
 * encoding row that holds t's type. 0 when none does. */
int lmq_gguf_encoding_of(const gf_file *f, const gf_tensor *t, lmq_qparams *q);
/* A tensor's bytes in lmq's encoding q (layout L) to those of GGUF type lmq_gguf_type_for(q)
 * (to_gguf = 1), or the reverse (0): re-laid out for int8 / int4 g32, copied otherwise. */
void lmq_gguf_repack(const lmq_qparams *q, const lmq_layout *L, int to_gguf, const uint8_t *src, uint8_t *dst);

/* llama.cpp's general.file_type (llama.h's LLAMA_FTYPE_*) for a file whose matrices are mostly of
 * ggml type `type`, as llama.cpp's loader names it when a file has none (Q4_K: MOSTLY_Q4_K_M,
 * Q3_K: MOSTLY_Q3_K_M, Q5_K: MOSTLY_Q5_K_M); -1 for a type it has no number for. */
int lmq_gguf_file_type(uint32_t type);

/* lmq's canonical tensor name for a GGUF one (to_gguf = 0) or the reverse (1), into out
 * (LMQ_NAME_MAX bytes). */
void lmq_gguf_name(const char *name, int to_gguf, char *out);

/* The lmq_arch fields GGUF keeps as <arch>.* keys. */
typedef enum {
    LMQ_GK_MAX_SEQ,
    LMQ_GK_DIM,
    LMQ_GK_N_LAYERS,
    LMQ_GK_HIDDEN_DIM,
    LMQ_GK_N_HEADS,
    LMQ_GK_N_KV_HEADS,
    LMQ_GK_NORM_EPS,   /* a float */
    LMQ_GK_ROPE_THETA, /* a float */
    LMQ_GK_ROPE_DIMS,  /* dim / n_heads: written; read, and a file with another value refused */
    LMQ_GK_VOCAB_SIZE, /* written, not read (token_embd's rows are the vocabulary) */
} lmq_gguf_field;

typedef struct {
    lmq_gguf_field field;
    const char *key; /* after "<arch>." */
} lmq_gguf_key;

/* One general.architecture: its name, lmq's family, and its keys in the order export writes them. */
typedef struct {
    const char *name;
    lmq_family family;
    const lmq_gguf_key *keys;
    size_t n_keys;
} lmq_gguf_arch;

/* The architecture of family, or of the name general.architecture gives; NULL when none. */
const lmq_gguf_arch *lmq_gguf_arch_of(lmq_family family);
const lmq_gguf_arch *lmq_gguf_arch_named(gf_str name);
/* "<arch>.<key>" of field into out; NULL when the architecture has no such key. */
const char *lmq_gguf_key_name(const lmq_gguf_arch *a, lmq_gguf_field field, char *out, size_t cap);

/* SentencePiece's word boundary, U+2581, which GGUF's "llama" vocabulary keeps and llama2.c's
 * tokenizer.bin spells as a space. */
#define LMQ_SPM_SPACE "\xe2\x96\x81"

#endif
