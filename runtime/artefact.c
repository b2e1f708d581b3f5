#include "runtime/artefact.h"

#include "formats/container.h"
#include "schemes/scheme.h"

/* With raw NULL, only the size (so a small index entry claiming a huge shape is refused before
 * anything is read); with the bytes, the scales and codes too. fp32 values are checked by
 * lmq_model_validate when a runtime model is built. */
static lmq_code check_entry(const lmq_tensor_entry *t, const void *raw, lmq_err *err)
{
    int64_t rows = t->ndim > 1 ? t->shape[0] : 1, cols = lmq_entry_numel(t) / rows;
    q_layout L;
    lmq_code c = q_layout_of(&t->q, rows, cols, &L, err);
    if (c)
        return c;
    if (L.bytes != t->raw_size)
        return lmq_fail(err, LMQ_E_FORMAT, "%llu bytes stored, the %s layout of [%lld, %lld] needs %zu",
                        (unsigned long long)t->raw_size, q_scheme_get(t->q.dtype)->name, (long long)rows,
                        (long long)cols, L.bytes);
    if (!raw || t->q.dtype == LMQ_T_F32)
        return LMQ_OK;
    return q_validate(&t->q, raw, t->raw_size, rows, cols, err);
}

lmq_code rt_load_artefact(const char *path, lmq_model *out, lmq_err *err)
{
    return lmq_container_read_model(path, check_entry, out, err);
}
