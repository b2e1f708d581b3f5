/* The manifest in YAML. One table per mapping describes its keys (name, kind, where the value
 * lives in the struct); the emitter and the parser both walk these tables, so the two cannot
 * drift apart. Key reference: manifests/schema.md. */
#include "formats/manifest.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <yaml.h>

#include "common/yaml_doc.h"

/* ---- the schema tables ---- */

typedef enum {
    K_STR,  /* char[size] */
    K_TEXT, /* owned char * */
    K_UINT, /* unsigned integer of size bytes */
    K_INT,  /* int */
    K_REAL, /* float (size 4) or double (size 8) */
    K_BOOL, /* integer of size bytes, 0 or 1 */
    K_HEX,  /* uint64_t checksum written as 16 hex digits */
    K_ENUM, /* unsigned integer of size bytes, written as names[value] */
    K_MAP,  /* fields of sub at base + off */
    K_SEQ,  /* array pointer at off, int count at count_off and capacity at cap_off; size = element size */
} kind;

enum {
    F_OPTIONAL = 1, /* may be absent, and is left out when empty (see absent()) */
    F_LITERAL = 2,  /* K_TEXT in YAML literal block style (multi-line text) */
};

typedef struct table table;
typedef struct {
    const char *key;
    kind k;
    size_t off, size;
    int flags;
    const char *const *names; /* K_ENUM: the name of value v is at names + v·stride bytes */
    unsigned n_names;
    size_t stride;            /* 0: an array of names; else a column of a table of structs */
    const table *sub;
    size_t count_off, cap_off, present_off;
} field;

struct table {
    const field *f;
    int n;
};

#define LEN(a) (sizeof a / sizeof a[0])
#define TABLE(a) { a, (int)LEN(a) }
/* A key stored in member m of struct s. */
#define KEY(name, kind_, s, m, ...) \
    { .key = name, .k = kind_, .off = offsetof(s, m), .size = sizeof(((s *)0)->m), __VA_ARGS__ }
#define NAMES(a) .names = a, .n_names = (unsigned)LEN(a)

/* The name of value v of a K_ENUM field, or NULL. */
static const char *enum_name(const field *f, uint64_t v)
{
    if (v >= f->n_names)
        return NULL;
    return *(const char *const *)((const char *)f->names + v * (f->stride ? f->stride : sizeof *f->names));
}

static const char *const family_names[] = { [LMQ_FAMILY_GPT2] = "gpt2", [LMQ_FAMILY_LLAMA] = "llama" };
static const char *const rope_names[] = { [LMQ_ROPE_NONE] = "none", [LMQ_ROPE_INTERLEAVED] = "interleaved",
                                          [LMQ_ROPE_HALF] = "half" };
static const char *const tok_names[] = { [LMQ_TOK_NONE] = "none", [LMQ_TOK_LLAMA2C] = "llama2c",
                                         [LMQ_TOK_GPT2] = "gpt2", [LMQ_TOK_HF_JSON] = "hf_json" };

static const field arch_fields[] = {
    KEY("family", K_ENUM, lmq_arch, family, NAMES(family_names)),
    KEY("dim", K_INT, lmq_arch, dim),
    KEY("hidden_dim", K_INT, lmq_arch, hidden_dim),
    KEY("n_layers", K_INT, lmq_arch, n_layers),
    KEY("n_heads", K_INT, lmq_arch, n_heads),
    KEY("n_kv_heads", K_INT, lmq_arch, n_kv_heads),
    KEY("vocab_size", K_INT, lmq_arch, vocab_size),
    KEY("max_seq", K_INT, lmq_arch, max_seq),
    KEY("norm_eps", K_REAL, lmq_arch, norm_eps),
    KEY("rope_theta", K_REAL, lmq_arch, rope_theta),
    KEY("tied_embedding", K_BOOL, lmq_arch, tied_embedding),
    KEY("rope", K_ENUM, lmq_arch, rope, NAMES(rope_names)),
    KEY("tokenizer", K_ENUM, lmq_arch, tokenizer, NAMES(tok_names)),
    KEY("bos_id", K_INT, lmq_arch, bos_id),
    KEY("eos_id", K_INT, lmq_arch, eos_id),
};
static const table arch_table = TABLE(arch_fields);

static const field source_fields[] = {
    KEY("path", K_TEXT, lmq_manifest, source),
    KEY("checksum", K_HEX, lmq_manifest, source_checksum),
    KEY("notes", K_TEXT, lmq_manifest, source_notes, .flags = F_LITERAL),
};
static const table source_table = TABLE(source_fields);

