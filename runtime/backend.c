/* The backend table (runtime/backend.h). */
#include "runtime/backend.h"

#include <stdio.h>
#include <string.h>

#include "schemes/scheme.h"
#ifdef LMQ_CUDA
#include "runtime/cuda/cuda.h"
#endif

static int cpu_devices(void)
{
    return 1;
}

/* rt_linear's generic path decodes any numeric encoding of the scheme table. */
static int cpu_supports(const rt_weight *W, char *why, size_t size)
{
    const q_scheme *s = q_scheme_get(W->q.dtype);
    if (s && s->decode)
        return 1;
    snprintf(why, size, "%s: not a numeric encoding", W->name ? W->name : "weight");
    return 0;
}

#ifdef LMQ_CUDA
static lmq_code cuda_probe(size_t bytes, int rounds, double *gbps, char *desc, size_t desc_size, lmq_err *err)
{
    rtc_ctx *c;
    lmq_code code = rtc_open(0, &c, err);
    if (code)
        return code;
    rtc_describe(c, desc, desc_size);
    code = rtc_probe_copy(c, bytes, rounds, gbps, err);
    rtc_close(c);
    return code;
}
#define CUDA_ROW { "cuda", 1, rtc_device_count, rtc_supports, cuda_probe }
#else
static int cuda_devices(void)
{
    return 0;
}

static int cuda_supports(const rt_weight *W, char *why, size_t size)
{
    (void)W;
    snprintf(why, size, "lmq was built without CUDA (nvcc not found)");
    return 0;
}

static lmq_code cuda_probe(size_t bytes, int rounds, double *gbps, char *desc, size_t desc_size, lmq_err *err)
{
    (void)bytes, (void)rounds, (void)desc_size;
    *gbps = 0;
    *desc = 0;
    return lmq_fail(err, LMQ_E_UNSUPPORTED, "lmq was built without CUDA (nvcc not found)");
}
#define CUDA_ROW { "cuda", 0, cuda_devices, cuda_supports, cuda_probe }
#endif

const rt_backend rt_backends[] = {
    { "cpu", 1, cpu_devices, cpu_supports, NULL },
    CUDA_ROW,
};
const int rt_n_backends = sizeof rt_backends / sizeof rt_backends[0];

const rt_backend *rt_backend_find(const char *name)
{
    for (int i = 0; i < rt_n_backends; i++)
        if (!strcmp(rt_backends[i].name, name))
            return &rt_backends[i];
    return NULL;
}
