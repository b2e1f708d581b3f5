/* The scheme table: one row per on-disk encoding (formats/dtype.h), the way ggml's type traits
 * work. Adding an encoding is adding a row in scheme.c; the drivers below (layout, quantise,
 * dequantise) are shared by all rows and never switch on the dtype.
 *
 * A tensor is quantised as an [rows, cols] matrix in [out, in] layout; a 1-D tensor is one row.
 * Weights are split into scale groups (lmq_qparams.gran):
 *   NONE    plain floats, no scale (f32, f16, bf16; fp8 as a bare saturating cast);
 *   TENSOR  one group: the whole tensor;
 *   CHANNEL one group per row;
 *   GROUP   `group` consecutive weights along a row; a row shorter than `group` is one group,
 *           and when cols % group != 0 the last group of each row is shorter.
 *
 * Storage of one tensor, every field little-endian, nothing between the sections:
 *   scales       n_scales × scale_bits (IEEE half for integer schemes, IEEE single for fp8),
 *                ordered by row, then group within the row (n_scales = 0, 1, rows or
 *                rows × groups_per_row);
 *   zero points  n_scales × int16, asymmetric integer schemes only;
 *   codes        rows × cols codes of `bits` bits, packed densely across rows and groups by
 *                q_pack (schemes/pack.h), the last byte zero-padded.
 * Scales and zero points are whole bytes, so the codes start on a byte boundary.
 *
 * Integer codes (b bits; the conventions of ../shared/fixtures/golden/README.md):
 *   symmetric   qmax = 2^(b-1) - 1, s = fp16(max|w| / qmax), q = clamp(roundf(w / s), -qmax,
 *               qmax), stored as q + 2^(b-1) (so 1 .. 2^b - 1; int8 codes are offset binary,
 *               XOR 0x80 gives two's complement); w' = q · s. A group whose scale is 0 (all
 *               zero, or max|w| / qmax below half the smallest fp16 subnormal) dequantises to 0.
 *   asymmetric  s = fp16((max - min) / (2^b - 1)), z = roundf(-min / s) stored as int16,
 *               q = clamp(roundf(w / s) + z, 0, 2^b - 1), w' = (q - z) · s.
 *               Where that convention divides by zero or overflows the stored zero point
 *               (s rounds to 0: a constant group or a range under ~2^-25 · (2^b - 1); or
 *               roundf(-min / s) outside int16), the scale becomes instead fp16(max(|min| /
 *               32767, 2^-24)), raised one fp16 step at a time until z fits int16. Every
 *               weight of such a group then dequantises within s / 2 of itself: a constant
 *               group c gives w' = roundf(c / s) · s, an all-zero group exact zeros.
 *   A group whose scale would overflow fp16 (max|w| / qmax or (max - min) / (2^b - 1) at or
 *   above 65520) is rejected with LMQ_E_NUMERIC: clipping it would be silent damage.
 * Float codes: f32 / f16 / bf16 round to nearest even (common/fp.h); a weight that overflows
 *   the format is rejected (LMQ_E_NUMERIC) rather than stored as Inf. fp8 (schemes/fp8.h) with
 *   a scale granularity: s = max|w| / fmax in fp32, stored as fp32 (an fp16 scale would lose
 *   the tiny scales small tensors need), code = fp8(w / s) saturating, w' = fp8(code) · s;
 *   a zero group (or one whose s underflows fp32) stores s = 0 and zero codes.
 * NaN or Inf weights are rejected before anything is written (LMQ_E_NUMERIC, naming the
 * element). Dequantisation rejects stored bytes that decode to NaN or Inf (LMQ_E_FORMAT).
 *
 * Fused dot products: when runtime/ needs y = W'·x without materialising W', each row gains a
 * member `dot(s, g, codes, x, n)` returning the sum over one scale group of w'_i · x_i straight
 * from unpacked codes, and a driver q_dot_row() walks the groups of a row exactly as
 * q_dequantize_rows() does (same layout, same q_group). Until then runtime/ dequantises rows. */
#ifndef LMQ_SCHEME_H
#define LMQ_SCHEME_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/pool.h"
#include "formats/dtype.h"

typedef struct q_scheme q_scheme;

/* The parameters of one scale group, as the encode/decode functions of a row see them. */
typedef struct {
    float scale;         /* the scale as stored, converted back to float; 1 when there is none */
    uint32_t scale_code; /* its stored bits (scale_bits wide) */
    int32_t zero;        /* integer schemes: the code that stands for 0.0 (2^(b-1) when symmetric,
                            the stored zero point when asymmetric) */
    uint32_t lo;         /* integer schemes: the smallest code the quantiser emits */
} q_group;

