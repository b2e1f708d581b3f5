#include "verify/ref_logits.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

#include "common/file.h"
#include "common/le.h"
#include "formats/container.h"
#include "formats/manifest.h"

static const char MAGIC[8] = { 'L', 'M', 'Q', 'L', 'O', 'G', 'I', 'T' };
#define VERSION 1
#define PREFIX 16 /* magic, version, header length */

struct vf_logits_file {
    char *path;
    size_t n;          /* floats per window */
    uint8_t *planes;   /* one window's floats as byte planes */
    void *zbuf;
    size_t zcap;
    int64_t next;      /* the window expected next */
    int64_t windows;
    /* writing */
    lmq_atomic out;
    int writing;
    XXH3_state_t *hash;
    ZSTD_CCtx *cctx;
    /* reading */
    lmq_blob blob;
    int reading;
    size_t at;         /* offset of the next window */
    ZSTD_DCtx *dctx;
};

uint64_t vf_tokens_checksum(const int32_t *ids, size_t n)
{
    return XXH3_64bits(ids, n * sizeof *ids);
}

/* ---- the header as JSON ---------------------------------------------------------------- */

static json_t *hex(uint64_t v)
{
    char h[17];
    vf_hex(v, h);
    return json_string(h);
}

static char *head_json(const vf_logits_head *h)
{
    json_t *o = json_pack("{s:s, s:s, s:i, s:i, s:I, s:I, s:o, s:o, s:{s:s, s:o, s:s, s:f, s:f}}", "tool_version",
                          LMQ_TOOL_VERSION, "protocol", "P1", "ctx", h->ctx, "vocab", h->vocab, "windows",
                          (json_int_t)h->windows, "tokens", (json_int_t)h->tokens, "tokens_checksum",
                          hex(h->tokens_checksum), "text_checksum", hex(h->text_checksum), "reference", "path",
                          h->ref.path, "file_checksum", hex(h->ref.file_checksum), "scheme", h->ref.scheme,
                          "linear_bpw", h->ref.linear_bpw, "mib", h->ref.mib);
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(o);
    return s;
}

static lmq_code head_parse(const char *path, const char *text, size_t len, vf_logits_head *h, lmq_err *err)
{
    memset(h, 0, sizeof *h);
    json_error_t je;
    json_t *o = json_loadb(text, len, 0, &je);
    const char *proto = NULL, *tok = NULL, *txt = NULL, *rp = NULL, *rc = NULL, *rs = NULL;
    json_int_t windows = 0, tokens = 0;
    int ok = o && !json_unpack(o, "{s:s, s:i, s:i, s:I, s:I, s:s, s:s, s:{s:s, s:s, s:s, s:F, s:F}}", "protocol",
                               &proto, "ctx", &h->ctx, "vocab", &h->vocab, "windows", &windows, "tokens", &tokens,
                               "tokens_checksum", &tok, "text_checksum", &txt, "reference", "path", &rp,
                               "file_checksum", &rc, "scheme", &rs, "linear_bpw", &h->ref.linear_bpw, "mib",
                               &h->ref.mib);
    ok = ok && !strcmp(proto, "P1") && h->ctx >= 2 && h->vocab >= 1 && windows >= 1 && windows <= tokens / h->ctx &&
         vf_hex_parse(tok, &h->tokens_checksum) && vf_hex_parse(txt, &h->text_checksum) &&
         vf_hex_parse(rc, &h->ref.file_checksum);
    if (ok) {
        h->windows = windows;
        h->tokens = tokens;
        snprintf(h->ref.path, sizeof h->ref.path, "%s", rp);
        snprintf(h->ref.scheme, sizeof h->ref.scheme, "%s", rs);
    }
    json_decref(o);
    return ok ? LMQ_OK : lmq_fail(err, LMQ_E_FORMAT, "%s: the header is not that of saved P1 reference logits", path);
}

/* ---- buffers --------------------------------------------------------------------------- */

static lmq_code buffers(vf_logits_file *f, const char *path, int ctx, int vocab, int64_t windows, lmq_err *err)
{
    f->path = strdup(path);
    f->n = (size_t)(ctx - 1) * (size_t)vocab;
    f->windows = windows;
    f->zcap = ZSTD_compressBound(f->n * sizeof(float));
    f->planes = malloc(f->n * sizeof(float));
    f->zbuf = malloc(f->zcap);
    return f->path && f->planes && f->zbuf
               ? LMQ_OK
               : lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory for windows of %zu logits", path, f->n);
}

void vf_logits_close(vf_logits_file *f)
{
    if (!f)
        return;
    if (f->writing)
        lmq_atomic_abort(&f->out);
    if (f->reading)
        lmq_blob_close(&f->blob);
    XXH3_freeState(f->hash);
    ZSTD_freeCCtx(f->cctx);
    ZSTD_freeDCtx(f->dctx);
    free(f->path);
    free(f->planes);
    free(f->zbuf);
    free(f);
}

