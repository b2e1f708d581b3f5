/* llm-compressor recipes translated into lmq's rules: the stage and modifier mappings walked by
 * hand (their keys are the user's names), each modifier's arguments, config groups, weights and
 * input activations read by field tables (common/yaml_fields.h) with the recipe's own readers
 * (quantize/recipe_read.h). The spec is llm-compressor's modifiers and compressed-tensors'
 * QuantizationArgs / QuantizationScheme / preset schemes. */
#include "quantize/llmc.h"

#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/hf_model.h"
#include "quantize/recipe_read.h"
#include "schemes/scheme.h"

/* ---- patterns: targets and ignore ---- */

static lmq_code nomem(pctx *c) { return lmq_fail(c->err, LMQ_E_NOMEM, "%s: out of memory", c->path); }

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    return d ? memcpy(d, s, n) : NULL;
}

static q_pattern *push_pattern(q_pattern **arr, int *count)
{
    q_pattern *grown = realloc(*arr, (size_t)(*count + 1) * sizeof **arr);
    if (!grown)
        return NULL;
    *arr = grown;
    memset(&grown[*count], 0, sizeof **arr);
    return &grown[(*count)++];
}

/* Python's re syntax as POSIX extended syntax, anchored at the start (re.match): the classes \d,
 * \w, \s spelt out, (?: groups plain, and the '?' of a lazy quantifier dropped (whether a name
 * matches does not depend on laziness). Other (? forms are refused. */
static lmq_code regex_to_ere(pctx *c, int line, const char *key, const char *re, char *out, size_t cap)
{
    static const struct { char esc; const char *ere; } CLASSES[] = {
        { 'd', "[0-9]" }, { 'w', "[A-Za-z0-9_]" }, { 's', "[ \t]" },
        { 'D', "[^0-9]" }, { 'W', "[^A-Za-z0-9_]" }, { 'S', "[^ \t]" },
    };
    size_t o = (size_t)snprintf(out, cap, "^(");
    int after_quantifier = 0;
    for (const char *p = re; *p && o + 16 < cap; p++) {
        const char *piece = NULL;
        char two[3] = { p[0], 0, 0 };
        if (*p == '\\' && p[1]) {
            for (size_t i = 0; i < sizeof CLASSES / sizeof CLASSES[0]; i++)
                if (CLASSES[i].esc == p[1])
                    piece = CLASSES[i].ere;
            if (!piece && ((p[1] >= 'a' && p[1] <= 'z') || (p[1] >= 'A' && p[1] <= 'Z')))
                return perr(c, line, key, "pattern 're:%s': escape '\\%c' has no POSIX equivalent; lmq reads "
                            "\\d, \\w, \\s and escaped punctuation", re, p[1]);
            two[1] = p[1];
            p++;
            after_quantifier = 0;
        } else if (*p == '(' && p[1] == '?') {
            if (p[2] != ':')
                return perr(c, line, key, "pattern 're:%s': '(?%c' is not read by lmq; plain groups (...) and "
                            "(?:...) are", re, p[2] ? p[2] : ' ');
            p += 2;
            after_quantifier = 0;
        } else if (*p == '?' && after_quantifier) {
            after_quantifier = 0;
            continue;
        } else {
            after_quantifier = *p == '*' || *p == '+' || *p == '?' || *p == '}';
        }
        o += (size_t)snprintf(out + o, cap - o, "%s", piece ? piece : two);
    }
    if (o + 16 >= cap)
        return perr(c, line, key, "pattern 're:%s' is too long", re);
    snprintf(out + o, cap - o, ")");
    return LMQ_OK;
}

static lmq_code add_regex(pctx *c, const yaml_node_t *n, const char *key, const char *re, q_pattern **arr,
                          int *count)
{
    char ere[1024], msg[160];
    lmq_code rc = regex_to_ere(c, line_of(n), key, re, ere, sizeof ere);
    if (rc)
        return rc;
    q_pattern *p = push_pattern(arr, count);
    regex_t *compiled = malloc(sizeof *compiled);
    if (!p || !compiled || !(p->text = dup_str(scalar(n)))) {
        free(compiled);
        return nomem(c);
    }
    p->line = line_of(n);
    int e = regcomp(compiled, ere, REG_EXTENDED | REG_NOSUB);
    if (e) {
        regerror(e, compiled, msg, sizeof msg);
        free(compiled);
        return perr(c, line_of(n), key, "pattern '%s' is not a regular expression lmq reads: %s", scalar(n), msg);
    }
    p->re = compiled;
    return LMQ_OK;
}

