/* Audit policies (audit/policy.h). The keys table below is the whole language: one row per key
 * with the yaml_fields row that reads it and the check that applies it. */
#include "audit/policy.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/file.h"
#include "common/glob.h"
#include "common/yaml_doc.h"
#include "common/yaml_fields.h"
#include "schemes/scheme.h"

#define MAX_ALLOW 16
#define MAX_REQUIRE 8
#define PATH_LEN 1024

typedef struct {
    char tensors[LMQ_NAME_MAX];              /* glob over canonical names (lmq_glob_match) */
    unsigned long line;                      /* of its tensors key in the policy file */
    char allow[MAX_ALLOW][LMQ_SCHEME_MAX];   /* encoding names ("int4") or whole schemes ("int4 g32") */
    int n_allow;
} scheme_rule;

struct lmq_policy {
    char *path;
    scheme_rule *schemes;
    int n_schemes, cap_schemes;
    double max_bpw, max_linear_bpw, max_rel_error; /* NAN: not set */
    char require[MAX_REQUIRE][32];
    int n_require;
    uint64_t source_checksum;
    int has_source_checksum;
    char tensors_like[PATH_LEN];
    lmq_mdoc ref; /* read when tensors_like is set */
    int min_version[3], has_min_version;
    vr_require verification; /* its text_checksum points at verification_text */
    char verification_text[17];
    int has_verification;
};

/* ---- problems ---- */

typedef struct {
    const lmq_policy *p;
    lmq_issue_fn fn;
    void *ctx;
    int count;
} issues;

__attribute__((format(printf, 4, 5))) static void issue(issues *is, const char *tensor, const char *key,
                                                        const char *fmt, ...)
{
    char msg[700];
    int k = snprintf(msg, sizeof msg, "%s: %s: ", is->p->path, key);
    va_list ap;
    va_start(ap, fmt);
    if (k > 0 && (size_t)k < sizeof msg)
        vsnprintf(msg + k, sizeof msg - (size_t)k, fmt, ap);
    va_end(ap);
    is->count++;
    if (is->fn)
        is->fn(is->ctx, tensor, LMQ_E_RECIPE, msg);
}

/* ---- reading: "<policy>:<line>: <key>: <message>" ---- */

static lmq_code report(const lmq_yf_reader *r, lmq_code code, const yaml_node_t *at, const char *path,
                       const char *msg)
{
    const lmq_policy *p = r->ctx;
    unsigned long line = at ? (unsigned long)at->start_mark.line + 1 : 1;
    if (!*path)
        return lmq_fail(r->err, code, "%s:%lu: %s", p->path, line, msg);
    return lmq_fail(r->err, code, "%s:%lu: %s: %s", p->path, line, path, msg);
}

/* A scalar into dst (size n) as a C string, or the reader's error. */
static lmq_code scalar(const lmq_yf_reader *r, const yaml_node_t *v, char *dst, size_t n, const char *path)
{
    if (!v || v->type != YAML_SCALAR_NODE)
        return r->report(r, r->code, v, path, "expected a value");
    size_t len = v->data.scalar.length;
    if (!len || len >= n || memchr(v->data.scalar.value, 0, len))
        return r->report(r, r->code, v, path, "empty or too long");
    memcpy(dst, v->data.scalar.value, len);
    dst[len] = '\0';
    return LMQ_OK;
}

/* A list of names (or one name) into rows of width bytes, at most max. */
static lmq_code names(const lmq_yf_reader *r, yaml_node_t *v, const char *path, char *dst, size_t width, int max,
                      int *n)
{
    *n = 0;
    if (v && v->type == YAML_SCALAR_NODE)
        return (*n = 1, scalar(r, v, dst, width, path));
    if (!v || v->type != YAML_SEQUENCE_NODE || v->data.sequence.items.top == v->data.sequence.items.start)
        return r->report(r, r->code, v, path, "expected a name or a non-empty list of names");
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
        if (*n == max)
            return r->report(r, r->code, v, path, "too many names");
        lmq_code c = scalar(r, yaml_document_get_node(r->doc, *it), dst + (size_t)*n * width, width, path);
        if (c)
            return c;
        (*n)++;
    }
    return LMQ_OK;
}

#define PARSE(fn)                                                                                              \
    static lmq_code fn(const lmq_yf_reader *r, const lmq_yf_field *f, const yaml_node_t *map,                 \
                       const yaml_node_t *key, yaml_node_t *v, void *base, const char *path)

