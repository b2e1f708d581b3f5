/* The CUDA backend (runtime/backend.h) and the plugin's table (runtime/cuda/cuda.h): a state is
 * device 0's context, the model uploaded once, and a device state of its sequences. */
#include "runtime/cuda/internal.h"

#include <limits.h>
#include <stdlib.h>

typedef struct {
    rtc_ctx *c;
    rtc_model *m;
    rtc_state *s;
    int layers;
} backend_state;

static void state_free(void *st)
{
    backend_state *b = (backend_state *)st;
    if (!b)
        return;
    rtc_state_free(b->s);
    rtc_model_free(b->m);
    rtc_close(b->c);
    free(b);
}

static lmq_code state_create(const rt_model *m, const rt_exec *ex, int max_tokens, int seqs, void **out, lmq_err *err)
{
    /* the device runs every pass: the host's pool and kernels are not used */
    *out = NULL;
    if (ex->kv_k || ex->kv_v)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "cuda: the device's KV cache is fp32 only (--kv/--kv-k/--kv-v "
                        "other formats: --device cpu)");
    backend_state *b = (backend_state *)calloc(1, sizeof *b);
    if (!b)
        return lmq_fail(err, LMQ_E_NOMEM, "cuda: out of memory for the state");
    b->layers = m->arch.n_layers;
    lmq_code code = rtc_open(0, &b->c, err);
    if (!code)
        code = rtc_model_upload(b->c, m, &b->m, err);
    if (!code)
        code = rtc_state_create(b->c, b->m, max_tokens, seqs, &b->s, err);
    if (code) {
        state_free(b);
        return code;
    }
    *out = b;
    return LMQ_OK;
}

/* Whole passes from the tokens only: the residual stream stays on the device. */
static lmq_code forward(void *st, const rt_call *k, lmq_err *err)
{
    const backend_state *b = (const backend_state *)st;
    if (!k->tokens || k->from != 0 || k->to != b->layers)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "a pass through some blocks (calibration) runs on the CPU only");
    return rtc_forward(b->s, k->n, k->tokens, k->seqs, k->pos, k->logits_from, k->logits, err);
}

/* Device 0's copy bandwidth, described, with its L2's size. */
static lmq_code probe(size_t bytes, int rounds, double *gbps, char *desc, size_t desc_size, size_t *cache_bytes,
                      lmq_err *err)
{
    *gbps = 0;
    *desc = 0;
    *cache_bytes = 0;
    rtc_ctx *c;
    lmq_code code = rtc_open(0, &c, err);
    if (code)
        return code;
    rtc_describe(c, desc, desc_size);
    *cache_bytes = rtc_l2_bytes(c);
    code = rtc_probe_copy(c, bytes, rounds, gbps, err);
    rtc_close(c);
    return code;
}

static const rt_backend rtc_backend = {
    "cuda", "CUDA", INT_MAX, rtc_device_count, rtc_supports, probe, state_create, state_free, forward, NULL,
};

extern "C" const rtc_api *lmq_cuda_api(void)
{
    static const rtc_api api = {
        RTC_ABI,     sizeof(rt_weight), sizeof(lmq_err), sizeof(rt_model), sizeof(rt_layer),
        rtc_backend, rtc_open,          rtc_close,       rtc_describe,     rtc_l2_bytes,
        rtc_alloc,   rtc_free,          rtc_to_device,   rtc_to_host,      rtc_sync,
        rtc_upload,  rtc_weight_free,   rtc_weight_bytes, rtc_linear,      rtc_probe_copy,
    };
    return &api;
}
