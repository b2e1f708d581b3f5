/* The encoding table: every fact about an on-disk tensor encoding, one row each, the way ggml's
 * core type traits work. Names, code and scale widths, the granularities an encoding allows,
 * and the byte layout of a stored tensor live here, at the bottom, so that the container, the
 * manifest, recipes, the scheme table (schemes/: how to quantise and dequantise) and the
 * runtime's kernels (runtime/: how to compute) all read one row. Adding an encoding is adding a
 * row here and its compute rows there.
 *
 * Layout of a stored [rows, cols] tensor (a 1-D tensor is one row), little-endian, nothing
 * between the sections:
 *   scales       n_scales × scale_bits (IEEE half for integer encodings, IEEE single for fp8),
 *                ordered by row, then group within the row (n_scales = 0, 1, rows or
 *                rows × groups_per_row for granularity none, tensor, channel, group);
 *   zero points  n_scales × int16, asymmetric integer encodings only;
 *   codes        rows × cols codes of `bits` bits, packed densely across rows and groups, least
 *                significant bit first (schemes/pack.h), the last byte zero-padded.
 * A group is `group` consecutive weights along a row; a row shorter than `group` is one group,
 * and when cols % group != 0 the last group of each row is shorter.
 * So a tensor is all its scales, then all its codes, not blocks of (scale, codes) as ggml's: a
 * kernel reads a row's scales and its codes from two sections, the codes start wherever the
 * scales end (no alignment), and a row of codes starts mid-byte when rows · bits is not a
 * multiple of 8 (int4 with odd cols). runtime/cuda moves the codes to a 256-byte boundary on
 * upload and uses 16-byte loads only where every row starts on one.
 *
 * Block encodings (block != 0: GGUF's Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
 * IQ4_NL and IQ4_XS, imported from GGUF files, where Q8_0 / Q4_0 take these rows only when a block
 * scale is negative, or quantised by schemes/gguf_quant.h) store instead each row as cols / block
 * blocks of block_bytes bytes, exactly as ggml lays them out (scales and codes inside each block);
 * cols must be a multiple of block, granularity none.
 *
 * An encoding whose stored bytes are exactly those of a ggml tensor type (the floats, the block
 * encodings) names that type in `ggml`: the GGUF reader takes the type's sizes from the row, and
 * GGUF import and export (formats/gguf_model.h) keep the bytes as they are. */
#ifndef LMQ_ENCODING_H
#define LMQ_ENCODING_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "formats/dtype.h"

typedef struct {
    lmq_dtype dtype;
    const char *name;    /* as manifests, recipes and reports spell it */
    unsigned bits;       /* per stored code */
    unsigned scale_bits; /* per stored scale: 16 (IEEE half), 32 (IEEE single), 0 (none) */
    unsigned grans;      /* allowed granularities: bit (1u << lmq_gran) each */
    int integer;         /* integer codes on a scaled grid; asymmetric (int16 zero points) allowed */
    float fmax;          /* float codes: the largest finite value */
    unsigned block;      /* block encodings: weights per block (0: scales-then-codes layout) */
    unsigned block_bytes;
    int ggml;            /* the ggml type (ggml.h's enum ggml_type) with these bytes, or -1 */
} lmq_encoding;

/* The table's rows (formats/encoding.c makes lmq_encodings of them), one of three kinds each:
 *   FLOAT_ROW(dtype, name, bits, scale_bits, granularities, fmax, ggml)  float codes;
 *   INT_ROW(dtype, name, bits)          integer codes, fp16 scales, any scaled granularity, asym allowed;
 *   BLOCK_ROW(dtype, name, block, block_bytes, ggml)  GGUF blocks.
 * Granularities are GRAN(g) and SCALED (tensor, channel or group), which formats/encoding.c defines;
 * ggml is a GGML_* type of formats/gguf.h, or -1. */
