/* AWQ (Lin et al. 2023, "AWQ: Activation-aware Weight Quantization", section 3): protects the
 * weights of inputs with large activations by scaling them up before quantisation (and the
 * inputs down by the same factors, folded by the caller into the operation that produces them),
 * then clips each group's range where that lowers the output error. The error of a candidate is
 * measured through G = XᵀX (calibrate/layer_error.h). Drivers over the scheme table: RTN is
 * q_quantize, clipped groups are fitted by the scheme's own fit and written by q_store, so the
 * bytes have lmq's plain layout. Results do not depend on the thread count. */
#ifndef LMQ_AWQ_H
#define LMQ_AWQ_H

#include <stddef.h>
#include <stdint.h>

#include "calibrate/layer_error.h"
#include "common/err.h"
#include "common/pool.h"
#include "formats/encoding.h"

typedef struct {
    int grid;          /* exponents r tried: 0, 1/grid, ..., (grid-1)/grid; >= 1 (20) */
    int clip;          /* 0: no clip search, the bytes are RTN's (1) */
    int clip_grid;     /* clip ratios tried: 1 - max_shrink·k/clip_grid, k < clip_grid; >= 1 (20) */
    double max_shrink; /* in [0, 1) (0.5) */
} cal_awq_params;

#define CAL_AWQ_DEFAULTS ((cal_awq_params){ .grid = 20, .clip = 1, .clip_grid = 20, .max_shrink = 0.5 })

/* The smallest scale factor: inputs that are never active still get a finite 1/s. */
#define CAL_AWQ_MIN_SCALE 1e-4

/* Scale search for the n_w linear layers that read one input of cols channels (q/k/v, gate/up,
 * or one layer alone): layer l has rows[l] rows of weights W[l] and the encoding qp[l]. For each
 * r, s_j = max(mean|x_j|^r, CAL_AWQ_MIN_SCALE) / sqrt(max s · min s); the r chosen minimises
 * Σ_l tr(dW G dWᵀ), dW = Q(W·diag(s))·diag(1/s) - W with Q round to nearest (q_quantize), the
 * first of equals winning. r = 0 gives s = 1 exactly. Writes s[cols] and r. */
lmq_code cal_awq_scales(const lmq_qparams *const *qp, const float *const *W, const int64_t *rows, int n_w,
                        int64_t cols, const double *G, const float *mean_abs_x, const cal_awq_params *p,
                        lmq_pool *pool, float *s, double *r, lmq_err *err);

/* Clip search, then quantisation of one (already scaled) layer into out (out_size bytes, the
 * layout's size). For each scale group (a row's group, a row, or the whole tensor), each ratio
 * 1 - max_shrink·k/clip_grid is tried: the scheme's fit on the weights clamped to ±max|w|·ratio
 * (symmetric) or [min·ratio, max·ratio] (asymmetric), then the unclamped weights encoded with it;
 * the one with the least dW_g G_gg dW_gᵀ is kept (G_gg: the group's diagonal block of G; ratio 1,
 * RTN's own group, wins ties). GGUF's block encodings (which fit their own scales, a clip among
 * them): each block's scale search weighted per column by G's diagonal (Σ x², q_quantize_weighted)
 * in place of the clip search. clip = 0, or another encoding at granularity none: RTN's bytes. Writes the mean and
 * least ratio kept, and res->err_rtn, res->err (relative output errors). */
lmq_code cal_awq_clip(const lmq_qparams *qp, const float *W, int64_t rows, int64_t cols, const double *G,
                      const cal_awq_params *p, uint8_t *out, size_t out_size, lmq_pool *pool,
                      double *clip_mean, double *clip_min, cal_result *res, lmq_err *err);

#endif
