/* Recipe parser (common/yaml_fields tables over libyaml's document, which keeps every node's
 * line) and resolver. */
#include "quantize/recipe.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <yaml.h>

#include "common/file.h"
#include "common/glob.h"
#include "common/yaml_doc.h"
#include "common/yaml_fields.h"
#include "formats/hf_model.h"
#include "quantize/llmc.h"
#include "quantize/recipe_read.h"
#include "schemes/scheme.h"

/* ---- schemes ---- */

/* What a scheme allows, from its row in the encoding table: float schemes store no scales;
 * fp8 stores one scale per row; integer schemes choose their granularity and symmetry; GGUF's
 * block encodings carry their scales in their blocks (their codes chosen by rtn, imatrix, gptq or awq). */
typedef enum { KIND_FLOAT, KIND_FP8, KIND_INT, KIND_BLOCK } scheme_kind;

static scheme_kind kind_of(const lmq_encoding *s)
{
    return s->block ? KIND_BLOCK : s->integer ? KIND_INT : s->scale_bits ? KIND_FP8 : KIND_FLOAT;
}

/* The granularities a rule may name for encoding s: those of its row that carry scales (none is
 * what a rule of a float scheme gets by giving no granularity), as lmq_gran bits. */
static unsigned scaled_grans(const lmq_encoding *s)
{
    return s->grans & ~(1u << LMQ_GRAN_NONE);
}

/* The names of the granularities in grans, for messages: "tensor, channel or group". */
static const char *gran_list(unsigned grans, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (unsigned g = 0, left = grans; g <= LMQ_GRAN_GROUP && n < size; g++)
        if (left & (1u << g)) {
            left &= ~(1u << g);
            n += (size_t)snprintf(buf + n, size - n, "%s%s", !n ? "" : left ? ", " : " or ", lmq_gran_names[g]);
        }
    return buf;
}

/* llm-compressor's preset schemes (compressed-tensors' quant_scheme.py) as lmq writes them
 * (recipes/README.md): weights symmetric unless _ASYM; W8A8's and W4A8's activations int8 per
 * token, dynamic; FP8_DYNAMIC's fp8 per token, dynamic. FP8's weights are per tensor there, its
 * activations static fp8; lmq's FP8 has a scale per row and is weight-only. */
static const q_preset PRESETS[] = {
    { "W8A16", { LMQ_T_INT8, LMQ_GRAN_CHANNEL, 0, 0 }, { LMQ_ACT_NONE, 0 } },
    { "W4A16", { LMQ_T_INT4, LMQ_GRAN_GROUP, 0, 128 }, { LMQ_ACT_NONE, 0 } },
    { "W4A16_ASYM", { LMQ_T_INT4, LMQ_GRAN_GROUP, 1, 128 }, { LMQ_ACT_NONE, 0 } },
    { "W8A8", { LMQ_T_INT8, LMQ_GRAN_CHANNEL, 0, 0 }, { LMQ_ACT_INT8, LMQ_ACT_TOKEN } },
    { "INT8", { LMQ_T_INT8, LMQ_GRAN_CHANNEL, 0, 0 }, { LMQ_ACT_INT8, LMQ_ACT_TOKEN } },
    { "W4A8", { LMQ_T_INT4, LMQ_GRAN_GROUP, 0, 128 }, { LMQ_ACT_INT8, LMQ_ACT_TOKEN } },
    { "FP8", { LMQ_T_F8_E4M3, LMQ_GRAN_CHANNEL, 0, 0 }, { LMQ_ACT_NONE, 0 } },
    { "FP8_DYNAMIC", { LMQ_T_F8_E4M3, LMQ_GRAN_CHANNEL, 0, 0 }, { LMQ_ACT_FP8_E4M3, LMQ_ACT_TOKEN } },
};

const q_preset *q_preset_find(const char *name)
{
    for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++)
        if (!strcmp(PRESETS[i].name, name))
            return &PRESETS[i];
    return NULL;
}

/* The layer sets of llama-quantize's mixes (llama-quant.cpp), for a block i of n. */
static int more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }
static int first_eighth(int i, int n) { return i < n / 8; }
static int first_sixteenth(int i, int n) { return i < n / 16; }

static const struct {
    const char *name;
    int (*has)(int i, int n);
} LAYER_SETS[] = {
    { "more_bits", more_bits }, /* llama.cpp's use_more_bits: the first and last eighth, every third between */
    { "first_eighth", first_eighth },
    { "first_sixteenth", first_sixteenth },
};
#define N_LAYER_SETS (sizeof LAYER_SETS / sizeof LAYER_SETS[0])

/* ---- parser ---- */

