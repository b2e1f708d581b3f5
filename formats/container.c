/* The lmq container: byte layout and rules in formats/CONTAINER.md. */
#include "formats/container.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

#include "common/le.h"

/* Tensor bytes go to disk as they are in memory, and the format is little-endian. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the lmq container code assumes a little-endian host"
#endif

#define HEADER_SIZE 64
#define FOOTER_SIZE 64
#define ENTRY_SIZE 80
#define MAX_NUMEL ((uint64_t)1 << 40)
#define MAX_TENSORS (1 << 24)
#define ZSTD_MAX_RATIO 32768 /* a zstd block of at most 128 KiB costs at least 4 bytes */
/* On disk a carried file is the entry whose dtype field holds 9, a number no encoding takes
 * (formats/dtype.h); in memory it is an entry of kind LMQ_ENTRY_FILE with q all zero. */
#define FILE_DTYPE 9
#define FILE_PREFIX_LEN (sizeof LMQ_FILE_PREFIX - 1)

static const char MAGIC[4] = { 'L', 'M', 'Q', '1' };
static const char END_MAGIC[8] = "LMQ1END";

const char *const lmq_codec_names[LMQ_CODEC_COUNT] = { "none", "zstd" };

static uint64_t align_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

int64_t lmq_entry_numel(const lmq_tensor_entry *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

/* Names are printable ASCII without spaces, 1..LMQ_NAME_MAX-1 bytes. what says which entry
 * for the message, since a bad name cannot be printed. */
static lmq_code check_name(const uint8_t *s, size_t len, const char *what, lmq_err *err)
{
    if (len == 0 || len >= LMQ_NAME_MAX)
        return lmq_fail(err, LMQ_E_FORMAT, "%s: name length %zu outside 1..%d", what, len, LMQ_NAME_MAX - 1);
    for (size_t i = 0; i < len; i++)
        if (s[i] < 0x21 || s[i] > 0x7e)
            return lmq_fail(err, LMQ_E_FORMAT, "%s: name has byte 0x%02x at position %zu", what, s[i], i);
    return LMQ_OK;
}

int lmq_entry_is_file(const lmq_tensor_entry *t)
{
    return t->kind == LMQ_ENTRY_FILE;
}

const char *lmq_entry_file_name(const lmq_tensor_entry *t)
{
    return lmq_entry_is_file(t) ? t->name + FILE_PREFIX_LEN : NULL;
}

/* The per-entry rules of CONTAINER.md, shared by the writer and the reader. */
static lmq_code check_entry(const lmq_tensor_entry *t, lmq_err *err)
{
    const char *nm = t->name;
    const lmq_qparams q = t->q;
    const int file = lmq_entry_is_file(t);
    const lmq_encoding *enc = lmq_encoding_of(q.dtype);
    if (!file && !enc)
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: unknown dtype %u", nm, (unsigned)q.dtype);
    /* The name tells a file from a tensor, so the two must agree. */
    if (file != !strncmp(nm, LMQ_FILE_PREFIX, FILE_PREFIX_LEN))
        return file ? lmq_fail(err, LMQ_E_FORMAT, "tensor %s: stored as a carried file (dtype %d), whose names start "
                               "with " LMQ_FILE_PREFIX, nm, FILE_DTYPE)
                    : lmq_fail(err, LMQ_E_FORMAT, "tensor %s: named as a carried file (" LMQ_FILE_PREFIX "...) but "
                               "stored as %s", nm, enc->name);
    if (q.gran > LMQ_GRAN_GROUP || q.asym > 1 || (q.gran == LMQ_GRAN_GROUP) != (q.group != 0) ||
        (file && (q.gran || q.asym)))
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: bad quantisation parameters (granularity %u, asym %u, group %u)",
                        nm, (unsigned)q.gran, (unsigned)q.asym, (unsigned)q.group);
    if (!file && (!(enc->grans & (1u << q.gran)) || (q.asym && !enc->integer)))
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: %s cannot have granularity %s%s", nm, enc->name,
                        lmq_gran_names[q.gran], q.asym ? " (asymmetric)" : "");
    if (t->ndim < 1 || t->ndim > LMQ_MAX_DIMS)
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: rank %d outside 1..%d", nm, t->ndim, LMQ_MAX_DIMS);
    if (file && t->ndim != 1)
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: a carried file must have rank 1", nm);
    uint64_t numel = 1;
    for (int i = 0; i < LMQ_MAX_DIMS; i++) {
        int64_t d = t->shape[i];
        if (i >= t->ndim ? d != 0 : d < (file ? 0 : 1) || (d && (uint64_t)d > MAX_NUMEL / numel))
            return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: bad shape (dim %d is %lld)", nm, i, (long long)d);
        if (i < t->ndim)
            numel *= (uint64_t)d;
    }
    /* The size the encoding's layout needs (a file is its bytes; an empty one is 0 bytes). */
    uint64_t need = numel;
    if (!file) {
        lmq_layout L;
        lmq_err why;
        const int64_t rows = t->ndim > 1 ? t->shape[0] : 1;
        if (lmq_layout_of(&q, rows, (int64_t)numel / rows, &L, &why))
            return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: %s", nm, why.msg);
        need = L.bytes;
    }
    if (t->raw_size != need)
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: %" PRIu64 " raw bytes, %s of %" PRIu64 " elements needs %" PRIu64,
                        nm, t->raw_size, file ? "a carried file" : enc->name, numel, need);
    if (t->codec >= LMQ_CODEC_COUNT)
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: unknown codec %u", nm, (unsigned)t->codec);
    if (t->codec == LMQ_CODEC_NONE && t->stored_size != t->raw_size)
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: stored %" PRIu64 " bytes, raw %" PRIu64 " (codec none)", nm,
                        t->stored_size, t->raw_size);
    if (t->codec == LMQ_CODEC_ZSTD &&
        (t->stored_size == 0 || t->stored_size >= t->raw_size || t->raw_size / ZSTD_MAX_RATIO > t->stored_size))
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: zstd blob of %" PRIu64 " bytes cannot hold %" PRIu64, nm,
                        t->stored_size, t->raw_size);
    return LMQ_OK;
}

