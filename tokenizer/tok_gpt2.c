/* GPT-2 byte-level BPE: vocab.json + merges.txt or a Hugging Face tokenizer.json, GPT-2's
 * pre-tokeniser, rank-ordered merges, special tokens matched inside text. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode.h"

#define EOT_TEXT "<|endoftext|>"

/* GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 are
 * given code points 256, 257, ... in byte order. */
static void byte_alphabet(uint32_t cp_of[256])
{
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        cp_of[b] = printable ? (uint32_t)b : next++;
    }
}

/* UTF-8 of an alphabet code point (all below U+0144, so one or two bytes). */
static size_t utf8_put(uint32_t cp, uint8_t *o)
{
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    o[0] = (uint8_t)(0xC0 | cp >> 6);
    o[1] = (uint8_t)(0x80 | (cp & 0x3F));
    return 2;
}

/* ---- building the tokenizer from a vocabulary, merges and added tokens ---- */

typedef struct {
    const char *content;
    int32_t id;
} bl_added;

typedef struct {
    const char *file; /* for messages */
    tok_tokenizer *t;
    int n;
    const char **key;     /* per id: its string in the model vocabulary, or NULL */
    const char **added;   /* per id: its added-token content, or NULL */
    uint8_t *arena;       /* the keys, for the string map */
    size_t *aoff;
    tok_strmap map;
    uint32_t cp_of[256];
    int16_t byte_of_cp[512]; /* inverse of cp_of; the alphabet is below U+0144 */
} bl_build;

static void bl_free(bl_build *b)
{
    free(b->key);
    free(b->added);
    free(b->arena);
    free(b->aoff);
    tok_strmap_free(&b->map);
}

static lmq_code nomem(const bl_build *b, lmq_err *err)
{
    return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", b->file);
}

/* The raw bytes a byte-level token string stands for. A string with a character outside the
 * alphabet (possible for added tokens) stands for its own UTF-8, as in Hugging Face's decoder. */
static size_t token_bytes(const bl_build *b, const char *s, uint8_t *o)
{
    size_t n = strlen(s), k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int len = tok_utf8_decode((const uint8_t *)s + i, n - i, &cp);
        if (len == 0 || cp >= 512 || b->byte_of_cp[cp] < 0) {
            memcpy(o, s, n);
            return n;
        }
        o[k++] = (uint8_t)b->byte_of_cp[cp];
        i += (size_t)len;
    }
    return k;
}

/* Records the vocabulary (object: token -> id) and the added tokens; ids must cover
 * 0..n-1 with no gap, each vocabulary id once. */
