#include "calibrate/calibrate.h"

#include <stdlib.h>
#include <string.h>

#include "calibrate/stats.h"
#include "formats/artefact.h"
#include "runtime/artefact.h"
#include "runtime/forward.h"
#include "tokenizer/stream.h"

#define DEFAULT_WINDOWS 128
#define DEFAULT_CTX 256
#define DEFAULT_GRAM_BYTES ((uint64_t)2 << 30)

typedef struct {
    lmq_model m;
    rt_model rm;
    int rm_ready;
    lmq_pool *pool;
    int32_t *ids;
    size_t n_ids;
    uint64_t model_checksum, text_checksum;
    lmq_writer *w;
    lmq_manifest man;
} run;

/* Layers [l0, *l1) whose Gram matrices fit the budget together (at least one layer). */
static int pass_end(const lmq_model *m, int l0, uint64_t budget)
{
    int l1 = l0 + 1;
    while (l1 < m->arch.n_layers && cal_gram_bytes(m, l0, l1 + 1) <= budget)
        l1++;
    return l1;
}

static lmq_code one_pass(run *r, int l0, int l1, int pass, int passes, int windows, int ctx, const cal_opts *o,
                         cal_summary *sum, lmq_err *err)
{
    cal_collector col;
    lmq_code c = cal_collector_init(&col, &r->m, l0, l1, 1, r->pool, err);
    if (c)
        return c;
    rt_exec ex = { .pool = r->pool, .isa = rt_isa_best(), .observe = cal_collector_observe, .observe_ctx = &col };
    rt_state *st = NULL;
    c = rt_state_create(&r->rm, &ex, ctx, &st, err);
    for (int w = 0; w < windows && !c; w++) {
        c = rt_forward_blocks(st, r->ids + (size_t)w * ctx, ctx, l1, err);
        if (!c && o->progress)
            o->progress(o->progress_ctx, pass, passes, w + 1, windows);
    }
    for (int i = 0; i < col.n && !c; i++)
        c = cal_record_write(&col.rec[i], r->w, &r->man, err);
    sum->records += col.n;
    rt_state_free(st);
    cal_collector_free(&col);
    return c;
}

static lmq_code calibrate(run *r, const char *model_path, const char *text_path, const char *out_path,
                          const cal_opts *o, cal_summary *sum, lmq_err *err)
{
    const int ctx = o->ctx ? o->ctx : DEFAULT_CTX, want = o->windows ? o->windows : DEFAULT_WINDOWS;
    lmq_container in;
    lmq_code c = lmq_container_open(&in, model_path, err);
    if (c)
        return c;
    r->model_checksum = in.file_checksum;
    lmq_container_close(&in);
    if ((c = rt_load_artefact(model_path, &r->m, err)))
        return c;
    if ((c = rt_model_init(&r->rm, &r->m, err)))
        return lmq_err_prefix(err, "%s: ", model_path);
    r->rm_ready = 1;
    if (ctx < 2 || ctx > r->m.arch.max_seq)
        return lmq_fail(err, LMQ_E_ARG, "ctx %d: the model's context is 2..%d tokens", ctx, r->m.arch.max_seq);
    int docs;
    if ((c = tok_stream_read(&r->m, text_path, &r->ids, &r->n_ids, &docs, &r->text_checksum, err)))
        return c;
    const size_t avail = r->n_ids / (size_t)ctx;
    if (!avail)
        return lmq_fail(err, LMQ_E_ARG, "%s: %zu tokens, fewer than one window of %d", text_path, r->n_ids, ctx);
    sum->windows = avail < (size_t)want ? (int)avail : want;
    sum->tokens = (uint64_t)sum->windows * (uint64_t)ctx;
    const uint64_t budget = o->gram_bytes ? o->gram_bytes : DEFAULT_GRAM_BYTES;
    const int L = r->m.arch.n_layers;
    for (int l0 = 0; l0 < L; l0 = pass_end(&r->m, l0, budget))
        sum->passes++;

    lmq_manifest *man = &r->man;
    man->kind = LMQ_KIND_STATS;
    man->arch = r->m.arch;
    man->source_checksum = r->m.source_checksum;
    man->calibration_checksum = r->text_checksum;
    man->calib_model_checksum = r->model_checksum;
    man->calib_windows = sum->windows;
    man->calib_ctx = ctx;
    man->calib_tokens = sum->tokens;
    if ((c = lmq_manifest_set(&man->source, model_path, err)) ||
        (c = lmq_manifest_set(&man->source_notes, r->m.notes, err)) ||
        (c = lmq_manifest_set(&man->calibration, text_path, err)) ||
        (c = lmq_pool_create(o->threads, &r->pool, err)) || (c = lmq_writer_open(&r->w, out_path, err)))
        return c;
    int pass = 1;
    for (int l0 = 0, l1; l0 < L && !c; l0 = l1, pass++) {
        l1 = pass_end(&r->m, l0, budget);
        c = one_pass(r, l0, l1, pass, sum->passes, sum->windows, ctx, o, sum, err);
    }
    if (c)
        return c;
    c = lmq_writer_finish(r->w, man, err);
    r->w = NULL; /* finish frees it */
    return c;
}

lmq_code cal_calibrate_file(const char *model_path, const char *text_path, const char *out_path,
                            const cal_opts *opts, cal_summary *sum, lmq_err *err)
{
    const cal_opts none = { 0 };
    cal_summary local;
    sum = sum ? sum : &local;
    memset(sum, 0, sizeof *sum);
    run r;
    memset(&r, 0, sizeof r);
    lmq_manifest_init(&r.man);
    lmq_code c = calibrate(&r, model_path, text_path, out_path, opts ? opts : &none, sum, err);
    lmq_writer_abort(r.w);
    lmq_manifest_free(&r.man);
    lmq_pool_free(r.pool);
    free(r.ids);
    if (r.rm_ready)
        rt_model_free(&r.rm);
    lmq_model_free(&r.m);
    return c;
}