int q_llmc_regex_match(const q_pattern *p, const char *name, int family)
{
    char hf[2 * LMQ_NAME_MAX];
    for (int f = 0, found = 0; found >= 0; f++)
        if ((found = lmq_hf_name_of(name, f, 1, hf, sizeof hf)) > 0 &&
            (!family || (int)lmq_hf_families[f].family == family)) {
            char *dot = strrchr(hf, '.'); /* the module: without ".weight" or ".bias" */
            if (dot)
                *dot = '\0';
            if (regexec(p->re, hf, 0, NULL, 0) == 0)
                return 1;
        }
    return 0;
}

void q_llmc_regex_free(q_pattern *p)
{
    if (p->re)
        regfree(p->re);
    free(p->re);
    p->re = NULL;
}

/* The canonical patterns llm-compressor's class target Linear stands for: every linear layer of
 * the blocks (their 1-D tensors are passed over) and the classifier (lm_head). */
static const char *const LINEAR[] = { "blk.*.weight", "output.weight" };

static int is_class_name(const char *s) { return *s >= 'A' && *s <= 'Z' && !strchr(s, '.'); }

static lmq_code add_linear(pctx *c, int line, q_pattern **arr, int *count)
{
    for (size_t i = 0; i < sizeof LINEAR / sizeof LINEAR[0]; i++) {
        q_pattern *p = push_pattern(arr, count);
        if (!p || !(p->text = dup_str(LINEAR[i])))
            return nomem(c);
        p->line = line;
    }
    return LMQ_OK;
}

static lmq_code add_target(pctx *c, const yaml_node_t *n, const char *key, q_pattern **arr, int *count)
{
    const char *s;
    lmq_code rc = get_string(c, n, key, &s);
    if (rc)
        return rc;
    if (!strncmp(s, "re:", 3))
        return add_regex(c, n, key, s + 3, arr, count);
    if (!strcmp(s, "Linear"))
        return add_linear(c, line_of(n), arr, count);
    if (is_class_name(s))
        return perr(c, line_of(n), key, "module class '%s': lmq reads the class Linear (every linear layer and "
                    "lm_head) only; name modules (model.layers.0.mlp.down_proj) or give re: patterns over their "
                    "names", s);
    return get_patterns(c, n, key, arr, count);
}

/* A target, or a list of them. */
static lmq_code get_targets(pctx *c, const yaml_node_t *n, const char *key, q_pattern **arr, int *count)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return add_target(c, n, key, arr, count);
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
        const yaml_node_t *item = yaml_document_get_node(c->doc, *it);
        lmq_code rc = item ? add_target(c, item, key, arr, count) : perr(c, line_of(n), key, "malformed list");
        if (rc)
            return rc;
    }
    return *count ? LMQ_OK : perr(c, line_of(n), key, "empty list: it must name something");
}

/* ---- the tables ---- */

static int is_null(const yaml_node_t *n)
{
    static const char *const NULLS[] = { "null", "Null", "NULL", "~", "" };
    for (size_t i = 0; n && n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
                       i < sizeof NULLS / sizeof NULLS[0]; i++)
        if (!strcmp(scalar(n), NULLS[i]))
            return 1;
    return 0;
}

/* The value's node, read later (rows that need their neighbours). */
static lmq_code keep(ROW_ARGS)
{
    (void)rd;
    *(yaml_node_t **)((char *)base + f->off) = is_null(v) ? NULL : v;
    return LMQ_OK;
}

/* A key lmq knows but cannot honour: f->data says what lmq does instead. */
static lmq_code refuse(ROW_ARGS)
{
    return is_null(v) ? LMQ_OK : perr(CTX, line_of(key), path, "%s", (const char *)f->data);
}

/* A number in f->lo..f->hi, widened to the double at f->off. */
static lmq_code number(ROW_ARGS)
{
    double *x = (double *)((char *)base + f->off);
    lmq_code rc = get_real(CTX, v, path, x);
    if (!rc && !(*x >= f->lo && *x <= f->hi))
        return perr(CTX, line_of(v), path, "%g is outside %g..%g", *x, f->lo, f->hi);
    return rc;
}

/* An integer, in f->lo..f->hi where f->hi is set. */
static lmq_code uint_row(ROW_ARGS)
{
    double *x = (double *)((char *)base + f->off);
    lmq_code rc = get_uint(CTX, v, path, x);
    if (!rc && f->hi > 0 && !(*x >= f->lo && *x <= f->hi))
        return perr(CTX, line_of(v), path, "%g is outside %g..%g", *x, f->lo, f->hi);
    return rc;
}
static lmq_code bool_row(ROW_ARGS) { return get_bool(CTX, v, path, (double *)((char *)base + f->off)); }

