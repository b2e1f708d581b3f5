/* The semantic comparison of two manifests: the one engine behind `lmq diff` and
 * `lmq audit --expect`. A side is an artefact (its manifest plus the index's checksums) or an
 * expected manifest (YAML as `lmq manifest` prints it). */
#ifndef LMQ_AUDIT_DIFF_H
#define LMQ_AUDIT_DIFF_H

#include <jansson.h>
#include <stdint.h>

#include "common/err.h"
#include "formats/container.h"
#include "formats/manifest.h"

typedef struct {
    json_t *json;          /* the manifest document, generically (common/yaml_json.h) */
    lmq_manifest man;      /* the same parsed, so a side is a valid manifest */
    lmq_tensor_entry *index; /* a copy of the artefact's index; NULL for an expected manifest */
    int n_index;
} lmq_mdoc;

/* An artefact (*.lmq) or an expected manifest (any other file); out is initialised here. Errors
 * name the path: LMQ_E_IO when it cannot be read, LMQ_E_FORMAT (or the container's code) when it
 * is not an artefact or not a manifest. */
lmq_code lmq_mdoc_load(const char *path, lmq_mdoc *out, lmq_err *err);
/* Manifest text (no index); name goes into the messages of the JSON conversion. */
lmq_code lmq_mdoc_parse(const char *text, size_t len, const char *name, lmq_mdoc *out, lmq_err *err);
/* The manifest of an open container (the index is copied). */
lmq_code lmq_mdoc_from_container(const lmq_container *c, lmq_mdoc *out, lmq_err *err);
void lmq_mdoc_free(lmq_mdoc *d);

/* One difference: tensor names the tensor or carried file ("file:<name>"; NULL for the rest),
 * key the key path inside it ("scheme", "stats.rms", "recipe.text", "checksum"), a and b the
 * two values as JSON ("(absent)" when a side lacks the key or the tensor). */
typedef void (*lmq_diff_fn)(void *ctx, const char *tensor, const char *key, const char *a, const char *b);

/* Compares every key of the two manifests but the input paths (source.path, calibration.source:
 * where the inputs lay, their checksums say what they were), tensors and files matched by name.
 * Relative errors and bits per weight are equal within tol (absolute); with tol 0 and an index
 * on both sides, the tensors' byte checksums are compared too. Returns how many differences
 * went to fn (may be NULL). */
int lmq_mdoc_diff(const lmq_mdoc *a, const lmq_mdoc *b, double tol, lmq_diff_fn fn, void *ctx);

/* The expected manifest for an artefact: expect itself when it is a file, else
 * <expect>/<artefact's file name without .lmq>.yaml. */
void lmq_expect_path(const char *expect, const char *artefact, char *out, size_t n);

#endif
