#include "schemes/pack.h"

/* A 64-bit accumulator holds at most 7 pending bits plus one 32-bit code, so it never overflows. */

void q_pack(uint8_t *dst, uint64_t pos, const uint32_t *codes, size_t n, unsigned bits)
{
    if (n == 0)
        return;
    if (pos % 8 == 0 && (bits == 8 || bits == 16)) { /* whole bytes: the same bytes, a simpler loop */
        uint8_t *p = dst + pos / 8;
        for (size_t i = 0; i < n; i++)
            for (unsigned b = 0; b < bits / 8; b++)
                *p++ = (uint8_t)(codes[i] >> 8 * b);
        return;
    }
    uint8_t *p = dst + pos / 8;
    unsigned fill = (unsigned)(pos % 8);
    uint64_t mask = (1ull << bits) - 1;
    uint64_t acc = fill ? (uint64_t)(*p & ((1u << fill) - 1)) : 0;
    for (size_t i = 0; i < n; i++) {
        acc |= ((uint64_t)codes[i] & mask) << fill;
        fill += bits;
        for (; fill >= 8; fill -= 8) {
            *p++ = (uint8_t)acc;
            acc >>= 8;
        }
    }
    if (fill)
        *p = (uint8_t)acc;
}

void q_unpack(const uint8_t *src, uint64_t pos, uint32_t *codes, size_t n, unsigned bits)
{
    if (n == 0)
        return;
    if (pos % 8 == 0 && bits == 8) { /* whole bytes */
        for (size_t i = 0; i < n; i++)
            codes[i] = src[pos / 8 + i];
        return;
    }
    if (pos % 8 == 0 && bits == 16) {
        for (size_t i = 0; i < n; i++)
            codes[i] = src[pos / 8 + 2 * i] | (uint32_t)src[pos / 8 + 2 * i + 1] << 8;
        return;
    }
    const uint8_t *p = src + pos / 8;
    unsigned skip = (unsigned)(pos % 8), have = 8 - skip;
    uint64_t mask = (1ull << bits) - 1;
    uint64_t acc = (uint64_t)(*p++ >> skip);
    for (size_t i = 0; i < n; i++) {
        for (; have < bits; have += 8)
            acc |= (uint64_t)*p++ << have;
        codes[i] = (uint32_t)(acc & mask);
        acc >>= bits;
        have -= bits;
    }
}