/* ---- reading ---- */

typedef struct {
    uint64_t off, size;
    int i;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return (x->size > y->size) - (x->size < y->size);
}

int lmq_container_check_files(const lmq_container *c, lmq_issue_fn fn, void *ctx)
{
    int bad = 0;
    for (int i = 0; i < c->n_tensors; i++) {
        const lmq_tensor_entry *t = &c->tensors[i];
        lmq_err e;
        if (lmq_entry_is_file(t) && lmq_file_name_check(lmq_entry_file_name(t), &e)) {
            bad++;
            if (fn)
                fn(ctx, t->name, e.code, e.msg);
        }
    }
    return bad;
}

static lmq_code parse_index(lmq_container *c, const uint8_t *p, uint64_t size, lmq_err *err)
{
    uint64_t count = lmq_le(p, 8);
    if (count > (size - 8) / ENTRY_SIZE || count > MAX_TENSORS)
        return lmq_fail(err, LMQ_E_FORMAT, "index: %" PRIu64 " entries do not fit in %" PRIu64 " bytes", count, size);
    c->tensors = calloc(count ? count : 1, sizeof *c->tensors);
    if (!c->tensors)
        return lmq_fail(err, LMQ_E_NOMEM, "index: out of memory");
    const uint8_t *names = p + 8 + count * ENTRY_SIZE;
    uint64_t names_size = size - 8 - count * ENTRY_SIZE, pos = 0;
    lmq_code rc;
    for (uint64_t i = 0; i < count; i++) {
        const uint8_t *e = p + 8 + i * ENTRY_SIZE;
        lmq_tensor_entry *t = &c->tensors[i];
        char what[48];
        snprintf(what, sizeof what, "index entry %" PRIu64, i);
        uint64_t len = lmq_le(e, 4);
        if (len > names_size - pos)
            return lmq_fail(err, LMQ_E_FORMAT, "%s: name of %" PRIu64 " bytes runs past the index", what, len);
        if ((rc = check_name(names + pos, len, what, err)))
            return rc;
        memcpy(t->name, names + pos, len);
        pos += len;
        const unsigned dtype = (unsigned)lmq_le(e + 4, 2);
        t->kind = dtype == FILE_DTYPE ? LMQ_ENTRY_FILE : LMQ_ENTRY_TENSOR;
        t->q.dtype = (uint16_t)(dtype == FILE_DTYPE ? 0 : dtype);
        t->q.gran = e[6];
        t->q.asym = e[7];
        t->q.group = (uint32_t)lmq_le(e + 8, 4);
        t->ndim = e[12];
        t->codec = e[13];
        if (lmq_le(e + 14, 2))
            return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: reserved index bytes are not zero", t->name);
        for (int d = 0; d < LMQ_MAX_DIMS; d++) {
            uint64_t v = lmq_le(e + 16 + 8 * d, 8);
            if (v > MAX_NUMEL)
                return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: dim %d is %" PRIu64, t->name, d, v);
            t->shape[d] = (int64_t)v;
        }
        t->offset = lmq_le(e + 48, 8);
        t->stored_size = lmq_le(e + 56, 8);
        t->raw_size = lmq_le(e + 64, 8);
        t->checksum = lmq_le(e + 72, 8);
        if ((rc = check_entry(t, err)))
            return rc;
        if (i > 0 && strcmp(c->tensors[i - 1].name, t->name) >= 0)
            return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: %s", t->name,
                            strcmp(c->tensors[i - 1].name, t->name) ? "index not sorted by name" : "defined twice");
        c->n_tensors = (int)i + 1;
    }
    if (pos != names_size)
        return lmq_fail(err, LMQ_E_FORMAT, "index: %" PRIu64 " bytes of names, the entries use %" PRIu64, names_size,
                        pos);
    return LMQ_OK;
}

