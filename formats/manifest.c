/* The manifest in YAML. One table per mapping describes its keys (name, kind, where the value
 * lives in the struct); the emitter and the parser of common/yaml_fields both walk these tables,
 * so the two cannot drift apart. Key reference: manifests/schema.md. */
#include "formats/manifest.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <yaml.h>

#include "common/yaml_doc.h"
#include "common/yaml_fields.h"

/* ---- the schema tables ---- */

static const char *const family_names[] = { [LMQ_FAMILY_GPT2] = "gpt2", [LMQ_FAMILY_LLAMA] = "llama" };
static const char *const rope_names[] = { [LMQ_ROPE_NONE] = "none", [LMQ_ROPE_INTERLEAVED] = "interleaved",
                                          [LMQ_ROPE_HALF] = "half" };
static const char *const tok_names[] = { [LMQ_TOK_NONE] = "none", [LMQ_TOK_LLAMA2C] = "llama2c",
                                         [LMQ_TOK_GPT2] = "gpt2", [LMQ_TOK_HF_JSON] = "hf_json",
                                         [LMQ_TOK_SPM] = "sentencepiece" };

static const lmq_yf_field arch_fields[] = {
    YF_KEY("family", YF_ENUM, lmq_arch, family, YF_NAMES(family_names)),
    YF_KEY("dim", YF_INT, lmq_arch, dim),
    YF_KEY("hidden_dim", YF_INT, lmq_arch, hidden_dim),
    YF_KEY("n_layers", YF_INT, lmq_arch, n_layers),
    YF_KEY("n_heads", YF_INT, lmq_arch, n_heads),
    YF_KEY("n_kv_heads", YF_INT, lmq_arch, n_kv_heads),
    YF_KEY("vocab_size", YF_INT, lmq_arch, vocab_size),
    YF_KEY("max_seq", YF_INT, lmq_arch, max_seq),
    YF_KEY("norm_eps", YF_REAL, lmq_arch, norm_eps),
    YF_KEY("rope_theta", YF_REAL, lmq_arch, rope_theta),
    YF_KEY("tied_embedding", YF_BOOL, lmq_arch, tied_embedding),
    YF_KEY("rope", YF_ENUM, lmq_arch, rope, YF_NAMES(rope_names)),
    YF_KEY("tokenizer", YF_ENUM, lmq_arch, tokenizer, YF_NAMES(tok_names)),
    YF_KEY("bos_id", YF_INT, lmq_arch, bos_id),
    YF_KEY("eos_id", YF_INT, lmq_arch, eos_id),
};
static const lmq_yf_table arch_table = YF_TABLE(arch_fields);

static const lmq_yf_field source_fields[] = {
    YF_KEY("path", YF_TEXT, lmq_manifest, source),
    YF_KEY("checksum", YF_HEX, lmq_manifest, source_checksum),
    YF_KEY("notes", YF_TEXT, lmq_manifest, source_notes, .flags = YF_LITERAL),
};
static const lmq_yf_table source_table = YF_TABLE(source_fields);

static const lmq_yf_field recipe_fields[] = {
    YF_KEY("checksum", YF_HEX, lmq_manifest, recipe_checksum),
    YF_KEY("text", YF_TEXT, lmq_manifest, recipe, .flags = YF_LITERAL),
};
static const lmq_yf_table recipe_table = YF_TABLE(recipe_fields);

static const lmq_yf_field calib_fields[] = {
    YF_KEY("source", YF_TEXT, lmq_manifest, calibration),
    YF_KEY("checksum", YF_HEX, lmq_manifest, calibration_checksum),
    YF_KEY("model_checksum", YF_HEX, lmq_manifest, calib_model_checksum, .flags = YF_OPTIONAL),
    YF_KEY("stats_checksum", YF_HEX, lmq_manifest, calib_stats_checksum, .flags = YF_OPTIONAL),
    YF_KEY("windows", YF_INT, lmq_manifest, calib_windows, .flags = YF_OPTIONAL),
    YF_KEY("ctx", YF_INT, lmq_manifest, calib_ctx, .flags = YF_OPTIONAL),
    YF_KEY("tokens", YF_UINT, lmq_manifest, calib_tokens, .flags = YF_OPTIONAL),
};
static const lmq_yf_table calib_table = YF_TABLE(calib_fields);

