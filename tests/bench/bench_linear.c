/* Does it run faster? One matrix of an output projection's size ([OUT × IN], default 4096 ×
 * 4096) in each encoding, at 1 token (decode: a matrix-vector product) and at 512 tokens
 * (prefill), on the best kernel set and the given thread count. Calls rotate over enough copies
 * of the matrix to fill SPAN, so that one token streams it from memory as a large model's decode
 * does. Prints time, the stored bytes streamed per second at 1 token, the fraction of the read
 * bandwidth that is (all threads reading the same copies just before: on a shared host the
 * memory's speed changes from one second to the next), the speed-up over fp32, and the kernels'
 * own ceiling: the same rate over the first rows of the matrix, HOT_BYTES of them, which stay in
 * cache. Usage: bench_linear [threads] [out] [in] [names]: names, comma-separated, runs those encodings
 * alone (fp32 always runs first, the others' ×fp32 is over it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "runtime/linear.h"
#include "runtime/probe.h"

#define PREFILL 512
/* The bytes the copies of a matrix fill at least: four last-level caches as
 * /sys tells them were not enough on a virtual machine whose host caches more (128 MiB of copies
 * read at 81 GB/s where 1 GiB reads at 50). */
#define SPAN ((size_t)1 << 30)
/* The stored bytes of the cache-resident matrix: within the last-level cache, and long enough
 * per call that handing out the work costs little. */
#define HOT_BYTES ((size_t)4 << 20)

static const struct {
    const char *name;
    lmq_qparams q;
    lmq_act act; /* W8A8: x quantised per token, the int8 × int8 path (VNNI where the CPU has it) */
} ENC[] = {
    { .name = "fp32", .q = { .dtype = LMQ_T_F32 } },
    { .name = "fp16", .q = { .dtype = LMQ_T_F16 } },
    { .name = "bf16", .q = { .dtype = LMQ_T_BF16 } },
    { .name = "int8 per-channel", .q = { .dtype = LMQ_T_INT8, .gran = LMQ_GRAN_CHANNEL } },
    { .name = "int8 per-channel, a8", .q = { .dtype = LMQ_T_INT8, .gran = LMQ_GRAN_CHANNEL },
      .act = { LMQ_ACT_INT8, LMQ_ACT_TOKEN } },
    { .name = "int8 g128", .q = { .dtype = LMQ_T_INT8, .gran = LMQ_GRAN_GROUP, .group = 128 } },
    { .name = "int4 g128", .q = { .dtype = LMQ_T_INT4, .gran = LMQ_GRAN_GROUP, .group = 128 } },
    { .name = "int4 g32", .q = { .dtype = LMQ_T_INT4, .gran = LMQ_GRAN_GROUP, .group = 32 } },
    /* a8 block: x int8 per block (32: Q8_0; 256: Q8_K), the integer product against the weights' blocks (names with a comma
     * still match the filter: a name is matched where a listed one starts) */
    { .name = "int4 g128, a8 block", .q = { .dtype = LMQ_T_INT4, .gran = LMQ_GRAN_GROUP, .group = 128 },
      .act = { LMQ_ACT_INT8, LMQ_ACT_BLOCK } },
    { .name = "int4 g32, a8 block", .q = { .dtype = LMQ_T_INT4, .gran = LMQ_GRAN_GROUP, .group = 32 },
      .act = { LMQ_ACT_INT8, LMQ_ACT_BLOCK } },
    { .name = "int4 g32 asym", .q = { .dtype = LMQ_T_INT4, .gran = LMQ_GRAN_GROUP, .group = 32, .asym = 1 } },
    { .name = "int3 g32", .q = { .dtype = LMQ_T_INT3, .gran = LMQ_GRAN_GROUP, .group = 32 } },
    { .name = "int2 g32 asym", .q = { .dtype = LMQ_T_INT2, .gran = LMQ_GRAN_GROUP, .group = 32, .asym = 1 } },
    { .name = "fp8 e4m3 per-channel", .q = { .dtype = LMQ_T_F8_E4M3, .gran = LMQ_GRAN_CHANNEL } },
    { .name = "fp8 e5m2 per-channel", .q = { .dtype = LMQ_T_F8_E5M2, .gran = LMQ_GRAN_CHANNEL } },
    /* GGUF's blocks (Q8_0 and Q4_0 as blocks: what llama.cpp's negative scales import as) */
    { .name = "q8_0", .q = { .dtype = LMQ_T_Q8_0 } },
    { .name = "q4_0", .q = { .dtype = LMQ_T_Q4_0 } },
    { .name = "q4_0, a8 block", .q = { .dtype = LMQ_T_Q4_0 }, .act = { LMQ_ACT_INT8, LMQ_ACT_BLOCK } },
    { .name = "q8_0, a8 block", .q = { .dtype = LMQ_T_Q8_0 }, .act = { LMQ_ACT_INT8, LMQ_ACT_BLOCK } },
    { .name = "q4_1", .q = { .dtype = LMQ_T_Q4_1 } },
    { .name = "q4_1, a8 block", .q = { .dtype = LMQ_T_Q4_1 }, .act = { LMQ_ACT_INT8, LMQ_ACT_BLOCK } },
    { .name = "q5_0", .q = { .dtype = LMQ_T_Q5_0 } },
    { .name = "q5_0, a8 block", .q = { .dtype = LMQ_T_Q5_0 }, .act = { LMQ_ACT_INT8, LMQ_ACT_BLOCK } },
    { .name = "q5_1", .q = { .dtype = LMQ_T_Q5_1 } },
    { .name = "q5_1, a8 block", .q = { .dtype = LMQ_T_Q5_1 }, .act = { LMQ_ACT_INT8, LMQ_ACT_BLOCK } },
    { .name = "q2_k", .q = { .dtype = LMQ_T_Q2_K } },
    { .name = "q2_k, a8 block", .q = { .dtype = LMQ_T_Q2_K }, .act = { LMQ_ACT_INT8, LMQ_ACT_BLOCK } },
    { .name = "q3_k", .q = { .dtype = LMQ_T_Q3_K } },
    { .name = "q3_k, a8 block", .q = { .dtype = LMQ_T_Q3_K }, .act = { LMQ_ACT_INT8, LMQ_ACT_BLOCK } },
    { .name = "q4_k", .q = { .dtype = LMQ_T_Q4_K } },
    { .name = "q4_k, a8 block", .q = { .dtype = LMQ_T_Q4_K }, .act = { LMQ_ACT_INT8, LMQ_ACT_BLOCK } },
    { .name = "q5_k", .q = { .dtype = LMQ_T_Q5_K } },
    { .name = "q5_k, a8 block", .q = { .dtype = LMQ_T_Q5_K }, .act = { LMQ_ACT_INT8, LMQ_ACT_BLOCK } },
    { .name = "q6_k", .q = { .dtype = LMQ_T_Q6_K } },
    { .name = "q6_k, a8 block", .q = { .dtype = LMQ_T_Q6_K }, .act = { LMQ_ACT_INT8, LMQ_ACT_BLOCK } },
    { .name = "iq4_nl", .q = { .dtype = LMQ_T_IQ4_NL } },
    { .name = "iq4_nl, a8 block", .q = { .dtype = LMQ_T_IQ4_NL }, .act = { LMQ_ACT_INT8, LMQ_ACT_BLOCK } },
    { .name = "iq4_xs", .q = { .dtype = LMQ_T_IQ4_XS } },
    { .name = "iq4_xs, a8 block", .q = { .dtype = LMQ_T_IQ4_XS }, .act = { LMQ_ACT_INT8, LMQ_ACT_BLOCK } },
};

