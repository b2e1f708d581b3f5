#include "formats/safetensors.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fp.h"
#include "common/le.h"

static void dec_f32(const uint8_t *s, float *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        d[i] = lmq_bits_f32((uint32_t)lmq_le(s + 4 * i, 4));
}

static void dec_f16(const uint8_t *s, float *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        d[i] = lmq_f16_to_f32((uint16_t)lmq_le(s + 2 * i, 2));
}

static void dec_bf16(const uint8_t *s, float *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        d[i] = lmq_bf16_to_f32((uint16_t)lmq_le(s + 2 * i, 2));
}

static void enc_f32(const float *s, uint8_t *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        lmq_put_le(d + 4 * i, lmq_f32_bits(s[i]), 4);
}

static void enc_f16(const float *s, uint8_t *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        lmq_put_le(d + 2 * i, lmq_f32_to_f16(s[i]), 2);
}

static void enc_bf16(const float *s, uint8_t *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        lmq_put_le(d + 2 * i, lmq_f32_to_bf16(s[i]), 2);
}

/* One row per safetensors dtype, indexed by st_dtype. NULL converters: recognised, not read. */
static const struct {
    const char *name;
    int bits;
    void (*decode)(const uint8_t *, float *, size_t);
    void (*encode)(const float *, uint8_t *, size_t);
} DTYPES[ST_DTYPE_COUNT] = {
    [ST_F32] = { "F32", 32, dec_f32, enc_f32 },   [ST_F16] = { "F16", 16, dec_f16, enc_f16 },
    [ST_BF16] = { "BF16", 16, dec_bf16, enc_bf16 }, [ST_F64] = { "F64", 64, NULL, NULL },
    [ST_I64] = { "I64", 64, NULL, NULL },          [ST_U64] = { "U64", 64, NULL, NULL },
    [ST_I32] = { "I32", 32, NULL, NULL },          [ST_U32] = { "U32", 32, NULL, NULL },
    [ST_I16] = { "I16", 16, NULL, NULL },          [ST_U16] = { "U16", 16, NULL, NULL },
    [ST_I8] = { "I8", 8, NULL, NULL },             [ST_U8] = { "U8", 8, NULL, NULL },
    [ST_BOOL] = { "BOOL", 8, NULL, NULL },         [ST_F8_E4M3] = { "F8_E4M3", 8, NULL, NULL },
    [ST_F8_E5M2] = { "F8_E5M2", 8, NULL, NULL },   [ST_F8_E8M0] = { "F8_E8M0", 8, NULL, NULL },
    [ST_F6_E2M3] = { "F6_E2M3", 6, NULL, NULL },   [ST_F6_E3M2] = { "F6_E3M2", 6, NULL, NULL },
    [ST_F4] = { "F4", 4, NULL, NULL },
};

const char *st_dtype_name(st_dtype t)
{
    return (unsigned)t < ST_DTYPE_COUNT ? DTYPES[t].name : "?";
}

static void fmt_shape(char *buf, size_t cap, const int64_t *shape, int ndim)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
}

static lmq_code parse_dtype(const char *name, json_t *v, st_tensor *t, lmq_err *err)
{
    if (!json_is_string(v))
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: dtype is not a string", name);
    for (int i = 0; i < ST_DTYPE_COUNT; i++)
        if (!strcmp(json_string_value(v), DTYPES[i].name)) {
            t->dtype = (st_dtype)i;
            return LMQ_OK;
        }
    return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: unknown dtype \"%s\"", name, json_string_value(v));
}