static const lmq_yf_field lineage_fields[] = {
    YF_KEY("path", YF_TEXT, lmq_manifest, lineage_path),
    YF_KEY("file_checksum", YF_HEX, lmq_manifest, lineage_file_checksum),
    YF_KEY("recipe", YF_TEXT, lmq_manifest, lineage_recipe),
    YF_KEY("recipe_checksum", YF_HEX, lmq_manifest, lineage_recipe_checksum),
    YF_KEY("schemes", YF_TEXT, lmq_manifest, lineage_schemes),
    YF_KEY("bits_per_weight", YF_REAL, lmq_manifest, lineage_bpw),
    YF_KEY("linear_bpw", YF_REAL, lmq_manifest, lineage_linear_bpw),
};
static const lmq_yf_table lineage_table = YF_TABLE(lineage_fields);

static const lmq_yf_field totals_fields[] = {
    YF_KEY("params", YF_UINT, lmq_manifest_totals, params),
    YF_KEY("tensor_bytes", YF_UINT, lmq_manifest_totals, tensor_bytes),
    YF_KEY("linear_params", YF_UINT, lmq_manifest_totals, linear_params),
    YF_KEY("linear_bpw", YF_REAL, lmq_manifest_totals, linear_bpw),
};
static const lmq_yf_table totals_table = YF_TABLE(totals_fields);

static const lmq_yf_field stats_fields[] = {
    YF_KEY("peak_abs", YF_REAL, lmq_manifest_tensor, stats.peak),
    YF_KEY("rms", YF_REAL, lmq_manifest_tensor, stats.rms),
    YF_KEY("excess_kurtosis", YF_REAL, lmq_manifest_tensor, stats.kurtosis),
};
static const lmq_yf_table stats_table = YF_TABLE(stats_fields);

const char *const lmq_method_names[LMQ_METHOD_COUNT] = { "rtn", "gptq", "awq", "imatrix" };
static const lmq_yf_field tensor_calib_fields[] = {
    YF_KEY("method", YF_ENUM, lmq_manifest_calib, method, .names = lmq_method_names, .n_names = LMQ_METHOD_COUNT),
    YF_KEY("damp", YF_REAL, lmq_manifest_calib, damp, .flags = YF_OPTIONAL),
    YF_KEY("damp_used", YF_REAL, lmq_manifest_calib, damp_used, .flags = YF_OPTIONAL),
    YF_KEY("block", YF_UINT, lmq_manifest_calib, block, .flags = YF_OPTIONAL),
    YF_KEY("act_order", YF_BOOL, lmq_manifest_calib, act_order, .flags = YF_OPTIONAL),
    YF_KEY("awq_ratio", YF_REAL, lmq_manifest_calib, awq_ratio, .flags = YF_OPTIONAL),
    YF_KEY("clip_mean", YF_REAL, lmq_manifest_calib, clip_mean, .flags = YF_OPTIONAL),
    YF_KEY("clip_min", YF_REAL, lmq_manifest_calib, clip_min, .flags = YF_OPTIONAL),
    YF_KEY("smoothquant_alpha", YF_REAL, lmq_manifest_calib, smooth_alpha, .flags = YF_OPTIONAL),
    YF_KEY("note", YF_STR, lmq_manifest_calib, note, .flags = YF_OPTIONAL),
    YF_KEY("output_error_rtn", YF_REAL, lmq_manifest_calib, out_error_rtn, .flags = YF_OPTIONAL),
    YF_KEY("output_error", YF_REAL, lmq_manifest_calib, out_error, .flags = YF_OPTIONAL),
};
static const lmq_yf_table tensor_calib_table = YF_TABLE(tensor_calib_fields);
/* scheme's names have no entry for none: an absent key is none, a present one names a scheme. */
static const lmq_yf_field act_fields[] = {
    YF_KEY("scheme", YF_ENUM, lmq_act, scheme, YF_NAMES(lmq_act_scheme_names)),
    YF_KEY("granularity", YF_ENUM, lmq_act, gran, YF_NAMES(lmq_act_gran_names)),
};
static const lmq_yf_table act_table = YF_TABLE(act_fields);

