#include "runtime/artefact.h"

#include "formats/container.h"
#include "schemes/scheme.h"

/* The container has checked each tensor's size against its encoding's layout; what is left is
 * the values: scales (and float codes) finite. fp32 values are checked by lmq_model_validate
 * when a runtime model is built. */
static lmq_code check_values(const lmq_tensor_entry *t, const void *raw, lmq_err *err)
{
    if (t->q.dtype == LMQ_T_F32)
        return LMQ_OK;
    const int64_t rows = t->ndim > 1 ? t->shape[0] : 1;
    return q_validate(&t->q, raw, t->raw_size, rows, lmq_entry_numel(t) / rows, err);
}

lmq_code rt_load_artefact(const char *path, lmq_model *out, lmq_err *err)
{
    return lmq_container_read_model(path, check_values, out, err);
}
