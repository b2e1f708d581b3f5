/* The a8 block product's readings of each weight kind it takes (runtime/linear_impl.h's
 * a8b_reading): a sub-block's codes as qw + 128, its scale and min, from lmq's int8 / int4 rows
 * and GGUF's blocks (ggml-common.h's layouts, as schemes/gguf_blocks.c decodes them). The scales
 * are exact products of an fp16 and a small integer, so a sub-block's weights are scale·qw + min
 * as llama.cpp's vec_dot pairs take them. Portable C: the same bytes on every kernel set. */
#include "runtime/linear_impl.h"

#include "common/fp.h"

/* lmq's symmetric int8 / int4 per group: the group's fp16 scale. */
static float group_scale(const rt_weight *W, int j, int b)
{
    const size_t g = (size_t)j * (size_t)W->L.groups_per_row + (size_t)b * A8B_BLOCK / (size_t)W->L.group;
    return lmq_f16_to_f32(lmq_le16(W->data + 2 * g));
}

/* lmq's symmetric int8 per group: code − 128 is the weight code, so the stored byte is u. */
static float read_int8(const rt_weight *W, int j, int b, uint8_t *u, float *m)
{
    (void)m;
    memcpy(u, W->data + W->L.code_offset + (size_t)j * (size_t)W->in + (size_t)b * A8B_BLOCK, A8B_BLOCK);
    return group_scale(W, j, b);
}

/* lmq's symmetric int4 per group: code k in byte k / 2, the low nibble for even k; weight code
 * nibble − 8, so u = nibble + 120. */
static float read_int4(const rt_weight *W, int j, int b, uint8_t *u, float *m)
{
    (void)m;
    const uint8_t *p = W->data + W->L.code_offset + ((size_t)j * (size_t)W->in + (size_t)b * A8B_BLOCK) / 2;
    for (int k = 0; k < A8B_BLOCK / 2; k++) {
        u[2 * k] = (uint8_t)((p[k] & 0xF) + 120);
        u[2 * k + 1] = (uint8_t)((p[k] >> 4) + 120);
    }
    return group_scale(W, j, b);
}

/* The GGUF block of row j holding sub-block b of `sub` codes; b's place in the block into *t. */
static const uint8_t *block_of(const rt_weight *W, int j, int b, int sub, int *t)
{
    const lmq_encoding *e = lmq_encoding_of(W->q.dtype);
    const int per = (int)e->block / sub;
    *t = b % per;
    return W->data + ((size_t)j * (size_t)(W->in / (int)e->block) + (size_t)(b / per)) * e->block_bytes;
}

/* 16 bytes of nibbles at p: codes k < 16 the low nibbles, k + 16 the high ones (Q4_0's order),
 * each as add + v[nibble] (v NULL: the nibble itself). */
static void nibbles(const uint8_t *p, const int8_t *v, int add, uint8_t *u)
{
    for (int k = 0; k < 16; k++) {
        const int lo = p[k] & 0xF, hi = p[k] >> 4;
        u[k] = (uint8_t)(add + (v ? v[lo] : lo));
        u[k + 16] = (uint8_t)(add + (v ? v[hi] : hi));
    }
}

/* Q5_0 / Q5_1's fifth bits: bit k of the little-endian word qh over code k. */
static void fifth_bits(const uint8_t *qh, uint8_t *u)
{
    const uint32_t h = lmq_le32(qh);
    for (int k = 0; k < 32; k++)
        u[k] = (uint8_t)(u[k] + (h >> k & 1) * 16);
}

/* GGUF's Q8_0: fp16 d, then 32 signed bytes. */
static float read_q8_0(const rt_weight *W, int j, int b, uint8_t *u, float *m)
{
    (void)m;
    int t;
    const uint8_t *p = block_of(W, j, b, 32, &t);
    for (int k = 0; k < 32; k++)
        u[k] = (uint8_t)(p[2 + k] ^ 0x80);
    return lmq_f16_to_f32(lmq_le16(p));
}