#define OPT .flags = YF_OPTIONAL
#define REFUSE(name, s, m, why) ROW(name, refuse, s, m, .data = why, OPT)

/* QuantizationArgs: weights and input_activations read into the same struct. */
typedef enum { TYPE_INT, TYPE_FLOAT } qtype;
static const char *const TYPES[] = { "int", "float" };
typedef enum { ST_TENSOR, ST_CHANNEL, ST_GROUP, ST_BLOCK, ST_TOKEN, ST_TENSOR_GROUP, ST_UNSET } strategy;
static const char *const STRATEGIES[] = { "tensor", "channel", "group", "block", "token", "tensor_group" };

typedef struct {
    double bits, sym, dynamic, group;
    uint8_t type, strategy;
    yaml_node_t *actorder, *observer;
    const yaml_node_t *at; /* the mapping */
} qargs;

#define QARGS_ROWS                                                                                                 \
    ROW("num_bits", uint_row, qargs, bits, OPT), ROW("type", read_enum, qargs, type, YF_NAMES(TYPES), OPT),     \
        ROW("symmetric", bool_row, qargs, sym, OPT),                                                             \
        ROW("strategy", read_enum, qargs, strategy, YF_NAMES(STRATEGIES), OPT),                                  \
        ROW("dynamic", bool_row, qargs, dynamic, OPT), ROW("observer", keep, qargs, observer, OPT)

static const lmq_yf_field weights_fields[] = {
    QARGS_ROWS,
    ROW("group_size", uint_row, qargs, group, OPT),
    ROW("actorder", keep, qargs, actorder, OPT),
    REFUSE("block_structure", qargs, at, "lmq has no block strategy for integer weights; strategy group with "
           "group_size is the nearest"),
};
static const lmq_yf_table weights_table = YF_TABLE(weights_fields);

static const lmq_yf_field acts_fields[] = {
    QARGS_ROWS,
    REFUSE("group_size", qargs, at, "lmq's activations take one scale per token or per tensor (strategy token or "
           "tensor), not per group"),
};
static const lmq_yf_table acts_table = YF_TABLE(acts_fields);

/* A config group (QuantizationScheme). */
typedef struct {
    yaml_node_t *targets, *weights, *acts;
} group_args;

static const lmq_yf_field group_fields[] = {
    ROW("targets", keep, group_args, targets),
    ROW("weights", keep, group_args, weights),
    ROW("input_activations", keep, group_args, acts, OPT),
    REFUSE("output_activations", group_args, acts, "lmq quantises weights and the inputs of linear layers only; "
           "output activations stay in float: remove output_activations"),
    REFUSE("format", group_args, acts, "lmq chooses the compressed-tensors format when it exports (lmq export --to "
           "compressed-tensors): remove format"),
};
static const lmq_yf_table group_table = YF_TABLE(group_fields);

/* A modifier's arguments. */
typedef struct {
    yaml_node_t *targets, *ignore, *scheme, *groups, *actorder;
    double damp, block, strength;
} mod_args;

#define QUANT_ROWS                                                                                                  \
    ROW("targets", keep, mod_args, targets, OPT), ROW("ignore", keep, mod_args, ignore, OPT),                    \
        ROW("scheme", keep, mod_args, scheme, OPT), ROW("config_groups", keep, mod_args, groups, OPT),           \
        REFUSE("kv_cache_scheme", mod_args, targets, "lmq keeps the KV cache in float (fp32): remove "           \
               "kv_cache_scheme")

