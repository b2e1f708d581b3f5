/* The CUDA device context, device memory, the copy-bandwidth probe, and the plugin's table
 * (runtime/cuda/cuda.h). */
#include "runtime/cuda/internal.h"

#include <stdio.h>
#include <stdlib.h>

lmq_code rtc_check(cudaError_t e, const char *what, lmq_err *err)
{
    if (e == cudaSuccess)
        return LMQ_OK;
    return lmq_fail(err, e == cudaErrorMemoryAllocation ? LMQ_E_NOMEM : LMQ_E_IO, "cuda: %s: %s (%s)", what,
                    cudaGetErrorString(e), cudaGetErrorName(e));
}

lmq_code rtc_check_blas(cublasStatus_t s, const char *what, lmq_err *err)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return LMQ_OK;
    return lmq_fail(err, s == CUBLAS_STATUS_ALLOC_FAILED ? LMQ_E_NOMEM : LMQ_E_IO, "cublas: %s: %s", what,
                    cublasGetStatusString(s));
}

int rtc_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* no driver or no device: clear the sticky state, report none */
        return 0;
    }
    return n;
}

lmq_code rtc_open(int device, rtc_ctx **out, lmq_err *err)
{
    *out = NULL;
    const int n = rtc_device_count();
    if (n == 0)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "no CUDA device");
    if (device < 0 || device >= n)
        return lmq_fail(err, LMQ_E_ARG, "cuda: device %d of %d", device, n);
    rtc_ctx *c = (rtc_ctx *)calloc(1, sizeof *c);
    if (!c)
        return lmq_fail(err, LMQ_E_NOMEM, "cuda: out of memory");
    c->device = device;
    lmq_code code = rtc_check(cudaSetDevice(device), "cudaSetDevice", err);
    if (!code)
        code = rtc_check(cudaGetDeviceProperties(&c->prop, device), "cudaGetDeviceProperties", err);
    if (!code)
        code = rtc_check(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "cudaStreamCreate", err);
    if (!code)
        code = rtc_check_blas(cublasCreate(&c->blas), "cublasCreate", err);
    if (!code)
        code = rtc_check_blas(cublasSetStream(c->blas, c->stream), "cublasSetStream", err);
    if (code) {
        rtc_close(c);
        return code;
    }
    *out = c;
    return LMQ_OK;
}

void rtc_close(rtc_ctx *c)
{
    if (!c)
        return;
    if (c->blas)
        cublasDestroy(c->blas);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    cudaFree(c->scratch);
    free(c);
}

void rtc_describe(const rtc_ctx *c, char *buf, size_t size)
{
    snprintf(buf, size, "%s (sm_%d%d, %.1f GiB)", c->prop.name, c->prop.major, c->prop.minor,
             (double)c->prop.totalGlobalMem / (1024.0 * 1024 * 1024));
}

size_t rtc_l2_bytes(const rtc_ctx *c)
{
    return (size_t)c->prop.l2CacheSize;
}

lmq_code rtc_alloc(rtc_ctx *c, size_t bytes, void **dev, lmq_err *err)
{
    (void)c;
    *dev = NULL;
    return rtc_check(cudaMalloc(dev, bytes ? bytes : 1), "cudaMalloc", err);
}

void rtc_free(void *dev)
{
    cudaFree(dev);
}

lmq_code rtc_to_device(rtc_ctx *c, void *dev, const void *host, size_t bytes, lmq_err *err)
{
    lmq_code code = rtc_check(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, c->stream), "copy to device", err);
    return code ? code : rtc_sync(c, err);
}

lmq_code rtc_to_host(rtc_ctx *c, void *host, const void *dev, size_t bytes, lmq_err *err)
{
    lmq_code code = rtc_check(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, c->stream), "copy to host", err);
    return code ? code : rtc_sync(c, err);
}

lmq_code rtc_sync(rtc_ctx *c, lmq_err *err)
{
    return rtc_check(cudaStreamSynchronize(c->stream), "cudaStreamSynchronize", err);
}

lmq_code rtc_scratch(rtc_ctx *c, size_t bytes, lmq_err *err)
{
    if (bytes <= c->scratch_size)
        return LMQ_OK;
    lmq_code code = rtc_sync(c, err); /* the old buffer may still be read by queued work */
    if (code)
        return code;
    cudaFree(c->scratch);
    c->scratch = NULL;
    c->scratch_size = 0;
    c->scratch_gen++;
    code = rtc_check(cudaMalloc(&c->scratch, bytes), "cudaMalloc (scratch)", err);
    if (!code)
        c->scratch_size = bytes;
    return code;
}

lmq_code rtc_probe_copy(rtc_ctx *c, size_t bytes, int rounds, double *gbps, lmq_err *err)
{
    *gbps = 0;
    void *a = NULL, *b = NULL;
    cudaEvent_t t0 = NULL, t1 = NULL;
    lmq_code code = rtc_check(cudaMalloc(&a, bytes), "cudaMalloc (probe)", err);
    if (!code)
        code = rtc_check(cudaMalloc(&b, bytes), "cudaMalloc (probe)", err);
    if (!code)
        code = rtc_check(cudaMemsetAsync(a, 1, bytes, c->stream), "cudaMemset", err);
    if (!code)
        code = rtc_check(cudaEventCreate(&t0), "cudaEventCreate", err);
    if (!code)
        code = rtc_check(cudaEventCreate(&t1), "cudaEventCreate", err);
    /* a first copy unmeasured: the pages are touched, clocks up */
    for (int r = -1; r < rounds && !code; r++) {
        code = rtc_check(cudaEventRecord(t0, c->stream), "cudaEventRecord", err);
        if (!code)
            code = rtc_check(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, c->stream), "copy on device", err);
        if (!code)
            code = rtc_check(cudaEventRecord(t1, c->stream), "cudaEventRecord", err);
        if (!code)
            code = rtc_check(cudaEventSynchronize(t1), "cudaEventSynchronize", err);
        float ms = 0;
        if (!code)
            code = rtc_check(cudaEventElapsedTime(&ms, t0, t1), "cudaEventElapsedTime", err);
        if (!code && r >= 0 && ms > 0) {
            const double rate = 2.0 * (double)bytes / (ms * 1e-3) / 1e9;
            if (rate > *gbps)
                *gbps = rate;
        }
    }
    if (t0)
        cudaEventDestroy(t0);
    if (t1)
        cudaEventDestroy(t1);
    cudaFree(a);
    cudaFree(b);
    return code;
}