static const lmq_yf_field tensor_fields[] = {
    YF_KEY("name", YF_STR, lmq_manifest_tensor, name),
    YF_KEY("scheme", YF_STR, lmq_manifest_tensor, scheme),
    YF_KEY("dtype", YF_ENUM, lmq_manifest_tensor, q.dtype, .names = &lmq_encodings[0].name, .n_names = LMQ_T_COUNT,
        .stride = sizeof(lmq_encoding)),
    YF_KEY("granularity", YF_ENUM, lmq_manifest_tensor, q.gran, .names = lmq_gran_names, .n_names = 4),
    YF_KEY("group", YF_UINT, lmq_manifest_tensor, q.group),
    YF_KEY("asymmetric", YF_BOOL, lmq_manifest_tensor, q.asym),
    YF_KEY("linear", YF_BOOL, lmq_manifest_tensor, linear),
    YF_KEY("bits", YF_UINT, lmq_manifest_tensor, bits),
    YF_KEY("bits_per_weight", YF_REAL, lmq_manifest_tensor, bpw),
    YF_KEY("rel_error", YF_REAL, lmq_manifest_tensor, stats.rel_error),
    { .key = "stats", .k = YF_MAP, .sub = &stats_table },
    YF_KEY("reason", YF_STR, lmq_manifest_tensor, reason, .flags = YF_OPTIONAL),
    YF_KEY("calibration", YF_MAP, lmq_manifest_tensor, calib, .sub = &tensor_calib_table, .flags = YF_OPTIONAL),
    YF_KEY("activations", YF_MAP, lmq_manifest_tensor, act, .sub = &act_table, .flags = YF_OPTIONAL),
};
static const lmq_yf_table tensor_table = YF_TABLE(tensor_fields);

static const lmq_yf_field file_fields[] = {
    YF_KEY("name", YF_STR, lmq_manifest_file, name),
    YF_KEY("bytes", YF_UINT, lmq_manifest_file, size),
};
static const lmq_yf_table file_table = YF_TABLE(file_fields);

/* Maps whose keys live directly in lmq_manifest have off 0. */
static const char *const kind_names[] = { [LMQ_KIND_MODEL] = "model", [LMQ_KIND_STATS] = "stats" };
static const lmq_yf_field top_fields[] = {
    YF_KEY("format_version", YF_UINT, lmq_manifest, format_version),
    YF_KEY("tool_version", YF_STR, lmq_manifest, tool_version),
    YF_KEY("kind", YF_ENUM, lmq_manifest, kind, YF_NAMES(kind_names), .flags = YF_OPTIONAL),
    { .key = "architecture", .k = YF_MAP, .off = offsetof(lmq_manifest, arch), .sub = &arch_table },
    { .key = "source", .k = YF_MAP, .sub = &source_table },
    { .key = "recipe", .k = YF_MAP, .sub = &recipe_table, .flags = YF_OPTIONAL,
      .present_off = offsetof(lmq_manifest, recipe) },
    { .key = "calibration", .k = YF_MAP, .sub = &calib_table, .flags = YF_OPTIONAL,
      .present_off = offsetof(lmq_manifest, calibration) },
    { .key = "lineage", .k = YF_MAP, .sub = &lineage_table, .flags = YF_OPTIONAL,
      .present_off = offsetof(lmq_manifest, lineage_path) },
    { .key = "totals", .k = YF_MAP, .off = offsetof(lmq_manifest, totals), .sub = &totals_table },
    { .key = "tensors", .k = YF_SEQ, .off = offsetof(lmq_manifest, tensors), .size = sizeof(lmq_manifest_tensor),
      .sub = &tensor_table, .count_off = offsetof(lmq_manifest, n_tensors), .cap_off = offsetof(lmq_manifest, cap_tensors) },
    { .key = "files", .k = YF_SEQ, .off = offsetof(lmq_manifest, files), .size = sizeof(lmq_manifest_file),
      .sub = &file_table, .count_off = offsetof(lmq_manifest, n_files), .cap_off = offsetof(lmq_manifest, cap_files) },
};
static const lmq_yf_table top_table = YF_TABLE(top_fields);


/* ---- the struct ---- */

