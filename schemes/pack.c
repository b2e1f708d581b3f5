#include "schemes/pack.h"

#include <string.h>

#include "common/vec.h"

/* A 64-bit accumulator holds at most 7 pending bits plus one 32-bit code, so it never overflows. */

/* Whole bytes from a byte boundary (8- and 16-bit codes, pairs of 4-bit ones): the bytes the
 * general loop writes, eight codes at a time (packing was a tenth of quantize's time). */
VEC_CLONES
static void pack_bytes(uint8_t *p, const uint32_t *codes, size_t n, unsigned bits)
{
    size_t i = 0;
    for (; i + VEC_LANES <= n; i += VEC_LANES) {
        v8u c;
        memcpy(&c, codes + i, sizeof c);
        if (bits == 8) {
            const v8b b = __builtin_convertvector(c & 0xFF, v8b);
            memcpy(p + i, &b, sizeof b);
        } else if (bits == 16) {
            const v8h h = __builtin_convertvector(c & 0xFFFF, v8h);
            memcpy(p + 2 * i, &h, sizeof h);
        } else {
            for (int l = 0; l < VEC_LANES; l += 2)
                p[(i + (size_t)l) / 2] = (uint8_t)((c[l] & 15) | (c[l + 1] & 15) << 4);
        }
    }
    for (; i < n; i++) {
        const uint32_t c = codes[i];
        if (bits == 4)
            p[i / 2] = i % 2 ? (uint8_t)((p[i / 2] & 15) | (c & 15) << 4) : (uint8_t)(c & 15);
        else
            for (unsigned b = 0; b < bits / 8; b++)
                p[i * (bits / 8) + b] = (uint8_t)(c >> 8 * b);
    }
}

void q_pack(uint8_t *dst, uint64_t pos, const uint32_t *codes, size_t n, unsigned bits)
{
    if (n == 0)
        return;
    if (pos % 8 == 0 && (bits == 4 || bits == 8 || bits == 16)) {
        pack_bytes(dst + pos / 8, codes, n, bits);
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

/* pack_bytes' inverse. */
VEC_CLONES
static void unpack_bytes(const uint8_t *p, uint32_t *codes, size_t n, unsigned bits)
{
    size_t i = 0;
    for (; i + VEC_LANES <= n; i += VEC_LANES) {
        v8u c;
        if (bits == 8) {
            v8b b;
            memcpy(&b, p + i, sizeof b);
            c = __builtin_convertvector(b, v8u);
        } else if (bits == 16) {
            v8h h;
            memcpy(&h, p + 2 * i, sizeof h);
            c = __builtin_convertvector(h, v8u);
        } else {
            for (int l = 0; l < VEC_LANES; l += 2) {
                c[l] = p[(i + (size_t)l) / 2] & 15u;
                c[l + 1] = (uint32_t)p[(i + (size_t)l) / 2] >> 4;
            }
        }
        memcpy(codes + i, &c, sizeof c);
    }
    for (; i < n; i++)
        codes[i] = bits == 4    ? (uint32_t)(i % 2 ? p[i / 2] >> 4 : p[i / 2] & 15)
                   : bits == 8 ? p[i]
                               : p[2 * i] | (uint32_t)p[2 * i + 1] << 8;
}

void q_unpack(const uint8_t *src, uint64_t pos, uint32_t *codes, size_t n, unsigned bits)
{
    if (n == 0)
        return;
    if (pos % 8 == 0 && (bits == 4 || bits == 8 || bits == 16)) {
        unpack_bytes(src + pos / 8, codes, n, bits);
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