static const field recipe_fields[] = {
    KEY("checksum", K_HEX, lmq_manifest, recipe_checksum),
    KEY("text", K_TEXT, lmq_manifest, recipe, .flags = F_LITERAL),
};
static const table recipe_table = TABLE(recipe_fields);

static const field calib_fields[] = {
    KEY("source", K_TEXT, lmq_manifest, calibration),
    KEY("checksum", K_HEX, lmq_manifest, calibration_checksum),
    KEY("model_checksum", K_HEX, lmq_manifest, calib_model_checksum, .flags = F_OPTIONAL),
    KEY("stats_checksum", K_HEX, lmq_manifest, calib_stats_checksum, .flags = F_OPTIONAL),
    KEY("windows", K_INT, lmq_manifest, calib_windows, .flags = F_OPTIONAL),
    KEY("ctx", K_INT, lmq_manifest, calib_ctx, .flags = F_OPTIONAL),
    KEY("tokens", K_UINT, lmq_manifest, calib_tokens, .flags = F_OPTIONAL),
};
static const table calib_table = TABLE(calib_fields);

static const field totals_fields[] = {
    KEY("params", K_UINT, lmq_manifest_totals, params),
    KEY("tensor_bytes", K_UINT, lmq_manifest_totals, tensor_bytes),
    KEY("linear_params", K_UINT, lmq_manifest_totals, linear_params),
    KEY("linear_bpw", K_REAL, lmq_manifest_totals, linear_bpw),
};
static const table totals_table = TABLE(totals_fields);

static const field stats_fields[] = {
    KEY("peak_abs", K_REAL, lmq_manifest_tensor, stats.peak),
    KEY("rms", K_REAL, lmq_manifest_tensor, stats.rms),
    KEY("excess_kurtosis", K_REAL, lmq_manifest_tensor, stats.kurtosis),
};
static const table stats_table = TABLE(stats_fields);

const char *const lmq_method_names[LMQ_METHOD_COUNT] = { "rtn", "gptq", "awq" };
static const field tensor_calib_fields[] = {
    KEY("method", K_ENUM, lmq_manifest_calib, method, .names = lmq_method_names, .n_names = LMQ_METHOD_COUNT),
    KEY("damp", K_REAL, lmq_manifest_calib, damp, .flags = F_OPTIONAL),
    KEY("damp_used", K_REAL, lmq_manifest_calib, damp_used, .flags = F_OPTIONAL),
    KEY("block", K_UINT, lmq_manifest_calib, block, .flags = F_OPTIONAL),
    KEY("act_order", K_BOOL, lmq_manifest_calib, act_order, .flags = F_OPTIONAL),
    KEY("awq_ratio", K_REAL, lmq_manifest_calib, awq_ratio, .flags = F_OPTIONAL),
    KEY("clip_mean", K_REAL, lmq_manifest_calib, clip_mean, .flags = F_OPTIONAL),
    KEY("clip_min", K_REAL, lmq_manifest_calib, clip_min, .flags = F_OPTIONAL),
    KEY("smoothquant_alpha", K_REAL, lmq_manifest_calib, smooth_alpha, .flags = F_OPTIONAL),
    KEY("note", K_STR, lmq_manifest_calib, note, .flags = F_OPTIONAL),
    KEY("output_error_rtn", K_REAL, lmq_manifest_calib, out_error_rtn, .flags = F_OPTIONAL),
    KEY("output_error", K_REAL, lmq_manifest_calib, out_error, .flags = F_OPTIONAL),
};
static const table tensor_calib_table = TABLE(tensor_calib_fields);
/* scheme's names have no entry for none: an absent key is none, a present one names a scheme. */
static const field act_fields[] = {
    KEY("scheme", K_ENUM, lmq_act, scheme, NAMES(lmq_act_scheme_names)),
    KEY("granularity", K_ENUM, lmq_act, gran, NAMES(lmq_act_gran_names)),
};
static const table act_table = TABLE(act_fields);