static lmq_code bl_vocab(bl_build *b, json_t *vocab, const bl_added *add, int n_add, lmq_err *err)
{
    if (!json_is_object(vocab))
        return lmq_fail(err, LMQ_E_FORMAT, "%s: the vocabulary is not a JSON object", b->file);
    size_t n_keys = json_object_size(vocab);
    if (n_keys + (size_t)n_add >= INT32_MAX)
        return lmq_fail(err, LMQ_E_FORMAT, "%s: too many tokens", b->file);
    long long limit = (long long)n_keys + n_add, max_id = -1;
    const char *k;
    json_t *v;
    json_object_foreach(vocab, k, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= limit)
            return lmq_fail(err, LMQ_E_FORMAT,
                            "%s: token \"%.60s\" has id %s, not an integer in [0, %lld)", b->file,
                            k, json_is_integer(v) ? "out of range" : "of the wrong type", limit);
        if (json_integer_value(v) > max_id)
            max_id = json_integer_value(v);
    }
    for (int i = 0; i < n_add; i++) {
        if (add[i].id < 0 || add[i].id >= limit)
            return lmq_fail(err, LMQ_E_FORMAT, "%s: added token \"%.60s\" has id %d outside [0, %lld)",
                            b->file, add[i].content, (int)add[i].id, limit);
        if (add[i].id > max_id)
            max_id = add[i].id;
    }
    b->n = (int)(max_id + 1);
    b->key = calloc((size_t)b->n + 1, sizeof *b->key);
    b->added = calloc((size_t)b->n + 1, sizeof *b->added);
    if (!b->key || !b->added)
        return nomem(b, err);
    json_object_foreach(vocab, k, v) {
        int id = (int)json_integer_value(v);
        if (b->key[id])
            return lmq_fail(err, LMQ_E_FORMAT, "%s: tokens \"%.60s\" and \"%.60s\" share id %d",
                            b->file, b->key[id], k, id);
        b->key[id] = k;
    }
    for (int i = 0; i < n_add; i++)
        b->added[add[i].id] = add[i].content;
    for (int id = 0; id < b->n; id++)
        if (!b->key[id] && !b->added[id])
            return lmq_fail(err, LMQ_E_FORMAT, "%s: no token has id %d (ids must be 0..%d)",
                            b->file, id, b->n - 1);

    /* The string map covers the model vocabulary (added-only ids get an empty key, which no
     * lookup asks for); the decode table covers every id. */
    size_t key_bytes = 0;
    for (int id = 0; id < b->n; id++)
        key_bytes += (b->key[id] ? strlen(b->key[id]) : 0) + (b->added[id] ? strlen(b->added[id]) : 0);
    tok_tokenizer *t = b->t;
    t->n_vocab = b->n;
    b->arena = malloc(key_bytes + 1);
    b->aoff = malloc(((size_t)b->n + 1) * sizeof *b->aoff);
    t->bytes = malloc(key_bytes + 1);
    t->off = malloc(((size_t)b->n + 1) * sizeof *t->off);
    if (!b->arena || !b->aoff || !t->bytes || !t->off)
        return nomem(b, err);
    size_t at = 0, bt = 0;
    for (int id = 0; id < b->n; id++) {
        b->aoff[id] = at;
        t->off[id] = bt;
        if (b->key[id]) {
            size_t len = strlen(b->key[id]);
            memcpy(b->arena + at, b->key[id], len);
            at += len;
        }
        bt += token_bytes(b, b->added[id] ? b->added[id] : b->key[id], t->bytes + bt);
    }
    b->aoff[b->n] = at;
    t->off[b->n] = bt;
    if (tok_strmap_build(&b->map, b->arena, b->aoff, b->n))
        return nomem(b, err);
    for (int byte = 0; byte < 256; byte++) {
        uint8_t u[4];
        size_t ul = utf8_put(b->cp_of[byte], u);
        t->byte_token[byte] = tok_strmap_get2(&b->map, u, ul, NULL, 0);
        if (t->byte_token[byte] < 0)
            return lmq_fail(err, LMQ_E_FORMAT,
                            "%s: no token for byte 0x%02X (\"%.*s\"): not a byte-level vocabulary",
                            b->file, byte, (int)ul, (const char *)u);
    }
    return LMQ_OK;
}

/* One merge rule "a b" of rank `rank`; `where` names it in messages. */
static lmq_code bl_merge(bl_build *b, const char *a, size_t na, const char *c, size_t nc,
                         int32_t rank, const char *where, lmq_err *err)
{
    const uint8_t *ua = (const uint8_t *)a, *uc = (const uint8_t *)c;
    int32_t ia = tok_strmap_get2(&b->map, ua, na, NULL, 0);
    int32_t ic = tok_strmap_get2(&b->map, uc, nc, NULL, 0);
    int32_t im = tok_strmap_get2(&b->map, ua, na, uc, nc);
    if (ia < 0 || ic < 0)
        return lmq_fail(err, LMQ_E_FORMAT, "%s: %s: token \"%.*s\" is not in the vocabulary",
                        b->file, where, (int)(ia < 0 ? na : nc), ia < 0 ? a : c);
    if (im < 0)
        return lmq_fail(err, LMQ_E_FORMAT,
                        "%s: %s: the merged token \"%.*s%.*s\" is not in the vocabulary", b->file,
                        where, (int)na, a, (int)nc, c);
    tok_pairmap_put(&b->t->merges, ia, ic, rank, im);
    return LMQ_OK;
}

/* "a b": exactly one space, both halves non-empty. */
static lmq_code bl_merge_line(bl_build *b, const char *s, size_t n, int32_t rank,
                              const char *where, lmq_err *err)
{
    const char *sp = memchr(s, ' ', n);
    if (!sp || sp == s || sp == s + n - 1 || memchr(sp + 1, ' ', (size_t)(s + n - sp - 1)))
        return lmq_fail(err, LMQ_E_FORMAT, "%s: %s: \"%.*s\" is not two tokens separated by one space",
                        b->file, where, (int)(n > 80 ? 80 : n), s);
    return bl_merge(b, s, (size_t)(sp - s), sp + 1, (size_t)(s + n - sp - 1), rank, where, err);
}

