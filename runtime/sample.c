#include "runtime/sample.h"

#include <math.h>
#include <stdlib.h>

/* PCG32's multiplier; seeding as the reference pcg32_srandom(seed, stream) with stream 54. */
#define PCG_MULT 6364136223846793005ULL
#define PCG_STREAM 54u

uint32_t rt_rng_u32(rt_rng *r)
{
    uint64_t old = r->state;
    r->state = old * PCG_MULT + r->inc;
    uint32_t xorshifted = (uint32_t)(((old >> 18u) ^ old) >> 27u);
    uint32_t rot = (uint32_t)(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31));
}

void rt_rng_seed(rt_rng *r, uint64_t seed)
{
    r->state = 0;
    r->inc = (PCG_STREAM << 1u) | 1u;
    rt_rng_u32(r);
    r->state += seed;
    rt_rng_u32(r);
}

float rt_rng_float(rt_rng *r)
{
    return (float)(rt_rng_u32(r) >> 8) * (1.0f / 16777216.0f);
}

int rt_argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

lmq_code rt_sampler_init(rt_sampler *s, int vocab, float temperature, float top_p, uint64_t seed, lmq_err *err)
{
    *s = (rt_sampler){ .vocab = vocab, .temperature = temperature, .top_p = top_p };
    if (vocab < 1)
        return lmq_fail(err, LMQ_E_ARG, "sampler: vocabulary of %d tokens", vocab);
    if (!(temperature >= 0.0f) || !isfinite(temperature))
        return lmq_fail(err, LMQ_E_ARG, "sampler: temperature %g is not a finite number >= 0", (double)temperature);
    if (!(top_p > 0.0f && top_p <= 1.0f))
        return lmq_fail(err, LMQ_E_ARG, "sampler: top-p %g is not in (0, 1]", (double)top_p);
    rt_rng_seed(&s->rng, seed);
    s->cand = malloc((size_t)vocab * sizeof *s->cand);
    if (!s->cand) {
        rt_sampler_free(s);
        return lmq_fail(err, LMQ_E_NOMEM, "sampler: out of memory for %d tokens", vocab);
    }
    return LMQ_OK;
}

void rt_sampler_free(rt_sampler *s)
{
    free(s->cand);
    s->cand = NULL;
}

/* Descending probability, ties by ascending id: a total order, so qsort's result is fixed. */
static int by_prob(const void *a, const void *b)
{
    const rt_prob_id *x = a, *y = b;
    if (x->p != y->p)
        return x->p > y->p ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

int rt_sample(rt_sampler *s, const float *logits)
{
    const int n = s->vocab;
    if (s->temperature == 0.0f)
        return rt_argmax(logits, n);
    const float mx = logits[rt_argmax(logits, n)];
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        s->cand[i] = (rt_prob_id){ .p = expf((logits[i] - mx) / s->temperature), .id = i };
        sum += s->cand[i].p;
    }
    int count = n;
    if (s->top_p < 1.0f) {
        /* Keep the most probable tokens until their mass reaches top_p, then draw among them. */
        qsort(s->cand, (size_t)n, sizeof *s->cand, by_prob);
        double kept = 0.0;
        for (count = 0; count < n && kept < (double)s->top_p * sum; count++)
            kept += s->cand[count].p;
        sum = kept;
    }
    const double target = rt_rng_float(&s->rng) * sum;
    double acc = 0.0;
    for (int i = 0; i < count; i++) {
        acc += s->cand[i].p;
        if (target < acc)
            return s->cand[i].id;
    }
    return s->cand[count - 1].id;
}