void lmq_manifest_init(lmq_manifest *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->tool_version, sizeof m->tool_version, "%s", LMQ_TOOL_VERSION);
    m->format_version = LMQ_CONTAINER_VERSION;
    m->arch.bos_id = m->arch.eos_id = -1;
}

void lmq_manifest_free(lmq_manifest *m)
{
    free(m->source);
    free(m->source_notes);
    free(m->recipe);
    free(m->calibration);
    free(m->lineage_path);
    free(m->lineage_recipe);
    free(m->lineage_schemes);
    free(m->tensors);
    free(m->files);
    memset(m, 0, sizeof *m);
}

lmq_code lmq_manifest_set(char **dst, const char *s, lmq_err *err)
{
    char *copy = NULL;
    if (s && !(copy = strdup(s)))
        return lmq_fail(err, LMQ_E_NOMEM, "manifest: out of memory");
    free(*dst);
    *dst = copy;
    return LMQ_OK;
}


lmq_code lmq_manifest_add_tensor(lmq_manifest *m, const char *name, lmq_manifest_tensor **out, lmq_err *err)
{
    if (strlen(name) >= LMQ_NAME_MAX)
        return lmq_fail(err, LMQ_E_ARG, "manifest: tensor name too long: %.40s...", name);
    lmq_manifest_tensor *t = lmq_yf_grow(m, lmq_yf_find(&top_table, "tensors"));
    if (!t)
        return lmq_fail(err, LMQ_E_NOMEM, "manifest: out of memory");
    snprintf(t->name, sizeof t->name, "%s", name);
    if (out)
        *out = t;
    return LMQ_OK;
}

lmq_code lmq_manifest_add_file(lmq_manifest *m, const char *name, uint64_t size, lmq_err *err)
{
    if (strlen(name) >= LMQ_NAME_MAX)
        return lmq_fail(err, LMQ_E_ARG, "manifest: file name too long: %.40s...", name);
    lmq_manifest_file *f = lmq_yf_grow(m, lmq_yf_find(&top_table, "files"));
    if (!f)
        return lmq_fail(err, LMQ_E_NOMEM, "manifest: out of memory");
    snprintf(f->name, sizeof f->name, "%s", name);
    f->size = size;
    return LMQ_OK;
}

const lmq_manifest_tensor *lmq_manifest_find(const lmq_manifest *m, const char *name)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, name))
            return &m->tensors[i];
    return NULL;
}

int lmq_is_linear(const char *name, int ndim)
{
    return ndim == 2 && !strncmp(name, "blk.", 4);
}

lmq_code lmq_manifest_add_plain(lmq_manifest *m, const lmq_tensor *t, const float *values, lmq_err *err)
{
    lmq_manifest_tensor *e;
    lmq_code c = lmq_manifest_add_tensor(m, t->name, &e, err);
    if (c)
        return c;
    snprintf(e->scheme, sizeof e->scheme, "%s", lmq_encoding_of(LMQ_T_F32)->name);
    e->q = (lmq_qparams){ .dtype = LMQ_T_F32, .gran = LMQ_GRAN_NONE };
    e->linear = lmq_is_linear(t->name, t->ndim);
    e->bits = 32 * (uint64_t)lmq_tensor_numel(t);
    e->bpw = 32;
    e->act = t->act;
    lmq_tensor_stats(values, NULL, (size_t)lmq_tensor_numel(t), &e->stats);
    snprintf(e->reason, sizeof e->reason, "plain conversion: no recipe applied");
    return LMQ_OK;
}

lmq_code lmq_manifest_describe(lmq_manifest *m, const lmq_model *mod, lmq_err *err)
{
    m->arch = mod->arch;
    m->source_checksum = mod->source_checksum;
    lmq_code c;
    if ((c = lmq_manifest_set(&m->source, mod->source, err)) ||
        (c = lmq_manifest_set(&m->source_notes, mod->notes, err)))
        return c;
    for (int i = 0; i < mod->n_files && !c; i++)
        c = lmq_manifest_add_file(m, mod->files[i].name, mod->files[i].size, err);
    return c;
}

lmq_code lmq_manifest_from_model(const lmq_model *mod, lmq_manifest *out, lmq_err *err)
{
    lmq_manifest_init(out);
    lmq_code c = lmq_manifest_describe(out, mod, err);
    for (int i = 0; i < mod->n_tensors && !c; i++)
        c = lmq_manifest_add_plain(out, &mod->tensors[i], mod->tensors[i].data, err);
    if (c)
        lmq_manifest_free(out);
    return c;
}