static const lmq_yf_field quant_fields[] = { QUANT_ROWS };
static const lmq_yf_field gptq_fields[] = {
    QUANT_ROWS,
    ROW("dampening_frac", number, mod_args, damp, .lo = 1e-6, .hi = 10, OPT),
    ROW("block_size", uint_row, mod_args, block, .lo = 1, .hi = 65536, OPT),
    ROW("actorder", keep, mod_args, actorder, OPT),
    REFUSE("sequential_targets", mod_args, targets, "lmq's GPTQ runs block by block (each decoder layer) always: "
           "remove sequential_targets"),
};
static const lmq_yf_field awq_fields[] = {
    QUANT_ROWS,
    REFUSE("mappings", mod_args, targets, "lmq's AWQ scales each linear layer's input channels from that layer's "
           "own activations (no cross-layer mappings): remove mappings"),
    REFUSE("duo_scaling", mod_args, targets, "lmq's AWQ searches the activation exponent alone (scales "
           "mean|x|^r): remove duo_scaling"),
};
static const lmq_yf_field smooth_fields[] = {
    ROW("smoothing_strength", number, mod_args, strength, .lo = 0.001, .hi = 0.999, OPT),
    REFUSE("mappings", mod_args, targets, "lmq smooths every linear layer of the blocks with its own input "
           "statistics (no cross-layer mappings): remove mappings"),
    REFUSE("ignore", mod_args, targets, "lmq smooths every linear layer of the blocks: remove ignore here (the "
           "quantisation modifier's ignore keeps layers in float)"),
};

typedef enum { MOD_QUANT, MOD_SMOOTH } mod_kind;

static const struct {
    const char *name;
    mod_kind kind;
    lmq_method method;
    lmq_yf_table table;
} MODIFIERS[] = {
    { "QuantizationModifier", MOD_QUANT, LMQ_METHOD_RTN, YF_TABLE(quant_fields) },
    { "GPTQModifier", MOD_QUANT, LMQ_METHOD_GPTQ, YF_TABLE(gptq_fields) },
    { "AWQModifier", MOD_QUANT, LMQ_METHOD_AWQ, YF_TABLE(awq_fields) },
    { "SmoothQuantModifier", MOD_SMOOTH, LMQ_METHOD_RTN, YF_TABLE(smooth_fields) },
};
#define N_MODIFIERS (int)(sizeof MODIFIERS / sizeof MODIFIERS[0])

/* Presets lmq has no grid for, and what it would do instead. */
static const struct {
    const char *name, *instead;
} NO_PRESET[] = {
    { "FP8_BLOCK", "lmq's fp8 has one scale per output row, not 128x128 blocks: FP8_DYNAMIC gives fp8 weights "
                   "with a scale per row and dynamic fp8 activations per token (FP8: the weights alone)" },
    { "W4A4", "lmq's activations are int8 or fp8: W4A8 gives int4 weights with int8 activations per token" },
    { "NVFP4", "lmq has no fp4: W4A16 gives int4 weights in groups of 128" },
    { "NVFP4A16", "lmq has no fp4: W4A16 gives int4 weights in groups of 128" },
    { "MXFP4", "lmq has no fp4: W4A16 gives int4 weights in groups of 128" },
};

/* ---- translation ---- */

typedef struct {
    const lmq_yf_reader *rd;
    q_recipe *r;
    const char *modifier; /* its name */
    lmq_method method;
    const mod_args *args;
} tctx;

#define TC(t) ((pctx *)(t)->rd->ctx)

__attribute__((format(printf, 2, 3))) static lmq_code say(tctx *t, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    size_t old = t->r->translation ? strlen(t->r->translation) : 0;
    char *grown = realloc(t->r->translation, old + strlen(line) + 2);
    if (!grown)
        return nomem(TC(t));
    snprintf(grown + old, strlen(line) + 2, "%s\n", line);
    t->r->translation = grown;
    return LMQ_OK;
}

static void list_patterns(const q_pattern *p, int n, char *out, size_t cap)
{
    out[0] = '\0';
    for (int i = 0; i < n; i++)
        snprintf(out + strlen(out), cap - strlen(out), "%s%s%s%s%s", i ? ", " : "", p[i].text,
                 p[i].canon ? " (" : "", p[i].canon ? p[i].canon : "", p[i].canon ? ")" : "");
}

/* actorder: null or false (none); static, weight or true (GPTQ's act-order with static groups). */
static lmq_code read_actorder(tctx *t, const yaml_node_t *n, const char *key, int *act_order)
{
    if (!n)
        return LMQ_OK;
    const char *s;
    lmq_code rc = get_string(TC(t), n, key, &s);
    if (rc)
        return rc;
    if (!strcmp(s, "false") || !strcmp(s, "False"))
        return LMQ_OK;
    if (strcmp(s, "static") && strcmp(s, "weight") && strcmp(s, "true") && strcmp(s, "True"))
        return perr(TC(t), line_of(n), key, "actorder '%s': lmq's act-order keeps static groups (the stored layout "
                    "stays plain), which compressed-tensors calls actorder: weight; write weight (or static)", s);
    if (t->method != LMQ_METHOD_GPTQ)
        return perr(TC(t), line_of(n), key, "act-order is GPTQ's: %s rounds columns in order; use GPTQModifier",
                    t->modifier);
    *act_order = 1;
    return LMQ_OK;
}

