#include "formats/gguf.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/le.h"
#include "formats/encoding.h"

/* Tensors beyond 2^48 elements are refused (as lmq's own container does). */
#define MAX_ELEMS (UINT64_C(1) << 48)
#define DEFAULT_ALIGNMENT 32

/* ---- ggml types ---------------------------------------------------------------------------- */

/* The types no encoding row holds, with their sizes. A type a row holds (lmq_encoding.ggml)
 * takes its sizes and its name from the row, but for a name ggml spells otherwise, given here
 * without sizes. */
static const gf_type_info gf_ggml_types[GGML_TYPE_LIMIT] = {
    [GGML_F32] = { "f32", 0, 0 },       [GGML_F16] = { "f16", 0, 0 },       [GGML_Q8_1] = { "q8_1", 32, 36 },
    [GGML_Q8_K] = { "q8_k", 256, 292 },
    [GGML_I8] = { "i8", 1, 1 },         [GGML_I16] = { "i16", 1, 2 },       [GGML_I32] = { "i32", 1, 4 },
    [GGML_I64] = { "i64", 1, 8 },       [GGML_F64] = { "f64", 1, 8 },
};

gf_type_info gf_type_of(uint32_t t)
{
    gf_type_info ti = t < GGML_TYPE_LIMIT ? gf_ggml_types[t] : (gf_type_info){ NULL, 0, 0 };
    const lmq_encoding *e = lmq_encoding_of_ggml(t);
    if (e) { /* a float row stores bits / 8 bytes a weight; a block row, block_bytes a block */
        ti.name = ti.name ? ti.name : e->name;
        ti.block = e->block ? e->block : 1;
        ti.block_bytes = e->block ? e->block_bytes : e->bits / 8;
    }
    return ti;
}

/* Bytes of one scalar of each metadata type; 0 for string and array. */
static const unsigned scalar_size[GGUF_TYPE_COUNT] = {
    [GGUF_U8] = 1, [GGUF_I8] = 1, [GGUF_U16] = 2, [GGUF_I16] = 2, [GGUF_U32] = 4, [GGUF_I32] = 4,
    [GGUF_F32] = 4, [GGUF_BOOL] = 1, [GGUF_U64] = 8, [GGUF_I64] = 8, [GGUF_F64] = 8,
};

static const char *const type_names[GGUF_TYPE_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64",
    "int64", "float64",
};

/* ---- reading ------------------------------------------------------------------------------- */

typedef struct {
    const gf_file *f;
    const uint8_t *base;
    uint64_t size, pos;
    lmq_err *err;
    char where[GGUF_NAME_MAX + 32]; /* what is being read, for messages: "key general.name", "tensor w" */
} cursor;

static lmq_code bad(const cursor *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static lmq_code bad(const cursor *c, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return lmq_fail(c->err, LMQ_E_FORMAT, "%s: %s%s%s", c->f->path, c->where, c->where[0] ? ": " : "", msg);
}

static int take(cursor *c, uint64_t n, const uint8_t **p)
{
    if (n > c->size - c->pos)
        return 0;
    *p = c->base + c->pos;
    c->pos += n;
    return 1;
}

static lmq_code read_u(cursor *c, unsigned n, uint64_t *v, const char *what)
{
    const uint8_t *p;
    if (!take(c, n, &p))
        return bad(c, "truncated at byte %" PRIu64 " reading %s", c->pos, what);
    *v = lmq_le(p, n);
    return LMQ_OK;
}

static lmq_code read_str(cursor *c, gf_str *s, const char *what)
{
    uint64_t len = 0;
    const uint8_t *p;
    lmq_code rc = read_u(c, 8, &len, what);
    if (rc)
        return rc;
    if (!take(c, len, &p))
        return bad(c, "%s at byte %" PRIu64 ": length %" PRIu64 " runs past the end of the file", what, c->pos - 8,
                   len);
    s->p = (const char *)p;
    s->len = len;
    return LMQ_OK;
}

/* A printable form of a key or name for messages (at most 80 bytes, control bytes as '?'). */
static const char *shown(gf_str s, char *buf, size_t size)
{
    size_t n = s.len < size - 1 ? (size_t)s.len : size - 1;
    n = n > 80 ? 80 : n;
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)s.p[i] < 0x20 || s.p[i] == 0x7f ? '?' : s.p[i];
    buf[n] = '\0';
    return buf;
}

