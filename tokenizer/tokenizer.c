/* What both tokenizer families share: the object, encode's entry, decoding, model lookup. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode.h"

tok_tokenizer *tok_alloc(lmq_tok_kind kind)
{
    tok_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->kind = kind;
    t->bos_id = t->eos_id = t->space_id = t->unk_id = -1;
    for (int b = 0; b < 256; b++)
        t->byte_value[b] = (uint8_t)b;
    return t;
}

void tok_free(tok_tokenizer *t)
{
    if (!t)
        return;
    free(t->bytes);
    free(t->off);
    free(t->byte_piece);
    free(t->score);
    tok_strmap_free(&t->pieces);
    tok_pairmap_free(&t->merges);
    for (int i = 0; i < t->n_special; i++)
        free(t->special[i].text);
    free(t->special);
    free(t);
}

lmq_tok_kind tok_kind(const tok_tokenizer *t) { return t->kind; }
int tok_vocab_size(const tok_tokenizer *t) { return t->n_vocab; }
int tok_bos_id(const tok_tokenizer *t) { return t->bos_id; }
int tok_eos_id(const tok_tokenizer *t) { return t->eos_id; }

/* The longest special token at s[i..n), or NULL. */
static const tok_special *special_at(const tok_tokenizer *t, const uint8_t *s, size_t n, size_t i)
{
    if (!(t->special_first[s[i] >> 3] & (1u << (s[i] & 7))))
        return NULL;
    const tok_special *best = NULL;
    for (int k = 0; k < t->n_special; k++) {
        const tok_special *sp = &t->special[k];
        if (sp->len <= n - i && memcmp(s + i, sp->text, sp->len) == 0 && (!best || sp->len > best->len))
            best = sp;
    }
    return best;
}

static lmq_code encode_segment(const tok_tokenizer *t, const uint8_t *s, size_t n, int first,
                               tok_bpe_work *w, tok_ids *out, lmq_err *err)
{
    return t->sp ? tok_sp_segment(t, s, n, first, w, out, err)
                 : tok_bytelevel_segment(t, s, n, w, out, err);
}

static int space_at(const uint8_t *s, size_t n, size_t i, size_t *len)
{
    uint32_t cp;
    *len = (size_t)tok_utf8_decode(s + i, n - i, &cp);
    return tok_uni_classify(cp) == TOK_UNI_SPACE;
}

/* BOS, then the text with special tokens split out first, each stretch between them encoded on
 * its own (as Hugging Face's added tokens are); lstrip / rstrip tokens take the whitespace
 * before / after them in the stretch. */
static lmq_code encode_text(const tok_tokenizer *t, const uint8_t *text, size_t len, tok_ids *out,
                            lmq_err *err)
{
    for (size_t i = 0; t->nfc && i < len;) {
        uint32_t cp;
        i += (size_t)tok_utf8_decode(text + i, len - i, &cp); /* valid: checked by tok_encode */
        if (!tok_uni_nfc_stable(cp))
            return lmq_fail(err, LMQ_E_UNSUPPORTED,
                            "text has U+%04X before byte %zu, which the tokenizer's NFC normalizer may change; "
                            "lmq applies NFC only to text it leaves unchanged", (unsigned)cp, i);
    }
    tok_bpe_work w = { 0 };
    lmq_code c = t->bos_id >= 0 ? tok_ids_push(out, t->bos_id, err) : LMQ_OK;
    size_t seg = 0;
    for (size_t i = 0; !c && i < len;) {
        const tok_special *sp = special_at(t, text, len, i);
        if (!sp) {
            i++;
            continue;
        }
        size_t start = i, k;
        while (sp->lstrip && start > seg) { /* back over the whitespace character before */
            size_t p = start - 1;
            while (p > seg && (text[p] & 0xC0) == 0x80)
                p--;
            if (!space_at(text, len, p, &k))
                break;
            start = p;
        }
        c = encode_segment(t, text + seg, start - seg, seg == 0, &w, out, err);
        if (!c)
            c = tok_ids_push(out, sp->id, err);
        i += sp->len;
        while (sp->rstrip && i < len && space_at(text, len, i, &k))
            i += k;
        seg = i;
    }
    if (!c)
        c = encode_segment(t, text + seg, len - seg, seg == 0, &w, out, err);
    tok_bpe_work_free(&w);
    return c;
}

