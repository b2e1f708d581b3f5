#include "common/fp.h"

#include "common/cpu.h"

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

#if LMQ_X86
#include <immintrin.h>

/* Whole blocks of 8; returns how many values it converted. */
__attribute__((target("avx,f16c"))) static size_t f32_to_f16_f16c(const float *x, uint16_t *h, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
            for (size_t k = i; k < i + 8; k++)
                h[k] = lmq_f32_to_f16(x[k]);
        else
            _mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
}

__attribute__((target("avx,f16c"))) static size_t f16_to_f32_f16c(const uint16_t *h, float *x, size_t n)
{
    const __m128i e = _mm_set1_epi16(0x7c00);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i v = _mm_loadu_si128((const __m128i *)(h + i));
        if (_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(v, e), e)))
            for (size_t k = i; k < i + 8; k++)
                x[k] = lmq_f16_to_f32(h[k]);
        else
            _mm256_storeu_ps(x + i, _mm256_cvtph_ps(v));
    }
    return i;
}

/* How many values of a bulk conversion `call` (one of the above) converts: none without F16C. */
#define F16C_FIRST(call) (lmq_cpu_features() & LMQ_CPU_F16C ? (call) : 0)
#else
#define F16C_FIRST(call) 0
#endif

void lmq_f32_to_f16_n(const float *x, uint16_t *h, size_t n)
{
    size_t i = F16C_FIRST(f32_to_f16_f16c(x, h, n));
    for (; i < n; i++)
        h[i] = lmq_f32_to_f16(x[i]);
}

void lmq_f16_to_f32_n(const uint16_t *h, float *x, size_t n)
{
    size_t i = F16C_FIRST(f16_to_f32_f16c(h, x, n));
    for (; i < n; i++)
        x[i] = lmq_f16_to_f32(h[i]);
}