static lmq_code read_value(cursor *c, gf_kv *kv)
{
    if (kv->type >= GGUF_TYPE_COUNT)
        return bad(c, "unknown value type %" PRIu32, kv->type);
    uint32_t et = kv->type;
    kv->n = 1;
    if (kv->type == GGUF_ARRAY) {
        uint64_t t = 0, n = 0;
        lmq_code rc;
        if ((rc = read_u(c, 4, &t, "an array's type")) || (rc = read_u(c, 8, &n, "an array's length")))
            return rc;
        if (t >= GGUF_TYPE_COUNT || t == GGUF_ARRAY)
            return bad(c, "array of %s%" PRIu64 " (nested arrays are not supported)",
                       t == GGUF_ARRAY ? "arrays, type " : "unknown type ", t);
        et = (uint32_t)t;
        kv->elem_type = et;
        kv->n = n;
    }
    kv->val = c->base + c->pos;
    if (et == GGUF_STRING) {
        for (uint64_t i = 0; i < kv->n; i++) {
            gf_str s;
            if (read_str(c, &s, "a string"))
                return bad(c, "string %" PRIu64 " of %" PRIu64 " runs past the end of the file", i, kv->n);
        }
        return LMQ_OK;
    }
    const uint8_t *p;
    if (kv->n > (c->size - c->pos) / scalar_size[et] || !take(c, kv->n * scalar_size[et], &p))
        return bad(c, "%" PRIu64 " %s values run past the end of the file", kv->n, type_names[et]);
    if (et == GGUF_BOOL)
        for (uint64_t i = 0; i < kv->n; i++)
            if (p[i] > 1)
                return bad(c, "bool %" PRIu64 " is %u (0 or 1)", i, p[i]);
    return LMQ_OK;
}

static int str_cmp(gf_str a, gf_str b)
{
    int d = memcmp(a.p, b.p, a.len < b.len ? (size_t)a.len : (size_t)b.len);
    return d ? d : (a.len > b.len) - (a.len < b.len);
}

