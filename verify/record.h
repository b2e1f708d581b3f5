/* Verification records (lmq verify --record): "<artefact>.verify.json" beside each verified
 * artefact other than the reference, binding one report row (its metrics and gate results) to
 * the artefact's file checksum, the reference's, the text's and the protocol (P1, ctx, windows),
 * so that a policy can require "verified on this text with KL <= x" without running a model.
 *
 * The record carries its own checksum: record_checksum is the XXH3-64 (16 hex digits) of the
 * canonical JSON of the record without that field (compact, keys sorted, reals with 17
 * significant digits, as jansson writes them), so an edited record is refused. */
#ifndef LMQ_VF_RECORD_H
#define LMQ_VF_RECORD_H

#include "common/err.h"
#include "verify/report.h"

#define VR_SUFFIX ".verify.json"
#define VR_VERSION 1

/* The record path of an artefact (artefact_path + VR_SUFFIX); LMQ_E_ARG when it does not fit. */
lmq_code vr_path(const char *artefact_path, char *out, size_t cap, lmq_err *err);

/* Writes rows[i]'s record (i >= 1) beside its artefact, atomically. */
lmq_code vr_write(const vf_report *r, int i, lmq_err *err);

/* What a policy requires of an artefact's record. NAN / NULL: not required. text_checksum is
 * 16 hex digits (the XXH3-64 of the text file, as reports and records write it). */
typedef struct {
    double kl_mean_max, top1_min, dppl_pct_max;
    const char *text_checksum;
} vr_require;

/* Finds the artefact's record, checks the record's own checksum, that it is bound to the
 * artefact's current file checksum (the artefact is checked whole, as audit does), and the
 * requirement. The message names the record file and what failed; the code says which kind:
 * LMQ_E_IO no record (or unreadable), LMQ_E_FORMAT not a record, LMQ_E_CHECKSUM the record's
 * own checksum or the artefact's checksums fail, LMQ_E_RECIPE (a policy failure) the record is
 * stale (the artefact changed since), for another text, or a metric is outside the requirement;
 * LMQ_E_ARG a text_checksum that is not 16 hex digits. */
lmq_code vr_require_check(const char *artefact_path, const vr_require *req, lmq_err *err);

#endif