static lmq_code check_observer(tctx *t, const qargs *a, const char *key)
{
    const char *s;
    if (!a->observer)
        return LMQ_OK;
    lmq_code rc = get_string(TC(t), a->observer, key, &s);
    if (!rc && strcmp(s, "minmax") && strcmp(s, "memoryless_minmax"))
        return perr(TC(t), line_of(a->observer), key, "observer '%s': lmq takes each group's min and max "
                    "(minmax); remove observer", s);
    return rc;
}

static lmq_code read_qargs(tctx *t, const lmq_yf_table *table, yaml_node_t *n, const char *path, qargs *a)
{
    *a = (qargs){ .bits = 8, .sym = 1, .type = TYPE_INT, .strategy = ST_UNSET, .at = n };
    if (n->type != YAML_MAPPING_NODE)
        return perr(TC(t), line_of(n), path, "expected a mapping (num_bits, type, strategy, ...), got %s",
                    type_name(n));
    return lmq_yf_read_map(t->rd, table, a, n, path, n);
}

/* weights -> the rule's scheme (and act-order). */
static lmq_code weights_qp(tctx *t, yaml_node_t *n, const char *path, q_rule *rule)
{
    static const struct { unsigned bits; lmq_dtype dtype; } INTS[] = {
        { 8, LMQ_T_INT8 }, { 4, LMQ_T_INT4 }, { 3, LMQ_T_INT3 }, { 2, LMQ_T_INT2 },
    };
    qargs a;
    char key[160];
    lmq_code rc = read_qargs(t, &weights_table, n, path, &a);
    snprintf(key, sizeof key, "%.120s.observer", path);
    if (rc || (rc = check_observer(t, &a, key)))
        return rc;
    pctx *c = TC(t);
    int line = line_of(n);
    if (a.dynamic)
        return perr(c, line, path, "dynamic: true: lmq computes weight scales once, when it quantises (dynamic: "
                    "false)");
    if (a.strategy == ST_UNSET)
        a.strategy = a.group ? ST_GROUP : ST_TENSOR;
    if (a.strategy > ST_GROUP)
        return perr(c, line, path, "strategy %s: lmq's weights take tensor, channel or group (with group_size)",
                    STRATEGIES[a.strategy]);
    if (a.type == TYPE_FLOAT) {
        if (a.bits != 8 || !a.sym || a.strategy != ST_CHANNEL || a.group)
            return perr(c, line, path, "float weights: lmq's are fp8 e4m3 (num_bits 8, symmetric) with one scale "
                        "per output row (strategy channel), which is what scheme FP8 gives");
        rule->qp = (lmq_qparams){ .dtype = LMQ_T_F8_E4M3, .gran = LMQ_GRAN_CHANNEL };
    } else {
        size_t i = 0;
        while (i < sizeof INTS / sizeof INTS[0] && INTS[i].bits != a.bits)
            i++;
        if (i == sizeof INTS / sizeof INTS[0])
            return perr(c, line, path, "num_bits %g: lmq's integer weights have 8, 4, 3 or 2 bits", a.bits);
        static const lmq_gran GRAN[] = { LMQ_GRAN_TENSOR, LMQ_GRAN_CHANNEL, LMQ_GRAN_GROUP };
        rule->qp = (lmq_qparams){ .dtype = (uint16_t)INTS[i].dtype, .gran = (uint8_t)GRAN[a.strategy],
                                  .asym = (uint8_t)!a.sym };
    }
    if (a.strategy == ST_GROUP) {
        uint32_t g = (uint32_t)a.group;
        if (g < 16 || g > Q_GROUP_MAX || (g & (g - 1)))
            return perr(c, line, path, "group_size %u: lmq's groups are powers of two from 16 to %u%s", g,
                        Q_GROUP_MAX, g ? "" : " (strategy group needs group_size)");
        rule->qp.group = g;
    } else if (a.group) {
        return perr(c, line, path, "group_size with strategy %s: give strategy group", STRATEGIES[a.strategy]);
    }
    snprintf(key, sizeof key, "%.120s.actorder", path);
    return read_actorder(t, a.actorder, key, &rule->method.act_order);
}

