/* Audit policies and the manifest diff (audit/): artefacts of a small random model written in a
 * temporary folder with known schemes, then one thing changed at a time. Expected counts come
 * from the model's own shape (how many tensors a pattern names) and from the schemes' storage
 * arithmetic (int4 in groups of 32 with an fp16 scale: 4 + 16/32 bits per weight). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "audit/diff.h"
#include "audit/policy.h"
#include "formats/artefact.h"
#include "quantize/quantize.h"
#include "tests/testutil.h"

#define LAYERS 2
#define DIM 32
#define HIDDEN 64
#define VOCAB 48

static char dir[512], fp32_path[600], int4_path[600], int4b_path[600], int8_path[600];

/* ---- the model and its artefacts ---- */

static void add(lmq_model *m, const char *name, int64_t d0, int64_t d1, uint64_t *seed)
{
    int64_t shape[2] = { d0, d1 };
    lmq_tensor *t;
    lmq_err e = { 0 };
    ck_assert_int_eq(lmq_model_add(m, name, d1 ? 2 : 1, shape, &t, &e), LMQ_OK);
    for (int64_t i = 0; i < lmq_tensor_numel(t); i++)
        t->data[i] = d1 ? (float)test_gauss(seed) * 0.05f : 1.0f;
}

/* A tied Llama-shaped model; with classifier, an untied one whose output.weight is a copy of the
 * embedding (copy) or other values. */
static void make_model(lmq_model *m, int classifier, int copy)
{
    uint64_t seed = 7;
    lmq_model_init(m);
    m->arch = (lmq_arch){ .family = LMQ_FAMILY_LLAMA, .dim = DIM, .hidden_dim = HIDDEN, .n_layers = LAYERS,
                          .n_heads = 4, .n_kv_heads = 4, .vocab_size = VOCAB, .max_seq = 64, .norm_eps = 1e-5f,
                          .rope_theta = 10000.0f, .tied_embedding = !classifier, .rope = LMQ_ROPE_INTERLEAVED,
                          .tokenizer = LMQ_TOK_NONE, .bos_id = 1, .eos_id = 2 };
    snprintf(m->source, sizeof m->source, "test model");
    m->source_checksum = 0x1122334455667788ULL;
    add(m, "tok_embd.weight", VOCAB, DIM, &seed);
    for (int l = 0; l < LAYERS; l++) {
        static const struct {
            const char *name;
            int64_t d0, d1;
        } blk[] = { { "attn_norm.weight", DIM, 0 }, { "attn_q.weight", DIM, DIM }, { "attn_k.weight", DIM, DIM },
                    { "attn_v.weight", DIM, DIM },  { "attn_out.weight", DIM, DIM },
                    { "ffn_norm.weight", DIM, 0 },  { "ffn_gate.weight", HIDDEN, DIM },
                    { "ffn_up.weight", HIDDEN, DIM }, { "ffn_down.weight", DIM, HIDDEN } };
        for (size_t i = 0; i < sizeof blk / sizeof blk[0]; i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s", l, blk[i].name);
            add(m, name, blk[i].d0, blk[i].d1, &seed);
        }
    }
    add(m, "out_norm.weight", DIM, 0, &seed);
    if (classifier) {
        add(m, "output.weight", VOCAB, DIM, &seed);
        if (copy)
            memcpy(m->tensors[m->n_tensors - 1].data, m->tensors[0].data, (size_t)VOCAB * DIM * sizeof(float));
    }
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
}

static void quantize(const char *in, const char *recipe_text, const char *out)
{
    char recipe[700];
    snprintf(recipe, sizeof recipe, "%s/recipe.yaml", dir);
    write_text(recipe, recipe_text);
    q_opts o = { .threads = 1 };
    lmq_err e = { 0 };
    ck_assert_msg(q_quantize_file(in, recipe, out, &o, &e) == LMQ_OK, "%s", e.msg);
}

static const char int4_recipe[] = "name: int4\n"
                                  "rules:\n"
                                  "  - match: [\"blk.*.attn_*.weight\", \"blk.*.ffn_*.weight\"]\n"
                                  "    scheme: int4\n"
                                  "    granularity: group\n"
                                  "    group: 32\n";
static const char int8_recipe[] = "name: int8\n"
                                  "rules:\n"
                                  "  - match: \"blk.*.ffn_*.weight\"\n"
                                  "    scheme: int8\n"
                                  "    granularity: channel\n";

