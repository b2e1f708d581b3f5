/* Byte-level pre-tokenisers: GPT-2's pattern and the Llama-3 / Qwen2 Split patterns, each a
 * purpose-built matcher over the Unicode classes (no regex engine). Each returns where the
 * pre-token starting at s[i] ends, with the regex's semantics: alternatives tried left to right,
 * the first that matches wins; quantifiers greedy. */
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode.h"

static tok_uni_class class_at(const uint8_t *s, size_t n, size_t i, size_t *len)
{
    uint32_t cp;
    *len = (size_t)tok_utf8_decode(s + i, n - i, &cp);
    return tok_uni_classify(cp);
}

/* The end of the run of class `cls` that starts at s[i], at most `max` characters. */
static size_t run_end(const uint8_t *s, size_t n, size_t i, tok_uni_class cls, size_t max)
{
    size_t k;
    for (size_t count = 0; count < max && i < n && class_at(s, n, i, &k) == cls; count++)
        i += k;
    return i;
}

/* \s+(?!\S)|\s+ at a whitespace character s[i]: a run of two or more followed by a non-space
 * gives its last character to the next pre-token; a lone one, or a run at the end, is taken. */
static size_t space_end(const uint8_t *s, size_t n, size_t i)
{
    size_t k, last = i, j = i;
    class_at(s, n, i, &k);
    j += k;
    while (j < n && class_at(s, n, j, &k) == TOK_UNI_SPACE) {
        last = j;
        j += k;
    }
    return j < n && last > i ? last : j;
}

/* GPT-2:
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t gpt2_end(const uint8_t *s, size_t n, size_t i)
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
            return run_end(s, n, i + 1 + k2, next, SIZE_MAX);
    }
    return cls != TOK_UNI_SPACE ? run_end(s, n, i + k, cls, SIZE_MAX) : space_end(s, n, i);
}

/* One character of a case-insensitive contraction: ASCII either case; 's' also matches U+017F
 * LATIN SMALL LETTER LONG S, which Unicode case folding makes an 's'. Returns its length, 0 when
 * it does not match. */
static size_t fold_char(const uint8_t *s, size_t n, size_t i, char want)
{
    if (i >= n)
        return 0;
    if ((s[i] | 0x20) == want)
        return 1;
    return want == 's' && i + 1 < n && s[i] == 0xC5 && s[i + 1] == 0xBF ? 2 : 0;
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d): the end of the contraction at s[i], or 0. */
static size_t contraction_end(const uint8_t *s, size_t n, size_t i)
{
    static const char *const forms[] = { "s", "t", "re", "ve", "m", "ll", "d" };
    if (s[i] != '\'')
        return 0;
    for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
        size_t j = i + 1, k = 0;
        for (const char *c = forms[f]; *c && (k = fold_char(s, n, j, *c)); c++)
            j += k;
        if (k)
            return j;
    }
    return 0;
}

static int is_crlf(uint8_t c) { return c == '\r' || c == '\n'; }

/* Llama-3 (max_digits 3) and Qwen2 (max_digits 1):
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}
 *   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t split_end(const uint8_t *s, size_t n, size_t i, size_t max_digits)
{
    size_t e = contraction_end(s, n, i), k, k2;
    if (e)
        return e;
    tok_uni_class cls = class_at(s, n, i, &k);
    tok_uni_class next = i + k < n ? class_at(s, n, i + k, &k2) : TOK_UNI_OTHER;
    /* [^\r\n\p{L}\p{N}]?\p{L}+ : one prefix character of any other kind, spaces included */
    if (cls != TOK_UNI_LETTER && cls != TOK_UNI_NUMBER && !is_crlf(s[i]) && next == TOK_UNI_LETTER)
        return run_end(s, n, i + k, TOK_UNI_LETTER, SIZE_MAX);
    if (cls == TOK_UNI_LETTER)
        return run_end(s, n, i, TOK_UNI_LETTER, SIZE_MAX);
    if (cls == TOK_UNI_NUMBER)
        return run_end(s, n, i, TOK_UNI_NUMBER, max_digits);
    /* " ?[^\s\p{L}\p{N}]+[\r\n]*" */
    size_t start = s[i] == ' ' && next == TOK_UNI_OTHER ? i + 1 : i;
    if (start > i || cls == TOK_UNI_OTHER) {
        e = run_end(s, n, start, TOK_UNI_OTHER, SIZE_MAX);
        while (e < n && is_crlf(s[e]))
            e++;
        return e;
    }
    /* \s*[\r\n]+ : up to and including the run's last \r or \n */
    size_t j = i, nl_end = 0;
    while (j < n && class_at(s, n, j, &k) == TOK_UNI_SPACE) {
        j += k;
        if (is_crlf(s[j - 1]))
            nl_end = j;
    }
    return nl_end ? nl_end : space_end(s, n, i);
}

size_t tok_pretoken_end(tok_pretok kind, const uint8_t *s, size_t n, size_t i)
{
    switch (kind) {
    case TOK_PRE_LLAMA3:
        return split_end(s, n, i, 3);
    case TOK_PRE_QWEN2:
        return split_end(s, n, i, 1);
    default:
        return gpt2_end(s, n, i);
    }
}

/* The Split patterns as Hugging Face's tokenizer.json files spell them. */
static const struct {
    const char *regex;
    tok_pretok kind;
} SPLIT_PATTERNS[] = {
    { "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", TOK_PRE_LLAMA3 },
    { "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", TOK_PRE_QWEN2 },
};

/* GGUF's tokenizer.ggml.pre for each pre-tokenizer, indexed by tok_pretok. */
static const char *const GGML_PRE[] = { [TOK_PRE_GPT2] = "gpt-2", [TOK_PRE_LLAMA3] = "llama-bpe", [TOK_PRE_QWEN2] = "qwen2" };

const char *tok_ggml_pre(const tok_tokenizer *t)
{
    return t->sp ? NULL : GGML_PRE[t->pretok];
}

int tok_split_pattern(const char *regex, tok_pretok *kind)
{
    for (size_t i = 0; i < sizeof SPLIT_PATTERNS / sizeof SPLIT_PATTERNS[0]; i++)
        if (!strcmp(regex, SPLIT_PATTERNS[i].regex)) {
            *kind = SPLIT_PATTERNS[i].kind;
            return 1;
        }
    return 0;
}
