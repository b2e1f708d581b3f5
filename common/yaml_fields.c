/* The walker and the emitter of yaml_fields.h; formats/manifest.c holds the manifest's tables. */
#include "common/yaml_fields.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The name of value v of a YF_ENUM field, or NULL. */
static const char *enum_name(const lmq_yf_field *f, uint64_t v)
{
    if (v >= f->n_names)
        return NULL;
    return *(const char *const *)((const char *)f->names + v * (f->stride ? f->stride : sizeof *f->names));
}

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

void *lmq_yf_grow(void *base, const lmq_yf_field *f)
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
    const char *name; /* of the document, for messages */
    const char *key;  /* being written, for messages */
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
        lmq_fail(e->err, LMQ_E_ARG, "%s: %s: text is not valid UTF-8", e->name, e->key);
    } else if (!yaml_emitter_emit(&e->em, ev)) {
        e->failed = 1;
        lmq_fail(e->err, LMQ_E_NOMEM, "%s: %s: cannot emit: %s", e->name, e->key,
                 e->em.problem ? e->em.problem : "out of memory");
    }
}

static void scalar(emitter *e, const char *s, size_t len, yaml_scalar_style_t style)
{
    yaml_event_t ev;
    if (len > INT_MAX) {
        e->failed = 1;
        lmq_fail(e->err, LMQ_E_ARG, "%s: %s: text too long", e->name, e->key);
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

static void emit_map(emitter *e, const lmq_yf_table *t, const char *base);

static void emit_value(emitter *e, const lmq_yf_field *f, const char *base)
{
    const char *p = base + f->off;
    char buf[64];
    switch (f->k) {
    case YF_STR:
        scalar(e, p, strnlen(p, f->size), YAML_DOUBLE_QUOTED_SCALAR_STYLE);
        break;
    case YF_TEXT: {
        const char *s = *(char *const *)p;
        s = s ? s : "";
        scalar(e, s, strlen(s), (f->flags & YF_LITERAL) && *s ? YAML_LITERAL_SCALAR_STYLE
                                                               : YAML_DOUBLE_QUOTED_SCALAR_STYLE);
        break;
    }
    case YF_UINT:
        snprintf(buf, sizeof buf, "%" PRIu64, load_uint(p, f->size));
        plain(e, buf);
        break;
    case YF_INT: {
        int v;
        memcpy(&v, p, sizeof v);
        snprintf(buf, sizeof buf, "%d", v);
        plain(e, buf);
        break;
    }
    case YF_REAL: {
        double v = load_real(p, f->size);
        if (!isfinite(v)) {
            e->failed = 1;
            lmq_fail(e->err, LMQ_E_NUMERIC, "%s: %s: value is not finite", e->name, e->key);
            return;
        }
        fmt_real(buf, sizeof buf, v, f->size == 4);
        plain(e, buf);
        break;
    }
    case YF_BOOL:
        plain(e, load_uint(p, f->size) ? "true" : "false");
        break;
    case YF_HEX:
        snprintf(buf, sizeof buf, "%016" PRIx64, load_uint(p, 8));
        scalar(e, buf, 16, YAML_DOUBLE_QUOTED_SCALAR_STYLE);
        break;
    case YF_ENUM: {
        uint64_t v = load_uint(p, f->size);
        if (!enum_name(f, v)) {
            e->failed = 1;
            lmq_fail(e->err, LMQ_E_ARG, "%s: %s: unknown value %" PRIu64, e->name, e->key, v);
            return;
        }
        plain(e, enum_name(f, v));
        break;
    }
    case YF_MAP:
        emit_map(e, f->sub, p);
        break;
    case YF_SEQ: {
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
    case YF_CUSTOM: /* read-only rows (the recipe's) */
        e->failed = 1;
        lmq_fail(e->err, LMQ_E_ARG, "%s: %s: a read-only key", e->name, e->key);
        break;
    }
}

/* An optional key's value is empty, and left out: a YF_MAP whose char * at present_off is NULL
 * (when it has one), an empty YF_STR, anything else whose bytes are all zero (the struct's
 * default: 0, false, the first enum name). */
static int absent(const lmq_yf_field *f, const char *base)
{
    if (f->k == YF_MAP && f->present_off)
        return !*(char *const *)(base + f->present_off);
    if (f->k == YF_STR)
        return !base[f->off];
    for (size_t i = 0; i < f->size; i++)
        if (base[f->off + i])
            return 0;
    return 1;
}

static void emit_map(emitter *e, const lmq_yf_table *t, const char *base)
{
    yaml_event_t ev;
    emit_event(e, &ev, yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE));
    for (int i = 0; i < t->n; i++) {
        const lmq_yf_field *f = &t->f[i];
        if ((f->flags & YF_OPTIONAL) && absent(f, base))
            continue;
        e->key = f->key;
        plain(e, f->key);
        emit_value(e, f, base);
    }
    emit_event(e, &ev, yaml_mapping_end_event_initialize(&ev));
}

lmq_code lmq_yf_emit(const lmq_yf_table *t, const void *base, const char *name, char **text, size_t *len,
                     lmq_err *err)
{
    *text = NULL;
    *len = 0;
    outbuf o = { 0 };
    emitter e = { .err = err, .name = name, .key = name };
    if (!yaml_emitter_initialize(&e.em))
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", name);
    yaml_emitter_set_output(&e.em, write_out, &o);
    yaml_emitter_set_unicode(&e.em, 1);
    yaml_emitter_set_width(&e.em, -1);
    yaml_emitter_set_indent(&e.em, 2);
    yaml_event_t ev;
    emit_event(&e, &ev, yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING));
    emit_event(&e, &ev, yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1));
    emit_map(&e, t, base);
    emit_event(&e, &ev, yaml_document_end_event_initialize(&ev, 1));
    emit_event(&e, &ev, yaml_stream_end_event_initialize(&ev));
    if (!e.failed && !yaml_emitter_flush(&e.em)) {
        e.failed = 1;
        lmq_fail(err, LMQ_E_NOMEM, "%s: cannot emit: out of memory", name);
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

/* Formats a message and hands it to the reader's report. */
__attribute__((format(printf, 5, 6))) static lmq_code fail(const lmq_yf_reader *r, lmq_code code,
                                                          const yaml_node_t *at, const char *path,
                                                          const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return r->report(r, code, at, path, msg);
}

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

/* A scalar copied into buf as a C string; numbers, booleans and names are never long. */
static lmq_code short_scalar(const lmq_yf_reader *ps, const yaml_node_t *n, char *buf, size_t size, const char *path)
{
    size_t len = n->data.scalar.length;
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return fail(ps, ps->code, n, path, "expected a plain (unquoted) value");
    if (len == 0 || len >= size || memchr(n->data.scalar.value, 0, len))
        return fail(ps, ps->code, n, path, "missing or malformed value");
    memcpy(buf, n->data.scalar.value, len);
    buf[len] = '\0';
    return LMQ_OK;
}

static lmq_code parse_scalar(const lmq_yf_reader *ps, const lmq_yf_field *f, char *p, const yaml_node_t *n, const char *path)
{
    const char *v = (const char *)n->data.scalar.value;
    size_t len = n->data.scalar.length;
    char buf[64], q[48], *end;
    lmq_code c;
    if (f->k == YF_STR || f->k == YF_TEXT) {
        if (memchr(v, 0, len))
            return fail(ps, ps->code, n, path, "text contains a NUL byte");
        if (f->k == YF_STR) {
            if (len >= f->size)
                return fail(ps, ps->code, n, path, "longer than %zu bytes", f->size - 1);
            memcpy(p, v, len);
            p[len] = '\0';
            return LMQ_OK;
        }
        char *s = malloc(len + 1);
        if (!s)
            return fail(ps, LMQ_E_NOMEM, n, path, "out of memory");
        memcpy(s, v, len);
        s[len] = '\0';
        free(*(char **)p);
        *(char **)p = s;
        return LMQ_OK;
    }
    if (f->k == YF_HEX) {
        uint64_t x = 0;
        int ok = len == 16;
        for (size_t i = 0; ok && i < len; i++) {
            unsigned char ch = (unsigned char)v[i];
            ok = isxdigit(ch);
            x = x << 4 | (uint64_t)(isdigit(ch) ? ch - '0' : ((ch | 0x20) - 'a' + 10) & 15);
        }
        if (!ok)
            return fail(ps, ps->code, n, path, "expected 16 hex digits");
        store_uint(p, 8, x);
        return LMQ_OK;
    }
    if ((c = short_scalar(ps, n, buf, sizeof buf, path)))
        return c;
    errno = 0;
    switch (f->k) {
    case YF_UINT: {
        uint64_t max = f->size == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * f->size)) - 1;
        if (strspn(buf, "0123456789") != strlen(buf))
            return fail(ps, ps->code, n, path, "'%s' is not an unsigned integer", buf);
        unsigned long long x = strtoull(buf, &end, 10);
        if (errno || x > max)
            return fail(ps, ps->code, n, path, "%s is out of range", buf);
        store_uint(p, f->size, x);
        return LMQ_OK;
    }
    case YF_INT: {
        if (strspn(buf + (buf[0] == '-'), "0123456789") != strlen(buf + (buf[0] == '-')) || !buf[buf[0] == '-'])
            return fail(ps, ps->code, n, path, "'%s' is not an integer", buf);
        long long x = strtoll(buf, &end, 10);
        if (errno || x < INT_MIN || x > INT_MAX)
            return fail(ps, ps->code, n, path, "%s is out of range", buf);
        int i = (int)x;
        memcpy(p, &i, sizeof i);
        return LMQ_OK;
    }
    case YF_REAL: {
        double x = strtod(buf, &end);
        if (strspn(buf, "+-.0123456789eE") != strlen(buf) || *end || !isfinite(x) ||
            (f->size == 4 && !isfinite((float)x)))
            return fail(ps, ps->code, n, path, "'%s' is not a finite number", buf);
        if (f->size == 4) {
            float fl = (float)x;
            memcpy(p, &fl, 4);
        } else {
            memcpy(p, &x, 8);
        }
        return LMQ_OK;
    }
    case YF_BOOL:
        if (strcmp(buf, "true") && strcmp(buf, "false"))
            return fail(ps, ps->code, n, path, "'%s' is not true or false", buf);
        store_uint(p, f->size, buf[0] == 't');
        return LMQ_OK;
    case YF_ENUM:
        for (unsigned i = 0; i < f->n_names; i++)
            if (enum_name(f, i) && !strcmp(enum_name(f, i), buf)) {
                store_uint(p, f->size, i);
                return LMQ_OK;
            }
        quote(q, sizeof q, n);
        return fail(ps, ps->code, n, path, "unknown value '%s'", q);
    default:
        return fail(ps, ps->code, n, path, "unexpected value");
    }
}

