#include "schemes/gguf_blocks.h"

#include <stddef.h>

#include "common/fp.h"
#include "common/le.h"

static float half(const uint8_t *p)
{
    return lmq_f16_to_f32(lmq_le16(p));
}

void q_gguf_q8_0(const uint8_t *b, float *y)
{
    const float d = half(b);
    for (int j = 0; j < 32; j++)
        y[j] = (float)(int8_t)b[2 + j] * d;
}

/* The 32 codes of a Q4/Q5 block: nibbles (low ones first), plus a fifth bit from qh if any. */
static void codes32(const uint8_t *qs, const uint8_t *qh, int q[32])
{
    const uint32_t h = qh ? lmq_le32(qh) : 0;
    for (int j = 0; j < 16; j++) {
        q[j] = (qs[j] & 0xF) | (int)((h >> j) & 1) << 4;
        q[j + 16] = (qs[j] >> 4) | (int)((h >> (j + 16)) & 1) << 4;
    }
}

void q_gguf_q4_0(const uint8_t *b, float *y)
{
    int q[32];
    codes32(b + 2, NULL, q);
    const float d = half(b);
    for (int j = 0; j < 32; j++)
        y[j] = (float)(q[j] - 8) * d;
}

void q_gguf_q4_1(const uint8_t *b, float *y)
{
    int q[32];
    codes32(b + 4, NULL, q);
    const float d = half(b), m = half(b + 2);
    for (int j = 0; j < 32; j++)
        y[j] = (float)q[j] * d + m;
}

void q_gguf_q5_0(const uint8_t *b, float *y)
{
    int q[32];
    codes32(b + 6, b + 2, q);
    const float d = half(b);
    for (int j = 0; j < 32; j++)
        y[j] = (float)(q[j] - 16) * d;
}

void q_gguf_q5_1(const uint8_t *b, float *y)
{
    int q[32];
    codes32(b + 8, b + 4, q);
    const float d = half(b), m = half(b + 2);
    for (int j = 0; j < 32; j++)
        y[j] = (float)q[j] * d + m;
}

/* Sub-block j's 6-bit scale and min of a K-quant's 12 packed bytes: j < 4 in the low six bits
 * of bytes j and j + 4; j >= 4 as a nibble of byte j + 4 with the top two bits of byte j - 4
 * (scale) or j (min). */
static void scale_min_k4(int j, const uint8_t *s, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* Q4_K and Q5_K: 4 chunks of 64 weights, each two sub-blocks of 32 (low nibbles, then high
 * nibbles of the same 32 bytes of qs); in Q5_K bits 2c and 2c + 1 of qh[l] are the fifth bits
 * of weight l of chunk c's two sub-blocks. */
static void k4(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, float *y)
{
    const float d = half(b), dmin = half(b + 2);
    for (int c = 0; c < 4; c++, qs += 32) {
        for (int h = 0; h < 2; h++) {
            int sc, m;
            scale_min_k4(2 * c + h, b + 4, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            for (int l = 0; l < 32; l++) {
                int q = h ? qs[l] >> 4 : qs[l] & 0xF;
                if (qh)
                    q += (qh[l] >> (2 * c + h) & 1) << 4;
                *y++ = d1 * (float)q - m1;
            }
        }
    }
}

void q_gguf_q4_k(const uint8_t *b, float *y)
{
    k4(b, NULL, b + 16, y);
}

void q_gguf_q5_k(const uint8_t *b, float *y)
{
    k4(b, b + 16, b + 48, y);
}

/* Q6_K: two halves of 128 weights; in each, weight l + 32k (k = 0..3) takes its low four bits
 * from ql[l + 32(k & 1)] (low nibble for k < 2, high for k >= 2) and its top two from bits
 * 2k, 2k + 1 of qh[l]; 16 sub-blocks of 16 weights each with an int8 scale. */
void q_gguf_q6_k(const uint8_t *b, float *y)
{
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    const float d = half(b + 208);
    for (int n = 0; n < 2; n++, ql += 64, qh += 32, sc += 8, y += 128)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                const uint8_t lo = ql[l + 32 * (k & 1)];
                const int q = ((k < 2 ? lo & 0xF : lo >> 4) | (qh[l] >> (2 * k) & 3) << 4) - 32;
                y[l + 32 * k] = d * (float)sc[l / 16 + 2 * k] * (float)q;
            }
}

const int8_t q_iq4nl_values[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };

/* The 2-bit code of weight i = 128h + 32k + l (h < 2, k < 4, l < 32) of a Q2_K / Q3_K block: bits
 * 2k, 2k + 1 of qs[32h + l]. */
static int code2(const uint8_t *qs, int i)
{
    return qs[32 * (i / 128) + i % 32] >> (2 * (i % 128 / 32)) & 3;
}

void q_gguf_q2_k(const uint8_t *b, float *y)
{
    const float d = half(b + 80), dmin = half(b + 82);
    for (int j = 0; j < 16; j++) {
        const float dl = d * (float)(b[j] & 0xF), ml = dmin * (float)(b[j] >> 4);
        for (int i = 16 * j; i < 16 * j + 16; i++)
            y[i] = dl * (float)code2(b + 16, i) - ml;
    }
}

/* Q3_K sub-block j's 6-bit scale: the low nibble of byte j (j < 8) or the high one of byte j - 8,
 * with bits 2(j / 4), +1 of byte 8 + j % 4 above it. */
static int scale_q3(const uint8_t *s, int j)
{
    return (j < 8 ? s[j] & 0xF : s[j - 8] >> 4) | (s[8 + j % 4] >> (2 * (j / 4)) & 3) << 4;
}

/* Q3_K: weight i's third bit is bit i / 32 of hmask[i % 32]; without it the code is 4 lower. */
void q_gguf_q3_k(const uint8_t *b, float *y)
{
    const float d = half(b + 108);
    for (int j = 0; j < 16; j++) {
        const float dl = d * (float)(scale_q3(b + 96, j) - 32);
        for (int i = 16 * j; i < 16 * j + 16; i++)
            y[i] = dl * (float)(code2(b + 32, i) - (b[i % 32] >> (i / 32) & 1 ? 0 : 4));
    }
}

void q_gguf_iq4_nl(const uint8_t *b, float *y)
{
    int q[32];
    codes32(b + 2, NULL, q);
    const float d = half(b);
    for (int j = 0; j < 32; j++)
        y[j] = d * (float)q_iq4nl_values[q[j]];
}

/* IQ4_XS: sub-block j's scale is nibble j % 2 of scales_l[j / 2] with bits 2j, 2j + 1 of scales_h
 * above it. */
void q_gguf_iq4_xs(const uint8_t *b, float *y)
{
    const float d = half(b);
    const unsigned sh = (unsigned)b[2] | (unsigned)b[3] << 8;
    for (int j = 0; j < 8; j++, y += 32) {
        const int ls = (b[4 + j / 2] >> (4 * (j % 2)) & 0xF) | (int)(sh >> (2 * j) & 3) << 4;
        const float dl = d * (float)(ls - 32);
        int q[32];
        codes32(b + 8 + 16 * j, NULL, q);
        for (int l = 0; l < 32; l++)
            y[l] = dl * (float)q_iq4nl_values[q[l]];
    }
}
