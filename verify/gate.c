#include "verify/gate.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "verify/report.h"

static int le(double v, double x) { return v <= x; }
static int ge(double v, double x) { return v >= x; }
static int lt(double v, double x) { return v < x; }
static int gt(double v, double x) { return v > x; }

/* Two-character operators first, so that "<=" is not read as "<" then "=...". */
static const struct {
    const char *name;
    int (*holds)(double value, double limit);
} ops[] = { { "<=", le }, { ">=", ge }, { "<", lt }, { ">", gt } };
#define N_OPS (int)(sizeof ops / sizeof ops[0])

/* The numeric fields of a report row: the metrics a gate may name. */
static json_t *metric_fields(void)
{
    vf_row blank = { .path = "" };
    vf_report r = { .rows = &blank, .n_rows = 1 };
    return vf_row_json(&r, 0);
}

static lmq_code unknown_metric(const vf_gate *g, const json_t *fields, lmq_err *err)
{
    char list[768] = "";
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)fields, k, v)
        if (json_is_number(v) && n < sizeof list)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", k);
    return lmq_fail(err, LMQ_E_ARG, "gate '%s': unknown metric '%s' (metrics: %s)", g->text, g->metric, list);
}

lmq_code vf_gate_parse(const char *s, vf_gate *g, lmq_err *err)
{
    memset(g, 0, sizeof *g);
    if (strlen(s) >= sizeof g->text)
        return lmq_fail(err, LMQ_E_ARG, "gate '%.40s...': longer than %zu characters", s, sizeof g->text - 1);
    snprintf(g->text, sizeof g->text, "%s", s);
    const char *p = s;
    while (isspace((unsigned char)*p))
        p++;
    size_t n = 0;
    while (isalnum((unsigned char)p[n]) || p[n] == '_')
        n++;
    if (!n || n >= sizeof g->metric)
        return lmq_fail(err, LMQ_E_ARG, "gate '%s': expected METRIC OP LIMIT, e.g. 'kl_mean<=0.01'", s);
    memcpy(g->metric, p, n);
    p += n;
    while (isspace((unsigned char)*p))
        p++;
    g->op = -1;
    for (int i = 0; i < N_OPS && g->op < 0; i++)
        if (!strncmp(p, ops[i].name, strlen(ops[i].name))) {
            g->op = i;
            p += strlen(ops[i].name);
        }
    if (g->op < 0)
        return lmq_fail(err, LMQ_E_ARG, "gate '%s': the operator must be one of <=, >=, <, >", s);
    char *end;
    errno = 0;
    g->limit = strtod(p, &end);
    while (isspace((unsigned char)*end))
        end++;
    if (end == p || *end || errno || !isfinite(g->limit))
        return lmq_fail(err, LMQ_E_ARG, "gate '%s': the limit '%s' is not a finite number", s, p);
    json_t *fields = metric_fields();
    if (!fields)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    lmq_code c = json_is_number(json_object_get(fields, g->metric)) ? LMQ_OK : unknown_metric(g, fields, err);
    json_decref(fields);
    return c;
}

int vf_gate_holds(const vf_gate *g, const json_t *row)
{
    const json_t *v = json_object_get(row, g->metric);
    const double x = json_number_value(v);
    return json_is_number(v) && isfinite(x) && ops[g->op].holds(x, g->limit);
}