/* "<path>:<line>: <key>: <message>" */
lmq_code perr(pctx *c, int line, const char *key, const char *fmt, ...)
{
    char msg[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return lmq_fail(c->err, LMQ_E_RECIPE, "%s:%d: %s: %s", c->path, line, key, msg);
}

const char *type_name(const yaml_node_t *n)
{
    return n->type == YAML_SEQUENCE_NODE ? "a list" : n->type == YAML_MAPPING_NODE ? "a mapping" : "a string";
}

static int is_plain(const yaml_node_t *n) { return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE; }

/* A scalar's text; a NUL inside it (a "\0" escape) is refused so C strings stay whole. */
lmq_code get_string(pctx *c, const yaml_node_t *n, const char *key, const char **out)
{
    if (n->type != YAML_SCALAR_NODE)
        return perr(c, line_of(n), key, "expected a string, got %s", type_name(n));
    if (strlen(scalar(n)) != n->data.scalar.length)
        return perr(c, line_of(n), key, "contains a NUL character");
    *out = scalar(n);
    return LMQ_OK;
}

lmq_code get_bool(pctx *c, const yaml_node_t *n, const char *key, double *out)
{
    static const char *const T[] = { "true", "True", "TRUE" }, *const F[] = { "false", "False", "FALSE" };
    if (n->type != YAML_SCALAR_NODE)
        return perr(c, line_of(n), key, "expected true or false, got %s", type_name(n));
    for (int i = 0; i < 3 && is_plain(n); i++)
        if (strcmp(scalar(n), T[i]) == 0 || strcmp(scalar(n), F[i]) == 0) {
            *out = strcmp(scalar(n), T[i]) == 0;
            return LMQ_OK;
        }
    return perr(c, line_of(n), key, "expected true or false, got '%s'", scalar(n));
}

/* A plain unsigned decimal integer up to 2^32 - 1 (a double holds each exactly). */
lmq_code get_uint(pctx *c, const yaml_node_t *n, const char *key, double *out)
{
    if (n->type != YAML_SCALAR_NODE)
        return perr(c, line_of(n), key, "expected an integer, got %s", type_name(n));
    const char *s = scalar(n);
    uint64_t v = 0;
    size_t len = strlen(s);
    int ok = is_plain(n) && len > 0 && len <= 10 && len == n->data.scalar.length;
    for (size_t i = 0; ok && i < len; i++) {
        ok = s[i] >= '0' && s[i] <= '9';
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (!ok || v > UINT32_MAX)
        return perr(c, line_of(n), key, "expected an integer, got '%s'", s);
    *out = (double)v;
    return LMQ_OK;
}

/* A plain decimal number (no sign beyond a leading '-', no inf/nan). */
lmq_code get_real(pctx *c, const yaml_node_t *n, const char *key, double *out)
{
    if (n->type != YAML_SCALAR_NODE)
        return perr(c, line_of(n), key, "expected a number, got %s", type_name(n));
    const char *s = scalar(n);
    char *end;
    double v = strtod(s, &end);
    if (!is_plain(n) || !*s || *end || strspn(s, "-+.0123456789eE") != strlen(s) || !isfinite(v))
        return perr(c, line_of(n), key, "expected a number, got '%s'", s);
    *out = v;
    return LMQ_OK;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* Names are canonical tensor names; anything outside their alphabet is a typo or a wildcard
 * lmq does not have ([...], {...}), and is better refused than left to match nothing. */
static int pattern_char_ok(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '_' || ch == '-' || ch == '*' || ch == '?';
}

static lmq_code add_pattern(pctx *c, const yaml_node_t *n, const char *key, q_pattern **arr, int *count)
{
    const char *s;
    lmq_code rc = get_string(c, n, key, &s);
    if (rc)
        return rc;
    if (!*s)
        return perr(c, line_of(n), key, "empty pattern");
    if (strlen(s) >= LMQ_NAME_MAX)
        return perr(c, line_of(n), key, "pattern longer than %d characters", LMQ_NAME_MAX - 1);
    for (const char *p = s; *p; p++)
        if (!pattern_char_ok(*p))
            return perr(c, line_of(n), key,
                        "pattern '%s': character '%c' cannot appear in a tensor name pattern "
                        "(names use letters, digits, '.', '_'; the wildcards are '*' and '?')",
                        s, *p);
    q_pattern *grown = realloc(*arr, (size_t)(*count + 1) * sizeof **arr);
    if (!grown)
        return lmq_fail(c->err, LMQ_E_NOMEM, "%s: out of memory", c->path);
    *arr = grown;
    q_pattern *p = &grown[(*count)++];
    char canon[LMQ_NAME_MAX];
    *p = (q_pattern){ .text = dup_str(s), .line = line_of(n) };
    if (lmq_hf_canonical(s, canon, sizeof canon) && !(p->canon = dup_str(canon)))
        return lmq_fail(c->err, LMQ_E_NOMEM, "%s: out of memory", c->path);
    return p->text ? LMQ_OK : lmq_fail(c->err, LMQ_E_NOMEM, "%s: out of memory", c->path);
}

/* A pattern or a list of patterns. */
lmq_code get_patterns(pctx *c, const yaml_node_t *n, const char *key, q_pattern **arr, int *count)
{
    if (n->type == YAML_SCALAR_NODE)
        return add_pattern(c, n, key, arr, count);
    if (n->type != YAML_SEQUENCE_NODE)
        return perr(c, line_of(n), key, "expected a pattern or a list of patterns, got %s", type_name(n));
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
        const yaml_node_t *item = yaml_document_get_node(c->doc, *it);
        if (!item)
            return perr(c, line_of(n), key, "malformed list");
        if (item->type != YAML_SCALAR_NODE)
            return perr(c, line_of(item), key, "expected a pattern (string), got %s", type_name(item));
        lmq_code rc = add_pattern(c, item, key, arr, count);
        if (rc)
            return rc;
    }
    return LMQ_OK;
}

/* A value named in names[0..n) (NULL entries are not names); *out its index. */
lmq_code get_name(pctx *c, const yaml_node_t *n, const char *key, const char *const *names, int n_names,
                  uint8_t *out)
{
    const char *s;
    lmq_code rc = get_string(c, n, key, &s);
    for (int i = 0; !rc && i < n_names; i++)
        if (names[i] && strcmp(names[i], s) == 0) {
            *out = (uint8_t)i;
            return LMQ_OK;
        }
    if (rc)
        return rc;
    char known[128] = "";
    for (int i = 0; i < n_names; i++)
        if (names[i])
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", *known ? ", " : "", names[i]);
    return perr(c, line_of(n), key, "unknown value '%s' (known: %s)", s, known);
}

/* ---- the walk: common/yaml_fields tables, every value a recipe row (YF_CUSTOM) ---- */

/* The walker's own messages (a mapping that is not one), in "<path>:<line>: <key>: ..." form. */
lmq_code report(const lmq_yf_reader *rd, lmq_code code, const yaml_node_t *at, const char *path,
                const char *msg)
{
    pctx *c = rd->ctx;
    if (code == LMQ_E_NOMEM)
        return lmq_fail(c->err, code, "%s: %s", c->path, msg);
    return perr(c, at ? line_of(at) : 1, *path ? path : "(top)", "%s", msg);
}

lmq_code key_error(const lmq_yf_reader *rd, lmq_yf_key_error what, const lmq_yf_table *t,
                   const yaml_node_t *at, const char *where, const char *key, const yaml_node_t *first)
{
    pctx *c = rd->ctx;
    char path[96];
    if (what == YF_KEY_NOT_STRING)
        return perr(c, line_of(at), *where ? where : "(top)", "a key must be a plain name, got %s", type_name(at));
    snprintf(path, sizeof path, "%s%s%.40s", where, *where ? "." : "", key ? key : scalar(at));
    if (what == YF_KEY_MISSING)
        return perr(c, line_of(at), path, "required key is missing");
    if (what == YF_KEY_TWICE)
        return perr(c, line_of(at), path, "duplicate key (first given at line %d)", line_of(first));
    char known[128] = "";
    for (int j = 0; j < t->n; j++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", j ? ", " : "", t->f[j].key);
    return perr(c, line_of(at), path, "unknown key (known keys: %s)", known);
}

lmq_code read_enum(ROW_ARGS)
{
    return get_name(CTX, v, path, f->names, (int)f->n_names, (uint8_t *)base + f->off);
}

/* activations: {scheme: int8|fp8_e4m3, granularity: token|tensor|block}, both required (block:
 * int8 only, with weights in blocks: lmq_act_check). */
static const lmq_yf_field act_fields[] = {
    ROW("scheme", read_enum, lmq_act, scheme, YF_NAMES(lmq_act_scheme_names)),
    ROW("granularity", read_enum, lmq_act, gran, YF_NAMES(lmq_act_gran_names)),
};
static const lmq_yf_table act_table = YF_TABLE(act_fields);

/* ---- methods ---- */

/* Each method's parameters when a recipe names it without any (quantize/recipe.h). */
const q_method q_method_defaults[LMQ_METHOD_COUNT] = {
    [LMQ_METHOD_RTN] = { .method = LMQ_METHOD_RTN },
    [LMQ_METHOD_GPTQ] = { .method = LMQ_METHOD_GPTQ, .damp = 0.01, .block = 128 },
    [LMQ_METHOD_AWQ] = { .method = LMQ_METHOD_AWQ, .grid = 20, .clip = 1 },
    [LMQ_METHOD_IMATRIX] = { .method = LMQ_METHOD_IMATRIX },
};

static lmq_code parse_method(const lmq_yf_reader *rd, yaml_node_t *n, const char *where, q_method *m);

/* name: the method, whose defaults the parameters after it change. */
static lmq_code read_method_name(ROW_ARGS)
{
    char where[96];
    snprintf(where, sizeof where, "%.*s", (int)(strlen(path) - strlen(".name")), path);
    if (!v)
        return perr(CTX, line_of(map), where, "needs a name (rtn, imatrix, gptq or awq)");
    return parse_method(rd, v, where, base);
}

/* A method parameter's row data: the method it belongs to and how its value reads (widened to a
 * double, exact for every uint32_t and 0/1, so that one range check serves every type). */
typedef struct {
    lmq_method owner;
    lmq_code (*get)(pctx *c, const yaml_node_t *n, const char *key, double *out);
} param_row;

static lmq_code read_param(ROW_ARGS)
{
    const param_row *p = f->data;
    const lmq_method m = ((const q_method *)base)->method;
    double x = 0;
    if (p->owner != m)
        return perr(CTX, line_of(key), path, "is a parameter of %s, not of %s", lmq_method_names[p->owner],
                    lmq_method_names[m]);
    lmq_code rc = p->get(CTX, v, path, &x);
    if (rc)
        return rc;
    if (!(x >= f->lo && x <= f->hi))
        return perr(CTX, line_of(v), path, "%g is outside %g..%g", x, f->lo, f->hi);
    /* The member is a double or a 4-byte integer (uint32_t, or an int holding 0/1: same bytes). */
    _Static_assert(sizeof(int) == sizeof(uint32_t), "an int member takes a uint32_t's bytes");
    const uint32_t u = (uint32_t)x;
    memcpy((char *)base + f->off, f->size == sizeof x ? (const void *)&x : (const void *)&u, f->size);
    return LMQ_OK;
}

/* A method's parameters: one row per key, the method it belongs to, its type and its range. */
#define PARAM(name, member, owner, get_, lo_, hi_)                                                                    \
    ROW(name, read_param, q_method, member, .data = &(const param_row){ LMQ_METHOD_##owner, get_ }, .lo = lo_,       \
        .hi = hi_, .flags = YF_OPTIONAL)
static const lmq_yf_field method_fields[] = {
    ROW("name", read_method_name, q_method, method, .flags = YF_OPTIONAL | YF_ABSENT),
    PARAM("damp", damp, GPTQ, get_real, 1e-6, 10),
    PARAM("block", block, GPTQ, get_uint, 1, 65536),
    PARAM("act_order", act_order, GPTQ, get_bool, 0, 1),
    PARAM("grid", grid, AWQ, get_uint, 1, 1000),
    PARAM("clip", clip, AWQ, get_bool, 0, 1),
};
#undef PARAM
static const lmq_yf_table method_table = YF_TABLE(method_fields);

/* method: NAME, or {name: NAME, <parameter>: <value>, ...}. */
static lmq_code parse_method(const lmq_yf_reader *rd, yaml_node_t *n, const char *where, q_method *m)
{
    if (n->type == YAML_MAPPING_NODE)
        return lmq_yf_read_map(rd, &method_table, m, n, where, n);
    uint8_t i;
    lmq_code rc = get_name(CTX, n, where, lmq_method_names, LMQ_METHOD_COUNT, &i);
    if (!rc)
        *m = q_method_defaults[i];
    return rc;
}

/* ---- rules ---- */

static const lmq_encoding *scheme_of(const q_rule *rule) { return lmq_encoding_of(rule->qp.dtype); }

static lmq_code read_match(ROW_ARGS)
{
    q_rule *rule = base;
    lmq_code rc = get_patterns(CTX, v, path, &rule->match, &rule->n_match);
    if (!rc && rule->n_match == 0)
        return perr(CTX, line_of(v), path, "empty list: a rule must match something");
    return rc;
}

static lmq_code read_scheme(ROW_ARGS)
{
    q_rule *rule = base;
    const char *s;
    lmq_code rc = get_string(CTX, v, path, &s);
    if (rc)
        return rc;
    const q_preset *preset = q_preset_find(s);
    if (preset) {
        rule->qp = preset->qp;
        rule->act = preset->act;
        rule->preset = preset->name;
        return LMQ_OK;
    }
    const lmq_encoding *row = lmq_encoding_find(s);
    if (!row) {
        char known[256], blocks[128] = "", presets[64] = "";
        for (unsigned t = 0; t < LMQ_T_COUNT; t++)
            if (lmq_encodings[t].block)
                snprintf(blocks + strlen(blocks), sizeof blocks - strlen(blocks), "%s%s", *blocks ? ", " : "",
                         lmq_encodings[t].name);
        for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++)
            snprintf(presets + strlen(presets), sizeof presets - strlen(presets), "%s%s", i ? ", " : "",
                     PRESETS[i].name);
        return perr(CTX, line_of(v), path, "unknown scheme '%s' (known: %s; GGUF blocks %s; presets %s)", s,
                    lmq_encoding_names(known, sizeof known), blocks, presets);
    }
    scheme_kind kind = kind_of(row);
    rule->qp.dtype = (uint16_t)row->dtype;
    /* granularity: integer schemes must say; fp8 has one scale per row; float and block schemes none. */
    rule->qp.gran = (uint8_t)(kind == KIND_FP8 ? LMQ_GRAN_CHANNEL : kind == KIND_INT ? 0 : LMQ_GRAN_NONE);
    return LMQ_OK;
}

/* A rule of a block scheme that gives what its blocks fix. */
static lmq_code block_given(const lmq_yf_reader *rd, const q_rule *rule, const yaml_node_t *key, const char *path)
{
    const lmq_encoding *e = scheme_of(rule);
    return perr(CTX, line_of(key), path, "does not apply to %s, a GGUF block encoding: its blocks of %u weights "
                "carry their own scales; give the scheme alone", e->name, e->block);
}

/* A preset brings granularity, group, symmetry and activations; the rule may not restate them. */
static lmq_code preset_given(const lmq_yf_reader *rd, const q_rule *rule, const yaml_node_t *key, const char *path)
{
    return perr(CTX, line_of(key), path, "comes with preset %s (recipes/README.md): give a plain scheme to choose it",
                rule->preset);
}

static lmq_code read_gran(ROW_ARGS)
{
    q_rule *rule = base;
    if (rule->preset)
        return v ? preset_given(rd, rule, key, path) : LMQ_OK;
    const char *s = scheme_of(rule)->name, *g;
    scheme_kind kind = kind_of(scheme_of(rule));
    const unsigned grans = scaled_grans(scheme_of(rule));
    char names[64];
    if (!v) {
        if (kind == KIND_INT)
            return perr(CTX, rule->line, path, "required for %s (%s)", s, gran_list(grans, names, sizeof names));
        return LMQ_OK;
    }
    if (kind == KIND_BLOCK)
        return block_given(rd, rule, key, path);
    if (kind == KIND_FLOAT)
        return perr(CTX, line_of(key), path,
                    "does not apply to %s (float schemes store no scales; granularity is for "
                    "integer and fp8 schemes)", s);
    lmq_code rc = get_string(CTX, v, path, &g);
    if (rc)
        return rc;
    unsigned i = 0;
    while (i <= LMQ_GRAN_GROUP && !((grans & (1u << i)) && !strcmp(lmq_gran_names[i], g)))
        i++;
    if (i > LMQ_GRAN_GROUP)
        return perr(CTX, line_of(v), path, "unknown granularity '%s' (%s)", g, gran_list(grans, names, sizeof names));
    /* The fp8 row allows every scaled granularity; recipes give fp8 one scale per row (recipes/README.md). */
    if (kind == KIND_FP8 && i != LMQ_GRAN_CHANNEL)
        return perr(CTX, line_of(v), path, "%s takes granularity channel only, not '%s'", s, g);
    rule->qp.gran = (uint8_t)i;
    CTX->gran_line = line_of(key);
    return LMQ_OK;
}

static lmq_code read_group(ROW_ARGS)
{
    q_rule *rule = base;
    if (rule->preset)
        return v ? preset_given(rd, rule, key, path) : LMQ_OK;
    if (v && kind_of(scheme_of(rule)) == KIND_BLOCK)
        return block_given(rd, rule, key, path);
    if (rule->qp.gran != LMQ_GRAN_GROUP)
        return v ? perr(CTX, line_of(key), path, "given without granularity: group") : LMQ_OK;
    if (!v)
        return perr(CTX, CTX->gran_line, path, "granularity group needs a group size");
    double x = 0;
    lmq_code rc = get_uint(CTX, v, path, &x);
    const uint32_t g = (uint32_t)x;
    if (!rc && (g < f->lo || (g & (g - 1)) != 0 || g > f->hi))
        return perr(CTX, line_of(v), path, "%u is not a power of two from %u to %u", g, (unsigned)f->lo,
                    (unsigned)f->hi);
    if (!rc)
        rule->qp.group = g;
    return rc;
}

static lmq_code read_symmetric(ROW_ARGS)
{
    q_rule *rule = base;
    if (rule->preset)
        return preset_given(rd, rule, key, path);
    if (kind_of(scheme_of(rule)) == KIND_BLOCK)
        return block_given(rd, rule, key, path);
    if (kind_of(scheme_of(rule)) != KIND_INT)
        return perr(CTX, line_of(key), path, "applies to integer schemes only, not %s", scheme_of(rule)->name);
    double sym = 1;
    lmq_code rc = get_bool(CTX, v, path, &sym);
    if (!rc)
        rule->qp.asym = (uint8_t)!sym;
    return rc;
}

static lmq_code read_method(ROW_ARGS)
{
    q_rule *rule = base;
    lmq_code rc = parse_method(rd, v, path, &rule->method);
    const lmq_method m = rule->method.method;
    const scheme_kind k = kind_of(scheme_of(rule));
    if (rc || m == LMQ_METHOD_RTN)
        return rc;
    if (m == LMQ_METHOD_IMATRIX && k != KIND_BLOCK)
        return perr(CTX, line_of(key), path, "imatrix weights the scale search of GGUF's block encodings; %s is "
                    "not one (gptq or awq choose integer codes)", scheme_of(rule)->name);
    if (k == KIND_BLOCK && rule->method.act_order)
        return perr(CTX, line_of(key), path, "act_order does not apply to %s: a block's weights lie along the row "
                    "in input order, so GPTQ fits each block as it reaches it, column by column",
                    scheme_of(rule)->name);
    if (k != KIND_INT && k != KIND_BLOCK)
        return perr(CTX, line_of(key), path, "%s chooses integer codes; %s is not an integer scheme",
                    lmq_method_names[m], scheme_of(rule)->name);
    return rc;
}

/* How many strings a value that is one string or a list of them holds, into *n (what: how the
 * message names one). */
static lmq_code strings_count(const lmq_yf_reader *rd, const yaml_node_t *v, const char *what, const char *path,
                              int *n)
{
    if (v->type != YAML_SCALAR_NODE && v->type != YAML_SEQUENCE_NODE)
        return perr(CTX, line_of(v), path, "expected %s or a list of them, got %s", what, type_name(v));
    *n = v->type == YAML_SCALAR_NODE ? 1 : (int)(v->data.sequence.items.top - v->data.sequence.items.start);
    return LMQ_OK;
}

/* String k of such a value, and its node (for the line of a message about it). */
static lmq_code strings_item(const lmq_yf_reader *rd, const yaml_node_t *v, int k, const char *path,
                             const yaml_node_t **item, const char **s)
{
    *item = v->type == YAML_SCALAR_NODE ? v : yaml_document_get_node(rd->doc, v->data.sequence.items.start[k]);
    return *item ? get_string(CTX, *item, path, s) : perr(CTX, line_of(v), path, "malformed list");
}

/* layers: a layer index or set name, or a list of them. */
static lmq_code read_layers(ROW_ARGS)
{
    q_rule *rule = base;
    int n = 0;
    lmq_code c = strings_count(rd, v, "a layer index, a layer set", path, &n);
    if (c)
        return c;
    if (!n)
        return perr(CTX, line_of(v), path, "empty list: a rule with layers must name one");
    rule->has_layers = 1;
    for (int k = 0; k < n; k++) {
        const yaml_node_t *item;
        const char *s;
        lmq_code rc = strings_item(rd, v, k, path, &item, &s);
        if (rc)
            return rc;
        char *end;
        const long i = strtol(s, &end, 10);
        if (*s && !*end && is_plain(item)) {
            if (i < -65536 || i > 65535 || rule->n_layer_idx == Q_LAYERS_MAX)
                return perr(CTX, line_of(item), path, "layer %ld: indexes are -65536..65535, at most %d a rule", i,
                            Q_LAYERS_MAX);
            rule->layer_idx[rule->n_layer_idx++] = (int)i;
            continue;
        }
        unsigned set = 0;
        while (set < N_LAYER_SETS && strcmp(LAYER_SETS[set].name, s))
            set++;
        if (set == N_LAYER_SETS) {
            char known[96] = "";
            for (unsigned j = 0; j < N_LAYER_SETS; j++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", j ? ", " : "",
                         LAYER_SETS[j].name);
            return perr(CTX, line_of(item), path, "'%s' is neither a layer index nor a layer set (%s)", s, known);
        }
        rule->layer_sets |= 1u << set;
    }
    return LMQ_OK;
}

/* fallback: a scheme or a list of them, for a block scheme's rule; each a block or float scheme. */
static lmq_code read_fallback(ROW_ARGS)
{
    q_rule *rule = base;
    if (rule->preset || kind_of(scheme_of(rule)) != KIND_BLOCK)
        return perr(CTX, line_of(key), path, "applies to GGUF block schemes only, not %s",
                    rule->preset ? rule->preset : scheme_of(rule)->name);
    int n = 0;
    lmq_code c = strings_count(rd, v, "a scheme", path, &n);
    if (c)
        return c;
    if (!n || n > Q_FALLBACK_MAX)
        return perr(CTX, line_of(v), path, "gives %d schemes: 1 to %d", n, Q_FALLBACK_MAX);
    for (int k = 0; k < n; k++) {
        const yaml_node_t *item;
        const char *s;
        lmq_code rc = strings_item(rd, v, k, path, &item, &s);
        if (rc)
            return rc;
        const lmq_encoding *e = lmq_encoding_find(s);
        if (!e || (kind_of(e) != KIND_BLOCK && kind_of(e) != KIND_FLOAT))
            return perr(CTX, line_of(item), path, "'%s' is not a GGUF block scheme or fp32, fp16, bf16 (a fallback "
                        "gives the scheme alone)", s);
        rule->fallback[rule->n_fallback++] = (uint16_t)e->dtype;
    }
    return LMQ_OK;
}

static lmq_code read_act(ROW_ARGS)
{
    if (((q_rule *)base)->preset)
        return preset_given(rd, base, key, path);
    if (v->type != YAML_MAPPING_NODE)
        return perr(CTX, line_of(v), path, "expected a mapping {scheme: int8, granularity: token or tensor}, got %s",
                    type_name(v));
    return lmq_yf_read_map(rd, &act_table, &((q_rule *)base)->act, v, path, key);
}

/* In this order: each reads the rows above it (scheme decides what granularity may be). */
static const lmq_yf_field rule_fields[] = {
    ROW("match", read_match, q_rule, match),
    ROW("scheme", read_scheme, q_rule, qp.dtype),
    ROW("granularity", read_gran, q_rule, qp.gran, .flags = YF_OPTIONAL | YF_ABSENT),
    ROW("group", read_group, q_rule, qp.group, .lo = 16, .hi = Q_GROUP_MAX, .flags = YF_OPTIONAL | YF_ABSENT),
    ROW("symmetric", read_symmetric, q_rule, qp.asym, .flags = YF_OPTIONAL),
    ROW("method", read_method, q_rule, method, .flags = YF_OPTIONAL),
    ROW("activations", read_act, q_rule, act, .flags = YF_OPTIONAL),
    ROW("layers", read_layers, q_rule, has_layers, .flags = YF_OPTIONAL),
    ROW("fallback", read_fallback, q_rule, fallback, .flags = YF_OPTIONAL),
};
static const lmq_yf_table rule_table = YF_TABLE(rule_fields);

static lmq_code parse_rule(const lmq_yf_reader *rd, yaml_node_t *n, int index, q_rule *rule)
{
    char where[32];
    snprintf(where, sizeof where, "rules[%d]", index);
    rule->line = line_of(n);
    if (n->type != YAML_MAPPING_NODE)
        return perr(CTX, line_of(n), where, "expected a rule (a mapping with match and scheme), got %s",
                    type_name(n));
    rule->method = q_method_defaults[LMQ_METHOD_RTN];
    return lmq_yf_read_map(rd, &rule_table, rule, n, where, n);
}

/* ---- the top ---- */

static int name_ok(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '.' || *s == '_' || *s == '-'))
            return 0;
    return 1;
}

static lmq_code read_name(ROW_ARGS)
{
    q_recipe *r = base;
    const char *s;
    lmq_code rc = get_string(CTX, v, path, &s);
    if (rc)
        return rc;
    if (!name_ok(s) || strlen(s) >= Q_RECIPE_NAME_MAX)
        return perr(CTX, line_of(v), path, "'%s' is not a recipe name ([a-z0-9._-]+, at most %d characters)", s,
                    Q_RECIPE_NAME_MAX - 1);
    snprintf(r->name, sizeof r->name, "%s", s);
    return LMQ_OK;
}

static lmq_code read_description(ROW_ARGS)
{
    q_recipe *r = base;
    const char *s;
    lmq_code rc = get_string(CTX, v, path, &s);
    if (!rc && !(r->description = dup_str(s)))
        return lmq_fail(CTX->err, LMQ_E_NOMEM, "%s: out of memory", CTX->path);
    return rc;
}

static lmq_code read_rules(ROW_ARGS)
{
    q_recipe *r = base;
    if (v->type != YAML_SEQUENCE_NODE)
        return perr(CTX, line_of(v), path, "expected a list of rules, got %s", type_name(v));
    int n = (int)(v->data.sequence.items.top - v->data.sequence.items.start);
    if (n == 0)
        return perr(CTX, line_of(key), path, "empty: a recipe needs at least one rule");
    if (!(r->rules = calloc((size_t)n, sizeof *r->rules)))
        return lmq_fail(CTX->err, LMQ_E_NOMEM, "%s: out of memory", CTX->path);
    for (int i = 0; i < n; i++) {
        yaml_node_t *item = yaml_document_get_node(rd->doc, v->data.sequence.items.start[i]);
        if (!item)
            return perr(CTX, line_of(v), path, "malformed list");
        r->n_rules = i + 1; /* so q_recipe_free sees this rule's patterns */
        lmq_code rc = parse_rule(rd, item, i, &r->rules[i]);
        if (rc)
            return rc;
    }
    return LMQ_OK;
}

static lmq_code read_ignore(ROW_ARGS)
{
    q_recipe *r = base;
    return get_patterns(CTX, v, path, &r->ignore, &r->n_ignore);
}

/* smoothquant: {alpha: A}, 0 < A < 1. */
static lmq_code read_alpha(ROW_ARGS)
{
    double *alpha = (double *)((char *)base + f->off);
    lmq_code rc = get_real(CTX, v, path, alpha);
    if (!rc && !(*alpha > f->lo && *alpha < f->hi))
        return perr(CTX, line_of(v), path, "%g is not between %g and %g", *alpha, f->lo, f->hi);
    return rc;
}

static const lmq_yf_field smooth_fields[] = {
    ROW("alpha", read_alpha, q_recipe, smooth_alpha, .lo = 0, .hi = 1),
};
static const lmq_yf_table smooth_table = YF_TABLE(smooth_fields);

static lmq_code read_smoothquant(ROW_ARGS)
{
    if (v->type != YAML_MAPPING_NODE)
        return perr(CTX, line_of(v), path, "expected a mapping ({alpha: 0.5}), got %s", type_name(v));
    return lmq_yf_read_map(rd, &smooth_table, base, v, path, v);
}

/* target_bpw: a plain number of bits per weight, 1 to 32 (fp32's). */
static lmq_code read_target(ROW_ARGS)
{
    q_recipe *r = base;
    lmq_code rc = get_real(CTX, v, path, &r->target_bpw);
    if (!rc && !(r->target_bpw >= f->lo && r->target_bpw <= f->hi))
        return perr(CTX, line_of(v), path, "%g is not between %g and %g bits per weight", r->target_bpw, f->lo, f->hi);
    r->target_line = line_of(v);
    return rc;
}

/* candidates: a non-empty list of distinct GGUF block schemes. */
static lmq_code read_candidates(ROW_ARGS)
{
    q_recipe *r = base;
    if (v->type != YAML_SEQUENCE_NODE)
        return perr(CTX, line_of(v), path, "expected a list of GGUF block schemes, got %s", type_name(v));
    r->candidates_line = line_of(v);
    int n = 0;
    lmq_code c = strings_count(rd, v, "a scheme", path, &n);
    if (c)
        return c;
    if (!n || n > Q_CANDIDATES_MAX)
        return perr(CTX, line_of(v), path, "gives %d schemes: 1 to %d", n, Q_CANDIDATES_MAX);
    for (int k = 0; k < n; k++) {
        const yaml_node_t *item;
        const char *s;
        if ((c = strings_item(rd, v, k, path, &item, &s)))
            return c;
        const lmq_encoding *e = lmq_encoding_find(s);
        if (!e || kind_of(e) != KIND_BLOCK)
            return perr(CTX, line_of(item), path, "'%s' is not a GGUF block scheme (q2_k ... q8_0: recipes/README.md)", s);
        for (int j = 0; j < r->n_candidates; j++)
            if (r->candidates[j] == e->dtype)
                return perr(CTX, line_of(item), path, "'%s' is listed twice", s);
        r->candidates[r->n_candidates++] = (uint16_t)e->dtype;
    }
    return LMQ_OK;
}

/* Without candidates, target_bpw chooses among the K-types, Q8_0 and the 32-blocks that stand in
 * for them where 256 does not divide a row. */
static const lmq_dtype DEFAULT_CANDIDATES[] = { LMQ_T_Q2_K, LMQ_T_Q3_K, LMQ_T_Q4_0, LMQ_T_Q4_K, LMQ_T_Q5_0,
                                                LMQ_T_Q5_K, LMQ_T_Q6_K, LMQ_T_Q8_0 };

/* What target_bpw needs beside it: candidates only with a target, and a rule whose tensors it may
 * choose for. */
static lmq_code check_target(pctx *c, q_recipe *r)
{
    if (r->n_candidates && !r->target_bpw)
        return perr(c, r->candidates_line, "candidates", "given without target_bpw: the candidates are what target_bpw "
                    "chooses among");
    if (!r->target_bpw)
        return LMQ_OK;
    int blocks = 0;
    for (int i = 0; i < r->n_rules; i++)
        blocks |= !r->rules[i].preset && kind_of(scheme_of(&r->rules[i])) == KIND_BLOCK;
    if (!blocks)
        return perr(c, r->target_line, "target_bpw", "no rule gives a GGUF block scheme: target_bpw chooses the "
                    "encodings of the tensors such rules match");
    for (size_t k = 0; !r->n_candidates && k < sizeof DEFAULT_CANDIDATES / sizeof DEFAULT_CANDIDATES[0]; k++)
        r->candidates[k] = (uint16_t)DEFAULT_CANDIDATES[k];
    if (!r->n_candidates)
        r->n_candidates = (int)(sizeof DEFAULT_CANDIDATES / sizeof DEFAULT_CANDIDATES[0]);
    return LMQ_OK;
}

static const lmq_yf_field top_fields[] = {
    ROW("name", read_name, q_recipe, name),
    ROW("description", read_description, q_recipe, description, .flags = YF_OPTIONAL),
    ROW("rules", read_rules, q_recipe, rules),
    ROW("ignore", read_ignore, q_recipe, ignore, .flags = YF_OPTIONAL),
    ROW("smoothquant", read_smoothquant, q_recipe, smooth_alpha, .flags = YF_OPTIONAL),
    ROW("target_bpw", read_target, q_recipe, target_bpw, .lo = 1, .hi = 32, .flags = YF_OPTIONAL),
    ROW("candidates", read_candidates, q_recipe, candidates, .flags = YF_OPTIONAL),
};
static const lmq_yf_table top_table = YF_TABLE(top_fields);

static lmq_code parse_root(const lmq_yf_reader *rd, yaml_node_t *root, q_recipe *r)
{
    if (root->type != YAML_MAPPING_NODE)
        return perr(CTX, line_of(root), "(top)", "a recipe is a mapping with keys name, rules, ...; got %s",
                    type_name(root));
    if (q_llmc_is_recipe(root, rd->doc))
        return q_llmc_read(rd, root, r);
    lmq_code rc = lmq_yf_read_map(rd, &top_table, r, root, "", root);
    return rc ? rc : check_target(CTX, r);
}

/* Deeper than any recipe is (lmq's: top > rules > rule > match list; llm-compressor's: stage >
 * modifiers > modifier > config_groups > group > weights > targets list), with room to spare. */
#define MAX_DEPTH 9

static lmq_code parse_text(pctx *c, q_recipe *r)
{
    yaml_document_t doc;
    lmq_code rc = lmq_yaml_load(r->text, r->text_len, c->path, MAX_DEPTH, LMQ_E_RECIPE, &doc, c->err);
    if (rc)
        return rc;
    c->doc = &doc;
    lmq_yf_reader rd = { .doc = &doc, .code = LMQ_E_RECIPE, .report = report, .key_error = key_error,
                         .in_order = 1, .ctx = c, .err = c->err };
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root)
        rc = lmq_fail(c->err, LMQ_E_RECIPE, "%s:1: (top): empty recipe (needs name and rules)", c->path);
    else
        rc = parse_root(&rd, root, r);
    yaml_document_delete(&doc);
    return rc;
}