static lmq_code bl_special(tok_tokenizer *t, const char *content, int32_t id)
{
    tok_special *s = realloc(t->special, ((size_t)t->n_special + 1) * sizeof *s);
    if (!s)
        return LMQ_E_NOMEM;
    t->special = s;
    size_t n = strlen(content);
    uint8_t *copy = malloc(n + 1);
    if (!copy)
        return LMQ_E_NOMEM;
    memcpy(copy, content, n + 1);
    t->special[t->n_special++] = (tok_special){ copy, n, id };
    t->special_first[copy[0] >> 3] |= (uint8_t)(1u << (copy[0] & 7));
    if (strcmp(content, EOT_TEXT) == 0)
        t->eos_id = id;
    return LMQ_OK;
}

static lmq_code bl_begin(bl_build *b, const char *file, lmq_tok_kind kind, lmq_err *err)
{
    memset(b, 0, sizeof *b);
    b->file = file;
    byte_alphabet(b->cp_of);
    for (int i = 0; i < 512; i++)
        b->byte_of_cp[i] = -1;
    for (int i = 0; i < 256; i++)
        b->byte_of_cp[b->cp_of[i]] = (int16_t)i;
    b->t = tok_alloc(kind);
    return b->t ? LMQ_OK : nomem(b, err);
}

/* Ends a build: on success hands the tokenizer over, otherwise frees it. */
static lmq_code bl_end(bl_build *b, lmq_code c, tok_tokenizer **out)
{
    if (c)
        tok_free(b->t);
    else
        *out = b->t;
    bl_free(b);
    return c;
}

static json_t *load_json(const uint8_t *data, size_t size, const char *file, lmq_err *err)
{
    json_error_t je;
    json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        lmq_fail(err, LMQ_E_FORMAT, "%s: line %d column %d: %s", file, je.line, je.column, je.text);
    return j;
}

static size_t count_lines(const uint8_t *s, size_t n)
{
    size_t k = 1;
    for (const uint8_t *p = s; (p = memchr(p, '\n', (size_t)(s + n - p))); p++)
        k++;
    return k;
}

lmq_code tok_open_gpt2(const uint8_t *vocab_json, size_t vocab_size, const uint8_t *merges_txt,
                       size_t merges_size, tok_tokenizer **out, lmq_err *err)
{
    bl_build b;
    lmq_code c = bl_begin(&b, "vocab.json", LMQ_TOK_GPT2, err);
    if (c)
        return c;
    json_t *vocab = load_json(vocab_json, vocab_size, "vocab.json", err);
    if (!vocab)
        return bl_end(&b, LMQ_E_FORMAT, out);
    c = bl_vocab(&b, vocab, NULL, 0, err);
    json_t *eot = c ? NULL : json_object_get(vocab, EOT_TEXT);
    if (eot && bl_special(b.t, EOT_TEXT, (int32_t)json_integer_value(eot)))
        c = nomem(&b, err);
    json_decref(vocab);
    b.file = "merges.txt";
    if (!c && tok_pairmap_init(&b.t->merges, count_lines(merges_txt, merges_size)))
        c = nomem(&b, err);
    const char *s = (const char *)merges_txt, *end = s + merges_size;
    int32_t rank = 0;
    for (int line = 1; !c && s < end; line++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *e = nl ? nl : end;
        size_t n = (size_t)(e - s);
        if (n > 0 && s[n - 1] == '\r')
            n--;
        if (n > 0 && !(n >= 8 && memcmp(s, "#version", 8) == 0)) {
            char where[32];
            snprintf(where, sizeof where, "line %d", line);
            c = bl_merge_line(&b, s, n, rank++, where, err);
        }
        s = e + 1;
    }
    return bl_end(&b, c, out);
}

/* ---- tokenizer.json ---- */