/* Q4_0: fp16 d, 16 bytes of nibbles; weight code nibble − 8. */
static float read_q4_0(const rt_weight *W, int j, int b, uint8_t *u, float *m)
{
    (void)m;
    int t;
    const uint8_t *p = block_of(W, j, b, 32, &t);
    nibbles(p + 2, NULL, 120, u);
    return lmq_f16_to_f32(lmq_le16(p));
}

/* Q4_1: fp16 d and m, 16 bytes of nibbles; w = d·q + m. */
static float read_q4_1(const rt_weight *W, int j, int b, uint8_t *u, float *m)
{
    int t;
    const uint8_t *p = block_of(W, j, b, 32, &t);
    nibbles(p + 4, NULL, 128, u);
    *m = lmq_f16_to_f32(lmq_le16(p + 2));
    return lmq_f16_to_f32(lmq_le16(p));
}

/* Q5_0: fp16 d, qh, nibbles; w = d·(q − 16). */
static float read_q5_0(const rt_weight *W, int j, int b, uint8_t *u, float *m)
{
    (void)m;
    int t;
    const uint8_t *p = block_of(W, j, b, 32, &t);
    nibbles(p + 6, NULL, 112, u);
    fifth_bits(p + 2, u);
    return lmq_f16_to_f32(lmq_le16(p));
}

/* Q5_1: fp16 d and m, qh, nibbles; w = d·q + m. */
static float read_q5_1(const rt_weight *W, int j, int b, uint8_t *u, float *m)
{
    int t;
    const uint8_t *p = block_of(W, j, b, 32, &t);
    nibbles(p + 8, NULL, 128, u);
    fifth_bits(p + 4, u);
    *m = lmq_f16_to_f32(lmq_le16(p + 2));
    return lmq_f16_to_f32(lmq_le16(p));
}

/* IQ4_NL: fp16 d, nibbles indexing the code book; w = d·v. */
static float read_iq4_nl(const rt_weight *W, int j, int b, uint8_t *u, float *m)
{
    (void)m;
    int t;
    const uint8_t *p = block_of(W, j, b, 32, &t);
    nibbles(p + 2, q_iq4nl_values, 128, u);
    return lmq_f16_to_f32(lmq_le16(p));
}

/* Q4_K sub-block t of 32: byte 32(t / 2) + k of qs, the low nibble for even t; w = (d·sc)·q −
 * (dmin·m). Q5_K: the same with bit t of qh[k] as the fifth. */
static float k4_sub(const uint8_t *p, int t, const uint8_t *qh, const uint8_t *qs, uint8_t *u, float *m)
{
    for (int k = 0; k < 32; k++) {
        const int q = qs[32 * (t / 2) + k] >> (4 * (t % 2)) & 0xF;
        u[k] = (uint8_t)(128 + q + (qh ? (qh[k] >> t & 1) * 16 : 0));
    }
    int sc, mn;
    blk_k4_scale(p + 4, t, &sc, &mn);
    *m = -(lmq_f16_to_f32(lmq_le16(p + 2)) * (float)mn);
    return lmq_f16_to_f32(lmq_le16(p)) * (float)sc;
}

static float read_q4_k(const rt_weight *W, int j, int b, uint8_t *u, float *m)
{
    int t;
    const uint8_t *p = block_of(W, j, b, 32, &t);
    return k4_sub(p, t, NULL, p + 16, u, m);
}

static float read_q5_k(const rt_weight *W, int j, int b, uint8_t *u, float *m)
{
    int t;
    const uint8_t *p = block_of(W, j, b, 32, &t);
    return k4_sub(p, t, p + 16, p + 48, u, m);
}

/* Q2_K and Q3_K sub-block t of 16: half n = t / 8 of qs, its 32 bytes' bits 2(t % 8 / 2) and
 * the next, bytes 16(t % 2).. of the half. Q2_K: scales[t] a 4-bit scale (low) and min (high),
 * w = (d·sc)·q − (dmin·m); Q3_K: code q − 4 unless bit 4n + t % 8 / 2 of hmask's byte is set,
 * w = (d·(sc − 32))·code. */
static void two_bits(const uint8_t *qs, int t, uint8_t *u)
{
    const uint8_t *q = qs + 32 * (t / 8) + 16 * (t % 2);
    for (int k = 0; k < 16; k++)
        u[k] = (uint8_t)(128 + (q[k] >> (2 * (t % 8 / 2)) & 3));
}

