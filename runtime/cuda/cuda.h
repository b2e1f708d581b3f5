/* The CUDA backend (built only when nvcc and cuBLAS are found: the .cu files of runtime/cuda
 * become the plugin liblmq_cuda.so, below). What a later CUDA forward pass needs underneath it:
 *
 *   a device context   one device, a stream and a cuBLAS handle (open);
 *   device weights     an rt_weight uploaded once in its stored encoding (formats/encoding.h:
 *                      scales, then codes), the codes placed at a 256-byte boundary so that
 *                      rows can be read with 16-byte loads; nothing is widened;
 *   linear layers      y[n × out] = x[n × in]·Wᵀ (+ b) with x, y in device memory, by a table
 *                      keyed by the encoding (as the CPU's, runtime/linear.h):
 *                        fp32, fp16, bf16   cuBLAS GEMM, fp32 accumulation; fp16 and bf16 weights
 *                                           multiply x rounded to the weight's format (the tensor
 *                                           cores' inputs): the one place activations are not fp32
 *                        int8, int4,        symmetric or asymmetric, per tensor, channel or
 *                        int3, int2         group. Up to RTC_GEMV_MAX_ROWS activation rows
 *                                           (decode): a fused dequantising GEMV, one warp per
 *                                           output row, 16-byte loads of the packed codes (not
 *                                           int3: a code at a time), each fp16 scale and zero
 *                                           code applied once per load or per 32-bit word of
 *                                           codes, fp32 accumulation, the codes read once for
 *                                           all rows. More
 *                                           (prefill): blocks of rows dequantised to fp16 in
 *                                           scratch and multiplied by cuBLAS with x rounded to
 *                                           fp16, fp32 accumulation;
 *                        W8A8               int8 per channel with int8 activations per token:
 *                                           each row of x made codes as the CPU makes them, the
 *                                           sums exact in int32 (dp4a GEMV up to
 *                                           RTC_GEMV_MAX_ROWS rows; more by cuBLAS's int8 GEMM
 *                                           where the shape suits its tensor cores), scaled as
 *                                           the CPU does: the CPU's results bit for bit;
 *                      fp8 and activation quantisation per tensor (or over asymmetric or
 *                      other than per-channel int8 weights) have no row yet: supports says so,
 *                      naming the tensor;
 *   a probe            device-to-device copy bandwidth, the roofline's denominator;
 *   the forward pass   a device model (every weight of an rt_model uploaded once as above, the
 *                      norm vectors and biases as fp32) and device states (activations, rope
 *                      tables and one fp32 KV cache per sequence), and forward: n tokens, each
 *                      of a sequence at a position, through the model, the logits of rows
 *                      [from, n) copied back. Rows of one sequence at consecutive positions
 *                      are a prefill (rt_forward); one row per sequence is batched decoding
 *                      (rt_decode_batch). The pass is the CPU's (runtime/pass.h) on this
 *                      backend's ops (runtime/cuda/forward.cu); activations are fp32 except
 *                      inside the linear layers, as above.
 * Results are not bit-identical to the CPU's (another summation order): tests compare within
 * a bound relative to Σ|x·w|. Every call returns an lmq_code; messages name the CUDA call. */
#ifndef LMQ_RT_CUDA_H
#define LMQ_RT_CUDA_H

#include <stddef.h>

#include "common/err.h"
#include "runtime/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rtc_ctx rtc_ctx;
typedef struct rtc_weight rtc_weight;
typedef struct rtc_model rtc_model;
typedef struct rtc_state rtc_state;

/* The most activation rows the integer GEMV takes; more go through dequantisation and GEMM. */
#define RTC_GEMV_MAX_ROWS 8

/* The backend is a plugin, liblmq_cuda.so, that the host opens only when CUDA is asked for
 * (rt_cuda below): linking cuBLAS and the CUDA runtime into every lmq command costs each one
 * about 210 MiB of resident memory. The plugin exports one symbol, RTC_ENTRY, a function
 * returning this table; the host refuses a table from another build (abi and the sizes of the
 * structs they share). Its backend is what forward passes run on (runtime/backend.h: a state
 * is a device context, the model uploaded once, and the device state); the rest is the device
 * API under it, which the tests and the benchmark call directly. */
typedef struct rtc_api {
    unsigned abi;
    /* sizeof (rt_weight), (lmq_err), (rt_model), (rt_layer) where it was built */
    size_t weight_size, err_size, model_size, layer_size;
    rt_backend backend; /* "cuda"; devices: the driver's count, 0 when there is no device or no driver */
    /* Opens device `device` (0-based). LMQ_E_UNSUPPORTED "no CUDA device" when there is none. */
    lmq_code (*open)(int device, rtc_ctx **out, lmq_err *err);
    void (*close)(rtc_ctx *c);
    /* "NVIDIA H200 (sm_90, 139.8 GiB)" */
    void (*describe)(const rtc_ctx *c, char *buf, size_t size);
    /* The device's L2 cache in bytes (a benchmark streams more than this to measure memory). */
    size_t (*l2_bytes)(const rtc_ctx *c);

    /* Device memory for activations, copies in and out (synchronous), waiting for the stream. */
    lmq_code (*alloc)(rtc_ctx *c, size_t bytes, void **dev, lmq_err *err);
    void (*free)(void *dev);
    lmq_code (*to_device)(rtc_ctx *c, void *dev, const void *host, size_t bytes, lmq_err *err);
    lmq_code (*to_host)(rtc_ctx *c, void *host, const void *dev, size_t bytes, lmq_err *err);
    lmq_code (*sync)(rtc_ctx *c, lmq_err *err);

    /* Uploads W's stored bytes and bias. LMQ_E_UNSUPPORTED when backend.supports (which needs
     * no device) refuses it. */
    lmq_code (*upload)(rtc_ctx *c, const rt_weight *W, rtc_weight **out, lmq_err *err);
    void (*weight_free)(rtc_weight *w);
    /* Device bytes the weight occupies (its stored bytes, the codes' alignment and the bias). */
    size_t (*weight_bytes)(const rtc_weight *w);
    /* y[n × out] = x[n × in]·Wᵀ (+ b), x and y device pointers; queued on the stream. */
    lmq_code (*linear)(rtc_ctx *c, const float *x, int n, const rtc_weight *W, float *y, lmq_err *err);

    /* Copies a `bytes` buffer to another on the device `rounds` times; *gbps gets the best
     * round's (read + written bytes) / time in 10^9 bytes per second. */
    lmq_code (*probe_copy)(rtc_ctx *c, size_t bytes, int rounds, double *gbps, lmq_err *err);
} rtc_api;

#define RTC_ABI 5
#define RTC_ENTRY "lmq_cuda_api"
typedef const rtc_api *(*rtc_entry)(void);

/* Host side (runtime/backend.c): the plugin's table, opened on the first call (thread-safe): from
 * $LMQ_CUDA_PLUGIN when set, else where this build put it, else lib/lmq/ of the installed tree
 * (make install). NULL with why in err when lmq was built without CUDA or the plugin does not
 * load. */
const rtc_api *rt_cuda(lmq_err *err);

#ifdef __cplusplus
}
#endif

#endif