static const char *str_field(json_t *o, const char *name)
{
    json_t *v = json_object_get(o, name);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int true_field(json_t *o, const char *name)
{
    return json_is_true(json_object_get(o, name));
}

/* Accepts what GPT-2's own tokenizer.json says and rejects what would change the result. */
static lmq_code hf_check_pipeline(json_t *root, json_t *model, lmq_err *err)
{
    const char *type = str_field(model, "type");
    if (type && strcmp(type, "BPE") != 0)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "tokenizer.json: model type %s (only BPE)", type);
    json_t *norm = json_object_get(root, "normalizer");
    if (norm && !json_is_null(norm))
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "tokenizer.json: a normalizer (%s)",
                        str_field(norm, "type") ? str_field(norm, "type") : "?");
    json_t *pre = json_object_get(root, "pre_tokenizer");
    const char *pt = str_field(pre, "type");
    if (!pt || strcmp(pt, "ByteLevel") != 0)
        return lmq_fail(err, LMQ_E_UNSUPPORTED,
                        "tokenizer.json: pre_tokenizer %s (only GPT-2's ByteLevel)", pt ? pt : "none");
    json_t *use_regex = json_object_get(pre, "use_regex");
    if (true_field(pre, "add_prefix_space") || json_is_false(use_regex))
        return lmq_fail(err, LMQ_E_UNSUPPORTED,
                        "tokenizer.json: ByteLevel with add_prefix_space or without its regex");
    static const char *const off_fields[] = { "dropout", "continuing_subword_prefix",
                                              "end_of_word_suffix" };
    for (size_t i = 0; i < sizeof off_fields / sizeof off_fields[0]; i++) {
        json_t *v = json_object_get(model, off_fields[i]);
        if (v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0))
            return lmq_fail(err, LMQ_E_UNSUPPORTED, "tokenizer.json: model.%s is set",
                            off_fields[i]);
    }
    if (true_field(model, "ignore_merges") || true_field(model, "byte_fallback"))
        return lmq_fail(err, LMQ_E_UNSUPPORTED,
                        "tokenizer.json: model.ignore_merges / byte_fallback are not supported");
    return LMQ_OK;
}

static lmq_code hf_added(json_t *root, bl_added **out, int *n_out, lmq_err *err)
{
    json_t *arr = json_object_get(root, "added_tokens");
    *out = NULL;
    *n_out = 0;
    if (!arr || json_is_null(arr))
        return LMQ_OK;
    if (!json_is_array(arr))
        return lmq_fail(err, LMQ_E_FORMAT, "tokenizer.json: added_tokens is not an array");
    size_t n = json_array_size(arr);
    bl_added *a = calloc(n + 1, sizeof *a);
    if (!a)
        return lmq_fail(err, LMQ_E_NOMEM, "tokenizer.json: out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(arr, i);
        json_t *id = json_object_get(e, "id");
        const char *content = str_field(e, "content");
        if (!content || !content[0] || !json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) >= INT32_MAX) {
            free(a);
            return lmq_fail(err, LMQ_E_FORMAT,
                            "tokenizer.json: added_tokens[%zu] needs a non-empty content and an id",
                            i);
        }
        if (true_field(e, "lstrip") || true_field(e, "rstrip") || true_field(e, "single_word")) {
            free(a);
            return lmq_fail(err, LMQ_E_UNSUPPORTED,
                            "tokenizer.json: added token \"%.60s\" uses lstrip/rstrip/single_word",
                            content);
        }
        a[i] = (bl_added){ content, (int32_t)json_integer_value(id) };
    }
    *out = a;
    *n_out = (int)n;
    return LMQ_OK;
}

static lmq_code hf_merges(bl_build *b, json_t *merges, lmq_err *err)
{
    if (!json_is_array(merges))
        return lmq_fail(err, LMQ_E_FORMAT, "tokenizer.json: model.merges is not an array");
    size_t n = json_array_size(merges);
    if (n >= INT32_MAX)
        return lmq_fail(err, LMQ_E_FORMAT, "tokenizer.json: too many merges");
    if (tok_pairmap_init(&b->t->merges, n))
        return nomem(b, err);
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(merges, i);
        char where[48];
        snprintf(where, sizeof where, "model.merges[%zu]", i);
        lmq_code c;
        if (json_is_string(m)) {
            c = bl_merge_line(b, json_string_value(m), json_string_length(m), (int32_t)i, where, err);
        } else if (json_is_array(m) && json_array_size(m) == 2 &&
                   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
            json_t *x = json_array_get(m, 0), *y = json_array_get(m, 1);
            c = bl_merge(b, json_string_value(x), json_string_length(x), json_string_value(y),
                         json_string_length(y), (int32_t)i, where, err);
        } else {
            c = lmq_fail(err, LMQ_E_FORMAT, "tokenizer.json: %s is neither \"a b\" nor [a, b]",
                         where);
        }
        if (c)
            return c;
    }
    return LMQ_OK;
}

