/* Function-preserving transforms of an fp32 model, for the calibration methods that move
 * difficulty between activations and weights (SmoothQuant, AWQ) and for building test models with
 * activation outliers (lmq outliers).
 *
 * Scaling channel j of a linear layer's input by s_j where the input is produced (a norm's weight
 * and bias, or the rows of the layer that computes it) and dividing column j of every layer
 * reading it by s_j leaves the model's function unchanged up to fp32 rounding. Tensors must be
 * fp32; views into a read-only mapping are first replaced by owned copies (lmq_tensor_own). Each
 * function checks (and owns) every tensor before it changes one, so an error leaves the model as
 * it was; errors name the tensor. */
#ifndef LMQ_CAL_TRANSFORM_H
#define LMQ_CAL_TRANSFORM_H

#include "calibrate/inputs.h"
#include "common/err.h"
#include "formats/model.h"

/* x_j ← x_j·s_j at an input a norm feeds (LMQ_IN_ATTN or LMQ_IN_FFN) of block `layer`: the norm's
 * weight (and bias, GPT-2) × s_j, column j of every reader (calibrate/inputs.h) ÷ s_j, for
 * j < arch.dim; every s_j finite and > 0. */
lmq_code cal_scale_norm_input(lmq_model *m, int layer, lmq_input which, const float *s, lmq_err *err);

/* Output channels row0 + j (j < n) of the matrix w, and of its bias b when not NULL, × s_j: the
 * producing side of a scaled input that comes from a linear layer. */
lmq_code cal_scale_rows(lmq_tensor *w, lmq_tensor *b, int64_t row0, int n, const float *s, lmq_err *err);

/* Column j of each of the n matrices t[i] ÷ s_j: the reading side. */
lmq_code cal_scale_columns(lmq_tensor *const *t, int n, const float *s, lmq_err *err);

#endif