PARSE(parse_tensors)
{
    (void)f, (void)map;
    scheme_rule *s = base;
    s->line = (unsigned long)key->start_mark.line + 1;
    return scalar(r, v, s->tensors, sizeof s->tensors, path);
}

PARSE(parse_allow)
{
    (void)f, (void)map, (void)key;
    scheme_rule *s = base;
    return names(r, v, path, s->allow[0], sizeof s->allow[0], MAX_ALLOW, &s->n_allow);
}

/* Sections `require` can name, and how to see one in a manifest. */
static int has_recipe(const lmq_manifest *m) { return m->recipe != NULL; }
static int has_calibration(const lmq_manifest *m) { return m->calibration != NULL; }
static int has_stats(const lmq_manifest *m) { return m->calib_stats_checksum != 0; }
static int has_tokenizer(const lmq_manifest *m) { return m->arch.tokenizer != LMQ_TOK_NONE && m->n_files > 0; }
static const struct {
    const char *name;
    int (*present)(const lmq_manifest *);
} sections[] = {
    { "recipe", has_recipe },
    { "calibration", has_calibration },
    { "calibration_stats", has_stats },
    { "tokenizer", has_tokenizer },
};

static int section_of(const char *name)
{
    for (int i = 0; i < (int)YF_LEN(sections); i++)
        if (!strcmp(sections[i].name, name))
            return i;
    return -1;
}

PARSE(parse_require)
{
    (void)f, (void)map, (void)key;
    lmq_policy *p = base;
    lmq_code c = names(r, v, path, p->require[0], sizeof p->require[0], MAX_REQUIRE, &p->n_require);
    for (int i = 0; !c && i < p->n_require; i++)
        if (section_of(p->require[i]) < 0)
            c = r->report(r, r->code, v, path, "unknown section (recipe, calibration, calibration_stats, tokenizer)");
    return c;
}

/* A checksum as manifests and reports write it: 16 hex digits, into out. */
static lmq_code hex16(const lmq_yf_reader *r, yaml_node_t *v, const char *path, char out[17])
{
    char buf[32];
    lmq_code c = scalar(r, v, buf, sizeof buf, path);
    if (c)
        return c;
    if (strlen(buf) != 16 || strspn(buf, "0123456789abcdefABCDEF") != 16)
        return r->report(r, r->code, v, path, "expected 16 hex digits");
    memcpy(out, buf, 17);
    return LMQ_OK;
}

PARSE(parse_checksum)
{
    (void)f, (void)map, (void)key;
    lmq_policy *p = base;
    char hex[17];
    lmq_code c = hex16(r, v, path, hex);
    if (!c) {
        p->source_checksum = strtoull(hex, NULL, 16);
        p->has_source_checksum = 1;
    }
    return c;
}

/* "X.Y.Z" (an "lmq " in front allowed, as tool_version has it); 1 when it reads. */
static int version_of(const char *s, int v[3])
{
    if (!strncmp(s, "lmq ", 4))
        s += 4;
    int n = 0;
    return sscanf(s, "%d.%d.%d%n", &v[0], &v[1], &v[2], &n) == 3 && !s[n] && v[0] >= 0 && v[1] >= 0 && v[2] >= 0;
}

PARSE(parse_version)
{
    (void)f, (void)map, (void)key;
    lmq_policy *p = base;
    char buf[64];
    lmq_code c = scalar(r, v, buf, sizeof buf, path);
    if (c)
        return c;
    if (!version_of(buf, p->min_version))
        return r->report(r, r->code, v, path, "expected a version X.Y.Z");
    p->has_min_version = 1;
    return LMQ_OK;
}

/* `verification`: the record lmq verify --record writes must exist, be current and meet these. */
typedef struct {
    double kl_mean_max, top1_min, dppl_pct_max;
    char text_checksum[17];
} verification_req;
PARSE(parse_text_checksum)
{
    (void)f, (void)map, (void)key;
    return hex16(r, v, path, ((verification_req *)base)->text_checksum);
}

static const lmq_yf_field verification_fields[] = {
    YF_KEY("kl_mean_max", YF_REAL, verification_req, kl_mean_max, .flags = YF_OPTIONAL),
    YF_KEY("top1_min", YF_REAL, verification_req, top1_min, .flags = YF_OPTIONAL),
    YF_KEY("dppl_pct_max", YF_REAL, verification_req, dppl_pct_max, .flags = YF_OPTIONAL),
    YF_KEY("text_checksum", YF_CUSTOM, verification_req, text_checksum, .parse = parse_text_checksum,
           .flags = YF_OPTIONAL),
};
static const lmq_yf_table verification_table = YF_TABLE(verification_fields);