static const field tensor_fields[] = {
    KEY("name", K_STR, lmq_manifest_tensor, name),
    KEY("scheme", K_STR, lmq_manifest_tensor, scheme),
    KEY("dtype", K_ENUM, lmq_manifest_tensor, q.dtype, .names = &lmq_encodings[0].name, .n_names = LMQ_T_COUNT,
        .stride = sizeof(lmq_encoding)),
    KEY("granularity", K_ENUM, lmq_manifest_tensor, q.gran, .names = lmq_gran_names, .n_names = 4),
    KEY("group", K_UINT, lmq_manifest_tensor, q.group),
    KEY("asymmetric", K_BOOL, lmq_manifest_tensor, q.asym),
    KEY("linear", K_BOOL, lmq_manifest_tensor, linear),
    KEY("bits", K_UINT, lmq_manifest_tensor, bits),
    KEY("bits_per_weight", K_REAL, lmq_manifest_tensor, bpw),
    KEY("rel_error", K_REAL, lmq_manifest_tensor, stats.rel_error),
    { .key = "stats", .k = K_MAP, .sub = &stats_table },
    KEY("reason", K_STR, lmq_manifest_tensor, reason, .flags = F_OPTIONAL),
    KEY("calibration", K_MAP, lmq_manifest_tensor, calib, .sub = &tensor_calib_table, .flags = F_OPTIONAL),
    KEY("activations", K_MAP, lmq_manifest_tensor, act, .sub = &act_table, .flags = F_OPTIONAL),
};
static const table tensor_table = TABLE(tensor_fields);

static const field file_fields[] = {
    KEY("name", K_STR, lmq_manifest_file, name),
    KEY("bytes", K_UINT, lmq_manifest_file, size),
};
static const table file_table = TABLE(file_fields);

/* Maps whose keys live directly in lmq_manifest have off 0. */
static const char *const kind_names[] = { [LMQ_KIND_MODEL] = "model", [LMQ_KIND_STATS] = "stats" };
static const field top_fields[] = {
    KEY("format_version", K_UINT, lmq_manifest, format_version),
    KEY("tool_version", K_STR, lmq_manifest, tool_version),
    KEY("kind", K_ENUM, lmq_manifest, kind, NAMES(kind_names), .flags = F_OPTIONAL),
    { .key = "architecture", .k = K_MAP, .off = offsetof(lmq_manifest, arch), .sub = &arch_table },
    { .key = "source", .k = K_MAP, .sub = &source_table },
    { .key = "recipe", .k = K_MAP, .sub = &recipe_table, .flags = F_OPTIONAL,
      .present_off = offsetof(lmq_manifest, recipe) },
    { .key = "calibration", .k = K_MAP, .sub = &calib_table, .flags = F_OPTIONAL,
      .present_off = offsetof(lmq_manifest, calibration) },
    { .key = "totals", .k = K_MAP, .off = offsetof(lmq_manifest, totals), .sub = &totals_table },
    { .key = "tensors", .k = K_SEQ, .off = offsetof(lmq_manifest, tensors), .size = sizeof(lmq_manifest_tensor),
      .sub = &tensor_table, .count_off = offsetof(lmq_manifest, n_tensors), .cap_off = offsetof(lmq_manifest, cap_tensors) },
    { .key = "files", .k = K_SEQ, .off = offsetof(lmq_manifest, files), .size = sizeof(lmq_manifest_file),
      .sub = &file_table, .count_off = offsetof(lmq_manifest, n_files), .cap_off = offsetof(lmq_manifest, cap_files) },
};
static const table top_table = TABLE(top_fields);

/* Integers of any member width, through memcpy so the member's type does not matter. */
static uint64_t load_uint(const void *p, size_t size)
{
    uint8_t b8;
    uint16_t b16;
    uint32_t b32;
    uint64_t b64;
    switch (size) {
    case 1: memcpy(&b8, p, 1); return b8;
    case 2: memcpy(&b16, p, 2); return b16;
    case 4: memcpy(&b32, p, 4); return b32;
    default: memcpy(&b64, p, 8); return b64;
    }
}

static void store_uint(void *p, size_t size, uint64_t v)
{
    uint8_t b8 = (uint8_t)v;
    uint16_t b16 = (uint16_t)v;
    uint32_t b32 = (uint32_t)v;
    switch (size) {
    case 1: memcpy(p, &b8, 1); break;
    case 2: memcpy(p, &b16, 2); break;
    case 4: memcpy(p, &b32, 4); break;
    default: memcpy(p, &v, 8); break;
    }
}

static double load_real(const void *p, size_t size)
{
    if (size == 4) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    double d;
    memcpy(&d, p, 8);
    return d;
}

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