lmq_code tok_open_hf_json(const uint8_t *json, size_t size, tok_tokenizer **out, lmq_err *err)
{
    bl_build b;
    lmq_code c = bl_begin(&b, "tokenizer.json", LMQ_TOK_HF_JSON, err);
    if (c)
        return c;
    json_t *root = load_json(json, size, "tokenizer.json", err);
    if (!root)
        return bl_end(&b, LMQ_E_FORMAT, out);
    json_t *model = json_object_get(root, "model");
    bl_added *add = NULL;
    int n_add = 0;
    if (!json_is_object(model))
        c = lmq_fail(err, LMQ_E_FORMAT, "tokenizer.json: no \"model\" object");
    if (!c)
        c = hf_check_pipeline(root, model, err);
    if (!c)
        c = hf_added(root, &add, &n_add, err);
    if (!c)
        c = bl_vocab(&b, json_object_get(model, "vocab"), add, n_add, err);
    if (!c)
        c = hf_merges(&b, json_object_get(model, "merges"), err);
    for (int i = 0; !c && i < n_add; i++)
        if (bl_special(b.t, add[i].content, add[i].id))
            c = nomem(&b, err);
    free(add);
    json_decref(root);
    return bl_end(&b, c, out);
}

/* ---- encoding ---- */

static int bl_pair(const tok_tokenizer *t, int32_t a, int32_t b, int32_t *merged, double *key)
{
    const tok_pair_slot *s = tok_pairmap_get(&t->merges, a, b);
    if (!s)
        return 0;
    *merged = s->merged;
    *key = s->rank;
    return 1;
}

static tok_uni_class class_at(const uint8_t *s, size_t n, size_t i, size_t *len)
{
    uint32_t cp;
    *len = (size_t)tok_utf8_decode(s + i, n - i, &cp);
    return tok_uni_classify(cp);
}

/* The end of the run of class `cls` that starts at s[i]. */
static size_t run_end(const uint8_t *s, size_t n, size_t i, tok_uni_class cls)
{
    size_t k;
    while (i < n && class_at(s, n, i, &k) == cls)
        i += k;
    return i;
}

/* The end of the pre-token starting at s[i], by GPT-2's pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * with the regex's first-alternative-that-matches semantics. */
static size_t pretoken_end(const uint8_t *s, size_t n, size_t i)
{
    if (s[i] == '\'' && i + 1 < n) {
        uint8_t c1 = s[i + 1], c2 = i + 2 < n ? s[i + 2] : 0;
        if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')
            return i + 2;
        if (((c1 == 'r' || c1 == 'v') && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
            return i + 3;
    }
    size_t k;
    tok_uni_class cls = class_at(s, n, i, &k);
    if (s[i] == ' ' && i + 1 < n) { /* " ?" belongs to a following letter/number/other run */
        size_t k2;
        tok_uni_class next = class_at(s, n, i + 1, &k2);
        if (next != TOK_UNI_SPACE)
            return run_end(s, n, i + 1 + k2, next);
    }
    if (cls != TOK_UNI_SPACE)
        return run_end(s, n, i + k, cls);
    size_t last = i, j = i + k; /* last: where the run's final character starts */
    while (j < n && class_at(s, n, j, &k) == TOK_UNI_SPACE) {
        last = j;
        j += k;
    }
    /* \s+(?!\S) backs off one character to leave it to the next word; \s+ takes a lone one */
    return j < n && last > i ? last : j;
}

static lmq_code encode_segment(const tok_tokenizer *t, const uint8_t *s, size_t n,
                               tok_bpe_work *w, tok_ids *out, lmq_err *err)
{
    for (size_t i = 0; i < n;) {
        size_t e = pretoken_end(s, n, i);
        lmq_code c = tok_ids_reserve(out, e - i, err);
        if (c)
            return c;
        int32_t *sym = out->v + out->n;
        size_t m = e - i;
        for (size_t j = 0; j < m; j++)
            sym[j] = t->byte_token[s[i + j]];
        if ((c = tok_bpe_merge(w, t, bl_pair, sym, &m, err)))
            return c;
        out->n += m;
        i = e;
    }
    return LMQ_OK;
}

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

lmq_code tok_bytelevel_encode(const tok_tokenizer *t, const uint8_t *text, size_t len,
                              tok_ids *out, lmq_err *err)
{
    tok_bpe_work w = { 0 };
    lmq_code c = LMQ_OK;
    size_t seg = 0;
    for (size_t i = 0; !c && i < len;) {
        const tok_special *sp = special_at(t, text, len, i);
        if (!sp) {
            i++;
            continue;
        }
        c = encode_segment(t, text + seg, i - seg, &w, out, err);
        if (!c)
            c = tok_ids_push(out, sp->id, err);
        i += sp->len;
        seg = i;
    }
    if (!c)
        c = encode_segment(t, text + seg, len - seg, &w, out, err);
    tok_bpe_work_free(&w);
    return c;
}
