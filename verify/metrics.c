#include "verify/metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

/* Per scored position of one window and one model. */
typedef struct {
    rt_rowstat st;
    double nll, kl;
    int agree, bad;
} pos_score;

typedef struct {
    const rt_kernels *isa;
    int vocab;
    const int32_t *next;  /* the token each position predicts */
    const float *lr;      /* reference logits [ctx × vocab] */
    const pos_score *ref; /* NULL while scoring the reference itself */
    const float *lq;      /* logits being scored */
    pos_score *out;
} score_job;

static void score_task(void *v, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const score_job *j = v;
    for (int64_t t = begin; t < end; t++) {
        const float *l = j->lq + (size_t)t * j->vocab;
        pos_score *o = &j->out[t];
        if ((o->bad = j->isa->row_stats(l, j->vocab, &o->st) != 0))
            continue;
        o->nll = (double)o->st.max + log(o->st.sumexp) - (double)l[j->next[t]];
        if (j->ref) {
            o->agree = o->st.argmax == j->ref[t].st.argmax;
            o->kl = j->isa->kl_row(j->lr + (size_t)t * j->vocab, &j->ref[t].st, l, j->vocab);
        } else {
            o->agree = 1;
            o->kl = 0.0;
        }
    }
}

const double vf_kl_levels[VF_KL_LEVELS] = { [VF_KL_P1] = 0.01,    [VF_KL_P5] = 0.05,  [VF_KL_P10] = 0.10,
                                            [VF_KL_MEDIAN] = 0.50, [VF_KL_P90] = 0.90, [VF_KL_P95] = 0.95,
                                            [VF_KL_P99] = 0.99,    [VF_KL_P999] = 0.999 };

void vf_positions_free(vf_positions *p)
{
    free(p->nll);
    free(p->kl);
    free(p->agree);
    memset(p, 0, sizeof *p);
}

int64_t vf_shard_windows(int64_t windows, int shard, int shards)
{
    if (!shards)
        return windows;
    return windows > shard ? (windows - shard - 1) / shards + 1 : 0;
}

/* Every statistic of one model from its positions' values and the reference's (ref may be the
 * same); scratch holds positions doubles. Sorts a->kl (its mean is taken first, in position
 * order); a->nll stays in position order for the candidates that follow. */
static void finish(vf_positions *a, const vf_positions *ref, double *scratch, int64_t positions, int64_t windows,
                   vf_result *r)
{
    int64_t agree = 0;
    for (int64_t i = 0; i < positions; i++)
        agree += a->agree[i];
    const vf_est nll = vf_mean_se(a->nll, positions), kl = vf_mean_se(a->kl, positions);
    const vf_est top1 = vf_fraction_se(agree, positions);
    *r = (vf_result){ .nll = nll.value, .ppl = exp(nll.value), .top1 = top1.value, .top1_se = top1.se,
                      .kl_mean = kl.value, .kl_se = kl.se, .positions = positions, .windows = windows,
                      .seconds = a->seconds, .ln_ppl_ratio = vf_mean_diff_se(a->nll, ref->nll, positions) };
    for (int64_t i = 0; i < positions; i++) /* the probability each gives the token that came */
        scratch[i] = exp(-a->nll[i]) - exp(-ref->nll[i]);
    r->dp_rms = vf_rms_se(scratch, positions);
    vf_sort(a->kl, positions);
    for (int k = 0; k < VF_KL_LEVELS; k++)
        r->kl_pct[k] = vf_percentile(a->kl, positions, vf_kl_levels[k]);
    r->kl_p99 = r->kl_pct[VF_KL_P99];
    r->kl_max = a->kl[positions - 1];
}

lmq_code vf_results(vf_positions *p, int n_models, int64_t windows, int ctx, vf_result *out, lmq_err *err)
{
    const int64_t positions = windows * (ctx - 1);
    if (windows < 1 || ctx < 2)
        return lmq_fail(err, LMQ_E_ARG, "%lld windows of %d tokens: nothing to score", (long long)windows, ctx);
    double *scratch = malloc((size_t)positions * sizeof *scratch);
    if (!scratch)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory for the statistics of %lld positions", (long long)positions);
    for (int i = 0; i < n_models; i++)
        finish(&p[i], &p[0], scratch, positions, windows, &out[i]);
    free(scratch);
    return LMQ_OK;
}