PARSE(parse_verification)
{
    (void)f, (void)map, (void)key;
    lmq_policy *p = base;
    verification_req q = { NAN, NAN, NAN, "" };
    lmq_code c = lmq_yf_read_map(r, &verification_table, &q, v, path, v);
    if (c)
        return c;
    memcpy(p->verification_text, q.text_checksum, sizeof q.text_checksum);
    p->verification = (vr_require){ q.kl_mean_max, q.top1_min, q.dppl_pct_max,
                                    q.text_checksum[0] ? p->verification_text : NULL };
    p->has_verification = 1;
    return LMQ_OK;
}

/* The reference is read now, so that a policy naming a missing one fails to load. */
PARSE(parse_reference)
{
    (void)f, (void)map, (void)key;
    lmq_policy *p = base;
    char rel[PATH_LEN];
    lmq_code c = scalar(r, v, rel, sizeof rel, path);
    if (c)
        return c;
    const char *slash = strrchr(p->path, '/');
    int dir = rel[0] == '/' || !slash ? 0 : (int)(slash - p->path + 1);
    if (snprintf(p->tensors_like, sizeof p->tensors_like, "%.*s%s", dir, p->path, rel) >= (int)sizeof p->tensors_like)
        return r->report(r, r->code, v, path, "path too long");
    lmq_err e = { 0 };
    if ((c = lmq_mdoc_load(p->tensors_like, &p->ref, &e)))
        return r->report(r, c == LMQ_E_NOMEM ? c : r->code, v, path, e.msg);
    return LMQ_OK;
}

/* ---- the checks, one per key ---- */

typedef void (*check_fn)(const lmq_policy *p, const lmq_audit_subject *s, issues *is);

/* Whether rule r allows the scheme `scheme` of encoding q. */
static int allowed(const scheme_rule *r, const lmq_qparams *q, const char *scheme)
{
    const lmq_encoding *e = lmq_encoding_of(q->dtype);
    for (int i = 0; i < r->n_allow; i++)
        if (!strcmp(r->allow[i], scheme) || (e && !strcmp(r->allow[i], e->name)))
            return 1;
    return 0;
}

/* The first rule whose pattern matches a tensor decides it; a tensor none matches is free. A
 * tensor's scheme is the index's encoding, described (never the manifest's free-text scheme:
 * the base check holds the manifest's encoding to the index's, not that text). A rule whose
 * pattern matches no tensor of the artefact is a mistake in the policy, named by its line. */
static void check_schemes(const lmq_policy *p, const lmq_audit_subject *s, issues *is)
{
    const lmq_mdoc *d = s->doc;
    for (int k = 0; k < p->n_schemes; k++) {
        int matched = 0;
        for (int i = 0; i < d->n_index && !matched; i++)
            matched = !lmq_entry_is_file(&d->index[i]) && lmq_glob_match(p->schemes[k].tensors, d->index[i].name);
        if (!matched)
            issue(is, NULL, "schemes", "line %lu: tensors '%s' matches no tensor of the artefact", p->schemes[k].line,
                  p->schemes[k].tensors);
    }
    for (int i = 0; i < d->n_index; i++) {
        const lmq_tensor_entry *t = &d->index[i];
        char scheme[LMQ_SCHEME_MAX];
        for (int k = 0; k < p->n_schemes && !lmq_entry_is_file(t); k++) {
            const scheme_rule *r = &p->schemes[k];
            if (!lmq_glob_match(r->tensors, t->name))
                continue;
            if (!allowed(r, &t->q, q_describe(&t->q, scheme, sizeof scheme))) {
                char list[MAX_ALLOW * (LMQ_SCHEME_MAX + 2)] = "";
                for (int a = 0; a < r->n_allow; a++)
                    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", a ? ", " : "", r->allow[a]);
                issue(is, t->name, "schemes", "is '%s'; tensors '%s' allow %s", scheme, r->tensors, list);
            }
            break;
        }
    }
}

static void check_max_bpw(const lmq_policy *p, const lmq_audit_subject *s, issues *is)
{
    const lmq_manifest *m = &s->doc->man;
    if (isnan(p->max_bpw) || !m->totals.params)
        return;
    uint64_t bits = 0;
    for (int i = 0; i < m->n_tensors; i++)
        bits += m->tensors[i].bits;
    double bpw = (double)bits / (double)m->totals.params;
    if (bpw > p->max_bpw)
        issue(is, NULL, "max_bpw", "the model stores %.4g bits per weight, above %g", bpw, p->max_bpw);
}

