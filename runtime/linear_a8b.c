/* The a8 block product's readings of each weight kind it takes (runtime/linear_impl.h's
 * a8b_reading): a block's codes as qw + 128 and its sub-blocks' scales and mins, from lmq's
 * int8 / int4 rows (32 codes of a group) and GGUF's blocks (ggml-common.h's layouts, as
 * schemes/gguf_blocks.c decodes them). The scales are exact products of an fp16 and a small
 * integer, so a sub-block's weights are scale·qw + min as llama.cpp's vec_dot pairs take them.
 * Portable C: the same bytes on every kernel set. */
#include "runtime/linear_impl.h"

#include "common/fp.h"

static float group_scale(const rt_weight *W, int j, int b)
{
    return lmq_f16_to_f32(lmq_le16(a8b_group_scale(W, j, b)));
}

/* lmq's symmetric int8 per group: code − 128 is the weight code, so the stored byte is u. */
static void read_int8(const rt_weight *W, int j, int b, uint8_t *u, float *d, float *m)
{
    (void)m;
    memcpy(u, W->data + W->L.code_offset + (size_t)j * (size_t)W->in + (size_t)b * A8B_BLOCK, A8B_BLOCK);
    d[0] = group_scale(W, j, b);
}

/* lmq's symmetric int4 per group: code k in byte k / 2, the low nibble for even k; weight code
 * nibble − 8, so u = nibble + 120. */
static void read_int4(const rt_weight *W, int j, int b, uint8_t *u, float *d, float *m)
{
    (void)m;
    const uint8_t *p = W->data + W->L.code_offset + ((size_t)j * (size_t)W->in + (size_t)b * A8B_BLOCK) / 2;
    for (int k = 0; k < A8B_BLOCK / 2; k++) {
        u[2 * k] = (uint8_t)((p[k] & 0xF) + 120);
        u[2 * k + 1] = (uint8_t)((p[k] >> 4) + 120);
    }
    d[0] = group_scale(W, j, b);
}

/* Row j's GGUF block b. */
static const uint8_t *block_of(const rt_weight *W, int j, int b)
{
    const lmq_encoding *e = lmq_encoding_of(W->q.dtype);
    return W->data + ((size_t)j * (size_t)(W->in / (int)e->block) + (size_t)b) * e->block_bytes;
}

static float f16_at(const uint8_t *p)
{
    return lmq_f16_to_f32(lmq_le16(p));
}

/* 16 bytes of nibbles at p: codes k < 16 the low nibbles, k + 16 the high ones (Q4_0's order),
 * each as add + v[nibble] (v NULL: the nibble itself). */
static void nibbles(const uint8_t *p, const int8_t *v, int add, uint8_t *restrict u)
{
    for (int k = 0; k < 16; k++) {
        const int lo = p[k] & 0xF, hi = p[k] >> 4;
        u[k] = (uint8_t)(add + (v ? v[lo] : lo));
        u[k + 16] = (uint8_t)(add + (v ? v[hi] : hi));
    }
}

/* Q5_0 / Q5_1's fifth bits: bit k of the little-endian word qh over code k. */
static void fifth_bits(const uint8_t *qh, uint8_t *restrict u)
{
    const uint32_t h = lmq_le32(qh);
    for (int k = 0; k < 32; k++)
        u[k] = (uint8_t)(u[k] + (h >> k & 1) * 16);
}

/* GGUF's Q8_0: fp16 d, then 32 signed bytes. */
static void read_q8_0(const rt_weight *W, int j, int b, uint8_t *u, float *d, float *m)
{
    (void)m;
    const uint8_t *p = block_of(W, j, b);
    for (int k = 0; k < 32; k++)
        u[k] = (uint8_t)(p[2 + k] ^ 0x80);
    d[0] = f16_at(p);
}

/* Q4_0: fp16 d, 16 bytes of nibbles; weight code nibble − 8. */
static void read_q4_0(const rt_weight *W, int j, int b, uint8_t *u, float *d, float *m)
{
    (void)m;
    const uint8_t *p = block_of(W, j, b);
    nibbles(p + 2, NULL, 120, u);
    d[0] = f16_at(p);
}

