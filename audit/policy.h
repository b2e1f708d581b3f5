/* Audit policies (manifests/README.md documents every key): a YAML file saying what an artefact
 * must be. Each key is one row of a table in audit/policy.c (its name, how its value is read,
 * the check it runs), so a new key is a new row. The built-in base policy, always applied, is
 * the schema's own consistency check (lmq_manifest_check: the rules every writer obeys too). */
#ifndef LMQ_AUDIT_POLICY_H
#define LMQ_AUDIT_POLICY_H

#include "audit/diff.h"
#include "common/err.h"
#include "formats/container.h"
#include "verify/record.h"

typedef struct lmq_policy lmq_policy;

/* What a policy looks at: the artefact's file name (what lies beside it, such as verification
 * records, is found from it), its manifest (parsed and as JSON) and its index (a copy, in doc). */
typedef struct {
    const char *path;
    const lmq_mdoc *doc;
    uint32_t format_version; /* the container's */
} lmq_audit_subject;

/* Reads the policy at path. Errors (LMQ_E_RECIPE; LMQ_E_IO when a file cannot be read) read
 * "<path>:<line>: <key>: <what is wrong>". A reference named by `tensors_like` is read here,
 * relative to the policy's folder. */
lmq_code lmq_policy_load(const char *path, lmq_policy **out, lmq_err *err);
/* The same over policy text in memory; path names it in messages and anchors tensors_like. */
lmq_code lmq_policy_parse(const char *text, size_t len, const char *path, lmq_policy **out, lmq_err *err);
void lmq_policy_free(lmq_policy *p);

/* Runs every key the policy sets on s. Each problem goes to fn (code LMQ_E_RECIPE) with the
 * tensor (or NULL) and a message "<policy file>: <key>: ..." naming the rule. Returns the count. */
int lmq_policy_check(const lmq_policy *p, const lmq_audit_subject *s, lmq_issue_fn fn, void *ctx);

/* What the policy's `verification` key requires of the artefact's verification record, or NULL
 * when it has none. lmq_policy_check leaves it out: audit runs vr_require_check as a check of
 * its own, whose failures are their own kind (exit 9), not a policy rule's. */
const vr_require *lmq_policy_verification(const lmq_policy *p);

/* The built-in base policy: the manifest against the container's index and version
 * (lmq_manifest_check's rules and messages). Returns the count of problems. */
int lmq_policy_check_base(const lmq_audit_subject *s, lmq_issue_fn fn, void *ctx);

#endif
