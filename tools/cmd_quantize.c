/* lmq quantize: an artefact and a recipe in, a quantised artefact out. */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "calibrate/methods.h"
#include "common/clock.h"
#include "common/file.h"
#include "common/pool.h"
#include "quantize/quantize.h"
#include "schemes/scheme.h"
#include "tools/args.h"
#include "tools/cmd.h"
#include "tools/progress.h"

static const char usage[] =
    "usage: lmq quantize IN.lmq --recipe R.yaml -o OUT.lmq [--stats STATS.lmq [--calib-text FILE]]\n"
    "                    [--threads N] [--requantize]\n"
    "       lmq quantize IN.lmq --recipe R.yaml --explain [--stats STATS.lmq]\n"
    "Applies the recipe (recipes/README.md) tensor by tensor and writes OUT.lmq atomically, with a\n"
    "manifest of what was done to each tensor. Recipes with calibrated methods (imatrix, gptq,\n"
    "awq) or smoothquant need the statistics `lmq calibrate` took on IN.lmq (--stats; recipes that\n"
    "round to nearest leave them unused). GPTQ runs the calibration windows again block by block, from the\n"
    "text the statistics name or --calib-text (the same text, elsewhere: its checksum is checked).\n"
    "Each tensor is quantised on N threads (default 0: one per CPU); the bytes do not depend on N.\n"
    "An input already quantised is refused unless --requantize is given; OUT's manifest then records\n"
    "its lineage (the input's file checksum, recipe, schemes, bits per weight).\n"
    "--explain writes nothing: it prints each pattern (a Hugging Face module name with the canonical\n"
    "name it stands for) and how many tensors it matches, then each tensor's scheme and the rule or\n"
    "ignore pattern (recipe file:line) that decided it; exit 1 when a pattern matches no tensor.\n"
    "With target_bpw it then chooses the encodings and prints each chosen tensor's scheme and estimated\n"
    "error and the bits per weight reached (the relative output error through --stats' Gram matrices,\n"
    "else the weights' relative squared error, times the tensor's weights).\n"
    "A recipe as llm-compressor writes it (quant_stage: quant_modifiers: GPTQModifier: ...) is read as\n"
    "it is and translated into lmq's rules; --explain prints first what each part of it became.\n";

/* --explain: the patterns, then the plan, tensor by tensor. */
static void print_pattern(const q_explain *x, const q_pattern *p, const char *key, int *unmatched)
{
    int n = q_pattern_count(p, x->refs, x->n_refs);
    char hf[2 * LMQ_NAME_MAX];
    const char *hint = n ? NULL : q_pattern_hf_hint(p, x->refs, x->n_refs, hf, sizeof hf);
    printf("  %s:%d %s '%s'", x->recipe.path, p->line, key, p->text);
    if (p->canon)
        printf(" -> %s (Hugging Face name)", p->canon);
    if (n)
        printf(": %d tensor%s\n", n, n == 1 ? "" : "s");
    else if (hint)
        printf(": MATCHES NO TENSOR; it matches the Hugging Face name %s, which lmq calls %s (HF names may have "
               "wildcards in the layer index only)\n", hf, hint);
    else
        printf(": MATCHES NO TENSOR%s\n", p->canon ? "" : " (canonical names: recipes/README.md)");
    *unmatched += !n;
}

/* target_bpw's choice: each free tensor (--explain), then the bits per weight reached. */
typedef struct {
    int detail;
    const char *recipe;
    const char *estimate;
} report_ctx;

static void on_report(void *ctx, const q_plan *plan, const q_bpw_report *rep)
{
    const report_ctx *rc = ctx;
    for (int i = 0; rc->detail && i < rep->n; i++) {
        const q_plan_entry *e = &plan->entries[rep->choices[i].entry];
        char scheme[LMQ_SCHEME_MAX];
        printf("  %-24s %-10s estimated error %-12.6g (of %d options)\n", e->name, q_describe(&e->qp, scheme, sizeof scheme),
               rep->choices[i].err, rep->choices[i].n_options);
    }
    printf("target_bpw %g (%s): %.4f bits per weight reached, summed estimated error %.6g (%s)\n", rep->target,
           rc->recipe, rep->reached, rep->err, rc->estimate);
}

static const char EST_GRAM[] = "relative output error on the calibration inputs × weights",
                  EST_MSE[] = "relative squared error of the weights × weights";

