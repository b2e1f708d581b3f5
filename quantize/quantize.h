/* lmq quantize: an artefact and a recipe in, a quantised artefact out, tensor by tensor. */
#ifndef LMQ_QUANTIZE_H
#define LMQ_QUANTIZE_H

#include "common/err.h"

/* Called after each tensor: done of total, and the tensor's name. */
typedef void (*q_progress_fn)(void *ctx, int done, int total, const char *name);

/* Called for a tensor the recipe destroys without an error: msg says what (written anyway). */
typedef void (*q_warn_fn)(void *ctx, const char *tensor, const char *msg);

typedef struct {
    q_progress_fn progress; /* may be NULL */
    void *progress_ctx;
    int threads;            /* <= 0: one per online CPU */
    /* May be NULL. Called when a tensor with weights other than 0 dequantises to all zeros
     * (rel_error 1): its weights all lie below the encoding's smallest step (e.g. subnormal). */
    q_warn_fn warn;
    void *warn_ctx;
} q_opts;

/* Reads in_path (any lmq artefact), applies the recipe at recipe_path and writes out_path
 * atomically. The input stays mapped and uncompressed fp32 is read in place: peak memory is
 * about one tensor in fp32 twice (the weights and their reconstruction) plus its encoding,
 * whatever the model's size. Each tensor is quantised on all threads (opts NULL: one per
 * online CPU). Deterministic: the artefact does not depend on the thread count. */
lmq_code q_quantize_file(const char *in_path, const char *recipe_path, const char *out_path, const q_opts *opts,
                         lmq_err *err);

#endif