/* Sets g's scale parameters from the n weights of one group (all finite). */
typedef lmq_code (*q_fit_fn)(const q_scheme *s, int asym, const float *w, size_t n, q_group *g,
                             lmq_err *err);
/* Encodes n weights of a group into codes; `first` is w[0]'s element index, for errors. */
typedef lmq_code (*q_encode_fn)(const q_scheme *s, const q_group *g, const float *w, size_t n,
                                size_t first, uint32_t *codes, lmq_err *err);
/* Decodes n codes of a group back to floats. */
typedef void (*q_decode_fn)(const q_scheme *s, const q_group *g, const uint32_t *codes, size_t n,
                            float *out);

struct q_scheme {
    lmq_dtype dtype;
    const char *name;
    unsigned bits;       /* bits per stored code */
    unsigned scale_bits; /* bits per stored scale: 16 (IEEE half), 32 (IEEE single), 0 (none) */
    unsigned grans;      /* allowed granularities, bit (1u << lmq_gran) each */
    int integer;         /* 1: integer codes on a scaled grid; asymmetric (zero points) allowed */
    float fmax;          /* float codes: the largest finite value */
    uint32_t (*to_code)(float x);  /* float codes: nearest code, ties to even */
    float (*from_code)(uint32_t c);
    q_fit_fn fit;        /* groups with a scale; NULL when the scheme has no scales */
    q_encode_fn encode;  /* NULL for BYTES: carried verbatim, not a numeric encoding */
    q_decode_fn decode;
};

/* The row for dtype; NULL when dtype is not one. */
const q_scheme *q_scheme_get(unsigned dtype);
/* The row whose name is `name` ("fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8", "int4",
 * "int3", "int2", "bytes"); NULL when none is. */
const q_scheme *q_scheme_find(const char *name);
/* "none", "tensor", "channel", "group"; "?" for anything else. */
const char *q_gran_name(unsigned gran);

/* Checks that qp names an encoding and a combination it supports. */
lmq_code q_check(const lmq_qparams *qp, lmq_err *err);

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
} q_layout;

/* Checks qp and the shape (rows, cols >= 1, storage size representable) and fills *out. */
lmq_code q_layout_of(const lmq_qparams *qp, int64_t rows, int64_t cols, q_layout *out,
                     lmq_err *err);

/* Quantises the fp32 [rows, cols] matrix w into out, which holds exactly out_size bytes and
 * must match the layout's size. Runs on pool's threads (NULL: the caller's alone) in chunks of
 * whole rows that start on a byte of the codes; every group is fitted and encoded on its own,
 * so the bytes, and the error when there is one, do not depend on the thread count.
 * Deterministic: the same input gives the same bytes. */
lmq_code q_quantize(const lmq_qparams *qp, const float *w, int64_t rows, int64_t cols,
                    uint8_t *out, size_t out_size, lmq_pool *pool, lmq_err *err);

/* Dequantises rows [row0, row0 + nrows) of a stored tensor (size bytes at data, which must be
 * the layout's size) into out, nrows × cols floats. */
lmq_code q_dequantize_rows(const lmq_qparams *qp, const uint8_t *data, size_t size, int64_t rows,
                           int64_t cols, int64_t row0, int64_t nrows, float *out, lmq_err *err);

/* Dequantises a whole stored tensor: q_dequantize_rows over all rows, in chunks on pool's
 * threads (NULL: the caller's alone). */
lmq_code q_dequantize(const lmq_qparams *qp, const uint8_t *data, size_t size, int64_t rows,
                      int64_t cols, float *out, lmq_pool *pool, lmq_err *err);

/* Checks a stored tensor before a reader uses it in place: its size is the layout's, every scale
 * is finite and >= 0, and (float codes) every weight decodes to a finite number. What the
 * runtime checks at load instead of dequantising. */
lmq_code q_validate(const lmq_qparams *qp, const uint8_t *data, size_t size, int64_t rows, int64_t cols,
                    lmq_err *err);

/* Writes a short description of qp ("int4 g32 asym", "int8 per-channel", "fp16") into buf, the
 * way the golden tables and the manifest name schemes. Returns buf. */
char *q_describe(const lmq_qparams *qp, char *buf, size_t size);

#endif
