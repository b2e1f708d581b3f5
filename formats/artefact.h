/* Whole artefacts: a container (formats/container.h, bytes) written and read together with its
 * manifest (formats/manifest.h, schema and YAML). Layering, one way: container <- manifest <-
 * artefact. */
#ifndef LMQ_ARTEFACT_H
#define LMQ_ARTEFACT_H

#include "common/err.h"
#include "formats/container.h"
#include "formats/manifest.h"
#include "formats/model.h"

/* ---- writing ---- */

/* Fills the manifest's totals from the index, checks it against the index
 * (lmq_manifest_check), emits it and commits the file. Always frees w. */
lmq_code lmq_writer_finish(lmq_writer *w, const lmq_manifest *man, lmq_err *err);

/* ---- whole models (fp32 artefacts) ---- */

/* Every tensor as fp32 (gran none), every carried file as a file entry ("file:<name>"); the
 * manifest is built from the model (lmq_manifest_from_model) when man is NULL. */
lmq_code lmq_container_write_model(const char *path, const lmq_model *m, const lmq_manifest *man,
                                   lmq_err *err);
/* The same, asking for zstd on every tensor and file when codec is LMQ_CODEC_ZSTD. */
lmq_code lmq_container_write_model_codec(const char *path, const lmq_model *m, const lmq_manifest *man,
                                         lmq_codec codec, lmq_err *err);
/* Puts the fp32 values of m->tensors[i] into out (its raw_size bytes). */
typedef lmq_code (*lmq_produce_fn)(void *ctx, int i, float *out, lmq_err *err);
/* lmq_container_write_model_codec (manifest from the model) for a model whose tensors are fp32
 * and described only (data NULL): each is produced into one reused buffer, written and
 * summarised before the next, so that memory holds one tensor, not the model. */
lmq_code lmq_container_write_stream(const char *path, const lmq_model *m, lmq_produce_fn produce, void *ctx,
                                    lmq_codec codec, lmq_err *err);

/* ---- reading ---- */

/* Checks a stored tensor's values for its reader (the container has checked its size against
 * its encoding's layout): that its bytes decode to finite numbers (scales, float codes).
 * formats/ does not decode numbers: the runtime passes the scheme table's checker. */
typedef lmq_code (*lmq_check_fn)(const lmq_tensor_entry *t, const void *raw, lmq_err *err);

/* Reads an artefact into out (initialised here), in file order; arch, source and notes come from
 * the manifest. Tensors stay in their encoding as views into the file's mapping, which out keeps
 * (zstd blobs are decoded into buffers out owns); carried files are copied. Without check (NULL)
 * only fp32 tensors are accepted: others are LMQ_E_UNSUPPORTED, naming the tensor. */
lmq_code lmq_container_read_model(const char *path, lmq_check_fn check, lmq_model *out, lmq_err *err);

/* What every reader of an artefact relies on, checked as lmq audit checks it: the manifest against
 * the index (lmq_manifest_check) and the architecture against the tensors stored
 * (lmq_manifest_check_tensors). The first problem, naming the key, field or tensor. */
lmq_code lmq_artefact_check(const lmq_container *c, const lmq_manifest *man, lmq_err *err);

/* Opens path, parses its manifest and checks it (lmq_artefact_check); lmq_manifest_free it; on
 * failure nothing stays open. */
lmq_code lmq_container_open_manifest(lmq_container *c, lmq_manifest *man, const char *path, lmq_err *err);

#endif