static void free_patterns(q_pattern *p, int n)
{
    for (int i = 0; i < n; i++) {
        free(p[i].text);
        free(p[i].canon);
        q_llmc_regex_free(&p[i]);
    }
    free(p);
}

void q_recipe_free(q_recipe *r)
{
    for (int i = 0; i < r->n_rules; i++)
        free_patterns(r->rules[i].match, r->rules[i].n_match);
    free(r->rules);
    free_patterns(r->ignore, r->n_ignore);
    free(r->description);
    free(r->translation);
    free(r->text);
    free(r->path);
    memset(r, 0, sizeof *r);
}

lmq_code q_recipe_parse(const char *text, size_t len, const char *label, q_recipe *r, lmq_err *err)
{
    memset(r, 0, sizeof *r);
    if (len > Q_RECIPE_MAX_BYTES)
        return lmq_fail(err, LMQ_E_RECIPE, "%s: %zu bytes; a recipe may have at most %u", label, len,
                        Q_RECIPE_MAX_BYTES);
    r->path = dup_str(label);
    r->text = malloc(len + 1);
    if (!r->path || !r->text) {
        q_recipe_free(r);
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", label);
    }
    memcpy(r->text, text, len);
    r->text[len] = '\0';
    r->text_len = len;
    r->checksum = XXH3_64bits(r->text, len);
    pctx c = { .path = r->path, .err = err };
    lmq_code rc = parse_text(&c, r);
    if (rc)
        q_recipe_free(r);
    return rc;
}