static void setup(void)
{
    snprintf(dir, sizeof dir, "%s", test_tmpdir());
    snprintf(fp32_path, sizeof fp32_path, "%s/fp32.lmq", dir);
    snprintf(int4_path, sizeof int4_path, "%s/int4.lmq", dir);
    snprintf(int4b_path, sizeof int4b_path, "%s/int4b.lmq", dir);
    snprintf(int8_path, sizeof int8_path, "%s/int8.lmq", dir);
    lmq_model m;
    make_model(&m, 0, 0);
    lmq_err e = { 0 };
    ck_assert_int_eq(lmq_container_write_model(fp32_path, &m, NULL, &e), LMQ_OK);
    lmq_model_free(&m);
    quantize(fp32_path, int4_recipe, int4_path);
    quantize(fp32_path, int4_recipe, int4b_path);
    quantize(fp32_path, int8_recipe, int8_path);
}

static void teardown(void)
{
    test_rmtree(dir);
}

/* ---- policies ---- */

typedef struct {
    int n;
    char tensor[8][128], msg[8][700];
} seen;

static void collect(void *ctx, const char *tensor, lmq_code code, const char *msg)
{
    seen *s = ctx;
    ck_assert_int_eq(code, LMQ_E_RECIPE);
    if (s->n < 8) {
        snprintf(s->tensor[s->n], sizeof s->tensor[0], "%s", tensor ? tensor : "");
        snprintf(s->msg[s->n], sizeof s->msg[0], "%s", msg);
    }
    s->n++;
}

/* The problems policy text gives on the artefact at path (*s filled). */
static int check_policy(const char *text, const char *path, seen *s)
{
    char pp[700];
    snprintf(pp, sizeof pp, "%s/policy.yaml", dir);
    write_text(pp, text);
    lmq_policy *p;
    lmq_err e = { 0 };
    ck_assert_msg(lmq_policy_load(pp, &p, &e) == LMQ_OK, "%s", e.msg);
    lmq_mdoc d;
    ck_assert_msg(lmq_mdoc_load(path, &d, &e) == LMQ_OK, "%s", e.msg);
    lmq_audit_subject sub = { path, &d, LMQ_CONTAINER_VERSION };
    memset(s, 0, sizeof *s);
    int n = lmq_policy_check(p, &sub, collect, s);
    ck_assert_int_eq(n, s->n);
    ck_assert_int_eq(lmq_policy_check_base(&sub, NULL, NULL), 0);
    lmq_mdoc_free(&d);
    lmq_policy_free(p);
    return n;
}

static int count(const char *text, const char *path)
{
    seen s;
    return check_policy(text, path, &s);
}

START_TEST(policy_schemes)
{
    seen s;
    /* q, k and v of every layer ('?' is one character): fp32 in the plain conversion. */
    ck_assert_int_eq(check_policy("schemes:\n  - tensors: \"blk.*.attn_?.weight\"\n    allow: int4\n", fp32_path, &s),
                     3 * LAYERS);
    ck_assert_str_eq(s.tensor[0], "blk.0.attn_k.weight"); /* index order: by name */
    ck_assert_ptr_nonnull(
        strstr(s.msg[0], "policy.yaml: schemes: is 'fp32'; tensors 'blk.*.attn_?.weight' allow int4"));
    ck_assert_int_eq(count("schemes:\n  - tensors: \"blk.*.attn_?.weight\"\n    allow: int4\n", int4_path), 0);
    /* A whole scheme name matches as well as an encoding name; the first matching rule decides. */
    ck_assert_int_eq(count("schemes:\n  - tensors: \"blk.*.ffn_*.weight\"\n    allow: [\"int4 g32\"]\n"
                           "  - tensors: \"*\"\n    allow: [int8]\n", int4_path), 4 * LAYERS + 2 + 2 * LAYERS);
    /* ffn_norm (1-D, fp32) and the three ffn matrices (int8) of each layer under one rule. */
    ck_assert_int_eq(count("schemes:\n  - tensors: \"blk.*.ffn_*\"\n    allow: [int8]\n", int8_path), LAYERS);
    /* A pattern that matches no tensor ('[' is itself: not a class) is a mistake named by its line,
     * not a rule that passes everything. */
    ck_assert_int_eq(check_policy("schemes:\n  - tensors: \"*norm*\"\n    allow: fp32\n"
                                  "  - tensors: \"blk.[0-9].*\"\n    allow: int4\n", int8_path, &s), 1);
    ck_assert_msg(strstr(s.msg[0], "policy.yaml: schemes: line 4: tensors 'blk.[0-9].*' matches no tensor"), "%s",
                  s.msg[0]);
    /* The encoding is the index's: a manifest whose scheme text says int4 g32 over int8 tensors
     * is judged int8. */
    char pp[700];
    snprintf(pp, sizeof pp, "%s/policy.yaml", dir);
    write_text(pp, "schemes:\n  - tensors: \"blk.*.ffn_up.weight\"\n    allow: [\"int4 g32\"]\n");
    lmq_policy *p;
    lmq_mdoc d;
    lmq_err e = { 0 };
    ck_assert_int_eq(lmq_policy_load(pp, &p, &e), LMQ_OK);
    ck_assert_int_eq(lmq_mdoc_load(int8_path, &d, &e), LMQ_OK);
    for (int i = 0; i < d.man.n_tensors; i++)
        snprintf(d.man.tensors[i].scheme, sizeof d.man.tensors[i].scheme, "int4 g32");
    lmq_audit_subject sub = { int8_path, &d, LMQ_CONTAINER_VERSION };
    memset(&s, 0, sizeof s);
    ck_assert_int_eq(lmq_policy_check(p, &sub, collect, &s), LAYERS);
    ck_assert_msg(strstr(s.msg[0], "schemes: is 'int8"), "%s", s.msg[0]);
    lmq_mdoc_free(&d);
    lmq_policy_free(p);
}
END_TEST

