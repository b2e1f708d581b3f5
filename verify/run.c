#include "verify/run.h"

#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/file.h"
#include "runtime/artefact.h"
#include "runtime/probe.h"
#include "tokenizer/tokenizer.h"
#include "verify/stream.h"

/* Tokens decoded one at a time to measure decode speed (fewer if the window is shorter); each
 * speed is the best of SPEED_ROUNDS. The read bandwidth is probed over PROBE_BYTES. */
#define DECODE_TOKENS 64
#define SPEED_ROUNDS 3
#define PROBE_BYTES ((size_t)512 << 20)

typedef struct {
    lmq_model m;
    rt_model rm;
    rt_state *st;
    int rm_ready;
} loaded;

static lmq_code load(const char *path, const rt_exec *ex, int ctx, loaded *l, lmq_err *err)
{
    lmq_code c = rt_load_artefact(path, &l->m, err);
    if (c)
        return c;
    if ((c = rt_model_init(&l->rm, &l->m, err)))
        return lmq_err_prefix(err, "%s: ", path);
    l->rm_ready = 1;
    if (ctx > l->m.arch.max_seq)
        return lmq_fail(err, LMQ_E_ARG, "%s: ctx %d exceeds the model's context of %d tokens", path, ctx,
                        l->m.arch.max_seq);
    if ((c = rt_state_create(&l->rm, ex, ctx, &l->st, err)))
        return lmq_err_prefix(err, "%s: ", path);
    return LMQ_OK;
}

static void unload(loaded *l)
{
    rt_state_free(l->st);
    if (l->rm_ready)
        rt_model_free(&l->rm);
    lmq_model_free(&l->m);
}

/* Prefill: one pass over the first ctx tokens (logits of the last, as for a prompt); decode: the
 * first tokens one at a time from an empty cache. Best of SPEED_ROUNDS each. */
static lmq_code measure_speed(loaded *l, const int32_t *tokens, int ctx, vf_row *row, lmq_err *err)
{
    float *logits = malloc((size_t)l->m.arch.vocab_size * sizeof *logits);
    if (!logits)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    const int n_decode = ctx < DECODE_TOKENS ? ctx : DECODE_TOKENS;
    double pre = 1e30, dec = 1e30;
    lmq_code c = LMQ_OK;
    for (int r = 0; r < SPEED_ROUNDS && !c; r++) {
        double t0 = lmq_now();
        c = rt_forward(l->st, tokens, ctx, 0, RT_LOGITS_LAST, logits, err);
        double t1 = lmq_now();
        for (int i = 0; i < n_decode && !c; i++)
            c = rt_decode(l->st, tokens[i], i, logits, err);
        double t2 = lmq_now();
        pre = t1 - t0 < pre ? t1 - t0 : pre;
        dec = t2 - t1 < dec ? t2 - t1 : dec;
    }
    row->prefill_tps = ctx / pre;
    row->decode_tps = n_decode / dec;
    row->weight_mib = (double)rt_model_weight_bytes(&l->rm) / (1024.0 * 1024.0);
    free(logits);
    return c;
}

/* Token ids for a speed-only run: any in-vocabulary sequence does. */
static lmq_code speed_tokens(int vocab, int n, int32_t **ids, size_t *n_ids, lmq_err *err)
{
    if (!(*ids = malloc((size_t)n * sizeof **ids)))
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    for (int i = 0; i < n; i++)
        (*ids)[i] = (int32_t)(((uint32_t)i * 2654435761u) % (uint32_t)vocab);
    *n_ids = (size_t)n;
    return LMQ_OK;
}

lmq_code vf_run(const char *ref_path, const char *const *cand_paths, int n_cands, const char *text_path,
                const vf_run_opts *opts, vf_report *report, lmq_err *err)
{
    const vf_run_opts none = { 0 };
    opts = opts ? opts : &none;
    const int ctx = opts->ctx ? opts->ctx : 256;
    memset(report, 0, sizeof *report);
    report->text = opts->speed_only ? NULL : text_path;
    report->ctx = ctx;
    const int n = n_cands + 1;
    loaded *l = calloc((size_t)n, sizeof *l);
    rt_state **cands = calloc((size_t)n, sizeof *cands);
    vf_row *rows = calloc((size_t)n, sizeof *rows);
    vf_result *res = calloc((size_t)n, sizeof *res);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    lmq_pool *pool = NULL;
    lmq_code c = (l && cands && rows && res) ? LMQ_OK : lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    if (!c)
        c = lmq_pool_create(opts->threads, &pool, err);
    rt_exec ex = { .pool = pool, .isa = rt_isa_best() };
    report->isa = rt_isa_name(ex.isa);
    report->bandwidth_gbps = opts->bandwidth_gbps;
    if (!c && !(report->bandwidth_gbps > 0))
        c = rt_probe_read_bw(pool, PROBE_BYTES, SPEED_ROUNDS, &report->bandwidth_gbps, err);
    for (int i = 0; i < n && !c; i++) {
        const char *path = i ? cand_paths[i - 1] : ref_path;
        if (!(c = vf_row_from_artefact(path, &rows[i], err)))
            c = load(path, &ex, ctx, &l[i], err);
        if (!c && l[i].m.arch.vocab_size != l[0].m.arch.vocab_size)
            c = lmq_fail(err, LMQ_E_ARG, "%s: a vocabulary of %d tokens; the reference %s has %d", path,
                         l[i].m.arch.vocab_size, ref_path, l[0].m.arch.vocab_size);
        cands[i] = l[i].st;
    }
    if (!c)
        c = opts->speed_only ? speed_tokens(l[0].m.arch.vocab_size, ctx, &ids, &n_ids, err)
                             : vf_stream_read(&l[0].m, text_path, &ids, &n_ids, &report->documents, NULL, err);
    if (!c && n_ids < (size_t)ctx)
        c = lmq_fail(err, LMQ_E_ARG, "%s: %zu tokens, shorter than one window of %d", text_path, n_ids, ctx);
    if (!c && !opts->speed_only) {
        vf_opts vo = { .ctx = ctx, .progress = opts->progress, .user = opts->user };
        c = vf_score(cands[0], cands + 1, n_cands, ids, (int64_t)n_ids, &vo, &res[0], res + 1, err);
    }
    for (int i = 0; i < n && !c; i++) {
        rows[i].res = res[i];
        rows[i].dppl_pct = opts->speed_only ? 0 : 100.0 * (res[i].ppl / res[0].ppl - 1.0);
        if ((c = measure_speed(&l[i], ids, ctx, &rows[i], err)))
            break;
        /* Weights that fit in the last-level cache are not streamed from memory: no roofline. */
        const double bytes = rows[i].weight_mib * 1048576.0;
        if (bytes > (double)rt_probe_llc_bytes())
            rows[i].roofline = rows[i].decode_tps * bytes / (report->bandwidth_gbps * 1e9);
    }
    report->tokens = (int64_t)n_ids;
    report->threads = lmq_pool_threads(pool);
    for (int i = 0; l && i < n; i++)
        unload(&l[i]);
    lmq_pool_free(pool);
    free(l);
    free(cands);
    free(res);
    free(ids);
    if (c) {
        free(rows);
        return c;
    }
    report->rows = rows;
    report->n_rows = n;
    return LMQ_OK;
}
