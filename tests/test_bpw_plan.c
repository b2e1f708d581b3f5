/* quantize/bpw_plan: the solver against brute force over small random instances (the bound always
 * held; the exact optimum where every step costs the same bits; otherwise within the Lagrangian
 * gap, the largest error range of one item), and the planner over a recipe: the whole-model count,
 * what it may choose, and a target outside the reachable mixes refused at its line. */
#include <math.h>
#include <string.h>

#include "formats/encoding.h"
#include "quantize/bpw_plan.h"
#include "tests/testutil.h"

enum { MAX_ITEMS = 6, MAX_OPTS = 4 };

/* The least Σ err over every choice with Σ bits <= budget (+Inf when none fits). */
static double brute(const q_bpw_option *o, const int *first, int n, double budget)
{
    int pick[MAX_ITEMS] = { 0 };
    double best = INFINITY;
    for (;;) {
        double bits = 0, err = 0;
        for (int i = 0; i < n; i++) {
            bits += o[first[i] + pick[i]].bits;
            err += o[first[i] + pick[i]].err;
        }
        if (bits <= budget && err < best)
            best = err;
        int i = 0;
        while (i < n && ++pick[i] == first[i + 1] - first[i])
            pick[i++] = 0;
        if (i == n)
            return best;
    }
}

static void totals(const q_bpw_option *o, const int *first, const int *choice, int n, double *bits, double *err)
{
    *bits = *err = 0;
    for (int i = 0; i < n; i++) {
        ck_assert_int_ge(choice[i], 0);
        ck_assert_int_lt(choice[i], first[i + 1] - first[i]);
        *bits += o[first[i] + choice[i]].bits;
        *err += o[first[i] + choice[i]].err;
    }
}

/* Random options (bits and errors independent: hulls of any shape, dominated options included). */
START_TEST(random_instances)
{
    uint64_t rs = 26;
    for (int t = 0; t < 3000; t++) {
        q_bpw_option o[MAX_ITEMS * MAX_OPTS];
        int first[MAX_ITEMS + 1] = { 0 }, choice[MAX_ITEMS];
        const int n = 1 + (int)(test_uniform(&rs) * MAX_ITEMS);
        double lo = 0, hi = 0, gap = 0;
        for (int i = 0; i < n; i++) {
            const int k = 1 + (int)(test_uniform(&rs) * MAX_OPTS);
            double a = INFINITY, b = 0, emin = INFINITY, emax = 0;
            for (int j = 0; j < k; j++) {
                o[first[i] + j] = (q_bpw_option){ (double)(1 + (int)(test_uniform(&rs) * 20)), test_uniform(&rs) };
                a = fmin(a, o[first[i] + j].bits);
                b = fmax(b, o[first[i] + j].bits);
                emin = fmin(emin, o[first[i] + j].err);
                emax = fmax(emax, o[first[i] + j].err);
            }
            first[i + 1] = first[i] + k;
            lo += a;
            hi += b;
            gap = fmax(gap, emax - emin);
        }
        const double budget = floor(lo + test_uniform(&rs) * (hi - lo + 1)), opt = brute(o, first, n, budget);
        lmq_err e;
        ck_assert_msg(q_bpw_solve(o, first, n, budget, choice, &e) == LMQ_OK, "%s", e.msg);
        double bits, err;
        totals(o, first, choice, n, &bits, &err);
        ck_assert_msg(bits <= budget, "instance %d: %g bits over the budget %g", t, bits, budget);
        ck_assert_msg(err >= opt - 1e-12 && err <= opt + gap + 1e-12, "instance %d: error %g, optimum %g, gap %g", t,
                      err, opt, gap);
        /* one item: the fill step makes it exact */
        if (n == 1)
            ck_assert_double_eq_tol(err, opt, 1e-12);
    }
}
END_TEST

/* Every step one bit and errors convex in the bits: marginal allocation is optimal, so the
 * solver must find the brute-force optimum exactly, for every whole budget. */