/* Whether name is one of the comma-separated names in list. */
static int listed(const char *list, const char *name)
{
    const size_t n = strlen(name);
    for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, name, n) && (p[n] == ',' || !p[n]))
            return 1;
    return 0;
}

static int fail(const lmq_err *e)
{
    fprintf(stderr, "bench_linear: %s\n", e->msg);
    return 1;
}

/* The first rows of w [rows × in] stored as q, its input quantised as act says, viewed in W (bytes: the caller
 * frees them). Each copy starts on a cache line, as an artefact's blobs do (a vector load of a row straddling
 * two lines would cost what no artefact pays). */
static lmq_code store(const lmq_qparams *q, lmq_act act, const float *w, int rows, int in, int copies, uint8_t **bytes,
                      rt_weight *W, size_t *size, lmq_pool *pool, lmq_err *e)
{
    lmq_layout L;
    lmq_code c = lmq_layout_of(q, rows, in, &L, e);
    if (c)
        return c;
    const size_t stride = (L.bytes + 63) / 64 * 64;
    if (!(*bytes = aligned_alloc(64, stride * (size_t)copies)))
        return lmq_fail(e, LMQ_E_NOMEM, "out of memory");
    if ((c = q_quantize(q, w, rows, in, *bytes, L.bytes, pool, e)))
        return c;
    for (int k = 0; k < copies && !c; k++) {
        if (k)
            memcpy(*bytes + k * stride, *bytes, L.bytes);
        lmq_tensor t = { .name = "bench", .ndim = 2, .shape = { rows, in }, .q = *q, .raw = *bytes + k * stride,
                         .raw_size = L.bytes, .act = act };
        c = rt_weight_of(&t, NULL, &W[k], e);
    }
    *size = L.bytes;
    return c;
}

/* The best of reps runs of `calls` calls in a row (the i-th on copy i % copies), in seconds a call:
 * at 1 token a run sweeps every copy, as the probe it is set against reads them all. */
