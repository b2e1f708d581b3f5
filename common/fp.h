/* Conversions between fp32 and the 16-bit float formats, round-to-nearest-even. */
#ifndef LMQ_FP_H
#define LMQ_FP_H

#include <stddef.h>
#include <stdint.h>

uint16_t lmq_f32_to_f16(float f);
float lmq_f16_to_f32(uint16_t h);
uint16_t lmq_f32_to_bf16(float f);
float lmq_bf16_to_f32(uint16_t h);

/* The same conversions for n values: F16C's 8 at a time where the CPU has it, bit for bit the
 * scalar functions' results (blocks holding a NaN or Inf go through the scalar ones, which keep
 * their own NaN conventions). */
void lmq_f32_to_f16_n(const float *x, uint16_t *h, size_t n);
void lmq_f16_to_f32_n(const uint16_t *h, float *x, size_t n);

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