static int explain(const char *in, const char *recipe, const char *stats, int threads)
{
    q_explain x;
    lmq_err err;
    if (q_explain_open(in, recipe, &x, &err)) {
        fprintf(stderr, "lmq quantize: %s\n", err.msg);
        return 1;
    }
    const q_recipe *r = &x.recipe;
    int unmatched = 0;
    char key[48];
    printf("recipe %s (%s), %d rule%s\n", r->path, r->name, r->n_rules, r->n_rules == 1 ? "" : "s");
    if (r->translation) /* an llm-compressor recipe: what each of its parts became */
        printf("translated from llm-compressor:\n%s", r->translation);
    printf("patterns:\n");
    for (int k = 0; k < r->n_rules; k++)
        for (int i = 0; i < r->rules[k].n_match; i++) {
            snprintf(key, sizeof key, "rules[%d].match", k);
            print_pattern(&x, &r->rules[k].match[i], key, &unmatched);
        }
    for (int i = 0; i < r->n_ignore; i++)
        print_pattern(&x, &r->ignore[i], "ignore", &unmatched);
    printf("tensors of %s:\n", in);
    for (int i = 0; i < x.plan.n; i++) {
        const q_plan_entry *e = &x.plan.entries[i];
        char scheme[LMQ_SCHEME_MAX], why[LMQ_REASON_MAX + 64];
        q_describe(&e->qp, scheme, sizeof scheme);
        char act[32];
        lmq_act_describe(e->act, e->qp.dtype, act, sizeof act);
        if (*act)
            snprintf(scheme + strlen(scheme), sizeof scheme - strlen(scheme), ", %s", act);
        if (!e->keep_reason)
            snprintf(why, sizeof why, "rule at %s:%d%s%s%s%s%s", r->path, e->rule_line,
                     e->method.method ? ", method " : "", e->method.method ? lmq_method_names[e->method.method] : "",
                     e->fell_back ? ", fallback: " : "", e->fell_back ? lmq_encoding_of(e->asked)->name : "",
                     e->fell_back ? "'s blocks do not divide a row" : "");
        else if (e->rule_line)
            snprintf(why, sizeof why, "%s (%s:%d)", e->keep_reason, r->path, e->rule_line);
        else
            snprintf(why, sizeof why, "%s", e->keep_reason);
        printf("  %-24s %-28s %s%s\n", e->name, scheme, why,
               e->derived_from_tied ? " [classifier use of the tied tok_embd.weight]" : "");
    }
    if (x.quantised[0])
        printf("note: %s is already quantised (tensor %s): quantize needs --requantize\n", in, x.quantised);
    const int target = r->target_bpw > 0;
    q_explain_free(&x);
    if (target && !unmatched) {
        report_ctx rc = { 1, recipe, stats ? EST_GRAM : EST_MSE };
        q_opts qo = { .threads = threads, .report = on_report, .report_ctx = &rc, .plan_only = 1 };
        cal_quantize_opts co = { .q = qo };
        printf("target_bpw's choice for the linear layers of blocks:\n");
        fflush(stdout);
        if (stats ? cal_quantize_file(in, recipe, stats, NULL, &co, &err) : q_quantize_file(in, recipe, NULL, &qo, &err)) {
            fprintf(stderr, "lmq quantize: %s\n", err.msg);
            return 1;
        }
    }
    if (unmatched) {
        fprintf(stderr, "lmq quantize: %d pattern%s match%s no tensor: quantize refuses this recipe for %s\n",
                unmatched, unmatched == 1 ? "" : "s", unmatched == 1 ? "es" : "", in);
        return 1;
    }
    return 0;
}

static void on_progress(void *ctx, int done, int total, const char *name)
{
    progress_show(ctx, done, total, name);
}

static void on_stage(void *ctx, const char *stage, int done, int total)
{
    progress_show(ctx, done, total, stage);
}

/* Warnings go to stderr, under the progress line (cleared first when it is shown). */
static void on_warn(void *ctx, const char *tensor, const char *msg)
{
    progress_end(ctx);
    fprintf(stderr, "lmq quantize: warning: tensor %s: %s\n", tensor, msg);
}

int cmd_quantize(int argc, char **argv)
{
    const char *out = NULL, *recipe = NULL, *stats = NULL, *calib_text = NULL, *threads_s = "0", *in[1];
    int n, requantize = 0, explain_only = 0;
    const arg_opt opts[] = { { "--output", "-o", &out, NULL },       { "--recipe", "-r", &recipe, NULL },
                             { "--stats", NULL, &stats, NULL },       { "--calib-text", NULL, &calib_text, NULL },
                             { "--threads", NULL, &threads_s, NULL }, { "--requantize", NULL, NULL, &requantize },
                             { "--explain", NULL, NULL, &explain_only }, { 0 } };
    int rc = args_parse(argc, argv, opts, in, 1, &n, usage);
    if (rc >= 0)
        return rc;
    long threads;
    if (!args_int("quantize", "--threads", threads_s, 0, LMQ_POOL_MAX_THREADS, &threads))
        return 2;
    if (explain_only && n == 1 && recipe && !out && !calib_text)
        return explain(in[0], recipe, stats, (int)threads);
    if (n != 1 || !out || !recipe || (calib_text && !stats) || explain_only) {
        fprintf(stderr, "lmq quantize: need IN.lmq, --recipe R.yaml and -o OUT.lmq (--calib-text goes with "
                        "--stats; --explain with IN.lmq, --recipe and --stats alone)\n%s", usage);
        return 2;
    }
    lmq_err err;
    const char *inputs[] = { in[0], recipe, stats ? stats : in[0], calib_text ? calib_text : in[0] };
    if (lmq_output_check(out, inputs, 4, &err)) {
        fprintf(stderr, "lmq quantize: %s\n", err.msg);
        return 1;
    }
    progress pr;
    progress_init(&pr, "quantize");
    report_ctx rep = { 0, recipe, stats ? EST_GRAM : EST_MSE };
    q_opts qo = { .progress = on_progress, .progress_ctx = &pr, .threads = (int)threads, .warn = on_warn,
                  .warn_ctx = &pr, .requantize = requantize, .report = on_report, .report_ctx = &rep };
    cal_quantize_opts co = { .q = qo, .calib_text = calib_text, .progress = on_stage, .progress_ctx = &pr };
    const double t0 = lmq_now();
    lmq_code c = stats ? cal_quantize_file(in[0], recipe, stats, out, &co, &err)
                       : q_quantize_file(in[0], recipe, out, &qo, &err);
    progress_end(&pr);
    if (c) {
        fprintf(stderr, "lmq quantize: %s\n", err.msg);
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("%s: written with %s (%.2f s, peak RSS %.1f MiB)\n", out, recipe,
           lmq_now() - t0, ru.ru_maxrss / 1024.0);
    return 0;
}
