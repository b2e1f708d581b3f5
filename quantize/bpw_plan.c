#include "quantize/bpw_plan.h"

#include <stdlib.h>
#include <string.h>

#include "formats/encoding.h"
#include "formats/manifest.h"

/* ---- the solver ---- */

/* One step along an item's lower convex hull: from option a to b, gaining drop for dbits. */
typedef struct {
    int item, to;
    double slope, dbits;
} step;

static int by_slope(const void *pa, const void *pb)
{
    const step *a = pa, *b = pb;
    if (a->slope != b->slope)
        return a->slope > b->slope ? -1 : 1;
    return a->item != b->item ? a->item - b->item : a->to - b->to; /* a fixed order: deterministic */
}

/* The cheapest option of an item (the lower error among equal bits). */
static int cheapest(const q_bpw_option *o, int n)
{
    int best = 0;
    for (int k = 1; k < n; k++)
        if (o[k].bits < o[best].bits || (o[k].bits == o[best].bits && o[k].err < o[best].err))
            best = k;
    return best;
}

lmq_code q_bpw_solve(const q_bpw_option *opts, const int *first, int n, double budget, int *choice, lmq_err *err)
{
    double spent = 0;
    int total = first[n];
    step *s = malloc((size_t)(total ? total : 1) * sizeof *s);
    char *blocked = calloc((size_t)(n ? n : 1), 1);
    if (!s || !blocked) {
        free(s);
        free(blocked);
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    }
    int ns = 0;
    for (int i = 0; i < n; i++) {
        const q_bpw_option *o = opts + first[i];
        const int k = first[i + 1] - first[i];
        int at = choice[i] = cheapest(o, k);
        spent += o[at].bits;
        for (;;) { /* the next hull vertex: the steepest drop per bit (the farthest on a tie) */
            int next = -1;
            double best = 0;
            for (int j = 0; j < k; j++) {
                if (o[j].bits <= o[at].bits || o[j].err >= o[at].err)
                    continue;
                const double slope = (o[at].err - o[j].err) / (o[j].bits - o[at].bits);
                if (next < 0 || slope > best || (slope == best && o[j].bits > o[next].bits)) {
                    next = j;
                    best = slope;
                }
            }
            if (next < 0)
                break;
            s[ns++] = (step){ i, next, best, o[next].bits - o[at].bits };
            at = next;
        }
    }
    lmq_code c = LMQ_OK;
    if (spent > budget) {
        c = lmq_fail(err, LMQ_E_ARG, "the cheapest options take %.0f bits, over the budget of %.0f", spent, budget);
        goto done;
    }
    /* An item's hull slopes fall, so in this order each item's steps come in sequence; one that
     * does not fit ends that item's walk (its later steps start from where it did not go). */
    qsort(s, (size_t)ns, sizeof *s, by_slope);
    for (int k = 0; k < ns; k++) {
        if (blocked[s[k].item])
            continue;
        if (spent + s[k].dbits <= budget) {
            choice[s[k].item] = s[k].to;
            spent += s[k].dbits;
        } else {
            blocked[s[k].item] = 1;
        }
    }
    /* Fill: what is left of the budget buys the single change that lowers the error most. */
    for (;;) {
        int bi = -1, bk = 0;
        double gain = 0;
        for (int i = 0; i < n; i++) {
            const q_bpw_option *o = opts + first[i], *now = &o[choice[i]];
            for (int k = 0; k < first[i + 1] - first[i]; k++) {
                const double g = now->err - o[k].err;
                if (g > gain && spent - now->bits + o[k].bits <= budget) {
                    gain = g;
                    bi = i;
                    bk = k;
                }
            }
        }
        if (bi < 0)
            break;
        spent += opts[first[bi] + bk].bits - opts[first[bi] + choice[bi]].bits;
        choice[bi] = bk;
    }
done:
    free(s);
    free(blocked);
    return c;
}

/* ---- the plan ---- */

lmq_code q_plan_bits(const q_plan *plan, const int64_t *rows, const int64_t *cols, uint64_t *bits, uint64_t *params,
                     lmq_err *err)
{
    *bits = *params = 0;
    const q_plan_entry *lookup = NULL;
    for (int i = 0; i < plan->n; i++)
        if (!strcmp(plan->entries[i].name, "tok_embd.weight"))
            lookup = &plan->entries[i];
    for (int i = 0; i < plan->n; i++) {
        const q_plan_entry *e = &plan->entries[i];
        /* the classifier use of a tied table is a tensor of its own only when its encoding differs */
        if (e->derived_from_tied && lookup && q_plan_entry_same(e, lookup))
            continue;
        lmq_layout L;
        lmq_code c = lmq_layout_of(&e->qp, rows[i], cols[i], &L, err);
        if (c)
            return lmq_err_prefix(err, "tensor %s: ", e->name);
        *bits += L.bits;
        *params += (uint64_t)(rows[i] * cols[i]);
    }
    return LMQ_OK;
}

/* Whether plan entry e is the planner's to choose: a linear layer of a block whose rule gives a
 * GGUF block scheme (its own or, where its blocks do not divide a row, its fallback). */
static int is_free(const q_plan_entry *e)
{
    const unsigned asked = e->fell_back ? e->asked : e->qp.dtype;
    return !e->keep_reason && lmq_encoding_of(asked)->block && lmq_is_linear(e->name, 2) && !e->derived_from_tied;
}

