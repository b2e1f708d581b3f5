/* Hugging Face tokenizer files, BPE with rank-ordered merges: GPT-2's vocab.json + merges.txt,
 * and tokenizer.json, byte-level (GPT-2, Llama-3, Qwen2 pre-tokenisers) or SentencePiece-style
 * (Llama-2 family: byte fallback, "▁" for spaces); special tokens matched inside text. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode.h"

#define SP_SPACE "\xE2\x96\x81" /* U+2581, SentencePiece's stand-in for a space */

/* Added tokens that end a document (the joiner of P1's GPT-2-style streams). */
static const char *const EOS_TEXTS[] = { "<|endoftext|>", "</s>", "<|end_of_text|>" };

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
    int lstrip, rstrip;
} bl_added;

typedef struct {
    const char *file; /* for messages */
    tok_tokenizer *t;
    int sp;               /* SentencePiece-style: keys hold " " for U+2581, no byte alphabet */
    uint8_t *scratch[2];  /* sp: merge halves with U+2581 replaced */
    size_t scratch_cap[2];
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
    free(b->scratch[0]);
    free(b->scratch[1]);
}

/* sp: s[0..n) with each U+2581 replaced by " " into o (at least n bytes); the new length. */
static size_t sp_text(const char *s, size_t n, uint8_t *o)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (n - i >= 3 && !memcmp(s + i, SP_SPACE, 3)) {
            o[k++] = ' ';
            i += 2;
        } else {
            o[k++] = (uint8_t)s[i];
        }
    }
    return k;
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
    if (b->sp)
        return sp_text(s, n, o);
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
            if (b->sp)
                len = sp_text(b->key[id], len, b->arena + at);
            else
                memcpy(b->arena + at, b->key[id], len);
            at += len;
        }
        bt += token_bytes(b, b->added[id] ? b->added[id] : b->key[id], t->bytes + bt);
    }
    b->aoff[b->n] = at;
    t->off[b->n] = bt;
    if (tok_strmap_build(&b->map, b->arena, b->aoff, b->n))
        return nomem(b, err);
    if (b->sp)
        return tok_sp_finish(t, b->file, err);
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
    if (b->sp) { /* the keys hold " " for U+2581: look the halves up the same way */
        const char *half[2] = { a, c };
        size_t len[2] = { na, nc };
        for (int h = 0; h < 2; h++) {
            if (b->scratch_cap[h] < len[h] + 1) {
                uint8_t *p = realloc(b->scratch[h], len[h] + 1);
                if (!p)
                    return nomem(b, err);
                b->scratch[h] = p;
                b->scratch_cap[h] = len[h] + 1;
            }
            len[h] = sp_text(half[h], len[h], b->scratch[h]);
        }
        ua = b->scratch[0], na = len[0];
        uc = b->scratch[1], nc = len[1];
    }
    int32_t ia = tok_strmap_get2(&b->map, ua, na, NULL, 0);
    int32_t ic = tok_strmap_get2(&b->map, uc, nc, NULL, 0);
    int32_t im = tok_strmap_get2(&b->map, ua, na, uc, nc);
    if (ia < 0 || ic < 0)
        return lmq_fail(err, LMQ_E_FORMAT, "%s: %s: token \"%.*s\" is not in the vocabulary",
                        b->file, where, (int)(ia < 0 ? na : nc), (const char *)(ia < 0 ? ua : uc));
    if (im < 0)
        return lmq_fail(err, LMQ_E_FORMAT,
                        "%s: %s: the merged token \"%.*s%.*s\" is not in the vocabulary", b->file,
                        where, (int)na, (const char *)ua, (int)nc, (const char *)uc);
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

static lmq_code bl_special(tok_tokenizer *t, const char *content, int32_t id, int lstrip, int rstrip)
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
    t->special[t->n_special++] = (tok_special){ copy, n, id, lstrip, rstrip };
    t->special_first[copy[0] >> 3] |= (uint8_t)(1u << (copy[0] & 7));
    return LMQ_OK;
}