START_TEST(policy_bits)
{
    /* int4 g32 with an fp16 scale per group: 4.5 bits per weight in the linear layers. */
    ck_assert_int_eq(count("max_linear_bpw: 4.5\n", int4_path), 0);
    seen s;
    ck_assert_int_eq(check_policy("max_linear_bpw: 4.49\n", int4_path, &s), 1);
    ck_assert_ptr_nonnull(strstr(s.msg[0], "max_linear_bpw: the linear layers store 4.5 bits per weight, above 4.49"));
    /* The whole model: linear elements at 4.5 bits, the rest (embedding, norms) at 32. */
    double linear = LAYERS * (4.0 * DIM * DIM + 3.0 * DIM * HIDDEN), other = VOCAB * DIM + DIM * (2 * LAYERS + 1);
    double bpw = (linear * 4.5 + other * 32) / (linear + other);
    char text[64];
    snprintf(text, sizeof text, "max_bpw: %.6f\n", bpw + 1e-6);
    ck_assert_int_eq(count(text, int4_path), 0);
    snprintf(text, sizeof text, "max_bpw: %.6f\n", bpw - 1e-6);
    ck_assert_int_eq(count(text, int4_path), 1);
    ck_assert_int_eq(count("max_bpw: 32\nmax_linear_bpw: 32\n", fp32_path), 0);
}
END_TEST

START_TEST(policy_rel_error)
{
    /* Every quantised tensor lost something; fp32 ones nothing. */
    ck_assert_int_eq(count("max_rel_error: 0\n", int4_path), 7 * LAYERS);
    ck_assert_int_eq(count("max_rel_error: 0\n", int8_path), 3 * LAYERS);
    ck_assert_int_eq(count("max_rel_error: 0\n", fp32_path), 0);
    ck_assert_int_eq(count("max_rel_error: 1\n", int4_path), 0);
}
END_TEST

START_TEST(policy_provenance)
{
    seen s;
    ck_assert_int_eq(check_policy("require: [recipe]\n", fp32_path, &s), 1);
    ck_assert_ptr_nonnull(strstr(s.msg[0], "require: the manifest has no recipe section"));
    ck_assert_int_eq(count("require: recipe\n", int4_path), 0);
    ck_assert_int_eq(count("require: [recipe, calibration, tokenizer]\n", int4_path), 2);
    ck_assert_int_eq(count("source_checksum: \"1122334455667788\"\n", int4_path), 0);
    ck_assert_int_eq(check_policy("source_checksum: \"1122334455667789\"\n", int4_path, &s), 1);
    ck_assert_ptr_nonnull(
        strstr(s.msg[0], "the source checkpoint is 1122334455667788, the policy pins 1122334455667789"));
    /* LMQ_TOOL_VERSION is "lmq 0.1.0". */
    ck_assert_int_eq(count("min_tool_version: \"0.1.0\"\n", int4_path), 0);
    ck_assert_int_eq(count("min_tool_version: \"0.0.9\"\n", int4_path), 0);
    ck_assert_int_eq(count("min_tool_version: \"0.1.1\"\n", int4_path), 1);
    ck_assert_int_eq(count("min_tool_version: \"1.0.0\"\n", int4_path), 1);
}
END_TEST

