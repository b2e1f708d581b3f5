/* Activation statistics: what the calibrate stage records about the input of every linear layer
 * while the fp32 model runs over calibration text, and the stats file that keeps them.
 *
 * One record per distinct input (calibrate/inputs.h), over every token it saw:
 *   max_abs[j]  max |x_j|            mean_abs[j]  mean |x_j|        mean_sq[j]  mean x_j²
 *   token_max   max_i |x_i| of each token, in the order the tokens ran (the per-token range)
 *   gram        XᵀX, [dim × dim], summed in fp64 in a fixed order (any thread count gives the
 *               same doubles); GPTQ's Hessian is 2·XᵀX, AWQ's output error dWᵀ·XᵀX·dW.
 *
 * The stats file is an lmq container (manifest `kind: stats`) holding, per record, the fp32
 * tensors "stats.blk.<l>.<input>.{max_abs,mean_abs,mean_sq,token_max,gram}" (the Gram matrix
 * rounded to fp32 on disk), checksummed like any artefact; its manifest's calibration section
 * names the model's file checksum, the text's checksum, the windows, ctx and token count. */
#ifndef LMQ_CAL_STATS_H
#define LMQ_CAL_STATS_H

#include <stdint.h>

#include "calibrate/inputs.h"
#include "common/pool.h"
#include "formats/container.h"
#include "formats/manifest.h"
#include "runtime/linear.h"

typedef struct {
    int layer;
    lmq_input which;
    int dim;
    char first[LMQ_NAME_MAX]; /* the reader whose calls are recorded (the others see the same x) */
    int64_t tokens;
    float *max_abs;
    double *sum_abs, *sum_sq;
    double *gram; /* NULL when the collector does not keep it */
    float *token_max;
    int64_t token_cap;
} cal_record;

/* Collects records for the inputs of layers [l0, l1) of m through rt_exec's observer. */
typedef struct {
    cal_record *rec;
    int n;
    lmq_pool *pool; /* the Gram products run on it (may be NULL) */
} cal_collector;

/* gram: also accumulate XᵀX. */
lmq_code cal_collector_init(cal_collector *c, const lmq_model *m, int l0, int l1, int gram, lmq_pool *pool,
                            lmq_err *err);
void cal_collector_free(cal_collector *c);
/* The observer to put in rt_exec (ctx: the collector). */
lmq_code cal_collector_observe(void *ctx, const rt_weight *W, const float *x, int n, lmq_err *err);
/* Bytes of the Gram matrices of input records of layers [l0, l1) of m (what a collector holds). */
uint64_t cal_gram_bytes(const lmq_model *m, int l0, int l1);

/* Writes rec's five tensors to w and their entries to man. */
lmq_code cal_record_write(const cal_record *rec, lmq_writer *w, lmq_manifest *man, lmq_err *err);

/* A stats file opened for reading: records are read one tensor at a time. */
typedef struct {
    lmq_container c;
    lmq_manifest man;
    uint64_t file_checksum;
} cal_stats;

/* Opens path and checks that it is a stats file. */
lmq_code cal_stats_open(cal_stats *s, const char *path, lmq_err *err);
void cal_stats_close(cal_stats *s);
/* One vector of record (layer, which): what is "max_abs", "mean_abs" or "mean_sq"; *out is
 * malloc'd, dim floats, dim checked against want_dim. */
lmq_code cal_stats_vector(const cal_stats *s, int layer, lmq_input which, const char *what, int want_dim,
                          float **out, lmq_err *err);
/* The Gram matrix of record (layer, which) widened to fp64, [dim × dim] malloc'd. */
lmq_code cal_stats_gram(const cal_stats *s, int layer, lmq_input which, int want_dim, double **out,
                        lmq_err *err);

#endif
