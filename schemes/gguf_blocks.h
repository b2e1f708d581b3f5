/* Decoders of GGUF's block encodings (ggml's type traits' to_float), written from the byte
 * layouts ggml publishes (ggml-common.h: the block_<type> structs; ggml-quants.c: dequantize_row_*).
 * Each turns the bytes of one block into its weights in order, computing in fp32 in the order
 * ggml does, so the values are the ones llama.cpp's reference dequantiser gives:
 *   Q8_0  (34 B / 32)  d:f16, qs:int8[32]                    y = qs·d
 *   Q4_0  (18 B / 32)  d:f16, qs:u8[16]                      y[j] = (lo(qs[j]) − 8)·d, y[j+16] = (hi − 8)·d
 *   Q4_1  (20 B / 32)  d, m:f16, qs:u8[16]                   y = q·d + m
 *   Q5_0  (22 B / 32)  d:f16, qh:u32, qs:u8[16]              q = nibble | bit j (j+16) of qh << 4; y = (q − 16)·d
 *   Q5_1  (24 B / 32)  d, m:f16, qh:u32, qs:u8[16]           y = q·d + m
 *   Q4_K  (144 B / 256) d, dmin:f16, scales:u8[12], qs:u8[128]: 8 sub-blocks of 32 with 6-bit
 *                      scale and min; y = (d·sc)·q − (dmin·m)
 *   Q5_K  (176 B / 256) d, dmin, scales[12], qh:u8[32], qs[128]: Q4_K plus a fifth bit
 *   Q6_K  (210 B / 256) ql:u8[128], qh:u8[64], scales:int8[16], d:f16; y = (d·sc)·(q − 32)
 *   Q2_K  (84 B / 256)  scales:u8[16], qs:u8[64], d, dmin:f16: 16 sub-blocks of 16, each byte of
 *                      scales a 4-bit scale (low) and min (high); y = (d·sc)·q − (dmin·m), q 2 bits
 *   Q3_K  (110 B / 256) hmask:u8[32], qs:u8[64], scales:u8[12], d:f16: 16 sub-blocks of 16 with a
 *                      6-bit scale sc − 32; y = (d·(sc − 32))·(q − 4), q = 2 bits | high bit << 2
 *   IQ4_NL (18 B / 32)  d:f16, qs:u8[16]: nibbles as Q4_0's, each indexing q_iq4nl_values; y = d·v
 *   IQ4_XS (136 B / 256) d:f16, scales_h:u16, scales_l:u8[4], qs:u8[128]: 8 sub-blocks of 32 as
 *                      IQ4_NL's with a 6-bit scale ls − 32; y = (d·(ls − 32))·v
 * (Q8_0 and Q4_0 are stored by lmq as its own int8 / int4 symmetric g32 rows when every block's
 * d is >= 0, the same grid; llama.cpp's Q4_0 quantiser sets d = max / -8, negative wherever a
 * block's largest magnitude is positive, and such tensors keep their blocks as rows q4_0 / q8_0.) */
#ifndef LMQ_GGUF_BLOCKS_H
#define LMQ_GGUF_BLOCKS_H

#include <stdint.h>

typedef void (*q_block_fn)(const uint8_t *block, float *out);

/* IQ4_NL's and IQ4_XS's 16 levels (ggml-common.h's kvalues_iq4nl), ascending. */
extern const int8_t q_iq4nl_values[16];

void q_gguf_q8_0(const uint8_t *b, float *y);
void q_gguf_q4_0(const uint8_t *b, float *y);
void q_gguf_q4_1(const uint8_t *b, float *y);
void q_gguf_q5_0(const uint8_t *b, float *y);
void q_gguf_q5_1(const uint8_t *b, float *y);
void q_gguf_q4_k(const uint8_t *b, float *y);
void q_gguf_q5_k(const uint8_t *b, float *y);
void q_gguf_q6_k(const uint8_t *b, float *y);
void q_gguf_q2_k(const uint8_t *b, float *y);
void q_gguf_q3_k(const uint8_t *b, float *y);
void q_gguf_iq4_nl(const uint8_t *b, float *y);
void q_gguf_iq4_xs(const uint8_t *b, float *y);

#endif