lmq_code q_recipe_load(const char *path, q_recipe *r, lmq_err *err)
{
    memset(r, 0, sizeof *r);
    lmq_blob b;
    lmq_code rc = lmq_blob_open(path, &b, err);
    if (rc)
        return rc;
    rc = q_recipe_parse((const char *)b.data, b.size, path, r, err);
    lmq_blob_close(&b);
    return rc;
}

/* ---- resolver ---- */

static int needs_matrix(lmq_dtype dtype) { return kind_of(lmq_encoding_of(dtype)) != KIND_FLOAT; }

const char *q_pattern_glob(const q_pattern *p) { return p->canon ? p->canon : p->text; }

int q_pattern_match(const q_pattern *p, const q_tensor_ref *t)
{
    return p->re ? q_llmc_regex_match(p, t->name, t->family) : lmq_glob_match(q_pattern_glob(p), t->name);
}

int q_pattern_count(const q_pattern *p, const q_tensor_ref *t, int n)
{
    int count = 0;
    for (int i = 0; i < n; i++)
        count += q_pattern_match(p, &t[i]);
    return count;
}

const char *q_pattern_hf_hint(const q_pattern *p, const q_tensor_ref *t, int n, char *hf, size_t cap)
{
    char weight[LMQ_NAME_MAX + 8];
    snprintf(weight, sizeof weight, "%s.weight", p->text);
    for (int i = 0; i < n && !p->canon && !p->re; i++)
        for (int f = 0, found = 0; found >= 0; f++)
            for (int prefixed = 1; prefixed >= 0 && found >= 0; prefixed--)
                if ((found = lmq_hf_name_of(t[i].name, f, prefixed, hf, cap)) > 0 &&
                    (lmq_glob_match(p->text, hf) || lmq_glob_match(weight, hf)))
                    return t[i].name;
    return NULL;
}