static lmq_code parse_shape(const char *name, json_t *v, st_tensor *t, lmq_err *err)
{
    if (!json_is_array(v))
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: shape is not an array", name);
    if (json_array_size(v) > ST_MAX_DIMS)
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: shape has %zu dimensions (at most %d)", name,
                        json_array_size(v), ST_MAX_DIMS);
    t->ndim = (int)json_array_size(v);
    int zero = 0;
    for (int i = 0; i < t->ndim; i++) {
        json_t *d = json_array_get(v, (size_t)i);
        if (!json_is_integer(d))
            return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: shape dimension %d is not an integer", name, i);
        if (json_integer_value(d) < 0)
            return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: shape dimension %d is negative (%lld)", name, i,
                            (long long)json_integer_value(d));
        t->shape[i] = json_integer_value(d);
        zero |= t->shape[i] == 0;
    }
    /* numel * 64 bits must fit in int64 so every later size computation is safe. */
    const int64_t limit = INT64_MAX / 64;
    t->numel = 1;
    for (int i = 0; i < t->ndim && !zero; i++) {
        if (t->shape[i] > limit / t->numel) {
            char s[256];
            fmt_shape(s, sizeof s, t->shape, t->ndim);
            return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: shape %s overflows the element count", name, s);
        }
        t->numel *= t->shape[i];
    }
    if (zero)
        t->numel = 0;
    return LMQ_OK;
}

static lmq_code parse_offsets(const char *name, json_t *v, st_tensor *t, uint64_t data_size, lmq_err *err)
{
    json_t *b = json_array_get(v, 0), *e = json_array_get(v, 1);
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(b) || !json_is_integer(e) ||
        json_integer_value(b) < 0 || json_integer_value(e) < 0)
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: data_offsets is not [begin, end] with non-negative integers",
                        name);
    t->begin = (uint64_t)json_integer_value(b);
    t->end = (uint64_t)json_integer_value(e);
    if (t->begin > t->end)
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: data_offsets [%llu, %llu] end before they begin", name,
                        (unsigned long long)t->begin, (unsigned long long)t->end);
    if (t->end > data_size)
        return lmq_fail(err, LMQ_E_FORMAT,
                        "tensor %s: data_offsets [%llu, %llu] out of range (the data region is %llu bytes)", name,
                        (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)data_size);
    const int64_t bits = t->numel * DTYPES[t->dtype].bits;
    char s[256];
    fmt_shape(s, sizeof s, t->shape, t->ndim);
    if (bits % 8)
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: shape %s of %s does not fill whole bytes", name, s,
                        DTYPES[t->dtype].name);
    if (t->end - t->begin != (uint64_t)(bits / 8))
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: data_offsets span %llu bytes but shape %s of %s needs %lld",
                        name, (unsigned long long)(t->end - t->begin), s, DTYPES[t->dtype].name,
                        (long long)(bits / 8));
    return LMQ_OK;
}

static lmq_code parse_tensor(const char *name, json_t *v, st_tensor *t, uint64_t data_size, lmq_err *err)
{
    if (!json_is_object(v))
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: entry is not an object", name);
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val) {
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
            return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: unexpected field \"%s\"", name, key);
    }
    static const char *required[] = { "dtype", "shape", "data_offsets" };
    for (int i = 0; i < 3; i++)
        if (!json_object_get(v, required[i]))
            return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: missing %s", name, required[i]);
    lmq_code c;
    if ((c = parse_dtype(name, json_object_get(v, "dtype"), t, err)) ||
        (c = parse_shape(name, json_object_get(v, "shape"), t, err)) ||
        (c = parse_offsets(name, json_object_get(v, "data_offsets"), t, data_size, err)))
        return c;
    if (!(t->name = strdup(name)))
        return lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory", name);
    return LMQ_OK;
}

