/* Metric protocol P1 (DESIGN.md, golden/README.md): perplexity, top-1 agreement and
 * KL(P_ref || P_model) over consecutive non-overlapping windows of ctx tokens, each from an
 * empty cache, position t = 0..ctx-2 predicting token t+1; the last partial window is dropped.
 *
 * vf_score runs windows outer and models inner: each window's reference logits are computed
 * once and compared against every candidate, so N artefacts cost one reference pass, and no
 * more than two windows of logits are held at a time. Every position's NLL and KL are kept
 * (16 bytes per position and model); every statistic is computed from them in position order
 * in fp64, so results do not depend on the thread count. */
#ifndef LMQ_VF_METRICS_H
#define LMQ_VF_METRICS_H

#include <stdint.h>

#include "runtime/forward.h"
#include "verify/sample_stats.h"

/* The percentiles of KL reported, as llama-perplexity --kl-divergence prints them; kl_pct is in
 * this order, at the levels vf_kl_levels holds. */
enum { VF_KL_P1, VF_KL_P5, VF_KL_P10, VF_KL_MEDIAN, VF_KL_P90, VF_KL_P95, VF_KL_P99, VF_KL_P999, VF_KL_LEVELS };
extern const double vf_kl_levels[VF_KL_LEVELS];

typedef struct {
    double ppl;     /* exp(nll) */
    double nll;     /* mean negative log-likelihood per scored position, nats */
    double top1;    /* fraction of positions whose argmax equals the reference's */
    double kl_mean; /* mean KL(P_ref || P_model) per position, nats */
    double kl_p99;  /* its 99th percentile: kl_pct[VF_KL_P99] */
    int64_t positions, windows;
    double seconds; /* wall time in the model's forward passes (its prefill speed) */
    /* llama-perplexity --kl-divergence's statistics over the same positions, with its
     * definitions (sample_stats.h); the reference against itself has zeros and top1 = 1. */
    double kl_se;                /* standard error of kl_mean */
    double kl_pct[VF_KL_LEVELS]; /* KL percentiles (linear interpolation between order statistics) */
    double kl_max;
    double top1_se;              /* binomial standard error of top1 ("same top p") */
    vf_est dp_rms;               /* RMS of Δp = P(next token) − P_ref(next token), ± standard error */
    vf_est ln_ppl_ratio;         /* ln(PPL / PPL_ref) = nll − nll_ref; its error counts their covariance */
} vf_result;

/* Called after each window (done = 1..windows). */
typedef void (*vf_progress_fn)(void *user, int64_t done, int64_t windows);

/* The reference's logits of one window's scored positions ((ctx - 1) × vocab fp32, n values),
 * to save them (vf_opts.save) or to use saved ones instead of running the reference (load). */
typedef lmq_code (*vf_logits_fn)(void *user, int64_t window, float *logits, size_t n, lmq_err *err);

/* Every scored position's values of one model, in window order: what every statistic is computed
 * from (vf_results), and what a shard file keeps (verify/shard.h). */
typedef struct {
    double *nll, *kl;
    uint8_t *agree; /* 1: the position's argmax is the reference's */
    double seconds; /* in the model's forward passes */
} vf_positions;

void vf_positions_free(vf_positions *p);

/* Windows shard, shard + shards, shard + 2·shards, ... of `windows` (shards 0: every window):
 * how many there are. */
int64_t vf_shard_windows(int64_t windows, int shard, int shards);

typedef struct {
    int ctx; /* window length; 0 = 256 */
    vf_progress_fn progress;
    void *user;
    vf_logits_fn save, load; /* either may be NULL; with load, ref may be NULL (see vf_score) */
    void *logits_user;
    int shard, shards; /* score only windows shard, shard + shards, ... (shards 0: every window) */
    vf_positions *keep; /* not NULL: its n_cands + 1 entries (reference first) get the positions'
                           values (vf_positions_free) and no result is computed */
} vf_opts;

/* Scores the reference (its top1 = 1, KL = 0) and n_cands candidates (any may be 0) on
 * tokens[0..n_tokens). All models must share the vocabulary; each state must hold ctx
 * positions. With opts->load the reference's logits come from it instead of running ref (which
 * may then be NULL when n_cands >= 1: the first candidate gives the vocabulary and kernels);
 * saved logits give the results of running the reference, bit for bit. Errors: ctx < 2, ctx beyond a model's context, a stream shorter than one window,
 * a token outside the vocabulary, non-finite logits (never a NaN result). A shard
 * (opts->shards) may hold no window; saved logits (save, load) need every window. */
/* The results of n_models (the reference first, its top1 = 1 and KL = 0) from their positions'
 * values over `windows` windows of ctx tokens, every sum in position order in fp64: a single run
 * and a merge of shards compute them here, from the same values in the same order. Sorts each
 * p[i].kl. */
lmq_code vf_results(vf_positions *p, int n_models, int64_t windows, int ctx, vf_result *out, lmq_err *err);

lmq_code vf_score(rt_state *ref, rt_state *const *cands, int n_cands, const int32_t *tokens, int64_t n_tokens,
                  const vf_opts *opts, vf_result *ref_out, vf_result *cand_out, lmq_err *err);

#endif
