/* quantize/recipe: parser errors (file, line, key), resolution semantics (first match, ignore,
 * 1-D tensors, tied embeddings) and every shipped recipe against both fixture architectures. */
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/file.h"
#include "common/glob.h"
#include "formats/llama2c.h"
#include "quantize/recipe.h"
#include "tests/testutil.h"

/* ---- canonical name lists, written out from formats/model.h's header comment ---- */

typedef struct {
    char names[320][LMQ_NAME_MAX];
    q_tensor_ref refs[320];
    int n;
} names_t;

static void add(names_t *m, int ndim, const char *fmt, ...)
{
    ck_assert_int_lt(m->n, 320);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->names[m->n], LMQ_NAME_MAX, fmt, ap);
    va_end(ap);
    m->refs[m->n] = (q_tensor_ref){ m->names[m->n], ndim, 0, 0 };
    m->n++;
}

static void llama_names(names_t *m, int layers)
{
    m->n = 0;
    add(m, 2, "tok_embd.weight");
    for (int i = 0; i < layers; i++) {
        add(m, 1, "blk.%d.attn_norm.weight", i);
        add(m, 2, "blk.%d.attn_q.weight", i);
        add(m, 2, "blk.%d.attn_k.weight", i);
        add(m, 2, "blk.%d.attn_v.weight", i);
        add(m, 2, "blk.%d.attn_out.weight", i);
        add(m, 1, "blk.%d.ffn_norm.weight", i);
        add(m, 2, "blk.%d.ffn_gate.weight", i);
        add(m, 2, "blk.%d.ffn_up.weight", i);
        add(m, 2, "blk.%d.ffn_down.weight", i);
    }
    add(m, 1, "out_norm.weight");
}

static void gpt2_names(names_t *m, int layers)
{
    static const char *const kinds[] = { "attn_norm", "attn_qkv", "attn_out", "ffn_norm", "ffn_up", "ffn_down" };
    static const int weight_ndim[] = { 1, 2, 2, 1, 2, 2 };
    m->n = 0;
    add(m, 2, "tok_embd.weight");
    add(m, 2, "pos_embd.weight");
    for (int i = 0; i < layers; i++)
        for (int k = 0; k < 6; k++) {
            add(m, weight_ndim[k], "blk.%d.%s.weight", i, kinds[k]);
            add(m, 1, "blk.%d.%s.bias", i, kinds[k]);
        }
    add(m, 1, "out_norm.weight");
    add(m, 1, "out_norm.bias");
}

/* ---- helpers ---- */

static lmq_code parse(const char *text, q_recipe *r, lmq_err *e)
{
    return q_recipe_parse(text, strlen(text), "recipe.yaml", r, e);
}

/* The text must fail to parse with a message holding every given substring (NULL-ended). */
static void parse_fails(const char *text, ...)
{
    q_recipe r;
    lmq_err e = { 0 };
    lmq_code rc = parse(text, &r, &e);
    ck_assert_msg(rc == LMQ_E_RECIPE, "parsed (rc %d) but should not:\n%s", rc, text);
    ck_assert_ptr_null(r.rules);
    va_list ap;
    va_start(ap, text);
    for (const char *s; (s = va_arg(ap, const char *));)
        ck_assert_msg(strstr(e.msg, s), "message '%s' lacks '%s'", e.msg, s);
    va_end(ap);
    q_recipe_free(&r);
}

/* Parses text (which must be valid) and resolves it against m; returns the resolver's code. */
static lmq_code resolve(const char *text, const names_t *m, int tied, q_plan *plan, lmq_err *e)
{
    q_recipe r;
    ck_assert_msg(parse(text, &r, e) == LMQ_OK, "%s", e->msg);
    lmq_code rc = q_recipe_resolve(&r, m->refs, m->n, tied, plan, e);
    q_recipe_free(&r);
    return rc;
}

static const q_plan_entry *entry(const q_plan *p, const char *name)
{
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->entries[i].name, name) == 0)
            return &p->entries[i];
    ck_abort_msg("no plan entry %s", name);
    return NULL;
}

static void expect_qp(const q_plan_entry *e, lmq_dtype dtype, lmq_gran gran, uint32_t group, int asym)
{
    ck_assert_msg(e->keep_reason == NULL, "%s kept: %s", e->name, e->keep_reason);
    ck_assert_int_eq(e->qp.dtype, dtype);
    ck_assert_int_eq(e->qp.gran, gran);
    ck_assert_uint_eq(e->qp.group, group);
    ck_assert_int_eq(e->qp.asym, asym);
}

static void expect_kept(const q_plan_entry *e, const char *reason)
{
    ck_assert_ptr_nonnull(e->keep_reason);
    ck_assert_str_eq(e->keep_reason, reason);
    ck_assert_int_eq(e->qp.dtype, LMQ_T_F32);
    ck_assert_int_eq(e->qp.gran, LMQ_GRAN_NONE);
}

/* ---- parser errors: file, line and key in every message ---- */

START_TEST(err_unknown_keys)
{
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: fp16\nfoo: 1\n", "recipe.yaml:5: foo: unknown key",
                NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: int8\n    granularity: channel\n    sym: true\n",
                "recipe.yaml:6: rules[0].sym: unknown key", "symmetric", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: fp16\n  - match: \"*\"\n    scheem: fp16\n",
                "recipe.yaml:6: rules[1].scheem: unknown key", NULL);
}
END_TEST

START_TEST(err_wrong_types)
{
    parse_fails("name: [a]\nrules:\n  - match: \"*\"\n    scheme: fp16\n", "recipe.yaml:1: name: expected a string, got a list",
                NULL);
    parse_fails("name: x\nrules: int4\n", "recipe.yaml:2: rules: expected a list of rules, got a string", NULL);
    parse_fails("name: x\nrules:\n  - \"*\"\n", "recipe.yaml:3: rules[0]: expected a rule", NULL);
    parse_fails("name: x\nrules:\n  - match: {a: b}\n    scheme: fp16\n",
                "recipe.yaml:3: rules[0].match: expected a pattern or a list of patterns, got a mapping", NULL);
    parse_fails("name: x\nrules:\n  - match:\n      - \"*.weight\"\n      - [a]\n    scheme: fp16\n",
                "recipe.yaml:5: rules[0].match: expected a pattern (string), got a list", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: int8\n    granularity: channel\n    symmetric: yes\n",
                "recipe.yaml:6: rules[0].symmetric: expected true or false, got 'yes'", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: int8\n    granularity: group\n    group: \"128\"\n",
                "recipe.yaml:6: rules[0].group: expected an integer, got '128'", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: int8\n    granularity: group\n    group: 12a\n",
                "recipe.yaml:6: rules[0].group: expected an integer", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: int8\n    granularity: group\n    group: -32\n",
                "recipe.yaml:6: rules[0].group: expected an integer", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: [int8]\n", "recipe.yaml:4: rules[0].scheme: expected a string",
                NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: fp16\nignore: {a: 1}\n",
                "recipe.yaml:5: ignore: expected a pattern or a list of patterns, got a mapping", NULL);
    parse_fails("- name: x\n", "recipe.yaml:1: (top): a recipe is a mapping", NULL);
    parse_fails("name: x\ndescription: \"a\\0b\"\nrules:\n  - match: \"*\"\n    scheme: fp16\n",
                "recipe.yaml:2: description: contains a NUL", NULL);
    parse_fails("? [a]\n: 1\n", "recipe.yaml:1: (top): a key must be a plain name, got a list", NULL);
}
END_TEST

START_TEST(err_bad_values)
{
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: int5\n", "recipe.yaml:4: rules[0].scheme: unknown scheme 'int5'",
                NULL);
    const char *bad_groups[] = { "100", "8", "0", "1", "131072", "4294967296" };
    for (size_t i = 0; i < sizeof bad_groups / sizeof *bad_groups; i++) {
        char text[256];
        snprintf(text, sizeof text, "name: x\nrules:\n  - match: \"*\"\n    scheme: int4\n    granularity: group\n"
                                    "    group: %s\n", bad_groups[i]);
        parse_fails(text, "recipe.yaml:6: rules[0].group: ", NULL);
    }
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: int4\n    granularity: group\n    group: 100\n",
                "not a power of two from 16", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: int4\n    granularity: channel\n    group: 128\n",
                "recipe.yaml:6: rules[0].group: given without granularity: group", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: fp16\n    group: 128\n",
                "recipe.yaml:5: rules[0].group: given without granularity: group", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: fp16\n    symmetric: true\n",
                "recipe.yaml:5: rules[0].symmetric: applies to integer schemes only, not fp16", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: fp8_e4m3\n    symmetric: false\n",
                "recipe.yaml:5: rules[0].symmetric: applies to integer schemes only, not fp8_e4m3", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: fp16\n    granularity: channel\n",
                "recipe.yaml:5: rules[0].granularity: does not apply to fp16", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: bf16\n    granularity: tensor\n",
                "recipe.yaml:5: rules[0].granularity: does not apply to bf16", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: fp8_e5m2\n    granularity: group\n    group: 32\n",
                "recipe.yaml:5: rules[0].granularity: fp8_e5m2 takes granularity channel only", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: int8\n    granularity: row\n",
                "recipe.yaml:5: rules[0].granularity: unknown granularity 'row'", NULL);
    /* none is a granularity of the table, not one a rule names: the scaled ones of the row. */
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: int8\n    granularity: none\n",
                "recipe.yaml:5: rules[0].granularity: unknown granularity 'none' (tensor, channel or group)", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: fp8_e4m3\n    granularity: none\n",
                "recipe.yaml:5: rules[0].granularity: unknown granularity 'none' (tensor, channel or group)", NULL);
    parse_fails("name: Int4 G128\nrules:\n  - match: \"*\"\n    scheme: fp16\n", "recipe.yaml:1: name: 'Int4 G128' is not",
                NULL);
    parse_fails("name: \"\"\nrules:\n  - match: \"*\"\n    scheme: fp16\n", "recipe.yaml:1: name:", NULL);
    parse_fails("name: x\nrules:\n  - match: \"blk.[0-3].*\"\n    scheme: fp16\n",
                "recipe.yaml:3: rules[0].match: pattern 'blk.[0-3].*': character '['", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: fp16\nignore: [\"a\", \"\"]\n",
                "recipe.yaml:5: ignore: empty pattern", NULL);
}
END_TEST

