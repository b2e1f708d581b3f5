/* lmq quantize with a recipe that needs activation statistics: SmoothQuant, AWQ and GPTQ run here,
 * ahead of quantize/'s per-tensor pass, which then writes what they decided (q_override).
 *
 * Order, as the methods compose:
 *   1. SmoothQuant (recipe `smoothquant: {alpha}`): for each input a norm feeds, s_j =
 *      max|X_j|^α / max|W_j|^(1−α) over the layers reading it; x_j ← x_j / s_j folded into the
 *      norm's weight and bias, W[:, j] ← W[:, j]·s_j. Inputs without a norm in front (attention
 *      output, feed-forward down) are left alone, and their layers say so in the manifest.
 *   2. AWQ (rules with `method: awq`): per input, layer by layer, the scale s = mean|x|^r whose
 *      quantised layers best reproduce the outputs on the calibration statistics; x ← x / s folded
 *      into what produces the input (the norm; the value rows for the attention output when every
 *      head has its own values; the up rows for Llama's down projection), W ← W·diag(s). Then a
 *      clip ratio per group. Where no fold exists the scale is not applied (a note says why).
 *   3. imatrix (rules with `method: imatrix`, GGUF block encodings): q_quantize_weighted with each
 *      input channel's mean x² from the statistics (rescaled with the transforms above).
 *   4. GPTQ (rules with `method: gptq`): sequential, block by block: the calibration windows run
 *      through the model whose earlier blocks are already quantised, the Gram matrix of each of
 *      this block's inputs is collected, and GPTQ quantises the block's layers with it. Each
 *      window's residual stream is kept at one block's input and advanced a block at a time
 *      (windows × ctx × dim floats), so each block runs twice (observed, then quantised).
 * The statistics must come from the same artefact (its file checksum); statistics of inputs that
 * a transform rescaled are rescaled with them. A recipe that needs no statistics is applied as
 * q_quantize_file applies it: the artefact does not name statistics it did not use. */
#ifndef LMQ_CAL_METHODS_H
#define LMQ_CAL_METHODS_H

#include "quantize/quantize.h"

typedef struct {
    q_opts q;               /* progress and threads for the per-tensor pass (override and stats are set here) */
    const char *calib_text; /* GPTQ's calibration text; NULL: the one the stats file names (its checksum
                               is checked either way) */
    /* Called as each block's calibrated work completes (may be NULL). */
    void (*progress)(void *ctx, const char *stage, int done, int total);
    void *progress_ctx;
} cal_quantize_opts;

lmq_code cal_quantize_file(const char *in_path, const char *recipe_path, const char *stats_path, const char *out_path,
                           const cal_quantize_opts *opts, lmq_err *err);

#endif
