/* Scalar conversions between fp32 and the 16-bit float formats, round-to-nearest-even. */
#ifndef LMQ_FP_H
#define LMQ_FP_H

#include <stdint.h>

uint16_t lmq_f32_to_f16(float f);
float lmq_f16_to_f32(uint16_t h);
uint16_t lmq_f32_to_bf16(float f);
float lmq_bf16_to_f32(uint16_t h);

static inline uint32_t lmq_f32_bits(float f)
{
    union { float f; uint32_t u; } v = { .f = f };
    return v.u;
}

static inline float lmq_bits_f32(uint32_t u)
{
    union { float f; uint32_t u; } v = { .u = u };
    return v.f;
}

#endif
