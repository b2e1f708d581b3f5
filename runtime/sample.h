/* Choosing the next token from logits: greedy (argmax, ties to the lowest id) or sampling at a
 * temperature, optionally restricted to the smallest set of tokens whose probability reaches
 * top_p (nucleus). The random numbers come from our own seeded PCG32 generator, so a seed gives
 * the same tokens on every machine. */
#ifndef LMQ_RT_SAMPLE_H
#define LMQ_RT_SAMPLE_H

#include <stdint.h>

#include "common/err.h"

/* PCG32 (O'Neill's permuted congruential generator, XSH-RR output). */
typedef struct {
    uint64_t state, inc;
} rt_rng;

void rt_rng_seed(rt_rng *r, uint64_t seed);
uint32_t rt_rng_u32(rt_rng *r);
/* Uniform in [0, 1), 24 random bits. */
float rt_rng_float(rt_rng *r);

/* Lowest index of the largest value. */
int rt_argmax(const float *x, int n);

typedef struct {
    float p;
    int id;
} rt_prob_id;

typedef struct {
    int vocab;
    float temperature; /* 0: greedy */
    float top_p;       /* in (0, 1]; 1: no restriction */
    rt_rng rng;
    rt_prob_id *cand; /* [vocab] scratch */
} rt_sampler;

lmq_code rt_sampler_init(rt_sampler *s, int vocab, float temperature, float top_p, uint64_t seed, lmq_err *err);
void rt_sampler_free(rt_sampler *s);
/* The next token for logits[vocab]; logits are not modified. */
int rt_sample(rt_sampler *s, const float *logits);

#endif
