/* Loading an artefact for the runtime: tensors stay in their stored encodings, as views into
 * the file's mapping (runtime/model.h reads them through typed weight views). What a load
 * checks instead of dequantising: checksums, each tensor's size against its encoding's layout
 * (the container), and that its scales and float codes are finite (q_validate).
 *
 * The audit checks below run what a loader runs on an open container without building a model:
 * each reports every problem through fn (naming the tensor or carried file) and returns how many
 * it found. A tensor whose checksum fails is left to lmq_container_verify, which names it. */
#ifndef LMQ_RT_ARTEFACT_H
#define LMQ_RT_ARTEFACT_H

#include "common/err.h"
#include "formats/container.h"
#include "formats/manifest.h"
#include "formats/model.h"

/* Reads path (any lmq artefact) into out (initialised here); lmq_model_free releases it. Refuses
 * what audit refuses of what it reads: the manifest and architecture (lmq_container_open_manifest),
 * every value (as rt_audit_values), the carried tokenizer (as rt_audit_tokenizer). */
lmq_code rt_load_artefact(const char *path, lmq_model *out, lmq_err *err);

/* The audit checks below as one error, the first problem found: what a command that reads an
 * open container without loading it (quantize) applies before it writes anything from it. */
lmq_code rt_artefact_check(const lmq_container *c, const lmq_manifest *man, lmq_err *err);

/* Every stored value a loader would use: fp32 weights finite; scales (and zero points) decoded,
 * finite and >= 0; float codes finite. One tensor at a time, its pages released after it, so
 * memory stays about one (zstd-decoded) tensor. */
int rt_audit_values(const lmq_container *c, lmq_issue_fn fn, void *ctx);

/* The carried tokenizer as man->arch names it, parsed the way generate and verify open it
 * (tok_open_model) and checked against the vocabulary size: nothing when the kind is none, or
 * for a stats file (which describes a model's architecture without carrying it). */
int rt_audit_tokenizer(const lmq_container *c, const lmq_manifest *man, lmq_issue_fn fn, void *ctx);

#endif
