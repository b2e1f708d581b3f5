/* Linear layers over weights in their stored encodings.
 *
 * rt_weight is a typed view: the encoding, its layout (schemes/scheme.h) and the stored bytes,
 * which point into the artefact's mapping. Nothing is copied or widened at load. rt_linear
 * picks, per encoding and kernel set, one of two ways, which give bit-identical results:
 *   fused   (AVX-512: fp32, fp16, bf16, int8, int4, int3, int2; AVX2+FMA+F16C: fp16 to int4;
 *           symmetric or not, per tensor, channel or group of a multiple of 32): each step
 *           decodes 32 (AVX2: 8) weights of a row in registers, exactly as the scheme table's
 *           dequantiser would, and multiplies them into the activations (AVX2 in its gemm_nt's
 *           summation order, so its fp32 product serves as the fp32 tiles). For a few activation rows (decode) it runs straight over the stored
 *           bytes; for many (prefill) it first decodes a block of rows into scratch with the
 *           same step and then runs the fp32 tiles over it, so decoding costs once per block.
 *           GGUF's block encodings (every kernel set, the scalar one too): each block of a tile's
 *           rows is decoded once into a block's floats by the set's decoder (exactly as
 *           schemes/gguf_blocks.c), then multiplied as the set's fp32 product does.
 *   generic (any encoding, any kernel set): a block of rows is dequantised into scratch by the
 *           scheme table, then the kernel set's fp32 matrix product runs over it.
 * Either way no whole-model fp32 copy exists, and every output is summed in an order fixed by
 * the encoding and the kernel set alone: thread count and batch size never change a result.
 *
 * A weight may ask for its input to be quantised first (W8A8; `act`, from the manifest): x is
 * replaced by x' = clamp(roundf(x / s), −127, 127)·s, s = max|x| / 127 in fp32 (a zero max gives
 * x' = 0), the same bits on every kernel set (the int8 path below quantises 16 or 8 at a time on
 * AVX-512 and AVX2, exactly as the scalar steps do), so the product sees the same x' everywhere. Per token the max is each row's: results stay independent of batch, threads and ISA.
 * Per tensor it is taken over the call's whole x[n × in], so by definition a row's result
 * depends on the other rows of the call (verify scores a window in one call, as the golden
 * values assume; decoding one token at a time quantises each token alone).
 * Symmetric int8 weights per channel with int8 activations per token (W8A8) are multiplied as
 * integers: y = ((float)Σ q_x·q_w · s_x) · s_w (+ b), the sum exact (AVX-512 VNNI where the CPU
 * has it, else AVX2's 16-bit pair products, four rows of W against up to three tokens' codes at a
 * time; a plain loop on the scalar set: the same bits everywhere). That is x'·W'ᵀ without
 * the fp32 product's rounding; every other combination runs the fp32 product over x'.
 * int8 activations per block (a8 block) are rounded as llama.cpp's vec_dot pairs round them:
 * Q8_0 (blocks of 32, d = max|x| / 127, its scale the fp16 of d) against symmetric int8 and int4
 * per group of a multiple of 32 and GGUF's 32-blocks (Q8_1's codes and scale, the same, against
 * Q4_1 and Q5_1), Q8_K (blocks of 256, codes nearest(−127·x / max), one fp32 scale) against the
 * K-types and IQ4_XS; they are multiplied as integers too: y = Σ_b (float)(Σ q_x·q_w) · (d_x·d_w)
 * [+ (float)Σ q_x · (d_x·m_w)] (+ b) over the weights' sub-blocks of 16 or 32 (scale d_w and min
 * m_w each: runtime/linear_a8b.c), the sums exact, their terms added in sub-block order with no
 * fused multiply-add (16 rows of W packed a sub-block at a time so that an integer lane holds a
 * row's sub-block sum; VNNI, AVX2's pair products, a plain loop: the same bits everywhere). Other
 * weights with it run the fp32 product over x' = code·fp16(d) (blocks of 32).
 *
 * The code: runtime/linear.c is the driver (views, work split, the loops over tiles, the rounding
 * of x, and two tables: a row per activation rounding, a row per product of its own keyed by the
 * weight's encoding and the rounding, W8A8's among them). The kernels are the kernel set's
 * (rt_exec.isa, runtime/kernels.h): each of runtime/kernels_{scalar,avx2,avx512}.c has a table of
 * fused kernels, a row per encoding and way of reading it (runtime/linear_impl.h's rt_fused), and
 * the integer products' kernels (W8A8's dot4 and codes, a8 block's a8b_dot and packing). A new
 * encoding's fused kernels are a step (or a tile and a row
 * decoder of its own) and a row in each kernel file; without one it runs generic. */
#ifndef LMQ_RT_LINEAR_H
#define LMQ_RT_LINEAR_H

#include "formats/model.h"
#include "runtime/kernels.h"
#include "schemes/scheme.h"

/* y = x·Wᵀ + b with W [out × in] stored as `q` at `data`. */
typedef struct rt_weight {
    const char *name;    /* the tensor's canonical name: its identity for observers and messages */
    lmq_qparams q;
    lmq_layout L;
    const uint8_t *data; /* scales, zero points and codes as schemes/scheme.h lays them out */
    const float *b;      /* [out] or NULL */
    int out, in;
    lmq_act act;         /* quantisation of x before the product (formats/dtype.h); none: x as given */
    int wide_zeros;      /* an asymmetric zero code beyond ±2^13: zero·scale may round (set by rt_weight_of) */
    int ahead_tiles;     /* how many tiles of 4 rows on the fused kernels prefetch (set by rt_weight_of) */
} rt_weight;

/* A view of the 2-D tensor t with bias b (fp32, or NULL), with t's activation quantisation. */
lmq_code rt_weight_of(const lmq_tensor *t, const float *b, rt_weight *W, lmq_err *err);

/* Rows [r0, r0 + n) of W as fp32, exactly as the scheme table decodes them (embedding lookups). */
lmq_code rt_weight_rows(const rt_kernels *isa, const rt_weight *W, int r0, int n, float *out, lmq_err *err);

/* Whether rt_linear runs W fused on this kernel set (else generic); for reports and tests. */
int rt_linear_fused(const rt_kernels *isa, const rt_weight *W);

/* y[n × out] = x[n × in] · Wᵀ (+ b). Parallel over blocks of W's rows. ex->observe, when set,
 * sees x first. */
lmq_code rt_linear(const rt_exec *ex, const float *x, int n, const rt_weight *W, float *y, lmq_err *err);

#endif
