/* 8-bit floats, OCP FP8 formats:
 *   E4M3 ("fn"): bias 7, largest finite 448, no infinities, NaN = S.1111.111, subnormals.
 *   E5M2: bias 15, largest finite 57344, IEEE-style infinities (S.11111.00) and NaNs.
 * Encoding rounds to nearest, ties to even, and saturates: every finite input beyond the largest
 * finite value (and ±Inf) becomes ±max, never Inf; NaN input becomes the format's NaN. */
#ifndef LMQ_FP8_H
#define LMQ_FP8_H

#include <stdint.h>

typedef struct {
    unsigned man_bits; /* the exponent takes the other 7 - man_bits bits */
    int bias;
    uint8_t max_code;  /* code of the largest finite value */
    uint8_t nan_code;  /* positive quiet NaN */
    int has_inf;       /* 1: all-ones exponent with zero mantissa is Inf (IEEE style) */
    float max;         /* the largest finite value, q_fp8_decode(max_code) */
} q_fp8_format;

extern const q_fp8_format q_fp8_e4m3, q_fp8_e5m2;

float q_fp8_decode(const q_fp8_format *f, uint8_t code);
uint8_t q_fp8_encode(const q_fp8_format *f, float x);

#endif