/* Q4_1: fp16 d and m, 16 bytes of nibbles; w = d·q + m. */
static void read_q4_1(const rt_weight *W, int j, int b, uint8_t *u, float *d, float *m)
{
    const uint8_t *p = block_of(W, j, b);
    nibbles(p + 4, NULL, 128, u);
    d[0] = f16_at(p), m[0] = f16_at(p + 2);
}

/* Q5_0: fp16 d, qh, nibbles; w = d·(q − 16). */
static void read_q5_0(const rt_weight *W, int j, int b, uint8_t *u, float *d, float *m)
{
    (void)m;
    const uint8_t *p = block_of(W, j, b);
    nibbles(p + 6, NULL, 112, u);
    fifth_bits(p + 2, u);
    d[0] = f16_at(p);
}

/* Q5_1: fp16 d and m, qh, nibbles; w = d·q + m. */
static void read_q5_1(const rt_weight *W, int j, int b, uint8_t *u, float *d, float *m)
{
    const uint8_t *p = block_of(W, j, b);
    nibbles(p + 8, NULL, 128, u);
    fifth_bits(p + 4, u);
    d[0] = f16_at(p), m[0] = f16_at(p + 2);
}

/* IQ4_NL: fp16 d, nibbles indexing the code book; w = d·v. */
static void read_iq4_nl(const rt_weight *W, int j, int b, uint8_t *u, float *d, float *m)
{
    (void)m;
    const uint8_t *p = block_of(W, j, b);
    nibbles(p + 2, q_iq4nl_values, 128, u);
    d[0] = f16_at(p);
}

/* Q4_K and Q5_K: 8 sub-blocks of 32, sub-block t bytes 32(t / 2).. of qs, the low nibbles for
 * even t (Q5_K: bit t of qh[k] the fifth); w = (d·sc)·q − (dmin·m), 6-bit sc and m. */
static void k4_block(const uint8_t *p, const uint8_t *qh, const uint8_t *qs, uint8_t *restrict u, float *d, float *m)
{
    for (int c = 0; c < 4; c++)
        for (int k = 0; k < 32; k++) {
            u[64 * c + k] = (uint8_t)(128 + (qs[32 * c + k] & 0xF));
            u[64 * c + 32 + k] = (uint8_t)(128 + (qs[32 * c + k] >> 4));
        }
    for (int t = 0; qh && t < 8; t++)
        for (int k = 0; k < 32; k++)
            u[32 * t + k] = (uint8_t)(u[32 * t + k] + (qh[k] >> t & 1) * 16);
    const float dd = f16_at(p), dmin = f16_at(p + 2);
    for (int t = 0; t < 8; t++) {
        int sc, mn;
        blk_k4_scale(p + 4, t, &sc, &mn);
        d[t] = dd * (float)sc;
        m[t] = -(dmin * (float)mn);
    }
}

static void read_q4_k(const rt_weight *W, int j, int b, uint8_t *u, float *d, float *m)
{
    const uint8_t *p = block_of(W, j, b);
    k4_block(p, NULL, p + 16, u, d, m);
}

static void read_q5_k(const rt_weight *W, int j, int b, uint8_t *u, float *d, float *m)
{
    const uint8_t *p = block_of(W, j, b);
    k4_block(p, p + 16, p + 48, u, d, m);
}

/* Q2_K and Q3_K: 16 sub-blocks of 16 in two halves n of 128, each 32 bytes of qs whose bits
 * 2c, 2c + 1 are sub-blocks 8n + 2c (bytes 0-15) and 8n + 2c + 1 (bytes 16-31), in code order. */
static void two_bits(const uint8_t *qs, uint8_t *restrict u)
{
    for (int n = 0; n < 2; n++)
        for (int c = 0; c < 4; c++)
            for (int k = 0; k < 32; k++)
                u[128 * n + 32 * c + k] = (uint8_t)(128 + (qs[32 * n + k] >> (2 * c) & 3));
}