static int kv_cmp(const void *a, const void *b)
{
    return str_cmp(((const gf_kv *)a)->key, ((const gf_kv *)b)->key);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int offset_cmp(const void *a, const void *b)
{
    const gf_tensor *x = *(const gf_tensor *const *)a, *y = *(const gf_tensor *const *)b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

static lmq_code read_kvs(cursor *c, gf_file *f)
{
    char buf[96];
    for (int64_t i = 0; i < f->n_kv; i++) {
        gf_kv *kv = &f->kvs[i];
        uint64_t type = 0;
        lmq_code rc;
        snprintf(c->where, sizeof c->where, "metadata entry %" PRId64, i);
        if ((rc = read_str(c, &kv->key, "a key")))
            return rc;
        if (kv->key.len == 0 || kv->key.len > 65535 || memchr(kv->key.p, 0, (size_t)kv->key.len))
            return bad(c, "key '%s' is empty, longer than 65535 bytes or holds a NUL", shown(kv->key, buf, sizeof buf));
        snprintf(c->where, sizeof c->where, "key %s", shown(kv->key, buf, sizeof buf));
        if ((rc = read_u(c, 4, &type, "a value type")))
            return rc;
        kv->type = (uint32_t)type;
        if ((rc = read_value(c, kv)))
            return rc;
    }
    c->where[0] = '\0';
    /* Unique keys: checked on a sorted copy, so that lookups keep the file's order. */
    gf_kv *sorted = malloc((size_t)(f->n_kv ? f->n_kv : 1) * sizeof *sorted);
    if (!sorted)
        return lmq_fail(c->err, LMQ_E_NOMEM, "%s: out of memory", f->path);
    memcpy(sorted, f->kvs, (size_t)f->n_kv * sizeof *sorted);
    qsort(sorted, (size_t)f->n_kv, sizeof *sorted, kv_cmp);
    lmq_code rc = LMQ_OK;
    for (int64_t i = 1; i < f->n_kv && !rc; i++)
        if (!str_cmp(sorted[i - 1].key, sorted[i].key))
            rc = bad(c, "key %s appears twice", shown(sorted[i].key, buf, sizeof buf));
    free(sorted);
    return rc;
}

static lmq_code read_tensor_info(cursor *c, gf_tensor *t, int64_t i)
{
    gf_str name;
    uint64_t v = 0;
    char buf[96];
    lmq_code rc;
    snprintf(c->where, sizeof c->where, "tensor %" PRId64, i);
    if ((rc = read_str(c, &name, "a tensor name")))
        return rc;
    if (name.len == 0 || name.len >= GGUF_NAME_MAX || memchr(name.p, 0, (size_t)name.len))
        return bad(c, "name '%s' is empty, longer than %d bytes or holds a NUL", shown(name, buf, sizeof buf),
                   GGUF_NAME_MAX - 1);
    memcpy(t->name, name.p, (size_t)name.len);
    t->name[name.len] = '\0';
    snprintf(c->where, sizeof c->where, "tensor %s", t->name);
    if ((rc = read_u(c, 4, &v, "n_dims")))
        return rc;
    if (v < 1 || v > GGUF_MAX_DIMS)
        return bad(c, "%" PRIu64 " dimensions (1 to %d)", v, GGUF_MAX_DIMS);
    t->n_dims = (uint32_t)v;
    uint64_t elems = 1;
    for (unsigned d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d < t->n_dims && (rc = read_u(c, 8, &t->ne[d], "a dimension")))
            return rc;
        if (t->ne[d] < 1 || t->ne[d] > MAX_ELEMS / elems)
            return bad(c, "dimension %u is %" PRIu64 " (need 1 .. 2^48 elements in all)", d, t->ne[d]);
        elems *= t->ne[d];
    }
    if ((rc = read_u(c, 4, &v, "the type")) || (rc = read_u(c, 8, &t->offset, "the offset")))
        return rc;
    t->type = (uint32_t)v;
    const gf_type_info ti = gf_type_of(t->type);
    if (!ti.name)
        return lmq_fail(c->err, LMQ_E_UNSUPPORTED, "%s: tensor %s: unknown ggml type %" PRIu64, c->f->path, t->name, v);
    if (t->ne[0] % ti.block)
        return bad(c, "%s rows of %" PRIu64 " elements are not a whole number of %u-element blocks", ti.name,
                   t->ne[0], ti.block);
    t->size = elems / ti.block * ti.block_bytes;
    c->where[0] = '\0';
    return LMQ_OK;
}

static lmq_code place_tensors(cursor *c, gf_file *f)
{
    const gf_tensor **by = malloc((size_t)(f->n_tensors ? f->n_tensors : 1) * sizeof *by);
    if (!by)
        return lmq_fail(c->err, LMQ_E_NOMEM, "%s: out of memory", f->path);
    lmq_code rc = LMQ_OK;
    for (int64_t i = 0; i < f->n_tensors; i++)
        by[i] = &f->tensors[i];
    qsort(by, (size_t)f->n_tensors, sizeof *by, name_cmp);
    for (int64_t i = 1; i < f->n_tensors && !rc; i++)
        if (!strcmp(by[i - 1]->name, by[i]->name))
            rc = bad(c, "tensor %s appears twice", by[i]->name);
    qsort(by, (size_t)f->n_tensors, sizeof *by, offset_cmp);
    for (int64_t i = 0; i < f->n_tensors && !rc; i++) {
        const gf_tensor *t = by[i];
        if (t->offset % f->alignment)
            rc = bad(c, "tensor %s: offset %" PRIu64 " is not a multiple of the alignment %" PRIu64, t->name,
                     t->offset, f->alignment);
        else if (t->offset > f->data_size || t->size > f->data_size - t->offset)
            rc = bad(c, "tensor %s: %" PRIu64 " bytes at offset %" PRIu64 " run past the data section (%" PRIu64
                     " bytes)", t->name, t->size, t->offset, f->data_size);
        else if (i + 1 < f->n_tensors && t->offset + t->size > by[i + 1]->offset)
            rc = bad(c, "tensor %s (bytes %" PRIu64 "..%" PRIu64 ") overlaps tensor %s", t->name, t->offset,
                     t->offset + t->size, by[i + 1]->name);
    }
    free(by);
    for (int64_t i = 0; i < f->n_tensors && !rc; i++)
        f->tensors[i].data = f->data + f->tensors[i].offset;
    return rc;
}

lmq_code gf_open_mem(const void *data, size_t size, const char *name, gf_file *f, lmq_err *err)
{
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", name);
    cursor c = { .f = f, .base = data, .size = size, .err = err };
    uint64_t version = 0, nt = 0, nkv = 0;
    lmq_code rc;
    if (size < 4 || memcmp(data, "GGUF", 4))
        return bad(&c, "not a GGUF file (no GGUF magic)");
    c.pos = 4;
    if ((rc = read_u(&c, 4, &version, "the version")) || (rc = read_u(&c, 8, &nt, "the tensor count")) ||
        (rc = read_u(&c, 8, &nkv, "the metadata count")))
        return rc;
    if (version != 2 && version != 3)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "%s: GGUF version %" PRIu64 " (lmq reads versions 2 and 3)", name,
                        version);
    f->version = (uint32_t)version;
    /* The smallest entries: a key-value is 8 + 1 + 4 + 1 bytes, a tensor info 8 + 1 + 4 + 8 + 4 + 8. */
    if (nkv > (size - c.pos) / 14 || nt > (size - c.pos) / 33)
        return bad(&c, "%" PRIu64 " metadata entries and %" PRIu64 " tensors cannot fit in %zu bytes", nkv, nt, size);
    f->n_kv = (int64_t)nkv;
    f->n_tensors = (int64_t)nt;
    f->kvs = calloc(nkv ? nkv : 1, sizeof *f->kvs);
    f->tensors = calloc(nt ? nt : 1, sizeof *f->tensors);
    if (!f->kvs || !f->tensors) {
        gf_close(f);
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", name);
    }
    if ((rc = read_kvs(&c, f)))
        goto fail;
    f->alignment = DEFAULT_ALIGNMENT;
    const gf_kv *al = gf_find(f, "general.alignment");
    if (al) {
        if (al->type != GGUF_U32) {
            rc = bad(&c, "key general.alignment: %s, not uint32", type_names[al->type]);
            goto fail;
        }
        f->alignment = lmq_le(al->val, 4);
        if (f->alignment == 0 || (f->alignment & (f->alignment - 1))) {
            rc = bad(&c, "key general.alignment: %" PRIu64 " is not a power of two", f->alignment);
            goto fail;
        }
    }
    for (int64_t i = 0; i < f->n_tensors; i++)
        if ((rc = read_tensor_info(&c, &f->tensors[i], i)))
            goto fail;
    uint64_t start = c.pos + (f->alignment - c.pos % f->alignment) % f->alignment;
    if (start > size && f->n_tensors) {
        rc = bad(&c, "the data section would start at byte %" PRIu64 ", past the end (%zu bytes)", start, size);
        goto fail;
    }
    f->data = (const uint8_t *)data + (start < size ? start : size);
    f->data_size = start < size ? size - start : 0;
    if ((rc = place_tensors(&c, f)))
        goto fail;
    return LMQ_OK;
fail:
    gf_close(f);
    return rc;
}