#define LMQ_ENCODING_ROWS(FLOAT_ROW, INT_ROW, BLOCK_ROW)                                                   \
    FLOAT_ROW(LMQ_T_F32, "fp32", 32, 0, GRAN(NONE), 0x1.fffffep127f, GGML_F32)                              \
    FLOAT_ROW(LMQ_T_F16, "fp16", 16, 0, GRAN(NONE), 65504.0f, GGML_F16)                                     \
    FLOAT_ROW(LMQ_T_BF16, "bf16", 16, 0, GRAN(NONE), 0x1.fep127f, GGML_BF16)                                \
    FLOAT_ROW(LMQ_T_F8_E4M3, "fp8_e4m3", 8, 32, GRAN(NONE) | SCALED, 448.0f, -1)                            \
    FLOAT_ROW(LMQ_T_F8_E5M2, "fp8_e5m2", 8, 32, GRAN(NONE) | SCALED, 57344.0f, -1)                          \
    INT_ROW(LMQ_T_INT8, "int8", 8)                                                                          \
    INT_ROW(LMQ_T_INT4, "int4", 4)                                                                          \
    INT_ROW(LMQ_T_INT3, "int3", 3)                                                                          \
    INT_ROW(LMQ_T_INT2, "int2", 2)                                                                          \
    /* GGUF blocks (ggml-common.h): 32 or 256 weights in the bytes of one block_<type> struct. */           \
    BLOCK_ROW(LMQ_T_Q4_1, "q4_1", 32, 20, GGML_Q4_1)                                                        \
    BLOCK_ROW(LMQ_T_Q5_0, "q5_0", 32, 22, GGML_Q5_0)                                                        \
    BLOCK_ROW(LMQ_T_Q5_1, "q5_1", 32, 24, GGML_Q5_1)                                                        \
    BLOCK_ROW(LMQ_T_Q4_K, "q4_k", 256, 144, GGML_Q4_K)                                                      \
    BLOCK_ROW(LMQ_T_Q5_K, "q5_k", 256, 176, GGML_Q5_K)                                                      \
    BLOCK_ROW(LMQ_T_Q6_K, "q6_k", 256, 210, GGML_Q6_K)                                                      \
    BLOCK_ROW(LMQ_T_Q8_0, "q8_0", 32, 34, GGML_Q8_0)                                                        \
    BLOCK_ROW(LMQ_T_Q4_0, "q4_0", 32, 18, GGML_Q4_0)                                                        \
    BLOCK_ROW(LMQ_T_Q2_K, "q2_k", 256, 84, GGML_Q2_K)                                                       \
    BLOCK_ROW(LMQ_T_Q3_K, "q3_k", 256, 110, GGML_Q3_K)                                                      \
    BLOCK_ROW(LMQ_T_IQ4_NL, "iq4_nl", 32, 18, GGML_IQ4_NL)                                                  \
    BLOCK_ROW(LMQ_T_IQ4_XS, "iq4_xs", 256, 136, GGML_IQ4_XS)

/* The table, indexed by lmq_dtype; a number no encoding takes (9) is a row without a name. */
extern const lmq_encoding lmq_encodings[LMQ_T_COUNT];
/* Each row's bits as a constant from the same rows, LMQ_T_<dtype>_BITS (LMQ_T_INT4_BITS = 4; 0
 * for block encodings): the CPU kernels are specialised on them (runtime/linear_impl.h). */
#define LMQ_BITS_OF_FLOAT(T, nm, b, sb, gr, mx, gg) T##_BITS = b,
#define LMQ_BITS_OF_INT(T, nm, b) T##_BITS = b,
#define LMQ_BITS_OF_BLOCK(T, nm, blk, bytes, gg) T##_BITS = 0,
enum { LMQ_ENCODING_ROWS(LMQ_BITS_OF_FLOAT, LMQ_BITS_OF_INT, LMQ_BITS_OF_BLOCK) };
#undef LMQ_BITS_OF_FLOAT
#undef LMQ_BITS_OF_INT
#undef LMQ_BITS_OF_BLOCK
/* The row for dtype; NULL when dtype is not an encoding. */
const lmq_encoding *lmq_encoding_of(unsigned dtype);
/* The row named `name`; NULL when none is. */
const lmq_encoding *lmq_encoding_find(const char *name);
/* The row whose bytes are ggml type `type`'s; NULL when none is. */
const lmq_encoding *lmq_encoding_of_ggml(uint32_t type);
/* Every row's name but the block encodings' (which messages list apart), joined by ", ", into
 * buf (for messages that list what can be asked for). Returns buf. */
