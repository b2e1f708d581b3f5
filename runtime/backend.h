/* Where linear layers run: one row per backend, each answering by the weight's encoding as the
 * kernels are keyed. The CPU row is runtime/linear.h (every encoding); the CUDA row is
 * the plugin runtime/cuda/cuda.h describes, opened on first use; in a build without nvcc the row
 * answers "built without CUDA". A forward pass runs on the CUDA row when rt_exec.device says so
 * (runtime/forward.h): the plugin uploads every weight once and runs the pass (runtime/pass.h)
 * on its own ops (runtime/cuda/forward.cu). */
#ifndef LMQ_RT_BACKEND_H
#define LMQ_RT_BACKEND_H

#include <stddef.h>

#include "common/err.h"
#include "runtime/cuda/cuda.h"
#include "runtime/linear.h"

typedef struct {
    const char *name; /* "cpu", "cuda": what --device takes */
    int built;        /* compiled into this build */
    /* Devices present now: 1 for the CPU; the driver's count for CUDA (0 without one). */
    int (*devices)(void);
    /* Whether it has a linear kernel for W; when not, why (naming the tensor) goes to why. */
    int (*supports)(const rt_weight *W, char *why, size_t size);
    /* Device memory bandwidth on device 0, 10^9 bytes/s, with a description of the device in
     * desc and its last-level cache's size in cache_bytes; NULL for the CPU (lmq probe measures it per thread count: runtime/probe.h). */
    lmq_code (*probe)(size_t bytes, int rounds, double *gbps, char *desc, size_t desc_size, size_t *cache_bytes,
                      lmq_err *err);
    rt_device device; /* what rt_exec.device says to run a forward pass here */
} rt_backend;

extern const rt_backend rt_backends[];
extern const int rt_n_backends;
/* The row called name, or NULL. */
const rt_backend *rt_backend_find(const char *name);
/* The row called name (what --device takes) when a forward pass can run there now: LMQ_E_ARG
 * for a name no row has; LMQ_E_UNSUPPORTED "--device cuda: no CUDA device", or why the plugin
 * is not there ("... built without CUDA ..."). */
lmq_code rt_backend_ready(const char *name, const rt_backend **out, lmq_err *err);


/* The CUDA plugin's table, opened on the first call (thread-safe): from $LMQ_CUDA_PLUGIN when
 * set, else where this build put it, else lib/lmq/ of the installed tree (make install). NULL
 * with why in err when lmq was built without CUDA or the plugin does not load. */
const rtc_api *rt_cuda(lmq_err *err);

#endif
