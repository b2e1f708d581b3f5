/* The scheme table: how each on-disk encoding is quantised and dequantised, one row per
 * encoding of formats/encoding.h (which holds the facts: names, widths, granularities and the
 * byte layout of a stored tensor), the way ggml's type traits work. Adding an encoding is adding
 * a row there and here; the drivers below (quantise, dequantise, validate) are shared by all
 * rows and never switch on the dtype.
 *
 * A tensor is quantised as an [rows, cols] matrix in [out, in] layout; a 1-D tensor is one row.
 * Weights are split into scale groups (lmq_qparams.gran):
 *   NONE    plain floats, no scale (f32, f16, bf16; fp8 as a bare saturating cast);
 *   TENSOR  one group: the whole tensor;
 *   CHANNEL one group per row;
 *   GROUP   `group` consecutive weights along a row (formats/encoding.h).
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
 * GGUF's block encodings (granularity none): each block of a row is encoded on its own by the
 *   row's codec (schemes/gguf_quant.h: ggml's layouts, llama.cpp's rules for Q8_0 ... Q5_1,
 *   a scale search for the K-types and IQ4), optionally weighted by a per-column importance
 *   (q_quantize_weighted); a block whose scale overflows fp16 is rejected (LMQ_E_NUMERIC).
 * NaN or Inf weights are rejected before anything is written (LMQ_E_NUMERIC, naming the
 * element). Dequantisation rejects stored bytes that decode to NaN or Inf (LMQ_E_FORMAT).
 *
 * The runtime's kernels (runtime/linear.h) compute with the stored bytes directly, each decoding
 * a weight to exactly what q_dequantize gives. */
#ifndef LMQ_SCHEME_H
#define LMQ_SCHEME_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/pool.h"
#include "formats/encoding.h"
#include "schemes/gguf_quant.h"

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
    const lmq_encoding *enc;       /* the facts: name, widths, granularities */
    uint32_t (*to_code)(float x);  /* float codes: nearest code, ties to even */
    float (*from_code)(uint32_t c);
    q_fit_fn fit;        /* groups with a scale (never called at granularity none) */
    q_encode_fn encode;  /* NULL for block encodings, which encode whole blocks (codec) */
    q_decode_fn decode;
    void (*decode_block)(const uint8_t *block, float *out); /* block encodings: one block's
                            enc->block weights from its enc->block_bytes bytes (gguf_blocks.h) */
    const q_block_codec *codec; /* block encodings: how a block's scales are fitted, its codes
                            chosen and its bytes packed (gguf_quant.h: q_block_fit, q_block_round,
                            q_block_pack; q_block_encode the three at once, each weight's squared
                            error weighted by an importance or uniformly). The primitives that
                            drivers choosing codes themselves (calibrate/gptq.c) work with */
};

/* The row for dtype; NULL when dtype is not an encoding. */
const q_scheme *q_scheme_get(unsigned dtype);
/* Quantises the fp32 [rows, cols] matrix w into out, which holds exactly out_size bytes and
 * must match the layout's size. Runs on pool's threads (NULL: the caller's alone) in chunks of
 * whole rows that start on a byte of the codes; every group is fitted and encoded on its own,
 * so the bytes, and the error when there is one, do not depend on the thread count.
 * Deterministic: the same input gives the same bytes. */
lmq_code q_quantize(const lmq_qparams *qp, const float *w, int64_t rows, int64_t cols,
                    uint8_t *out, size_t out_size, lmq_pool *pool, lmq_err *err);

/* q_quantize with the importance of each input column: imp holds cols values (finite, >= 0) that
 * weight the squared error of every weight in that column in the block encodings' fits (llama-
 * quantize's --imatrix; gguf_quant.h); NULL is q_quantize. Other encodings fit no error and take
 * none (LMQ_E_UNSUPPORTED). */
lmq_code q_quantize_weighted(const lmq_qparams *qp, const float *w, const float *imp, int64_t rows, int64_t cols,
                             uint8_t *out, size_t out_size, lmq_pool *pool, lmq_err *err);

/* Primitives for drivers that choose scales or codes themselves (calibrate/: GPTQ, AWQ) and
 * must still write exactly the bytes every reader uses. The row's encode and decode functions
 * (q_scheme_get(qp->dtype)->encode, ->decode) turn weights into codes and back for a group.
 *
 * Fits one scale group of qp's scheme to the n finite weights at w, as q_quantize does; `first`
 * is w[0]'s element index, for errors. Granularity none: the neutral group (scale 1). */
lmq_code q_fit(const lmq_qparams *qp, const float *w, size_t n, size_t first, q_group *g, lmq_err *err);

/* Writes a whole stored tensor into out (exactly out_size bytes, the layout's size) from its
 * scale groups, in storage order (formats/encoding.h: by row, then group within the row; one at
 * granularity tensor, none at granularity none) and its codes (rows × cols, row-major, each
 * below 2^bits; LMQ_E_ARG otherwise). q_quantize writes through the same code. */
lmq_code q_store(const lmq_qparams *qp, int64_t rows, int64_t cols, const q_group *groups,
                 const uint32_t *codes, uint8_t *out, size_t out_size, lmq_err *err);

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