START_TEST(exact_on_equal_steps)
{
    uint64_t rs = 7;
    for (int t = 0; t < 500; t++) {
        q_bpw_option o[MAX_ITEMS * MAX_OPTS];
        int first[MAX_ITEMS + 1] = { 0 }, choice[MAX_ITEMS];
        const int n = 1 + (int)(test_uniform(&rs) * MAX_ITEMS);
        for (int i = 0; i < n; i++) {
            double e = 1 + test_uniform(&rs), drop = 0.5 * test_uniform(&rs) + 0.01;
            for (int j = 0; j < MAX_OPTS; j++) {
                o[first[i] + j] = (q_bpw_option){ 2.0 + j, e };
                e -= drop;
                drop *= 0.3 + 0.6 * test_uniform(&rs); /* falling gains: convex */
            }
            first[i + 1] = first[i] + MAX_OPTS;
        }
        for (int budget = 2 * n; budget <= (2 + MAX_OPTS - 1) * n; budget++) {
            lmq_err e;
            ck_assert_msg(q_bpw_solve(o, first, n, budget, choice, &e) == LMQ_OK, "%s", e.msg);
            double bits, err;
            totals(o, first, choice, n, &bits, &err);
            ck_assert_double_le(bits, budget);
            ck_assert_double_eq_tol(err, brute(o, first, n, budget), 1e-12);
        }
    }
}
END_TEST

START_TEST(over_budget)
{
    const q_bpw_option o[] = { { 4, 1 }, { 8, 0.5 }, { 3, 2 } };
    const int first[] = { 0, 2, 3 };
    int choice[2];
    lmq_err e;
    ck_assert_int_eq(q_bpw_solve(o, first, 2, 6.5, choice, &e), LMQ_E_ARG);
    ck_assert_ptr_nonnull(strstr(e.msg, "the cheapest options take 7 bits, over the budget of 6"));
    ck_assert_int_eq(q_bpw_solve(o, first, 2, 7, choice, &e), LMQ_OK);
    ck_assert_int_eq(choice[0], 0);
    ck_assert_int_eq(choice[1], 0);
}
END_TEST

/* ---- the planner over a recipe ---- */

/* A fake estimate: error falls with the bits per weight, faster for the tensor named "*ffn_down*",
 * so that at a budget it gets more. Counts the calls. */
typedef struct {
    const q_plan *plan;
    int calls;
} fake;

static lmq_code fake_error(void *ctx, int entry, const lmq_qparams *qp, const q_method *m, double *out, lmq_err *err)
{
    (void)err;
    fake *f = ctx;
    f->calls++;
    ck_assert_int_eq(m->method, LMQ_METHOD_RTN);
    const double bpw = lmq_encoding_of(qp->dtype)->block
                           ? 8.0 * lmq_encoding_of(qp->dtype)->block_bytes / lmq_encoding_of(qp->dtype)->block : 16;
    *out = exp2(-bpw) * (strstr(f->plan->entries[entry].name, "ffn_down") ? 100 : 1);
    return LMQ_OK;
}

