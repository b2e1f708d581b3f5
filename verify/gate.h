/* Verification gates (lmq verify --gate 'kl_mean<=0.01'): a condition "METRIC OP LIMIT" every
 * artefact other than the reference must meet. METRIC is a numeric field of the JSON object the
 * gate is read against and tested on: the report passes its row's (vf_row_json; verify/report.h
 * reads gates with vf_gate_parse), so every number the report shows can be gated and the names
 * are listed in one place; OP is one of <=, >=, <, >. */
#ifndef LMQ_VF_GATE_H
#define LMQ_VF_GATE_H

#include <jansson.h>

#include "common/err.h"

#define VF_MAX_GATES 32 /* one bit each in vf_row.gates_failed */

typedef struct {
    char text[128];  /* as given, for messages and the reports */
    char metric[64];
    int op;          /* index into the operator table */
    double limit;
} vf_gate;

/* Parses s (spaces around the parts allowed); the metrics it may name are the numeric fields
 * of `metrics` (null ones included: a number some rows do not have, as decode_roofline). LMQ_E_ARG, naming the gate, for bad syntax, an operator other than the four, a
 * limit that is not a finite number, or an unknown metric (the message lists the metrics). */
lmq_code vf_gate_parse_over(const char *s, const json_t *metrics, vf_gate *g, lmq_err *err);

/* Whether row (an object with the fields of the metrics g was read over) meets g: a missing,
 * null (unknown) or non-finite value fails it. */
int vf_gate_holds(const vf_gate *g, const json_t *row);

#endif