/* A reference whose tensor list equals, or differs from, the artefact's. */
static void write_reference(const char *path, int classifier, int copy, int drop_out_norm)
{
    lmq_model m;
    make_model(&m, classifier, copy);
    if (drop_out_norm) { /* moved past the end, where the writer does not see it */
        int k = 0;
        while (strcmp(m.tensors[k].name, "out_norm.weight"))
            k++;
        lmq_tensor gone = m.tensors[k];
        memmove(&m.tensors[k], &m.tensors[k + 1], (size_t)(m.n_tensors - k - 1) * sizeof gone);
        m.tensors[--m.n_tensors] = gone;
    }
    lmq_err e = { 0 };
    ck_assert_msg(lmq_container_write_model(path, &m, NULL, &e) == LMQ_OK, "%s", e.msg);
    m.n_tensors += drop_out_norm;
    lmq_model_free(&m);
}

START_TEST(policy_tensors_like)
{
    char ref[700], text[800];
    snprintf(ref, sizeof ref, "%s/ref.lmq", dir);
    /* relative to the policy's folder */
    snprintf(text, sizeof text, "tensors_like: ref.lmq\n");
    write_reference(ref, 0, 0, 0);
    ck_assert_int_eq(count(text, int4_path), 0);
    /* The reference stores its classifier as a copy of the embedding; the artefact ties it. */
    write_reference(ref, 1, 1, 0);
    ck_assert_int_eq(count(text, int4_path), 0);
    /* A classifier of its own is a tensor the artefact lacks. */
    write_reference(ref, 1, 0, 0);
    seen s;
    ck_assert_int_eq(check_policy(text, int4_path, &s), 1);
    ck_assert_str_eq(s.tensor[0], "output.weight");
    ck_assert_ptr_nonnull(strstr(s.msg[0], "tensors_like: in "));
    ck_assert_ptr_nonnull(strstr(s.msg[0], "ref.lmq but not in this artefact"));
    /* A reference without out_norm.weight: the artefact has one tensor too many. */
    write_reference(ref, 0, 0, 1);
    ck_assert_int_eq(check_policy(text, int4_path, &s), 1);
    ck_assert_str_eq(s.tensor[0], "out_norm.weight");
    ck_assert_ptr_nonnull(strstr(s.msg[0], "in this artefact but not in "));
    /* An expected manifest (YAML) serves as well as an artefact. */
    char yaml[700];
    snprintf(yaml, sizeof yaml, "%s/ref.yaml", dir);
    lmq_container c;
    lmq_err e = { 0 };
    ck_assert_int_eq(lmq_container_open(&c, fp32_path, &e), LMQ_OK);
    FILE *f = fopen(yaml, "w");
    ck_assert_uint_eq(fwrite(c.manifest, 1, c.manifest_size, f), c.manifest_size);
    fclose(f);
    lmq_container_close(&c);
    ck_assert_int_eq(count("tensors_like: ref.yaml\n", int8_path), 0);
}
END_TEST