/* The end-of-text token: the first of EOS_TEXTS among the special tokens. */
static void bl_eos(tok_tokenizer *t)
{
    for (size_t i = 0; i < sizeof EOS_TEXTS / sizeof EOS_TEXTS[0] && t->eos_id < 0; i++)
        for (int k = 0; k < t->n_special; k++)
            if (!strcmp((const char *)t->special[k].text, EOS_TEXTS[i]))
                t->eos_id = t->special[k].id;
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
    if (c) {
        tok_free(b->t);
    } else {
        bl_eos(b->t);
        *out = b->t;
    }
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
    json_t *eot = c ? NULL : json_object_get(vocab, EOS_TEXTS[0]);
    if (eot && bl_special(b.t, EOS_TEXTS[0], (int32_t)json_integer_value(eot), 0, 0))
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

static const char *type_of(json_t *o)
{
    const char *t = str_field(o, "type");
    return t ? t : "(no type)";
}

static int null_or_absent(json_t *v) { return !v || json_is_null(v); }

/* The Llama-2 family's normalizer: Prepend("▁") then Replace(" " -> "▁"). */
static int llama_normalizer(json_t *norm)
{
    json_t *list = json_object_get(norm, "normalizers");
    if (strcmp(type_of(norm), "Sequence") || json_array_size(list) != 2)
        return 0;
    json_t *p = json_array_get(list, 0), *r = json_array_get(list, 1);
    const char *from = str_field(json_object_get(r, "pattern"), "String");
    return !strcmp(type_of(p), "Prepend") && !strcmp(type_of(r), "Replace") &&
           str_field(p, "prepend") && !strcmp(str_field(p, "prepend"), SP_SPACE) && from &&
           !strcmp(from, " ") && str_field(r, "content") && !strcmp(str_field(r, "content"), SP_SPACE);
}

/* Metaspace: "▁" for spaces, the prefix by prepend_scheme (older files: add_prefix_space). */
static lmq_code hf_metaspace(json_t *pre, tok_tokenizer *t, lmq_err *err)
{
    static const struct {
        const char *name;
        tok_prepend prepend;
    } SCHEMES[] = { { "always", TOK_PREPEND_META }, { "first", TOK_PREPEND_META_FIRST },
                    { "never", TOK_PREPEND_NEVER } };
    const char *rep = str_field(pre, "replacement"), *scheme = str_field(pre, "prepend_scheme");
    if (!rep || strcmp(rep, SP_SPACE))
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "tokenizer.json: Metaspace replacement other than U+2581");
    t->prepend = json_is_false(json_object_get(pre, "add_prefix_space")) ? TOK_PREPEND_NEVER : TOK_PREPEND_META;
    size_t i = 0;
    while (scheme && i < sizeof SCHEMES / sizeof SCHEMES[0] && strcmp(scheme, SCHEMES[i].name))
        i++;
    if (scheme && i == sizeof SCHEMES / sizeof SCHEMES[0])
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "tokenizer.json: Metaspace prepend_scheme \"%.40s\"", scheme);
    if (scheme)
        t->prepend = SCHEMES[i].prepend;
    t->split_words = !json_is_false(json_object_get(pre, "split")); /* Hugging Face's default: split */
    return LMQ_OK;
}

/* Sequence[Split(Llama-3 or Qwen2 pattern, Isolated), ByteLevel(no prefix space, no regex)]. */
static lmq_code hf_split_bytelevel(json_t *pre, tok_tokenizer *t, lmq_err *err)
{
    json_t *list = json_object_get(pre, "pretokenizers");
    json_t *split = json_array_get(list, 0), *bl = json_array_get(list, 1);
    if (json_array_size(list) != 2 || strcmp(type_of(split), "Split") || strcmp(type_of(bl), "ByteLevel"))
        return lmq_fail(err, LMQ_E_UNSUPPORTED,
                        "tokenizer.json: pre_tokenizer Sequence other than [Split, ByteLevel]");
    const char *regex = str_field(json_object_get(split, "pattern"), "Regex");
    const char *behavior = str_field(split, "behavior");
    if (!regex || !tok_split_pattern(regex, &t->pretok))
        return lmq_fail(err, LMQ_E_UNSUPPORTED,
                        "tokenizer.json: Split pattern %.120s (lmq implements Llama-3's and Qwen2's)",
                        regex ? regex : "(not a Regex)");
    if (!behavior || strcmp(behavior, "Isolated") || true_field(split, "invert"))
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "tokenizer.json: Split behavior other than Isolated");
    if (true_field(bl, "add_prefix_space") || true_field(bl, "use_regex"))
        return lmq_fail(err, LMQ_E_UNSUPPORTED,
                        "tokenizer.json: ByteLevel after Split with add_prefix_space or its own regex");
    return LMQ_OK;
}

/* The normalizer and pre-tokenizer lmq implements: none + GPT-2's ByteLevel; none +
 * [Split, ByteLevel] (Llama-3, Qwen2); Llama's Prepend/Replace normalizer + none, or none +
 * Metaspace (SentencePiece-style). Anything else is refused by name. */
