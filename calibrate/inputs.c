#include "calibrate/inputs.h"

#include <stdio.h>
#include <string.h>

const char *const cal_input_names[CAL_N_INPUTS] = { "attn_in", "attn_out_in", "ffn_in", "ffn_down_in" };

/* Every linear layer of a block, in forward order, with the input it reads. */
static const struct {
    const char *layer;
    cal_input input;
} READERS[] = {
    { "attn_qkv", CAL_ATTN_IN }, { "attn_q", CAL_ATTN_IN },    { "attn_k", CAL_ATTN_IN },
    { "attn_v", CAL_ATTN_IN },   { "attn_out", CAL_ATTN_OUT_IN }, { "ffn_gate", CAL_FFN_IN },
    { "ffn_up", CAL_FFN_IN },    { "ffn_down", CAL_FFN_DOWN_IN },
};
#define N_READERS (int)(sizeof READERS / sizeof READERS[0])

int cal_input_of(const char *name, int *layer, cal_input *which)
{
    char what[32];
    int l, end = 0;
    if (sscanf(name, "blk.%d.%31[a-z_].weight%n", &l, what, &end) != 2 || name[end] || l < 0)
        return 0;
    for (int i = 0; i < N_READERS; i++)
        if (!strcmp(what, READERS[i].layer)) {
            *layer = l;
            *which = READERS[i].input;
            return 1;
        }
    return 0;
}

int cal_input_readers(const lmq_model *m, int layer, cal_input which, lmq_tensor *out[CAL_MAX_READERS])
{
    int n = 0;
    for (int i = 0; i < N_READERS; i++) {
        char name[LMQ_NAME_MAX];
        snprintf(name, sizeof name, "blk.%d.%s.weight", layer, READERS[i].layer);
        lmq_tensor *t = READERS[i].input == which ? lmq_model_find(m, name) : NULL;
        if (t && t->ndim == 2 && n < CAL_MAX_READERS)
            out[n++] = t;
    }
    return n;
}

int cal_input_dim(const lmq_model *m, int layer, cal_input which)
{
    lmq_tensor *r[CAL_MAX_READERS];
    return cal_input_readers(m, layer, which, r) ? (int)r[0]->shape[1] : 0;
}
