/* Loading an artefact for the runtime: every tensor decoded to fp32 through the scheme table
 * (simulated quantisation: the behaviour is exactly that of the stored values). Fused
 * low-bit kernels will read the stored bytes instead; rt_weight in runtime/kernels.h is that
 * seam. */
#ifndef LMQ_RT_ARTEFACT_H
#define LMQ_RT_ARTEFACT_H

#include "common/err.h"
#include "formats/model.h"

/* Reads path (any lmq artefact) into out (initialised here). */
lmq_code rt_load_artefact(const char *path, lmq_model *out, lmq_err *err);

#endif
