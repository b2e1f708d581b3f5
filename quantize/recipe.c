/* Recipe parser (libyaml's document API, which keeps every node's line) and resolver. */
#include "quantize/recipe.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <yaml.h>

#include "common/file.h"
#include "common/yaml_doc.h"
#include "schemes/scheme.h"

/* ---- schemes ---- */

/* What a scheme allows, from its row in the encoding table: float schemes store no scales;
 * fp8 stores one scale per row; integer schemes choose their granularity and symmetry. */
typedef enum { KIND_FLOAT, KIND_FP8, KIND_INT } scheme_kind;

static scheme_kind kind_of(const lmq_encoding *s)
{
    return s->integer ? KIND_INT : s->scale_bits ? KIND_FP8 : KIND_FLOAT;
}

static const struct {
    const char *name; /* as a recipe writes it */
    lmq_gran gran;
} GRANS[] = {
    { "tensor", LMQ_GRAN_TENSOR },
    { "channel", LMQ_GRAN_CHANNEL },
    { "group", LMQ_GRAN_GROUP },
};
#define N_GRANS (int)(sizeof GRANS / sizeof GRANS[0])

/* ---- glob ---- */

int q_glob_match(const char *p, const char *s)
{
    /* Greedy with one backtrack point: on a mismatch after a '*', let that '*' eat one more
     * character. Linear in practice, never exponential. */
    const char *star = NULL, *resume = NULL;
    while (*s) {
        if (*p == '*') {
            star = ++p;
            resume = s;
        } else if (*p == '?' || *p == *s) {
            p++;
            s++;
        } else if (star) {
            p = star;
            s = ++resume;
        } else {
            return 0;
        }
    }
    while (*p == '*')
        p++;
    return *p == '\0';
}

/* ---- parser ---- */

typedef struct {
    yaml_document_t *doc;
    const char *path;
    lmq_err *err;
} pctx;

static int line_of(const yaml_node_t *n) { return (int)n->start_mark.line + 1; }

/* "<path>:<line>: <key>: <message>" */
__attribute__((format(printf, 4, 5))) static lmq_code perr(pctx *c, int line, const char *key,
                                                           const char *fmt, ...)
{
    char msg[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return lmq_fail(c->err, LMQ_E_RECIPE, "%s:%d: %s: %s", c->path, line, key, msg);
}

static const char *type_name(const yaml_node_t *n)
{
    return n->type == YAML_SEQUENCE_NODE ? "a list" : n->type == YAML_MAPPING_NODE ? "a mapping" : "a string";
}

static const char *scalar(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }

static int is_plain(const yaml_node_t *n) { return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE; }

/* A scalar's text; a NUL inside it (a "\0" escape) is refused so C strings stay whole. */
static lmq_code get_string(pctx *c, const yaml_node_t *n, const char *key, const char **out)
{
    if (n->type != YAML_SCALAR_NODE)
        return perr(c, line_of(n), key, "expected a string, got %s", type_name(n));
    if (strlen(scalar(n)) != n->data.scalar.length)
        return perr(c, line_of(n), key, "contains a NUL character");
    *out = scalar(n);
    return LMQ_OK;
}

static lmq_code get_bool(pctx *c, const yaml_node_t *n, const char *key, int *out)
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

/* A plain unsigned decimal integer up to 2^32 - 1. */
static lmq_code get_uint(pctx *c, const yaml_node_t *n, const char *key, uint32_t *out)
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
    *out = (uint32_t)v;
    return LMQ_OK;
}

/* A plain decimal number (no sign beyond a leading '-', no inf/nan). */
static lmq_code get_real(pctx *c, const yaml_node_t *n, const char *key, double *out)
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
    grown[*count].line = line_of(n);
    if (!(grown[*count].text = dup_str(s)))
        return lmq_fail(c->err, LMQ_E_NOMEM, "%s: out of memory", c->path);
    (*count)++;
    return LMQ_OK;
}

/* A pattern or a list of patterns. */
static lmq_code get_patterns(pctx *c, const yaml_node_t *n, const char *key, q_pattern **arr, int *count)
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

/* Reads a mapping's pairs into vals[] by key (NULL when absent), refusing keys not in keys[]
 * and keys given twice. where is the key path of the mapping ("" at the top). */
