#include "calibrate/inputs.h"

#include <stdio.h>

int cal_input_of(const char *name, int *layer, lmq_input *which)
{
    lmq_role r;
    if (!lmq_role_of(name, layer, &r))
        return 0;
    *which = lmq_roles[r].input;
    return 1;
}

int cal_input_readers(const lmq_model *m, int layer, lmq_input which, lmq_tensor *out[CAL_MAX_READERS])
{
    int n = 0;
    for (int r = 0; r < LMQ_ROLE_COUNT; r++) {
        char name[LMQ_NAME_MAX];
        snprintf(name, sizeof name, "blk.%d.%s.weight", layer, lmq_roles[r].name);
        lmq_tensor *t = lmq_roles[r].input == which ? lmq_model_find(m, name) : NULL;
        if (t && t->ndim == 2 && n < CAL_MAX_READERS)
            out[n++] = t;
    }
    return n;
}

int cal_input_dim(const lmq_model *m, int layer, lmq_input which)
{
    lmq_tensor *r[CAL_MAX_READERS];
    return cal_input_readers(m, layer, which, r) ? (int)r[0]->shape[1] : 0;
}
