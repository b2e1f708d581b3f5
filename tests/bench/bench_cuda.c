/* The CUDA kernels' speed on one matrix ([OUT × IN], default 4096 × 14336, an MLP projection of
 * a 7B-class model) in each encoding the backend multiplies, at 1 activation row (decode: the
 * fused GEMV for integers, cuBLAS for floats) and at 512 (prefill). Calls rotate over enough
 * copies of the matrix to exceed the L2 cache four times, so each streams it from memory. Prints
 * one JSON object per line: first the device and its copy bandwidth (rtc_probe_copy, 1 GiB),
 * then per encoding the mean time per call, the stored bytes read per second at 1 row and their
 * fraction of the copy bandwidth. Usage: bench_cuda [out] [in] [reps]. Needs the CUDA plugin. */
#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/pool.h"
#include "runtime/cuda/cuda.h"
#include "schemes/scheme.h"

#define PREFILL 512

static const rtc_api *cu; /* the plugin's table */

static const lmq_qparams ENC[] = {
    { .dtype = LMQ_T_INT4, .gran = LMQ_GRAN_GROUP, .group = 128 },
    { .dtype = LMQ_T_INT4, .gran = LMQ_GRAN_GROUP, .group = 32 },
    { .dtype = LMQ_T_INT8, .gran = LMQ_GRAN_CHANNEL },
    { .dtype = LMQ_T_INT8, .gran = LMQ_GRAN_GROUP, .group = 128 },
    { .dtype = LMQ_T_F16 },
    { .dtype = LMQ_T_BF16 },
    { .dtype = LMQ_T_F32 },
};

static int fail(const lmq_err *e)
{
    fprintf(stderr, "bench_cuda: %s\n", e->msg);
    return 1;
}

/* Mean seconds per call over reps calls of n rows, rotating over the copies. */
static double timed(rtc_ctx *c, const float *x, int n, rtc_weight **W, int copies, float *y, int reps, lmq_err *e)
{
    for (int r = 0; r < copies; r++) /* warm-up */
        if (cu->linear(c, x, n, W[r], y, e))
            return -1;
    if (cu->sync(c, e))
        return -1;
    const double t0 = lmq_now();
    for (int r = 0; r < reps; r++)
        if (cu->linear(c, x, n, W[r % copies], y, e))
            return -1;
    if (cu->sync(c, e))
        return -1;
    return (lmq_now() - t0) / reps;
}

int main(int argc, char **argv)
{
    const int out = argc > 1 ? atoi(argv[1]) : 4096, in = argc > 2 ? atoi(argv[2]) : 14336,
              reps = argc > 3 ? atoi(argv[3]) : 200;
    if (out < 1 || in < 1 || reps < 1) {
        fprintf(stderr, "usage: bench_cuda [out] [in] [reps]\n");
        return 2;
    }
    lmq_err e;
    rtc_ctx *c;
    if (!(cu = rt_cuda(&e)) || cu->open(0, &c, &e))
        return fail(&e);
    char desc[256];
    cu->describe(c, desc, sizeof desc);
    double copy_gbps;
    if (cu->probe_copy(c, (size_t)1 << 30, 10, &copy_gbps, &e))
        return fail(&e);
    printf("{\"device\":\"%s\",\"copy_gbps\":%.1f,\"l2_bytes\":%zu,\"out\":%d,\"in\":%d}\n", desc, copy_gbps,
           cu->l2_bytes(c), out, in);
    fflush(stdout);

    lmq_pool *pool;
    if (lmq_pool_create(0, &pool, &e))
        return fail(&e);
    float *w = malloc((size_t)out * in * sizeof *w), *x = malloc((size_t)PREFILL * in * sizeof *x);
    uint64_t s = 1;
    for (size_t i = 0; i < (size_t)out * in; i++) /* uniform in ±0.05: any values serve for speed */
        w[i] = (float)(((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 40) * 0x1p-24 - 0.5) * 0.1f;
    for (size_t i = 0; i < (size_t)PREFILL * in; i++)
        x[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    void *dx, *dy;
    if (cu->alloc(c, (size_t)PREFILL * in * sizeof *x, &dx, &e) ||
        cu->alloc(c, (size_t)PREFILL * out * sizeof(float), &dy, &e) ||
        cu->to_device(c, dx, x, (size_t)PREFILL * in * sizeof *x, &e))
        return fail(&e);
    for (size_t k = 0; k < sizeof ENC / sizeof ENC[0]; k++) {
        char name[64];
        q_describe(&ENC[k], name, sizeof name);
        lmq_layout L;
        if (lmq_layout_of(&ENC[k], out, in, &L, &e))
            return fail(&e);
        uint8_t *data = malloc(L.bytes);
        if (!data || q_quantize(&ENC[k], w, out, in, data, L.bytes, pool, &e))
            return data ? fail(&e) : 1;
        const rt_weight W = { .name = name, .q = ENC[k], .L = L, .data = data, .out = out, .in = in };
        int copies = (int)(4 * cu->l2_bytes(c) / L.bytes) + 1;
        copies = copies > 64 ? 64 : copies;
        rtc_weight *dw[64];
        for (int i = 0; i < copies; i++)
            if (cu->upload(c, &W, &dw[i], &e))
                return fail(&e);
        free(data);
        const double t1 = timed(c, dx, 1, dw, copies, dy, reps, &e);
        const double tp = t1 < 0 ? -1 : timed(c, dx, PREFILL, dw, copies, dy, reps / 20 + 1, &e);
        if (tp < 0)
            return fail(&e);
        const double gbps = (double)L.bytes / t1 / 1e9;
        printf("{\"encoding\":\"%s\",\"bytes\":%zu,\"copies\":%d,\"decode_us\":%.2f,\"decode_gbps\":%.1f,"
               "\"fraction_of_copy\":%.3f,\"prefill512_ms\":%.3f,\"prefill512_tflops\":%.2f}\n",
               name, L.bytes, copies, t1 * 1e6, gbps, gbps / copy_gbps, tp * 1e3,
               2.0 * PREFILL * out * (double)in / tp / 1e12);
        fflush(stdout);
        for (int i = 0; i < copies; i++)
            cu->weight_free(dw[i]);
    }
    cu->free(dx);
    cu->free(dy);
    free(w);
    free(x);
    lmq_pool_free(pool);
    cu->close(c);
    return 0;
}