/* Blobs lie in [HEADER_SIZE, index_offset), packed in offset order with aligned starts. */
static lmq_code check_layout(lmq_container *c, uint64_t align, uint64_t index_offset, lmq_err *err)
{
    int n = c->n_tensors;
    span *s = malloc((size_t)(n ? n : 1) * sizeof *s);
    c->by_offset = malloc((size_t)(n ? n : 1) * sizeof *c->by_offset);
    if (!s || !c->by_offset) {
        free(s);
        return lmq_fail(err, LMQ_E_NOMEM, "index: out of memory");
    }
    lmq_code rc = LMQ_OK;
    for (int i = 0; i < n && !rc; i++) {
        const lmq_tensor_entry *t = &c->tensors[i];
        s[i] = (span){ t->offset, t->stored_size, i };
        if (t->offset < HEADER_SIZE || t->offset > index_offset || t->stored_size > index_offset - t->offset)
            rc = lmq_fail(err, LMQ_E_FORMAT, "tensor %s: blob [%" PRIu64 ", +%" PRIu64 ") outside the data region [%d, %" PRIu64 ")",
                          t->name, t->offset, t->stored_size, HEADER_SIZE, index_offset);
        else if (t->offset % align)
            rc = lmq_fail(err, LMQ_E_FORMAT, "tensor %s: blob at %" PRIu64 " is not %" PRIu64 "-byte aligned", t->name,
                          t->offset, align);
    }
    if (!rc)
        qsort(s, (size_t)n, sizeof *s, span_cmp);
    uint64_t end = HEADER_SIZE;
    for (int k = 0; k < n && !rc; k++) {
        const lmq_tensor_entry *t = &c->tensors[s[k].i];
        uint64_t want = align_up(end, align);
        if (t->offset < want)
            rc = lmq_fail(err, LMQ_E_FORMAT, "tensor %s: blob at %" PRIu64 " overlaps %s (which ends at %" PRIu64 ")",
                          t->name, t->offset, k ? c->tensors[s[k - 1].i].name : "the header", end);
        else if (t->offset > want)
            rc = lmq_fail(err, LMQ_E_FORMAT, "tensor %s: blob at %" PRIu64 " leaves a gap (expected at %" PRIu64 ")",
                          t->name, t->offset, want);
        c->by_offset[k] = s[k].i;
        end = t->offset + t->stored_size;
    }
    if (!rc && align_up(end, align) != index_offset)
        rc = lmq_fail(err, LMQ_E_FORMAT, "index at %" PRIu64 ", the data ends at %" PRIu64, index_offset, end);
    free(s);
    return rc;
}