/* The first of p[0..n) that matches t, or NULL. */
static const q_pattern *first_match(const q_pattern *p, int n, const q_tensor_ref *t)
{
    for (int i = 0; i < n; i++)
        if (q_pattern_match(&p[i], t))
            return &p[i];
    return NULL;
}

/* Every pattern must match a tensor; a pattern of a matrix-only rule must match a matrix (its
 * 1-D matches are passed over, but one that matches only 1-D tensors is a mistake). */
static lmq_code check_pattern(const q_recipe *r, const q_pattern *p, const char *key, int rule,
                              const q_tensor_ref *t, int n, lmq_err *err)
{
    int first = -1, matrices = 0;
    for (int i = 0; i < n; i++)
        if (q_pattern_match(p, &t[i])) {
            if (first < 0)
                first = i;
            matrices += t[i].ndim >= 2;
        }
    if (first < 0 && p->canon)
        return lmq_fail(err, LMQ_E_RECIPE, "%s:%d: pattern '%s' (the Hugging Face name of '%s') matches no tensor "
                        "(%s)", r->path, p->line, p->text, p->canon, key);
    char hf[2 * LMQ_NAME_MAX];
    const char *hint = first < 0 ? q_pattern_hf_hint(p, t, n, hf, sizeof hf) : NULL;
    if (hint)
        return lmq_fail(err, LMQ_E_RECIPE, "%s:%d: pattern '%s' matches no tensor (%s); it matches the Hugging Face "
                        "name '%s', which lmq calls '%s': write canonical names (recipes/README.md), or Hugging Face "
                        "names with wildcards in the layer index only", r->path, p->line, p->text, key, hf, hint);
    if (first < 0)
        return lmq_fail(err, LMQ_E_RECIPE, "%s:%d: pattern '%s' matches no tensor (%s)", r->path, p->line,
                        p->text, key);
    if (rule >= 0 && !matrices && needs_matrix((lmq_dtype)r->rules[rule].qp.dtype)) {
        const char *s = lmq_encoding_of(r->rules[rule].qp.dtype)->name;
        return lmq_fail(err, LMQ_E_RECIPE,
                        "%s:%d: pattern '%s' gives %s to 1-D tensor '%s' and matches no matrix (%s, rule at "
                        "line %d); %s applies to matrices only; 1-D tensors (norms, biases) take fp32, fp16 "
                        "or bf16",
                        r->path, p->line, p->text, s, t[first].name, key, r->rules[rule].line, s);
    }
    return LMQ_OK;
}

