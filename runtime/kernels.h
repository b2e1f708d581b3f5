/* The CPU kernels under the forward pass, the scorer, the linear layers over packed weights
 * (runtime/linear.h) and the bandwidth probe, as kernel sets: one table of function pointers per
 * instruction set, each in a file of its own, as ggml's type_traits_cpu and per-architecture files:
 *   runtime/kernels_scalar.c  "scalar": portable C, the readable reference, on every CPU;
 *   runtime/kernels_avx2.c    "avx2": AVX2+FMA+F16C;
 *   runtime/kernels_avx512.c  "avx512" (AVX-512 F, BW, VL, DQ): fused linear kernels and the
 *                             probe's reads of its own, AVX2's other kernels; "avx512vnni": the
 *                             same with VNNI's integer products (W8A8).
 * Each set runs wherever the one before it does and more. runtime/kernels.c chooses the best once
 * a process; callers reach every kernel through it (rt_exec.isa). Each kernel computes every
 * output in an order that does not depend on how the work is split, so results are identical for
 * any thread count and for any batch size (a token's logits do not depend on whether it ran alone
 * or inside a window). */
#ifndef LMQ_RT_KERNELS_H
#define LMQ_RT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/pool.h"

/* One row of logits as the scorer needs it: log_softmax(l)[v] = l[v] − max − log(sumexp). */
typedef struct {
    float max;
    int argmax;    /* lowest index of the maximum */
    double sumexp; /* Σ exp(l[v] − max), fp64 sum */
} rt_rowstat;

/* The kernels, by type. */
/* Serial building block: y[i·ldy + j] = Σ_k x[i·ldx + k]·w[j·ldw + k] (+ b[j]) for i < m,
 * j < cols. Same per-element summation order as rt_linear. */
typedef void rt_gemm_nt_fn(const float *x, size_t ldx, const float *w, size_t ldw, const float *b, float *y,
                           size_t ldy, int m, int cols, int k);
/* y[c] = scale·Σ_{j<n} w[j]·x[j·ldx + c] for c < d: attention's weighted sum of value rows. */
typedef void rt_wsum_rows_fn(const float *w, int n, const float *x, size_t ldx, float scale, float *y, int d);
/* In place: x ← exp(scale·(x − max x)) (scale > 0); returns their sum (float, fixed order).
 * Softmax without the division, which the caller folds into what it does next. */
typedef float rt_softmax_unnorm_fn(float *x, int n, float scale);
/* In place: x ← x·Φ(x) with the tanh approximation (GPT-2's gelu_new). */
typedef void rt_gelu_tanh_fn(float *x, int n);
/* In place: g ← silu(g)·u (Llama's SwiGLU). */
typedef void rt_silu_mul_fn(float *g, const float *u, int n);
/* Returns 0, or -1 when a logit is not finite (st is then meaningless). */
typedef int rt_row_stats_fn(const float *l, int n, rt_rowstat *st);
/* KL(P_ref || P_q) in nats for one row, P_ref described by lr and its stats sr from row_stats
 * (the same set's). Formed from the logit differences so that nearly identical rows (KL ~ 1e-9)
 * keep their digits: identical rows give exactly 0. Never negative. */
typedef double rt_kl_row_fn(const float *lr, const rt_rowstat *sr, const float *lq, int n);
/* One row of an input's Gram matrix from n tokens: g[c] += Σ_{t<n} x[t·ldx + i]·x[t·ldx + c] for
 * c in [i, d) (g is row i), in double, each element's sum in token order and every product rounded
 * before it is added (no fused multiply-add): the same bits on every set (calibrate's Hessians). */
typedef void rt_gram_row_fn(double *g, const float *x, size_t ldx, int n, int i, int d);
/* The sum of p[0..n) (n a multiple of 256) as 64-bit words, integers, so any bytes do (the
 * probe's reads, runtime/probe.h); prefetch: software prefetches ahead of the reads. */
typedef uint64_t rt_sum_words_fn(const uint8_t *p, size_t n, int prefetch);

typedef struct rt_kernels {
    const char *name; /* as LMQ_ISA and reports spell it */
    unsigned needs;   /* the CPU features it runs on: common/cpu.h's LMQ_CPU_ bits */
    rt_gemm_nt_fn *gemm_nt;
    rt_wsum_rows_fn *wsum_rows;
    rt_softmax_unnorm_fn *softmax_unnorm;
    rt_gelu_tanh_fn *gelu_tanh;
    rt_silu_mul_fn *silu_mul;
    rt_row_stats_fn *row_stats;
    rt_kl_row_fn *kl_row;
    rt_gram_row_fn *gram_row;
    rt_sum_words_fn *sum_words;
    const struct rt_linear_kernels *linear; /* rt_linear's, per encoding (runtime/linear_impl.h) */
} rt_kernels;

/* The portable set, the reference every other set's results are held to. */
extern const rt_kernels rt_kernels_scalar;
/* The best kernel set this CPU runs, chosen once a process (LMQ_ISA=scalar|avx2|avx512, that
 * without VNNI, in the environment asks for less). */
const rt_kernels *rt_isa_best(void);
/* Kernel set i (0: scalar) of those up to rt_isa_best()'s, each running where the one before does;
 * NULL past the last: the sets a test can try on this CPU. */
const rt_kernels *rt_isa_nth(int i);

struct rt_weight;
/* Sees the input x [n × W->in] of every linear layer before rt_linear multiplies it (the
 * calibrate stage's statistics); an error it returns stops the forward pass. */
typedef lmq_code (*rt_observe_fn)(void *ctx, const struct rt_weight *W, const float *x, int n, lmq_err *err);

struct rt_backend;
struct rt_kv_format;
/* Where and how kernels run: a pool (NULL = the caller's thread only), a kernel set, and an
 * optional observer of the linear layers' inputs (CPU only); backend: where a state's passes run
 * (runtime/backend.h), NULL for the CPU; kv_k, kv_v: the formats a state's cache keeps keys and
 * values in (runtime/kv.h), NULL for fp32. */
typedef struct {
    lmq_pool *pool;
    const rt_kernels *isa;
    rt_observe_fn observe;
    void *observe_ctx;
    const struct rt_backend *backend;
    const struct rt_kv_format *kv_k, *kv_v;
} rt_exec;

/* Below this many multiply-adds a parallel loop is not worth waking the workers for. */
#define RT_PARALLEL_MIN_WORK 65536

#endif