char *lmq_encoding_names(char *buf, size_t size);

/* "none", "tensor", "channel", "group", indexed by lmq_gran. */
extern const char *const lmq_gran_names[4];
/* lmq_gran_names[gran], or "?" for anything else. */
const char *lmq_gran_name(unsigned gran);

/* Activation quantisation names (formats/dtype.h): [LMQ_ACT_NONE] is NULL, never written (the
 * key is left out); "token", "tensor". */
extern const char *const lmq_act_scheme_names[LMQ_ACT_COUNT];
extern const char *const lmq_act_gran_names[LMQ_ACT_GRAN_COUNT];
/* "a8 token", "a8 tensor", "a fp8_e4m3 token", "weight-only (fp32 activations)" for fp8 weights
 * (dtype) without (FP8 is easily taken for W8A8), or "" for none: how reports append it to a
 * weight's scheme. */
void lmq_act_describe(lmq_act a, unsigned dtype, char *buf, size_t size);

/* The values one activation block holds for int8 per block against dtype's weights, llama.cpp's
 * vec_dot pairing: 256 (Q8_K, one fp32 scale) for the 256-blocks (K-types, IQ4_XS), else 32
 * (Q8_0 / Q8_1, an fp16 scale). */
unsigned lmq_act_block_len(unsigned dtype);
/* Whether activations a may go with weights qp of `cols` columns: int8 per block (LMQ_ACT_BLOCK)
 * wants weights in blocks with a scale a block or a group of a multiple of 32 (symmetric int8 or
 * int4 per group, every GGUF block type) and a multiple of lmq_act_block_len columns; every
 * other rounding goes with anything. 0 with why in err (no tensor named: the caller says which). */
lmq_code lmq_act_check(lmq_act a, const lmq_qparams *qp, int64_t cols, lmq_err *err);

/* The activations llama.cpp multiplies weights qp of `cols` columns with: a8 block (its vec_dot
 * pairs) for every GGUF block type and, with groups, lmq's symmetric int8 / int4 g32 (the rows a
 * GGUF import keeps Q8_0 / Q4_0 as); none for anything else or rows of no whole activation block. */
lmq_act lmq_act_llama(const lmq_qparams *qp, int64_t cols, int groups);

/* Checks that qp names an encoding and a combination it allows (granularity, symmetry, group
 * size: a power of two >= 16). */
lmq_code lmq_qparams_check(const lmq_qparams *qp, lmq_err *err);

/* Where everything of one tensor lives, and what it costs. */
typedef struct {
    int64_t rows, cols;
    int64_t group;          /* weights per group along a row (cols unless GROUP) */
    int64_t groups_per_row; /* ceil(cols / group) */
    int64_t n_scales;       /* stored scales (and zero points, when asymmetric) */
    size_t zero_offset;     /* byte offset of the zero points */
    size_t code_offset;     /* byte offset of the packed codes */
    uint64_t bits;          /* exact storage bits before the final byte's padding: true bpw is
                               bits / (rows · cols), summed over tensors for a model */
    size_t bytes;           /* storage size in bytes */
} lmq_layout;

/* Checks qp and the shape (rows, cols >= 1, storage size representable) and fills *out. */
lmq_code lmq_layout_of(const lmq_qparams *qp, int64_t rows, int64_t cols, lmq_layout *out,
                     lmq_err *err);

#endif
