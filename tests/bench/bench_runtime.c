/* Prefill and decode speed of the CPU runtime on the two fixture models, at 1 and 2 threads.
 *   prefill  256 tokens in one pass, logits of the last position (a prompt)
 *   window   256 tokens in one pass, logits of every position (the P1 scoring workload)
 *   decode   128 tokens one at a time after a 128-token prompt (the cache grows 128..255)
 * Each figure is the best of several repetitions. Fixtures come from ../shared/fixtures or
 * $LMQ_FIXTURES. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "convert/convert.h"
#include "runtime/forward.h"
#include "runtime/sample.h"

#define CTX 256
#define PROMPT 128

static int fail(const lmq_err *e)
{
    fprintf(stderr, "bench_runtime: %s\n", e->msg);
    return 1;
}

/* Best time of reps runs of one workload. */
typedef enum { PREFILL, WINDOW, DECODE } workload;

static double best_time(rt_state *s, const int32_t *toks, float *logits, workload w, int reps, lmq_err *e)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = lmq_now();
        if (w == DECODE) {
            if (rt_forward(s, toks, PROMPT, 0, RT_LOGITS_NONE, NULL, e))
                return -1;
            t0 = lmq_now();
            for (int p = PROMPT; p < CTX; p++)
                if (rt_decode(s, toks[p], p, logits, e))
                    return -1;
        } else if (rt_forward(s, toks, CTX, 0, w == WINDOW ? RT_LOGITS_ALL : RT_LOGITS_LAST, logits, e))
            return -1;
        double t = lmq_now() - t0;
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    const char *root = getenv("LMQ_FIXTURES") ? getenv("LMQ_FIXTURES") : "../shared/fixtures";
    const char *models[] = { "stories260K/stories260K.bin", "sotu-gpt2" };
    const int reps = argc > 1 ? atoi(argv[1]) : 5;
    printf("CPU runtime, kernels %s, %d online CPUs; tokens/s, best of %d\n", rt_isa_best()->name,
           lmq_online_cpus(), reps);
    printf("%-12s %7s %12s %12s %12s\n", "model", "threads", "prefill", "window", "decode");
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", root, models[mi]);
        lmq_model m;
        rt_model rm;
        lmq_err e;
        if (lmq_convert(path, NULL, &m, &e) || rt_model_init(&rm, &m, &e))
            return fail(&e);
        int32_t toks[CTX];
        rt_rng rng;
        rt_rng_seed(&rng, 1);
        for (int i = 0; i < CTX; i++)
            toks[i] = (int32_t)(rt_rng_u32(&rng) % (uint32_t)m.arch.vocab_size);
        float *logits = malloc((size_t)CTX * m.arch.vocab_size * sizeof *logits);
        for (int threads = 1; threads <= 2; threads++) {
            lmq_pool *pool;
            rt_state *s;
            if (lmq_pool_create(threads, &pool, &e))
                return fail(&e);
            rt_exec ex = { .pool = pool, .isa = rt_isa_best() };
            if (rt_state_create(&rm, &ex, CTX, &s, &e))
                return fail(&e);
            double t[3];
            for (int w = 0; w < 3; w++)
                if ((t[w] = best_time(s, toks, logits, (workload)w, reps, &e)) < 0)
                    return fail(&e);
            const char *name = strchr(models[mi], '/') ? "stories260K" : models[mi];
            printf("%-12s %7d %12.0f %12.0f %12.0f\n", name, threads, CTX / t[PREFILL], CTX / t[WINDOW],
                   (CTX - PROMPT) / t[DECODE]);
            rt_state_free(s);
            lmq_pool_free(pool);
        }
        free(logits);
        rt_model_free(&rm);
        lmq_model_free(&m);
    }
    return 0;
}
