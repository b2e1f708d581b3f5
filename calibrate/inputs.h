/* The inputs of a block's linear layers (formats/roles.h): layers that read the same activations
 * share one input, so the calibrate stage records one set of statistics per input, not per layer,
 * and the methods that scale an input's channels (SmoothQuant, AWQ) treat its readers together. */
#ifndef LMQ_CAL_INPUTS_H
#define LMQ_CAL_INPUTS_H

#include "formats/model.h"
#include "formats/roles.h"

#define CAL_MAX_READERS 3

/* The input the tensor `name` ("blk.3.attn_k.weight") reads: returns 1 and sets layer and which,
 * or 0 when name is not a block's linear layer. */
int cal_input_of(const char *name, int *layer, lmq_input *which);

/* The layers of m that read input (layer, which), in the order the forward pass runs them: their
 * count (0 when the model has none), and the tensors in out. */
int cal_input_readers(const lmq_model *m, int layer, lmq_input which, lmq_tensor *out[CAL_MAX_READERS]);

/* Width of input (layer, which) in m: the readers' column count (0 when it has no readers). */
int cal_input_dim(const lmq_model *m, int layer, lmq_input which);

#endif