static void check_max_linear_bpw(const lmq_policy *p, const lmq_audit_subject *s, issues *is)
{
    double bpw = s->doc->man.totals.linear_bpw;
    if (!isnan(p->max_linear_bpw) && bpw > p->max_linear_bpw)
        issue(is, NULL, "max_linear_bpw", "the linear layers store %.4g bits per weight, above %g", bpw,
              p->max_linear_bpw);
}

static void check_max_rel_error(const lmq_policy *p, const lmq_audit_subject *s, issues *is)
{
    const lmq_manifest *m = &s->doc->man;
    for (int i = 0; !isnan(p->max_rel_error) && i < m->n_tensors; i++)
        if (m->tensors[i].stats.rel_error > p->max_rel_error)
            issue(is, m->tensors[i].name, "max_rel_error", "relative error %.4g, above %g",
                  m->tensors[i].stats.rel_error, p->max_rel_error);
}

static void check_require(const lmq_policy *p, const lmq_audit_subject *s, issues *is)
{
    for (int i = 0; i < p->n_require; i++)
        if (!sections[section_of(p->require[i])].present(&s->doc->man))
            issue(is, NULL, "require", "the manifest has no %s section", p->require[i]);
}

static void check_source_checksum(const lmq_policy *p, const lmq_audit_subject *s, issues *is)
{
    if (p->has_source_checksum && s->doc->man.source_checksum != p->source_checksum)
        issue(is, NULL, "source_checksum", "the source checkpoint is %016" PRIx64 ", the policy pins %016" PRIx64,
              s->doc->man.source_checksum, p->source_checksum);
}

/* A classifier stored as a copy of the token embedding: same encoding, same statistics. */
static int copied_classifier(const lmq_manifest *m)
{
    const lmq_manifest_tensor *o = lmq_manifest_find(m, "output.weight"), *e = lmq_manifest_find(m, "tok_embd.weight");
    return o && e && !strcmp(o->scheme, e->scheme) && o->bits == e->bits && o->stats.peak == e->stats.peak &&
           o->stats.rms == e->stats.rms && o->stats.kurtosis == e->stats.kurtosis;
}

/* Names in `has` missing from `lacks`: output.weight is not missing when `lacks` ties its
 * classifier to the embedding and `has` stores it as a copy of it. */
static void missing(const lmq_manifest *has, const lmq_manifest *lacks, const char *what, issues *is)
{
    for (int i = 0; i < has->n_tensors; i++) {
        const char *n = has->tensors[i].name;
        if (lmq_manifest_find(lacks, n) ||
            (!strcmp(n, "output.weight") && lacks->arch.tied_embedding && copied_classifier(has)))
            continue;
        issue(is, n, "tensors_like", "%s", what);
    }
}

static void check_tensors_like(const lmq_policy *p, const lmq_audit_subject *s, issues *is)
{
    if (!p->tensors_like[0])
        return;
    char what[PATH_LEN + 64];
    snprintf(what, sizeof what, "in %s but not in this artefact", p->tensors_like);
    missing(&p->ref.man, &s->doc->man, what, is);
    snprintf(what, sizeof what, "in this artefact but not in %s", p->tensors_like);
    missing(&s->doc->man, &p->ref.man, what, is);
}

static void check_min_version(const lmq_policy *p, const lmq_audit_subject *s, issues *is)
{
    int v[3];
    const char *tv = s->doc->man.tool_version;
    if (!p->has_min_version)
        return;
    if (!version_of(tv, v)) {
        issue(is, NULL, "min_tool_version", "tool_version '%s' is not 'lmq X.Y.Z'", tv);
        return;
    }
    for (int i = 0; i < 3; i++)
        if (v[i] != p->min_version[i]) {
            if (v[i] < p->min_version[i])
                issue(is, NULL, "min_tool_version", "written by %s, older than %d.%d.%d", tv, p->min_version[0],
                      p->min_version[1], p->min_version[2]);
            return;
        }
}

/* ---- the keys: one row each (name and reader, then check) ---- */

static const lmq_yf_field scheme_rule_fields[] = {
    YF_KEY("tensors", YF_CUSTOM, scheme_rule, tensors, .parse = parse_tensors),
    YF_KEY("allow", YF_CUSTOM, scheme_rule, allow, .parse = parse_allow),
};
static const lmq_yf_table scheme_rule_table = YF_TABLE(scheme_rule_fields);