static lmq_code parse(lmq_container *c, const uint8_t *d, size_t size, lmq_err *err)
{
    if (size < sizeof MAGIC || memcmp(d, MAGIC, sizeof MAGIC))
        return lmq_fail(err, LMQ_E_FORMAT, "not an lmq container (no LMQ1 magic)");
    if (size < HEADER_SIZE + 8 + FOOTER_SIZE)
        return lmq_fail(err, LMQ_E_FORMAT, "truncated: %zu bytes, a container has at least %d", size,
                        HEADER_SIZE + 8 + FOOTER_SIZE);
    c->version = (uint32_t)lmq_le(d + 4, 4);
    if (c->version != LMQ_CONTAINER_VERSION)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "format version %u is not supported (this build reads version %d)",
                        c->version, LMQ_CONTAINER_VERSION);
    uint64_t hsize = lmq_le(d + 8, 4), align = lmq_le(d + 12, 4);
    if (hsize != HEADER_SIZE || align != LMQ_CONTAINER_ALIGN)
        return lmq_fail(err, LMQ_E_FORMAT, "header: size %" PRIu64 ", alignment %" PRIu64 " (version 1 has 64 and 64)",
                        hsize, align);
    for (int i = 16; i < HEADER_SIZE; i++)
        if (d[i])
            return lmq_fail(err, LMQ_E_FORMAT, "header: reserved byte %d is not zero", i);
    const uint8_t *f = d + size - FOOTER_SIZE;
    if (memcmp(f + 56, END_MAGIC, sizeof END_MAGIC))
        return lmq_fail(err, LMQ_E_FORMAT, "truncated or damaged: no end marker");
    const uint64_t data_end = size - FOOTER_SIZE;
    uint64_t io = lmq_le(f, 8), is = lmq_le(f + 8, 8), mo = lmq_le(f + 16, 8), ms = lmq_le(f + 24, 8);
    if (io < HEADER_SIZE || io > data_end || io % align)
        return lmq_fail(err, LMQ_E_FORMAT, "footer: index offset %" PRIu64 " outside the file or unaligned", io);
    if (is < 8 || is > data_end - io)
        return lmq_fail(err, LMQ_E_FORMAT, "footer: index of %" PRIu64 " bytes at %" PRIu64 " does not fit", is, io);
    if (mo != io + is || ms != data_end - mo)
        return lmq_fail(err, LMQ_E_FORMAT, "footer: manifest [%" PRIu64 ", +%" PRIu64 ") does not sit between index and footer",
                        mo, ms);
    if (XXH3_64bits(d + io, is) != lmq_le(f + 32, 8))
        return lmq_fail(err, LMQ_E_CHECKSUM, "index checksum mismatch");
    if (XXH3_64bits(d + mo, ms) != lmq_le(f + 40, 8))
        return lmq_fail(err, LMQ_E_CHECKSUM, "manifest checksum mismatch");
    lmq_code rc;
    if ((rc = parse_index(c, d + io, is, err)) || (rc = check_layout(c, align, io, err)))
        return rc;
    c->manifest = (const char *)d + mo;
    c->manifest_size = ms;
    c->file_checksum = lmq_le(f + 48, 8);
    return LMQ_OK;
}

lmq_code lmq_container_open_mem(lmq_container *c, const void *data, size_t size, const char *name, lmq_err *err)
{
    memset(c, 0, sizeof *c);
    c->data = data;
    c->size = size;
    c->path = strdup(name);
    if (!c->path)
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", name);
    lmq_code rc = parse(c, data, size, err);
    if (rc) {
        lmq_err_prefix(err, "%s: ", name);
        lmq_container_close(c);
    }
    return rc;
}

lmq_code lmq_container_open(lmq_container *c, const char *path, lmq_err *err)
{
    lmq_blob b;
    memset(c, 0, sizeof *c);
    lmq_code rc = lmq_blob_open(path, &b, err);
    if (rc)
        return rc;
    if ((rc = lmq_container_open_mem(c, b.data, b.size, path, err))) {
        lmq_blob_close(&b);
        return rc;
    }
    c->blob = b;
    return LMQ_OK;
}

void lmq_container_close(lmq_container *c)
{
    if (c->blob.data)
        lmq_blob_close(&c->blob);
    free(c->tensors);
    free(c->by_offset);
    free(c->path);
    memset(c, 0, sizeof *c);
}

static int entry_cmp(const void *key, const void *e)
{
    return strcmp(key, ((const lmq_tensor_entry *)e)->name);
}

