/* lmq audit's checks on one artefact, in the library so that the command and the public API
 * (include/lmq.h) run the same ones: the built-in checks, then the caller's policies and
 * expected manifest. */
#ifndef LMQ_AUDIT_AUDIT_H
#define LMQ_AUDIT_AUDIT_H

#include "audit/policy.h"

/* What the caller asks for beyond the built-in checks (all may be empty). */
typedef struct {
    lmq_policy *const *policies;
    int n_policies;
    const char *expect; /* an expected manifest, or a folder of them (audit/diff.h); NULL: none */
} lmq_audit_rules;

/* Each problem with the name of the check that found it, in order: "open" (header, index,
 * manifest checksum: nothing else runs when it fails), "parse" (the manifest), "checksum" (every
 * tensor and the whole file), "manifest" (the built-in base policy), "values", "files"
 * (carried-file names), "tokenizer", "policy" (each of rules' policies), "verification" (the
 * records policies require: verify/record.h), "expect". Rule violations ("policy",
 * "verification", "expect") come with code LMQ_E_RECIPE; an expected manifest that cannot
 * be read otherwise keeps its own code. */
typedef void (*lmq_audit_fn)(void *ctx, const char *check, const char *tensor, lmq_code code, const char *msg);

/* Runs every check on the artefact at path. *n_entries (when not NULL) gets the number of
 * index entries, -1 when the artefact did not open. Returns the number of problems found. */
int lmq_audit_artefact(const char *path, const lmq_audit_rules *rules, lmq_audit_fn fn, void *ctx,
                       int *n_entries);

#endif