static lmq_code collect(pctx *c, const yaml_node_t *map, const char *where, const char *const *keys,
                        int n_keys, const yaml_node_t **vals, int *key_lines)
{
    char path[96];
    for (yaml_node_pair_t *pr = map->data.mapping.pairs.start; pr < map->data.mapping.pairs.top; pr++) {
        const yaml_node_t *k = yaml_document_get_node(c->doc, pr->key);
        const yaml_node_t *v = yaml_document_get_node(c->doc, pr->value);
        if (!k || !v)
            return perr(c, line_of(map), *where ? where : "(top)", "malformed mapping");
        if (k->type != YAML_SCALAR_NODE)
            return perr(c, line_of(k), *where ? where : "(top)", "a key must be a plain name, got %s",
                        type_name(k));
        snprintf(path, sizeof path, "%s%s%.40s", where, *where ? "." : "", scalar(k));
        int i = 0;
        while (i < n_keys && strcmp(keys[i], scalar(k)) != 0)
            i++;
        if (i == n_keys) {
            char known[128] = "";
            for (int j = 0; j < n_keys; j++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", j ? ", " : "", keys[j]);
            return perr(c, line_of(k), path, "unknown key (known keys: %s)", known);
        }
        if (vals[i])
            return perr(c, line_of(k), path, "duplicate key (first given at line %d)", key_lines[i]);
        vals[i] = v;
        key_lines[i] = line_of(k);
    }
    return LMQ_OK;
}

enum { RK_MATCH, RK_SCHEME, RK_GRAN, RK_GROUP, RK_SYM, RK_METHOD, RK_ACT, RK_N };
static const char *const RULE_KEYS[RK_N] = { "match", "scheme", "granularity", "group", "symmetric", "method",
                                             "activations" };

/* A value named in names[0..n) (NULL entries are not names); *out its index. */
static lmq_code get_name(pctx *c, const yaml_node_t *n, const char *key, const char *const *names, int n_names,
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

/* activations: {scheme: int8, granularity: token|tensor}, both required. */
enum { AK_SCHEME, AK_GRAN, AK_N };
static const char *const ACT_KEYS[AK_N] = { "scheme", "granularity" };

static lmq_code parse_act(pctx *c, const yaml_node_t *n, int key_line, const char *where, lmq_act *act)
{
    char key[112];
    if (n->type != YAML_MAPPING_NODE)
        return perr(c, line_of(n), where, "expected a mapping {scheme: int8, granularity: token or tensor}, got %s",
                    type_name(n));
    const yaml_node_t *v[AK_N] = { 0 };
    int kl[AK_N] = { 0 };
    lmq_code rc = collect(c, n, where, ACT_KEYS, AK_N, v, kl);
    for (int k = 0; !rc && k < AK_N; k++) {
        snprintf(key, sizeof key, "%s.%s", where, ACT_KEYS[k]);
        if (!v[k])
            return perr(c, key_line, key, "required key is missing");
        rc = k == AK_SCHEME ? get_name(c, v[k], key, lmq_act_scheme_names, LMQ_ACT_COUNT, &act->scheme)
                            : get_name(c, v[k], key, lmq_act_gran_names, LMQ_ACT_GRAN_COUNT, &act->gran);
    }
    return rc;
}

/* ---- methods ---- */

const q_method q_method_defaults[LMQ_METHOD_COUNT] = {
    [LMQ_METHOD_RTN] = { .method = LMQ_METHOD_RTN },
    [LMQ_METHOD_GPTQ] = { .method = LMQ_METHOD_GPTQ, .damp = 0.01, .block = 128 },
    [LMQ_METHOD_AWQ] = { .method = LMQ_METHOD_AWQ, .grid = 20, .clip = 1 },
};

/* A method's parameters: one row per key, the method it belongs to and where it goes. */
typedef enum { P_REAL, P_UINT, P_BOOL } param_kind;
static const struct {
    const char *key;
    lmq_method method;
    param_kind kind;
    size_t off;
    double lo, hi; /* the accepted range */
} PARAMS[] = {
    { "damp", LMQ_METHOD_GPTQ, P_REAL, offsetof(q_method, damp), 1e-6, 10 },
    { "block", LMQ_METHOD_GPTQ, P_UINT, offsetof(q_method, block), 1, 65536 },
    { "act_order", LMQ_METHOD_GPTQ, P_BOOL, offsetof(q_method, act_order), 0, 1 },
    { "grid", LMQ_METHOD_AWQ, P_UINT, offsetof(q_method, grid), 1, 1000 },
    { "clip", LMQ_METHOD_AWQ, P_BOOL, offsetof(q_method, clip), 0, 1 },
};
#define N_PARAMS (int)(sizeof PARAMS / sizeof PARAMS[0])

/* method: NAME, or {name: NAME, <parameter>: <value>, ...}. */
static lmq_code parse_method(pctx *c, const yaml_node_t *n, const char *where, q_method *m)
{
    char key[96];
    const yaml_node_t *name = n;
    if (n->type == YAML_MAPPING_NODE) {
        const char *keys[N_PARAMS + 1] = { "name" };
        for (int i = 0; i < N_PARAMS; i++)
            keys[i + 1] = PARAMS[i].key;
        const yaml_node_t *v[N_PARAMS + 1] = { 0 };
        int kl[N_PARAMS + 1] = { 0 };
        lmq_code rc = collect(c, n, where, keys, N_PARAMS + 1, v, kl);
        if (rc)
            return rc;
        if (!v[0])
            return perr(c, line_of(n), where, "needs a name (rtn, gptq or awq)");
        name = v[0];
        if ((rc = parse_method(c, name, where, m)))
            return rc;
        for (int i = 0; i < N_PARAMS; i++) {
            if (!v[i + 1])
                continue;
            snprintf(key, sizeof key, "%s.%s", where, PARAMS[i].key);
            if (PARAMS[i].method != m->method)
                return perr(c, kl[i + 1], key, "is a parameter of %s, not of %s", lmq_method_names[PARAMS[i].method],
                            lmq_method_names[m->method]);
            double x = 0;
            uint32_t u = 0;
            int b = 0;
            char *dst = (char *)m + PARAMS[i].off;
            if ((rc = PARAMS[i].kind == P_REAL   ? get_real(c, v[i + 1], key, &x)
                      : PARAMS[i].kind == P_UINT ? get_uint(c, v[i + 1], key, &u)
                                                 : get_bool(c, v[i + 1], key, &b)))
                return rc;
            x = PARAMS[i].kind == P_REAL ? x : PARAMS[i].kind == P_UINT ? (double)u : (double)b;
            if (!(x >= PARAMS[i].lo && x <= PARAMS[i].hi))
                return perr(c, line_of(v[i + 1]), key, "%g is outside %g..%g", x, PARAMS[i].lo, PARAMS[i].hi);
            if (PARAMS[i].kind == P_REAL)
                memcpy(dst, &x, sizeof x);
            else if (PARAMS[i].kind == P_UINT)
                memcpy(dst, &u, sizeof u);
            else
                memcpy(dst, &b, sizeof b);
        }
        return LMQ_OK;
    }
    uint8_t i;
    lmq_code rc = get_name(c, name, where, lmq_method_names, LMQ_METHOD_COUNT, &i);
    if (!rc)
        *m = q_method_defaults[i];
    return rc;
}

static lmq_code parse_rule(pctx *c, const yaml_node_t *n, int index, q_rule *rule)
{
    char where[32], key[64];
    snprintf(where, sizeof where, "rules[%d]", index);
#define KEY(k) (snprintf(key, sizeof key, "%s.%s", where, RULE_KEYS[k]), key)
    rule->line = line_of(n);
    if (n->type != YAML_MAPPING_NODE)
        return perr(c, line_of(n), where, "expected a rule (a mapping with match and scheme), got %s",
                    type_name(n));
    const yaml_node_t *v[RK_N] = { 0 };
    int kl[RK_N] = { 0 };
    lmq_code rc = collect(c, n, where, RULE_KEYS, RK_N, v, kl);
    if (rc)
        return rc;
    if (!v[RK_MATCH])
        return perr(c, rule->line, KEY(RK_MATCH), "required key is missing");
    if ((rc = get_patterns(c, v[RK_MATCH], KEY(RK_MATCH), &rule->match, &rule->n_match)))
        return rc;
    if (rule->n_match == 0)
        return perr(c, line_of(v[RK_MATCH]), KEY(RK_MATCH), "empty list: a rule must match something");

    if (!v[RK_SCHEME])
        return perr(c, rule->line, KEY(RK_SCHEME), "required key is missing");
    const char *s;
    if ((rc = get_string(c, v[RK_SCHEME], KEY(RK_SCHEME), &s)))
        return rc;
    const lmq_encoding *row = lmq_encoding_find(s);
    if (!row || row->dtype == LMQ_T_BYTES) {
        char known[256];
        return perr(c, line_of(v[RK_SCHEME]), key, "unknown scheme '%s' (known: %s)", s,
                    lmq_encoding_names(known, sizeof known, LMQ_T_BYTES));
    }
    scheme_kind kind = kind_of(row);
    rule->qp.dtype = (uint16_t)row->dtype;

    /* granularity: integer schemes must say; fp8 has one scale per row; float schemes none. */
    rule->qp.gran = (uint8_t)(kind == KIND_FLOAT ? LMQ_GRAN_NONE : kind == KIND_FP8 ? LMQ_GRAN_CHANNEL : 0);
    if (v[RK_GRAN]) {
        if (kind == KIND_FLOAT)
            return perr(c, kl[RK_GRAN], KEY(RK_GRAN),
                        "does not apply to %s (float schemes store no scales; granularity is for "
                        "integer and fp8 schemes)", s);
        const char *g;
        if ((rc = get_string(c, v[RK_GRAN], KEY(RK_GRAN), &g)))
            return rc;
        int i = 0;
        while (i < N_GRANS && strcmp(GRANS[i].name, g) != 0)
            i++;
        if (i == N_GRANS)
            return perr(c, line_of(v[RK_GRAN]), key, "unknown granularity '%s' (tensor, channel or group)", g);
        if (kind == KIND_FP8 && GRANS[i].gran != LMQ_GRAN_CHANNEL)
            return perr(c, line_of(v[RK_GRAN]), key, "%s takes granularity channel only, not '%s'", s, g);
        rule->qp.gran = (uint8_t)GRANS[i].gran;
    } else if (kind == KIND_INT) {
        return perr(c, rule->line, KEY(RK_GRAN), "required for %s (tensor, channel or group)", s);
    }

    if (rule->qp.gran == LMQ_GRAN_GROUP) {
        if (!v[RK_GROUP])
            return perr(c, kl[RK_GRAN], KEY(RK_GROUP), "granularity group needs a group size");
        if ((rc = get_uint(c, v[RK_GROUP], KEY(RK_GROUP), &rule->qp.group)))
            return rc;
        uint32_t g = rule->qp.group;
        if (g < 16 || (g & (g - 1)) != 0 || g > Q_GROUP_MAX)
            return perr(c, line_of(v[RK_GROUP]), key, "%u is not a power of two from 16 to %u", g, Q_GROUP_MAX);
    } else if (v[RK_GROUP]) {
        return perr(c, kl[RK_GROUP], KEY(RK_GROUP), "given without granularity: group");
    }

    if (v[RK_SYM]) {
        if (kind != KIND_INT)
            return perr(c, kl[RK_SYM], KEY(RK_SYM), "applies to integer schemes only, not %s", s);
        int sym = 1;
        if ((rc = get_bool(c, v[RK_SYM], KEY(RK_SYM), &sym)))
            return rc;
        rule->qp.asym = (uint8_t)!sym;
    }

    rule->method = q_method_defaults[LMQ_METHOD_RTN];
    if (v[RK_METHOD]) {
        if ((rc = parse_method(c, v[RK_METHOD], KEY(RK_METHOD), &rule->method)))
            return rc;
        if (rule->method.method != LMQ_METHOD_RTN && kind != KIND_INT)
            return perr(c, kl[RK_METHOD], key, "%s chooses integer codes; %s is not an integer scheme",
                        lmq_method_names[rule->method.method], s);
    }
    if (v[RK_ACT] && (rc = parse_act(c, v[RK_ACT], kl[RK_ACT], KEY(RK_ACT), &rule->act)))
        return rc;
#undef KEY
    return LMQ_OK;
}

static int name_ok(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '.' || *s == '_' || *s == '-'))
            return 0;
    return 1;
}