/* Makes room for one more element of an array described by a K_SEQ field. */
static void *grow(void *base, const field *f)
{
    void **arr = (void **)((char *)base + f->off);
    int *n = (int *)((char *)base + f->count_off), *cap = (int *)((char *)base + f->cap_off);
    if (*n == INT_MAX)
        return NULL;
    if (*n == *cap) {
        int nc = *cap ? (*cap > INT_MAX / 2 ? INT_MAX : *cap * 2) : 16;
        void *p = realloc(*arr, (size_t)nc * f->size);
        if (!p)
            return NULL;
        *arr = p;
        *cap = nc;
    }
    void *e = (char *)*arr + (size_t)(*n)++ * f->size;
    memset(e, 0, f->size);
    return e;
}

static const field *top_field(const char *key)
{
    for (int i = 0; i < top_table.n; i++)
        if (!strcmp(top_table.f[i].key, key))
            return &top_table.f[i];
    return NULL;
}

lmq_code lmq_manifest_add_tensor(lmq_manifest *m, const char *name, lmq_manifest_tensor **out, lmq_err *err)
{
    if (strlen(name) >= LMQ_NAME_MAX)
        return lmq_fail(err, LMQ_E_ARG, "manifest: tensor name too long: %.40s...", name);
    lmq_manifest_tensor *t = grow(m, top_field("tensors"));
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
    lmq_manifest_file *f = grow(m, top_field("files"));
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

typedef struct {
    char *p;
    size_t n, cap;
} outbuf;

static int write_out(void *data, unsigned char *buf, size_t size)
{
    outbuf *o = data;
    if (o->n + size + 1 > o->cap) {
        size_t nc = o->cap ? o->cap : 4096;
        while (nc < o->n + size + 1)
            nc *= 2;
        char *q = realloc(o->p, nc);
        if (!q)
            return 0;
        o->p = q;
        o->cap = nc;
    }
    memcpy(o->p + o->n, buf, size);
    o->n += size;
    return 1;
}

typedef struct {
    yaml_emitter_t em;
    lmq_err *err;
    const char *key; /* being written, for messages */
    int failed;
} emitter;

/* Takes ownership of an initialised event (init_ok), also after an earlier failure. */
static void emit_event(emitter *e, yaml_event_t *ev, int init_ok)
{
    if (e->failed) {
        if (init_ok)
            yaml_event_delete(ev);
        return;
    }
    if (!init_ok) {
        e->failed = 1;
        lmq_fail(e->err, LMQ_E_ARG, "manifest: %s: text is not valid UTF-8", e->key);
    } else if (!yaml_emitter_emit(&e->em, ev)) {
        e->failed = 1;
        lmq_fail(e->err, LMQ_E_NOMEM, "manifest: %s: cannot emit: %s", e->key,
                 e->em.problem ? e->em.problem : "out of memory");
    }
}

static void scalar(emitter *e, const char *s, size_t len, yaml_scalar_style_t style)
{
    yaml_event_t ev;
    if (len > INT_MAX) {
        e->failed = 1;
        lmq_fail(e->err, LMQ_E_ARG, "manifest: %s: text too long", e->key);
        return;
    }
    int ok = yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)len, 1, 1, style);
    emit_event(e, &ev, ok);
}

static void plain(emitter *e, const char *s)
{
    scalar(e, s, strlen(s), YAML_PLAIN_SCALAR_STYLE);
}

/* Integers as integers, anything else as the shortest decimal that reads back as the same
 * value, with a '.' before any exponent so that YAML 1.1 readers see a float too. */
static void fmt_real(char *buf, size_t n, double v, int is_float)
{
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(buf, n, "%.0f", v);
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        double back = strtod(buf, NULL);
        if (is_float ? (float)back == (float)v : back == v)
            break;
    }
    char *e = strchr(buf, 'e');
    if (e && !memchr(buf, '.', (size_t)(e - buf)) && strlen(buf) + 3 <= n) {
        memmove(e + 2, e, strlen(e) + 1);
        memcpy(e, ".0", 2);
    }
}

static void emit_map(emitter *e, const table *t, const char *base);

