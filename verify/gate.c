#include "verify/gate.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static lmq_code unknown_metric(const vf_gate *g, const json_t *fields, lmq_err *err)
{
    char list[768] = "";
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)fields, k, v)
        if ((json_is_number(v) || json_is_null(v)) && n < sizeof list)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", k);
    return lmq_fail(err, LMQ_E_ARG, "gate '%s': unknown metric '%s' (metrics: %s)", g->text, g->metric, list);
}

lmq_code vf_gate_parse_over(const char *s, const json_t *metrics, vf_gate *g, lmq_err *err)
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
    const json_t *m = json_object_get(metrics, g->metric);
    return json_is_number(m) || json_is_null(m) ? LMQ_OK : unknown_metric(g, metrics, err);
}

int vf_gate_holds(const vf_gate *g, const json_t *row)
{
    const json_t *v = json_object_get(row, g->metric);
    const double x = json_number_value(v);
    return json_is_number(v) && isfinite(x) && ops[g->op].holds(x, g->limit);
}