const lmq_tensor_entry *lmq_container_find(const lmq_container *c, const char *name)
{
    if (!c->n_tensors)
        return NULL;
    return bsearch(name, c->tensors, (size_t)c->n_tensors, sizeof *c->tensors, entry_cmp);
}

const void *lmq_container_stored(const lmq_container *c, const lmq_tensor_entry *t)
{
    return c->data + t->offset;
}

/* raw: t's decoded bytes. */
static lmq_code check_raw(const lmq_container *c, const lmq_tensor_entry *t, const void *raw, lmq_err *err)
{
    uint64_t h = XXH3_64bits(raw, t->raw_size);
    if (h != t->checksum)
        return lmq_fail(err, LMQ_E_CHECKSUM, "%s: tensor %s: checksum mismatch (index %016" PRIx64 ", data %016" PRIx64 ")",
                        c->path, t->name, t->checksum, h);
    return LMQ_OK;
}

void lmq_container_release(const lmq_container *c, const lmq_tensor_entry *t)
{
    lmq_blob_release(&c->blob, t->offset, t->stored_size);
}

lmq_code lmq_container_read(const lmq_container *c, const lmq_tensor_entry *t, void *dst, size_t dst_size,
                            lmq_err *err)
{
    if (dst_size < t->raw_size)
        return lmq_fail(err, LMQ_E_ARG, "%s: tensor %s: buffer of %zu bytes for %" PRIu64, c->path, t->name, dst_size,
                        t->raw_size);
    const uint8_t *src = c->data + t->offset;
    if (t->codec == LMQ_CODEC_NONE) {
        if (t->raw_size)
            memcpy(dst, src, t->raw_size);
    } else {
        size_t r = ZSTD_decompress(dst, t->raw_size, src, t->stored_size);
        if (ZSTD_isError(r))
            return lmq_fail(err, LMQ_E_FORMAT, "%s: tensor %s: zstd: %s", c->path, t->name, ZSTD_getErrorName(r));
        if (r != t->raw_size)
            return lmq_fail(err, LMQ_E_FORMAT, "%s: tensor %s: decodes to %zu bytes, the index says %" PRIu64, c->path,
                            t->name, r, t->raw_size);
    }
    return check_raw(c, t, dst, err);
}

lmq_code lmq_container_read_alloc(const lmq_container *c, const lmq_tensor_entry *t, void **out, lmq_err *err)
{
    *out = NULL;
    void *p = malloc(t->raw_size ? t->raw_size : 1);
    if (!p)
        return lmq_fail(err, LMQ_E_NOMEM, "%s: tensor %s: out of memory (%" PRIu64 " bytes)", c->path, t->name,
                        t->raw_size);
    lmq_code rc = lmq_container_read(c, t, p, t->raw_size, err);
    if (rc) {
        free(p);
        return rc;
    }
    *out = p;
    return LMQ_OK;
}

/* Hashes a tensor's raw bytes, decoding zstd through a fixed buffer so that verifying never
 * needs memory in proportion to the tensor. Messages leave out the tensor's name. */
typedef struct {
    ZSTD_DCtx *dctx;
    XXH3_state_t *hash;
    uint8_t *buf;
    size_t cap;
} hasher;

static lmq_code hash_tensor(hasher *h, const lmq_container *c, const lmq_tensor_entry *t, uint64_t *out,
                            lmq_err *err)
{
    const uint8_t *src = c->data + t->offset;
    if (t->codec == LMQ_CODEC_NONE) {
        *out = XXH3_64bits(src, t->raw_size);
        return LMQ_OK;
    }
    ZSTD_DCtx_reset(h->dctx, ZSTD_reset_session_only);
    XXH3_64bits_reset(h->hash);
    ZSTD_inBuffer in = { src, t->stored_size, 0 };
    uint64_t total = 0;
    size_t r;
    ZSTD_outBuffer o;
    do {
        o = (ZSTD_outBuffer){ h->buf, h->cap, 0 };
        r = ZSTD_decompressStream(h->dctx, &o, &in);
        if (ZSTD_isError(r))
            return lmq_fail(err, LMQ_E_FORMAT, "zstd: %s", ZSTD_getErrorName(r));
        total += o.pos;
        if (total > t->raw_size)
            return lmq_fail(err, LMQ_E_FORMAT, "decodes to more than the %" PRIu64 " bytes the index says", t->raw_size);
        XXH3_64bits_update(h->hash, h->buf, o.pos);
    } while (in.pos < in.size || (r != 0 && o.pos == o.size));
    if (r != 0 || total != t->raw_size)
        return lmq_fail(err, LMQ_E_FORMAT, "zstd data ends early (%" PRIu64 " of %" PRIu64 " bytes)", total, t->raw_size);
    *out = XXH3_64bits_digest(h->hash);
    return LMQ_OK;
}

