/* The CPU kernels under the forward pass and the scorer. Each has a portable scalar version
 * (plain, the readable reference) and an AVX2+FMA version selected at run time; both compute
 * every output with an order that does not depend on how the work is split, so results are
 * identical for any thread count and for any batch size (a token's logits do not depend on
 * whether it ran alone or inside a window).
 *
 * The linear layers over packed weights are in runtime/linear.h. */
#ifndef LMQ_RT_KERNELS_H
#define LMQ_RT_KERNELS_H

#include <stddef.h>

#include "common/err.h"
#include "common/pool.h"

/* Kernel sets, each a superset of the one before. AVX2 means AVX2+FMA+F16C; AVX-512 (F, BW, VL,
 * DQ) adds its own fused kernels for the linear layers over packed weights (runtime/linear.h);
 * its other kernels are AVX2's. */
typedef enum { RT_ISA_SCALAR = 0, RT_ISA_AVX2 = 1, RT_ISA_AVX512 = 2 } rt_isa;

/* Unrolls the short loop after it (up to 4 trips) for the kernels of either file, so that arrays
 * of vector accumulators live in registers. */
#define RT_UNROLL _Pragma("GCC unroll 4")

/* The best kernel set this CPU runs (LMQ_ISA=scalar|avx2 in the environment asks for less). */
rt_isa rt_isa_best(void);
const char *rt_isa_name(rt_isa isa);

struct rt_weight;
/* Sees the input x [n × W->in] of every linear layer before rt_linear multiplies it (the
 * calibrate stage's statistics); an error it returns stops the forward pass. */
typedef lmq_code (*rt_observe_fn)(void *ctx, const struct rt_weight *W, const float *x, int n, lmq_err *err);

/* The device a forward pass runs on (runtime/backend.h): the CPU, or the CUDA plugin's device 0. */
typedef enum { RT_DEVICE_CPU = 0, RT_DEVICE_CUDA = 1 } rt_device;

/* Where and how kernels run: a pool (NULL = the caller's thread only), a kernel set, and an
 * optional observer of the linear layers' inputs (CPU only); device: where rt_forward runs
 * (runtime/forward.h), the CPU unless set. */
typedef struct {
    lmq_pool *pool;
    rt_isa isa;
    rt_observe_fn observe;
    void *observe_ctx;
    rt_device device;
} rt_exec;

/* Below this many multiply-adds a parallel loop is not worth waking the workers for. */
#define RT_PARALLEL_MIN_WORK 65536

/* Serial building block: y[i·ldy + j] = Σ_k x[i·ldx + k]·w[j·ldw + k] (+ b[j]) for i < m,
 * j < cols. Same per-element summation order as rt_linear. */
void rt_gemm_nt(rt_isa isa, const float *x, size_t ldx, const float *w, size_t ldw, const float *b,
                float *y, size_t ldy, int m, int cols, int k);

/* y[c] = scale·Σ_{j<n} w[j]·x[j·ldx + c] for c < d: attention's weighted sum of value rows. */
void rt_wsum_rows(rt_isa isa, const float *w, int n, const float *x, size_t ldx, float scale, float *y, int d);

/* In place: x ← exp(scale·(x − max x)) (scale > 0); returns their sum (float, fixed order).
 * Softmax without the division, which the caller folds into what it does next. */
float rt_softmax_unnorm(rt_isa isa, float *x, int n, float scale);
/* In place: x ← x·Φ(x) with the tanh approximation (GPT-2's gelu_new). */
void rt_gelu_tanh(rt_isa isa, float *x, int n);
/* In place: g ← silu(g)·u (Llama's SwiGLU). */
void rt_silu_mul(rt_isa isa, float *g, const float *u, int n);

/* One row of logits as the scorer needs it: log_softmax(l)[v] = l[v] − max − log(sumexp). */
typedef struct {
    float max;
    int argmax;    /* lowest index of the maximum */
    double sumexp; /* Σ exp(l[v] − max), fp64 sum */
} rt_rowstat;

/* Returns 0, or -1 when a logit is not finite (st is then meaningless). */
int rt_row_stats(rt_isa isa, const float *l, int n, rt_rowstat *st);

/* KL(P_ref || P_q) in nats for one row, P_ref described by lr and its stats sr from
 * rt_row_stats (same isa). Formed from the logit differences so that nearly identical rows
 * (KL ~ 1e-9) keep their digits: identical rows give exactly 0. Never negative. */
double rt_kl_row(rt_isa isa, const float *lr, const rt_rowstat *sr, const float *lq, int n);

#endif