enum { TK_NAME, TK_DESC, TK_RULES, TK_IGNORE, TK_SMOOTH, TK_N };
static const char *const TOP_KEYS[TK_N] = { "name", "description", "rules", "ignore", "smoothquant" };

/* smoothquant: {alpha: A}, 0 < A < 1. */
static lmq_code parse_smoothquant(pctx *c, const yaml_node_t *n, double *alpha)
{
    static const char *const keys[] = { "alpha" };
    if (n->type != YAML_MAPPING_NODE)
        return perr(c, line_of(n), "smoothquant", "expected a mapping ({alpha: 0.5}), got %s", type_name(n));
    const yaml_node_t *v[1] = { 0 };
    int kl[1] = { 0 };
    lmq_code rc = collect(c, n, "smoothquant", keys, 1, v, kl);
    if (rc)
        return rc;
    if (!v[0])
        return perr(c, line_of(n), "smoothquant.alpha", "required key is missing");
    if ((rc = get_real(c, v[0], "smoothquant.alpha", alpha)))
        return rc;
    if (!(*alpha > 0 && *alpha < 1))
        return perr(c, line_of(v[0]), "smoothquant.alpha", "%g is not between 0 and 1", *alpha);
    return LMQ_OK;
}

static lmq_code parse_root(pctx *c, const yaml_node_t *root, q_recipe *r)
{
    if (root->type != YAML_MAPPING_NODE)
        return perr(c, line_of(root), "(top)", "a recipe is a mapping with keys name, rules, ...; got %s",
                    type_name(root));
    const yaml_node_t *v[TK_N] = { 0 };
    int kl[TK_N] = { 0 };
    lmq_code rc = collect(c, root, "", TOP_KEYS, TK_N, v, kl);
    if (rc)
        return rc;

    const char *s;
    if (!v[TK_NAME])
        return perr(c, line_of(root), "name", "required key is missing");
    if ((rc = get_string(c, v[TK_NAME], "name", &s)))
        return rc;
    if (!name_ok(s) || strlen(s) >= Q_RECIPE_NAME_MAX)
        return perr(c, line_of(v[TK_NAME]), "name", "'%s' is not a recipe name ([a-z0-9._-]+, at most %d characters)",
                    s, Q_RECIPE_NAME_MAX - 1);
    snprintf(r->name, sizeof r->name, "%s", s);

    if (v[TK_DESC]) {
        if ((rc = get_string(c, v[TK_DESC], "description", &s)))
            return rc;
        if (!(r->description = dup_str(s)))
            return lmq_fail(c->err, LMQ_E_NOMEM, "%s: out of memory", c->path);
    }

    if (!v[TK_RULES])
        return perr(c, line_of(root), "rules", "required key is missing");
    const yaml_node_t *rules = v[TK_RULES];
    if (rules->type != YAML_SEQUENCE_NODE)
        return perr(c, line_of(rules), "rules", "expected a list of rules, got %s", type_name(rules));
    int n = (int)(rules->data.sequence.items.top - rules->data.sequence.items.start);
    if (n == 0)
        return perr(c, kl[TK_RULES], "rules", "empty: a recipe needs at least one rule");
    if (!(r->rules = calloc((size_t)n, sizeof *r->rules)))
        return lmq_fail(c->err, LMQ_E_NOMEM, "%s: out of memory", c->path);
    for (int i = 0; i < n; i++) {
        const yaml_node_t *item = yaml_document_get_node(c->doc, rules->data.sequence.items.start[i]);
        if (!item)
            return perr(c, line_of(rules), "rules", "malformed list");
        r->n_rules = i + 1; /* so q_recipe_free sees this rule's patterns */
        if ((rc = parse_rule(c, item, i, &r->rules[i])))
            return rc;
    }

    if (v[TK_SMOOTH] && (rc = parse_smoothquant(c, v[TK_SMOOTH], &r->smooth_alpha)))
        return rc;
    if (v[TK_IGNORE])
        return get_patterns(c, v[TK_IGNORE], "ignore", &r->ignore, &r->n_ignore);
    return LMQ_OK;
}