/* Whether tensor `name` is of a block that rule's layers list, of a model of n blocks. */
static int in_layers(const q_rule *rule, const char *name, int n)
{
    char *end;
    if (strncmp(name, "blk.", 4) || name[4] < '0' || name[4] > '9')
        return 0;
    const long i = strtol(name + 4, &end, 10);
    if (*end != '.')
        return 0;
    for (int k = 0; k < rule->n_layer_idx; k++)
        if ((rule->layer_idx[k] < 0 ? n + rule->layer_idx[k] : rule->layer_idx[k]) == i)
            return 1;
    for (unsigned k = 0; k < N_LAYER_SETS; k++)
        if (rule->layer_sets >> k & 1 && LAYER_SETS[k].has((int)i, n))
            return 1;
    return 0;
}

/* Weights per block of an encoding row (float schemes: 1). */
static int64_t block_of(unsigned dtype)
{
    const unsigned b = lmq_encoding_of(dtype)->block;
    return b ? b : 1;
}

/* The model's blocks: one past the highest blk.<i> among t[0..n). */
static int n_layers_of(const q_tensor_ref *t, int n)
{
    int layers = 0;
    for (int k = 0; k < n; k++) {
        char *end;
        const long i = strncmp(t[k].name, "blk.", 4) ? -1 : strtol(t[k].name + 4, &end, 10);
        if (i >= 0 && i < 65536 && i >= layers)
            layers = (int)i + 1;
    }
    return layers;
}