lmq_code lmq_container_verify(const lmq_container *c, lmq_issue_fn fn, void *ctx, lmq_err *err)
{
    hasher h = { ZSTD_createDCtx(), XXH3_createState(), malloc(ZSTD_DStreamOutSize()), ZSTD_DStreamOutSize() };
    lmq_code first = LMQ_OK;
    int failed = 0;
    char first_msg[600] = "";
    if (!h.dctx || !h.hash || !h.buf) {
        first = lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", c->path);
        goto done;
    }
    for (int k = 0; k <= c->n_tensors; k++) {
        const lmq_tensor_entry *t = k < c->n_tensors ? &c->tensors[c->by_offset[k]] : NULL;
        lmq_err e = { 0 };
        uint64_t got = 0, want = 0;
        if (t) {
            want = t->checksum;
            if (hash_tensor(&h, c, t, &got, &e))
                goto report;
        } else {
            want = lmq_le(c->data + c->size - 16, 8);
            got = XXH3_64bits(c->data, c->size - 16);
        }
        if (got == want)
            continue;
        lmq_fail(&e, LMQ_E_CHECKSUM, "%schecksum mismatch (stored %016" PRIx64 ", computed %016" PRIx64 ")",
                 t ? "" : "whole-file ", want, got);
    report:
        if (fn)
            fn(ctx, t ? t->name : NULL, e.code, e.msg);
        if (!failed++) {
            first = e.code;
            snprintf(first_msg, sizeof first_msg, "%s%s%s%.400s", t ? "tensor " : "", t ? t->name : "", t ? ": " : "",
                     e.msg);
        }
    }
    if (failed)
        lmq_fail(err, first, "%s: %d of %d checks failed; first: %s", c->path, failed, c->n_tensors + 1, first_msg);
done:
    ZSTD_freeDCtx(h.dctx);
    XXH3_freeState(h.hash);
    free(h.buf);
    return first;
}

/* ---- writing ---- */

struct lmq_writer {
    lmq_atomic out;
    XXH3_state_t *hash; /* of every byte written so far: the file checksum */
    ZSTD_CCtx *zc;
    uint64_t pos;
    lmq_tensor_entry *entries;
    int n, cap;
    int failed;
};

static lmq_code put(lmq_writer *w, const void *p, size_t n, lmq_err *err)
{
    lmq_code rc = lmq_atomic_write(&w->out, p, n, err);
    if (rc) {
        w->failed = 1;
        return rc;
    }
    XXH3_64bits_update(w->hash, p, n);
    w->pos += n;
    return LMQ_OK;
}

static lmq_code pad(lmq_writer *w, lmq_err *err)
{
    static const uint8_t zeros[LMQ_CONTAINER_ALIGN];
    return put(w, zeros, (size_t)(align_up(w->pos, LMQ_CONTAINER_ALIGN) - w->pos), err);
}

void lmq_writer_abort(lmq_writer *w)
{
    if (!w)
        return;
    lmq_atomic_abort(&w->out);
    XXH3_freeState(w->hash);
    ZSTD_freeCCtx(w->zc);
    free(w->entries);
    free(w);
}

lmq_code lmq_writer_open(lmq_writer **out, const char *path, lmq_err *err)
{
    *out = NULL;
    lmq_writer *w = calloc(1, sizeof *w);
    if (!w)
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", path);
    lmq_code rc = lmq_atomic_open(&w->out, path, err);
    if (rc) {
        free(w);
        return rc;
    }
    w->hash = XXH3_createState();
    w->zc = ZSTD_createCCtx();
    if (!w->hash || !w->zc || XXH3_64bits_reset(w->hash) != XXH_OK) {
        lmq_writer_abort(w);
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", path);
    }
    uint8_t h[HEADER_SIZE] = { 0 };
    memcpy(h, MAGIC, sizeof MAGIC);
    lmq_put_le(h + 4, LMQ_CONTAINER_VERSION, 4);
    lmq_put_le(h + 8, HEADER_SIZE, 4);
    lmq_put_le(h + 12, LMQ_CONTAINER_ALIGN, 4);
    if ((rc = put(w, h, sizeof h, err))) {
        lmq_writer_abort(w);
        return rc;
    }
    *out = w;
    return LMQ_OK;
}