/* "tensors[3] (blk.0.attn_q.weight)" when the element has a readable name. */
static void element_path(const lmq_yf_reader *ps, char *dst, size_t n, const char *path, int i, yaml_node_t *el)
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

static lmq_code parse_value(const lmq_yf_reader *ps, const lmq_yf_field *f, char *base, const yaml_node_t *map,
                            const yaml_node_t *key, yaml_node_t *n, const char *path)
{
    static const char *const types[] = { [YAML_NO_NODE] = "nothing", [YAML_SCALAR_NODE] = "a value",
                                         [YAML_SEQUENCE_NODE] = "a list", [YAML_MAPPING_NODE] = "a mapping" };
    if (f->k == YF_CUSTOM)
        return key && !n ? fail(ps, ps->code, key, path, "malformed mapping")
                         : f->parse(ps, f, map, key, n, base, path);
    yaml_node_type_t want = f->k == YF_MAP ? YAML_MAPPING_NODE : f->k == YF_SEQ ? YAML_SEQUENCE_NODE : YAML_SCALAR_NODE;
    if (!n || n->type != want)
        return fail(ps, ps->code, n, path, "expected %s", types[want]);
    if (f->k == YF_MAP)
        return lmq_yf_read_map(ps, f->sub, base + f->off, n, path, n);
    if (f->k != YF_SEQ)
        return parse_scalar(ps, f, base + f->off, n, path);
    int i = 0;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++, i++) {
        char sub[256];
        yaml_node_t *el = yaml_document_get_node(ps->doc, *it);
        element_path(ps, sub, sizeof sub, path, i, el);
        void *e = lmq_yf_grow(base, f);
        if (!e)
            return fail(ps, LMQ_E_NOMEM, el ? el : n, sub, "out of memory");
        if (!el || el->type != YAML_MAPPING_NODE)
            return fail(ps, ps->code, el ? el : n, sub, "expected a mapping");
        lmq_code c = lmq_yf_read_map(ps, f->sub, e, el, sub, el);
        if (c)
            return c;
    }
    return LMQ_OK;
}