static void decide(const q_recipe *r, const q_tensor_ref *t, int n_layers, q_plan_entry *e)
{
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", t->name);
    e->qp = (lmq_qparams){ .dtype = LMQ_T_F32, .gran = LMQ_GRAN_NONE };
    const q_pattern *ignored = first_match(r->ignore, r->n_ignore, t);
    if (ignored) {
        e->keep_reason = Q_KEEP_IGNORED;
        e->rule_line = ignored->line;
        return;
    }
    for (int i = 0; i < r->n_rules; i++) {
        const q_rule *rule = &r->rules[i];
        if (!first_match(rule->match, rule->n_match, t) ||
            (rule->has_layers && !in_layers(rule, t->name, n_layers)))
            continue;
        if (t->ndim < 2 && needs_matrix((lmq_dtype)rule->qp.dtype)) {
            if (!e->rule_line)
                e->rule_line = rule->line; /* passed over; a later rule may still take it */
            continue;
        }
        e->qp = rule->qp;
        e->method = rule->method;
        e->act = rule->act;
        e->rule_line = rule->line;
        for (int k = 0; k < rule->n_fallback && t->cols > 0 && t->cols % block_of(rule->qp.dtype); k++)
            if (t->cols % block_of(rule->fallback[k]) == 0) {
                e->qp = (lmq_qparams){ .dtype = rule->fallback[k], .gran = LMQ_GRAN_NONE };
                e->fell_back = 1;
                e->asked = rule->qp.dtype;
                /* imatrix weights a block's scale search: a float fallback has none, so it rounds. */
                if (e->method.method == LMQ_METHOD_IMATRIX && kind_of(lmq_encoding_of(e->qp.dtype)) != KIND_BLOCK)
                    e->method = q_method_defaults[LMQ_METHOD_RTN];
                break;
            }
        return;
    }
    e->keep_reason = e->rule_line ? Q_KEEP_ONLY_MATRICES : Q_KEEP_NO_RULE;
}

