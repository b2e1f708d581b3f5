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
 * Block encodings (block != 0: GGUF's Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, and Q8_0 / Q4_0
 * whose block scales are not all >= 0, imported from GGUF files) store instead each row as cols / block blocks of
 * block_bytes bytes, exactly as ggml lays them out (scales and codes inside each block); cols must be a multiple of block,
 * granularity none. */
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
} lmq_encoding;

/* The table, indexed by lmq_dtype. */
extern const lmq_encoding lmq_encodings[LMQ_T_COUNT];
/* The row for dtype; NULL when dtype is not one. */
const lmq_encoding *lmq_encoding_of(unsigned dtype);
/* The row named `name`; NULL when none is. */
const lmq_encoding *lmq_encoding_find(const char *name);
/* Every row's name but `except`'s and the block encodings' (imported, never produced), joined
 * by ", ", into buf (for messages that list what can be asked for). Returns buf. */
char *lmq_encoding_names(char *buf, size_t size, unsigned except);

/* "none", "tensor", "channel", "group", indexed by lmq_gran. */
extern const char *const lmq_gran_names[4];
/* lmq_gran_names[gran], or "?" for anything else. */
const char *lmq_gran_name(unsigned gran);

/* Activation quantisation names (formats/dtype.h): [LMQ_ACT_NONE] is NULL, never written (the
 * key is left out); "token", "tensor". */
extern const char *const lmq_act_scheme_names[LMQ_ACT_COUNT];
extern const char *const lmq_act_gran_names[LMQ_ACT_GRAN_COUNT];
/* "a8 token", "a8 tensor", or "" for none: how reports append it to a weight's scheme. */
void lmq_act_describe(lmq_act a, char *buf, size_t size);

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