/* input_activations -> the rule's activations. */
static lmq_code acts_of(tctx *t, yaml_node_t *n, const char *path, q_rule *rule)
{
    qargs a;
    char key[160];
    lmq_code rc = read_qargs(t, &acts_table, n, path, &a);
    snprintf(key, sizeof key, "%.120s.observer", path);
    if (rc || (rc = check_observer(t, &a, key)))
        return rc;
    if (a.strategy == ST_UNSET)
        a.strategy = ST_TENSOR;
    if (a.bits != 8 || !a.sym)
        return perr(TC(t), line_of(n), path, "lmq's activations are int8 or fp8 e4m3, symmetric (num_bits 8, type "
                    "int or float, symmetric true)");
    if (a.strategy != ST_TOKEN && a.strategy != ST_TENSOR)
        return perr(TC(t), line_of(n), path, "strategy %s: lmq's activations take one scale per token or per "
                    "tensor", STRATEGIES[a.strategy]);
    if (!a.dynamic)
        return perr(TC(t), line_of(n), path, "dynamic: false: lmq computes activation scales at each call "
                    "(dynamic: true); static scales from calibration are not kept");
    rule->act = (lmq_act){ (uint8_t)(a.type == TYPE_FLOAT ? LMQ_ACT_FP8_E4M3 : LMQ_ACT_INT8),
                           (uint8_t)(a.strategy == ST_TOKEN ? LMQ_ACT_TOKEN : LMQ_ACT_TENSOR) };
    return LMQ_OK;
}