lmq_code gf_open(const char *path, gf_file *f, lmq_err *err)
{
    lmq_blob b;
    lmq_code rc = lmq_blob_open(path, &b, err);
    if (rc) {
        memset(f, 0, sizeof *f);
        return rc;
    }
    if (!(rc = gf_open_mem(b.data, b.size, path, f, err)))
        f->blob = b;
    else
        lmq_blob_close(&b);
    return rc;
}

void gf_close(gf_file *f)
{
    free(f->kvs);
    free(f->tensors);
    if (f->blob.data || f->blob.size)
        lmq_blob_close(&f->blob);
    memset(f, 0, sizeof *f);
}

int gf_str_eq(gf_str s, const char *c)
{
    return s.len == strlen(c) && !memcmp(s.p, c, (size_t)s.len);
}

const gf_kv *gf_find(const gf_file *f, const char *key)
{
    for (int64_t i = 0; i < f->n_kv; i++)
        if (gf_str_eq(f->kvs[i].key, key))
            return &f->kvs[i];
    return NULL;
}

const gf_tensor *gf_find_tensor(const gf_file *f, const char *name)
{
    for (int64_t i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name))
            return &f->tensors[i];
    return NULL;
}

static int is_int(uint32_t t)
{
    return t <= GGUF_I32 || t == GGUF_BOOL || t == GGUF_U64 || t == GGUF_I64;
}

