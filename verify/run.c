#include "verify/run.h"

#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/file.h"
#include "runtime/artefact.h"
#include "runtime/tokenizer.h"
#include "verify/stream.h"

/* Tokens decoded one at a time to measure decode speed (fewer if the window is shorter). */
#define DECODE_TOKENS 64

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

/* Decodes the stream's first tokens one at a time from the cache; returns tokens/s. */
static lmq_code decode_speed(loaded *l, const int32_t *tokens, int n, double *tps, lmq_err *err)
{
    float *logits = malloc((size_t)l->m.arch.vocab_size * sizeof *logits);
    if (!logits)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    double t0 = lmq_now();
    lmq_code c = LMQ_OK;
    for (int i = 0; i < n && !c; i++)
        c = rt_decode(l->st, tokens[i], i, logits, err);
    *tps = n / (lmq_now() - t0);
    free(logits);
    return c;
}

static lmq_code read_stream(const lmq_model *m, const char *text_path, int32_t **ids, size_t *n, int *docs,
                            lmq_err *err)
{
    tok_tokenizer *tok;
    lmq_code c = tok_open_model(m, &tok, err);
    if (c)
        return c;
    lmq_blob text;
    if (!(c = lmq_blob_open(text_path, &text, err))) {
        if ((c = vf_stream_build(tok, (const char *)text.data, text.size, ids, n, docs, err)))
            lmq_err_prefix(err, "%s: ", text_path);
        lmq_blob_close(&text);
    }
    tok_free(tok);
    return c;
}

lmq_code vf_run(const char *ref_path, const char *const *cand_paths, int n_cands, const char *text_path,
                const vf_run_opts *opts, vf_report *report, lmq_err *err)
{
    const int ctx = opts && opts->ctx ? opts->ctx : 256;
    memset(report, 0, sizeof *report);
    report->text = text_path;
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
        c = lmq_pool_create(opts ? opts->threads : 0, &pool, err);
    rt_exec ex = { .pool = pool, .isa = rt_isa_best() };
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
        c = read_stream(&l[0].m, text_path, &ids, &n_ids, &report->documents, err);
    if (!c && n_ids < (size_t)ctx)
        c = lmq_fail(err, LMQ_E_ARG, "%s: %zu tokens, shorter than one window of %d", text_path, n_ids, ctx);
    if (!c) {
        vf_opts vo = { .ctx = ctx, .progress = opts ? opts->progress : NULL, .user = opts ? opts->user : NULL };
        c = vf_score(cands[0], cands + 1, n_cands, ids, (int64_t)n_ids, &vo, &res[0], res + 1, err);
    }
    const int n_decode = ctx < DECODE_TOKENS ? ctx : DECODE_TOKENS;
    for (int i = 0; i < n && !c; i++) {
        rows[i].res = res[i];
        rows[i].dppl_pct = 100.0 * (res[i].ppl / res[0].ppl - 1.0);
        rows[i].prefill_tps = (double)(res[i].windows * ctx) / res[i].seconds;
        c = decode_speed(&l[i], ids, n_decode, &rows[i].decode_tps, err);
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
