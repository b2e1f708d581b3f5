/* Loading an artefact for the runtime: tensors stay in their stored encodings, as views into
 * the file's mapping (runtime/forward.h reads them through typed weight views). What a load
 * checks instead of dequantising: checksums, each tensor's size against its encoding's layout
 * (the container), and that its scales and float codes are finite (q_validate). */
#ifndef LMQ_RT_ARTEFACT_H
#define LMQ_RT_ARTEFACT_H

#include "common/err.h"
#include "formats/model.h"

/* Reads path (any lmq artefact) into out (initialised here); lmq_model_free releases it. */
lmq_code rt_load_artefact(const char *path, lmq_model *out, lmq_err *err);

#endif