static int by_offset(const void *a, const void *b)
{
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* Sorted by begin, a non-empty tensor overlaps an earlier one iff it starts before the largest
 * end seen so far. Empty tensors occupy no bytes and overlap nothing. */
static lmq_code check_overlaps(st_file *f, lmq_err *err)
{
    if (f->n_tensors < 2)
        return LMQ_OK;
    const st_tensor **order = malloc((size_t)f->n_tensors * sizeof *order);
    if (!order)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    for (int i = 0; i < f->n_tensors; i++)
        order[i] = &f->tensors[i];
    qsort(order, (size_t)f->n_tensors, sizeof *order, by_offset);
    const st_tensor *last = NULL;
    lmq_code c = LMQ_OK;
    for (int i = 0; i < f->n_tensors && !c; i++) {
        const st_tensor *t = order[i];
        if (t->begin == t->end)
            continue;
        if (last && t->begin < last->end)
            c = lmq_fail(err, LMQ_E_FORMAT, "tensors %s [%llu, %llu) and %s [%llu, %llu) overlap", last->name,
                         (unsigned long long)last->begin, (unsigned long long)last->end, t->name,
                         (unsigned long long)t->begin, (unsigned long long)t->end);
        if (!last || t->end > last->end)
            last = t;
    }
    free(order);
    return c;
}

static lmq_code parse_header(st_file *f, const uint8_t *bytes, size_t size, lmq_err *err)
{
    if (size < 8)
        return lmq_fail(err, LMQ_E_FORMAT, "file is %zu bytes, too short for the 8-byte header length", size);
    const uint64_t n = lmq_le(bytes, 8);
    if (n == 0)
        return lmq_fail(err, LMQ_E_FORMAT, "header length is 0");
    if (n > ST_MAX_HEADER)
        return lmq_fail(err, LMQ_E_FORMAT, "header length %llu is too big (at most %u bytes)",
                        (unsigned long long)n, ST_MAX_HEADER);
    if (n > size - 8)
        return lmq_fail(err, LMQ_E_FORMAT, "header length %llu runs past the end of the file (%zu bytes)",
                        (unsigned long long)n, size);
    f->data = bytes + 8 + n;
    f->data_size = size - 8 - n;
    json_error_t je;
    json_t *root = json_loadb((const char *)bytes + 8, (size_t)n, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return lmq_fail(err, LMQ_E_FORMAT, "header is not valid JSON: %s (at byte %d of the header)", je.text,
                        je.position);
    lmq_code c = LMQ_OK;
    if (!json_is_object(root)) {
        c = lmq_fail(err, LMQ_E_FORMAT, "header is not a JSON object");
        goto done;
    }
    const size_t count = json_object_size(root);
    f->tensors = calloc(count ? count : 1, sizeof *f->tensors);
    if (!f->tensors) {
        c = lmq_fail(err, LMQ_E_NOMEM, "out of memory");
        goto done;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__")) {
            const char *mk;
            json_t *mv;
            if (!json_is_object(v)) {
                c = lmq_fail(err, LMQ_E_FORMAT, "__metadata__ is not an object");
                goto done;
            }
            json_object_foreach(v, mk, mv) {
                if (!json_is_string(mv)) {
                    c = lmq_fail(err, LMQ_E_FORMAT, "__metadata__ entry \"%s\" is not a string", mk);
                    goto done;
                }
            }
            f->n_metadata = (int)json_object_size(v);
            continue;
        }
        if ((c = parse_tensor(key, v, &f->tensors[f->n_tensors], f->data_size, err)))
            goto done;
        f->n_tensors++;
    }
    c = check_overlaps(f, err);
done:
    json_decref(root);
    return c;
}

lmq_code st_open(const char *path, st_file *f, lmq_err *err)
{
    memset(f, 0, sizeof *f);
    if (!(f->path = strdup(path)))
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", path);
    lmq_code c = lmq_blob_open(path, &f->blob, err);
    if (!c && (c = parse_header(f, f->blob.data, f->blob.size, err)))
        lmq_err_prefix(err, "%s: ", path);
    if (c)
        st_close(f);
    return c;
}

lmq_code st_open_mem(const void *data, size_t size, const char *name, st_file *f, lmq_err *err)
{
    memset(f, 0, sizeof *f);
    if (!(f->path = strdup(name)))
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", name);
    lmq_code c = parse_header(f, data, size, err);
    if (c) {
        lmq_err_prefix(err, "%s: ", name);
        st_close(f);
    }
    return c;
}

void st_close(st_file *f)
{
    for (int i = 0; i < f->n_tensors; i++)
        free(f->tensors[i].name);
    free(f->tensors);
    if (f->blob.data)
        lmq_blob_close(&f->blob);
    free(f->path);
    memset(f, 0, sizeof *f);
}

const st_tensor *st_find(const st_file *f, const char *name)
{
    for (int i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name))
            return &f->tensors[i];
    return NULL;
}