static lmq_code hf_pre(json_t *root, bl_build *b, lmq_err *err)
{
    tok_tokenizer *t = b->t;
    json_t *norm = json_object_get(root, "normalizer"), *pre = json_object_get(root, "pre_tokenizer");
    if (!null_or_absent(norm) && !strcmp(type_of(norm), "NFC")) {
        t->nfc = 1; /* the identity on the text lmq accepts: see tok_encode */
    } else if (!null_or_absent(norm)) {
        if (!llama_normalizer(norm))
            return lmq_fail(err, LMQ_E_UNSUPPORTED,
                            "tokenizer.json: normalizer %s (lmq reads none, NFC, or Llama's Sequence[Prepend "
                            "\"\\u2581\", Replace \" \" -> \"\\u2581\"])", type_of(norm));
        if (!null_or_absent(pre))
            return lmq_fail(err, LMQ_E_UNSUPPORTED,
                            "tokenizer.json: pre_tokenizer %s after Llama's normalizer", type_of(pre));
        b->sp = 1;
        t->prepend = TOK_PREPEND_ALWAYS;
        return LMQ_OK;
    }
    const char *pt = type_of(pre);
    if (null_or_absent(pre))
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "tokenizer.json: neither a normalizer nor a pre_tokenizer");
    if (!strcmp(pt, "Metaspace")) {
        if (t->nfc)
            return lmq_fail(err, LMQ_E_UNSUPPORTED, "tokenizer.json: NFC normalizer before Metaspace");
        b->sp = 1;
        return hf_metaspace(pre, t, err);
    }
    if (!strcmp(pt, "Sequence"))
        return hf_split_bytelevel(pre, t, err);
    if (strcmp(pt, "ByteLevel"))
        return lmq_fail(err, LMQ_E_UNSUPPORTED,
                        "tokenizer.json: pre_tokenizer %s (lmq reads ByteLevel, Metaspace, "
                        "Sequence[Split, ByteLevel])", pt);
    if (true_field(pre, "add_prefix_space") || json_is_false(json_object_get(pre, "use_regex")))
        return lmq_fail(err, LMQ_E_UNSUPPORTED,
                        "tokenizer.json: ByteLevel with add_prefix_space or without its regex");
    t->pretok = TOK_PRE_GPT2;
    return LMQ_OK;
}

/* The BPE model's options: what changes the result is implemented or refused. */
static lmq_code hf_model(json_t *model, bl_build *b, lmq_err *err)
{
    const char *type = str_field(model, "type");
    if (type && strcmp(type, "BPE") != 0)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "tokenizer.json: model type %s (only BPE)", type);
    static const char *const off_fields[] = { "dropout", "continuing_subword_prefix",
                                              "end_of_word_suffix" };
    for (size_t i = 0; i < sizeof off_fields / sizeof off_fields[0]; i++) {
        json_t *v = json_object_get(model, off_fields[i]);
        if (v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0))
            return lmq_fail(err, LMQ_E_UNSUPPORTED, "tokenizer.json: model.%s is set",
                            off_fields[i]);
    }
    if (!b->sp && true_field(model, "byte_fallback"))
        return lmq_fail(err, LMQ_E_UNSUPPORTED,
                        "tokenizer.json: model.byte_fallback with a byte-level pre_tokenizer");
    if (b->sp && true_field(model, "ignore_merges"))
        return lmq_fail(err, LMQ_E_UNSUPPORTED,
                        "tokenizer.json: model.ignore_merges with a SentencePiece-style vocabulary");
    b->t->ignore_merges = true_field(model, "ignore_merges");
    b->t->fuse_unk = b->sp && true_field(model, "fuse_unk");
    return LMQ_OK;
}

/* post_processor: nothing, ByteLevel, or TemplateProcessing whose single-text template is an
 * optional special token (BOS) then the text, alone or in a Sequence with ByteLevel. */
