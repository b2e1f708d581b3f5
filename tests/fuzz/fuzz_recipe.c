/* Recipes: q_recipe_parse on raw text, then q_recipe_resolve against the canonical names of a
 * small Llama and a small GPT-2 (untied, and tied without output.weight). Checks what the
 * resolver promises: one entry per tensor, a rule's parameters pass q_check, integer and fp8
 * schemes only on matrices; and lmq_glob_match agrees with fnmatch(3), which for the pattern
 * alphabet recipes allow has the same meaning. */
#include <fnmatch.h>

#include "tests/fuzz/fuzz_util.h"
#include "common/glob.h"
#include "quantize/recipe.h"
#include "schemes/scheme.h"

static const q_tensor_ref NAMES[] = {
    { "tok_embd.weight", 2, 64, 0 },         { "pos_embd.weight", 2, 64, 0 },         { "blk.0.attn_norm.weight", 1, 64, 0 },
    { "blk.0.attn_norm.bias", 1, 64, 0 },    { "blk.0.attn_q.weight", 2, 64, 0 },     { "blk.0.attn_k.weight", 2, 64, 0 },
    { "blk.0.attn_v.weight", 2, 64, 0 },     { "blk.0.attn_qkv.weight", 2, 64, 0 },   { "blk.0.attn_qkv.bias", 1, 64, 0 },
    { "blk.0.attn_out.weight", 2, 64, 0 },   { "blk.0.attn_out.bias", 1, 64, 0 },     { "blk.0.ffn_norm.weight", 1, 64, 0 },
    { "blk.0.ffn_norm.bias", 1, 64, 0 },     { "blk.0.ffn_gate.weight", 2, 64, 0 },   { "blk.0.ffn_up.weight", 2, 64, 0 },
    { "blk.0.ffn_up.bias", 1, 64, 0 },       { "blk.0.ffn_down.weight", 2, 64, 0 },   { "blk.0.ffn_down.bias", 1, 64, 0 },
    { "blk.11.attn_q.weight", 2, 64, 0 },    { "blk.11.ffn_down.weight", 2, 64, 0 },  { "blk.11.ffn_norm.weight", 1, 64, 0 },
    { "out_norm.weight", 1, 64, 0 },         { "out_norm.bias", 1, 64, 0 },           { "output.weight", 2, 64, 0 },
};
#define N_NAMES (int)(sizeof NAMES / sizeof NAMES[0])

static void check_globs(const q_pattern *p, int n)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < N_NAMES; k++) {
            int want = fnmatch(p[i].text, NAMES[k].name, 0) == 0;
            FZ_CHECK(lmq_glob_match(p[i].text, NAMES[k].name) == want, "pattern '%s', name '%s': fnmatch says %d",
                     p[i].text, NAMES[k].name, want);
        }
}

/* n_tensors: the first n of NAMES (the tied run leaves out output.weight, the last). */
static void resolve(const q_recipe *r, int n_tensors, int tied)
{
    q_plan plan;
    lmq_err err = { 0 };
    if (q_recipe_resolve(r, NAMES, n_tensors, tied, &plan, &err))
        return;
    FZ_CHECK(plan.n == n_tensors + tied, "%d entries for %d tensors", plan.n, n_tensors);
    for (int i = 0; i < plan.n; i++) {
        const q_plan_entry *e = &plan.entries[i];
        const q_tensor_ref *t = i < n_tensors ? &NAMES[i] : &NAMES[0]; /* tied: tok_embd's shape */
        FZ_CHECK(!strcmp(e->name, i < n_tensors ? t->name : "output.weight"), "entry %d is %s", i, e->name);
        FZ_CHECK(lmq_qparams_check(&e->qp, &err) == LMQ_OK, "%s: %s", e->name, err.msg);
        const lmq_encoding *s = lmq_encoding_of(e->qp.dtype);
        FZ_CHECK(t->ndim >= 2 || (!s->integer && !s->scale_bits), "%s (1-D) gets %s", e->name, s->name);
        FZ_CHECK(!e->keep_reason || e->qp.dtype == LMQ_T_F32, "%s kept but %s", e->name, s->name);
    }
    q_plan_free(&plan);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    q_recipe r;
    lmq_err err = { 0 };
    if (q_recipe_parse((const char *)data, size, "fuzz.yaml", &r, &err))
        return 0;
    check_globs(r.ignore, r.n_ignore);
    for (int i = 0; i < r.n_rules; i++)
        check_globs(r.rules[i].match, r.rules[i].n_match);
    resolve(&r, N_NAMES, 0);
    resolve(&r, N_NAMES - 1, 1);
    q_recipe_free(&r);
    return 0;
}