static int is_signed(uint32_t t)
{
    return t == GGUF_I8 || t == GGUF_I16 || t == GGUF_I32 || t == GGUF_I64;
}

static int64_t int_at(uint32_t t, const uint8_t *p)
{
    uint64_t v = lmq_le(p, scalar_size[t]);
    unsigned bits = 8 * scalar_size[t];
    if (is_signed(t) && bits < 64 && (v >> (bits - 1)))
        v |= ~UINT64_C(0) << bits;
    int64_t s;
    memcpy(&s, &v, sizeof s);
    return s;
}

static double float_at(uint32_t t, const uint8_t *p)
{
    if (t == GGUF_F32)
        return lmq_le_f32(p);
    if (t == GGUF_F64) {
        uint64_t u = lmq_le(p, 8);
        double x;
        memcpy(&x, &u, sizeof x);
        return x;
    }
    return (double)int_at(t, p);
}

static const gf_kv *get(const gf_file *f, const char *key, int optional, lmq_err *err, int *missing)
{
    const gf_kv *kv = gf_find(f, key);
    *missing = !kv && !optional;
    if (*missing)
        lmq_fail(err, LMQ_E_FORMAT, "%s: key %s missing", f->path, key);
    return kv;
}

static lmq_code wrong_type(const gf_file *f, const char *key, const gf_kv *kv, const char *want, lmq_err *err)
{
    return lmq_fail(err, LMQ_E_FORMAT, "%s: key %s is %s%s, not %s", f->path, key,
                    kv->type == GGUF_ARRAY ? "an array of " : "", type_names[kv->type == GGUF_ARRAY ? kv->elem_type : kv->type],
                    want);
}

lmq_code gf_get_int(const gf_file *f, const char *key, int optional, int64_t *out, lmq_err *err)
{
    int missing;
    const gf_kv *kv = get(f, key, optional, err, &missing);
    if (!kv)
        return missing ? LMQ_E_FORMAT : LMQ_OK;
    if (!is_int(kv->type))
        return wrong_type(f, key, kv, "an integer", err);
    if (kv->type == GGUF_U64 && lmq_le(kv->val, 8) > INT64_MAX)
        return lmq_fail(err, LMQ_E_FORMAT, "%s: key %s: %" PRIu64 " is too large", f->path, key, lmq_le(kv->val, 8));
    *out = int_at(kv->type, kv->val);
    return LMQ_OK;
}

lmq_code gf_get_float(const gf_file *f, const char *key, int optional, double *out, lmq_err *err)
{
    int missing;
    const gf_kv *kv = get(f, key, optional, err, &missing);
    if (!kv)
        return missing ? LMQ_E_FORMAT : LMQ_OK;
    if (!is_int(kv->type) && kv->type != GGUF_F32 && kv->type != GGUF_F64)
        return wrong_type(f, key, kv, "a number", err);
    *out = float_at(kv->type, kv->val);
    return LMQ_OK;
}

lmq_code gf_get_str(const gf_file *f, const char *key, int optional, gf_str *out, lmq_err *err)
{
    int missing;
    const gf_kv *kv = get(f, key, optional, err, &missing);
    if (!kv)
        return missing ? LMQ_E_FORMAT : LMQ_OK;
    if (kv->type != GGUF_STRING)
        return wrong_type(f, key, kv, "a string", err);
    const uint8_t *p = kv->val;
    *out = gf_arr_next_str(&p);
    return LMQ_OK;
}

