#include "runtime/artefact.h"

#include "formats/container.h"
#include "schemes/scheme.h"

/* The container checks plain float sizes; quantised ones are checked here against the
 * scheme's layout before a byte is decoded (and, with out NULL, before the fp32 storage of
 * a shape the index may have made up is allocated). */
static lmq_code dequantize_entry(const lmq_tensor_entry *t, const void *raw, float *out, lmq_err *err)
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
    if (!out)
        return LMQ_OK; /* the size check lmq_container_read_model asks for first */
    return q_dequantize(&t->q, raw, t->raw_size, rows, cols, out, NULL, err);
}

lmq_code rt_load_artefact(const char *path, lmq_model *out, lmq_err *err)
{
    return lmq_container_read_model(path, dequantize_entry, out, err);
}
