/* Dense bit packing: code i of a stream occupies bits [pos + i·bits, pos + (i+1)·bits), where
 * bit k of the stream is bit k % 8 of byte k / 8 (least significant bit first). Every encoding
 * in the scheme table stores its codes this way, from 2-bit integers to 32-bit floats. */
#ifndef LMQ_PACK_H
#define LMQ_PACK_H

#include <stddef.h>
#include <stdint.h>

/* Writes the low `bits` (1..32) of each of n codes starting at bit `pos` of dst. Bits below pos
 * in its first byte are kept; bits after the last code in its final byte are cleared, so a stream
 * is written front to back in as many calls as convenient. */
void q_pack(uint8_t *dst, uint64_t pos, const uint32_t *codes, size_t n, unsigned bits);

/* Reads n codes of `bits` (1..32) starting at bit `pos` of src; touches only the bytes that hold
 * them. */
void q_unpack(const uint8_t *src, uint64_t pos, uint32_t *codes, size_t n, unsigned bits);

#endif