/* The wording of a key error for readers without their own key_error. */
static lmq_code key_error(const lmq_yf_reader *ps, lmq_yf_key_error what, const lmq_yf_table *t,
                          const yaml_node_t *at, const char *path, const char *key, const yaml_node_t *first)
{
    char q[48];
    if (ps->key_error)
        return ps->key_error(ps, what, t, at, path, key, first);
    if (what == YF_KEY_NOT_STRING)
        return fail(ps, ps->code, at, path, "a key is not a string");
    if (what == YF_KEY_MISSING)
        return fail(ps, ps->code, at, path, "missing key '%s'", key);
    quote(q, sizeof q, at);
    return what == YF_KEY_UNKNOWN ? fail(ps, ps->code, at, path, "unknown key '%s'", q)
                                  : fail(ps, ps->code, at, path, "key '%s' appears twice", q);
}

lmq_code lmq_yf_read_map(const lmq_yf_reader *ps, const lmq_yf_table *t, void *base, yaml_node_t *n,
                         const char *path, const yaml_node_t *missing_at)
{
    if (n->type != YAML_MAPPING_NODE)
        return fail(ps, ps->code, n, path, "expected a mapping");
    const yaml_node_t *keys[64] = { 0 }; /* no table has more rows */
    yaml_node_t *vals[64] = { 0 };
    char sub[256];
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = yaml_document_get_node(ps->doc, pr->key);
        if (!k || k->type != YAML_SCALAR_NODE)
            return key_error(ps, YF_KEY_NOT_STRING, t, k ? k : n, path, NULL, NULL);
        int i = 0;
        while (i < t->n && !is_key(k, t->f[i].key))
            i++;
        if (i == t->n)
            return key_error(ps, YF_KEY_UNKNOWN, t, k, path, NULL, NULL);
        if (keys[i])
            return key_error(ps, YF_KEY_TWICE, t, k, path, NULL, keys[i]);
        keys[i] = k;
        vals[i] = yaml_document_get_node(ps->doc, pr->value);
        snprintf(sub, sizeof sub, "%.200s%s%s", path, *path ? "." : "", t->f[i].key);
        lmq_code c = ps->in_order ? LMQ_OK : parse_value(ps, &t->f[i], base, n, k, vals[i], sub);
        if (c)
            return c;
    }
    for (int i = 0; i < t->n; i++) {
        const lmq_yf_field *f = &t->f[i];
        snprintf(sub, sizeof sub, "%.200s%s%s", path, *path ? "." : "", f->key);
        lmq_code c = LMQ_OK;
        if (!keys[i] && !(f->flags & YF_OPTIONAL))
            c = key_error(ps, YF_KEY_MISSING, t, missing_at, path, f->key, NULL);
        else if (keys[i] ? ps->in_order : (f->flags & YF_ABSENT) != 0)
            c = parse_value(ps, f, base, n, keys[i], vals[i], sub);
        if (c)
            return c;
    }
    return LMQ_OK;
}

const lmq_yf_field *lmq_yf_find(const lmq_yf_table *t, const char *key)
{
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->f[i].key, key))
            return &t->f[i];
    return NULL;
}
