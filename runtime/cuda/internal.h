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
};

/* LMQ_OK, or the CUDA error named with what was being done. */
lmq_code rtc_check(cudaError_t e, const char *what, lmq_err *err);
lmq_code rtc_check_blas(cublasStatus_t s, const char *what, lmq_err *err);
/* c->scratch holding at least bytes. */
lmq_code rtc_scratch(rtc_ctx *c, size_t bytes, lmq_err *err);

#endif