int q_recipe_needs_stats(const q_recipe *r)
{
    int needs = r->smooth_alpha > 0;
    for (int i = 0; i < r->n_rules; i++)
        needs |= r->rules[i].method.method != LMQ_METHOD_RTN;
    return needs;
}

lmq_code q_recipe_stats_error(const q_recipe *r, lmq_err *err)
{
    for (int i = 0; i < r->n_rules; i++)
        if (r->rules[i].method.method != LMQ_METHOD_RTN)
            return lmq_fail(err, LMQ_E_ARG, "%s:%d: method %s needs activation statistics (lmq calibrate, then "
                            "lmq quantize --stats STATS.lmq)", r->path, r->rules[i].line,
                            lmq_method_names[r->rules[i].method.method]);
    return lmq_fail(err, LMQ_E_ARG, "%s: smoothquant needs activation statistics (lmq calibrate, then lmq quantize "
                    "--stats STATS.lmq)", r->path);
}

/* The two uses of a tied embedding need separate tensors when the recipe treats them apart. */
int q_plan_entry_same(const q_plan_entry *a, const q_plan_entry *b)
{
    return !a->keep_reason == !b->keep_reason && a->qp.dtype == b->qp.dtype && a->qp.gran == b->qp.gran &&
           a->qp.asym == b->qp.asym && a->qp.group == b->qp.group && a->act.scheme == b->act.scheme &&
           a->act.gran == b->act.gran;
}

void q_plan_free(q_plan *plan)
{
    free(plan->entries);
    plan->entries = NULL;
    plan->n = 0;
}

static lmq_code resolve(const q_recipe *r, const q_tensor_ref *tensors, int n_tensors, int tied, int check,
                        q_plan *plan, lmq_err *err)
{
    memset(plan, 0, sizeof *plan);
    int tok = -1;
    if (n_tensors < 0)
        return lmq_fail(err, LMQ_E_ARG, "%s: negative tensor count", r->path);
    for (int i = 0; i < n_tensors; i++) {
        if (!tensors[i].name || strlen(tensors[i].name) >= LMQ_NAME_MAX)
            return lmq_fail(err, LMQ_E_ARG, "%s: tensor %d has no name or one too long", r->path, i);
        if (tied && strcmp(tensors[i].name, "output.weight") == 0)
            return lmq_fail(err, LMQ_E_ARG, "%s: a tied model has no separate output.weight", r->path);
        if (strcmp(tensors[i].name, "tok_embd.weight") == 0)
            tok = i;
    }
    if (tied && tok < 0)
        return lmq_fail(err, LMQ_E_ARG, "%s: tied model without tok_embd.weight", r->path);

    /* The classifier use of a tied embedding is addressed as output.weight. */
    int n = n_tensors + (tied ? 1 : 0);
    q_tensor_ref *all = malloc((size_t)(n ? n : 1) * sizeof *all);
    q_plan_entry *entries = calloc((size_t)(n ? n : 1), sizeof *entries);
    if (!all || !entries) {
        free(all);
        free(entries);
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", r->path);
    }
    if (n_tensors)
        memcpy(all, tensors, (size_t)n_tensors * sizeof *all);
    if (tied)
        all[n_tensors] = (q_tensor_ref){ "output.weight", tensors[tok].ndim, tensors[tok].cols, tensors[tok].family };

    lmq_code rc = LMQ_OK;
    const int n_layers = n_layers_of(all, n);
    char key[32];
    for (int i = 0; i < r->n_ignore && !rc && check; i++)
        rc = check_pattern(r, &r->ignore[i], "ignore", -1, all, n, err);
    for (int k = 0; k < r->n_rules && !rc && check; k++)
        for (int i = 0; i < r->rules[k].n_match && !rc; i++) {
            snprintf(key, sizeof key, "rules[%d].match", k);
            rc = check_pattern(r, &r->rules[k].match[i], key, k, all, n, err);
        }
    for (int i = 0; i < n && !rc; i++) {
        decide(r, &all[i], n_layers, &entries[i]);
        if (entries[i].act.scheme != LMQ_ACT_NONE && all[i].ndim != 2)
            rc = lmq_fail(err, LMQ_E_RECIPE,
                          "%s:%d: this rule gives activations to %d-D tensor '%s'; only the input of a matrix "
                          "(a linear layer) is quantised: match the matrices alone",
                          r->path, entries[i].rule_line, all[i].ndim, all[i].name);
        else if (entries[i].act.scheme != LMQ_ACT_NONE) {
            lmq_err why;
            if (lmq_act_check(entries[i].act, &entries[i].qp, all[i].cols, &why))
                rc = lmq_fail(err, LMQ_E_RECIPE, "%s:%d: tensor '%s': %s", r->path, entries[i].rule_line, all[i].name,
                              why.msg);
        }
    }
    if (!rc) {
        for (int i = 0; i < n && !rc; i++) {
            decide(r, &all[i], n_layers, &entries[i]);
            /* Calibrated methods work from the statistics of a block's linear-layer inputs. */
            if (entries[i].method.method != LMQ_METHOD_RTN && !lmq_is_linear(all[i].name, all[i].ndim))
                rc = lmq_fail(err, LMQ_E_RECIPE, "%s:%d: %s applies to the linear layers of blocks, not to '%s'",
                              r->path, entries[i].rule_line, lmq_method_names[entries[i].method.method],
                              all[i].name);
        }
    }
    if (!rc) {
        if (tied)
            entries[n_tensors].derived_from_tied = 1;
        plan->entries = entries;
        plan->n = n;
    } else {
        free(entries);
    }
    free(all);
    return rc;
}

lmq_code q_recipe_resolve(const q_recipe *r, const q_tensor_ref *tensors, int n_tensors, int tied,
                          q_plan *plan, lmq_err *err)
{
    return resolve(r, tensors, n_tensors, tied, 1, plan, err);
}

lmq_code q_recipe_plan(const q_recipe *r, const q_tensor_ref *tensors, int n_tensors, int tied, q_plan *plan,
                       lmq_err *err)
{
    return resolve(r, tensors, n_tensors, tied, 0, plan, err);
}

lmq_code q_recipe_resolve_model(const q_recipe *r, const lmq_model *m, q_plan *plan, lmq_err *err)
{
    q_tensor_ref *refs = malloc((size_t)(m->n_tensors ? m->n_tensors : 1) * sizeof *refs);
    if (!refs) {
        memset(plan, 0, sizeof *plan);
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", r->path);
    }
    for (int i = 0; i < m->n_tensors; i++)
        refs[i] = (q_tensor_ref){ m->tensors[i].name, m->tensors[i].ndim, m->tensors[i].shape[m->tensors[i].ndim - 1],
                                  (int)m->arch.family };
    lmq_code rc = q_recipe_resolve(r, refs, m->n_tensors, m->arch.tied_embedding, plan, err);
    free(refs);
    return rc;
}