/* method: and smoothquant: keys, their parameters and where they may apply. */
START_TEST(methods)
{
#define RULE "name: x\nrules:\n  - match: \"blk.*\"\n    scheme: int4\n    granularity: group\n    group: 32\n"
    q_recipe r;
    lmq_err e;
    ck_assert_msg(parse(RULE "    method: gptq\n", &r, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(r.rules[0].method.method, LMQ_METHOD_GPTQ);
    ck_assert_double_eq(r.rules[0].method.damp, 0.01);
    ck_assert_uint_eq(r.rules[0].method.block, 128);
    ck_assert_int_eq(r.rules[0].method.act_order, 0);
    ck_assert(q_recipe_needs_stats(&r));
    q_recipe_free(&r);
    ck_assert_msg(parse(RULE "    method: {name: gptq, damp: 0.1, block: 64, act_order: true}\n", &r, &e) == LMQ_OK,
                  "%s", e.msg);
    ck_assert_double_eq(r.rules[0].method.damp, 0.1);
    ck_assert_uint_eq(r.rules[0].method.block, 64);
    ck_assert_int_eq(r.rules[0].method.act_order, 1);
    q_recipe_free(&r);
    ck_assert_msg(parse(RULE "    method: {name: awq, grid: 10, clip: false}\n", &r, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(r.rules[0].method.method, LMQ_METHOD_AWQ);
    ck_assert_uint_eq(r.rules[0].method.grid, 10);
    ck_assert_int_eq(r.rules[0].method.clip, 0);
    q_recipe_free(&r);
    ck_assert_msg(parse(RULE "    method: rtn\n", &r, &e) == LMQ_OK, "%s", e.msg);
    ck_assert(!q_recipe_needs_stats(&r));
    ck_assert(q_recipe_stats_error(&r, &e) == LMQ_E_ARG); /* (never asked for with rtn; still a message) */
    q_recipe_free(&r);
    ck_assert_msg(parse("smoothquant: {alpha: 0.5}\n" RULE, &r, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_double_eq(r.smooth_alpha, 0.5);
    ck_assert(q_recipe_needs_stats(&r));
    q_recipe_free(&r);

    parse_fails(RULE "    method: optq\n", "recipe.yaml:7: rules[0].method: unknown value 'optq' (known: rtn, gptq, awq, imatrix)", NULL);
    parse_fails(RULE "    method: {damp: 0.1}\n", "recipe.yaml:7: rules[0].method: needs a name", NULL);
    parse_fails(RULE "    method: {name: awq, damp: 0.1}\n", "rules[0].method.damp: is a parameter of gptq, not of awq",
                NULL);
    parse_fails(RULE "    method: {name: gptq, damp: -1}\n", "recipe.yaml:7: rules[0].method.damp: -1 is outside", NULL);
    parse_fails(RULE "    method: {name: gptq, damp: nan}\n", "rules[0].method.damp: expected a number", NULL);
    parse_fails(RULE "    method: {name: gptq, block: 0}\n", "rules[0].method.block: 0 is outside", NULL);
    parse_fails(RULE "    method: {name: gptq, act_order: 1}\n", "rules[0].method.act_order: expected true or false",
                NULL);
    parse_fails(RULE "    method: {name: gptq, steps: 3}\n", "rules[0].method.steps: unknown key", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: fp16\n    method: gptq\n",
                "recipe.yaml:5: rules[0].method: gptq chooses integer codes; fp16 is not an integer scheme", NULL);
    parse_fails("smoothquant: {alpha: 1}\n" RULE, "recipe.yaml:1: smoothquant.alpha: 1 is not between 0 and 1", NULL);
    parse_fails("smoothquant: 0.5\n" RULE, "recipe.yaml:1: smoothquant: expected a mapping", NULL);
    parse_fails("smoothquant: {}\n" RULE, "smoothquant.alpha: required key is missing", NULL);

    /* Calibrated methods need a block's linear layer: the classifier has no recorded input. */
    names_t m;
    q_plan plan;
    llama_names(&m, 2);
    ck_assert(resolve("name: x\nrules:\n  - match: \"*.weight\"\n    scheme: int4\n    granularity: channel\n"
                      "    method: awq\n", &m, 1, &plan, &e) == LMQ_E_RECIPE);
    ck_assert_msg(strstr(e.msg, "recipe.yaml:3: awq applies to the linear layers of blocks, not to 'tok_embd.weight'"),
                  "%s", e.msg);
#undef RULE
}
END_TEST

/* A method parameter as the parsed struct holds it. */
static double param_value(const q_method *m, const char *key)
{
    if (!strcmp(key, "damp"))
        return m->damp;
    if (!strcmp(key, "block"))
        return m->block;
    if (!strcmp(key, "act_order"))
        return m->act_order;
    if (!strcmp(key, "grid"))
        return m->grid;
    ck_assert_str_eq(key, "clip");
    return m->clip;
}

/* Every method parameter through one reader: its bounds read and stored exactly (the others keep
 * their defaults), a value just outside refused, a value of another type refused, and the key
 * refused under another method, each message naming file:line:key. */
START_TEST(method_params)
{
#define RULE "name: x\nrules:\n  - match: \"blk.*\"\n    scheme: int4\n    granularity: group\n    group: 32\n"
    static const struct {
        const char *key, *method, *other;
        const char *lo, *hi; /* the bounds as written, read as lo_v and hi_v */
        double lo_v, hi_v;
        const char *below, *above, *range; /* NULL: no number lies outside (a switch) */
        const char *wrong, *wrong_msg;
    } P[] = {
        { "damp", "gptq", "awq", "0.000001", "10", 1e-6, 10, "0", "10.5", "1e-06..10", "[0.1]",
          "expected a number, got a list" },
        { "block", "gptq", "rtn", "1", "65536", 1, 65536, "0", "65537", "1..65536", "1.5",
          "expected an integer, got '1.5'" },
        { "block", "gptq", "awq", "1", "65536", 1, 65536, "0", "100000", "1..65536", "4294967296",
          "expected an integer, got '4294967296'" },
        { "act_order", "gptq", "awq", "false", "TRUE", 0, 1, NULL, NULL, NULL, "1",
          "expected true or false, got '1'" },
        { "grid", "awq", "gptq", "1", "1000", 1, 1000, "0", "1001", "1..1000", "ten",
          "expected an integer, got 'ten'" },
        { "clip", "awq", "rtn", "False", "true", 0, 1, NULL, NULL, NULL, "{on: 1}",
          "expected true or false, got a mapping" },
    };
    static const char *const KEYS[] = { "damp", "block", "act_order", "grid", "clip" };
    static const double DEFAULTS[2][5] = { { 0.01, 128, 0, 0, 0 }, { 0, 0, 0, 20, 1 } }; /* gptq, awq */
    char text[512], want[128];
    for (size_t i = 0; i < sizeof P / sizeof P[0]; i++) {
        const int awq = !strcmp(P[i].method, "awq");
        for (int end = 0; end < 2; end++) {
            q_recipe r;
            lmq_err e;
            snprintf(text, sizeof text, RULE "    method: {name: %s, %s: %s}\n", P[i].method, P[i].key,
                     end ? P[i].hi : P[i].lo);
            ck_assert_msg(parse(text, &r, &e) == LMQ_OK, "%s: %s", text, e.msg);
            ck_assert_double_eq(param_value(&r.rules[0].method, P[i].key), end ? P[i].hi_v : P[i].lo_v);
            for (int k = 0; k < 5; k++)
                if (strcmp(KEYS[k], P[i].key))
                    ck_assert_double_eq(param_value(&r.rules[0].method, KEYS[k]), DEFAULTS[awq][k]);
            q_recipe_free(&r);
        }
        for (int side = 0; side < 2 && P[i].below; side++) {
            const char *x = side ? P[i].above : P[i].below;
            snprintf(text, sizeof text, RULE "    method: {name: %s, %s: %s}\n", P[i].method, P[i].key, x);
            snprintf(want, sizeof want, "recipe.yaml:7: rules[0].method.%s: %s is outside %s", P[i].key, x,
                     P[i].range);
            parse_fails(text, want, NULL);
        }
        snprintf(text, sizeof text, RULE "    method: {name: %s, %s: %s}\n", P[i].method, P[i].key, P[i].wrong);
        snprintf(want, sizeof want, "recipe.yaml:7: rules[0].method.%s: %s", P[i].key, P[i].wrong_msg);
        parse_fails(text, want, NULL);
        snprintf(text, sizeof text, RULE "    method: {name: %s, %s: %s}\n", P[i].other, P[i].key, P[i].lo);
        snprintf(want, sizeof want, "recipe.yaml:7: rules[0].method.%s: is a parameter of %s, not of %s", P[i].key,
                 P[i].method, P[i].other);
        parse_fails(text, want, NULL);
    }
#undef RULE
}
END_TEST

START_TEST(err_missing_and_empty)
{
    parse_fails("name: x\nrules: []\n", "recipe.yaml:2: rules: empty", NULL);
    parse_fails("name: x\ndescription: no rules\n", "recipe.yaml:1: rules: required key is missing", NULL);
    parse_fails("rules:\n  - match: \"*\"\n    scheme: fp16\n", "recipe.yaml:1: name: required key is missing", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n", "recipe.yaml:3: rules[0].scheme: required key is missing", NULL);
    parse_fails("name: x\nrules:\n  - scheme: fp16\n", "recipe.yaml:3: rules[0].match: required key is missing", NULL);
    parse_fails("name: x\nrules:\n  - match: []\n    scheme: fp16\n", "recipe.yaml:3: rules[0].match: empty list", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: int4\n", "recipe.yaml:3: rules[0].granularity: required for int4",
                NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: int4\n    granularity: group\n",
                "recipe.yaml:5: rules[0].group: granularity group needs a group size", NULL);
    parse_fails("", "recipe.yaml:1: (top): empty recipe", NULL);
    parse_fails("# only a comment\n", "recipe.yaml:1: (top): empty recipe", NULL);
}
END_TEST

START_TEST(err_duplicates)
{
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: fp16\nname: y\n",
                "recipe.yaml:5: name: duplicate key (first given at line 1)", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: fp16\n    scheme: bf16\n",
                "recipe.yaml:5: rules[0].scheme: duplicate key (first given at line 4)", NULL);
}
END_TEST

START_TEST(err_malformed_yaml)
{
    /* libyaml's own position (line:column) comes through. */
    parse_fails("name: x\nrules:\n  - match: a: b\n    scheme: fp16\n", "recipe.yaml:3:", "malformed YAML",
                "mapping values are not allowed", NULL);
    parse_fails("name: x\nrules: [\n", "recipe.yaml:3:", "malformed YAML", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: fp16\n---\nname: y\n",
                "recipe.yaml:5:1: a second YAML document", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: fp16\n---\n- : : :\n",
                "recipe.yaml:5:1: a second YAML document", NULL);
    /* Hostile nesting and aliases are refused before libyaml builds a tree. */
    parse_fails("name: x\nrules: [[[[[[[[[[[[[[[[[[[[[[[[\n", "recipe.yaml:2:", "nested deeper than 9 levels", NULL);
    parse_fails("name: &n x\nrules:\n  - match: *n\n    scheme: fp16\n", "recipe.yaml:3:", "aliases are not allowed",
                NULL);
}
END_TEST

/* ---- what a valid recipe holds ---- */

START_TEST(parse_fields_and_defaults)
{
    const char *text = "name: mix-1.0_a\n"
                       "description: a test\n"
                       "rules:\n"
                       "  - match: [\"blk.*.attn_q.weight\", \"blk.*.attn_k.weight\"]\n"
                       "    scheme: int4\n"
                       "    granularity: group\n"
                       "    group: 64\n"
                       "    symmetric: false\n"
                       "  - match: \"blk.*\"\n"
                       "    scheme: fp8_e4m3\n"
                       "  - match:\n"
                       "      - \"*\"\n"
                       "    scheme: int8\n"
                       "    granularity: tensor\n"
                       "ignore: \"blk.0.*\"\n";
    q_recipe r;
    lmq_err e;
    ck_assert_msg(parse(text, &r, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_str_eq(r.name, "mix-1.0_a");
    ck_assert_str_eq(r.description, "a test");
    ck_assert_int_eq(r.n_rules, 3);
    ck_assert_int_eq(r.rules[0].line, 4);
    ck_assert_int_eq(r.rules[0].n_match, 2);
    ck_assert_str_eq(r.rules[0].match[1].text, "blk.*.attn_k.weight");
    ck_assert_int_eq(r.rules[0].match[1].line, 4);
    ck_assert_int_eq(r.rules[0].qp.dtype, LMQ_T_INT4);
    ck_assert_int_eq(r.rules[0].qp.gran, LMQ_GRAN_GROUP);
    ck_assert_uint_eq(r.rules[0].qp.group, 64);
    ck_assert_int_eq(r.rules[0].qp.asym, 1);
    /* fp8: one scale per row by default. */
    ck_assert_int_eq(r.rules[1].qp.dtype, LMQ_T_F8_E4M3);
    ck_assert_int_eq(r.rules[1].qp.gran, LMQ_GRAN_CHANNEL);
    ck_assert_int_eq(r.rules[1].line, 9);
    /* symmetric by default. */
    ck_assert_int_eq(r.rules[2].qp.asym, 0);
    ck_assert_int_eq(r.rules[2].qp.gran, LMQ_GRAN_TENSOR);
    ck_assert_uint_eq(r.rules[2].qp.group, 0);
    ck_assert_int_eq(r.rules[2].match[0].line, 12);
    ck_assert_int_eq(r.n_ignore, 1);
    ck_assert_int_eq(r.ignore[0].line, 15);
    /* The raw text is kept byte for byte, with its checksum. */
    ck_assert_uint_eq(r.text_len, strlen(text));
    ck_assert_str_eq(r.text, text);
    ck_assert_uint_eq(r.checksum, XXH3_64bits(text, strlen(text)));
    q_recipe_free(&r);
    q_recipe_free(&r); /* harmless twice */
}
END_TEST

START_TEST(load_file)
{
    char path[256];
    snprintf(path, sizeof path, "%s/r.yaml", test_tmpdir());
    const char *text = "# comment kept in the text\nname: t\nrules:\n  - match: \"*\"\n    scheme: bf16\n";
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    q_recipe r;
    lmq_err e;
    ck_assert_msg(q_recipe_load(path, &r, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_str_eq(r.text, text);
    ck_assert_str_eq(r.path, path);
    ck_assert_uint_eq(r.checksum, XXH3_64bits(text, strlen(text)));
    ck_assert_int_eq(r.rules[0].line, 4);
    q_recipe_free(&r);

    /* Errors carry the path as given. */
    f = fopen(path, "wb");
    fputs("name: t\nrules:\n  - match: \"*\"\n    scheme: fp17\n", f);
    fclose(f);
    ck_assert_int_eq(q_recipe_load(path, &r, &e), LMQ_E_RECIPE);
    char want[300];
    snprintf(want, sizeof want, "%s:4: rules[0].scheme: unknown scheme 'fp17'", path);
    ck_assert_msg(strncmp(e.msg, want, strlen(want)) == 0, "%s", e.msg);
    ck_assert_ptr_null(r.text);

    ck_assert_int_eq(q_recipe_load("/nonexistent/r.yaml", &r, &e), LMQ_E_IO);
    ck_assert_ptr_nonnull(strstr(e.msg, "/nonexistent/r.yaml"));

    char big[64];
    ck_assert_int_eq(q_recipe_parse(big, (size_t)Q_RECIPE_MAX_BYTES + 1, "big.yaml", &r, &e), LMQ_E_RECIPE);
    ck_assert_ptr_nonnull(strstr(e.msg, "big.yaml"));
}
END_TEST

/* Hostile input: every prefix of a real recipe, and copies with bytes changed, parse or fail
 * cleanly with a message that starts with the file's label. */
START_TEST(hostile_text)
{
    lmq_blob b;
    lmq_err e;
    ck_assert_int_eq(lmq_blob_open("recipes/w4a16.yaml", &b, &e), LMQ_OK);
    char *buf = malloc(b.size);
    ck_assert_ptr_nonnull(buf);
    int ok = 0;
    for (size_t len = 0; len <= b.size; len++) {
        q_recipe r;
        lmq_code rc = q_recipe_parse((const char *)b.data, len, "t.yaml", &r, &e);
        ck_assert(rc == LMQ_OK || (rc == LMQ_E_RECIPE && strncmp(e.msg, "t.yaml:", 7) == 0));
        ok += rc == LMQ_OK;
        q_recipe_free(&r);
    }
    ck_assert_int_gt(ok, 0); /* the whole file, at least */
    static const char junk[] = { '\0', ':', '-', '[', '{', '&', '*', '!', '\t', '\n', '"', '\'', '#', '\xff', '9' };
    uint32_t x = 12345;
    for (int k = 0; k < 3000; k++) {
        memcpy(buf, b.data, b.size);
        for (int j = 0; j < 3; j++) {
            x = x * 1664525u + 1013904223u;
            buf[(x >> 8) % b.size] = junk[(x >> 24) % sizeof junk];
        }
        q_recipe r;
        lmq_code rc = q_recipe_parse(buf, b.size, "t.yaml", &r, &e);
        ck_assert(rc == LMQ_OK || (rc == LMQ_E_RECIPE && strncmp(e.msg, "t.yaml:", 7) == 0));
        q_recipe_free(&r);
    }
    free(buf);
    lmq_blob_close(&b);
}
END_TEST

/* ---- glob and labels ---- */

START_TEST(glob)
{
    ck_assert(lmq_glob_match("*", ""));
    ck_assert(lmq_glob_match("*", "blk.0.attn_q.weight"));
    ck_assert(lmq_glob_match("blk.*.attn_q.weight", "blk.10.attn_q.weight"));
    ck_assert(!lmq_glob_match("blk.?.attn_q.weight", "blk.10.attn_q.weight"));
    ck_assert(lmq_glob_match("blk.??.attn_q.weight", "blk.10.attn_q.weight"));
    ck_assert(lmq_glob_match("*.weight", "tok_embd.weight"));
    ck_assert(!lmq_glob_match("*.weight", "blk.0.attn_qkv.bias"));
    ck_assert(!lmq_glob_match("*.weight", "a.weight.x"));
    ck_assert(lmq_glob_match("a*b*c", "aXbYbZc"));
    ck_assert(lmq_glob_match("a*b*c", "abc"));
    ck_assert(!lmq_glob_match("a*b*c", "aXbYbZ"));
    ck_assert(lmq_glob_match("**x", "abx"));
    ck_assert(!lmq_glob_match("?", ""));
    ck_assert(lmq_glob_match("", ""));
    ck_assert(!lmq_glob_match("", "a"));
    ck_assert(!lmq_glob_match("blk.*.attn_q.weight", "blk.0.attn_qkv.weight"));
    ck_assert(lmq_glob_match("blk.*.ffn_*.weight", "blk.3.ffn_norm.weight")); /* why 1-D pass-over exists */
}
END_TEST


/* ---- resolution ---- */

START_TEST(resolve_unmatched_pattern)
{
    names_t m;
    llama_names(&m, 2);
    q_plan plan;
    lmq_err e;
    const char *text = "name: x\n"
                       "rules:\n"
                       "  - match: \"blk.*.ffn_*.weight\"\n"
                       "    scheme: int8\n"
                       "    granularity: channel\n"
                       "  - match:\n"
                       "      - \"blk.*.attn_qq.weight\"\n"
                       "    scheme: int8\n"
                       "    granularity: channel\n";
    ck_assert_int_eq(resolve(text, &m, 1, &plan, &e), LMQ_E_RECIPE);
    ck_assert_msg(strstr(e.msg, "recipe.yaml:7: pattern 'blk.*.attn_qq.weight' matches no tensor (rules[1].match)"),
                  "%s", e.msg);
    ck_assert_ptr_null(plan.entries);
    ck_assert_int_eq(resolve("name: x\nrules:\n  - match: \"*\"\n    scheme: fp16\nignore:\n  - \"blk.0.*\"\n"
                             "  - \"blk.9.*\"\n",
                             &m, 1, &plan, &e),
                     LMQ_E_RECIPE);
    ck_assert_msg(strstr(e.msg, "recipe.yaml:7: pattern 'blk.9.*' matches no tensor (ignore)"), "%s", e.msg);
    /* A pattern shadowed by an earlier rule still matches tensors: no error. */
    ck_assert_int_eq(resolve("name: x\nrules:\n  - match: \"*\"\n    scheme: fp16\n  - match: \"blk.*\"\n    scheme: bf16\n",
                             &m, 0, &plan, &e),
                     LMQ_OK);
    q_plan_free(&plan);
}
END_TEST

/* An integer rule that can only reach 1-D tensors is an error naming the tensor and the rule. */
START_TEST(resolve_int_on_1d)
{
    names_t m;
    gpt2_names(&m, 2);
    q_plan plan;
    lmq_err e;
    ck_assert_int_eq(resolve("name: x\nrules:\n  - match: \"*\"\n    scheme: fp16\n"
                             "  - match: [\"blk.*.attn_q.weight\", \"*.bias\"]\n    scheme: int8\n    granularity: channel\n",
                             &m, 1, &plan, &e),
                     LMQ_E_RECIPE);
    ck_assert_msg(strstr(e.msg, "recipe.yaml:5: pattern 'blk.*.attn_q.weight' matches no tensor"), "%s", e.msg);
    ck_assert_int_eq(resolve("name: x\nrules:\n  - match: \"*.weight\"\n    scheme: fp16\n"
                             "  - match: [\"blk.*.attn_qkv.weight\", \"*.bias\"]\n    scheme: int8\n"
                             "    granularity: channel\n",
                             &m, 1, &plan, &e),
                     LMQ_E_RECIPE);
    ck_assert_msg(strstr(e.msg, "recipe.yaml:5: pattern '*.bias' gives int8 to 1-D tensor 'blk.0.attn_norm.bias'"),
                  "%s", e.msg);
    ck_assert_msg(strstr(e.msg, "rules[1].match, rule at line 5"), "%s", e.msg);
    ck_assert_int_eq(resolve("name: x\nrules:\n  - match: out_norm.weight\n    scheme: fp8_e4m3\n", &m, 1, &plan, &e),
                     LMQ_E_RECIPE);
    ck_assert_msg(strstr(e.msg, "recipe.yaml:3: pattern 'out_norm.weight' gives fp8_e4m3 to 1-D tensor 'out_norm.weight'"),
                  "%s", e.msg);
    /* Float schemes take 1-D tensors. */
    ck_assert_int_eq(resolve("name: x\nrules:\n  - match: out_norm.weight\n    scheme: bf16\n", &m, 1, &plan, &e), LMQ_OK);
    expect_qp(entry(&plan, "out_norm.weight"), LMQ_T_BF16, LMQ_GRAN_NONE, 0, 0);
    q_plan_free(&plan);
}
END_TEST

/* GGUF's block schemes: the scheme alone (granularity none), to matrices only, round to nearest;
 * anything their blocks fix is refused with the key's line. */
/* Sets every tensor's row width as a Llama of width dim and feed-forward width hidden has them. */
static void llama_widths(names_t *m, int64_t dim, int64_t hidden)
{
    for (int i = 0; i < m->n; i++)
        m->refs[i].cols = strstr(m->names[i], ".ffn_down.") ? hidden : dim;
}

/* layers and fallback: indexes (negative from the end), the named sets, a fallback taken only
 * where the rule's blocks do not divide the row, and the errors. */
START_TEST(layers_and_fallback)
{
    names_t m;
    llama_names(&m, 8);
    llama_widths(&m, 256, 96); /* 96: 32-blocks, not 256 */
    q_plan plan;
    lmq_err e;
    ck_assert_msg(resolve("name: t\nrules:\n"
                          "  - match: \"blk.*.attn_v.weight\"\n    layers: [1, -1]\n    scheme: q8_0\n"
                          "  - match: \"blk.*.attn_v.weight\"\n    layers: more_bits\n    scheme: q6_k\n"
                          "  - match: \"blk.*.ffn_*.weight\"\n    scheme: q4_k\n    fallback: [q2_k, q5_0, fp16]\n",
                          &m, 0, &plan, &e) == LMQ_OK, "%s", e.msg);
    /* more_bits of 8 layers by llama.cpp's use_more_bits: i < 1, i >= 7, (i - 1) % 3 == 2: 0, 3, 6, 7 */
    static const unsigned want_v[8] = { LMQ_T_Q6_K, LMQ_T_Q8_0, LMQ_T_F32, LMQ_T_Q6_K,
                                        LMQ_T_F32, LMQ_T_F32, LMQ_T_Q6_K, LMQ_T_Q8_0 };
    for (int i = 0; i < 8; i++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", i);
        ck_assert_msg(entry(&plan, name)->qp.dtype == want_v[i], "%s: %u", name, entry(&plan, name)->qp.dtype);
        snprintf(name, sizeof name, "blk.%d.ffn_up.weight", i);
        ck_assert_uint_eq(entry(&plan, name)->qp.dtype, LMQ_T_Q4_K);
        ck_assert_int_eq(entry(&plan, name)->fell_back, 0);
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", i); /* 96 wide: q2_k's 256 do not fit, q5_0's 32 do */
        ck_assert_uint_eq(entry(&plan, name)->qp.dtype, LMQ_T_Q5_0);
        ck_assert_int_eq(entry(&plan, name)->fell_back, 1);
        ck_assert_uint_eq(entry(&plan, name)->asked, LMQ_T_Q4_K);
    }
    ck_assert_uint_eq(entry(&plan, "blk.0.attn_q.weight")->qp.dtype, LMQ_T_F32);
    q_plan_free(&plan);
    /* imatrix keeps to a block fallback; a float fallback has no scale to search, so it rounds. */
    static const struct {
        const char *fallback;
        unsigned dtype;
        lmq_method method;
    } imatrix_fallbacks[] = { { "q5_0", LMQ_T_Q5_0, LMQ_METHOD_IMATRIX }, { "fp16", LMQ_T_F16, LMQ_METHOD_RTN } };
    for (int k = 0; k < 2; k++) {
        char text[256];
        snprintf(text, sizeof text, "name: t\nrules:\n  - match: \"blk.*.ffn_*.weight\"\n    scheme: q4_k\n"
                 "    method: imatrix\n    fallback: %s\n", imatrix_fallbacks[k].fallback);
        ck_assert_msg(resolve(text, &m, 0, &plan, &e) == LMQ_OK, "%s", e.msg);
        const q_plan_entry *down = entry(&plan, "blk.0.ffn_down.weight"), *up = entry(&plan, "blk.0.ffn_up.weight");
        ck_assert_uint_eq(down->qp.dtype, imatrix_fallbacks[k].dtype);
        ck_assert_int_eq(down->method.method, imatrix_fallbacks[k].method);
        ck_assert_int_eq(up->method.method, LMQ_METHOD_IMATRIX);
        q_plan_free(&plan);
    }
    parse_fails("name: t\nrules:\n  - match: \"*\"\n    scheme: q4_k\n    layers: [odd]\n", "recipe.yaml:5",
                "rules[0].layers", "'odd' is neither a layer index nor a layer set (more_bits, first_eighth, "
                "first_sixteenth)", NULL);
    parse_fails("name: t\nrules:\n  - match: \"*\"\n    scheme: q4_k\n    layers: []\n", "empty list", NULL);
    parse_fails("name: t\nrules:\n  - match: \"*\"\n    scheme: int4\n    granularity: channel\n    fallback: q4_0\n",
                "rules[0].fallback: applies to GGUF block schemes only, not int4", NULL);
    parse_fails("name: t\nrules:\n  - match: \"*\"\n    scheme: q4_k\n    fallback: int8\n",
                "'int8' is not a GGUF block scheme or fp32, fp16, bf16", NULL);
    parse_fails("name: t\nrules:\n  - match: \"*\"\n    scheme: q4_k\n    fallback: [q4_0, q4_0, q4_0, q4_0, q4_0]\n",
                "gives 5 schemes: 1 to 4", NULL);
}
END_TEST

/* recipes/gguf/: llama-quantize's mixes as llama-quant.cpp chooses them (written out by hand from
 * its llama_tensor_get_type for a 32-layer Llama, no experts, fewer than 4 heads per kv head), on
 * the 7B shape (4096 wide, ffn_down 11008 = 43 · 256), tied, and on stories260K's widths (64, 172),
 * where the 256-blocks fall back as llama.cpp's tensor_type_fallback does. */
START_TEST(gguf_presets)
{
    /* use_more_bits(i, 32): i < 4, i >= 28, or (i - 4) % 3 == 2 */
    const uint32_t MB = 0xFu | 1u << 6 | 1u << 9 | 1u << 12 | 1u << 15 | 1u << 18 | 1u << 21 | 1u << 24 | 1u << 27 |
                        0xFu << 28;
    const struct {
        const char *file;
        unsigned base, v_lo, v_hi, d_lo, d_hi, out, output;
        uint32_t v_mask, d_mask; /* layers of attn_v / ffn_down that take v_hi / d_hi */
    } P[] = {
        { "Q8_0", LMQ_T_Q8_0, LMQ_T_Q8_0, LMQ_T_Q8_0, LMQ_T_Q8_0, LMQ_T_Q8_0, LMQ_T_Q8_0, LMQ_T_Q8_0, 0, 0 },
        { "Q6_K", LMQ_T_Q6_K, LMQ_T_Q6_K, LMQ_T_Q6_K, LMQ_T_Q6_K, LMQ_T_Q6_K, LMQ_T_Q6_K, LMQ_T_Q6_K, 0, 0 },
        { "Q5_K_M", LMQ_T_Q5_K, LMQ_T_Q5_K, LMQ_T_Q6_K, LMQ_T_Q5_K, LMQ_T_Q6_K, LMQ_T_Q5_K, LMQ_T_Q6_K, MB, MB },
        { "Q4_K_M", LMQ_T_Q4_K, LMQ_T_Q4_K, LMQ_T_Q6_K, LMQ_T_Q4_K, LMQ_T_Q6_K, LMQ_T_Q4_K, LMQ_T_Q6_K, MB, MB },
        { "Q4_K_S", LMQ_T_Q4_K, LMQ_T_Q4_K, LMQ_T_Q5_K, LMQ_T_Q4_K, LMQ_T_Q5_K, LMQ_T_Q4_K, LMQ_T_Q6_K, 0xF, 0xF },
        { "Q3_K_M", LMQ_T_Q3_K, LMQ_T_Q4_K, LMQ_T_Q5_K, LMQ_T_Q4_K, LMQ_T_Q5_K, LMQ_T_Q4_K, LMQ_T_Q6_K, 0x3, 0x3 },
        { "Q2_K", LMQ_T_Q2_K, LMQ_T_Q3_K, LMQ_T_Q3_K, LMQ_T_Q3_K, LMQ_T_Q3_K, LMQ_T_Q3_K, LMQ_T_Q6_K, 0, 0 },
    };
    /* 32-block fallbacks of the 256-blocks (llama.cpp): q4_k q5_0, q5_k q5_1, q6_k q8_0, q2_k q3_k q4_0;
     * the classifier Q8_0; and F16 where no 32-block fits (172 columns) */
    const unsigned fb[LMQ_T_COUNT] = { [LMQ_T_Q4_K] = LMQ_T_Q5_0, [LMQ_T_Q5_K] = LMQ_T_Q5_1, [LMQ_T_Q6_K] = LMQ_T_Q8_0,
                                       [LMQ_T_Q3_K] = LMQ_T_Q4_0, [LMQ_T_Q2_K] = LMQ_T_Q4_0, [LMQ_T_Q8_0] = LMQ_T_Q8_0 };
    for (size_t k = 0; k < sizeof P / sizeof P[0]; k++)
        for (int narrow = 0; narrow < 2; narrow++) {
            names_t m;
            llama_names(&m, narrow ? 5 : 32);
            llama_widths(&m, narrow ? 64 : 4096, narrow ? 172 : 11008);
            char path[64];
            snprintf(path, sizeof path, "recipes/gguf/%s.yaml", P[k].file);
            q_recipe r;
            q_plan plan;
            lmq_err e;
            ck_assert_msg(q_recipe_load(path, &r, &e) == LMQ_OK, "%s", e.msg);
            ck_assert_msg(q_recipe_resolve(&r, m.refs, m.n, 1, &plan, &e) == LMQ_OK, "%s: %s", path, e.msg);
            const int n = narrow ? 5 : 32;
            /* stories260K's 5 layers: use_more_bits(i, 5) is i >= 4 or i % 3 == 2: 2, 4 */
            const uint32_t vm = narrow && P[k].v_mask == MB ? 0x14 : P[k].v_mask;
            const uint32_t dm = narrow && P[k].d_mask == MB ? 0x14 : narrow && P[k].d_mask == 0xF ? 0 : P[k].d_mask;
            for (int i = 0; i < n; i++) {
                const struct {
                    const char *kind;
                    unsigned want;
                } T[] = {
                    { "attn_q", P[k].base },
                    { "ffn_up", P[k].base },
                    { "attn_out", P[k].out },
                    { "attn_v", vm >> i & 1 ? P[k].v_hi : P[k].v_lo },
                    { "ffn_down", dm >> i & 1 ? P[k].d_hi : P[k].d_lo },
                };
                for (size_t j = 0; j < sizeof T / sizeof T[0]; j++) {
                    char name[64];
                    snprintf(name, sizeof name, "blk.%d.%s.weight", i, T[j].kind);
                    const unsigned want = !narrow ? T[j].want : !strcmp(T[j].kind, "ffn_down") ? LMQ_T_F16
                                                                                                  : fb[T[j].want];
                    ck_assert_msg(entry(&plan, name)->qp.dtype == want, "%s %s: %s, not %s", path, name,
                                  lmq_encoding_of(entry(&plan, name)->qp.dtype)->name, lmq_encoding_of(want)->name);
                }
            }
            for (int j = 0; j < 2; j++) {
                const char *name = j ? "output.weight" : "tok_embd.weight";
                const unsigned want = narrow ? LMQ_T_Q8_0 : P[k].output;
                ck_assert_msg(entry(&plan, name)->qp.dtype == want, "%s %s", path, name);
            }
            ck_assert_uint_eq(entry(&plan, "blk.0.attn_norm.weight")->qp.dtype, LMQ_T_F32);
            q_plan_free(&plan);
            q_recipe_free(&r);
        }
}
END_TEST

START_TEST(block_schemes)
{
    names_t m;
    llama_names(&m, 2);
    q_plan plan;
    lmq_err e;
    ck_assert_int_eq(resolve("name: x\nrules:\n  - match: \"*\"\n    scheme: q4_k\n  - match: \"*\"\n    scheme: fp32\n",
                             &m, 0, &plan, &e),
                     LMQ_OK);
    expect_qp(entry(&plan, "blk.0.attn_q.weight"), LMQ_T_Q4_K, LMQ_GRAN_NONE, 0, 0);
    expect_qp(entry(&plan, "blk.1.ffn_norm.weight"), LMQ_T_F32, LMQ_GRAN_NONE, 0, 0); /* 1-D: the next rule */
    q_plan_free(&plan);
    static const char *const names[] = { "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k",
                                         "q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs" };
    static const lmq_method methods[] = { LMQ_METHOD_RTN, LMQ_METHOD_IMATRIX, LMQ_METHOD_GPTQ, LMQ_METHOD_AWQ };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        for (size_t k = 0; k < sizeof methods / sizeof methods[0]; k++) {
            char text[160];
            snprintf(text, sizeof text, "name: x\nrules:\n  - match: \"blk.*.weight\"\n    scheme: %s\n    method: %s\n",
                     names[i], lmq_method_names[methods[k]]);
            ck_assert_msg(resolve(text, &m, 0, &plan, &e) == LMQ_OK, "%s", e.msg);
            ck_assert_str_eq(lmq_encoding_of(entry(&plan, "blk.1.ffn_up.weight")->qp.dtype)->name, names[i]);
            ck_assert_int_eq(entry(&plan, "blk.1.ffn_up.weight")->method.method, methods[k]);
            q_plan_free(&plan);
        }
    const char *head = "name: x\nrules:\n  - match: \"*\"\n    scheme: q6_k\n";
    const struct {
        const char *tail, *msg;
    } bad[] = {
        { "    granularity: group\n", "recipe.yaml:5: rules[0].granularity: does not apply to q6_k, a GGUF block "
                                       "encoding: its blocks of 256 weights carry their own scales" },
        { "    group: 32\n", "recipe.yaml:5: rules[0].group: does not apply to q6_k" },
        { "    symmetric: false\n", "recipe.yaml:5: rules[0].symmetric: does not apply to q6_k" },
        { "    method: {name: gptq, act_order: true}\n", "recipe.yaml:5: rules[0].method: act_order does not apply "
                                                         "to q6_k: a block's weights lie along the row" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[200];
        snprintf(text, sizeof text, "%s%s", head, bad[i].tail);
        parse_fails(text, bad[i].msg, NULL);
    }
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: int4\n    granularity: group\n    group: 32\n"
                "    method: imatrix\n", "recipe.yaml:7: rules[0].method: imatrix weights the scale search of GGUF's "
                "block encodings; int4 is not one", NULL);
    parse_fails("name: x\nrules:\n  - match: \"*\"\n    scheme: q7_k\n", "unknown scheme 'q7_k'",
                "GGUF blocks q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, q8_0, q4_0, q2_k, q3_k, iq4_nl, iq4_xs", NULL);
}
END_TEST

/* activations: parsed with the rule, errors with line and key, given only to matrices. */
START_TEST(activations)
{
    const char *head = "name: x\nrules:\n  - match: \"blk.*.attn_*.weight\"\n    scheme: int8\n"
                       "    granularity: channel\n";
    char text[512];
    q_recipe r;
    lmq_err e;
    snprintf(text, sizeof text, "%s    activations: {scheme: int8, granularity: tensor}\n", head);
    ck_assert_msg(parse(text, &r, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(r.rules[0].act.scheme, LMQ_ACT_INT8);
    ck_assert_int_eq(r.rules[0].act.gran, LMQ_ACT_TENSOR);
    q_recipe_free(&r);
    snprintf(text, sizeof text, "%s    activations: {scheme: int4, granularity: token}\n", head);
    parse_fails(text, "recipe.yaml:6: rules[0].activations.scheme: unknown value 'int4' (known: int8, fp8_e4m3)", NULL);
    snprintf(text, sizeof text, "%s    activations: {scheme: int8, granularity: channel}\n", head);
    parse_fails(text, "recipe.yaml:6: rules[0].activations.granularity: unknown value 'channel' (known: token, tensor, "
                "block)", NULL);
    snprintf(text, sizeof text, "%s    activations: {scheme: int8}\n", head);
    parse_fails(text, "recipe.yaml:6: rules[0].activations.granularity: required key is missing", NULL);
    snprintf(text, sizeof text, "%s    activations: {scheme: int8, granularity: token, symmetric: false}\n", head);
    parse_fails(text, "recipe.yaml:6: rules[0].activations.symmetric: unknown key", NULL);
    snprintf(text, sizeof text, "%s    activations: int8\n", head);
    parse_fails(text, "recipe.yaml:6: rules[0].activations: expected a mapping", NULL);

    /* An integer rule passes the norms it matches over: only the matrices get activations. */
    names_t m;
    llama_names(&m, 2);
    q_plan plan;
    snprintf(text, sizeof text, "%s    activations: {scheme: int8, granularity: token}\n", head);
    ck_assert_msg(resolve(text, &m, 1, &plan, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(entry(&plan, "blk.1.attn_k.weight")->act.scheme, LMQ_ACT_INT8);
    ck_assert_int_eq(entry(&plan, "blk.1.attn_norm.weight")->act.scheme, LMQ_ACT_NONE);
    ck_assert_int_eq(entry(&plan, "blk.1.ffn_up.weight")->act.scheme, LMQ_ACT_NONE);
    q_plan_free(&plan);
    /* A float rule would give them to a norm: an error naming the rule's line and the tensor. */
    ck_assert_int_eq(resolve("name: x\nrules:\n  - match: \"blk.*\"\n    scheme: fp16\n"
                             "    activations: {scheme: int8, granularity: token}\n", &m, 1, &plan, &e),
                     LMQ_E_RECIPE);
    ck_assert_msg(strstr(e.msg, "recipe.yaml:3: this rule gives activations to 1-D tensor 'blk.0.attn_norm.weight'"),
                  "%s", e.msg);
    ck_assert_ptr_null(plan.entries);

    /* int8 per block (a8 block): on int4 per group of a multiple of 32 and Q4_0; refused, naming the
     * rule's line and the tensor, on int4 per channel, int4 g16, asymmetric int4, fp16, and with fp8. */
    const char *ok[] = { "scheme: int4\n    granularity: group\n    group: 128\n", "scheme: q4_0\n",
                         "scheme: int8\n    granularity: group\n    group: 32\n", "scheme: q8_0\n" };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        snprintf(text, sizeof text, "name: x\nrules:\n  - match: \"blk.*.attn_*.weight\"\n    %s"
                 "    activations: {scheme: int8, granularity: block}\n", ok[i]);
        ck_assert_msg(resolve(text, &m, 1, &plan, &e) == LMQ_OK, "%s: %s", ok[i], e.msg);
        ck_assert_int_eq(entry(&plan, "blk.1.attn_k.weight")->act.scheme, LMQ_ACT_INT8);
        ck_assert_int_eq(entry(&plan, "blk.1.attn_k.weight")->act.gran, LMQ_ACT_BLOCK);
        q_plan_free(&plan);
    }
    const struct { const char *scheme, *says; } bad[] = {
        { "scheme: int4\n    granularity: channel\n", "not int4 channel" },
        { "scheme: int4\n    granularity: group\n    group: 16\n", "not int4 group 16" },
        { "scheme: int4\n    granularity: group\n    group: 32\n    symmetric: false\n", "not int4 asym group 32" },
        { "scheme: fp16\n", "not fp16 none" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, "name: x\nrules:\n  - match: \"blk.*.attn_q.weight\"\n    %s"
                 "    activations: {scheme: int8, granularity: block}\n", bad[i].scheme);
        ck_assert_int_eq(resolve(text, &m, 1, &plan, &e), LMQ_E_RECIPE);
        ck_assert_msg(strstr(e.msg, "recipe.yaml:3: tensor 'blk.0.attn_q.weight': activations int8 per block") &&
                          strstr(e.msg, bad[i].says), "%s", e.msg);
        ck_assert_ptr_null(plan.entries);
    }
    snprintf(text, sizeof text, "name: x\nrules:\n  - match: \"blk.*.attn_*.weight\"\n    scheme: q4_0\n"
             "    activations: {scheme: fp8_e4m3, granularity: block}\n");
    ck_assert_int_eq(resolve(text, &m, 1, &plan, &e), LMQ_E_RECIPE);
    ck_assert_msg(strstr(e.msg, "only int8 takes granularity block"), "%s", e.msg);
}
END_TEST

/* A wildcard integer rule passes over the 1-D tensors it matches; later rules may take them. */
START_TEST(resolve_1d_pass_over)
{
    names_t m;
    llama_names(&m, 2);
    q_plan plan;
    lmq_err e;
    const char *text = "name: x\nrules:\n  - match: \"*\"\n    scheme: int8\n    granularity: channel\n"
                       "  - match: \"*\"\n    scheme: fp16\n";
    ck_assert_int_eq(resolve(text, &m, 1, &plan, &e), LMQ_OK);
    for (int i = 0; i < plan.n; i++) {
        const q_plan_entry *p = &plan.entries[i];
        int ndim = i < m.n ? m.refs[i].ndim : 2;
        if (ndim == 1) {
            expect_qp(p, LMQ_T_F16, LMQ_GRAN_NONE, 0, 0);
            ck_assert_int_eq(p->rule_line, 6);
        } else {
            expect_qp(p, LMQ_T_INT8, LMQ_GRAN_CHANNEL, 0, 0);
            ck_assert_int_eq(p->rule_line, 3);
        }
    }
    q_plan_free(&plan);

    ck_assert_int_eq(resolve("name: x\nrules:\n  - match: \"blk.*.attn_*.weight\"\n    scheme: int4\n"
                             "    granularity: channel\n",
                             &m, 1, &plan, &e),
                     LMQ_OK);
    expect_qp(entry(&plan, "blk.1.attn_v.weight"), LMQ_T_INT4, LMQ_GRAN_CHANNEL, 0, 0);
    const q_plan_entry *norm = entry(&plan, "blk.1.attn_norm.weight");
    expect_kept(norm, Q_KEEP_ONLY_MATRICES);
    ck_assert_int_eq(norm->rule_line, 3);
    const q_plan_entry *ffn = entry(&plan, "blk.1.ffn_up.weight");
    expect_kept(ffn, Q_KEEP_NO_RULE);
    ck_assert_int_eq(ffn->rule_line, 0);
    q_plan_free(&plan);
}
END_TEST

START_TEST(resolve_first_match)
{
    names_t m;
    llama_names(&m, 3);
    q_plan plan;
    lmq_err e;
    const char *text = "name: x\n"
                       "rules:\n"
                       "  - match: \"blk.1.*\"\n"
                       "    scheme: int8\n"
                       "    granularity: channel\n"
                       "  - match: [\"blk.*.attn_*.weight\", \"blk.*.ffn_*.weight\"]\n"
                       "    scheme: int4\n"
                       "    granularity: group\n"
                       "    group: 32\n"
                       "  - match: \"blk.*.attn_q.weight\"\n" /* shadowed entirely: never wins */
                       "    scheme: int2\n"
                       "    granularity: tensor\n";
    ck_assert_int_eq(resolve(text, &m, 0, &plan, &e), LMQ_OK);
    ck_assert_int_eq(plan.n, m.n);
    for (int i = 0; i < m.n; i++)
        ck_assert_str_eq(plan.entries[i].name, m.names[i]);
    expect_qp(entry(&plan, "blk.1.attn_q.weight"), LMQ_T_INT8, LMQ_GRAN_CHANNEL, 0, 0);
    expect_qp(entry(&plan, "blk.1.ffn_down.weight"), LMQ_T_INT8, LMQ_GRAN_CHANNEL, 0, 0);
    expect_qp(entry(&plan, "blk.0.attn_q.weight"), LMQ_T_INT4, LMQ_GRAN_GROUP, 32, 0);
    expect_qp(entry(&plan, "blk.2.ffn_gate.weight"), LMQ_T_INT4, LMQ_GRAN_GROUP, 32, 0);
    ck_assert_int_eq(entry(&plan, "blk.2.ffn_gate.weight")->rule_line, 6);
    ck_assert_int_eq(entry(&plan, "blk.1.attn_q.weight")->rule_line, 3);
    /* blk.1's norm: rule 1 passes it over (1-D), rule 2 likewise; nothing else matches. */
    expect_kept(entry(&plan, "blk.1.attn_norm.weight"), Q_KEEP_ONLY_MATRICES);
    ck_assert_int_eq(entry(&plan, "blk.1.attn_norm.weight")->rule_line, 3);
    expect_kept(entry(&plan, "tok_embd.weight"), Q_KEEP_NO_RULE);
    for (int i = 0; i < plan.n; i++)
        ck_assert_int_ne(plan.entries[i].qp.dtype, LMQ_T_INT2);
    q_plan_free(&plan);
}
END_TEST

/* Ignore wins over every rule, whatever their order. */
START_TEST(resolve_ignore)
{
    names_t m;
    gpt2_names(&m, 3);
    q_plan plan;
    lmq_err e;
    const char *text = "name: x\nrules:\n  - match: \"*\"\n    scheme: fp16\nignore: [\"blk.0.*\", \"pos_embd.weight\"]\n";
    ck_assert_int_eq(resolve(text, &m, 1, &plan, &e), LMQ_OK);
    int ignored = 0;
    for (int i = 0; i < plan.n; i++) {
        const q_plan_entry *p = &plan.entries[i];
        if (strncmp(p->name, "blk.0.", 6) == 0 || strcmp(p->name, "pos_embd.weight") == 0) {
            expect_kept(p, Q_KEEP_IGNORED);
            ck_assert_int_eq(p->rule_line, 5); /* the ignore list's line */
            ignored++;
        } else {
            expect_qp(p, LMQ_T_F16, LMQ_GRAN_NONE, 0, 0);
            ck_assert_int_eq(p->rule_line, 3);
        }
    }
    ck_assert_int_eq(ignored, 12 + 1);
    q_plan_free(&plan);
}
END_TEST

/* Tied embedding: two uses, two entries, each resolved on its own. */
START_TEST(resolve_tied)
{
    names_t m;
    llama_names(&m, 2);
    q_plan plan;
    lmq_err e;
    const char *split = "name: x\nrules:\n  - match: output.weight\n    scheme: int8\n    granularity: channel\n"
                        "  - match: tok_embd.weight\n    scheme: fp16\n";
    ck_assert_int_eq(resolve(split, &m, 1, &plan, &e), LMQ_OK);
    ck_assert_int_eq(plan.n, m.n + 1);
    for (int i = 0; i < m.n; i++) {
        ck_assert_str_eq(plan.entries[i].name, m.names[i]);
        ck_assert_int_eq(plan.entries[i].derived_from_tied, 0);
    }
    const q_plan_entry *out = &plan.entries[m.n];
    ck_assert_str_eq(out->name, "output.weight");
    ck_assert_int_eq(out->derived_from_tied, 1);
    expect_qp(out, LMQ_T_INT8, LMQ_GRAN_CHANNEL, 0, 0);
    ck_assert_int_eq(out->rule_line, 3);
    expect_qp(entry(&plan, "tok_embd.weight"), LMQ_T_F16, LMQ_GRAN_NONE, 0, 0);
    ck_assert_int_eq(entry(&plan, "tok_embd.weight")->rule_line, 6);
    q_plan_free(&plan);

    /* One rule for the lookup only: the classifier use stays at source precision. */
    ck_assert_int_eq(resolve("name: x\nrules:\n  - match: tok_embd.weight\n    scheme: int8\n    granularity: channel\n",
                             &m, 1, &plan, &e),
                     LMQ_OK);
    expect_qp(entry(&plan, "tok_embd.weight"), LMQ_T_INT8, LMQ_GRAN_CHANNEL, 0, 0);
    expect_kept(entry(&plan, "output.weight"), Q_KEEP_NO_RULE);
    q_plan_free(&plan);

    /* Ignoring one use leaves the other to the rules. */
    ck_assert_int_eq(resolve("name: x\nrules:\n  - match: \"*\"\n    scheme: bf16\nignore: output.weight\n", &m, 1, &plan, &e),
                     LMQ_OK);
    expect_kept(entry(&plan, "output.weight"), Q_KEEP_IGNORED);
    expect_qp(entry(&plan, "tok_embd.weight"), LMQ_T_BF16, LMQ_GRAN_NONE, 0, 0);
    q_plan_free(&plan);

    /* Untied: output.weight is a tensor of its own, no derived entry. */
    add(&m, 2, "output.weight");
    ck_assert_int_eq(resolve(split, &m, 0, &plan, &e), LMQ_OK);
    ck_assert_int_eq(plan.n, m.n);
    ck_assert_int_eq(entry(&plan, "output.weight")->derived_from_tied, 0);
    expect_qp(entry(&plan, "output.weight"), LMQ_T_INT8, LMQ_GRAN_CHANNEL, 0, 0);
    q_plan_free(&plan);
    /* A tied model must not list output.weight, and must have tok_embd.weight. */
    ck_assert_int_eq(resolve(split, &m, 1, &plan, &e), LMQ_E_ARG);
    ck_assert_ptr_nonnull(strstr(e.msg, "output.weight"));
    gpt2_names(&m, 1);
    m.refs[0].name = "wte";
    ck_assert_int_eq(resolve("name: x\nrules:\n  - match: \"*\"\n    scheme: fp16\n", &m, 1, &plan, &e), LMQ_E_ARG);
    ck_assert_ptr_nonnull(strstr(e.msg, "tok_embd.weight"));
    llama_names(&m, 1);
    /* An untied model without output.weight: the pattern matches nothing. */
    ck_assert_int_eq(resolve(split, &m, 0, &plan, &e), LMQ_E_RECIPE);
    ck_assert_msg(strstr(e.msg, "recipe.yaml:3: pattern 'output.weight' matches no tensor"), "%s", e.msg);
}
END_TEST

/* ---- shipped recipes ---- */

typedef enum { C_LINEAR, C_EMB, C_CLS, C_OTHER, C_N } tclass;

/* Independent of the recipes' patterns: what the golden conventions call each tensor. */
static tclass classify(const char *name, int ndim)
{
    size_t n = strlen(name);
    if (strcmp(name, "tok_embd.weight") == 0)
        return C_EMB;
    if (strcmp(name, "output.weight") == 0)
        return C_CLS;
    if (strncmp(name, "blk.", 4) == 0 && n > 7 && strcmp(name + n - 7, ".weight") == 0 && ndim == 2)
        return C_LINEAR;
    return C_OTHER;
}

#define KEEP { LMQ_T_COUNT, 0, 0, 0 }
#define F16 { LMQ_T_F16, LMQ_GRAN_NONE, 0, 0 }
#define BF16 { LMQ_T_BF16, LMQ_GRAN_NONE, 0, 0 }
#define INT(bits, gran, group, asym) { LMQ_T_INT##bits, LMQ_GRAN_##gran, asym, group }
#define LINEAR_ONLY(qp) { qp, KEEP, KEEP, KEEP }
#define A_NONE { LMQ_ACT_NONE, LMQ_ACT_TOKEN }

static const struct {
    const char *file;
    lmq_qparams want[C_N]; /* per class; dtype LMQ_T_COUNT: kept at source precision */
    int quantised_llama5, quantised_gpt2_4; /* entries a rule decided, incl. output.weight */
    lmq_act act;                            /* of the linear layers; every other tensor has none */
    lmq_method method;                      /* of the linear layers' rule */
    int act_order;
} SHIPPED[] = {
    { "fp16", { F16, F16, F16, F16 }, 48, 53, A_NONE, LMQ_METHOD_RTN, 0 },
    { "bf16", { BF16, BF16, BF16, BF16 }, 48, 53, A_NONE, LMQ_METHOD_RTN, 0 },
    { "int8-tensor", LINEAR_ONLY(INT(8, TENSOR, 0, 0)), 35, 16, A_NONE, LMQ_METHOD_RTN, 0 },
    { "int8-channel", LINEAR_ONLY(INT(8, CHANNEL, 0, 0)), 35, 16, A_NONE, LMQ_METHOD_RTN, 0 },
    { "int8-g128", LINEAR_ONLY(INT(8, GROUP, 128, 0)), 35, 16, A_NONE, LMQ_METHOD_RTN, 0 },
    { "int4-channel", LINEAR_ONLY(INT(4, CHANNEL, 0, 0)), 35, 16, A_NONE, LMQ_METHOD_RTN, 0 },
    { "int4-g128", LINEAR_ONLY(INT(4, GROUP, 128, 0)), 35, 16, A_NONE, LMQ_METHOD_RTN, 0 },
    { "int4-g64", LINEAR_ONLY(INT(4, GROUP, 64, 0)), 35, 16, A_NONE, LMQ_METHOD_RTN, 0 },
    { "int4-g32", LINEAR_ONLY(INT(4, GROUP, 32, 0)), 35, 16, A_NONE, LMQ_METHOD_RTN, 0 },
    { "int4-g32-asym", LINEAR_ONLY(INT(4, GROUP, 32, 1)), 35, 16, A_NONE, LMQ_METHOD_RTN, 0 },
    { "int3-g32", LINEAR_ONLY(INT(3, GROUP, 32, 0)), 35, 16, A_NONE, LMQ_METHOD_RTN, 0 },
    { "int2-g32", LINEAR_ONLY(INT(2, GROUP, 32, 0)), 35, 16, A_NONE, LMQ_METHOD_RTN, 0 },
    { "emb-int8-row", { KEEP, INT(8, CHANNEL, 0, 0), INT(8, CHANNEL, 0, 0), KEEP }, 2, 2, A_NONE, LMQ_METHOD_RTN, 0 },
    { "emb-int4-g32", { KEEP, INT(4, GROUP, 32, 0), INT(4, GROUP, 32, 0), KEEP }, 2, 2, A_NONE, LMQ_METHOD_RTN, 0 },
    { "w8a16", LINEAR_ONLY(INT(8, CHANNEL, 0, 0)), 35, 16, A_NONE, LMQ_METHOD_RTN, 0 },
    { "w8a8", LINEAR_ONLY(INT(8, CHANNEL, 0, 0)), 35, 16, { LMQ_ACT_INT8, LMQ_ACT_TOKEN }, LMQ_METHOD_RTN, 0 },
    { "w8a8-tensor", LINEAR_ONLY(INT(8, CHANNEL, 0, 0)), 35, 16, { LMQ_ACT_INT8, LMQ_ACT_TENSOR }, LMQ_METHOD_RTN, 0 },
    { "w8a8-smoothquant", LINEAR_ONLY(INT(8, CHANNEL, 0, 0)), 35, 16, { LMQ_ACT_INT8, LMQ_ACT_TENSOR }, LMQ_METHOD_RTN, 0 },
    { "w4a16", { INT(4, GROUP, 128, 0), F16, INT(8, CHANNEL, 0, 0), KEEP }, 37, 18, A_NONE, LMQ_METHOD_RTN, 0 },
    { "w4a8-block", { INT(4, GROUP, 128, 0), F16, INT(8, CHANNEL, 0, 0), KEEP }, 37, 18, { LMQ_ACT_INT8, LMQ_ACT_BLOCK },
      LMQ_METHOD_RTN, 0 },
    { "gptq-int4-g128", LINEAR_ONLY(INT(4, GROUP, 128, 0)), 35, 16, A_NONE, LMQ_METHOD_GPTQ, 0 },
    { "gptq-int4-g32", LINEAR_ONLY(INT(4, GROUP, 32, 0)), 35, 16, A_NONE, LMQ_METHOD_GPTQ, 0 },
    { "gptq-int3-g128", LINEAR_ONLY(INT(3, GROUP, 128, 0)), 35, 16, A_NONE, LMQ_METHOD_GPTQ, 0 },
    { "gptq-int4-g128-actorder", LINEAR_ONLY(INT(4, GROUP, 128, 0)), 35, 16, A_NONE, LMQ_METHOD_GPTQ, 1 },
    { "awq-int4-g128", LINEAR_ONLY(INT(4, GROUP, 128, 0)), 35, 16, A_NONE, LMQ_METHOD_AWQ, 0 },
    { "awq-int3-g128", LINEAR_ONLY(INT(3, GROUP, 128, 0)), 35, 16, A_NONE, LMQ_METHOD_AWQ, 0 },
};
#define N_SHIPPED (int)(sizeof SHIPPED / sizeof *SHIPPED)

static void check_plan(int k, const q_plan *plan, const q_tensor_ref *refs, int n_refs, int want_quantised)
{
    int quantised = 0, per_class[C_N] = { 0 };
    ck_assert_int_eq(plan->n, n_refs + 1); /* both fixtures are tied */
    for (int i = 0; i < plan->n; i++) {
        const q_plan_entry *p = &plan->entries[i];
        int ndim = i < n_refs ? refs[i].ndim : 2;
        tclass c = classify(p->name, ndim);
        per_class[c]++;
        const lmq_qparams *w = &SHIPPED[k].want[c];
        const lmq_act none = { 0 }, *act = c == C_LINEAR ? &SHIPPED[k].act : &none;
        ck_assert_msg(p->act.scheme == act->scheme && p->act.gran == act->gran, "%s: %s has activations %d/%d",
                      SHIPPED[k].file, p->name, p->act.scheme, p->act.gran);
        if (w->dtype == LMQ_T_COUNT) {
            ck_assert_msg(p->keep_reason, "%s: %s was not to be touched", SHIPPED[k].file, p->name);
            ck_assert(strcmp(p->keep_reason, Q_KEEP_NO_RULE) == 0 || strcmp(p->keep_reason, Q_KEEP_ONLY_MATRICES) == 0);
            ck_assert_int_eq(p->qp.dtype, LMQ_T_F32);
        } else {
            ck_assert_msg(!p->keep_reason, "%s: %s kept: %s", SHIPPED[k].file, p->name, p->keep_reason);
            ck_assert_msg(memcmp(&p->qp, w, sizeof *w) == 0, "%s: %s has the wrong qparams", SHIPPED[k].file, p->name);
            const lmq_method want_method = c == C_LINEAR ? SHIPPED[k].method : LMQ_METHOD_RTN;
            ck_assert_msg(p->method.method == want_method && p->method.act_order == SHIPPED[k].act_order,
                          "%s: %s has method %d", SHIPPED[k].file, p->name, (int)p->method.method);
            quantised++;
        }
    }
    ck_assert_int_eq(per_class[C_EMB], 1);
    ck_assert_int_eq(per_class[C_CLS], 1);
    ck_assert_msg(quantised == want_quantised, "%s: %d decided by rules, want %d", SHIPPED[k].file, quantised,
                  want_quantised);
}

START_TEST(shipped_recipe)
{
    char path[128];
    snprintf(path, sizeof path, "recipes/%s.yaml", SHIPPED[_i].file);
    q_recipe r;
    lmq_err e;
    ck_assert_msg(q_recipe_load(path, &r, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_str_eq(r.name, SHIPPED[_i].file);
    ck_assert_ptr_nonnull(r.description);

    names_t m;
    q_plan plan;
    llama_names(&m, 5);
    ck_assert_int_eq(m.n, 47);
    ck_assert_msg(q_recipe_resolve(&r, m.refs, m.n, 1, &plan, &e) == LMQ_OK, "%s", e.msg);
    check_plan(_i, &plan, m.refs, m.n, SHIPPED[_i].quantised_llama5);
    q_plan_free(&plan);

    gpt2_names(&m, 4);
    ck_assert_int_eq(m.n, 52);
    ck_assert_msg(q_recipe_resolve(&r, m.refs, m.n, 1, &plan, &e) == LMQ_OK, "%s", e.msg);
    check_plan(_i, &plan, m.refs, m.n, SHIPPED[_i].quantised_gpt2_4);
    q_plan_free(&plan);
    q_recipe_free(&r);
}
END_TEST

/* Every .yaml file in recipes/ is in the table above (and so tested). */
START_TEST(shipped_all_listed)
{
    DIR *d = opendir("recipes");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));) {
        size_t len = strlen(de->d_name);
        if (len < 6 || strcmp(de->d_name + len - 5, ".yaml") != 0)
            continue;
        int found = 0;
        for (int k = 0; k < N_SHIPPED; k++)
            found |= strlen(SHIPPED[k].file) == len - 5 && strncmp(SHIPPED[k].file, de->d_name, len - 5) == 0;
        ck_assert_msg(found, "recipes/%s has no expectations in test_recipe.c", de->d_name);
        n++;
    }
    closedir(d);
    ck_assert_int_eq(n, N_SHIPPED);
}
END_TEST

/* The name list above agrees with a real model's: stories260K as the llama2.c reader loads it. */
START_TEST(shipped_on_stories260K)
{
    lmq_model mod;
    lmq_err e;
    ck_assert_msg(l2c_load(fixture(STORIES), &mod, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(mod.arch.tied_embedding, 1);
    names_t m;
    llama_names(&m, mod.arch.n_layers);
    ck_assert_int_eq(mod.n_tensors, m.n);
    for (int i = 0; i < m.n; i++) {
        const lmq_tensor *t = lmq_model_find(&mod, m.names[i]);
        ck_assert_msg(t && t->ndim == m.refs[i].ndim, "%s", m.names[i]);
    }
    for (int k = 0; k < N_SHIPPED; k++) {
        char path[128];
        snprintf(path, sizeof path, "recipes/%s.yaml", SHIPPED[k].file);
        q_recipe r;
        q_plan plan;
        ck_assert_msg(q_recipe_load(path, &r, &e) == LMQ_OK, "%s", e.msg);
        if (SHIPPED[k].act.gran == LMQ_ACT_BLOCK) { /* stories260K's FFN is 172 wide: no whole 32-blocks */
            ck_assert_int_eq(q_recipe_resolve_model(&r, &mod, &plan, &e), LMQ_E_RECIPE);
            ck_assert_msg(strstr(e.msg, "'blk.0.ffn_down.weight': activations int8 per block need a multiple of 32 "
                                 "inputs, not 172"), "%s", e.msg);
            q_recipe_free(&r);
            continue;
        }
        ck_assert_msg(q_recipe_resolve_model(&r, &mod, &plan, &e) == LMQ_OK, "%s", e.msg);
        q_tensor_ref refs[160];
        for (int i = 0; i < mod.n_tensors; i++)
            refs[i] = (q_tensor_ref){ mod.tensors[i].name, mod.tensors[i].ndim, mod.tensors[i].shape[mod.tensors[i].ndim - 1], 0 };
        check_plan(k, &plan, refs, mod.n_tensors, SHIPPED[k].quantised_llama5);
        q_plan_free(&plan);
        q_recipe_free(&r);
    }
    lmq_model_free(&mod);
}
END_TEST

/* Hugging Face module names in patterns: the canonical pattern each stands for, written out
 * from the two families' module layouts (GPT2LMHeadModel, LlamaForCausalLM), and names that are
 * no HF module left as written. */
START_TEST(hf_names)
{
    static const struct {
        const char *written, *canon; /* canon NULL: not an HF module name */
    } cases[] = {
        { "lm_head", "output.weight" },
        { "lm_head.weight", "output.weight" },
        { "model.layers.*.mlp.down_proj", "blk.*.ffn_down.weight" },
        { "model.layers.*.mlp.down_proj.weight", "blk.*.ffn_down.weight" },
        { "layers.3.self_attn.q_proj", "blk.3.attn_q.weight" },
        { "model.layers.1?.self_attn.o_proj", "blk.1?.attn_out.weight" },
        { "model.layers.*.post_attention_layernorm", "blk.*.ffn_norm.weight" },
        { "model.embed_tokens", "tok_embd.weight" },
        { "model.norm", "out_norm.weight" },
        { "transformer.h.*.attn.c_attn", "blk.*.attn_qkv.weight" },
        { "transformer.h.*.attn.c_attn.bias", "blk.*.attn_qkv.bias" },
        { "h.0.mlp.c_fc", "blk.0.ffn_up.weight" },
        { "transformer.h.*.mlp.c_proj", "blk.*.ffn_down.weight" },
        { "transformer.h.*.attn.c_proj", "blk.*.attn_out.weight" },
        { "transformer.wte", "tok_embd.weight" },
        { "transformer.wpe", "pos_embd.weight" },
        { "transformer.ln_f.bias", "out_norm.bias" },
        { "blk.*.ffn_down.weight", NULL },
        { "output.weight", NULL },
        { "*", NULL },
        { "model.layers.*.mlp.*", NULL },         /* a wildcard outside the layer index */
        { "model.layers.x.mlp.down_proj", NULL }, /* not a layer index */
        { "model.layers..mlp.down_proj", NULL },
        { "transformer.h.*.attn.bias", NULL },    /* a buffer, not a weight */
        { "lm_head.bias", NULL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "name: x\nrules:\n  - match: \"%s\"\n    scheme: fp16\n", cases[i].written);
        q_recipe r;
        lmq_err e;
        ck_assert_msg(parse(text, &r, &e) == LMQ_OK, "%s", e.msg);
        const q_pattern *p = &r.rules[0].match[0];
        ck_assert_str_eq(p->text, cases[i].written);
        if (cases[i].canon)
            ck_assert_msg(p->canon && !strcmp(p->canon, cases[i].canon), "%s: got %s, want %s", cases[i].written,
                          p->canon ? p->canon : "(none)", cases[i].canon);
        else
            ck_assert_msg(!p->canon, "%s resolved to %s", cases[i].written, p->canon);
        ck_assert_str_eq(q_pattern_glob(p), cases[i].canon ? cases[i].canon : cases[i].written);
        q_recipe_free(&r);
    }
}
END_TEST

/* HF names decide like the canonical names they stand for; one of the other family names no
 * tensor of this model, and the error says which canonical name it meant. */
START_TEST(hf_names_resolve)
{
    names_t m;
    llama_names(&m, 2);
    add(&m, 2, "output.weight");
    q_plan plan;
    lmq_err e;
    const char *text = "name: x\nrules:\n  - match: [lm_head, model.layers.*.mlp.down_proj]\n    scheme: int8\n"
                       "    granularity: channel\nignore: model.layers.1.mlp.down_proj\n";
    ck_assert_int_eq(resolve(text, &m, 0, &plan, &e), LMQ_OK);
    for (int i = 0; i < plan.n; i++) {
        const q_plan_entry *p = &plan.entries[i];
        if (!strcmp(p->name, "output.weight") || !strcmp(p->name, "blk.0.ffn_down.weight")) {
            expect_qp(p, LMQ_T_INT8, LMQ_GRAN_CHANNEL, 0, 0);
            ck_assert_int_eq(p->rule_line, 3);
        } else if (!strcmp(p->name, "blk.1.ffn_down.weight")) {
            expect_kept(p, Q_KEEP_IGNORED);
            ck_assert_int_eq(p->rule_line, 6);
        } else {
            expect_kept(p, Q_KEEP_NO_RULE);
        }
    }
    q_plan_free(&plan);
    text = "name: x\nrules:\n  - match: transformer.h.*.attn.c_attn\n    scheme: fp16\n";
    ck_assert_int_eq(resolve(text, &m, 0, &plan, &e), LMQ_E_RECIPE);
    ck_assert_msg(strstr(e.msg, "recipe.yaml:3: pattern 'transformer.h.*.attn.c_attn' (the Hugging Face name of "
                                "'blk.*.attn_qkv.weight') matches no tensor"), "%s", e.msg);
    /* Wildcards beyond the layer index do not resolve; the error names a tensor the HF name
     * matches and what lmq calls it. */
    static const struct {
        const char *pattern, *hf, *canon;
        int gpt2;
    } hints[] = {
        { "model.layers.*.mlp.*", "model.layers.0.mlp.gate_proj.weight", "blk.0.ffn_gate.weight", 0 },
        { "layers.*.self_attn.*", "layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight", 0 },
        { "*.o_proj", "model.layers.0.self_attn.o_proj.weight", "blk.0.attn_out.weight", 0 },
        { "transformer.h.*.mlp.*", "transformer.h.0.mlp.c_fc.weight", "blk.0.ffn_up.weight", 1 },
        { "h.1.*.c_proj", "h.1.attn.c_proj.weight", "blk.1.attn_out.weight", 1 },
    };
    for (size_t i = 0; i < sizeof hints / sizeof hints[0]; i++) {
        names_t hm;
        char t[160], want[400];
        if (hints[i].gpt2)
            gpt2_names(&hm, 2);
        else
            llama_names(&hm, 2);
        snprintf(t, sizeof t, "name: x\nrules:\n  - match: \"%s\"\n    scheme: fp16\n", hints[i].pattern);
        ck_assert_int_eq(resolve(t, &hm, 1, &plan, &e), LMQ_E_RECIPE);
        snprintf(want, sizeof want, "recipe.yaml:3: pattern '%s' matches no tensor (rules[0].match); it matches the "
                 "Hugging Face name '%s', which lmq calls '%s'", hints[i].pattern, hints[i].hf, hints[i].canon);
        ck_assert_msg(strstr(e.msg, want), "%s\nlacks\n%s", e.msg, want);
    }
    /* q_recipe_plan reports nothing for it: --explain counts the pattern's matches instead. */
    q_recipe r;
    ck_assert_int_eq(parse(text, &r, &e), LMQ_OK);
    ck_assert_int_eq(q_recipe_plan(&r, m.refs, m.n, 0, &plan, &e), LMQ_OK);
    ck_assert_int_eq(q_pattern_count(&r.rules[0].match[0], m.refs, m.n), 0);
    for (int i = 0; i < plan.n; i++)
        expect_kept(&plan.entries[i], Q_KEEP_NO_RULE);
    q_plan_free(&plan);
    q_recipe_free(&r);
}
END_TEST

/* llm-compressor's presets (compressed-tensors quant_scheme.py): W8A16 int8 per channel, W4A16
 * int4 groups of 128, W8A8 int8 per channel with int8 per-token dynamic activations, all
 * symmetric; FP8 as lmq stores fp8 (e4m3, a scale per row), weight-only; FP8_DYNAMIC the same
 * weights with fp8 per-token dynamic activations. */
START_TEST(presets)
{
    static const struct {
        const char *name;
        lmq_dtype dtype;
        lmq_gran gran;
        uint32_t group;
        lmq_act_scheme act;
    } cases[] = {
        { "W8A16", LMQ_T_INT8, LMQ_GRAN_CHANNEL, 0, LMQ_ACT_NONE },
        { "W4A16", LMQ_T_INT4, LMQ_GRAN_GROUP, 128, LMQ_ACT_NONE },
        { "W8A8", LMQ_T_INT8, LMQ_GRAN_CHANNEL, 0, LMQ_ACT_INT8 },
        { "FP8", LMQ_T_F8_E4M3, LMQ_GRAN_CHANNEL, 0, LMQ_ACT_NONE },
        { "FP8_DYNAMIC", LMQ_T_F8_E4M3, LMQ_GRAN_CHANNEL, 0, LMQ_ACT_FP8_E4M3 },
    };
    names_t m;
    llama_names(&m, 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "name: x\nrules:\n  - match: \"blk.*\"\n    scheme: %s\n", cases[i].name);
        q_recipe r;
        q_plan plan;
        lmq_err e;
        ck_assert_msg(parse(text, &r, &e) == LMQ_OK, "%s", e.msg);
        ck_assert_str_eq(r.rules[0].preset, cases[i].name);
        ck_assert_int_eq(q_recipe_resolve(&r, m.refs, m.n, 0, &plan, &e), LMQ_OK);
        const q_plan_entry *p = entry(&plan, "blk.0.ffn_up.weight");
        expect_qp(p, cases[i].dtype, cases[i].gran, cases[i].group, 0);
        ck_assert_int_eq(p->act.scheme, cases[i].act);
        ck_assert_int_eq(p->act.gran, LMQ_ACT_TOKEN);
        expect_kept(entry(&plan, "blk.0.attn_norm.weight"), Q_KEEP_ONLY_MATRICES);
        q_plan_free(&plan);
        q_recipe_free(&r);
    }
    /* A preset may take a method, but does not let the rule restate what it sets. */
    q_recipe r;
    lmq_err e;
    ck_assert_int_eq(parse("name: x\nrules:\n  - match: \"blk.*\"\n    scheme: W4A16\n    method: gptq\n", &r, &e),
                     LMQ_OK);
    ck_assert_int_eq(r.rules[0].method.method, LMQ_METHOD_GPTQ);
    q_recipe_free(&r);
    parse_fails("name: x\nrules:\n  - match: \"blk.*\"\n    scheme: W4A16\n    granularity: group\n",
                "recipe.yaml:5: rules[0].granularity: comes with preset W4A16", NULL);
    parse_fails("name: x\nrules:\n  - match: \"blk.*\"\n    scheme: W8A16\n    symmetric: false\n",
                "recipe.yaml:5: rules[0].symmetric: comes with preset W8A16", NULL);
    parse_fails("name: x\nrules:\n  - match: \"blk.*\"\n    scheme: W8A8\n    activations: {scheme: int8, "
                "granularity: tensor}\n", "recipe.yaml:5: rules[0].activations: comes with preset W8A8", NULL);
    parse_fails("name: x\nrules:\n  - match: \"blk.*\"\n    scheme: w4a16\n",
                "recipe.yaml:4: rules[0].scheme: unknown scheme 'w4a16'",
                "presets W8A16, W4A16, W4A16_ASYM, W8A8, INT8, W4A8, FP8, FP8_DYNAMIC", NULL);
}
END_TEST


/* target_bpw and candidates: read, defaulted, and each refusal naming the file, line and key. */
#define BLOCK_RULE "rules:\n  - match: \"blk.*\"\n    scheme: q4_k\n"
START_TEST(target_bpw)
{
    q_recipe r;
    lmq_err e;
    ck_assert_msg(parse("name: x\ntarget_bpw: 4.5\ncandidates: [q3_k, q8_0]\n" BLOCK_RULE, &r, &e) == LMQ_OK, "%s",
                  e.msg);
    ck_assert_double_eq(r.target_bpw, 4.5);
    ck_assert_int_eq(r.target_line, 2);
    ck_assert_int_eq(r.n_candidates, 2);
    ck_assert_int_eq(r.candidates[0], LMQ_T_Q3_K);
    ck_assert_int_eq(r.candidates[1], LMQ_T_Q8_0);
    q_recipe_free(&r);
    /* without candidates: the K-types, Q8_0 and the 32-blocks Q4_0 and Q5_0 */
    ck_assert_msg(parse("name: x\ntarget_bpw: 6\n" BLOCK_RULE, &r, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(r.n_candidates, 8);
    static const int want[] = { LMQ_T_Q2_K, LMQ_T_Q3_K, LMQ_T_Q4_0, LMQ_T_Q4_K, LMQ_T_Q5_0, LMQ_T_Q5_K, LMQ_T_Q6_K, LMQ_T_Q8_0 };
    for (int k = 0; k < 8; k++)
        ck_assert_int_eq(r.candidates[k], want[k]);
    q_recipe_free(&r);
    ck_assert_msg(parse("name: x\n" BLOCK_RULE, &r, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_double_eq(r.target_bpw, 0);
    ck_assert_int_eq(r.n_candidates, 0);
    q_recipe_free(&r);

    parse_fails("name: x\ntarget_bpw: four\n" BLOCK_RULE, "recipe.yaml:2: target_bpw: expected a number, got 'four'",
                NULL);
    parse_fails("name: x\ntarget_bpw: [4]\n" BLOCK_RULE, "recipe.yaml:2: target_bpw: expected a number, got a list",
                NULL);
    parse_fails("name: x\ntarget_bpw: 0.5\n" BLOCK_RULE, "recipe.yaml:2: target_bpw: 0.5 is not between 1 and 32",
                NULL);
    parse_fails("name: x\ntarget_bpw: 33\n" BLOCK_RULE, "recipe.yaml:2: target_bpw: 33 is not between 1 and 32", NULL);
    parse_fails("name: x\ntarget_bpw: 4\ncandidates: []\n" BLOCK_RULE,
                "recipe.yaml:3: candidates: gives 0 schemes: 1 to 16", NULL);
    parse_fails("name: x\ntarget_bpw: 4\ncandidates: [q4_k, q9_k]\n" BLOCK_RULE,
                "recipe.yaml:3: candidates: 'q9_k' is not a GGUF block scheme", NULL);
    parse_fails("name: x\ntarget_bpw: 4\ncandidates: [q4_k, int4]\n" BLOCK_RULE,
                "recipe.yaml:3: candidates: 'int4' is not a GGUF block scheme", NULL);
    parse_fails("name: x\ntarget_bpw: 4\ncandidates: [q4_k, q6_k, q4_k]\n" BLOCK_RULE,
                "recipe.yaml:3: candidates: 'q4_k' is listed twice", NULL);
    parse_fails("name: x\ntarget_bpw: 4\ncandidates: q4_k\n" BLOCK_RULE,
                "recipe.yaml:3: candidates: expected a list of GGUF block schemes, got a string", NULL);
    parse_fails("name: x\ncandidates: [q4_k]\n" BLOCK_RULE, "recipe.yaml:2: candidates: given without target_bpw",
                NULL);
    parse_fails("name: x\ntarget_bpw: 4\nrules:\n  - match: \"blk.*\"\n    scheme: int4\n    granularity: channel\n",
                "recipe.yaml:2: target_bpw: no rule gives a GGUF block scheme", NULL);
    parse_fails("name: x\ntarget_bpw: 4\ntarget_bpw: 5\n" BLOCK_RULE, "recipe.yaml:3", "target_bpw", NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("recipe");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, err_unknown_keys);
    tcase_add_test(tc, err_wrong_types);
    tcase_add_test(tc, err_bad_values);
    tcase_add_test(tc, err_missing_and_empty);
    tcase_add_test(tc, methods);
    tcase_add_test(tc, method_params);
    tcase_add_test(tc, err_duplicates);
    tcase_add_test(tc, err_malformed_yaml);
    tcase_add_test(tc, parse_fields_and_defaults);
    tcase_add_test(tc, load_file);
    tcase_add_test(tc, hostile_text);
    tcase_add_test(tc, glob);
    tcase_add_test(tc, target_bpw);
    suite_add_tcase(s, tc);
    tc = tcase_create("resolve");
    tcase_add_test(tc, resolve_unmatched_pattern);
    tcase_add_test(tc, resolve_int_on_1d);
    tcase_add_test(tc, resolve_1d_pass_over);
    tcase_add_test(tc, block_schemes);
    tcase_add_test(tc, layers_and_fallback);
    tcase_add_test(tc, gguf_presets);
    tcase_add_test(tc, activations);
    tcase_add_test(tc, resolve_first_match);
    tcase_add_test(tc, resolve_ignore);
    tcase_add_test(tc, resolve_tied);
    tcase_add_test(tc, hf_names);
    tcase_add_test(tc, hf_names_resolve);
    tcase_add_test(tc, presets);
    suite_add_tcase(s, tc);
    tc = tcase_create("shipped");
    tcase_add_loop_test(tc, shipped_recipe, 0, N_SHIPPED);
    tcase_add_test(tc, shipped_all_listed);
    tcase_add_test(tc, shipped_on_stories260K);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