static void emit_value(emitter *e, const field *f, const char *base)
{
    const char *p = base + f->off;
    char buf[64];
    switch (f->k) {
    case K_STR:
        scalar(e, p, strnlen(p, f->size), YAML_DOUBLE_QUOTED_SCALAR_STYLE);
        break;
    case K_TEXT: {
        const char *s = *(char *const *)p;
        s = s ? s : "";
        scalar(e, s, strlen(s), (f->flags & F_LITERAL) && *s ? YAML_LITERAL_SCALAR_STYLE
                                                               : YAML_DOUBLE_QUOTED_SCALAR_STYLE);
        break;
    }
    case K_UINT:
        snprintf(buf, sizeof buf, "%" PRIu64, load_uint(p, f->size));
        plain(e, buf);
        break;
    case K_INT: {
        int v;
        memcpy(&v, p, sizeof v);
        snprintf(buf, sizeof buf, "%d", v);
        plain(e, buf);
        break;
    }
    case K_REAL: {
        double v = load_real(p, f->size);
        if (!isfinite(v)) {
            e->failed = 1;
            lmq_fail(e->err, LMQ_E_NUMERIC, "manifest: %s: value is not finite", e->key);
            return;
        }
        fmt_real(buf, sizeof buf, v, f->size == 4);
        plain(e, buf);
        break;
    }
    case K_BOOL:
        plain(e, load_uint(p, f->size) ? "true" : "false");
        break;
    case K_HEX:
        snprintf(buf, sizeof buf, "%016" PRIx64, load_uint(p, 8));
        scalar(e, buf, 16, YAML_DOUBLE_QUOTED_SCALAR_STYLE);
        break;
    case K_ENUM: {
        uint64_t v = load_uint(p, f->size);
        if (!enum_name(f, v)) {
            e->failed = 1;
            lmq_fail(e->err, LMQ_E_ARG, "manifest: %s: unknown value %" PRIu64, e->key, v);
            return;
        }
        plain(e, enum_name(f, v));
        break;
    }
    case K_MAP:
        emit_map(e, f->sub, p);
        break;
    case K_SEQ: {
        yaml_event_t ev;
        emit_event(e, &ev, yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE));
        const char *arr = *(char *const *)p;
        int n;
        memcpy(&n, base + f->count_off, sizeof n);
        for (int i = 0; i < n; i++)
            emit_map(e, f->sub, arr + (size_t)i * f->size);
        emit_event(e, &ev, yaml_sequence_end_event_initialize(&ev));
        break;
    }
    }
}

/* An optional key's value is empty, and left out: a K_MAP whose char * at present_off is NULL
 * (when it has one), an empty K_STR, anything else whose bytes are all zero (the struct's
 * default: 0, false, the first enum name). */
static int absent(const field *f, const char *base)
{
    if (f->k == K_MAP && f->present_off)
        return !*(char *const *)(base + f->present_off);
    if (f->k == K_STR)
        return !base[f->off];
    for (size_t i = 0; i < f->size; i++)
        if (base[f->off + i])
            return 0;
    return 1;
}

static void emit_map(emitter *e, const table *t, const char *base)
{
    yaml_event_t ev;
    emit_event(e, &ev, yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE));
    for (int i = 0; i < t->n; i++) {
        const field *f = &t->f[i];
        if ((f->flags & F_OPTIONAL) && absent(f, base))
            continue;
        e->key = f->key;
        plain(e, f->key);
        emit_value(e, f, base);
    }
    emit_event(e, &ev, yaml_mapping_end_event_initialize(&ev));
}

lmq_code lmq_manifest_emit(const lmq_manifest *m, char **text, size_t *len, lmq_err *err)
{
    *text = NULL;
    *len = 0;
    outbuf o = { 0 };
    emitter e = { .err = err, .key = "manifest" };
    if (!yaml_emitter_initialize(&e.em))
        return lmq_fail(err, LMQ_E_NOMEM, "manifest: out of memory");
    yaml_emitter_set_output(&e.em, write_out, &o);
    yaml_emitter_set_unicode(&e.em, 1);
    yaml_emitter_set_width(&e.em, -1);
    yaml_emitter_set_indent(&e.em, 2);
    yaml_event_t ev;
    emit_event(&e, &ev, yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING));
    emit_event(&e, &ev, yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1));
    emit_map(&e, &top_table, (const char *)m);
    emit_event(&e, &ev, yaml_document_end_event_initialize(&ev, 1));
    emit_event(&e, &ev, yaml_stream_end_event_initialize(&ev));
    if (!e.failed && !yaml_emitter_flush(&e.em)) {
        e.failed = 1;
        lmq_fail(err, LMQ_E_NOMEM, "manifest: cannot emit: out of memory");
    }
    yaml_emitter_delete(&e.em);
    if (e.failed) {
        free(o.p);
        return err ? err->code : LMQ_E_ARG;
    }
    o.p[o.n] = '\0';
    *text = o.p;
    *len = o.n;
    return LMQ_OK;
}

/* ---- parsing ---- */

