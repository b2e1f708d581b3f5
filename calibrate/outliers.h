/* Test models with activation outliers (lmq outliers). SmoothQuant exists for a few input
 * channels whose activations are far larger than the rest; the fixture models barely have any.
 * This builds them by a function-preserving transform (calibrate/transform.h): in every block,
 * for both norm-fed inputs, `channels` distinct channels chosen from `seed` are scaled by
 * `factor` at the norm's output and the reading columns divided by it. */
#ifndef LMQ_CAL_OUTLIERS_H
#define LMQ_CAL_OUTLIERS_H

#include <stdint.h>

#include "common/err.h"

typedef struct {
    int channels;  /* per block and input, 1..dim */
    float factor;  /* finite, > 0 */
    uint64_t seed;
} cal_outlier_opts;

/* The channels of every block's two inputs: chosen[(layer·2 + input)·channels + k] (input 0 the
 * attention's, 1 the feed-forward's), k < channels, distinct and ascending within each set.
 * Deterministic in (dim, n_layers, opts). */
lmq_code cal_outlier_channels(const cal_outlier_opts *o, int dim, int n_layers, int *chosen, lmq_err *err);

/* Reads the fp32 artefact in_path, scales the chosen channels and writes out_path atomically, an
 * fp32 artefact whose manifest source notes add what was done (channels per block, factor, seed,
 * the channels). Bad options or a non-fp32 input are errors before anything is written. */
lmq_code cal_outliers_file(const char *in_path, const char *out_path, const cal_outlier_opts *o, lmq_err *err);

#endif
