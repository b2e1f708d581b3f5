/* How much a quantised linear layer changes its outputs, measured through the Gram matrix of its
 * inputs: for inputs X [n, cols] and G = XᵀX, ||X(W' - W)ᵀ||²_F = tr(dW G dWᵀ) with dW = W' - W,
 * so the error of any candidate weights costs rows × cols² and no pass over the samples. The
 * objective GPTQ and AWQ minimise, and what the manifest reports for them. */
#ifndef LMQ_LAYER_ERROR_H
#define LMQ_LAYER_ERROR_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/pool.h"
#include "formats/encoding.h"

/* What a calibrated method reports for one layer. */
typedef struct {
    double damp_used; /* GPTQ: the damping Cholesky accepted (raised ×10 from the asked one) */
    int damp_raises;  /* GPTQ: how many times it was raised */
    double err_rtn;   /* relative output error of round-to-nearest (q_quantize) */
    double err;       /* relative output error of the method's own bytes */
} cal_result;

/* Σ a_k b_k in four interleaved partial sums: no chain of dependent additions (fp contraction is
 * off and the order fixed, so the compiler may not reorder one sum), and the same value always. */
double cal_dot(const double *a, const double *b, int64_t n);

/* Σ over nrows rows r of d_r G_b d_rᵀ with d_r = a_r - b_r (b NULL: zero), a_r and b_r the n
 * floats at a + r·lda and b + r·lda, and G_b the n × n block of G at G with row stride ldg
 * (symmetric: only its upper triangle is read). Summed in fp64, in a fixed order. */
double cal_quad(const double *G, int64_t ldg, const float *a, const float *b, int64_t lda,
                int64_t nrows, int64_t n);

/* tr(dW G dWᵀ) into num and tr(W G Wᵀ) into den (NULL: not computed), dW = Wq - W, for
 * [rows, cols] weights and G [cols, cols]. Runs on pool's threads (NULL: the caller's alone) in
 * runs of rows that the shape alone decides: the sums do not depend on the thread count. */
void cal_error_terms(const float *W, const float *Wq, int64_t rows, int64_t cols, const double *G,
                     lmq_pool *pool, double *num, double *den);

/* num / den; 0 when both are 0, +Inf when only den is (the layer's outputs are all zero). */
double cal_relative_error(double num, double den);

/* Checks a Gram matrix [n, n] before use: every element finite, the diagonal >= 0
 * (LMQ_E_NUMERIC naming the element). */
lmq_code cal_check_gram(const double *G, int64_t n, lmq_err *err);

/* Round to nearest: q_quantize's bytes of W into out (out_size bytes, the layout's size) and
 * their dequantised weights into Wq (rows × cols). */
lmq_code cal_rtn(const lmq_qparams *qp, const float *W, int64_t rows, int64_t cols, uint8_t *out,
                 size_t out_size, float *Wq, lmq_pool *pool, lmq_err *err);

#endif