/* The rule at line `line` (every kept entry's rule_line names one). */
static const q_rule *rule_at(const q_recipe *r, int line)
{
    for (int i = 0; i < r->n_rules; i++)
        if (r->rules[i].line == line)
            return &r->rules[i];
    return NULL;
}

void q_bpw_report_free(q_bpw_report *rep)
{
    free(rep->choices);
    memset(rep, 0, sizeof *rep);
}

lmq_code q_bpw_assign(const q_recipe *r, q_plan *plan, const int64_t *rows, const int64_t *cols, q_bpw_error_fn fn,
                      void *ctx, q_bpw_report *rep, lmq_err *err)
{
    memset(rep, 0, sizeof *rep);
    rep->target = r->target_bpw;
    const int per = r->n_candidates + 1; /* the candidates, and the entry as its rule resolved it */
    q_bpw_option *opts = malloc((size_t)(plan->n * per + 1) * sizeof *opts);
    q_plan_entry *alt = malloc((size_t)(plan->n * per + 1) * sizeof *alt);
    int *first = malloc((size_t)(plan->n + 1) * sizeof *first), *choice = malloc((size_t)(plan->n + 1) * sizeof *choice);
    rep->choices = malloc((size_t)(plan->n + 1) * sizeof *rep->choices);
    lmq_code c = opts && alt && first && choice && rep->choices ? LMQ_OK : lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    uint64_t fixed = 0, params = 0;
    int n = 0, k = 0;
    /* The pinned tensors' bits: the plan's total less the free entries as their rules resolved them. */
    if (!c && !(c = q_plan_bits(plan, rows, cols, &fixed, &params, err)))
        first[0] = 0;
    for (int i = 0; i < plan->n && !c; i++) {
        q_plan_entry *e = &plan->entries[i];
        if (!is_free(e))
            continue;
        const q_rule *rule = rule_at(r, e->rule_line);
        lmq_layout L;
        if (!rule) {
            c = lmq_fail(err, LMQ_E_ARG, "%s: tensor %s: no rule at line %d", r->path, e->name, e->rule_line);
            break;
        }
        if ((c = lmq_layout_of(&e->qp, rows[i], cols[i], &L, err)))
            break;
        fixed -= L.bits;
        for (int m = 0; m < per && !c; m++) {
            q_plan_entry a = *e;
            if (m < r->n_candidates) {
                const unsigned d = r->candidates[m];
                if (cols[i] % lmq_encoding_of(d)->block || d == e->qp.dtype)
                    continue; /* its blocks do not divide a row; or it is what the rule gave, tried last */
                a.qp = (lmq_qparams){ .dtype = d, .gran = LMQ_GRAN_NONE };
                a.method = rule->method;
                a.fell_back = 0;
            }
            if ((c = lmq_layout_of(&a.qp, rows[i], cols[i], &L, err)) ||
                (c = fn(ctx, i, &a.qp, &a.method, &opts[k].err, err)))
                break;
            opts[k].bits = (double)L.bits;
            alt[k++] = a;
        }
        rep->choices[n] = (q_bpw_choice){ .entry = i, .n_options = k - first[n] };
        first[++n] = k;
    }
    if (c)
        goto done;
    /* The mixes the options reach, from all cheapest to all dearest. */
    double lo = (double)fixed, hi = (double)fixed;
    for (int i = 0; i < n; i++) {
        double a = opts[first[i]].bits, b = a;
        for (int m = first[i]; m < first[i + 1]; m++) {
            a = opts[m].bits < a ? opts[m].bits : a;
            b = opts[m].bits > b ? opts[m].bits : b;
        }
        lo += a;
        hi += b;
    }
    const double budget = r->target_bpw * (double)params;
    if (!n)
        c = lmq_fail(err, LMQ_E_RECIPE, "%s:%d: target_bpw: no tensor to choose for: no linear layer of a block has a "
                     "rule with a GGUF block scheme", r->path, r->target_line);
    else if (budget < lo)
        c = lmq_fail(err, LMQ_E_RECIPE, "%s:%d: target_bpw: %g is below the cheapest mix the rules and candidates reach "
                     "on this model (%.4f bits per weight)", r->path, r->target_line, r->target_bpw, lo / (double)params);
    else if (budget > hi)
        c = lmq_fail(err, LMQ_E_RECIPE, "%s:%d: target_bpw: %g is above the dearest mix the rules and candidates reach "
                     "on this model (%.4f bits per weight)", r->path, r->target_line, r->target_bpw, hi / (double)params);
    else
        c = q_bpw_solve(opts, first, n, budget - (double)fixed, choice, err);
    if (c)
        goto done;
    double spent = (double)fixed;
    for (int i = 0; i < n; i++) {
        const int m = first[i] + choice[i];
        plan->entries[rep->choices[i].entry] = alt[m];
        rep->choices[i].err = opts[m].err;
        rep->err += opts[m].err;
        spent += opts[m].bits;
    }
    rep->n = n;
    rep->reached = spent / (double)params;
done:
    free(opts);
    free(alt);
    free(first);
    free(choice);
    if (c)
        q_bpw_report_free(rep);
    return c;
}
