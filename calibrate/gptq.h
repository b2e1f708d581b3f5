/* GPTQ (Frantar et al. 2022, "GPTQ: Accurate Post-Training Quantization for Generative
 * Pre-trained Transformers", Algorithm 1): quantises a linear layer's weights one input column
 * at a time, each column's rounding error spread over the columns not yet quantised through the
 * inverse Hessian of the layer's output error, H = 2·XᵀX. A driver over the scheme table: scales
 * come from the scheme's own fit, codes from its encode, bytes from q_store, so the artefact has
 * lmq's plain layout and every reader works unchanged.
 *
 * The steps: dead inputs (H_ii = 0) get H_ii = 1 and their weights zeroed; λ = damp · mean(diag H)
 * is added to the diagonal; U is the upper Cholesky factor of H⁻¹ (H⁻¹ = UᵀU), in fp64. Columns
 * are processed in lazy blocks; for column j of each row, q = encode(w_j) with the row's group
 * for j, err = (w_j - decode(q)) / U_jj, and every later column k takes w_k -= err · U_jk.
 * Scales: per tensor and per channel, fitted once before the loop (dead inputs zeroed); per group,
 * fitted on the current, error-updated weights of the group when its first column is reached,
 * or, with act_order, fitted before the loop from the weights in the plain contiguous groups
 * ("static groups"). act_order processes columns by decreasing diag(H) (ties by index).
 * GGUF's block encodings (the scheme row's codec): each block is a dynamic group: when its first
 * column is reached, q_block_fit fits the block's scales (super-block and sub-blocks) on the
 * row's current weights, each column weighted by 1 / U_jj² (the cost of an error there once it has
 * been spread), and every column is then rounded to that fixed grid (q_block_round); the blocks are
 * packed as they end. act_order is refused (LMQ_E_UNSUPPORTED): a block's weights lie along the
 * row in input order.
 *
 * Memory: one cols × cols fp64 matrix (512 MiB at cols = 8192), 8 bytes per weight (codes and
 * the dequantised weights for the error; 4 for block encodings, whose blocks are packed into out
 * as they end), and 17 × cols fp64 per thread. Time: the factorisation
 * is O(cols³), the rows O(rows · cols²), and each output error (RTN's, GPTQ's) O(rows · cols²)
 * again; all run on the pool. */
#ifndef LMQ_GPTQ_H
#define LMQ_GPTQ_H

#include <stddef.h>
#include <stdint.h>

#include "calibrate/layer_error.h"
#include "common/err.h"
#include "common/pool.h"
#include "formats/encoding.h"

typedef struct {
    double damp;   /* λ / mean(diag H); > 0 (0.01) */
    int block;     /* columns per lazy block (128); rounded up to whole groups. Only a matter of
                      memory traffic: each weight's updates are applied in the same order */
    int act_order; /* 1: columns by decreasing diag(H), static groups (0) */
} cal_gptq_params;

#define CAL_GPTQ_DEFAULTS ((cal_gptq_params){ .damp = 0.01, .block = 128, .act_order = 0 })

/* Quantises the fp32 [rows, cols] weights W ([out, in]) with G = XᵀX ([cols, cols], row-major,
 * symmetric, fp64, finite) into out (exactly out_size bytes, the layout's size), the layout
 * q_quantize writes. When Cholesky fails (H not positive definite) the damping is raised ×10, up
 * to 4 times, then LMQ_E_NUMERIC. Fills res (damping and the output errors of RTN and of GPTQ).
 * The bytes do not depend on the thread count. With H diagonal every update is zero and the
 * bytes are q_quantize's (for a block encoding, q_quantize_weighted's with importance H_jj + λ). */
lmq_code cal_gptq(const lmq_qparams *qp, const float *W, int64_t rows, int64_t cols, const double *G,
                  const cal_gptq_params *p, uint8_t *out, size_t out_size, lmq_pool *pool,
                  cal_result *res, lmq_err *err);

#endif