typedef struct {
    yaml_document_t *doc;
    lmq_err *err;
} parser;

/* A scalar quoted into a message: printable ASCII only, at most 40 bytes. */
static void quote(char *dst, size_t n, const yaml_node_t *s)
{
    size_t len = s->data.scalar.length, k = 0;
    for (size_t i = 0; i < len && k + 4 < n && i < 40; i++) {
        unsigned char ch = s->data.scalar.value[i];
        dst[k++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
    }
    if (len > 40 && k + 4 < n) {
        memcpy(dst + k, "...", 3);
        k += 3;
    }
    dst[k] = '\0';
}

static int is_key(const yaml_node_t *k, const char *s)
{
    return k && k->type == YAML_SCALAR_NODE && k->data.scalar.length == strlen(s) &&
           !memcmp(k->data.scalar.value, s, k->data.scalar.length);
}

static lmq_code parse_map(parser *ps, const table *t, char *base, yaml_node_t *n, const char *path);

/* A scalar copied into buf as a C string; numbers, booleans and names are never long. */
static lmq_code short_scalar(parser *ps, const yaml_node_t *n, char *buf, size_t size, const char *path)
{
    size_t len = n->data.scalar.length;
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return lmq_fail(ps->err, LMQ_E_FORMAT, "manifest: %s: expected a plain (unquoted) value", path);
    if (len == 0 || len >= size || memchr(n->data.scalar.value, 0, len))
        return lmq_fail(ps->err, LMQ_E_FORMAT, "manifest: %s: missing or malformed value", path);
    memcpy(buf, n->data.scalar.value, len);
    buf[len] = '\0';
    return LMQ_OK;
}

static lmq_code parse_scalar(parser *ps, const field *f, char *p, const yaml_node_t *n, const char *path)
{
    const char *v = (const char *)n->data.scalar.value;
    size_t len = n->data.scalar.length;
    char buf[64], q[48], *end;
    lmq_code c;
    if (f->k == K_STR || f->k == K_TEXT) {
        if (memchr(v, 0, len))
            return lmq_fail(ps->err, LMQ_E_FORMAT, "manifest: %s: text contains a NUL byte", path);
        if (f->k == K_STR) {
            if (len >= f->size)
                return lmq_fail(ps->err, LMQ_E_FORMAT, "manifest: %s: longer than %zu bytes", path, f->size - 1);
            memcpy(p, v, len);
            p[len] = '\0';
            return LMQ_OK;
        }
        char *s = malloc(len + 1);
        if (!s)
            return lmq_fail(ps->err, LMQ_E_NOMEM, "manifest: %s: out of memory", path);
        memcpy(s, v, len);
        s[len] = '\0';
        free(*(char **)p);
        *(char **)p = s;
        return LMQ_OK;
    }
    if (f->k == K_HEX) {
        uint64_t x = 0;
        int ok = len == 16;
        for (size_t i = 0; ok && i < len; i++) {
            unsigned char ch = (unsigned char)v[i];
            ok = isxdigit(ch);
            x = x << 4 | (uint64_t)(isdigit(ch) ? ch - '0' : ((ch | 0x20) - 'a' + 10) & 15);
        }
        if (!ok)
            return lmq_fail(ps->err, LMQ_E_FORMAT, "manifest: %s: expected 16 hex digits", path);
        store_uint(p, 8, x);
        return LMQ_OK;
    }
    if ((c = short_scalar(ps, n, buf, sizeof buf, path)))
        return c;
    errno = 0;
    switch (f->k) {
    case K_UINT: {
        uint64_t max = f->size == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * f->size)) - 1;
        if (strspn(buf, "0123456789") != strlen(buf))
            return lmq_fail(ps->err, LMQ_E_FORMAT, "manifest: %s: '%s' is not an unsigned integer", path, buf);
        unsigned long long x = strtoull(buf, &end, 10);
        if (errno || x > max)
            return lmq_fail(ps->err, LMQ_E_FORMAT, "manifest: %s: %s is out of range", path, buf);
        store_uint(p, f->size, x);
        return LMQ_OK;
    }
    case K_INT: {
        if (strspn(buf + (buf[0] == '-'), "0123456789") != strlen(buf + (buf[0] == '-')) || !buf[buf[0] == '-'])
            return lmq_fail(ps->err, LMQ_E_FORMAT, "manifest: %s: '%s' is not an integer", path, buf);
        long long x = strtoll(buf, &end, 10);
        if (errno || x < INT_MIN || x > INT_MAX)
            return lmq_fail(ps->err, LMQ_E_FORMAT, "manifest: %s: %s is out of range", path, buf);
        int i = (int)x;
        memcpy(p, &i, sizeof i);
        return LMQ_OK;
    }
    case K_REAL: {
        double x = strtod(buf, &end);
        if (strspn(buf, "+-.0123456789eE") != strlen(buf) || *end || !isfinite(x) ||
            (f->size == 4 && !isfinite((float)x)))
            return lmq_fail(ps->err, LMQ_E_FORMAT, "manifest: %s: '%s' is not a finite number", path, buf);
        if (f->size == 4) {
            float fl = (float)x;
            memcpy(p, &fl, 4);
        } else {
            memcpy(p, &x, 8);
        }
        return LMQ_OK;
    }
    case K_BOOL:
        if (strcmp(buf, "true") && strcmp(buf, "false"))
            return lmq_fail(ps->err, LMQ_E_FORMAT, "manifest: %s: '%s' is not true or false", path, buf);
        store_uint(p, f->size, buf[0] == 't');
        return LMQ_OK;
    case K_ENUM:
        for (unsigned i = 0; i < f->n_names; i++)
            if (enum_name(f, i) && !strcmp(enum_name(f, i), buf)) {
                store_uint(p, f->size, i);
                return LMQ_OK;
            }
        quote(q, sizeof q, n);
        return lmq_fail(ps->err, LMQ_E_FORMAT, "manifest: %s: unknown value '%s'", path, q);
    default:
        return lmq_fail(ps->err, LMQ_E_FORMAT, "manifest: %s: unexpected value", path);
    }
}