static lmq_code writer_fail(lmq_writer *w, lmq_code rc)
{
    w->failed = 1;
    return rc;
}

/* Checks and writes entry t, whose kind, encoding and rank are set, as name and shape. */
static lmq_code add(lmq_writer *w, const char *name, lmq_tensor_entry t, const int64_t *shape, const void *data,
                    size_t size, lmq_codec codec, lmq_err *err)
{
    if (w->failed)
        return lmq_fail(err, LMQ_E_ARG, "%s: writer used after an error", w->out.path);
    lmq_code rc;
    char what[LMQ_NAME_MAX + 16];
    snprintf(what, sizeof what, "tensor %.100s", name);
    if ((rc = check_name((const uint8_t *)name, strlen(name), what, err)))
        return writer_fail(w, rc);
    snprintf(t.name, sizeof t.name, "%s", name);
    if (lmq_entry_is_file(&t) && (rc = lmq_file_name_check(lmq_entry_file_name(&t), err)))
        return writer_fail(w, rc);
    for (int i = 0; i < w->n; i++)
        if (!strcmp(w->entries[i].name, name))
            return writer_fail(w, lmq_fail(err, LMQ_E_ARG, "tensor %s: added twice", name));
    if (t.ndim < 1 || t.ndim > LMQ_MAX_DIMS || (unsigned)codec >= LMQ_CODEC_COUNT)
        return writer_fail(w, lmq_fail(err, LMQ_E_ARG, "tensor %s: rank %d or codec %d out of range", name, t.ndim,
                                       codec));
    t.raw_size = t.stored_size = size;
    memcpy(t.shape, shape, (size_t)t.ndim * sizeof *shape);
    if ((rc = check_entry(&t, err)))
        return writer_fail(w, rc);
    if (w->n == w->cap) {
        int nc = w->cap ? w->cap * 2 : 64;
        lmq_tensor_entry *p = nc < MAX_TENSORS ? realloc(w->entries, (size_t)nc * sizeof *p) : NULL;
        if (!p)
            return writer_fail(w, lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory", name));
        w->entries = p;
        w->cap = nc;
    }
    t.checksum = XXH3_64bits(data, size);
    void *z = NULL;
    if (codec == LMQ_CODEC_ZSTD && size) {
        size_t bound = ZSTD_compressBound(size);
        if (!(z = malloc(bound)))
            return writer_fail(w, lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory", name));
        size_t r = ZSTD_compressCCtx(w->zc, z, bound, data, size, LMQ_ZSTD_LEVEL);
        if (ZSTD_isError(r)) {
            free(z);
            return writer_fail(w, lmq_fail(err, LMQ_E_IO, "tensor %s: zstd: %s", name, ZSTD_getErrorName(r)));
        }
        if (r < size && size / ZSTD_MAX_RATIO <= r) {
            t.codec = LMQ_CODEC_ZSTD;
            t.stored_size = r;
        }
    }
    if (!(rc = pad(w, err))) {
        t.offset = w->pos;
        rc = put(w, t.codec == LMQ_CODEC_ZSTD ? z : data, (size_t)t.stored_size, err);
    }
    free(z);
    if (rc)
        return rc;
    w->entries[w->n++] = t;
    return LMQ_OK;
}

lmq_code lmq_writer_add(lmq_writer *w, const char *name, lmq_qparams q, int ndim, const int64_t *shape,
                        const void *data, size_t size, lmq_codec codec, lmq_err *err)
{
    return add(w, name, (lmq_tensor_entry){ .kind = LMQ_ENTRY_TENSOR, .q = q, .ndim = ndim }, shape, data, size, codec,
               err);
}

lmq_code lmq_writer_add_file(lmq_writer *w, const char *name, const void *data, size_t size, lmq_codec codec,
                             lmq_err *err)
{
    /* A name too long for an entry stays too long here: check_name refuses it. */
    char entry[LMQ_NAME_MAX + FILE_PREFIX_LEN];
    snprintf(entry, sizeof entry, LMQ_FILE_PREFIX "%s", name);
    const int64_t shape[1] = { (int64_t)size };
    return add(w, entry, (lmq_tensor_entry){ .kind = LMQ_ENTRY_FILE, .ndim = 1 }, shape, data, size, codec, err);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(((const lmq_tensor_entry *)a)->name, ((const lmq_tensor_entry *)b)->name);
}

lmq_code lmq_writer_finish_text(lmq_writer *w, const char *text, size_t len, lmq_err *err)
{
    lmq_code rc = LMQ_OK;
    uint8_t *idx = NULL;
    if (w->failed) {
        rc = lmq_fail(err, LMQ_E_ARG, "%s: writer used after an error", w->out.path);
        goto fail;
    }
    qsort(w->entries, (size_t)w->n, sizeof *w->entries, name_cmp);
    uint64_t names = 0;
    for (int i = 0; i < w->n; i++)
        names += strlen(w->entries[i].name);
    size_t isize = 8 + (size_t)w->n * ENTRY_SIZE + names;
    if (!(idx = calloc(1, isize))) {
        rc = lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", w->out.path);
        goto fail;
    }
    lmq_put_le(idx, (uint64_t)w->n, 8);
    uint8_t *np = idx + 8 + (size_t)w->n * ENTRY_SIZE;
    for (int i = 0; i < w->n; i++) {
        const lmq_tensor_entry *t = &w->entries[i];
        uint8_t *e = idx + 8 + (size_t)i * ENTRY_SIZE;
        size_t nl = strlen(t->name);
        lmq_put_le(e, nl, 4);
        lmq_put_le(e + 4, lmq_entry_is_file(t) ? FILE_DTYPE : t->q.dtype, 2);
        e[6] = t->q.gran;
        e[7] = t->q.asym;
        lmq_put_le(e + 8, t->q.group, 4);
        e[12] = (uint8_t)t->ndim;
        e[13] = t->codec;
        for (int d = 0; d < LMQ_MAX_DIMS; d++)
            lmq_put_le(e + 16 + 8 * d, (uint64_t)t->shape[d], 8);
        lmq_put_le(e + 48, t->offset, 8);
        lmq_put_le(e + 56, t->stored_size, 8);
        lmq_put_le(e + 64, t->raw_size, 8);
        lmq_put_le(e + 72, t->checksum, 8);
        memcpy(np, t->name, nl);
        np += nl;
    }
    uint8_t f[FOOTER_SIZE] = { 0 };
    if ((rc = pad(w, err)))
        goto fail;
    lmq_put_le(f, w->pos, 8);
    lmq_put_le(f + 8, isize, 8);
    lmq_put_le(f + 16, w->pos + isize, 8);
    lmq_put_le(f + 24, len, 8);
    lmq_put_le(f + 32, XXH3_64bits(idx, isize), 8);
    lmq_put_le(f + 40, XXH3_64bits(text, len), 8);
    if ((rc = put(w, idx, isize, err)) || (rc = put(w, text, len, err)) || (rc = put(w, f, 48, err)))
        goto fail;
    lmq_put_le(f + 48, XXH3_64bits_digest(w->hash), 8);
    memcpy(f + 56, END_MAGIC, sizeof END_MAGIC);
    if ((rc = lmq_atomic_write(&w->out, f + 48, 16, err)))
        goto fail;
    free(idx);
    idx = NULL;
    rc = lmq_atomic_commit(&w->out, err);
fail:
    free(idx);
    lmq_writer_abort(w);
    return rc;
}

const lmq_tensor_entry *lmq_writer_index(const lmq_writer *w, int *n)
{
    *n = w->n;
    return w->entries;
}

int lmq_writer_failed(const lmq_writer *w)
{
    return w->failed;
}

lmq_code lmq_container_view(const lmq_container *c, const lmq_tensor_entry *t, const void **raw, void **owned,
                            lmq_err *err)
{
    *raw = *owned = NULL;
    if (t->codec != LMQ_CODEC_NONE) {
        lmq_code rc = lmq_container_read_alloc(c, t, owned, err);
        *raw = *owned;
        return rc;
    }
    lmq_code rc = check_raw(c, t, lmq_container_stored(c, t), err);
    if (!rc)
        *raw = lmq_container_stored(c, t);
    return rc;
}