/* ---- writing --------------------------------------------------------------------------- */

static lmq_code emit(vf_logits_file *f, const void *p, size_t n, lmq_err *err)
{
    XXH3_64bits_update(f->hash, p, n);
    return lmq_atomic_write(&f->out, p, n, err);
}

lmq_code vf_logits_create(const char *path, const vf_logits_head *head, vf_logits_file **out, lmq_err *err)
{
    *out = NULL;
    vf_logits_file *f = calloc(1, sizeof *f);
    if (!f)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    char *js = NULL;
    lmq_code c = buffers(f, path, head->ctx, head->vocab, head->windows, err);
    if (!c && (!(f->hash = XXH3_createState()) || !(f->cctx = ZSTD_createCCtx()) || !(js = head_json(head))))
        c = lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    if (!c && !(c = lmq_atomic_open(&f->out, path, err))) {
        f->writing = 1;
        XXH3_64bits_reset(f->hash);
        uint8_t pre[PREFIX];
        memcpy(pre, MAGIC, sizeof MAGIC);
        lmq_put_le(pre + 8, VERSION, 4);
        lmq_put_le(pre + 12, strlen(js), 4);
        if (!(c = emit(f, pre, sizeof pre, err)))
            c = emit(f, js, strlen(js), err);
    }
    free(js);
    if (c) {
        vf_logits_close(f);
        return c;
    }
    *out = f;
    return LMQ_OK;
}

lmq_code vf_logits_save(void *file, int64_t w, float *logits, size_t n, lmq_err *err)
{
    vf_logits_file *f = file;
    if (w != f->next || n != f->n || w >= f->windows)
        return lmq_fail(err, LMQ_E_ARG, "%s: window %lld of %zu logits, expected window %lld of %zu", f->path,
                        (long long)w, n, (long long)f->next, f->n);
    const uint8_t *bytes = (const uint8_t *)logits;
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < 4; b++)
            f->planes[(size_t)b * n + i] = bytes[4 * i + (size_t)b];
    size_t z = ZSTD_compressCCtx(f->cctx, f->zbuf, f->zcap, f->planes, n * sizeof(float), LMQ_ZSTD_LEVEL);
    if (ZSTD_isError(z))
        return lmq_fail(err, LMQ_E_IO, "%s: zstd: %s", f->path, ZSTD_getErrorName(z));
    uint8_t len[8];
    lmq_put_le(len, z, 8);
    lmq_code c = emit(f, len, sizeof len, err);
    if (!c && !(c = emit(f, f->zbuf, z, err)))
        f->next++;
    return c;
}

lmq_code vf_logits_finish(vf_logits_file *f, uint64_t *checksum, lmq_err *err)
{
    lmq_code c = f->next == f->windows ? LMQ_OK
                                       : lmq_fail(err, LMQ_E_ARG, "%s: %lld of %lld windows written", f->path,
                                                  (long long)f->next, (long long)f->windows);
    const uint64_t sum = XXH3_64bits_digest(f->hash);
    uint8_t tail[8];
    lmq_put_le(tail, sum, 8);
    if (!c && !(c = lmq_atomic_write(&f->out, tail, sizeof tail, err))) {
        f->writing = 0;
        c = lmq_atomic_commit(&f->out, err);
    }
    if (!c && checksum)
        *checksum = sum;
    vf_logits_close(f);
    return c;
}

/* ---- reading --------------------------------------------------------------------------- */