static float read_q2_k(const rt_weight *W, int j, int b, uint8_t *u, float *m)
{
    int t;
    const uint8_t *p = block_of(W, j, b, 16, &t);
    two_bits(p + 16, t, u);
    *m = -(lmq_f16_to_f32(lmq_le16(p + 82)) * (float)(p[t] >> 4));
    return lmq_f16_to_f32(lmq_le16(p + 80)) * (float)(p[t] & 0xF);
}

static float read_q3_k(const rt_weight *W, int j, int b, uint8_t *u, float *m)
{
    (void)m;
    int t;
    const uint8_t *p = block_of(W, j, b, 16, &t);
    two_bits(p + 32, t, u);
    const uint8_t *hm = p + 16 * (t % 2), bit = (uint8_t)(1u << (4 * (t / 8) + t % 8 / 2));
    for (int k = 0; k < 16; k++)
        u[k] = (uint8_t)(u[k] - (hm[k] & bit ? 0 : 4));
    return lmq_f16_to_f32(lmq_le16(p + 108)) * (float)(blk_q3_scale(p + 96, t) - 32);
}

/* Q6_K sub-block t of 16: in half n = t / 8, r = t % 8, quarter r / 2 and codes 16(r % 2)..: the
 * nibble (high from the third quarter) of ql[64n + 32(r / 2 % 2) + k] under bits 2(r / 2) of
 * qh[32n + k]; w = (d·sc)·(q − 32), sc the int8 scales[t]. */
static float read_q6_k(const rt_weight *W, int j, int b, uint8_t *u, float *m)
{
    (void)m;
    int t;
    const uint8_t *p = block_of(W, j, b, 16, &t);
    const int n = t / 8, r = t % 8, quarter = r / 2;
    for (int i = 0; i < 16; i++) {
        const int k = 16 * (r % 2) + i;
        const int lo = p[64 * n + 32 * (quarter % 2) + k] >> (4 * (quarter / 2)) & 0xF;
        const int hi = p[128 + 32 * n + k] >> (2 * quarter) & 3;
        u[i] = (uint8_t)(128 - 32 + (lo | hi << 4));
    }
    return lmq_f16_to_f32(lmq_le16(p + 208)) * (float)(int8_t)p[192 + t];
}

/* IQ4_XS sub-block t of 32: IQ4_NL's nibbles at qs + 16t, w = (d·(ls − 32))·v. */
static float read_iq4_xs(const rt_weight *W, int j, int b, uint8_t *u, float *m)
{
    (void)m;
    int t;
    const uint8_t *p = block_of(W, j, b, 32, &t);
    nibbles(p + 8 + 16 * t, q_iq4nl_values, 128, u);
    return lmq_f16_to_f32(lmq_le16(p)) * (float)(blk_xs_scale(p, t) - 32);
}

const a8b_reading rt_a8b_readings[LMQ_T_COUNT] = {
    [LMQ_T_INT8] = { 32, 0, read_int8 },     [LMQ_T_INT4] = { 32, 0, read_int4 },
    [LMQ_T_Q8_0] = { 32, 0, read_q8_0 },     [LMQ_T_Q4_0] = { 32, 0, read_q4_0 },
    [LMQ_T_Q4_1] = { 32, 1, read_q4_1 },     [LMQ_T_Q5_0] = { 32, 0, read_q5_0 },
    [LMQ_T_Q5_1] = { 32, 1, read_q5_1 },     [LMQ_T_IQ4_NL] = { 32, 0, read_iq4_nl },
    [LMQ_T_Q2_K] = { 16, 1, read_q2_k },     [LMQ_T_Q3_K] = { 16, 0, read_q3_k },
    [LMQ_T_Q4_K] = { 32, 1, read_q4_k },     [LMQ_T_Q5_K] = { 32, 1, read_q5_k },
    [LMQ_T_Q6_K] = { 16, 0, read_q6_k },     [LMQ_T_IQ4_XS] = { 32, 0, read_iq4_xs },
};
