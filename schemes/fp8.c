#include "schemes/fp8.h"

#include "common/fp.h"

const q_fp8_format q_fp8_e4m3 = {
    .man_bits = 3, .bias = 7, .max_code = 0x7e, .nan_code = 0x7f, .has_inf = 0, .max = 448.0f
};
const q_fp8_format q_fp8_e5m2 = {
    .man_bits = 2, .bias = 15, .max_code = 0x7b, .nan_code = 0x7e, .has_inf = 1, .max = 57344.0f
};

float q_fp8_decode(const q_fp8_format *f, uint8_t code)
{
    unsigned m = f->man_bits;
    uint32_t sign = (uint32_t)(code & 0x80) << 24, exp = (code & 0x7fu) >> m;
    uint32_t man = code & ((1u << m) - 1);
    if ((code & 0x7f) > f->max_code) /* past the largest finite code: Inf or NaN */
        return lmq_bits_f32(sign | 0x7f800000u | (f->has_inf && man == 0 ? 0 : 0x400000u));
    if (exp == 0) { /* subnormal: man · 2^(1 - bias - m), exact in fp32 */
        float v = (float)man * lmq_bits_f32((uint32_t)(128 - f->bias - (int)m) << 23);
        return sign ? -v : v;
    }
    return lmq_bits_f32(sign | (uint32_t)((int)exp - f->bias + 127) << 23 | man << (23 - m));
}

uint8_t q_fp8_encode(const q_fp8_format *f, float x)
{
    uint32_t bits = lmq_f32_bits(x), abs = bits & 0x7fffffffu;
    uint8_t sign = (uint8_t)((bits >> 24) & 0x80);
    if (abs > 0x7f800000u)
        return sign | f->nan_code;
    if (lmq_bits_f32(abs) >= f->max)
        return sign | f->max_code;
    if (abs < 0x00800000u) /* fp32 zero or subnormal: far below the smallest fp8 subnormal */
        return sign;
    /* a = sig · 2^(e - 23). The code's quantum is 2^(max(e, emin) - m); dividing by it and
     * rounding to an integer n gives the code directly: binade offset plus n, where a carry out
     * of the mantissa lands in the next binade by itself. */
    int m = (int)f->man_bits, emin = 1 - f->bias, e = (int)(abs >> 23) - 127;
    uint32_t sig = (abs & 0x7fffffu) | 0x800000u;
    int top = e < emin ? emin : e;
    int shift = 23 - m + (top - e); /* >= 20 */
    uint32_t n = 0;
    if (shift <= 24) {
        uint32_t rem = sig & ((1u << shift) - 1), half = 1u << (shift - 1);
        n = sig >> shift;
        if (rem > half || (rem == half && (n & 1)))
            n++;
    }
    return sign | (uint8_t)(((uint32_t)(top - emin) << m) + n);
}