/* ---- emitting ---- */

lmq_code lmq_manifest_emit(const lmq_manifest *m, char **text, size_t *len, lmq_err *err)
{
    return lmq_yf_emit(&top_table, m, "manifest", text, len, err);
}

/* ---- parsing ---- */

/* "manifest: <key path>: <message>"; manifest messages name no line. */
static lmq_code report(const lmq_yf_reader *r, lmq_code code, const yaml_node_t *at, const char *path,
                       const char *msg)
{
    (void)at;
    if (!*path)
        return lmq_fail(r->err, code, "manifest: %s", msg);
    return lmq_fail(r->err, code, "manifest: %s: %s", path, msg);
}

/* Deeper than any manifest is (top > tensors > entry > stats). */
#define MAX_DEPTH 8

lmq_code lmq_manifest_parse(const char *text, size_t len, lmq_manifest *out, lmq_err *err)
{
    memset(out, 0, sizeof *out);
    yaml_document_t doc;
    lmq_code c = lmq_yaml_load(text, len, "manifest", MAX_DEPTH, LMQ_E_FORMAT, &doc, err);
    if (c)
        return c;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    lmq_yf_reader r = { .doc = &doc, .code = LMQ_E_FORMAT, .report = report, .err = err };
    c = root ? lmq_yf_read_map(&r, &top_table, out, root, "", root) : lmq_fail(err, LMQ_E_FORMAT, "manifest: empty");
    yaml_document_delete(&doc);
    if (c)
        lmq_manifest_free(out);
    return c;
}

/* ---- checking against the index ---- */

typedef struct {
    lmq_issue_fn fn;
    void *ctx;
    int count;
} issues;

static void issue(issues *is, const char *tensor, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void issue(issues *is, const char *tensor, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    is->count++;
    if (is->fn)
        is->fn(is->ctx, tensor, LMQ_E_FORMAT, msg);
}

/* A name from a table, for values that did not come through the parser. */
static int known(const char *const *names, unsigned n, unsigned v)
{
    return v < n && names[v];
}

static const char *name_of(const char *const *names, unsigned n, unsigned v)
{
    return known(names, n, v) ? names[v] : "?";
}

static int near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b));
}

lmq_manifest_totals lmq_manifest_totals_of(const lmq_manifest *m, const lmq_tensor_entry *index, int n)
{
    lmq_manifest_totals t = { 0 };
    uint64_t linear_bits = 0;
    for (int i = 0; i < n; i++) {
        const lmq_tensor_entry *e = &index[i];
        if (lmq_entry_is_file(e))
            continue;
        uint64_t numel = (uint64_t)lmq_entry_numel(e);
        t.params += numel;
        t.tensor_bytes += e->raw_size;
        if (lmq_is_linear(e->name, e->ndim)) {
            const lmq_manifest_tensor *mt = lmq_manifest_find(m, e->name);
            t.linear_params += numel;
            linear_bits += mt ? mt->bits : 8 * e->raw_size;
        }
    }
    t.linear_bpw = t.linear_params ? (double)linear_bits / (double)t.linear_params : 0;
    return t;
}

static int find_entry(const lmq_tensor_entry *index, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(index[i].name, name))
            return i;
    return -1;
}

static void check_arch(issues *is, const lmq_arch *a)
{
    lmq_err e;
    if (lmq_arch_validate(a, &e))
        issue(is, NULL, "%s", e.msg);
}

lmq_code lmq_manifest_check_tensors(const lmq_manifest *m, const lmq_tensor_entry *index, int n, lmq_err *err)
{
    if (m->kind != LMQ_KIND_MODEL)
        return lmq_arch_validate(&m->arch, err);
    lmq_model d; /* the stored tensors' names and shapes, without values */
    lmq_model_init(&d);
    d.arch = m->arch;
    lmq_code c = LMQ_OK;
    for (int k = 0; k < n && !c; k++)
        if (!lmq_entry_is_file(&index[k]))
            c = lmq_model_add_view(&d, index[k].name, index[k].ndim, index[k].shape, index[k].q, NULL,
                                   index[k].raw_size, NULL, NULL, err);
    if (!c)
        c = lmq_model_validate(&d, err);
    lmq_model_free(&d);
    return c;
}

