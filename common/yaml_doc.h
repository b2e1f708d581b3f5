/* Loading one YAML document (libyaml) from untrusted text: the manifest and recipe parsers. */
#ifndef LMQ_YAML_DOC_H
#define LMQ_YAML_DOC_H

#include <stddef.h>
#include <yaml.h>

#include "common/err.h"

/* Loads the single document of text into doc (delete it with yaml_document_delete). Before
 * libyaml builds a tree, a pass over the events refuses aliases, more than one document and
 * nesting deeper than max_depth: libyaml's scanner is quadratic in the depth, so a few MB of
 * '[' would otherwise take hours.
 * Empty text gives a document without a root node. Errors read "<name>:<line>:<col>: ..." with code `code`. */
lmq_code lmq_yaml_load(const char *text, size_t len, const char *name, int max_depth, lmq_code code,
                       yaml_document_t *doc, lmq_err *err);

#endif