static q_rule *new_rule(tctx *t, int line)
{
    q_rule *grown = realloc(t->r->rules, (size_t)(t->r->n_rules + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    t->r->rules = grown;
    q_rule *rule = &grown[t->r->n_rules++];
    memset(rule, 0, sizeof *rule);
    rule->line = line;
    rule->method = q_method_defaults[t->method];
    if (t->method == LMQ_METHOD_GPTQ) {
        if (t->args->damp)
            rule->method.damp = t->args->damp;
        if (t->args->block)
            rule->method.block = (uint32_t)t->args->block;
    }
    return rule;
}

/* The rule is complete: check what the method allows and say what it became. */
static lmq_code finish_rule(tctx *t, const q_rule *rule, const char *from, const yaml_node_t *at, const char *path)
{
    const lmq_encoding *e = lmq_encoding_of(rule->qp.dtype);
    if (rule->method.method != LMQ_METHOD_RTN && !e->integer)
        return perr(TC(t), line_of(at), path, "%s chooses integer codes; %s is not an integer scheme (use "
                    "QuantizationModifier for it)", t->modifier, e->name);
    char match[512], scheme[LMQ_SCHEME_MAX + 64];
    list_patterns(rule->match, rule->n_match, match, sizeof match);
    q_describe(&rule->qp, scheme, sizeof scheme);
    if (rule->act.scheme != LMQ_ACT_NONE)
        snprintf(scheme + strlen(scheme), sizeof scheme - strlen(scheme), ", activations %s per %s, dynamic",
                 lmq_act_scheme_names[rule->act.scheme], lmq_act_gran_names[rule->act.gran]);
    else if (!e->integer) /* fp8 weights alone (FP8) or with fp8 activations (FP8_DYNAMIC): say which */
        snprintf(scheme + strlen(scheme), sizeof scheme - strlen(scheme), ", weight-only");
    return say(t, "llm-compressor %s %s -> rule: match %s, scheme %s, method %s%s%s", t->modifier, from, match,
               scheme, lmq_method_names[rule->method.method], rule->method.act_order ? " (act-order)" : "",
               rule->preset && !strcmp(rule->preset, "FP8") ? "; llm-compressor's FP8 has one weight scale per tensor "
               "and static fp8 activations: lmq's FP8 has a scale per row and is weight-only (activations in "
               "float); FP8_DYNAMIC adds dynamic fp8 activations per token" : "");
}

/* scheme: PRESET (with the modifier's targets), or {PRESET: targets, ...}. */
static lmq_code preset_rule(tctx *t, const yaml_node_t *name, const yaml_node_t *targets, const char *path)
{
    const char *s;
    pctx *c = TC(t);
    lmq_code rc = get_string(c, name, path, &s);
    if (rc)
        return rc;
    const q_preset *p = q_preset_find(s);
    for (size_t i = 0; !p && i < sizeof NO_PRESET / sizeof NO_PRESET[0]; i++)
        if (!strcmp(NO_PRESET[i].name, s))
            return perr(c, line_of(name), path, "preset %s: %s", s, NO_PRESET[i].instead);
    if (!p)
        return perr(c, line_of(name), path, "unknown preset '%s' (lmq reads W4A16, W4A16_ASYM, W8A16, W8A8, INT8, "
                    "W4A8, FP8 and FP8_DYNAMIC)", s);
    q_rule *rule = new_rule(t, line_of(name));
    if (!rule)
        return nomem(c);
    rule->qp = p->qp;
    rule->act = p->act;
    rule->preset = p->name;
    char from[96], key[160];
    snprintf(key, sizeof key, "%.120s.targets", path);
    if (targets)
        rc = get_targets(c, targets, key, &rule->match, &rule->n_match);
    else /* QuantizationModifier's default targets */
        rc = add_linear(c, line_of(name), &rule->match, &rule->n_match);
    snprintf(from, sizeof from, "scheme %s", s);
    return rc ? rc : finish_rule(t, rule, from, name, path);
}

static lmq_code group_rule(tctx *t, const yaml_node_t *gkey, yaml_node_t *gval, const char *path)
{
    pctx *c = TC(t);
    group_args g = { 0 };
    char key[160];
    if (gval->type != YAML_MAPPING_NODE)
        return perr(c, line_of(gval), path, "expected a config group (targets, weights, input_activations), got %s",
                    type_name(gval));
    lmq_code rc = lmq_yf_read_map(t->rd, &group_table, &g, gval, path, gval);
    if (rc)
        return rc;
    if (!g.targets || !g.weights)
        return perr(c, line_of(gval), path, "needs targets and weights");
    q_rule *rule = new_rule(t, line_of(gkey));
    if (!rule)
        return nomem(c);
    snprintf(key, sizeof key, "%.120s.targets", path);
    if ((rc = get_targets(c, g.targets, key, &rule->match, &rule->n_match)))
        return rc;
    snprintf(key, sizeof key, "%.120s.weights", path);
    if ((rc = weights_qp(t, g.weights, key, rule)))
        return rc;
    snprintf(key, sizeof key, "%.120s.input_activations", path);
    if (g.acts && (rc = acts_of(t, g.acts, key, rule)))
        return rc;
    char from[96];
    snprintf(from, sizeof from, "config_groups.%.60s", scalar(gkey));
    return finish_rule(t, rule, from, gkey, path);
}

/* Iterates mapping n: fn on each pair, with path "<path>.<key>". */
typedef lmq_code (*pair_fn)(tctx *t, const yaml_node_t *k, yaml_node_t *v, const char *path);

static lmq_code each_pair(tctx *t, yaml_node_t *n, const char *path, const char *what, pair_fn fn)
{
    pctx *c = TC(t);
    if (n->type != YAML_MAPPING_NODE)
        return perr(c, line_of(n), *path ? path : "(top)", "expected a mapping of %s, got %s", what, type_name(n));
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
        if (!k || !v || k->type != YAML_SCALAR_NODE)
            return perr(c, line_of(n), *path ? path : "(top)", "a key must be a plain name");
        char sub[160];
        snprintf(sub, sizeof sub, "%.90s%s%.60s", path, *path ? "." : "", scalar(k));
        lmq_code rc = fn(t, k, v, sub);
        if (rc)
            return rc;
    }
    return LMQ_OK;
}

static lmq_code quant_modifier(tctx *t, yaml_node_t *v, const char *path)
{
    pctx *c = TC(t);
    const mod_args *a = t->args;
    char key[160];
    lmq_code rc = LMQ_OK;
    if (a->scheme && a->groups)
        return perr(c, line_of(a->groups), path, "scheme and config_groups both given: give one");
    if (!a->scheme && !a->groups)
        return perr(c, line_of(v), path, "needs scheme or config_groups (lmq has no default scheme)");
    snprintf(key, sizeof key, "%.120s.actorder", path);
    int act_order = 0;
    if ((rc = read_actorder(t, a->actorder, key, &act_order)))
        return rc;
    int first = t->r->n_rules;
    if (a->groups && a->targets)
        return perr(c, line_of(a->targets), path, "targets with config_groups: each config group names its own "
                    "targets");
    snprintf(key, sizeof key, "%.120s.%s", path, a->groups ? "config_groups" : "scheme");
    if (a->groups)
        rc = each_pair(t, a->groups, key, "config groups", group_rule);
    else if (a->scheme->type == YAML_MAPPING_NODE)
        for (yaml_node_pair_t *p = a->scheme->data.mapping.pairs.start; !rc && p < a->scheme->data.mapping.pairs.top;
             p++)
            rc = preset_rule(t, yaml_document_get_node(c->doc, p->key), yaml_document_get_node(c->doc, p->value),
                             key);
    else
        rc = preset_rule(t, a->scheme, a->targets, key);
    for (int i = first; !rc && act_order && i < t->r->n_rules; i++)
        t->r->rules[i].method.act_order = 1;
    if (!rc && a->ignore) {
        int before = t->r->n_ignore;
        snprintf(key, sizeof key, "%.120s.ignore", path);
        if ((rc = get_targets(c, a->ignore, key, &t->r->ignore, &t->r->n_ignore)))
            return rc;
        char list[512];
        list_patterns(t->r->ignore + before, t->r->n_ignore - before, list, sizeof list);
        rc = say(t, "llm-compressor %s ignore -> ignore: %s", t->modifier, list);
    }
    return rc;
}

static lmq_code modifier(tctx *t, const yaml_node_t *k, yaml_node_t *v, const char *path)
{
    pctx *c = TC(t);
    int i = 0;
    while (i < N_MODIFIERS && strcmp(MODIFIERS[i].name, scalar(k)))
        i++;
    if (i == N_MODIFIERS)
        return perr(c, line_of(k), path, "unknown modifier (lmq translates QuantizationModifier, GPTQModifier, "
                    "AWQModifier and SmoothQuantModifier)");
    mod_args a = { .strength = 0.5 };
    lmq_code rc = is_null(v) ? LMQ_OK : lmq_yf_read_map(t->rd, &MODIFIERS[i].table, &a, v, path, v);
    if (rc)
        return rc;
    t->modifier = MODIFIERS[i].name;
    t->method = MODIFIERS[i].method;
    t->args = &a;
    if (MODIFIERS[i].kind == MOD_QUANT)
        return quant_modifier(t, v, path);
    if (t->r->smooth_alpha > 0)
        return perr(c, line_of(k), path, "a second SmoothQuantModifier: lmq smooths once");
    t->r->smooth_alpha = a.strength;
    return say(t, "llm-compressor SmoothQuantModifier smoothing_strength %g -> smoothquant: {alpha: %g}", a.strength,
               a.strength);
}

static lmq_code stage_entry(tctx *t, const yaml_node_t *k, yaml_node_t *v, const char *path)
{
    if (!strstr(scalar(k), "modifiers"))
        return perr(TC(t), line_of(k), path, "a stage holds groups of modifiers (\"quant_modifiers: ...\"); lmq "
                    "reads nothing else in a stage");
    return each_pair(t, v, path, "modifiers", modifier);
}

static lmq_code top_entry(tctx *t, const yaml_node_t *k, yaml_node_t *v, const char *path)
{
    if (!strstr(scalar(k), "stage"))
        return perr(TC(t), line_of(k), path, "an llm-compressor recipe holds stages (\"quant_stage: ...\"); lmq "
                    "reads nothing else at its top");
    return each_pair(t, v, path, "modifier groups", stage_entry);
}

int q_llmc_is_recipe(const yaml_node_t *root, yaml_document_t *doc)
{
    int stage = 0, rules = 0;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = yaml_document_get_node(doc, p->key);
        if (k && k->type == YAML_SCALAR_NODE) {
            stage |= strstr(scalar(k), "stage") != NULL;
            rules |= !strcmp(scalar(k), "rules");
        }
    }
    return stage && !rules;
}

/* The recipe's name: its file's, without directories and extension, in [a-z0-9._-]. */
static void name_from_path(const char *path, char *name, size_t cap)
{
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t n = 0;
    for (const char *p = base; *p && n + 1 < cap; p++) {
        char ch = *p >= 'A' && *p <= 'Z' ? (char)(*p - 'A' + 'a') : *p;
        name[n++] = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ? ch : '-';
    }
    name[n] = '\0';
    char *ext = strrchr(name, '.');
    if (ext && (!strcmp(ext, ".yaml") || !strcmp(ext, ".yml")))
        *ext = '\0';
    if (!*name)
        snprintf(name, cap, "llm-compressor");
}

lmq_code q_llmc_read(const lmq_yf_reader *rd, yaml_node_t *root, q_recipe *r)
{
    tctx t = { .rd = rd, .r = r };
    name_from_path(CTX->path, r->name, sizeof r->name);
    lmq_code rc = each_pair(&t, root, "", "stages", top_entry);
    if (!rc && r->n_rules == 0)
        return perr(CTX, line_of(root), "(top)", "no quantisation modifier: lmq needs a QuantizationModifier, "
                    "GPTQModifier or AWQModifier with a scheme or config_groups");
    return rc;
}