/* One message per field that differs, so the line says exactly what disagrees. */
static void check_encoding(issues *is, const char *name, lmq_qparams m, lmq_qparams x)
{
    if (m.dtype != x.dtype)
        issue(is, name, "dtype: manifest %s, index %s",
              lmq_encoding_of(m.dtype) ? lmq_encoding_of(m.dtype)->name : "?", lmq_encoding_of(x.dtype)->name);
    if (m.gran != x.gran)
        issue(is, name, "granularity: manifest %s, index %s", name_of(lmq_gran_names, 4, m.gran),
              lmq_gran_names[x.gran]);
    if (m.group != x.group)
        issue(is, name, "group: manifest %u, index %u", (unsigned)m.group, (unsigned)x.group);
    if (m.asym != x.asym)
        issue(is, name, "asymmetric: manifest %s, index %s", m.asym ? "true" : "false", x.asym ? "true" : "false");
}

/* The schema's ranges for a tensor's statistics. Excess kurtosis is >= -2 exactly (m4 >= m2^2);
 * the slack absorbs the rounding of a two-valued tensor's moments. */
static const struct {
    const char *key;
    size_t off;
    double min, slack;
} stat_ranges[] = {
    { "rel_error", offsetof(lmq_stats, rel_error), 0, 0 },
    { "stats.peak_abs", offsetof(lmq_stats, peak), 0, 0 },
    { "stats.rms", offsetof(lmq_stats, rms), 0, 0 },
    { "stats.excess_kurtosis", offsetof(lmq_stats, kurtosis), -2, 1e-9 },
};

static void check_tensor(issues *is, const lmq_manifest_tensor *t, const lmq_tensor_entry *e)
{
    const lmq_stats *st = &t->stats;
    check_encoding(is, t->name, t->q, e->q);
    if (!t->scheme[0])
        issue(is, t->name, "no scheme named");
    /* The exact bit count must be what the stored bytes hold, padded to a whole byte. */
    if ((t->bits + 7) / 8 != e->raw_size)
        issue(is, t->name, "bits %" PRIu64 " do not fill the %" PRIu64 " stored bytes", t->bits, e->raw_size);
    double bpw = (double)t->bits / (double)lmq_entry_numel(e);
    if (!near(t->bpw, bpw))
        issue(is, t->name, "bits_per_weight %g, bits / elements is %g", t->bpw, bpw);
    if (t->linear != lmq_is_linear(e->name, e->ndim))
        issue(is, t->name, "linear is %s, should be %s", t->linear ? "true" : "false",
              lmq_is_linear(e->name, e->ndim) ? "true" : "false");
    for (size_t i = 0; i < YF_LEN(stat_ranges); i++) {
        const double v = *(const double *)((const char *)st + stat_ranges[i].off);
        if (!(v >= stat_ranges[i].min - stat_ranges[i].slack) || !isfinite(v))
            issue(is, t->name, "%s is %g: the schema wants a finite number >= %g", stat_ranges[i].key, v,
                  stat_ranges[i].min);
    }
    const lmq_manifest_calib *k = &t->calib;
    if ((unsigned)k->method >= LMQ_METHOD_COUNT || !(k->damp >= 0) || !(k->damp_used >= k->damp) ||
        !(k->awq_ratio >= 0 && k->awq_ratio < 1) || !(k->clip_min >= 0 && k->clip_min <= k->clip_mean + 1e-12) ||
        !(k->clip_mean <= 1) || !(k->smooth_alpha >= 0 && k->smooth_alpha <= 1) || !(k->out_error_rtn >= 0) ||
        !(k->out_error >= 0))
        issue(is, t->name, "calibration values out of range (method %u, damp %g / %g, awq_ratio %g, clip %g / %g, "
              "smoothquant_alpha %g, output_error %g / %g)", (unsigned)k->method, k->damp, k->damp_used, k->awq_ratio,
              k->clip_mean, k->clip_min, k->smooth_alpha, k->out_error_rtn, k->out_error);
    if (e->q.dtype == LMQ_T_F32 && !t->reason[0])
        issue(is, t->name, "left at fp32 without a reason");
    if (e->q.dtype != LMQ_T_F32 && t->reason[0])
        issue(is, t->name, "has a reason for staying fp32 but is %s", lmq_encoding_of(e->q.dtype)->name);
    if (t->act.scheme != LMQ_ACT_NONE && e->ndim != 2)
        issue(is, t->name, "activations: only the input of a matrix (a linear layer) is quantised; this is %d-D",
              e->ndim);
    if (!known(lmq_act_scheme_names, LMQ_ACT_COUNT, t->act.scheme) && t->act.scheme != LMQ_ACT_NONE)
        issue(is, t->name, "activations: unknown scheme %u", (unsigned)t->act.scheme);
    if (!known(lmq_act_gran_names, LMQ_ACT_GRAN_COUNT, t->act.gran))
        issue(is, t->name, "activations: unknown granularity %u", (unsigned)t->act.gran);
    else if (t->act.scheme < LMQ_ACT_COUNT && e->ndim == 2) {
        lmq_err why = { 0 };
        if (lmq_act_check(t->act, &e->q, e->shape[1], &why))
            issue(is, t->name, "%s", why.msg);
    }
}

