/* lmq verify as a library call: load a reference and candidate artefacts, build the P1 token
 * stream of a text with the reference's tokenizer, score every artefact against the
 * reference, time prefill and decoding on the packed weights (on the CPU or the CUDA device),
 * and fill the side-by-side report. */
#ifndef LMQ_VF_RUN_H
#define LMQ_VF_RUN_H

#include "verify/report.h"

typedef struct {
    int ctx;              /* window length; 0 = 256 */
    int threads;          /* 0 = one per online CPU */
    int speed_only;       /* 1: measure speed alone (no text needed; quality columns stay empty) */
    double bandwidth_gbps; /* read bandwidth for the rooflines; 0 = each artefact's own (vf_row.read_gbps) */
    vf_progress_fn progress;
    void *user;
    const char *save_ref_logits; /* writes the reference's logits there (verify/ref_logits.h) */
    const char *ref_logits;      /* scores against these saved logits instead of running the reference */
    const char *device;          /* where the forward passes run (runtime/backend.h); NULL = "cpu" */
    /* The batch sweep: for each of n_batch sizes, that many sequences of prompt_len
     * tokens prefilled one after another, then new_tokens decoded for all of them at once. */
    const int *batch;
    int n_batch, prompt_len, new_tokens;
    /* Each candidate's KV cache formats for keys and values (runtime/kv.h; NULL arrays or
     * entries: fp32); the reference's cache is fp32. */
    const struct rt_kv_format *const *kv_k, *const *kv_v;
    /* shards > 0: score windows shard, shard + shards, ... only and write them to shard_path
     * (verify/shard.h); no speed is measured and the report's rows have no results. */
    int shard, shards;
    const char *shard_path;
    vf_arith arith;              /* how the matrices are multiplied (verify/report.h) */
} vf_run_opts;

/* rows (allocated here; the caller frees report->rows) get the reference first, then each
 * candidate in order. text_path names the evaluation text (may be NULL with speed_only).
 * With ref_logits the reference is not loaded: ref_path may be NULL (the row then comes from
 * the file) or must be the artefact the logits were saved for; the text, its token stream under
 * the first candidate's tokenizer and ctx must be those they were saved with (refused
 * otherwise), and the reference row has no speed. */
lmq_code vf_run(const char *ref_path, const char *const *cand_paths, int n_cands, const char *text_path,
                const vf_run_opts *opts, vf_report *report, lmq_err *err);

#endif