/* Deeper than any recipe is (top > rules > rule > match list), with room to spare. */
#define MAX_DEPTH 6

static lmq_code parse_text(pctx *c, q_recipe *r)
{
    yaml_document_t doc;
    lmq_code rc = lmq_yaml_load(r->text, r->text_len, c->path, MAX_DEPTH, LMQ_E_RECIPE, &doc, c->err);
    if (rc)
        return rc;
    c->doc = &doc;
    const yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root)
        rc = lmq_fail(c->err, LMQ_E_RECIPE, "%s:1: (top): empty recipe (needs name and rules)", c->path);
    else
        rc = parse_root(c, root, r);
    yaml_document_delete(&doc);
    return rc;
}

static void free_patterns(q_pattern *p, int n)
{
    for (int i = 0; i < n; i++)
        free(p[i].text);
    free(p);
}

void q_recipe_free(q_recipe *r)
{
    for (int i = 0; i < r->n_rules; i++)
        free_patterns(r->rules[i].match, r->rules[i].n_match);
    free(r->rules);
    free_patterns(r->ignore, r->n_ignore);
    free(r->description);
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
    pctx c = { NULL, r->path, err };
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

static int any_match(const q_pattern *p, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (q_glob_match(p[i].text, name))
            return 1;
    return 0;
}

/* Every pattern must match a tensor; a pattern of a matrix-only rule must match a matrix (its
 * 1-D matches are passed over, but one that matches only 1-D tensors is a mistake). */
static lmq_code check_pattern(const q_recipe *r, const q_pattern *p, const char *key, int rule,
                              const q_tensor_ref *t, int n, lmq_err *err)
{
    int first = -1, matrices = 0;
    for (int i = 0; i < n; i++)
        if (q_glob_match(p->text, t[i].name)) {
            if (first < 0)
                first = i;
            matrices += t[i].ndim >= 2;
        }
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

static void decide(const q_recipe *r, const q_tensor_ref *t, q_plan_entry *e)
{
    snprintf(e->name, sizeof e->name, "%s", t->name);
    e->qp = (lmq_qparams){ .dtype = LMQ_T_F32, .gran = LMQ_GRAN_NONE };
    if (any_match(r->ignore, r->n_ignore, t->name)) {
        e->keep_reason = Q_KEEP_IGNORED;
        return;
    }
    for (int i = 0; i < r->n_rules; i++) {
        const q_rule *rule = &r->rules[i];
        if (!any_match(rule->match, rule->n_match, t->name))
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

void q_plan_free(q_plan *plan)
{
    free(plan->entries);
    plan->entries = NULL;
    plan->n = 0;
}

lmq_code q_recipe_resolve(const q_recipe *r, const q_tensor_ref *tensors, int n_tensors, int tied,
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
        all[n_tensors] = (q_tensor_ref){ "output.weight", tensors[tok].ndim };

    lmq_code rc = LMQ_OK;
    char key[32];
    for (int i = 0; i < r->n_ignore && !rc; i++)
        rc = check_pattern(r, &r->ignore[i], "ignore", -1, all, n, err);
    for (int k = 0; k < r->n_rules && !rc; k++)
        for (int i = 0; i < r->rules[k].n_match && !rc; i++) {
            snprintf(key, sizeof key, "rules[%d].match", k);
            rc = check_pattern(r, &r->rules[k].match[i], key, k, all, n, err);
        }
    for (int i = 0; i < n && !rc; i++) {
        decide(r, &all[i], &entries[i]);
        if (entries[i].act.scheme != LMQ_ACT_NONE && all[i].ndim != 2)
            rc = lmq_fail(err, LMQ_E_RECIPE,
                          "%s:%d: this rule gives activations to %d-D tensor '%s'; only the input of a matrix "
                          "(a linear layer) is quantised: match the matrices alone",
                          r->path, entries[i].rule_line, all[i].ndim, all[i].name);
    }
    if (!rc) {
        for (int i = 0; i < n && !rc; i++) {
            decide(r, &all[i], &entries[i]);
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

lmq_code q_recipe_resolve_model(const q_recipe *r, const lmq_model *m, q_plan *plan, lmq_err *err)
{
    q_tensor_ref *refs = malloc((size_t)(m->n_tensors ? m->n_tensors : 1) * sizeof *refs);
    if (!refs) {
        memset(plan, 0, sizeof *plan);
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", r->path);
    }
    for (int i = 0; i < m->n_tensors; i++)
        refs[i] = (q_tensor_ref){ m->tensors[i].name, m->tensors[i].ndim };
    lmq_code rc = q_recipe_resolve(r, refs, m->n_tensors, m->arch.tied_embedding, plan, err);
    free(refs);
    return rc;
}