/* "tensors[3] (blk.0.attn_q.weight)" when the element has a readable name. */
static void element_path(parser *ps, char *dst, size_t n, const char *path, int i, yaml_node_t *el)
{
    snprintf(dst, n, "%.200s[%d]", path, i);
    if (!el || el->type != YAML_MAPPING_NODE)
        return;
    for (yaml_node_pair_t *pr = el->data.mapping.pairs.start; pr < el->data.mapping.pairs.top; pr++) {
        yaml_node_t *v = yaml_document_get_node(ps->doc, pr->value);
        if (is_key(yaml_document_get_node(ps->doc, pr->key), "name") && v && v->type == YAML_SCALAR_NODE) {
            char q[48];
            quote(q, sizeof q, v);
            size_t k = strlen(dst);
            snprintf(dst + k, n - k, " (%s)", q);
            return;
        }
    }
}

static lmq_code parse_value(parser *ps, const field *f, char *base, yaml_node_t *n, const char *path)
{
    static const char *const types[] = { [YAML_NO_NODE] = "nothing", [YAML_SCALAR_NODE] = "a value",
                                         [YAML_SEQUENCE_NODE] = "a list", [YAML_MAPPING_NODE] = "a mapping" };
    yaml_node_type_t want = f->k == K_MAP ? YAML_MAPPING_NODE : f->k == K_SEQ ? YAML_SEQUENCE_NODE : YAML_SCALAR_NODE;
    if (!n || n->type != want)
        return lmq_fail(ps->err, LMQ_E_FORMAT, "manifest: %s: expected %s", path, types[want]);
    if (f->k == K_MAP)
        return parse_map(ps, f->sub, base + f->off, n, path);
    if (f->k != K_SEQ)
        return parse_scalar(ps, f, base + f->off, n, path);
    int i = 0;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++, i++) {
        char sub[256];
        yaml_node_t *el = yaml_document_get_node(ps->doc, *it);
        element_path(ps, sub, sizeof sub, path, i, el);
        void *e = grow(base, f);
        if (!e)
            return lmq_fail(ps->err, LMQ_E_NOMEM, "manifest: %s: out of memory", sub);
        if (!el || el->type != YAML_MAPPING_NODE)
            return lmq_fail(ps->err, LMQ_E_FORMAT, "manifest: %s: expected a mapping", sub);
        lmq_code c = parse_map(ps, f->sub, e, el, sub);
        if (c)
            return c;
    }
    return LMQ_OK;
}

