/* Encoders of GGUF's block encodings: one block's weights into the bytes of its ggml block_<type>
 * struct (the layouts gguf_blocks.h decodes), what llama-quantize writes for a tensor of fp32
 * weights, with or without an importance matrix.
 *
 * Each type is a codec (one row per type, its grid, sub-blocks and layout) driven by three
 * primitives: fit a block's scales and codes, round one value onto a fitted block's grid, pack the
 * block's bytes; q_block_encode is the three at once, what q_quantize runs, and GPTQ
 * (calibrate/gptq.c) fits each block on weights its error feedback has updated, then rounds column
 * by column.
 *
 * Every fit takes the block's weights x (finite) and an optional importance per weight imp
 * (>= 0; NULL: uniform), which weights each weight's squared error in every fit: per-column mean
 * x^2 of the layer's calibration inputs makes the fitted error the layer's expected output error,
 * as llama-quantize --imatrix does. A sub-block (a block, for the 32-weight types) whose
 * importance sums to 0 is fitted with uniform weights. Each returns 0, or -1 when a scale the
 * block needs overflows fp16 (its bytes are then unspecified); schemes/gguf_quant.c says how
 * each type chooses its scales and codes. */
#ifndef LMQ_GGUF_QUANT_H
#define LMQ_GGUF_QUANT_H

#include <stdint.h>

/* A block as its encoder fits it, before it is packed into bytes: what a driver that chooses the
 * codes itself (calibrate/gptq.c) holds between fitting the scales and storing the block. */
typedef struct {
    float d, dmin;    /* fp16 values: the (super-)block's scale, and its min (Q2_K, Q4_K, Q5_K) or
                         offset (Q4_1, Q5_1); 0 where the type has none */
    int s[16], m[16]; /* K-types and IQ4_XS: each sub-block's integer scale (and min) */
    uint8_t q[256];   /* the codes, one per weight: indices into the type's levels */
} q_block_state;

/* One block type: its grid of levels, its sub-blocks and how it stores them (gguf_quant.c). */
typedef struct q_block_codec q_block_codec;

extern const q_block_codec q_gguf_q8_0_codec, q_gguf_q4_0_codec, q_gguf_q4_1_codec, q_gguf_q5_0_codec,
    q_gguf_q5_1_codec, q_gguf_q2_k_codec, q_gguf_q3_k_codec, q_gguf_q4_k_codec, q_gguf_q5_k_codec,
    q_gguf_q6_k_codec, q_gguf_iq4_nl_codec, q_gguf_iq4_xs_codec;

/* Fits the scales (and mins) of one block of finite weights x, each weight's squared error
 * weighted by imp (NULL: uniform), and the codes under them; 0, or -1 when a scale overflows fp16. */
int q_block_fit(const q_block_codec *c, const float *x, const float *imp, q_block_state *k);

/* The code for value x at position i of a block whose scales k holds (k->q is not read): the
 * nearest level of i's sub-block; *y is what that code decodes to, exactly as the decoder
 * (gguf_blocks.h) computes it. */
uint8_t q_block_round(const q_block_codec *c, const q_block_state *k, int i, float x, float *y);

/* Writes k as the block's bytes (ggml's block_<type> layout). */
void q_block_pack(const q_block_codec *c, const q_block_state *k, uint8_t *b);

/* q_block_fit then q_block_pack: the bytes llama-quantize's rules (or lmq's search) give. */
int q_block_encode(const q_block_codec *c, const float *x, const float *imp, uint8_t *b);

#endif