/* Load errors name the file, the line and the key. */
START_TEST(policy_errors)
{
    static const struct {
        const char *text, *want;
    } bad[] = {
        { "max_bpw: 4\nbogus: 1\n", "policy.yaml:2: unknown key 'bogus'" },
        { "max_bpw: four\n", "policy.yaml:1: max_bpw: 'four' is not a finite number" },
        { "require: [recipe, colour]\n", "policy.yaml:1: require: unknown section" },
        { "source_checksum: \"12\"\n", "policy.yaml:1: source_checksum: expected 16 hex digits" },
        { "min_tool_version: \"one\"\n", "policy.yaml:1: min_tool_version: expected a version X.Y.Z" },
        { "schemes:\n  - tensors: \"*\"\n", "policy.yaml:2: schemes[0]: missing key 'allow'" },
        { "schemes:\n  - tensors: \"*\"\n    allow: []\n", "policy.yaml:3: schemes[0].allow: expected a name or" },
        { "max_linear_bpw: 4\n\ntensors_like: nowhere.lmq\n", "policy.yaml:3: tensors_like: " },
    };
    char pp[700];
    snprintf(pp, sizeof pp, "%s/policy.yaml", dir);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text(pp, bad[i].text);
        lmq_policy *p = (lmq_policy *)1;
        lmq_err e = { 0 };
        ck_assert_int_eq(lmq_policy_load(pp, &p, &e), LMQ_E_RECIPE);
        ck_assert_ptr_null(p);
        ck_assert_msg(strstr(e.msg, bad[i].want), "%zu: %s", i, e.msg);
    }
    snprintf(pp, sizeof pp, "%s/missing.yaml", dir);
    lmq_policy *p;
    lmq_err e = { 0 };
    ck_assert_int_eq(lmq_policy_load(pp, &p, &e), LMQ_E_IO);
}
END_TEST

/* ---- the diff ---- */

typedef struct {
    int n;
    char tensor[4][128], key[4][128], a[4][160], b[4][160];
    int keys_named; /* differences whose key is `want` */
    const char *want;
} diffs;

static void on_diff(void *ctx, const char *tensor, const char *key, const char *a, const char *b)
{
    diffs *d = ctx;
    if (d->n < 4) {
        snprintf(d->tensor[d->n], sizeof d->tensor[0], "%s", tensor ? tensor : "");
        snprintf(d->key[d->n], sizeof d->key[0], "%s", key);
        snprintf(d->a[d->n], sizeof d->a[0], "%s", a);
        snprintf(d->b[d->n], sizeof d->b[0], "%s", b);
    }
    d->keys_named += d->want && !strcmp(key, d->want);
    d->n++;
}

