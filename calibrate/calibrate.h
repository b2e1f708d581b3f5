/* lmq calibrate: run the fp32 model over calibration text and write the statistics of every
 * linear layer's input (calibrate/stats.h) to a stats file. */
#ifndef LMQ_CALIBRATE_H
#define LMQ_CALIBRATE_H

#include <stdint.h>

#include "common/err.h"

/* Called after each window: done of total windows in pass `pass` (1-based) of `passes`. */
typedef void (*cal_progress_fn)(void *ctx, int pass, int passes, int done, int total);

typedef struct {
    int windows;         /* P1 windows from the start of the text; 0 = 128 (fewer when the text is shorter) */
    int ctx;             /* tokens per window; 0 = 256 */
    int threads;         /* 0 = one per online CPU */
    uint64_t gram_bytes; /* memory for the fp64 Gram matrices of one pass; 0 = 2 GiB. The layers are
                            split into passes over the text that each fit, so memory stays bounded */
    cal_progress_fn progress;
    void *progress_ctx;
} cal_opts;

typedef struct {
    int windows, passes, records;
    uint64_t tokens;
} cal_summary;

/* Writes the statistics of model_path on text_path to out_path (atomically: nothing on failure). */
lmq_code cal_calibrate_file(const char *model_path, const char *text_path, const char *out_path,
                            const cal_opts *opts, cal_summary *sum, lmq_err *err);

#endif
