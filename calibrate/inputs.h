/* The inputs of a block's linear layers. Layers that read the same activations share one input
 * (q, k and v read the attention norm's output; Llama's gate and up the feed-forward norm's), so
 * the calibrate stage records one set of statistics per input, not per layer, and the methods
 * that scale an input's channels (SmoothQuant, AWQ) treat its readers together. */
#ifndef LMQ_CAL_INPUTS_H
#define LMQ_CAL_INPUTS_H

#include "formats/model.h"

typedef enum {
    CAL_ATTN_IN,     /* attention norm → q, k, v (or fused qkv) */
    CAL_ATTN_OUT_IN, /* attention's weighted values → output projection */
    CAL_FFN_IN,      /* feed-forward norm → gate and up (or up) */
    CAL_FFN_DOWN_IN, /* activation → down projection */
    CAL_N_INPUTS
} cal_input;

extern const char *const cal_input_names[CAL_N_INPUTS]; /* "attn_in", ... */

#define CAL_MAX_READERS 3

/* The input the tensor `name` ("blk.3.attn_k.weight") reads: returns 1 and sets layer and which,
 * or 0 when name is not a block's linear layer. */
int cal_input_of(const char *name, int *layer, cal_input *which);

/* The layers of m that read input (layer, which), in the order the forward pass runs them: their
 * count (0 when the model has none), and the tensors in out. */
int cal_input_readers(const lmq_model *m, int layer, cal_input which, lmq_tensor *out[CAL_MAX_READERS]);

/* Width of input (layer, which) in m: the readers' column count (0 when it has no readers). */
int cal_input_dim(const lmq_model *m, int layer, cal_input which);

#endif
