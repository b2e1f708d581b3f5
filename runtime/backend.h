/* Where forward passes run: one interface every backend implements, in the manner of ggml's
 * ggml_backend_i. The CPU's (runtime/cpu.c) is built in; the CUDA backend is the plugin
 * runtime/cuda/cuda.h describes, opened on first use, whose table carries the same interface; in a
 * build without nvcc asking for it answers "built without CUDA". A state (runtime/forward.h) is a
 * backend's own state behind this interface: the forward pass (runtime/pass.h) on the backend's
 * ops, the KV cache and the activations, in the backend's memory. */
#ifndef LMQ_RT_BACKEND_H
#define LMQ_RT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "runtime/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One call of a pass: n rows, row i token tokens[i] of sequence seqs[i] at position pos[i] (a
 * sequence's rows at consecutive positions, their k and v stored in its cache before any row
 * attends), through blocks [from, to); rows [logits_from, n) get logits (n: none, nor the final
 * norm). tokens NULL: from the residual stream as the state holds it, not the embeddings. The
 * caller (runtime/forward.c) has checked tokens, positions and sequences against the state. */
typedef struct {
    int n;
    const int32_t *tokens, *seqs, *pos;
    int from, to, logits_from;
    float *logits; /* [(n − logits_from) × vocab] */
} rt_call;

typedef struct rt_backend {
    const char *name;  /* "cpu", "cuda": what --device takes */
    const char *label; /* "CPU", "CUDA": how messages name its devices */
    int max_seqs;      /* sequences a state may hold: 1 where sequences are decoded one at a time */
    /* Devices present now: 1 for the CPU; the driver's count for CUDA (0 without one). */
    int (*devices)(void);
    /* Whether it has a linear kernel for W; when not, why (naming the tensor) goes to why. */
    int (*supports)(const rt_weight *W, char *why, size_t size);
    /* Device memory bandwidth, 10^9 bytes/s, with a description of the device in desc and its
     * last-level cache's size in cache_bytes; NULL for the CPU (lmq probe measures it per thread
     * count: runtime/probe.h). */
    lmq_code (*probe)(size_t bytes, int rounds, double *gbps, char *desc, size_t desc_size, size_t *cache_bytes,
                      lmq_err *err);
    /* A state for seqs (1..max_seqs) sequences of max_tokens positions each (1..the model's
     * context) over m, which must stay unchanged while it lives; ex: the host's pool and kernels. */
    lmq_code (*state_create)(const rt_model *m, const rt_exec *ex, int max_tokens, int seqs, void **out,
                             lmq_err *err);
    void (*state_free)(void *st);
    lmq_code (*forward)(void *st, const rt_call *call, lmq_err *err);
    /* The residual stream, [max_tokens × dim] in host memory, or NULL where the backend keeps none
     * there (passes from the stream are then refused: the calibrate stage's). */
    float *(*stream)(void *st);
} rt_backend;

extern const rt_backend rt_cpu_backend;

/* The backend called name (what --device takes): LMQ_E_ARG for a name none has; for cuda,
 * LMQ_E_UNSUPPORTED with why the plugin is not there ("lmq was built without CUDA ..."). */
lmq_code rt_backend_get(const char *name, const rt_backend **out, lmq_err *err);
/* The same, when a forward pass can run there now (LMQ_E_UNSUPPORTED "--device cuda: no CUDA
 * device" otherwise). */
lmq_code rt_backend_ready(const char *name, const rt_backend **out, lmq_err *err);

#ifdef __cplusplus
}
#endif

#endif
