/* What the CUDA backend's translation units share (C++; runtime/cuda/cuda.h is the interface). */
#ifndef LMQ_RT_CUDA_INTERNAL_H
#define LMQ_RT_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" {
#include "runtime/cuda/cuda.h"
}

struct rtc_ctx {
    int device;
    cudaDeviceProp prop;
    cudaStream_t stream;
    cublasHandle_t blas;
    void *scratch; /* activations rounded for the fp16/bf16 GEMMs */
    size_t scratch_size;
    unsigned scratch_gen; /* counts reallocations: a captured graph holds the scratch's address */
};

/* The table's functions (runtime/cuda/cuda.h documents each; the plugin exports none of them),
 * and what the backend's states are made of (runtime/cuda/backend.cu): the model uploaded (every
 * weight as upload does, LMQ_E_UNSUPPORTED naming the first without a kernel; m's bytes may go
 * once it returns), device states of seqs KV caches, and forward (rt_call's rows, runtime/backend.h:
 * logits [(n − from) × vocab] on the host for rows [from, n); synchronous). */
int rtc_device_count(void);
lmq_code rtc_open(int device, rtc_ctx **out, lmq_err *err);
void rtc_close(rtc_ctx *c);
void rtc_describe(const rtc_ctx *c, char *buf, size_t size);
size_t rtc_l2_bytes(const rtc_ctx *c);
lmq_code rtc_alloc(rtc_ctx *c, size_t bytes, void **dev, lmq_err *err);
void rtc_free(void *dev);
lmq_code rtc_to_device(rtc_ctx *c, void *dev, const void *host, size_t bytes, lmq_err *err);
lmq_code rtc_to_host(rtc_ctx *c, void *host, const void *dev, size_t bytes, lmq_err *err);
lmq_code rtc_sync(rtc_ctx *c, lmq_err *err);
int rtc_supports(const rt_weight *W, char *why, size_t size);
lmq_code rtc_upload(rtc_ctx *c, const rt_weight *W, rtc_weight **out, lmq_err *err);
void rtc_weight_free(rtc_weight *w);
size_t rtc_weight_bytes(const rtc_weight *w);
lmq_code rtc_linear(rtc_ctx *c, const float *x, int n, const rtc_weight *W, float *y, lmq_err *err);
lmq_code rtc_probe_copy(rtc_ctx *c, size_t bytes, int rounds, double *gbps, lmq_err *err);
lmq_code rtc_model_upload(rtc_ctx *c, const rt_model *m, rtc_model **out, lmq_err *err);
void rtc_model_free(rtc_model *m);
lmq_code rtc_state_create(rtc_ctx *c, const rtc_model *m, int max_tokens, int seqs, rtc_state **out, lmq_err *err);
void rtc_state_free(rtc_state *s);
lmq_code rtc_forward(rtc_state *s, int n, const int32_t *tokens, const int32_t *seqs, const int32_t *pos, int from,
                     float *logits, lmq_err *err);

/* out[i × W.in] = row rows[i] of W decoded to fp32 (add: added to out), rows a device array of n. */
lmq_code rtc_weight_rows(rtc_ctx *c, const rtc_weight *W, const int32_t *rows, int n, int add, float *out,
                         lmq_err *err);
/* W's output features (rows) and input features (columns). */
int rtc_weight_out(const rtc_weight *W);
int rtc_weight_in(const rtc_weight *W);

/* LMQ_OK, or the CUDA error named with what was being done. */
lmq_code rtc_check(cudaError_t e, const char *what, lmq_err *err);
lmq_code rtc_check_blas(cublasStatus_t s, const char *what, lmq_err *err);
/* c->scratch holding at least bytes. */
lmq_code rtc_scratch(rtc_ctx *c, size_t bytes, lmq_err *err);

#endif