static int diff_paths(const char *a, const char *b, double tol, diffs *d)
{
    lmq_mdoc x, y;
    lmq_err e = { 0 };
    ck_assert_msg(lmq_mdoc_load(a, &x, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(lmq_mdoc_load(b, &y, &e) == LMQ_OK, "%s", e.msg);
    int n = lmq_mdoc_diff(&x, &y, tol, on_diff, d);
    ck_assert_int_eq(n, d->n);
    ck_assert_int_eq(lmq_mdoc_diff(&x, &y, tol, NULL, NULL), n);
    lmq_mdoc_free(&x);
    lmq_mdoc_free(&y);
    return n;
}

/* The int4 artefact's manifest, changed by edit, written as an expected manifest at path. */
static void expected(const char *path, void (*edit)(lmq_manifest *))
{
    lmq_container c;
    lmq_manifest m;
    lmq_err e = { 0 };
    ck_assert_int_eq(lmq_container_open_manifest(&c, &m, int4_path, &e), LMQ_OK);
    lmq_container_close(&c);
    if (edit)
        edit(&m);
    char *text;
    size_t len;
    ck_assert_int_eq(lmq_manifest_emit(&m, &text, &len, &e), LMQ_OK);
    lmq_manifest_free(&m);
    FILE *f = fopen(path, "w");
    ck_assert_uint_eq(fwrite(text, 1, len, f), len);
    fclose(f);
    free(text);
}

static lmq_manifest_tensor *tensor(lmq_manifest *m, const char *name)
{
    return (lmq_manifest_tensor *)lmq_manifest_find(m, name);
}
static void nudge_rel_error(lmq_manifest *m) { tensor(m, "blk.1.ffn_up.weight")->stats.rel_error += 1e-4; }
static void move_source(lmq_manifest *m) { lmq_manifest_set(&m->source, "elsewhere/model", NULL); }
static void other_recipe(lmq_manifest *m) { lmq_manifest_set(&m->recipe, "name: other\n", NULL); }
static void drop_tensor(lmq_manifest *m) { m->n_tensors--; }
static void other_arch(lmq_manifest *m) { m->arch.n_heads = 8; }

START_TEST(diff_equal)
{
    diffs d = { 0 };
    ck_assert_int_eq(diff_paths(int4_path, int4_path, 0, &d), 0);
    /* Quantised twice from the same input: the same bytes, checksums included. */
    ck_assert_int_eq(diff_paths(int4_path, int4b_path, 0, &d), 0);
    char y[700];
    snprintf(y, sizeof y, "%s/int4.yaml", dir);
    expected(y, NULL);
    ck_assert_int_eq(diff_paths(int4_path, y, 0, &d), 0);
    /* Where the input lay is not what it was. */
    expected(y, move_source);
    ck_assert_int_eq(diff_paths(int4_path, y, 0, &d), 0);
}
END_TEST

START_TEST(diff_one_change)
{
    char y[700];
    snprintf(y, sizeof y, "%s/int4.yaml", dir);
    diffs d = { 0 };
    expected(y, nudge_rel_error);
    ck_assert_int_eq(diff_paths(int4_path, y, 0, &d), 1);
    ck_assert_str_eq(d.tensor[0], "blk.1.ffn_up.weight");
    ck_assert_str_eq(d.key[0], "rel_error");
    ck_assert_double_eq_tol(strtod(d.b[0], NULL) - strtod(d.a[0], NULL), 1e-4, 1e-12);
    memset(&d, 0, sizeof d);
    ck_assert_int_eq(diff_paths(int4_path, y, 2e-4, &d), 0);
    ck_assert_int_eq(diff_paths(int4_path, y, 0.5e-4, &d), 1);

    memset(&d, 0, sizeof d);
    expected(y, other_recipe);
    ck_assert_int_eq(diff_paths(int4_path, y, 0, &d), 1);
    ck_assert_str_eq(d.key[0], "recipe.text");
    ck_assert_str_eq(d.b[0], "\"name: other\\n\"");

    memset(&d, 0, sizeof d);
    expected(y, drop_tensor); /* the last entry: out_norm.weight */
    ck_assert_int_eq(diff_paths(int4_path, y, 0, &d), 1);
    ck_assert_str_eq(d.tensor[0], "out_norm.weight");
    ck_assert_str_eq(d.key[0], "(entry)");
    ck_assert_str_eq(d.b[0], "(absent)");

    memset(&d, 0, sizeof d);
    expected(y, other_arch);
    ck_assert_int_eq(diff_paths(y, int4_path, 0, &d), 1);
    ck_assert_str_eq(d.key[0], "architecture.n_heads");
    ck_assert_str_eq(d.a[0], "8");
    ck_assert_str_eq(d.b[0], "4");
}
END_TEST

START_TEST(diff_schemes)
{
    /* int4 and int8 differ in the ffn matrices' scheme (3 per layer) and the attention matrices
     * (4 per layer, int4 against fp32), and in the recipe. */
    diffs d = { .want = "scheme" };
    ck_assert_int_gt(diff_paths(int4_path, int8_path, 0, &d), 0);
    ck_assert_int_eq(d.keys_named, 7 * LAYERS);
    memset(&d, 0, sizeof d);
    d.want = "checksum";
    diff_paths(int4_path, int8_path, 0, &d);
    ck_assert_int_eq(d.keys_named, 7 * LAYERS);
    /* With a tolerance the stored bytes are not compared. */
    memset(&d, 0, sizeof d);
    d.want = "checksum";
    diff_paths(int4_path, int8_path, 1e-9, &d);
    ck_assert_int_eq(d.keys_named, 0);
}
END_TEST

START_TEST(expect_paths)
{
    char out[700];
    lmq_expect_path(dir, "some/where/int4.lmq", out, sizeof out);
    char want[700];
    snprintf(want, sizeof want, "%s/int4.yaml", dir);
    ck_assert_str_eq(out, want);
    lmq_expect_path(fp32_path, "some/where/int4.lmq", out, sizeof out);
    ck_assert_str_eq(out, fp32_path);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("audit");
    TCase *p = tcase_create("policy");
    tcase_add_checked_fixture(p, setup, teardown);
    tcase_set_timeout(p, 60);
    tcase_add_test(p, policy_schemes);
    tcase_add_test(p, policy_bits);
    tcase_add_test(p, policy_rel_error);
    tcase_add_test(p, policy_provenance);
    tcase_add_test(p, policy_tensors_like);
    tcase_add_test(p, policy_errors);
    suite_add_tcase(s, p);
    TCase *d = tcase_create("diff");
    tcase_add_checked_fixture(d, setup, teardown);
    tcase_set_timeout(d, 60);
    tcase_add_test(d, diff_equal);
    tcase_add_test(d, diff_one_change);
    tcase_add_test(d, diff_schemes);
    tcase_add_test(d, expect_paths);
    suite_add_tcase(s, d);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