static lmq_code hf_post(json_t *pp, tok_tokenizer *t, lmq_err *err)
{
    if (null_or_absent(pp) || !strcmp(type_of(pp), "ByteLevel"))
        return LMQ_OK;
    if (!strcmp(type_of(pp), "Sequence")) {
        json_t *list = json_object_get(pp, "processors");
        lmq_code c = json_is_array(list) ? LMQ_OK
                                         : lmq_fail(err, LMQ_E_FORMAT, "tokenizer.json: post_processor Sequence without processors");
        for (size_t i = 0; !c && i < json_array_size(list); i++)
            if (!strcmp(type_of(json_array_get(list, i)), "Sequence"))
                c = lmq_fail(err, LMQ_E_UNSUPPORTED, "tokenizer.json: nested post_processor Sequence");
            else
                c = hf_post(json_array_get(list, i), t, err);
        return c;
    }
    if (strcmp(type_of(pp), "TemplateProcessing"))
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "tokenizer.json: post_processor %s", type_of(pp));
    json_t *single = json_object_get(pp, "single");
    size_t n = json_array_size(single), i = 0;
    json_t *first = json_object_get(json_array_get(single, 0), "SpecialToken");
    if (first) {
        const char *name = str_field(first, "id");
        json_t *ids = json_object_get(json_object_get(json_object_get(pp, "special_tokens"), name ? name : ""), "ids");
        if (json_array_size(ids) != 1 || !json_is_integer(json_array_get(ids, 0)) ||
            json_integer_value(json_array_get(ids, 0)) < 0 || json_integer_value(json_array_get(ids, 0)) >= INT32_MAX)
            return lmq_fail(err, LMQ_E_FORMAT,
                            "tokenizer.json: post_processor special token %.60s has no single id in special_tokens",
                            name ? name : "?");
        t->bos_id = (int32_t)json_integer_value(json_array_get(ids, 0));
        i = 1;
    }
    if (n != i + 1 || !json_object_get(json_array_get(single, i), "Sequence"))
        return lmq_fail(err, LMQ_E_UNSUPPORTED,
                        "tokenizer.json: post_processor template other than [special token] then the text");
    return LMQ_OK;
}

/* The pieces lmq needs after the vocabulary: the unknown token, BOS in range, ignore_merges' map. */
static lmq_code hf_finish(json_t *model, bl_build *b, lmq_err *err)
{
    tok_tokenizer *t = b->t;
    if (t->bos_id >= t->n_vocab)
        return lmq_fail(err, LMQ_E_FORMAT, "tokenizer.json: post_processor BOS id %d outside the vocabulary",
                        (int)t->bos_id);
    if (!true_field(model, "byte_fallback"))
        t->byte_fallback = 0; /* "<0xHH>" pieces may be there without the model using them */
    const char *unk = str_field(model, "unk_token");
    if (b->sp && unk) {
        t->unk_id = tok_strmap_get2(&b->map, (const uint8_t *)unk, strlen(unk), NULL, 0);
        if (t->unk_id < 0)
            return lmq_fail(err, LMQ_E_FORMAT, "tokenizer.json: unk_token \"%.60s\" is not in the vocabulary", unk);
    }
    if (t->ignore_merges && tok_strmap_build(&t->pieces, t->bytes, t->off, t->n_vocab))
        return nomem(b, err);
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
        if (true_field(e, "single_word")) {
            free(a);
            return lmq_fail(err, LMQ_E_UNSUPPORTED, "tokenizer.json: added token \"%.60s\" uses single_word",
                            content);
        }
        a[i] = (bl_added){ content, (int32_t)json_integer_value(id), true_field(e, "lstrip"),
                           true_field(e, "rstrip") };
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
    if (!c && !(c = hf_pre(root, &b, err)) && !(c = hf_model(model, &b, err)))
        c = hf_post(json_object_get(root, "post_processor"), b.t, err);
    if (!c)
        c = hf_added(root, &add, &n_add, err);
    if (!c)
        c = bl_vocab(&b, json_object_get(model, "vocab"), add, n_add, err);
    if (!c)
        c = hf_merges(&b, json_object_get(model, "merges"), err);
    if (!c)
        c = hf_finish(model, &b, err);
    for (int i = 0; !c && i < n_add; i++)
        if (bl_special(b.t, add[i].content, add[i].id, add[i].lstrip, add[i].rstrip))
            c = nomem(&b, err);
    free(add);
    json_decref(root);
    return bl_end(&b, c, out);
}

/* ---- encoding ---- */

/* Pre-tokens, each as bytes through the byte alphabet, then merged by rank; with ignore_merges
 * a pre-token that is a vocabulary entry is taken whole. */
lmq_code tok_bytelevel_segment(const tok_tokenizer *t, const uint8_t *s, size_t n,
                               tok_bpe_work *w, tok_ids *out, lmq_err *err)
{
    for (size_t i = 0; i < n;) {
        size_t e = tok_pretoken_end(t->pretok, s, n, i);
        lmq_code c = tok_ids_reserve(out, e - i, err);
        if (c)
            return c;
        int32_t *sym = out->v + out->n;
        size_t m = e - i;
        int32_t whole = t->ignore_merges ? tok_strmap_get2(&t->pieces, s + i, m, NULL, 0) : -1;
        if (whole >= 0) {
            sym[0] = whole;
            m = 1;
        } else {
            for (size_t j = 0; j < m; j++)
                sym[j] = t->byte_token[s[i + j]];
            if ((c = tok_bpe_merge(w, t, tok_rank_pair, sym, &m, err)))
                return c;
        }
        out->n += m;
        i = e;
    }
    return LMQ_OK;
}