const gf_kv *gf_get_array(const gf_file *f, const char *key, uint32_t elem, lmq_err *err)
{
    int missing;
    const gf_kv *kv = get(f, key, 0, err, &missing);
    if (!kv)
        return NULL;
    int ok = kv->type == GGUF_ARRAY &&
             (elem == GGUF_I64   ? is_int(kv->elem_type)
              : elem == GGUF_F64 ? kv->elem_type == GGUF_F32 || kv->elem_type == GGUF_F64
                                 : kv->elem_type == elem);
    if (!ok) {
        char want[64];
        snprintf(want, sizeof want, "an array of %s", elem == GGUF_I64 ? "integers" : elem == GGUF_F64 ? "floats"
                                                                                  : type_names[elem]);
        wrong_type(f, key, kv, want, err);
        return NULL;
    }
    return kv;
}

int64_t gf_arr_int(const gf_kv *kv, uint64_t i)
{
    return int_at(kv->elem_type, kv->val + i * scalar_size[kv->elem_type]);
}

double gf_arr_float(const gf_kv *kv, uint64_t i)
{
    return float_at(kv->elem_type, kv->val + i * scalar_size[kv->elem_type]);
}

gf_str gf_arr_next_str(const uint8_t **pos)
{
    gf_str s = { (const char *)*pos + 8, lmq_le(*pos, 8) };
    *pos += 8 + s.len;
    return s;
}

/* ---- writing ------------------------------------------------------------------------------- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} buf;

typedef struct {
    char name[GGUF_NAME_MAX];
    uint32_t type, n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint8_t *data;
    size_t size;
} w_tensor;

struct gf_writer {
    buf kv;
    uint64_t n_kv;
    w_tensor *t;
    size_t n_t, cap_t;
    lmq_err err; /* the first failure */
};

static void put(gf_writer *w, buf *b, const void *p, size_t n)
{
    if (w->err.code)
        return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n)
            cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) {
            lmq_fail(&w->err, LMQ_E_NOMEM, "GGUF writer: out of memory");
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void put_u(gf_writer *w, buf *b, uint64_t v, unsigned n)
{
    uint8_t le[8];
    lmq_put_le(le, v, n);
    put(w, b, le, n);
}

static void put_str(gf_writer *w, buf *b, const char *s, uint64_t len)
{
    put_u(w, b, len, 8);
    put(w, b, s, (size_t)len);
}

static void key(gf_writer *w, const char *k, uint32_t type)
{
    put_str(w, &w->kv, k, strlen(k));
    put_u(w, &w->kv, type, 4);
    w->n_kv++;
}

lmq_code gf_writer_new(gf_writer **out, lmq_err *err)
{
    *out = calloc(1, sizeof **out);
    return *out ? LMQ_OK : lmq_fail(err, LMQ_E_NOMEM, "GGUF writer: out of memory");
}

void gf_writer_free(gf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_t; i++)
        free(w->t[i].data);
    free(w->t);
    free(w->kv.p);
    free(w);
}

void gf_w_u32(gf_writer *w, const char *k, uint32_t v)
{
    key(w, k, GGUF_U32);
    put_u(w, &w->kv, v, 4);
}

void gf_w_f32(gf_writer *w, const char *k, float v)
{
    key(w, k, GGUF_F32);
    put_u(w, &w->kv, lmq_f32_bits(v), 4);
}

void gf_w_str(gf_writer *w, const char *k, const char *v)
{
    key(w, k, GGUF_STRING);
    put_str(w, &w->kv, v, strlen(v));
}

static void array(gf_writer *w, const char *k, uint32_t elem, uint64_t n)
{
    key(w, k, GGUF_ARRAY);
    put_u(w, &w->kv, elem, 4);
    put_u(w, &w->kv, n, 8);
}

void gf_w_arr_str(gf_writer *w, const char *k, uint64_t n, const char *const *s, const uint64_t *lens)
{
    array(w, k, GGUF_STRING, n);
    for (uint64_t i = 0; i < n; i++)
        put_str(w, &w->kv, s[i], lens[i]);
}