/* Q2_K: scales[t] a 4-bit scale (low) and min (high); w = (d·sc)·q − (dmin·m). */
static void read_q2_k(const rt_weight *W, int j, int b, uint8_t *u, float *d, float *m)
{
    const uint8_t *p = block_of(W, j, b);
    two_bits(p + 16, u);
    const float dd = f16_at(p + 80), dmin = f16_at(p + 82);
    for (int t = 0; t < 16; t++) {
        d[t] = dd * (float)(p[t] & 0xF);
        m[t] = -(dmin * (float)(p[t] >> 4));
    }
}

/* Q3_K: code q − 4 unless bit 4n + c of hmask[k] is set (k the code's byte of its half's 32);
 * w = (d·(sc − 32))·code, 6-bit sc. */
static void read_q3_k(const rt_weight *W, int j, int b, uint8_t *restrict u, float *d, float *m)
{
    (void)m;
    const uint8_t *p = block_of(W, j, b);
    two_bits(p + 32, u);
    for (int n = 0; n < 2; n++)
        for (int c = 0; c < 4; c++)
            for (int k = 0; k < 32; k++)
                u[128 * n + 32 * c + k] = (uint8_t)(u[128 * n + 32 * c + k] - (p[k] >> (4 * n + c) & 1 ? 0 : 4));
    const float dd = f16_at(p + 108);
    for (int t = 0; t < 16; t++)
        d[t] = dd * (float)(blk_q3_scale(p + 96, t) - 32);
}

/* Q6_K: in half n of 128, quarter c of 32 codes: the nibble (high from the third quarter) of
 * ql[64n + 32(c % 2) + k] under bits 2c of qh[32n + k]; sub-blocks of 16 with int8 scales[t];
 * w = (d·sc)·(q − 32). */
static void read_q6_k(const rt_weight *W, int j, int b, uint8_t *restrict u, float *d, float *m)
{
    (void)m;
    const uint8_t *p = block_of(W, j, b);
    for (int n = 0; n < 2; n++)
        for (int c = 0; c < 4; c++)
            for (int k = 0; k < 32; k++) {
                const int lo = p[64 * n + 32 * (c % 2) + k] >> (4 * (c / 2)) & 0xF;
                const int hi = p[128 + 32 * n + k] >> (2 * c) & 3;
                u[128 * n + 32 * c + k] = (uint8_t)(128 - 32 + (lo | hi << 4));
            }
    const float dd = f16_at(p + 208);
    for (int t = 0; t < 16; t++)
        d[t] = dd * (float)(int8_t)p[192 + t];
}

/* IQ4_XS: 8 sub-blocks of 32 as IQ4_NL's at qs + 16t; w = (d·(ls − 32))·v, 6-bit ls. */
static void read_iq4_xs(const rt_weight *W, int j, int b, uint8_t *u, float *d, float *m)
{
    (void)m;
    const uint8_t *p = block_of(W, j, b);
    const float dd = f16_at(p);
    for (int t = 0; t < 8; t++) {
        nibbles(p + 8 + 16 * t, q_iq4nl_values, 128, u + 32 * t);
        d[t] = dd * (float)(blk_xs_scale(p, t) - 32);
    }
}

const a8b_reading rt_a8b_readings[LMQ_T_COUNT] = {
    [LMQ_T_INT8] = { 32, 32, 0, read_int8 },    [LMQ_T_INT4] = { 32, 32, 0, read_int4 },
    [LMQ_T_Q8_0] = { 32, 32, 0, read_q8_0 },    [LMQ_T_Q4_0] = { 32, 32, 0, read_q4_0 },
    [LMQ_T_Q4_1] = { 32, 32, 1, read_q4_1 },    [LMQ_T_Q5_0] = { 32, 32, 0, read_q5_0 },
    [LMQ_T_Q5_1] = { 32, 32, 1, read_q5_1 },    [LMQ_T_IQ4_NL] = { 32, 32, 0, read_iq4_nl },
    [LMQ_T_Q2_K] = { 256, 16, 1, read_q2_k },   [LMQ_T_Q3_K] = { 256, 16, 0, read_q3_k },
    [LMQ_T_Q4_K] = { 256, 32, 1, read_q4_k },   [LMQ_T_Q5_K] = { 256, 32, 1, read_q5_k },
    [LMQ_T_Q6_K] = { 256, 16, 0, read_q6_k },   [LMQ_T_IQ4_XS] = { 256, 32, 0, read_iq4_xs },
};
