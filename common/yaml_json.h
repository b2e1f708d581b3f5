/* One YAML document as JSON (jansson), generically: for printing a manifest or a recipe as JSON
 * without knowing its schema. */
#ifndef LMQ_YAML_JSON_H
#define LMQ_YAML_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "common/err.h"

/* Converts the single YAML document in text (loaded with lmq_yaml_load's limits) to *out
 * (json_decref it). Mappings become objects (scalar keys, a repeated key is an error), sequences
 * arrays. Plain scalars follow YAML 1.2's core schema where JSON can hold the value: null, ~ and
 * empty are null, true/false booleans, decimal integers that fit in 64 bits integers, decimal
 * floats reals; everything else (quoted scalars, .inf, .nan, larger integers) stays a string.
 * An empty document is null. Errors name `name` and the line, with code LMQ_E_FORMAT. */
lmq_code lmq_yaml_to_json(const char *text, size_t len, const char *name, json_t **out, lmq_err *err);

#endif