void gf_w_arr_f32(gf_writer *w, const char *k, uint64_t n, const float *v)
{
    array(w, k, GGUF_F32, n);
    for (uint64_t i = 0; i < n; i++)
        put_u(w, &w->kv, lmq_f32_bits(v[i]), 4);
}

void gf_w_arr_i32(gf_writer *w, const char *k, uint64_t n, const int32_t *v)
{
    array(w, k, GGUF_I32, n);
    for (uint64_t i = 0; i < n; i++)
        put_u(w, &w->kv, (uint32_t)v[i], 4);
}

void gf_w_tensor(gf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne,
                   const void *data, size_t size)
{
    if (w->err.code)
        return;
    const gf_type_info ti = gf_type_of(type);
    uint64_t elems = 1;
    for (uint32_t d = 0; d < n_dims && d < GGUF_MAX_DIMS; d++)
        elems *= ne[d];
    if (!ti.name || n_dims < 1 || n_dims > GGUF_MAX_DIMS || strlen(name) >= GGUF_NAME_MAX || ne[0] % ti.block ||
        elems / ti.block * ti.block_bytes != size) {
        lmq_fail(&w->err, LMQ_E_ARG, "GGUF writer: tensor %s: %zu bytes of type %" PRIu32 " do not fit its shape",
                 name, size, type);
        return;
    }
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 64;
        w_tensor *t = realloc(w->t, cap * sizeof *t);
        if (!t) {
            lmq_fail(&w->err, LMQ_E_NOMEM, "GGUF writer: out of memory");
            return;
        }
        w->t = t;
        w->cap_t = cap;
    }
    w_tensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->n_dims = n_dims;
    memcpy(t->ne, ne, n_dims * sizeof *ne);
    t->size = size;
    if (data && !(t->data = malloc(size ? size : 1))) {
        lmq_fail(&w->err, LMQ_E_NOMEM, "GGUF writer: out of memory");
        return;
    }
    if (data)
        memcpy(t->data, data, size);
    w->n_t++;
}

static uint64_t pad(uint64_t n)
{
    return (DEFAULT_ALIGNMENT - n % DEFAULT_ALIGNMENT) % DEFAULT_ALIGNMENT;
}

lmq_code gf_writer_write(gf_writer *w, const char *path, gf_fill_fn fill, void *ctx, lmq_err *err)
{
    buf head = { 0 };
    put(w, &head, "GGUF", 4);
    put_u(w, &head, 3, 4);
    put_u(w, &head, w->n_t, 8);
    put_u(w, &head, w->n_kv, 8);
    put(w, &head, w->kv.p, w->kv.n);
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const w_tensor *t = &w->t[i];
        put_str(w, &head, t->name, strlen(t->name));
        put_u(w, &head, t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims; d++)
            put_u(w, &head, t->ne[d], 8);
        put_u(w, &head, t->type, 4);
        put_u(w, &head, off, 8);
        off += t->size + pad(t->size);
    }
    static const uint8_t zeros[DEFAULT_ALIGNMENT];
    put(w, &head, zeros, (size_t)pad(head.n));
    if (w->err.code) {
        free(head.p);
        *err = w->err;
        return w->err.code;
    }
    lmq_atomic a;
    lmq_code rc = lmq_atomic_open(&a, path, err);
    if (!rc) {
        rc = lmq_atomic_write(&a, head.p, head.n, err);
        for (size_t i = 0; i < w->n_t && !rc; i++) {
            uint8_t *made = NULL;
            if (!w->t[i].data && (!fill ? (rc = lmq_fail(err, LMQ_E_ARG, "GGUF writer: tensor %s has no data",
                                                         w->t[i].name))
                                        : (rc = fill(ctx, i, &made, err))))
                break;
            if (!(rc = lmq_atomic_write(&a, w->t[i].data ? w->t[i].data : made, w->t[i].size, err)))
                rc = lmq_atomic_write(&a, zeros, (size_t)pad(w->t[i].size), err);
            free(made);
        }
        if (rc)
            lmq_atomic_abort(&a);
        else
            rc = lmq_atomic_commit(&a, err);
    }
    free(head.p);
    return rc;
}