int st_dtype_bits(st_dtype t)
{
    return DTYPES[t].bits;
}

lmq_code st_readable(const st_file *f, const st_tensor *t, lmq_err *err)
{
    if (!DTYPES[t->dtype].decode)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "%s: unsupported dtype %s for tensor %s (lmq reads F32, F16, BF16)",
                        f->path, DTYPES[t->dtype].name, t->name);
    return LMQ_OK;
}

void st_decode(st_dtype dtype, const uint8_t *src, float *out, size_t n)
{
    DTYPES[dtype].decode(src, out, n);
}

lmq_code st_read_f32(const st_file *f, const st_tensor *t, float *out, lmq_err *err)
{
    lmq_code c = st_readable(f, t, err);
    if (!c)
        st_decode(t->dtype, f->data + t->begin, out, (size_t)t->numel);
    return c;
}

/* The header JSON for st_write, padded with spaces to a multiple of 8 bytes. */
static char *write_header(const st_out *ts, int n, size_t *len, lmq_err *err)
{
    json_t *root = json_object(), *meta = json_object();
    json_object_set_new(meta, "format", json_string("pt"));
    json_object_set_new(root, "__metadata__", meta);
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        json_t *e = json_object(), *shape = json_array();
        int64_t numel = 1;
        for (int k = 0; k < ts[i].ndim; k++) {
            json_array_append_new(shape, json_integer(ts[i].shape[k]));
            numel *= ts[i].shape[k];
        }
        const uint64_t bytes = (uint64_t)numel * (uint64_t)DTYPES[ts[i].dtype].bits / 8;
        json_object_set_new(e, "dtype", json_string(DTYPES[ts[i].dtype].name));
        json_object_set_new(e, "shape", shape);
        json_object_set_new(e, "data_offsets", json_pack("[II]", (json_int_t)off, (json_int_t)(off + bytes)));
        json_object_set_new(root, ts[i].name, e);
        off += bytes;
    }
    char *s = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    char *padded = s ? malloc(strlen(s) + 8) : NULL;
    if (!padded) {
        free(s);
        lmq_fail(err, LMQ_E_NOMEM, "out of memory");
        return NULL;
    }
    size_t k = strlen(s);
    memcpy(padded, s, k);
    while (k % 8)
        padded[k++] = ' ';
    free(s);
    *len = k;
    return padded;
}

static uint64_t out_numel(const st_out *t)
{
    uint64_t numel = 1;
    for (int k = 0; k < t->ndim; k++)
        numel *= (uint64_t)t->shape[k];
    return numel;
}

/* Moves s->next past the tensors whose values are all written (empty ones included). */
static void stream_advance(st_stream *s)
{
    while (!s->left && s->next < s->n && ++s->next < s->n)
        s->left = out_numel(&s->tensors[s->next]);
}

lmq_code st_stream_open(st_stream *s, const char *path, const st_out *ts, int n, lmq_err *err)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < n; i++) {
        if ((unsigned)ts[i].dtype >= ST_DTYPE_COUNT || DTYPES[ts[i].dtype].bits % 8)
            return lmq_fail(err, LMQ_E_ARG, "%s: tensor %s: cannot write dtype %s", path, ts[i].name,
                            st_dtype_name(ts[i].dtype));
        if (ts[i].ndim < 0 || ts[i].ndim > ST_MAX_DIMS)
            return lmq_fail(err, LMQ_E_ARG, "%s: tensor %s: rank %d", path, ts[i].name, ts[i].ndim);
        for (int k = 0; k < ts[i].ndim; k++)
            if (ts[i].shape[k] < 0 || ts[i].shape[k] > ((int64_t)1 << 40))
                return lmq_fail(err, LMQ_E_ARG, "%s: tensor %s: bad shape", path, ts[i].name);
    }
    size_t hlen;
    char *header = write_header(ts, n, &hlen, err);
    if (!header)
        return lmq_err_prefix(err, "%s: ", path);
    lmq_code c = lmq_atomic_open(&s->file, path, err);
    if (c) {
        free(header);
        return c;
    }
    uint8_t len8[8];
    lmq_put_le(len8, hlen, 8);
    c = lmq_atomic_write(&s->file, len8, 8, err);
    if (!c)
        c = lmq_atomic_write(&s->file, header, hlen, err);
    free(header);
    if (c) {
        st_stream_abort(s);
        return c;
    }
    s->tensors = ts;
    s->n = n;
    s->next = -1;
    stream_advance(s);
    return LMQ_OK;
}

