/* lmq quantize: an artefact and a recipe in, a quantised artefact out, tensor by tensor. */
#ifndef LMQ_QUANTIZE_H
#define LMQ_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "formats/manifest.h"
#include "quantize/bpw_plan.h"
#include "quantize/recipe.h"

/* Called after each tensor: done of total, and the tensor's name. */
typedef void (*q_progress_fn)(void *ctx, int done, int total, const char *name);

/* What a calibrated run (calibrate/) decided for one tensor before the per-tensor pass. */
typedef struct {
    const float *values;  /* the fp32 values to store or quantise instead of the input's (a transform
                             such as SmoothQuant or AWQ's scales changed them); NULL: the input's */
    const uint8_t *bytes; /* the stored encoding a method chose (GPTQ, AWQ), in the plan's encoding and
                             of its layout's size; NULL: round to nearest */
    lmq_manifest_calib calib;
} q_override;

/* Fills *o for the tensor called name (it is zeroed first: nothing to override). */
typedef lmq_code (*q_override_fn)(void *ctx, const char *name, q_override *o, lmq_err *err);

/* Called for a tensor the recipe destroys without an error: msg says what (written anyway). */
typedef void (*q_warn_fn)(void *ctx, const char *tensor, const char *msg);

typedef struct {
    q_progress_fn progress; /* may be NULL */
    void *progress_ctx;
    int threads;            /* <= 0: one per online CPU */
    q_override_fn override; /* may be NULL */
    void *override_ctx;
    const lmq_manifest *stats; /* the stats file's manifest when statistics were used: its calibration
                                  section goes into the artefact's, with stats_checksum */
    uint64_t stats_checksum;
    /* May be NULL. Called when a tensor with weights other than 0 dequantises to all zeros
     * (rel_error 1): its weights all lie below the encoding's smallest step (e.g. subnormal). */
    q_warn_fn warn;
    void *warn_ctx;
    /* An input with any tensor already quantised (not fp32) is refused unless this is set; then
     * the output's manifest records its lineage (the input's file checksum and summary). */
    int requantize;
    /* target_bpw (quantize/bpw_plan.h): the plan a caller already chose (calibrate/, through the
     * Gram matrices), taken entry by entry; NULL: chosen here, by the weights' squared error. */
    const q_plan *chosen;
    /* Called with the target_bpw choice made here (may be NULL); plan_only: stop there, write nothing. */
    void (*report)(void *ctx, const q_plan *plan, const q_bpw_report *rep);
    void *report_ctx;
    int plan_only;
} q_opts;

/* LMQ_E_ARG, saying why, when the artefact in (opened from in_path) has a tensor already quantised
 * (not fp32) and opts do not allow requantising; q_quantize_file checks this first. */
lmq_code q_input_check(const lmq_container *in, const char *in_path, const q_opts *opts, lmq_err *err);

/* Reads in_path (any lmq artefact), applies the recipe at recipe_path and writes out_path
 * atomically. The input stays mapped and uncompressed fp32 is read in place: peak memory is
 * about one tensor in fp32 twice (the weights and their reconstruction) plus its encoding,
 * whatever the model's size. Each tensor is quantised on all threads (opts NULL: one per
 * online CPU). Deterministic: the artefact does not depend on the thread count. */
lmq_code q_quantize_file(const char *in_path, const char *recipe_path, const char *out_path, const q_opts *opts,
                         lmq_err *err);

/* What `lmq quantize --explain` shows, with nothing written: the recipe and its plan over the
 * input's tensors (made without requiring every pattern to match: count them with
 * q_pattern_count over refs, which include output.weight for a tied model as the plan does). */
typedef struct {
    q_recipe recipe;
    q_plan plan;
    q_tensor_ref *refs; /* refs[i] names plan.entries[i] */
    int n_refs;
    char quantised[LMQ_NAME_MAX]; /* the first input tensor already quantised; "" when none */
} q_explain;

lmq_code q_explain_open(const char *in_path, const char *recipe_path, q_explain *x, lmq_err *err);
void q_explain_free(q_explain *x);

#endif
