#include "common/fp.h"

uint16_t lmq_f32_to_f16(float f)
{
    uint32_t x = lmq_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u) /* Inf or NaN (keep NaN quiet) */
        return sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u);
    if (abs >= 0x477ff000u) /* rounds to >= 65520: overflow to Inf */
        return sign | 0x7c00u;
    if (abs < 0x38800000u) { /* below 2^-14: half subnormal or zero */
        if (abs < 0x33000000u) /* below 2^-25: rounds to zero */
            return sign;
        uint32_t exp = abs >> 23, mant = (abs & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - exp; /* 14..24 */
        uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1)))
            q++;
        return sign | (uint16_t)q;
    }
    uint32_t q = ((abs >> 13) - (112u << 10)), rem = abs & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1)))
        q++; /* a carry into the exponent is the correct rounding */
    return sign | (uint16_t)q;
}

float lmq_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
    if (exp == 0x1f)
        return lmq_bits_f32(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
        if (mant == 0)
            return lmq_bits_f32(sign);
        float v = (float)mant * (1.0f / 16777216.0f); /* mant * 2^-24, exact */
        return sign ? -v : v;
    }
    return lmq_bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t lmq_f32_to_bf16(float f)
{
    uint32_t x = lmq_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float lmq_bf16_to_f32(uint16_t h)
{
    return lmq_bits_f32((uint32_t)h << 16);
}
