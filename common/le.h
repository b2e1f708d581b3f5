/* Little-endian integers and floats in file bytes, read and written byte by byte: a field may
 * sit at any offset (no alignment), and the host's byte order does not matter. */
#ifndef LMQ_LE_H
#define LMQ_LE_H

#include <stdint.h>
#include <stdio.h>

#include "common/fp.h"

/* The n-byte (1 to 8) unsigned integer at p. */
static inline uint64_t lmq_le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* v's low n bytes (1 to 8) at p. */
static inline void lmq_put_le(uint8_t *p, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t lmq_le16(const uint8_t *p)
{
    return (uint16_t)lmq_le(p, 2);
}

static inline uint32_t lmq_le32(const uint8_t *p)
{
    return (uint32_t)lmq_le(p, 4);
}

static inline uint64_t lmq_le64(const uint8_t *p)
{
    return lmq_le(p, 8);
}

/* A two's-complement int32 (the bits as they are, whatever the value). */
static inline int32_t lmq_le_i32(const uint8_t *p)
{
    union { uint32_t u; int32_t s; } v = { .u = lmq_le32(p) };
    return v.s;
}

/* An IEEE single. */
static inline float lmq_le_f32(const uint8_t *p)
{
    return lmq_bits_f32(lmq_le32(p));
}

static inline void lmq_put_le32(uint8_t *p, uint32_t v)
{
    lmq_put_le(p, v, 4);
}

/* Four bytes of v to f (errors stay in f: ferror). */
static inline void lmq_write_le32(FILE *f, uint32_t v)
{
    uint8_t b[4];
    lmq_put_le32(b, v);
    fwrite(b, 1, 4, f);
}

#endif