lmq_code vf_logits_open(const char *path, vf_logits_head *head, uint64_t *checksum, vf_logits_file **out,
                        lmq_err *err)
{
    *out = NULL;
    vf_logits_file *f = calloc(1, sizeof *f);
    if (!f)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    lmq_code c = lmq_blob_open(path, &f->blob, err);
    f->reading = !c;
    const uint8_t *d = f->blob.data;
    const size_t size = f->blob.size;
    if (!c && (size < PREFIX + 8 || memcmp(d, MAGIC, sizeof MAGIC)))
        c = lmq_fail(err, LMQ_E_FORMAT, "%s: not saved reference logits (no LMQLOGIT magic)", path);
    if (!c && lmq_le(d + 8, 4) != VERSION)
        c = lmq_fail(err, LMQ_E_UNSUPPORTED, "%s: version %u of saved logits (this build reads %d)", path,
                     (unsigned)lmq_le(d + 8, 4), VERSION);
    if (!c && XXH3_64bits(d, size - 8) != lmq_le(d + size - 8, 8))
        c = lmq_fail(err, LMQ_E_CHECKSUM, "%s: checksum mismatch: the file is damaged", path);
    const uint64_t hlen = c ? 0 : lmq_le(d + 12, 4);
    if (!c && hlen > size - PREFIX - 8)
        c = lmq_fail(err, LMQ_E_FORMAT, "%s: a header of %" PRIu64 " bytes does not fit", path, hlen);
    if (!c)
        c = head_parse(path, (const char *)d + PREFIX, (size_t)hlen, head, err);
    /* Before allocating a window: the first one's frame must say it holds that many bytes, and be
     * large enough to: a zstd block holds at most 128 KiB and takes at least 4 bytes. */
    const size_t first = PREFIX + (size_t)hlen, bytes = (size_t)(head->ctx - 1) * (size_t)head->vocab * sizeof(float);
    const uint64_t z = !c && size - 8 - first >= 8 ? lmq_le(d + first, 8) : 0;
    if (!c && (!z || z > size - 8 - first - 8 || bytes / ((size_t)128 << 10) > z / 4 ||
               ZSTD_getFrameContentSize(d + first + 8, (size_t)z) != bytes))
        c = lmq_fail(err, LMQ_E_FORMAT, "%s: the first window does not hold %d × %d logits", path, head->ctx - 1,
                     head->vocab);
    if (!c)
        c = buffers(f, path, head->ctx, head->vocab, head->windows, err);
    if (!c && !(f->dctx = ZSTD_createDCtx()))
        c = lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    if (c) {
        vf_logits_close(f);
        return c;
    }
    f->at = first;
    if (checksum)
        *checksum = lmq_le(d + size - 8, 8);
    *out = f;
    return LMQ_OK;
}

lmq_code vf_logits_load(void *file, int64_t w, float *logits, size_t n, lmq_err *err)
{
    vf_logits_file *f = file;
    if (w != f->next || n != f->n || w >= f->windows)
        return lmq_fail(err, LMQ_E_ARG, "%s: window %lld of %zu logits asked for, the file holds window %lld of %zu",
                        f->path, (long long)w, n, (long long)f->next, f->n);
    const size_t end = f->blob.size - 8;
    const uint8_t *d = f->blob.data;
    if (end - f->at < 8 || lmq_le(d + f->at, 8) > end - f->at - 8)
        return lmq_fail(err, LMQ_E_FORMAT, "%s: window %lld does not fit in the file", f->path, (long long)w);
    const size_t z = (size_t)lmq_le(d + f->at, 8);
    size_t got = ZSTD_decompressDCtx(f->dctx, f->planes, n * sizeof(float), d + f->at + 8, z);
    if (ZSTD_isError(got) || got != n * sizeof(float))
        return lmq_fail(err, LMQ_E_FORMAT, "%s: window %lld does not decode to %zu logits", f->path, (long long)w, n);
    uint8_t *bytes = (uint8_t *)logits;
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < 4; b++)
            bytes[4 * i + (size_t)b] = f->planes[(size_t)b * n + i];
    f->at += 8 + z;
    f->next++;
    return LMQ_OK;
}

/* ---- binding --------------------------------------------------------------------------- */

lmq_code vf_logits_match(const char *path, const vf_logits_head *saved, const vf_logits_head *run, lmq_err *err)
{
    char a[17], b[17];
    if (run->ref.file_checksum && saved->ref.file_checksum != run->ref.file_checksum) {
        vf_hex(saved->ref.file_checksum, a);
        vf_hex(run->ref.file_checksum, b);
        return lmq_fail(err, LMQ_E_ARG, "%s: saved for reference %s (file checksum %s); the reference %s has %s", path,
                        saved->ref.path, a, run->ref.path, b);
    }
    if (saved->text_checksum != run->text_checksum) {
        vf_hex(saved->text_checksum, a);
        vf_hex(run->text_checksum, b);
        return lmq_fail(err, LMQ_E_ARG, "%s: saved for another text (checksum %s; this text's is %s)", path, a, b);
    }
    if (saved->ctx != run->ctx)
        return lmq_fail(err, LMQ_E_ARG, "%s: saved with ctx %d; this run uses ctx %d", path, saved->ctx, run->ctx);
    if (saved->vocab != run->vocab)
        return lmq_fail(err, LMQ_E_ARG, "%s: saved for a vocabulary of %d tokens; the artefacts have %d", path,
                        saved->vocab, run->vocab);
    if (saved->tokens != run->tokens || saved->tokens_checksum != run->tokens_checksum || saved->windows != run->windows)
        return lmq_fail(err, LMQ_E_ARG,
                        "%s: saved for a token stream of %lld tokens (%lld windows) that this text does not give "
                        "with the artefacts' tokenizer (%lld tokens, %lld windows)",
                        path, (long long)saved->tokens, (long long)saved->windows, (long long)run->tokens,
                        (long long)run->windows);
    return LMQ_OK;
}
