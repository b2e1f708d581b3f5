/* UTF-8 decoding and the Unicode character classes GPT-2's pre-tokeniser works with. */
#ifndef LMQ_UNICODE_H
#define LMQ_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* Values are fixed: tools/gen_unicode.py writes them into tokenizer/unicode_tables.c. */
typedef enum {
    TOK_UNI_OTHER = 0,  /* neither of the below, unassigned code points included */
    TOK_UNI_LETTER = 1, /* general category L* (\p{L}) */
    TOK_UNI_NUMBER = 2, /* general category N* (\p{N}) */
    TOK_UNI_SPACE = 3,  /* White_Space (\s of the Python regex module) */
} tok_uni_class;

typedef struct {
    uint32_t lo, hi; /* inclusive */
    tok_uni_class cls;
} tok_uni_range;

/* Generated tables: classes of U+0000..U+00FF, and sorted disjoint ranges of every code point
 * whose class is not TOK_UNI_OTHER. */
extern const unsigned char tok_uni_latin1[256];
extern const tok_uni_range tok_uni_ranges[];
extern const size_t tok_uni_n_ranges;

tok_uni_class tok_uni_classify(uint32_t cp);

/* Sorted disjoint ranges of the code points NFC normalisation may change a string at (generated:
 * see tools/gen_unicode.py). Text with none of them is already in NFC. */
typedef struct {
    uint32_t lo, hi; /* inclusive */
} tok_uni_span;
extern const tok_uni_span tok_uni_nfc_unstable[];
extern const size_t tok_uni_n_nfc_unstable;

/* 1 when cp is in none of tok_uni_nfc_unstable's ranges. */
int tok_uni_nfc_stable(uint32_t cp);

/* Decodes one code point from s[0..n) as strict UTF-8 (no overlong forms, no surrogates, at
 * most U+10FFFF). Returns its length in bytes (1-4), or 0 when the bytes there are invalid. */
int tok_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);

/* The length of the longest valid UTF-8 prefix of s: n when all of it is valid, otherwise the
 * byte offset of the first invalid sequence. */
size_t tok_utf8_valid_prefix(const uint8_t *s, size_t n);

#endif