static double best(const rt_exec *ex, const float *x, int n, const rt_weight *W, int copies, int calls, float *y,
                   int reps, lmq_err *e)
{
    double t = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = lmq_now();
        for (int i = 0; i < calls; i++)
            if (rt_linear(ex, x, n, &W[(r * calls + i) % copies], y, e))
                return -1;
        double dt = (lmq_now() - t0) / calls;
        t = dt < t ? dt : t;
    }
    return t;
}

int main(int argc, char **argv)
{
    const int threads = argc > 1 ? atoi(argv[1]) : 0, out = argc > 2 ? atoi(argv[2]) : 4096,
              in = argc > 3 ? atoi(argv[3]) : 4096;
    const char *only = argc > 4 ? argv[4] : NULL;
    lmq_err e;
    lmq_pool *pool;
    if (out < 1 || in < 1 || lmq_pool_create(threads, &pool, &e))
        return fprintf(stderr, "usage: bench_linear [threads] [out] [in]\n"), 1;
    rt_exec ex = { .pool = pool, .isa = rt_isa_best() };
    /* x and y aligned as the runtime's buffers are */
    float *w = malloc((size_t)out * in * sizeof *w);
    float *x = aligned_alloc(64, ((size_t)PREFILL * in * sizeof *x + 63) / 64 * 64);
    float *y = aligned_alloc(64, ((size_t)PREFILL * out * sizeof *y + 63) / 64 * 64);
    uint64_t s = 1;
    for (size_t i = 0; i < (size_t)out * in; i++) {
        s = s * 6364136223846793005u + 1442695040888963407u;
        w[i] = (float)((double)(s >> 40) / 16777216.0 - 0.5) * 0.05f;
    }
    for (size_t i = 0; i < (size_t)PREFILL * in; i++)
        x[i] = (float)(i % 97) / 97.0f - 0.5f;
    printf("one [%d × %d] matrix, kernels %s, %d threads; roofline: GB/s over read GB/s, the rate all threads read "
           "the same copies just before\n", out, in, ex.isa->name, lmq_pool_threads(pool));
    printf("%-22s %6s %6s %10s %8s %9s %9s %7s %11s %8s %8s\n", "encoding", "path", "bpw", "1 tok µs", "GB/s", "read GB/s",
           "roofline", "×fp32", "512 tok ms", "×fp32", "hot GB/s");
    double t1_f32 = 0, tn_f32 = 0;
    for (size_t k = 0; k < sizeof ENC / sizeof ENC[0]; k++) {
        if (k && only && !listed(only, ENC[k].name))
            continue;
        lmq_layout L;
        if (lmq_layout_of(&ENC[k].q, out, in, &L, &e))
            return fail(&e);
        size_t llc = 0;
        if (rt_probe_llc(&llc, &e))
            return fail(&e);
        const size_t span = 4 * llc > SPAN ? 4 * llc : SPAN;
        const int hot_rows = HOT_BYTES / (L.bytes / (size_t)out) < (size_t)out ? (int)(HOT_BYTES / (L.bytes / (size_t)out)) : out;
        const int copies = (int)((span + L.bytes - 1) / L.bytes);
        uint8_t *bytes = NULL, *hot_bytes = NULL;
        rt_weight *W = calloc((size_t)copies, sizeof *W), H;
        size_t size, hot_size;
        if (!W || store(&ENC[k].q, ENC[k].act, w, out, in, copies, &bytes, W, &size, pool, &e) ||
            store(&ENC[k].q, ENC[k].act, w, hot_rows, in, 1, &hot_bytes, &H, &hot_size, pool, &e))
            return fail(&e);
        double bw = 0;
        if (rt_probe_read_spans(pool, &(rt_span){ bytes, (size + 63) / 64 * 64 * (size_t)copies }, 1, 4, &bw, NULL, &e))
            return fail(&e);
        const double t1 = best(&ex, x, 1, W, copies, copies, y, 3, &e);
        const double tn = best(&ex, x, PREFILL, W, copies, 1, y, 3, &e), th = best(&ex, x, 1, &H, 1, 200, y, 5, &e);
        if (t1 < 0 || tn < 0 || th < 0)
            return fail(&e);
        if (k == 0)
            t1_f32 = t1, tn_f32 = tn;
        const double gbs = (double)size / t1 / 1e9;
        printf("%-22s %6s %6.3f %10.1f %8.1f %9.1f %8.0f%% %7.2f %11.2f %8.2f %8.1f\n", ENC[k].name,
               ENC[k].act.scheme ? "int8" : rt_linear_fused(ex.isa, W) ? "fused" : "generic", (double)L.bits / ((double)out * in), t1 * 1e6,
               gbs, bw, 100.0 * gbs / bw, t1_f32 / t1, tn * 1e3, tn_f32 / tn, (double)hot_size / th / 1e9);
        free(bytes);
        free(hot_bytes);
        free(W);
    }
    free(w);
    free(x);
    free(y);
    lmq_pool_free(pool);
    return 0;
}