#define OPT .flags = YF_OPTIONAL
static const struct {
    lmq_yf_field f;
    check_fn check;
} keys[] = {
    { { .key = "schemes", .k = YF_SEQ, .off = offsetof(lmq_policy, schemes), .size = sizeof(scheme_rule),
        .sub = &scheme_rule_table, .count_off = offsetof(lmq_policy, n_schemes),
        .cap_off = offsetof(lmq_policy, cap_schemes), OPT },
      check_schemes },
    { YF_KEY("max_bpw", YF_REAL, lmq_policy, max_bpw, OPT), check_max_bpw },
    { YF_KEY("max_linear_bpw", YF_REAL, lmq_policy, max_linear_bpw, OPT), check_max_linear_bpw },
    { YF_KEY("max_rel_error", YF_REAL, lmq_policy, max_rel_error, OPT), check_max_rel_error },
    { YF_KEY("require", YF_CUSTOM, lmq_policy, require, .parse = parse_require, OPT), check_require },
    { YF_KEY("source_checksum", YF_CUSTOM, lmq_policy, source_checksum, .parse = parse_checksum, OPT),
      check_source_checksum },
    { YF_KEY("tensors_like", YF_CUSTOM, lmq_policy, tensors_like, .parse = parse_reference, OPT),
      check_tensors_like },
    { YF_KEY("min_tool_version", YF_CUSTOM, lmq_policy, min_version, .parse = parse_version, OPT),
      check_min_version },
    /* checked by audit on its own (audit/audit.h), its problems of their own kind */
    { YF_KEY("verification", YF_CUSTOM, lmq_policy, verification, .parse = parse_verification, OPT), NULL },
};

/* Deeper than any policy is (top > schemes > rule > allow). */
#define MAX_DEPTH 8

lmq_code lmq_policy_parse(const char *text, size_t len, const char *path, lmq_policy **out, lmq_err *err)
{
    *out = NULL;
    lmq_policy *p = calloc(1, sizeof *p);
    if (!p || !(p->path = strdup(path))) {
        free(p);
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", path);
    }
    p->max_bpw = p->max_linear_bpw = p->max_rel_error = NAN;
    yaml_document_t doc;
    lmq_code c = lmq_yaml_load(text, len, path, MAX_DEPTH, LMQ_E_RECIPE, &doc, err);
    if (c) {
        lmq_policy_free(p);
        return c;
    }
    lmq_yf_field fields[YF_LEN(keys)];
    for (size_t i = 0; i < YF_LEN(keys); i++)
        fields[i] = keys[i].f;
    const lmq_yf_table table = { fields, (int)YF_LEN(fields) };
    lmq_yf_reader r = { .doc = &doc, .code = LMQ_E_RECIPE, .report = report, .ctx = p, .err = err };
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    c = root ? lmq_yf_read_map(&r, &table, p, root, "", root) : lmq_fail(err, LMQ_E_RECIPE, "%s: empty policy", path);
    yaml_document_delete(&doc);
    if (c) {
        lmq_policy_free(p);
        return c;
    }
    *out = p;
    return LMQ_OK;
}

lmq_code lmq_policy_load(const char *path, lmq_policy **out, lmq_err *err)
{
    *out = NULL;
    lmq_blob b;
    lmq_code c = lmq_blob_open(path, &b, err);
    if (c)
        return c;
    c = lmq_policy_parse((const char *)b.data, b.size, path, out, err);
    lmq_blob_close(&b);
    return c;
}

void lmq_policy_free(lmq_policy *p)
{
    if (!p)
        return;
    lmq_mdoc_free(&p->ref);
    free(p->schemes);
    free(p->path);
    free(p);
}

int lmq_policy_check(const lmq_policy *p, const lmq_audit_subject *s, lmq_issue_fn fn, void *ctx)
{
    issues is = { p, fn, ctx, 0 };
    for (size_t i = 0; i < YF_LEN(keys); i++)
        if (keys[i].check)
            keys[i].check(p, s, &is);
    return is.count;
}

const vr_require *lmq_policy_verification(const lmq_policy *p)
{
    return p->has_verification ? &p->verification : NULL;
}

int lmq_policy_check_base(const lmq_audit_subject *s, lmq_issue_fn fn, void *ctx)
{
    return lmq_manifest_check(&s->doc->man, s->doc->index, s->doc->n_index, s->format_version, fn, ctx);
}