static lmq_code check_model(const rt_state *s, const char *what, int vocab, int ctx, lmq_err *err)
{
    const rt_model *m = rt_state_model(s);
    if (m->arch.vocab_size != vocab)
        return lmq_fail(err, LMQ_E_ARG, "%s has a vocabulary of %d tokens, the reference %d", what,
                        m->arch.vocab_size, vocab);
    if (ctx > rt_state_max_tokens(s))
        return lmq_fail(err, LMQ_E_ARG, "window of %d tokens exceeds the context of %s (%d)", ctx, what,
                        rt_state_max_tokens(s));
    return LMQ_OK;
}

/* Scores one window's positions of the logits in job (the model whose state is s); adds them to acc. */
static lmq_code score_window(const rt_state *s, int ctx, score_job *job, const float *logits, pos_score *scores,
                             vf_positions *acc, int64_t at, const char *what, int64_t w, lmq_err *err)
{
    job->isa = rt_state_exec(s)->isa;
    job->lq = logits;
    job->out = scores;
    lmq_pool_for(rt_state_exec(s)->pool, ctx - 1, 4, score_task, job);
    for (int t = 0; t < ctx - 1; t++) {
        if (scores[t].bad)
            return lmq_fail(err, LMQ_E_NUMERIC, "%s: non-finite logits in window %lld at position %d", what,
                            (long long)w, t);
        acc->agree[at + t] = (uint8_t)scores[t].agree;
        acc->nll[at + t] = scores[t].nll;
        acc->kl[at + t] = scores[t].kl;
    }
    return LMQ_OK;
}

/* Runs one model over one window and scores its positions. */
static lmq_code run_model(rt_state *s, const int32_t *win, int ctx, float *logits, score_job *job, pos_score *scores,
                          vf_positions *acc, int64_t kl_at, const char *what, int64_t w, lmq_err *err)
{
    const double t0 = lmq_now();
    lmq_code c = rt_forward(s, win, ctx, 0, RT_LOGITS_ALL, logits, err);
    acc->seconds += lmq_now() - t0;
    if (c)
        return lmq_err_prefix(err, "%s, window %lld: ", what, (long long)w);
    return score_window(s, ctx, job, logits, scores, acc, kl_at, what, w, err);
}

/* The reference's window: run, or loaded from saved logits; then saved when asked. */
static lmq_code reference_window(rt_state *ref, rt_state *scorer, const vf_opts *o, const int32_t *win, int ctx,
                                 int vocab, float *lr, score_job *job, pos_score *sr, vf_positions *acc, int64_t w,
                                 int64_t at, lmq_err *err)
{
    const size_t n = (size_t)(ctx - 1) * (size_t)vocab;
    lmq_code c;
    if (o->load) {
        if ((c = o->load(o->logits_user, w, lr, n, err)))
            return c;
        c = score_window(scorer, ctx, job, lr, sr, acc, at, "reference logits", w, err);
    } else
        c = run_model(ref, win, ctx, lr, job, sr, acc, at, "reference", w, err);
    return !c && o->save ? o->save(o->logits_user, w, lr, n, err) : c;
}