lmq_code st_stream_write(st_stream *s, const float *values, size_t n, lmq_err *err)
{
    uint8_t buf[16384];
    while (n) {
        if (s->next >= s->n)
            return lmq_fail(err, LMQ_E_ARG, "%s: more values than the tensors hold", s->file.path);
        const st_out *t = &s->tensors[s->next];
        const int bytes = DTYPES[t->dtype].bits / 8;
        if (!DTYPES[t->dtype].encode)
            return lmq_fail(err, LMQ_E_ARG, "%s: tensor %s: %s takes stored bytes, not values", s->file.path,
                            t->name, st_dtype_name(t->dtype));
        size_t k = sizeof buf / (size_t)bytes;
        if (k > n)
            k = n;
        if (k > s->left)
            k = (size_t)s->left;
        DTYPES[t->dtype].encode(values, buf, k);
        lmq_code c = lmq_atomic_write(&s->file, buf, (size_t)bytes * k, err);
        if (c)
            return c;
        values += k;
        n -= k;
        s->left -= k;
        stream_advance(s);
    }
    return LMQ_OK;
}

lmq_code st_stream_write_raw(st_stream *s, const void *bytes, size_t n, lmq_err *err)
{
    const uint8_t *p = bytes;
    while (n) {
        if (s->next >= s->n)
            return lmq_fail(err, LMQ_E_ARG, "%s: more bytes than the tensors hold", s->file.path);
        const st_out *t = &s->tensors[s->next];
        const size_t width = (size_t)DTYPES[t->dtype].bits / 8;
        const size_t k = n / width < s->left ? n / width : (size_t)s->left;
        if (k < s->left && n % width)
            return lmq_fail(err, LMQ_E_ARG, "%s: tensor %s: %zu bytes are not whole %s values", s->file.path,
                            t->name, n, st_dtype_name(t->dtype));
        lmq_code c = lmq_atomic_write(&s->file, p, k * width, err);
        if (c)
            return c;
        p += k * width;
        n -= k * width;
        s->left -= k;
        stream_advance(s);
    }
    return LMQ_OK;
}

lmq_code st_stream_commit(st_stream *s, lmq_err *err)
{
    if (s->next < s->n) {
        lmq_code c = lmq_fail(err, LMQ_E_ARG, "%s: tensor %s: %llu values missing", s->file.path,
                              s->tensors[s->next].name, (unsigned long long)s->left);
        st_stream_abort(s);
        return c;
    }
    lmq_code c = lmq_atomic_commit(&s->file, err);
    memset(s, 0, sizeof *s);
    return c;
}

void st_stream_abort(st_stream *s)
{
    lmq_atomic_abort(&s->file);
    memset(s, 0, sizeof *s);
}

lmq_code st_write(const char *path, const st_out *ts, int n, lmq_err *err)
{
    st_stream s;
    lmq_code c = st_stream_open(&s, path, ts, n, err);
    for (int i = 0; i < n && !c; i++)
        c = st_stream_write(&s, ts[i].data, (size_t)out_numel(&ts[i]), err);
    if (c) {
        st_stream_abort(&s);
        return c;
    }
    return st_stream_commit(&s, err);
}
