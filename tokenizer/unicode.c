#include "tokenizer/unicode.h"

tok_uni_class tok_uni_classify(uint32_t cp)
{
    if (cp < 256)
        return (tok_uni_class)tok_uni_latin1[cp];
    size_t lo = 0, hi = tok_uni_n_ranges;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < tok_uni_ranges[mid].lo)
            hi = mid;
        else if (cp > tok_uni_ranges[mid].hi)
            lo = mid + 1;
        else
            return tok_uni_ranges[mid].cls;
    }
    return TOK_UNI_OTHER;
}

int tok_uni_nfc_stable(uint32_t cp)
{
    size_t lo = 0, hi = tok_uni_n_nfc_unstable;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < tok_uni_nfc_unstable[mid].lo)
            hi = mid;
        else if (cp > tok_uni_nfc_unstable[mid].hi)
            lo = mid + 1;
        else
            return 0;
    }
    return 1;
}

int tok_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp)
{
    if (n == 0)
        return 0;
    uint8_t b = s[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    int len;
    uint32_t c, min;
    if ((b & 0xE0) == 0xC0) {
        len = 2, c = b & 0x1F, min = 0x80;
    } else if ((b & 0xF0) == 0xE0) {
        len = 3, c = b & 0x0F, min = 0x800;
    } else if ((b & 0xF8) == 0xF0) {
        len = 4, c = b & 0x07, min = 0x10000;
    } else {
        return 0; /* a continuation byte or 0xF8..0xFF cannot start a sequence */
    }
    if ((size_t)len > n)
        return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c < 0xE000))
        return 0;
    *cp = c;
    return len;
}

size_t tok_utf8_valid_prefix(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int len = tok_utf8_decode(s + i, n - i, &cp);
        if (len == 0)
            return i;
        i += (size_t)len;
    }
    return n;
}