static lmq_code parse_map(parser *ps, const table *t, char *base, yaml_node_t *n, const char *path)
{
    if (n->type != YAML_MAPPING_NODE)
        return lmq_fail(ps->err, LMQ_E_FORMAT, "manifest: %s: expected a mapping", path);
    uint64_t seen = 0;
    char sub[256], q[48];
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = yaml_document_get_node(ps->doc, pr->key);
        if (!k || k->type != YAML_SCALAR_NODE)
            return lmq_fail(ps->err, LMQ_E_FORMAT, "manifest: %s: a key is not a string", path);
        int i = 0;
        while (i < t->n && !is_key(k, t->f[i].key))
            i++;
        quote(q, sizeof q, k);
        if (i == t->n)
            return lmq_fail(ps->err, LMQ_E_FORMAT, "manifest: %s: unknown key '%s'", path, q);
        if (seen >> i & 1)
            return lmq_fail(ps->err, LMQ_E_FORMAT, "manifest: %s: key '%s' appears twice", path, q);
        seen |= UINT64_C(1) << i;
        snprintf(sub, sizeof sub, "%.200s%s%s", path, *path ? "." : "", t->f[i].key);
        lmq_code c = parse_value(ps, &t->f[i], base, yaml_document_get_node(ps->doc, pr->value), sub);
        if (c)
            return c;
    }
    for (int i = 0; i < t->n; i++)
        if (!(seen >> i & 1) && !(t->f[i].flags & F_OPTIONAL))
            return lmq_fail(ps->err, LMQ_E_FORMAT, "manifest: %s%smissing key '%s'", path, *path ? ": " : "",
                            t->f[i].key);
    return LMQ_OK;
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
    parser ps = { &doc, err };
    c = root ? parse_map(&ps, &top_table, (char *)out, root, "") : lmq_fail(err, LMQ_E_FORMAT, "manifest: empty");
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
        if (e->q.dtype == LMQ_T_BYTES)
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
    const int *pos[] = { &a->dim, &a->hidden_dim, &a->n_layers, &a->n_heads, &a->n_kv_heads, &a->vocab_size,
                         &a->max_seq };
    const char *names[] = { "dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "max_seq" };
    for (size_t i = 0; i < LEN(pos); i++)
        if (*pos[i] <= 0)
            issue(is, NULL, "architecture.%s is %d, must be positive", names[i], *pos[i]);
    if (!known(family_names, LEN(family_names), (unsigned)a->family) ||
        !known(rope_names, LEN(rope_names), (unsigned)a->rope) || !known(tok_names, LEN(tok_names), (unsigned)a->tokenizer))
        issue(is, NULL, "architecture: unknown family, rope or tokenizer (%d, %d, %d)", (int)a->family, (int)a->rope,
              (int)a->tokenizer);
    if (a->n_heads > 0 && a->n_kv_heads > 0 && (a->dim % a->n_heads || a->n_heads % a->n_kv_heads))
        issue(is, NULL, "architecture: dim %d, n_heads %d, n_kv_heads %d do not divide", a->dim, a->n_heads,
              a->n_kv_heads);
    if (!(a->norm_eps > 0) || !isfinite(a->norm_eps) || !(a->rope_theta >= 0) || !isfinite(a->rope_theta))
        issue(is, NULL, "architecture: norm_eps must be positive and rope_theta non-negative");
    if (a->bos_id < -1 || a->eos_id < -1 || (a->vocab_size > 0 && (a->bos_id >= a->vocab_size ||
                                                                   a->eos_id >= a->vocab_size)))
        issue(is, NULL, "architecture: bos_id %d / eos_id %d outside the vocabulary", a->bos_id, a->eos_id);
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
    for (size_t i = 0; i < LEN(stat_ranges); i++) {
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
        else if (index[k].q.dtype == LMQ_T_BYTES)
            issue(&is, t->name, "is a carried file (bytes), not a tensor");
        else
            check_tensor(&is, t, &index[k]);
    }
    for (int i = 0; i < m->n_files; i++) {
        char name[LMQ_NAME_MAX + 8];
        snprintf(name, sizeof name, "file:%s", m->files[i].name);
        int k = find_entry(index, n, name);
        if (k < 0)
            issue(&is, name, "carried file in the manifest but not in the index");
        else if (used[k]++)
            issue(&is, name, "listed twice in the manifest");
        else if (index[k].q.dtype != LMQ_T_BYTES || index[k].raw_size != m->files[i].size)
            issue(&is, name, "manifest says a %" PRIu64 "-byte file, index holds %" PRIu64 " bytes of %s",
                  m->files[i].size, index[k].raw_size, lmq_encoding_of(index[k].q.dtype)->name);
    }
    for (int k = 0; k < n; k++)
        if (!used[k])
            issue(&is, index[k].name, "%s", index[k].q.dtype == LMQ_T_BYTES ? "carried file has no files entry"
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
