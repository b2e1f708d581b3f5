/* Function-preserving transforms of an fp32 model, for the calibration methods that move
 * difficulty between activations and weights (SmoothQuant) and for building test models with
 * activation outliers (lmq outliers).
 *
 * A block's two norms each feed one input: the attention input (q, k, v, or GPT-2's fused qkv)
 * and the feed-forward input (gate and up for Llama, up for GPT-2). Scaling channel j of that
 * input by s_j (the norm's weight, and bias for GPT-2, times s_j) and dividing column j of every
 * linear layer reading it by s_j leaves the model's function unchanged up to fp32 rounding. */
#ifndef LMQ_CAL_TRANSFORM_H
#define LMQ_CAL_TRANSFORM_H

#include "common/err.h"
#include "formats/model.h"

/* The input a block's norm feeds: attention (q,k,v or fused qkv) or feed-forward (gate+up, or up). */
typedef enum { CAL_IN_ATTN, CAL_IN_FFN } cal_norm_input;

/* Most linear layers one norm feeds (Llama and GPT-2 with q, k, v apart). */
#define CAL_MAX_READERS 3

/* The linear layers reading that input, in model order (1..3 tensors) into out[CAL_MAX_READERS];
 * 0 when the model lacks them (a layer out of range, a tensor missing). */
int cal_norm_readers(const lmq_model *m, int layer, cal_norm_input which, lmq_tensor **out);

/* x_j ← x_j·s_j at that input: the norm's weight (and bias, GPT-2) × s_j, column j of every
 * reader ÷ s_j, for j < arch.dim; every s_j finite and > 0. The fp32 function is unchanged up to
 * rounding. Tensors must be fp32; views into a read-only mapping are first replaced by owned
 * copies (lmq_tensor_own). Errors name the tensor; on one nothing has been scaled. */
lmq_code cal_scale_norm_input(lmq_model *m, int layer, cal_norm_input which, const float *s, lmq_err *err);

#endif