START_TEST(assign)
{
    /* A tied model: tok_embd [64, 256] (and its classifier use), two blocks each a norm [256],
     * attn_q [256, 256] and ffn_down [256, 96] (96: no 256-block divides it, q8_0's 32 do). */
    static const char *const names[] = { "tok_embd.weight", "blk.0.attn_norm.weight", "blk.0.attn_q.weight",
                                         "blk.0.ffn_down.weight", "blk.1.attn_norm.weight", "blk.1.attn_q.weight",
                                         "blk.1.ffn_down.weight" };
    static const int64_t rows[] = { 64, 1, 256, 256, 1, 256, 256, 64 }, cols[] = { 256, 256, 256, 96, 256, 256, 96, 256 };
    q_tensor_ref refs[7];
    for (int i = 0; i < 7; i++)
        refs[i] = (q_tensor_ref){ names[i], rows[i] > 1 ? 2 : 1, cols[i], 0 };
    const char *text = "name: t\ntarget_bpw: %s\ncandidates: [q4_k, q6_k, q8_0]\nrules:\n"
                       "  - match: [tok_embd.weight, output.weight]\n    scheme: q8_0\n"
                       "  - match: \"blk.*\"\n    scheme: q4_k\n    fallback: [q5_0, fp16]\n";
    /* bits: embedding 64·256 q8_0 once (tied, one encoding) = 139264; norms 2·256·32 = 16384;
     * attn_q 65536 weights each; ffn_down 24576 each (q8_0 8.5 or the rule's q5_0 5.5 bpw). */
    const double params = 64 * 256 + 2 * 256 + 2 * 65536 + 2 * 24576, fixed = 139264 + 16384;
    struct {
        const char *target;
        lmq_code rc;
        const char *msg;
    } cases[] = {
        { "4", LMQ_E_RECIPE, "t.yaml:2: target_bpw: 4 is below the cheapest mix" },
        { "9", LMQ_E_RECIPE, "t.yaml:2: target_bpw: 9 is above the dearest mix" },
        { "6", LMQ_OK, NULL },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char buf[512];
        snprintf(buf, sizeof buf, text, cases[k].target);
        q_recipe r;
        q_plan plan;
        lmq_err e;
        ck_assert_msg(q_recipe_parse(buf, strlen(buf), "t.yaml", &r, &e) == LMQ_OK, "%s", e.msg);
        ck_assert_msg(q_recipe_resolve(&r, refs, 7, 1, &plan, &e) == LMQ_OK, "%s", e.msg);
        fake f = { &plan, 0 };
        q_bpw_report rep;
        lmq_code c = q_bpw_assign(&r, &plan, rows, cols, fake_error, &f, &rep, &e);
        ck_assert_msg(c == cases[k].rc, "target %s: %d %s", cases[k].target, c, e.msg);
        /* attn_q: q4_k, q6_k, q8_0; ffn_down: q8_0 and the rule's q5_0 */
        ck_assert_int_eq(f.calls, 2 * 3 + 2 * 2);
        if (c) {
            ck_assert_msg(strstr(e.msg, cases[k].msg), "'%s' lacks '%s'", e.msg, cases[k].msg);
        } else {
            ck_assert_int_eq(rep.n, 4);
            uint64_t bits, n;
            ck_assert_int_eq(q_plan_bits(&plan, rows, cols, &bits, &n, &e), LMQ_OK);
            ck_assert_double_eq(n, params);
            ck_assert_double_eq_tol(rep.reached, (double)bits / params, 1e-12);
            ck_assert_double_le(rep.reached, 6);
            /* the budget left after the pinned tensors, against brute force over the four */
            double best = INFINITY, want_bits = 0;
            static const double qb[] = { 4.5, 6.5625, 8.5 }, db[] = { 5.5, 8.5 };
            for (int a = 0; a < 3; a++)
                for (int b = 0; b < 3; b++)
                    for (int c2 = 0; c2 < 2; c2++)
                        for (int d = 0; d < 2; d++) {
                            const double bb = 65536 * (qb[a] + qb[b]) + 24576 * (db[c2] + db[d]);
                            const double er = exp2(-qb[a]) + exp2(-qb[b]) + 100 * (exp2(-db[c2]) + exp2(-db[d]));
                            if (fixed + bb <= 6 * params && er < best) {
                                best = er;
                                want_bits = bb;
                            }
                        }
            ck_assert_double_eq_tol(rep.err, best, 1e-12);
            ck_assert_double_eq_tol((double)bits, fixed + want_bits, 0.5);
            ck_assert_int_eq(plan.entries[3].qp.dtype, LMQ_T_Q8_0); /* ffn_down: the steep one */
            ck_assert_int_eq(plan.entries[3].fell_back, 0);
            q_bpw_report_free(&rep);
        }
        q_plan_free(&plan);
        q_recipe_free(&r);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bpw_plan");
    TCase *tc = tcase_create("solve");
    tcase_add_test(tc, random_instances);
    tcase_add_test(tc, exact_on_equal_steps);
    tcase_add_test(tc, over_budget);
    tcase_add_test(tc, assign);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
