#include "tokenizer/stream.h"

#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "common/file.h"
#include "tokenizer/unicode.h"

#define SEPARATOR "<|endoftext|>"

static int ascii_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int is_separator(const char *line, size_t n)
{
    size_t k = sizeof SEPARATOR - 1;
    if (n == k + 1 && line[k] == '\r')
        n = k;
    return n == k && memcmp(line, SEPARATOR, k) == 0;
}

/* Appends the stripped text[a..b) unless it is empty. */
static lmq_code add_doc(const char *text, size_t a, size_t b, tok_doc **docs, int *n, int *cap,
                        lmq_err *err)
{
    while (a < b && ascii_space(text[a]))
        a++;
    while (b > a && ascii_space(text[b - 1]))
        b--;
    if (a == b)
        return LMQ_OK;
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 16;
        tok_doc *d = realloc(*docs, (size_t)nc * sizeof *d);
        if (!d)
            return lmq_fail(err, LMQ_E_NOMEM, "documents: out of memory");
        *docs = d;
        *cap = nc;
    }
    (*docs)[(*n)++] = (tok_doc){ a, b - a };
    return LMQ_OK;
}

lmq_code tok_docs_split(const char *text, size_t len, tok_doc **docs, int *n_docs, lmq_err *err)
{
    tok_doc *d = NULL;
    int n = 0, cap = 0;
    size_t start = 0; /* where the current document begins */
    lmq_code c = LMQ_OK;
    for (size_t line = 0; !c && line < len;) {
        const char *nl = memchr(text + line, '\n', len - line);
        size_t end = nl ? (size_t)(nl - text) : len;
        if (is_separator(text + line, end - line)) {
            c = add_doc(text, start, line, &d, &n, &cap, err);
            start = end + 1 < len ? end + 1 : len;
        }
        line = end + 1;
    }
    if (!c)
        c = add_doc(text, start, len, &d, &n, &cap, err);
    if (c) {
        free(d);
        return c;
    }
    *docs = d;
    *n_docs = n;
    return LMQ_OK;
}

lmq_code tok_stream_build(const tok_tokenizer *t, const char *text, size_t len, int32_t **ids,
                         size_t *n_ids, int *n_docs, lmq_err *err)
{
    return tok_stream_build_docs(t, text, len, ids, n_ids, NULL, n_docs, err);
}

lmq_code tok_stream_build_docs(const tok_tokenizer *t, const char *text, size_t len, int32_t **ids,
                              size_t *n_ids, size_t **starts, int *n_docs, lmq_err *err)
{
    size_t valid = tok_utf8_valid_prefix((const uint8_t *)text, len);
    if (valid != len)
        return lmq_fail(err, LMQ_E_FORMAT, "text is not valid UTF-8 at byte offset %zu", valid);
    tok_doc *docs;
    int nd;
    lmq_code c = tok_docs_split(text, len, &docs, &nd, err);
    if (c)
        return c;
    if (nd == 0)
        return lmq_fail(err, LMQ_E_FORMAT,
                        "text holds no document (it is empty, whitespace or separators only)");
    int joined = tok_bos_id(t) < 0; /* a tokenizer that adds BOS starts each document with it */
    if (joined && nd > 1 && tok_eos_id(t) < 0) {
        free(docs);
        return lmq_fail(err, LMQ_E_FORMAT,
                        "the tokenizer has no <|endoftext|> token to join %d documents", nd);
    }
    size_t *st = NULL;
    if (starts && !(st = malloc((size_t)nd * sizeof *st))) {
        free(docs);
        return lmq_fail(err, LMQ_E_NOMEM, "token stream: out of memory");
    }
    int32_t *all = NULL;
    size_t n = 0, cap = 0;
    for (int i = 0; !c && i < nd; i++) {
        int32_t *d;
        size_t k;
        if ((c = tok_encode(t, text + docs[i].off, docs[i].len, &d, &k, err))) {
            lmq_err_prefix(err, "document %d (byte %zu): ", i + 1, docs[i].off);
            break;
        }
        size_t need = n + k + 1;
        if (need > cap) {
            size_t nc = cap ? cap : 4096;
            while (nc < need)
                nc *= 2;
            int32_t *a = realloc(all, nc * sizeof *a);
            if (!a) {
                free(d);
                c = lmq_fail(err, LMQ_E_NOMEM, "token stream: out of memory");
                break;
            }
            all = a;
            cap = nc;
        }
        if (st)
            st[i] = n;
        if (joined && i > 0)
            all[n++] = tok_eos_id(t);
        memcpy(all + n, d, k * sizeof *d);
        n += k;
        free(d);
    }
    free(docs);
    if (c) {
        free(all);
        free(st);
        return c;
    }
    if (starts)
        *starts = st;
    *ids = all;
    *n_ids = n;
    *n_docs = nd;
    return LMQ_OK;
}

lmq_code tok_stream_read(const lmq_model *m, const char *text_path, int32_t **ids, size_t *n, int *docs,
                        uint64_t *checksum, lmq_err *err)
{
    tok_tokenizer *tok;
    lmq_code c = tok_open_model(m, &tok, err);
    if (c)
        return c;
    lmq_blob text;
    if (!(c = lmq_blob_open(text_path, &text, err))) {
        if ((c = tok_stream_build(tok, (const char *)text.data, text.size, ids, n, docs, err)))
            lmq_err_prefix(err, "%s: ", text_path);
        if (checksum)
            *checksum = XXH3_64bits(text.data, text.size);
        lmq_blob_close(&text);
    }
    tok_free(tok);
    return c;
}
