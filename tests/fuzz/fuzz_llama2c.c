/* llama2.c checkpoints: l2c_load (which takes a path) on arbitrary bytes written to a scratch
 * file; what loads must be a valid model. */
#include "formats/llama2c.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lmq_model m;
    lmq_err err = { 0 };
    if (l2c_load(fz_scratch(data, size), &m, &err))
        return 0;
    FZ_CHECK(lmq_model_validate(&m, &err) == LMQ_OK, "%s", err.msg);
    lmq_model_free(&m);
    return 0;
}
