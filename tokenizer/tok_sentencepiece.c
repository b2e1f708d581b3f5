/* SentencePiece-style BPE: llama2.c's tokenizer.bin, and the encoder it shares with
 * tokenizer.model and SentencePiece tokenizer.json files. For llama2.c it gives what
 * encode(text, bos=1, eos=0) gives (llama2.c's O(n^2) merge loop, computed with the heap-based
 * engine); merges go by score (llama2.c, tokenizer.model) or by rank (tokenizer.json). */
#include <stdlib.h>
#include <string.h>

#include "common/le.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode.h"

enum { L2C_UNK = 0, L2C_BOS = 1, L2C_EOS = 2, L2C_MIN_VOCAB = 3 };

static int hex_digit(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* "<0xHH>" stands for the byte 0xHH; anything else is literal text. */
static int byte_piece(const uint8_t *p, size_t n)
{
    if (n != 6 || memcmp(p, "<0x", 3) != 0 || p[5] != '>')
        return -1;
    int hi = hex_digit(p[3]), lo = hex_digit(p[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* Walks the entries: counts them (want = 0: up to the end of the file) and checks every
 * length against the bytes left. */
static lmq_code scan_entries(const uint8_t *data, size_t size, int want, int *count,
                             size_t *text_bytes, lmq_err *err)
{
    size_t pos = 4, total = 0;
    int n = 0;
    while (want ? n < want : pos < size) {
        if (size - pos < 8)
            return lmq_fail(err, LMQ_E_FORMAT,
                            "tokenizer.bin: token %d at byte %zu is truncated (%zu bytes left, "
                            "an entry needs at least 8)", n, pos, size - pos);
        int32_t len = lmq_le_i32(data + pos + 4);
        if (len < 0 || (size_t)len > size - pos - 8)
            return lmq_fail(err, LMQ_E_FORMAT,
                            "tokenizer.bin: token %d at byte %zu has length %d but %zu bytes are "
                            "left", n, pos, (int)len, size - pos - 8);
        pos += 8 + (size_t)len;
        total += (size_t)len;
        if (++n == INT32_MAX)
            return lmq_fail(err, LMQ_E_FORMAT, "tokenizer.bin: too many tokens");
    }
    if (pos != size)
        return lmq_fail(err, LMQ_E_FORMAT,
                        "tokenizer.bin: %zu bytes left over after %d tokens (is the vocabulary "
                        "size %d right?)", size - pos, n, want);
    *count = n;
    *text_bytes = total;
    return LMQ_OK;
}

lmq_code tok_open_llama2c(const uint8_t *data, size_t size, int vocab_size, tok_tokenizer **out,
                          lmq_err *err)
{
    if (vocab_size < 0)
        return lmq_fail(err, LMQ_E_ARG, "tokenizer.bin: negative vocabulary size %d", vocab_size);
    if (size < 4)
        return lmq_fail(err, LMQ_E_FORMAT, "tokenizer.bin: %zu bytes, too short for its header",
                        size);
    int32_t max_len = lmq_le_i32(data);
    if (max_len < 0)
        return lmq_fail(err, LMQ_E_FORMAT, "tokenizer.bin: negative max_token_length %d",
                        (int)max_len);
    int n = 0;
    size_t text_bytes = 0;
    lmq_code c = scan_entries(data, size, vocab_size, &n, &text_bytes, err);
    if (c)
        return c;
    if (n < L2C_MIN_VOCAB)
        return lmq_fail(err, LMQ_E_FORMAT,
                        "tokenizer.bin: %d tokens; a llama2.c vocabulary has at least %d "
                        "(<unk>, BOS, EOS)", n, L2C_MIN_VOCAB);

    tok_tokenizer *t = tok_alloc(LMQ_TOK_LLAMA2C);
    if (!t)
        return lmq_fail(err, LMQ_E_NOMEM, "tokenizer.bin: out of memory");
    t->n_vocab = n;
    t->bos_id = L2C_BOS;
    t->eos_id = L2C_EOS;
    t->bytes = malloc(text_bytes ? text_bytes : 1);
    t->off = malloc(((size_t)n + 1) * sizeof *t->off);
    t->score = malloc((size_t)n * sizeof *t->score);
    if (!t->bytes || !t->off || !t->score) {
        tok_free(t);
        return lmq_fail(err, LMQ_E_NOMEM, "tokenizer.bin: out of memory (%d tokens)", n);
    }
    size_t pos = 4, at = 0;
    for (int i = 0; i < n; i++) {
        size_t len = (size_t)lmq_le_i32(data + pos + 4);
        t->score[i] = lmq_le_f32(data + pos);
        t->off[i] = at;
        memcpy(t->bytes + at, data + pos + 8, len);
        at += len;
        pos += 8 + len;
    }
    t->off[n] = at;
    t->unk_id = L2C_UNK;
    t->prepend = TOK_PREPEND_ALWAYS;
    if ((c = tok_sp_finish(t, "tokenizer.bin", err))) {
        tok_free(t);
        return c;
    }
    *out = t;
    return LMQ_OK;
}

lmq_code tok_sp_finish(tok_tokenizer *t, const char *file, lmq_err *err)
{
    const int n = t->n_vocab;
    t->sp = 1;
    t->byte_piece = malloc((size_t)n * sizeof *t->byte_piece);
    if (!t->byte_piece || tok_strmap_build(&t->pieces, t->bytes, t->off, n))
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory (%d tokens)", file, n);
    for (int b = 0; b < 256; b++)
        t->byte_token[b] = -1;
    for (int i = 0; i < n; i++) {
        t->byte_piece[i] = (int16_t)byte_piece(t->bytes + t->off[i], t->off[i + 1] - t->off[i]);
        if (t->byte_piece[i] >= 0 && t->byte_token[t->byte_piece[i]] < 0)
            t->byte_token[t->byte_piece[i]] = i;
    }
    t->byte_fallback = 1;
    for (int b = 0; b < 256; b++)
        t->byte_fallback &= t->byte_token[b] >= 0;
    t->space_id = tok_strmap_get2(&t->pieces, (const uint8_t *)" ", 1, NULL, 0);
    return LMQ_OK;
}

/* llama2.c merges a pair when its concatenation is a token whose score beats the initial
 * best_score of -1e10 (so NaN and very low scores never merge); highest score first. */
static int score_pair(const tok_tokenizer *t, int32_t a, int32_t b, int32_t *merged, double *key)
{
    int32_t id = tok_strmap_get2(&t->pieces, t->bytes + t->off[a], t->off[a + 1] - t->off[a],
                                 t->bytes + t->off[b], t->off[b + 1] - t->off[b]);
    if (id < 0 || !(t->score[id] > -1e10f))
        return 0;
    *merged = id;
    *key = -(double)t->score[id];
    return 1;
}

/* Code points as pieces from s[0..n) onto out: a code point that is not a piece becomes its
 * UTF-8 bytes' "<0xHH>" pieces when the vocabulary has byte fallback, else unk_id, as
 * SentencePiece encoded the model's training data (such text is not an error). */
static lmq_code code_points(const tok_tokenizer *t, const uint8_t *s, size_t n, tok_ids *out,
                            lmq_err *err)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = (size_t)tok_utf8_decode(s + i, n - i, &cp); /* valid: checked by tok_encode */
        int32_t id = tok_strmap_get2(&t->pieces, s + i, k, NULL, 0);
        if (id >= 0) {
            out->v[out->n++] = id;
        } else if (t->byte_fallback) {
            for (size_t j = 0; j < k; j++)
                out->v[out->n++] = t->byte_token[s[i + j]];
        } else if (t->unk_id < 0) {
            return lmq_fail(err, LMQ_E_FORMAT,
                            "text has U+%04X at byte %zu, which the vocabulary lacks (no byte "
                            "fallback, no unknown token)", (unsigned)cp, i);
        } else if (!(t->fuse_unk && out->n > 0 && out->v[out->n - 1] == t->unk_id)) {
            out->v[out->n++] = t->unk_id;
        }
        i += k;
    }
    return LMQ_OK;
}

static int prepends(const tok_tokenizer *t, const uint8_t *s, size_t n, int first)
{
    switch (t->prepend) {
    case TOK_PREPEND_ALWAYS:
        return n > 0;
    case TOK_PREPEND_META:
        return n > 0 && s[0] != ' ';
    case TOK_PREPEND_META_FIRST:
        return n > 0 && s[0] != ' ' && first;
    default:
        return 0;
    }
}

/* The dummy prefix, code points as pieces, then merges; with split_words (Metaspace split) each
 * word, a space and what follows it up to the next space, is merged on its own. */
lmq_code tok_sp_segment(const tok_tokenizer *t, const uint8_t *s, size_t n, int first,
                        tok_bpe_work *w, tok_ids *out, lmq_err *err)
{
    lmq_code c = tok_ids_reserve(out, n + 1, err);
    int pre = prepends(t, s, n, first);
    if (!c && pre && t->space_id < 0 && !t->byte_fallback)
        c = lmq_fail(err, LMQ_E_FORMAT, "the vocabulary has no \" \" piece for the dummy prefix");
    tok_pair_fn pair = t->score ? score_pair : tok_rank_pair;
    for (size_t i = 0; !c && i < n;) {
        size_t j = n;
        if (t->split_words)
            for (j = pre ? i : i + 1; j < n && s[j] != ' '; j++)
                ;
        /* llama2.c merges over BOS too (SentencePiece adds BOS after encoding) */
        size_t at = out->n - (i == 0 && first && t->kind == LMQ_TOK_LLAMA2C && out->n > 0);
        if (pre)
            out->v[out->n++] = t->space_id >= 0 ? t->space_id : t->byte_token[' '];
        pre = 0;
        if ((c = code_points(t, s + i, j - i, out, err)))
            break;
        size_t m = out->n - at;
        c = tok_bpe_merge(w, t, pair, out->v + at, &m, err);
        out->n = at + m;
        i = j;
    }
    return c;
}