lmq_code vf_score(rt_state *ref, rt_state *const *cands, int n_cands, const int32_t *tokens, int64_t n_tokens,
                  const vf_opts *opts, vf_result *ref_out, vf_result *cand_out, lmq_err *err)
{
    const vf_opts none = { 0 };
    opts = opts ? opts : &none;
    const int ctx = opts->ctx ? opts->ctx : 256;
    if (ctx < 2)
        return lmq_fail(err, LMQ_E_ARG, "window of %d tokens: at least 2 are needed to score one", ctx);
    if (n_cands < 0)
        return lmq_fail(err, LMQ_E_ARG, "%d candidate models", n_cands);
    if (!ref && (!opts->load || n_cands < 1))
        return lmq_fail(err, LMQ_E_ARG, "no reference: give its model or its saved logits and a candidate");
    rt_state *scorer = ref ? ref : cands[0]; /* whose vocabulary and kernels score the reference's logits */
    const int vocab = rt_state_model(scorer)->arch.vocab_size;
    lmq_code c = ref ? check_model(ref, "the reference", vocab, ctx, err) : LMQ_OK;
    for (int i = 0; i < n_cands && !c; i++) {
        char what[32];
        snprintf(what, sizeof what, "candidate %d", i + 1);
        c = check_model(cands[i], what, vocab, ctx, err);
    }
    if (c)
        return c;
    const int64_t windows = n_tokens / ctx;
    if (windows < 1)
        return lmq_fail(err, LMQ_E_ARG, "a stream of %lld tokens is shorter than one window of %d", (long long)n_tokens,
                        ctx);
    if (opts->shards < 0 || (opts->shards && (opts->shard < 0 || opts->shard >= opts->shards)) ||
        (opts->shards && (opts->save || opts->load)))
        return lmq_fail(err, LMQ_E_ARG, "shard %d of %d: not a shard (0 <= K < N), or with saved logits", opts->shard,
                        opts->shards);
    const int64_t mine = vf_shard_windows(windows, opts->shard, opts->shards), positions = mine * (ctx - 1);
    const int64_t first = opts->shards ? opts->shard : 0, step = opts->shards ? opts->shards : 1;

    const size_t win_logits = (size_t)ctx * (size_t)vocab;
    float *lr = malloc(win_logits * sizeof *lr), *lq = n_cands ? malloc(win_logits * sizeof *lq) : NULL;
    pos_score *sr = malloc((size_t)ctx * sizeof *sr), *sq = malloc((size_t)ctx * sizeof *sq);
    vf_positions *acc = calloc((size_t)n_cands + 1, sizeof *acc);
    int ok = lr && (lq || !n_cands) && sr && sq && acc;
    const size_t cells = positions ? (size_t)positions : 1;
    for (int i = 0; ok && i <= n_cands; i++)
        ok = (acc[i].nll = malloc(cells * sizeof *acc[i].nll)) && (acc[i].kl = malloc(cells * sizeof *acc[i].kl)) &&
             (acc[i].agree = malloc(cells));
    if (!ok) {
        c = lmq_fail(err, LMQ_E_NOMEM, "out of memory for scoring windows of %d tokens × %d logits", ctx, vocab);
        goto done;
    }
    for (int64_t j = 0, w = first; j < mine && !c; j++, w += step) {
        const int32_t *win = tokens + w * ctx;
        score_job job = { .vocab = vocab, .next = win + 1, .lr = lr };
        c = reference_window(ref, scorer, opts, win, ctx, vocab, lr, &job, sr, &acc[0], w, j * (ctx - 1), err);
        job.ref = sr;
        for (int i = 0; i < n_cands && !c; i++) {
            char what[32];
            snprintf(what, sizeof what, "candidate %d", i + 1);
            c = run_model(cands[i], win, ctx, lq, &job, sq, &acc[i + 1], j * (ctx - 1), what, w, err);
        }
        if (!c && opts->progress)
            opts->progress(opts->user, j + 1, mine);
    }
    if (!c && opts->keep) {
        memcpy(opts->keep, acc, ((size_t)n_cands + 1) * sizeof *acc);
        memset(acc, 0, ((size_t)n_cands + 1) * sizeof *acc);
    } else if (!c) { /* the reference's result and the candidates', computed together */
        vf_result *all = malloc(((size_t)n_cands + 1) * sizeof *all);
        c = all ? vf_results(acc, n_cands + 1, windows, ctx, all, err) : lmq_fail(err, LMQ_E_NOMEM, "out of memory");
        if (!c) {
            *ref_out = all[0];
            for (int i = 0; i < n_cands; i++) /* cand_out may be NULL without candidates */
                cand_out[i] = all[i + 1];
        }
        free(all);
    }
done:
    for (int i = 0; acc && i <= n_cands; i++)
        vf_positions_free(&acc[i]);
    free(acc);
    free(lr);
    free(lq);
    free(sr);
    free(sq);
    return c;
}