lmq_code tok_encode(const tok_tokenizer *t, const char *text, size_t len, int32_t **ids,
                    size_t *n, lmq_err *err)
{
    const uint8_t *s = (const uint8_t *)text;
    size_t valid = tok_utf8_valid_prefix(s, len);
    if (valid != len)
        return lmq_fail(err, LMQ_E_FORMAT, "text is not valid UTF-8 at byte offset %zu", valid);
    tok_ids out = { 0 };
    lmq_code c = tok_ids_reserve(&out, len / 2 + 2, err);
    if (!c)
        c = encode_text(t, s, len, &out, err);
    if (c) {
        free(out.v);
        return c;
    }
    *ids = out.v;
    *n = out.n;
    return LMQ_OK;
}

lmq_code tok_decode_token(const tok_tokenizer *t, int32_t prev_id, int32_t id,
                          const uint8_t **bytes, size_t *len, lmq_err *err)
{
    if (id < 0 || id >= t->n_vocab)
        return lmq_fail(err, LMQ_E_ARG, "token id %d is outside the vocabulary [0, %d)", (int)id,
                        t->n_vocab);
    const uint8_t *p = t->bytes + t->off[id];
    size_t n = t->off[id + 1] - t->off[id];
    if (t->sp) {
        if (id == t->bos_id) {
            n = 0; /* llama2.c never prints BOS: it starts or delimits a sequence */
        } else if (prev_id == t->bos_id && n > 0 && p[0] == ' ') {
            p++, n--; /* the dummy prefix */
        } else if (t->byte_piece[id] >= 0) {
            p = &t->byte_value[t->byte_piece[id]], n = 1;
        }
    }
    *bytes = p;
    *len = n;
    return LMQ_OK;
}

lmq_code tok_decode(const tok_tokenizer *t, const int32_t *ids, size_t n, char **text,
                    size_t *len, lmq_err *err)
{
    size_t cap = 64, used = 0;
    char *buf = malloc(cap);
    if (!buf)
        return lmq_fail(err, LMQ_E_NOMEM, "tokenizer: out of memory");
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p;
        size_t k;
        lmq_code c = tok_decode_token(t, i ? ids[i - 1] : -1, ids[i], &p, &k, err);
        if (c) {
            free(buf);
            return lmq_err_prefix(err, "position %zu: ", i);
        }
        if (cap - used <= k) {
            while (cap - used <= k)
                cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                return lmq_fail(err, LMQ_E_NOMEM, "tokenizer: out of memory");
            }
            buf = nb;
        }
        memcpy(buf + used, p, k);
        used += k;
    }
    buf[used] = '\0';
    *text = buf;
    *len = used;
    return LMQ_OK;
}

static lmq_code need_file(const lmq_model *m, const char *name, const lmq_file **f, lmq_err *err)
{
    *f = lmq_model_find_file(m, name);
    return *f ? LMQ_OK : lmq_fail(err, LMQ_E_FORMAT, "model carries no %s for its tokenizer", name);
}

lmq_code tok_open_model(const lmq_model *m, tok_tokenizer **out, lmq_err *err)
{
    const lmq_file *a, *b;
    lmq_code c;
    switch (m->arch.tokenizer) {
    case LMQ_TOK_LLAMA2C:
        if (!(c = need_file(m, "tokenizer.bin", &a, err)))
            c = tok_open_llama2c(a->data, a->size, m->arch.vocab_size, out, err);
        break;
    case LMQ_TOK_GPT2:
        if (!(c = need_file(m, "vocab.json", &a, err)) && !(c = need_file(m, "merges.txt", &b, err)))
            c = tok_open_gpt2(a->data, a->size, b->data, b->size, out, err);
        break;
    case LMQ_TOK_HF_JSON:
        if (!(c = need_file(m, "tokenizer.json", &a, err)))
            c = tok_open_hf_json(a->data, a->size, out, err);
        break;
    case LMQ_TOK_SPM:
        if (!(c = need_file(m, "tokenizer.model", &a, err)))
            c = tok_open_spm_model(a->data, a->size, out, err);
        break;
    default:
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "model has no tokenizer (kind %d)",
                        (int)m->arch.tokenizer);
    }
    if (c)
        return c;
    if (m->arch.vocab_size > 0 && tok_vocab_size(*out) > m->arch.vocab_size) {
        int n = tok_vocab_size(*out);
        tok_free(*out);
        *out = NULL;
        return lmq_fail(err, LMQ_E_FORMAT, "tokenizer has %d tokens but the model only %d", n,
                        m->arch.vocab_size);
    }
    return LMQ_OK;
}
