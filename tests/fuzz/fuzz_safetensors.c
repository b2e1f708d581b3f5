/* safetensors: st_open_mem on arbitrary bytes, then every tensor found by name and read as fp32
 * (F32/F16/BF16; the other dtypes must refuse cleanly). */
#include "formats/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_file f;
    lmq_err err = { 0 };
    if (st_open_mem(data, size, "fuzz.safetensors", &f, &err))
        return 0;
    for (int i = 0; i < f.n_tensors; i++) {
        const st_tensor *t = &f.tensors[i];
        FZ_CHECK(st_find(&f, t->name) == t, "tensor %s found elsewhere", t->name);
        FZ_CHECK(t->begin <= t->end && t->end <= f.data_size, "tensor %s outside the data", t->name);
        float *out = malloc(t->numel ? (size_t)t->numel * sizeof *out : 1);
        if (!out)
            abort();
        lmq_code c = st_read_f32(&f, t, out, &err);
        FZ_CHECK(c == LMQ_OK || c == LMQ_E_UNSUPPORTED, "%s", err.msg);
        free(out);
    }
    st_close(&f);
    return 0;
}