int lmq_manifest_check(const lmq_manifest *m, const lmq_tensor_entry *index, int n, uint32_t format_version,
                       lmq_issue_fn fn, void *ctx)
{
    issues is = { fn, ctx, 0 };
    int *used = calloc((size_t)n + 1, sizeof *used);
    if (!used) {
        issue(&is, NULL, "out of memory");
        return is.count;
    }
    if (m->format_version != format_version)
        issue(&is, NULL, "format_version %u, the container is version %u", m->format_version, format_version);
    if (!m->tool_version[0])
        issue(&is, NULL, "tool_version is empty");
    check_arch(&is, &m->arch);
    if (m->recipe && XXH3_64bits(m->recipe, strlen(m->recipe)) != m->recipe_checksum)
        issue(&is, NULL, "recipe.checksum does not match the recipe text");
    for (int i = 0; i < m->n_tensors; i++) {
        const lmq_manifest_tensor *t = &m->tensors[i];
        int k = find_entry(index, n, t->name);
        if (k < 0)
            issue(&is, t->name, "in the manifest but not in the index");
        else if (used[k]++)
            issue(&is, t->name, "listed twice in the manifest");
        else if (lmq_entry_is_file(&index[k]))
            issue(&is, t->name, "is a carried file, not a tensor");
        else
            check_tensor(&is, t, &index[k]);
    }
    for (int i = 0; i < m->n_files; i++) {
        char name[LMQ_NAME_MAX + 8];
        snprintf(name, sizeof name, LMQ_FILE_PREFIX "%s", m->files[i].name);
        int k = find_entry(index, n, name);
        if (k < 0)
            issue(&is, name, "carried file in the manifest but not in the index");
        else if (used[k]++)
            issue(&is, name, "listed twice in the manifest");
        else if (!lmq_entry_is_file(&index[k]) || index[k].raw_size != m->files[i].size)
            issue(&is, name, "manifest says a %" PRIu64 "-byte file, index holds %s of %" PRIu64 " bytes",
                  m->files[i].size, lmq_entry_is_file(&index[k]) ? "a file" : "a tensor", index[k].raw_size);
    }
    for (int k = 0; k < n; k++)
        if (!used[k])
            issue(&is, index[k].name, "%s", lmq_entry_is_file(&index[k]) ? "carried file has no files entry"
                                                                           : "has no manifest entry");
    free(used);
    lmq_manifest_totals want = lmq_manifest_totals_of(m, index, n);
    const lmq_manifest_totals *got = &m->totals;
    if (got->params != want.params || got->tensor_bytes != want.tensor_bytes ||
        got->linear_params != want.linear_params || !near(got->linear_bpw, want.linear_bpw))
        issue(&is, NULL,
              "totals (params %" PRIu64 ", tensor_bytes %" PRIu64 ", linear_params %" PRIu64 ", linear_bpw %g) "
              "disagree with the index (%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %g)",
              got->params, got->tensor_bytes, got->linear_params, got->linear_bpw, want.params, want.tensor_bytes,
              want.linear_params, want.linear_bpw);
    return is.count;
}
