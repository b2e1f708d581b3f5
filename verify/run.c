#include "verify/run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/file.h"
#include "runtime/artefact.h"
#include "runtime/backend.h"
#include "runtime/kv.h"
#include "runtime/probe.h"
#include "tokenizer/stream.h"
#include "tokenizer/tokenizer.h"
#include "verify/ref_logits.h"
#include "verify/shard.h"

/* Tokens decoded one at a time to measure decode speed (fewer if the window is shorter); each
 * speed is the best of SPEED_ROUNDS, taken in turn across the artefacts. A CUDA device's copy
 * bandwidth is probed over PROBE_BYTES. */
#define DECODE_TOKENS 64
#define SPEED_ROUNDS 3
#define PROBE_BYTES ((size_t)512 << 20)

typedef struct {
    lmq_model m;
    rt_model rm;
    rt_state *st;
    int rm_ready;
} loaded;

/* The artefact at path with a state of ctx tokens whose cache is in ex's formats; the row learns
 * the cache's format and bytes per token (its scheme says a cache that is not fp32). */
static lmq_code load(const char *path, const rt_exec *ex, int ctx, loaded *l, vf_row *row, lmq_err *err)
{
    lmq_code c = rt_load_artefact(path, &l->m, err);
    if (c)
        return c;
    for (int i = 0; i < l->m.n_tensors; i++) {
        lmq_tensor *t = &l->m.tensors[i];
        t->act = vf_act(row, t->ndim, t->shape, &t->q, t->act);
    }
    if ((c = rt_model_init(&l->rm, &l->m, err)))
        return lmq_err_prefix(err, "%s: ", path);
    const rt_kv_format *fp32 = rt_kv_find("fp32"), *k = ex->kv_k ? ex->kv_k : fp32, *v = ex->kv_v ? ex->kv_v : fp32;
    snprintf(row->kv_cache, sizeof row->kv_cache, k == v ? "%s" : "%s/%s", k->name, v->name);
    row->kv_bytes_per_token = rt_kv_token_bytes(k, v, l->m.arch.n_layers, l->m.arch.n_kv_heads, l->rm.head_dim);
    const size_t len = strlen(row->scheme);
    if (k != fp32 || v != fp32)
        snprintf(row->scheme + len, sizeof row->scheme - len, " kv %s", row->kv_cache);
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

/* The weights a decoded token streams, as spans for the probe (rt_model_each_streamed). */
typedef struct {
    rt_span *s;
    int n;
} spans;

static void add_span(const rt_weight *W, void *v)
{
    spans *x = v;
    if (x->s)
        x->s[x->n] = (rt_span){ W->data, W->L.bytes };
    x->n++;
}

/* One round of l's speed. Prefill: one pass over the first ctx tokens (logits of the last, as for
 * a prompt); decode: the first tokens one at a time from an empty cache. row keeps the best of the
 * rounds (0: none yet). With probe, the round reads the weights decoding streams just before it
 * decodes (on a shared host the memory's speed changes from one second to the next):
 * row->read_gbps is the rate of the best decode's own round. */
static lmq_code speed_round(loaded *l, lmq_pool *pool, const int32_t *tokens, int ctx, int probe, vf_row *row,
                            lmq_err *err)
{
    float *logits = malloc((size_t)l->m.arch.vocab_size * sizeof *logits);
    spans w = { 0 }; /* counted, then filled */
    rt_model_each_streamed(&l->rm, add_span, &w);
    w.s = probe ? malloc((size_t)w.n * sizeof *w.s) : NULL;
    if (!logits || (probe && !w.s)) {
        free(logits);
        free(w.s);
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    }
    w.n = 0;
    if (probe)
        rt_model_each_streamed(&l->rm, add_span, &w);
    const int n_decode = ctx < DECODE_TOKENS ? ctx : DECODE_TOKENS;
    double gbps = 0, t0 = lmq_now();
    lmq_code c = rt_forward(l->st, tokens, ctx, 0, RT_LOGITS_LAST, logits, err);
    const double t1 = lmq_now();
    if (!c && probe)
        c = rt_probe_read_spans(pool, w.s, w.n, 2, &gbps, NULL, err);
    const double t2 = lmq_now();
    for (int i = 0; i < n_decode && !c; i++)
        c = rt_decode(l->st, tokens[i], i, logits, err);
    const double t3 = lmq_now();
    if (!c && ctx / (t1 - t0) > row->prefill_tps)
        row->prefill_tps = ctx / (t1 - t0);
    if (!c && n_decode / (t3 - t2) > row->decode_tps) {
        row->decode_tps = n_decode / (t3 - t2);
        if (probe) /* else the caller's given rate stands */
            row->read_gbps = gbps;
    }
    free(logits);
    free(w.s);
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

/* The batch sweep on l's model: one state with a cache for each sequence of the largest batch
 * (l's own state is freed first: one copy of the model on the device at a time). Per batch
 * size b: b prompts prefilled in turn (TTFT: until the last has its first token), then
 * new_tokens decoding steps of all b sequences at once. */
static lmq_code measure_batches(loaded *l, const rt_exec *exec, const vf_run_opts *o, vf_row *row, lmq_err *err)
{
    const rt_exec on = *exec, *ex = &on; /* exec may be l's state's, freed below */
    const int P = o->prompt_len, G = o->new_tokens, vocab = l->m.arch.vocab_size;
    int most = 0;
    for (int i = 0; i < o->n_batch; i++)
        most = o->batch[i] > most ? o->batch[i] : most;
    if (P + G > l->m.arch.max_seq)
        return lmq_fail(err, LMQ_E_ARG, "%s: batch sweep of %d prompt and %d new tokens exceeds the model's context "
                        "of %d", row->path, P, G, l->m.arch.max_seq);
    rt_state_free(l->st);
    l->st = NULL;
    rt_state *st = NULL;
    int32_t *tokens = NULL;
    size_t n_tokens;
    float *logits = malloc((size_t)most * vocab * sizeof *logits);
    int32_t *next = malloc((size_t)most * sizeof *next);
    lmq_code c = logits && next ? speed_tokens(vocab, P, &tokens, &n_tokens, err)
                                : lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    if (!c)
        c = rt_state_create_seqs(&l->rm, ex, P + G, most, &st, err);
    for (int i = 0; i < o->n_batch && !c; i++) {
        const int b = o->batch[i];
        const double t0 = lmq_now();
        for (int q = 0; q < b && !c; q++)
            c = rt_forward_seq(st, q, tokens, P, 0, RT_LOGITS_LAST, logits, err);
        const double t1 = lmq_now();
        for (int q = 0; q < b; q++) /* any in-vocabulary tokens do: the time does not depend on them */
            next[q] = tokens[(P + q) % P];
        for (int g = 0; g < G && !c; g++)
            c = rt_decode_batch(st, b, next, logits, err);
        const double t2 = lmq_now();
        row->batch[i] = (vf_batch){ .seqs = b, .prompt = P, .new_tokens = G, .ttft_s = t1 - t0,
                                    .token_ms = 1e3 * (t2 - t1) / G, .tokens_per_s = (double)b * G / (t2 - t1) };
    }
    row->n_batch = c ? 0 : o->n_batch;
    rt_state_free(st);
    free(tokens);
    free(logits);
    free(next);
    return c;
}

/* Opens the saved logits and checks them against this run (the reference row, when given, and
 * the text, stream and ctx); fills the reference row from them when the reference is not given. */
static lmq_code open_saved(const vf_run_opts *o, const vf_logits_head *run, vf_row *ref_row, int have_ref,
                           vf_report *report, vf_logits_file **f, lmq_err *err)
{
    vf_logits_head saved;
    lmq_code c = vf_logits_open(o->ref_logits, &saved, &report->ref_logits_checksum, f, err);
    if (!c)
        c = vf_logits_match(o->ref_logits, &saved, run, err);
    if (!c && !have_ref)
        *ref_row = saved.ref;
    report->ref_logits = o->ref_logits;
    return c;
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
    if (opts->ref_logits && (opts->speed_only || opts->save_ref_logits || n_cands < 1))
        return lmq_fail(err, LMQ_E_ARG, "saved reference logits score candidates on a text: give at least one, "
                                        "and neither --speed-only nor a file to save them to");
    const int sharded = opts->shards > 0;
    if (sharded && (!opts->shard_path || opts->speed_only || opts->ref_logits || opts->save_ref_logits ||
                    opts->n_batch || opts->shard < 0 || opts->shard >= opts->shards))
        return lmq_fail(err, LMQ_E_ARG, "shard %d/%d: a shard (0 <= K < N) scores the text into a shard file, "
                        "without speed, batch sweep or saved logits", opts->shard, opts->shards);
    const int saved = opts->ref_logits != NULL; /* the reference is not run: l[0] stays empty */
    const int n = n_cands + 1;
    loaded *l = calloc((size_t)n, sizeof *l);
    rt_state **cands = calloc((size_t)n, sizeof *cands);
    vf_row *rows = calloc((size_t)n, sizeof *rows);
    vf_result *res = calloc((size_t)n, sizeof *res);
    vf_positions *keep = sharded ? calloc((size_t)n, sizeof *keep) : NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    lmq_pool *pool = NULL;
    vf_logits_file *lf = NULL;
    lmq_code c = (l && cands && rows && res && (keep || !sharded)) ? LMQ_OK : lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    if (!c)
        c = lmq_pool_create(opts->threads, &pool, err);
    const rt_backend *dev = NULL;
    if (!c)
        c = rt_backend_ready(opts->device ? opts->device : "cpu", &dev, err);
    rt_exec ex = { .pool = pool, .isa = rt_isa_best(), .backend = dev };
    report->isa = ex.isa->name;
    report->device = dev ? dev->name : "cpu";
    report->bandwidth_gbps = opts->bandwidth_gbps;
    /* The roofline's bandwidth and the cache whose size exempts a model from it: the CPU's read
     * bandwidth and last-level cache, or the device's copy bandwidth and L2. */
    size_t cache = 0;
    double probed = 0;
    if (!c)
        c = rt_probe_llc(&cache, err);
    if (!c && dev->probe)
        c = dev->probe(PROBE_BYTES, SPEED_ROUNDS, &probed, report->device_desc, sizeof report->device_desc, &cache,
                       err);
    if (!(report->bandwidth_gbps > 0))
        report->bandwidth_gbps = probed;
    if (!c && ref_path)
        c = vf_row_from_artefact(ref_path, opts->arith, &rows[0], err);
    for (int i = saved; i < n && !c; i++) {
        const char *path = i ? cand_paths[i - 1] : ref_path;
        rt_exec on = ex; /* the candidate's cache formats; the reference's fp32 */
        on.kv_k = i && opts->kv_k ? opts->kv_k[i - 1] : NULL;
        on.kv_v = i && opts->kv_v ? opts->kv_v[i - 1] : NULL;
        if (!(c = i ? vf_row_from_artefact(path, opts->arith, &rows[i], err) : LMQ_OK))
            c = load(path, &on, ctx, &l[i], &rows[i], err);
        if (!c && l[i].m.arch.vocab_size != l[saved].m.arch.vocab_size)
            c = lmq_fail(err, LMQ_E_ARG, "%s: a vocabulary of %d tokens; %s has %d", path, l[i].m.arch.vocab_size,
                         rows[saved].path, l[saved].m.arch.vocab_size);
        cands[i] = l[i].st;
    }
    /* The stream comes from the reference's tokenizer, or the first candidate's with saved logits. */
    if (!c)
        c = opts->speed_only ? speed_tokens(l[0].m.arch.vocab_size, ctx, &ids, &n_ids, err)
                             : tok_stream_read(&l[saved].m, text_path, &ids, &n_ids, &report->documents,
                                              &report->text_checksum, err);
    if (!c && n_ids < (size_t)ctx)
        c = lmq_fail(err, LMQ_E_ARG, "%s: %zu tokens, shorter than one window of %d", text_path, n_ids, ctx);
    vf_logits_head run = { 0 }; /* what saved logits are bound to */
    if (!c)
        report->tokens_checksum = vf_tokens_checksum(ids, n_ids);
    if (!c)
        run = (vf_logits_head){ .ctx = ctx, .vocab = l[saved].m.arch.vocab_size, .windows = (int64_t)n_ids / ctx,
                                .tokens = (int64_t)n_ids, .tokens_checksum = report->tokens_checksum,
                                .text_checksum = report->text_checksum, .ref = rows[0] };
    if (!c && saved)
        c = open_saved(opts, &run, &rows[0], ref_path != NULL, report, &lf, err);
    if (!c && opts->save_ref_logits)
        c = vf_logits_create(opts->save_ref_logits, &run, &lf, err);
    if (!c && !opts->speed_only) {
        vf_opts vo = { .ctx = ctx, .progress = opts->progress, .user = opts->user, .logits_user = lf,
                       .save = opts->save_ref_logits ? vf_logits_save : NULL, .load = saved ? vf_logits_load : NULL,
                       .shard = opts->shard, .shards = opts->shards, .keep = keep };
        c = vf_score(cands[0], cands + 1, n_cands, ids, (int64_t)n_ids, &vo, &res[0], res + 1, err);
    }
    if (!c && opts->save_ref_logits) {
        c = vf_logits_finish(lf, NULL, err);
        lf = NULL;
    }
    if (!c && !opts->speed_only && !sharded)
        vf_rows_score(rows, n, res, report->text_checksum);
    for (int i = saved; i < n && !c; i++) {
        rows[i].weight_mib = (double)rt_model_weight_bytes(&l[i].rm) / 1048576.0;
        rows[i].read_gbps = sharded ? 0 : report->bandwidth_gbps;
    }
    report->tokens = (int64_t)n_ids;
    report->threads = lmq_pool_threads(pool);
    if (sharded) { /* a shard's rows are its binding; speed is no part of it */
        report->bandwidth_gbps = 0;
        report->rows = rows;
        report->n_rows = n;
        if (!c)
            c = vf_shard_write(opts->shard_path, report, opts->shard, opts->shards, keep, err);
        report->rows = NULL;
    }
    /* Weights that fit in the last-level cache are not streamed from memory: no roofline. Round by
     * round, every artefact in turn, so that their ratios are taken in the same seconds. */
    const int fixed = report->bandwidth_gbps > 0;
    for (int r = 0; r < SPEED_ROUNDS && !c && !sharded; r++)
        for (int i = saved; i < n && !c; i++) {
            const int probe = !fixed && (double)rt_model_weight_bytes(&l[i].rm) > (double)cache;
            c = speed_round(&l[i], pool, ids, ctx, probe, &rows[i], err);
        }
    for (int i = saved; i < n && !c; i++) {
        const double bytes = (double)rt_model_weight_bytes(&l[i].rm);
        if (bytes > (double)cache && rows[i].read_gbps > 0)
            rows[i].roofline = rows[i].decode_tps * bytes / (rows[i].read_gbps * 1e9);
        if (opts->n_batch)
            c = measure_batches(&l[i], rt_state_exec(l[i].st), opts, &rows[i], err);
    }
    vf_logits_close(lf);
    for (int i = 0; l && i < n; i++)
        unload(&l[i]);
    lmq_pool_free(pool);
    free(l);
    free(cands);
    free(res);
    for (int i = 0; keep && i < n; i++)
        vf_positions_free(&keep[i]);
    free(keep);
    free(ids);
    if (c) {
        free(rows);
        return c;
    }
    report->rows = rows;
    report->n_rows = n;
    return LMQ_OK;
}
