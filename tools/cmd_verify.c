/* lmq verify: perplexity (protocol P1) of one artefact, or a side-by-side report of several
 * against a reference: storage, reconstruction error, PPL, top-1 agreement, KL and speed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/file.h"
#include "common/pool.h"
#include "runtime/backend.h"
#include "runtime/kv.h"
#include "tools/args.h"
#include "tools/cmd.h"
#include "tools/progress.h"
#include "verify/gate.h"
#include "verify/html.h"
#include "verify/record.h"
#include "verify/run.h"
#include "verify/shard.h"

static const char usage[] =
    "usage: lmq verify A.lmq [B.lmq ...] --text FILE [--reference REF.lmq] [--ctx N] [--threads N]\n"
    "                  [--json FILE] [--markdown FILE] [--html FILE] [--speed-only] [--bandwidth GBPS]\n"
    "                  [--gate 'METRIC<=X' ...] [--record] [--save-reference-logits FILE]\n"
    "                  [--reference-logits FILE] [--device cpu|cuda]\n"
    "                  [--batch N,N,... [--prompt-len N] [--new-tokens N]]\n"
    "                  [--kv FMT,FMT,...] [--kv-k FMT] [--kv-v FMT] [--shard K/N|env|env/N -o SHARD]\n"
    "                  [--arith exact|llama]\n"
    "       lmq verify --merge SHARD... [--json FILE] [--markdown FILE] [--html FILE] [--gate ...] [--record]\n"
    "Scores every artefact on FILE by protocol P1 (windows of N tokens, default 256, each from an\n"
    "empty cache). The reference (default: the first artefact) is run once; every other artefact\n"
    "is compared with it: top-1 agreement and KL(P_ref || P) per position. Then measures each\n"
    "artefact's speed on its packed weights: prefill (one pass over N tokens) and decode (one token\n"
    "at a time), and decode's fraction of the memory roofline: weight bytes per token over the rate\n"
    "every thread reads those same bytes, measured just before each decode (a shared host's memory\n"
    "changes speed by the second), or over --bandwidth GB/s when given. --speed-only skips the\n"
    "scoring (no --text needed). Prints a table; --json and --markdown write the same report to files,\n"
    "--html one self-contained page with it and its plots (inline SVG; no script or network).\n"
    "--gate 'METRIC OP X' (repeatable; METRIC a numeric field of a JSON row, e.g. kl_mean, top1,\n"
    "dppl_pct; OP one of <=, >=, <, >) must hold for every artefact but the reference: the table\n"
    "shows PASS/FAIL and the command exits 9 when one fails. --record writes A.lmq.verify.json beside\n"
    "each artefact but the reference: its row bound to the checksums of the artefact, the reference\n"
    "and the text, and to the protocol. --save-reference-logits FILE keeps the reference's logits;\n"
    "--reference-logits FILE scores against them instead of running the reference (the same text\n"
    "and --ctx are required; --reference, if given, must be the artefact they were saved for).\n"
    "--device cuda runs every forward pass (scores and speed) on the CUDA device, and takes decode's\n"
    "roofline against the device's copy bandwidth (lmq probe --device cuda). --batch 1,4,16,64 (at\n"
    "most 8 sizes) adds a batch sweep per artefact: that many sequences of --prompt-len tokens\n"
    "(default 512) prefilled one after another, then --new-tokens (default 128) decoded for all at\n"
    "once, one pass over the weights a step: TTFT, milliseconds per decoding step, aggregate tokens/s.\n"
    "--kv fp16,int8 (KV cache formats: fp32 fp16 bf16 fp8 int8 int4) scores every artefact named\n"
    "with its cache in each format against the reference with its fp32 cache; --kv-k and --kv-v set\n"
    "the keys' or the values' format alone (CPU only).\n"
    "--arith llama multiplies every matrix whose weights llama.cpp's vec_dot pairs with int8\n"
    "activations as llama.cpp does (a8 block: x rounded as Q8_0 or Q8_1 against the 32-blocks, Q8_K\n"
    "against the K-types and IQ4_XS, integer sums per block), so that the scores are llama.cpp's;\n"
    "--arith exact keeps fp32 activations (or those the manifest asks for). The default is llama for\n"
    "the GGUF block types of an artefact imported from GGUF (lmq convert of a .gguf, no recipe), exact\n"
    "for its int8 / int4 g32 rows (Q8_0 / Q4_0 with scales >= 0, which --arith llama includes), for\n"
    "lmq's own artefacts and on --device cuda (no a8 block product there). The scheme column says\n"
    "'a8 block' where it applies.\n"
    "--shard K/N -o SHARD scores windows K, K+N, K+2N, ... alone and writes every scored position's\n"
    "values for every artefact to SHARD (an lmq container bound to the artefacts', the reference's\n"
    "and the text's checksums and to the protocol: ctx, KV formats, device, N); no speed is measured.\n"
    "--shard env takes K and N from a Slurm job array (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN of\n"
    "SLURM_ARRAY_TASK_COUNT), --shard env/N takes K from Slurm or a Kubernetes indexed job\n"
    "(JOB_COMPLETION_INDEX). --merge SHARD... checks that the files are the N shards of one run, each\n"
    "once, and prints and writes the report the single run gives, every statistic bit for bit.\n";

/* "1,4,16,64" into sizes[0..*n), each 1..4096; returns 0 after printing an error. */
static int parse_batch(const char *s, int *sizes, int *n)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    *n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        long v;
        if (*n == VF_MAX_BATCH) {
            fprintf(stderr, "lmq verify: --batch: at most %d sizes\n", VF_MAX_BATCH);
            return 0;
        }
        if (!args_int("verify", "--batch", t, 1, 4096, &v))
            return 0;
        sizes[(*n)++] = (int)v;
    }
    if (*n == 0)
        fprintf(stderr, "lmq verify: --batch: no sizes in '%s'\n", s);
    return *n > 0;
}

#define MAX_ARTEFACTS 256
_Static_assert(ARGS_MAX_SHARDS <= MAX_ARTEFACTS, "a merge reads every shard as a positional argument");

static void on_progress(void *user, int64_t done, int64_t windows)
{
    progress_show(user, done, windows, "windows");
}

static int write_report(const char *path, void (*emit)(FILE *, const vf_report *), const vf_report *r)
{
    lmq_atomic a;
    lmq_err err;
    lmq_code c = lmq_atomic_open(&a, path, &err);
    if (!c) {
        emit(a.fp, r);
        c = lmq_atomic_commit(&a, &err);
    }
    if (c)
        fprintf(stderr, "lmq verify: %s\n", err.msg);
    return !c;
}

/* Names every failed gate on stderr with the value that failed it. */
static void report_failures(const vf_report *r)
{
    for (int i = 1; i < r->n_rows; i++) {
        json_t *row = vf_row_json(r, i);
        for (int g = 0; g < r->n_gates; g++) {
            const json_t *v = json_object_get(row, r->gates[g].metric);
            char value[32] = "unknown";
            if (!json_is_null(v))
                snprintf(value, sizeof value, "%.6g", json_number_value(v));
            if (r->rows[i].gates_failed >> g & 1)
                fprintf(stderr, "lmq verify: %s: gate '%s' failed (%s = %s)\n", r->rows[i].path, r->gates[g].text,
                        r->gates[g].metric, value);
        }
        json_decref(row);
    }
}

/* Refuses an output that would replace an input (1) or another output (2); 0: none does. */
static int check_outputs(const char *const *outputs, int n_out, const char *const *inputs, int n_in)
{
    lmq_err err;
    for (int i = 0; i < n_out; i++) {
        if (outputs[i] && lmq_output_check(outputs[i], inputs, n_in, &err)) {
            fprintf(stderr, "lmq verify: %s\n", err.msg);
            return 1;
        }
        for (int j = 0; j < i; j++)
            if (outputs[i] && outputs[j] && !strcmp(outputs[i], outputs[j])) { /* one would replace the other */
                fprintf(stderr, "lmq verify: %s is named by two outputs: each needs a file of its own\n", outputs[i]);
                return 2;
            }
    }
    return 0;
}

/* The report's table, files, records and gates, from a run or a merge: the exit status. */
static int emit(vf_report *r, const vf_gate *gates, int n_gates, const char *json, const char *md, const char *html,
                int record, double t0)
{
    lmq_err err;
    r->gates = gates;
    r->n_gates = n_gates;
    vf_report_gate(r);
    vf_report_table(stdout, r);
    printf("time: %.2f s\n", lmq_now() - t0);
    int ok = (!json || write_report(json, vf_report_json, r)) && (!md || write_report(md, vf_report_markdown, r)) &&
             (!html || write_report(html, vf_report_html, r));
    for (int i = 1; ok && record && i < r->n_rows; i++)
        if (vr_write(r, i, &err)) {
            fprintf(stderr, "lmq verify: %s\n", err.msg);
            ok = 0;
        }
    report_failures(r);
    const int passed = vf_report_passed(r);
    free((void *)r->rows);
    return !ok ? 1 : passed ? 0 : 9;
}

/* lmq verify --merge: the shards' report, its outputs checked against the shards and each other. */
static int merge(const char *const *shards, int n, const vf_gate *gates, int n_gates, const char *json,
                 const char *md, const char *html, int record)
{
    const double t0 = lmq_now();
    lmq_err err;
    vf_merged *m = malloc(sizeof *m);
    if (!m || vf_shard_merge(shards, n, m, &err)) {
        fprintf(stderr, "lmq verify --merge: %s\n", m ? err.msg : "out of memory");
        free(m);
        return 1;
    }
    const vf_report *r = &m->report;
    const char *outputs[MAX_ARTEFACTS + 3] = { json, md, html };
    char records[MAX_ARTEFACTS][600];
    int n_out = 3, ok = r->n_rows <= MAX_ARTEFACTS;
    for (int i = 1; ok && record && i < r->n_rows; i++) {
        if ((ok = !vr_path(r->rows[i].path, records[i], sizeof records[i], &err)))
            outputs[n_out++] = records[i];
        else
            fprintf(stderr, "lmq verify: %s\n", err.msg);
    }
    const int bad = ok ? check_outputs(outputs, n_out, shards, n) : 1;
    if (bad) {
        free((void *)r->rows);
        free(m);
        return bad;
    }
    const int rc = emit(&m->report, gates, n_gates, json, md, html, record, t0);
    free(m);
    return rc;
}

/* Options that one mode does not take, with the value or flag each was given. */
typedef struct {
    const char *name;
    const void *given;
} opt_given;

static int refuse(const char *mode, const opt_given *opts, int n, const char *why)
{
    for (int i = 0; i < n; i++)
        if (opts[i].given) {
            fprintf(stderr, "lmq verify: %s does not take %s: %s\n", mode, opts[i].name, why);
            return 1;
        }
    return 0;
}

int cmd_verify(int argc, char **argv)
{
    const char *text = NULL, *ref = NULL, *ctx_s = NULL, *threads_s = NULL, *json = NULL, *md = NULL, *html = NULL;
    const char *bw_s = NULL, *pos[MAX_ARTEFACTS], *save_logits = NULL, *ref_logits = NULL, *gate_s[VF_MAX_GATES];
    const char *device = NULL, *arith_s = NULL, *shard_s = NULL, *shard_out = NULL, *batch_s = NULL, *prompt_s = "512", *new_s = "128", *kv_s = NULL, *kv_k_s = NULL,
               *kv_v_s = NULL;
    int n, speed_only = 0, record = 0, merging = 0;
    arg_list gate_list = { gate_s, 0, VF_MAX_GATES };
    int rc = args_take(&argc, argv, "--gate", &gate_list);
    if (rc >= 0)
        return rc;
    const arg_opt opts[] = { { "--text", "-t", &text, NULL },      { "--reference", NULL, &ref, NULL },
                             { "--ctx", NULL, &ctx_s, NULL },      { "--threads", NULL, &threads_s, NULL },
                             { "--json", NULL, &json, NULL },      { "--markdown", NULL, &md, NULL },
                             { "--speed-only", NULL, NULL, &speed_only }, { "--bandwidth", NULL, &bw_s, NULL },
                             { "--record", NULL, NULL, &record },  { "--save-reference-logits", NULL, &save_logits, NULL },
                             { "--reference-logits", NULL, &ref_logits, NULL }, { "--html", NULL, &html, NULL },
                             { "--device", NULL, &device, NULL },  { "--batch", NULL, &batch_s, NULL },
                             { "--prompt-len", NULL, &prompt_s, NULL }, { "--new-tokens", NULL, &new_s, NULL },
                             { "--kv", NULL, &kv_s, NULL },        { "--kv-k", NULL, &kv_k_s, NULL },
                             { "--kv-v", NULL, &kv_v_s, NULL },    { "--shard", NULL, &shard_s, NULL },
                             { "--output", "-o", &shard_out, NULL }, { "--merge", NULL, NULL, &merging },
                             { "--arith", NULL, &arith_s, NULL }, { 0 } };
    rc = args_parse(argc, argv, opts, pos, MAX_ARTEFACTS, &n, usage);
    if (rc >= 0)
        return rc;
    vf_gate gates[VF_MAX_GATES];
    lmq_err err;
    for (int g = 0; g < gate_list.n; g++)
        if (vf_gate_parse(gate_s[g], &gates[g], &err)) {
            fprintf(stderr, "lmq verify: %s\n", err.msg);
            return 2;
        }
    /* A merge's run is the shards': every option that shapes a run is theirs. */
    const opt_given run_opts[] = { { "--text", text },       { "--reference", ref },     { "--ctx", ctx_s },
                                   { "--threads", threads_s }, { "--bandwidth", bw_s },  { "--device", device },
                                   { "--kv", kv_s },         { "--kv-k", kv_k_s },       { "--kv-v", kv_v_s },
                                   { "--batch", batch_s },   { "--speed-only", speed_only ? "" : NULL },
                                   { "--arith", arith_s },
                                   { "--shard", shard_s },   { "--output", shard_out },
                                   { "--save-reference-logits", save_logits }, { "--reference-logits", ref_logits } };
    if (merging) {
        if (refuse("--merge", run_opts, (int)(sizeof run_opts / sizeof *run_opts), "the shards were run with it"))
            return 2;
        if (!n) {
            fprintf(stderr, "lmq verify --merge: no shard files\n");
            return 2;
        }
        return merge(pos, n, gates, gate_list.n, json, md, html, record);
    }
    /* A shard's report is the merge's. */
    const opt_given report_opts[] = { { "--json", json }, { "--markdown", md }, { "--html", html },
                                      { "--gate", gate_list.n ? "" : NULL }, { "--record", record ? "" : NULL },
                                      { "--speed-only", speed_only ? "" : NULL }, { "--batch", batch_s },
                                      { "--save-reference-logits", save_logits }, { "--reference-logits", ref_logits } };
    int shard = 0, shards = 0;
    if (shard_s && (refuse("--shard", report_opts, (int)(sizeof report_opts / sizeof *report_opts),
                           "a shard scores its windows alone (lmq verify --merge reports them)") ||
                    !args_shard("verify", shard_s, &shard, &shards)))
        return 2;
    if (!shard_s != !shard_out) {
        fprintf(stderr, "lmq verify: --shard K/N and -o SHARD go together\n");
        return 2;
    }
    ctx_s = ctx_s ? ctx_s : "256";
    threads_s = threads_s ? threads_s : "0";
    bw_s = bw_s ? bw_s : "0";
    device = device ? device : "cpu";
    /* the CUDA device has no a8 block product: imports default to exact there */
    const vf_arith arith = !arith_s ? (strcmp(device, "cpu") ? VF_ARITH_EXACT : VF_ARITH_AUTO)
                           : !strcmp(arith_s, "exact") ? VF_ARITH_EXACT
                           : !strcmp(arith_s, "llama") ? VF_ARITH_LLAMA : (vf_arith)-1;
    if ((int)arith < 0) {
        fprintf(stderr, "lmq verify: --arith '%s': exact or llama\n", arith_s);
        return 2;
    }
    long ctx, threads, prompt_len, new_tokens;
    double bw;
    int batch[VF_MAX_BATCH], n_batch = 0;
    if (!args_int("verify", "--ctx", ctx_s, 2, 1 << 20, &ctx) || !args_int("verify", "--threads", threads_s, 0, LMQ_POOL_MAX_THREADS, &threads) ||
        !args_double("verify", "--bandwidth", bw_s, 0, 1e6, &bw) ||
        !args_int("verify", "--prompt-len", prompt_s, 1, 1 << 20, &prompt_len) ||
        !args_int("verify", "--new-tokens", new_s, 1, 1 << 20, &new_tokens) ||
        (batch_s && !parse_batch(batch_s, batch, &n_batch)))
        return 2;
    const rt_backend *dev;
    lmq_code dc = rt_backend_ready(device, &dev, &err);
    if (dc) {
        fprintf(stderr, "lmq verify: %s\n", err.msg);
        return dc == LMQ_E_ARG ? 2 : 1;
    }
    if ((!text && !speed_only) || (n == 0 && !ref)) {
        fprintf(stderr, "lmq verify: need at least one artefact and --text FILE\n%s", usage);
        return 2;
    }
    if (speed_only && (gate_list.n || record || save_logits || ref_logits)) {
        fprintf(stderr, "lmq verify: --gate, --record and reference logits need the scores --speed-only skips\n");
        return 2;
    }
    if (save_logits && ref_logits) {
        fprintf(stderr, "lmq verify: --save-reference-logits and --reference-logits exclude each other\n");
        return 2;
    }
    /* The KV cache formats: each of --kv's, its keys or values replaced by --kv-k's or --kv-v's. */
    const rt_kv_format *kv[VF_MAX_BATCH] = { NULL }, *kv_k = NULL, *kv_v = NULL;
    int n_kv = 0;
    char kv_buf[256];
    snprintf(kv_buf, sizeof kv_buf, "%s", kv_s ? kv_s : "fp32");
    for (char *save = NULL, *t = strtok_r(kv_buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (n_kv == VF_MAX_BATCH || !args_kv("verify", "--kv", t, &kv[n_kv++])) {
            if (n_kv == VF_MAX_BATCH)
                fprintf(stderr, "lmq verify: --kv: at most %d formats\n", VF_MAX_BATCH);
            return 2;
        }
    if (!n_kv || !args_kv("verify", "--kv-k", kv_k_s, &kv_k) || !args_kv("verify", "--kv-v", kv_v_s, &kv_v)) {
        if (!n_kv)
            fprintf(stderr, "lmq verify: --kv: no formats in '%s'\n", kv_s);
        return 2;
    }
    const int kv_rows = kv_s || kv_k_s || kv_v_s;
    if (kv_rows && record) {
        fprintf(stderr, "lmq verify: --record keeps one row an artefact: not with --kv, --kv-k or --kv-v\n");
        return 2;
    }
    /* The reference first; candidates are the others, each once. With saved logits the reference
     * is not run: every artefact named is a candidate unless it is --reference. With a KV cache
     * format, every artefact named is a candidate once per format. */
    const char *cands[MAX_ARTEFACTS];
    const rt_kv_format *cand_k[MAX_ARTEFACTS], *cand_v[MAX_ARTEFACTS];
    int n_cands = 0;
    if (!ref && !ref_logits)
        ref = pos[0];
    for (int i = 0; i < n; i++)
        for (int f = 0; f < n_kv && (kv_rows || !ref || strcmp(pos[i], ref) != 0); f++) {
            if (n_cands == MAX_ARTEFACTS) {
                fprintf(stderr, "lmq verify: at most %d rows (artefacts × KV formats)\n", MAX_ARTEFACTS);
                return 2;
            }
            cand_k[n_cands] = kv_k ? kv_k : kv[f];
            cand_v[n_cands] = kv_v ? kv_v : kv[f];
            cands[n_cands++] = pos[i];
        }
    if ((record || gate_list.n || ref_logits) && !n_cands) {
        fprintf(stderr, "lmq verify: --gate, --record and --reference-logits need an artefact besides the reference\n");
        return 2;
    }
    /* Outputs replace no input: checked before the long run, and again as they are written. */
    const char *inputs[MAX_ARTEFACTS + 3];
    memcpy(inputs, pos, (size_t)n * sizeof *pos);
    inputs[n] = ref;
    inputs[n + 1] = text;
    inputs[n + 2] = ref_logits;
    const char *outputs[MAX_ARTEFACTS + 5] = { json, md, html, save_logits, shard_out };
    char records[MAX_ARTEFACTS][600];
    int n_out = 5;
    for (int i = 0; record && i < n_cands; i++) {
        if (vr_path(cands[i], records[i], sizeof records[i], &err)) {
            fprintf(stderr, "lmq verify: %s\n", err.msg);
            return 1;
        }
        outputs[n_out++] = records[i];
    }
    const int bad = check_outputs(outputs, n_out, inputs, n + 3);
    if (bad)
        return bad;

    progress pr;
    progress_init(&pr, "verify");
    vf_run_opts vo = { .ctx = (int)ctx, .threads = (int)threads, .speed_only = speed_only, .bandwidth_gbps = bw,
                       .progress = on_progress, .user = &pr, .save_ref_logits = save_logits, .ref_logits = ref_logits,
                       .device = device, .batch = batch, .n_batch = n_batch, .prompt_len = (int)prompt_len,
                       .new_tokens = (int)new_tokens, .kv_k = cand_k, .kv_v = cand_v, .shard = shard,
                       .shards = shards, .shard_path = shard_out, .arith = arith };
    const double t0 = lmq_now();
    vf_report r;
    lmq_code c = vf_run(ref, cands, n_cands, text, &vo, &r, &err);
    progress_end(&pr);
    if (c) {
        fprintf(stderr, "lmq verify: %s\n", err.msg);
        return 1;
    }
    if (shards) {
        printf("%s: shard %d/%d, %lld of %lld windows, %d rows (%.2f s)\n", shard_out, shard, shards,
               (long long)vf_shard_windows(r.tokens / ctx, shard, shards), (long long)(r.tokens / ctx), n_cands + 1,
               lmq_now() - t0);
        free((void *)r.rows);
        return 0;
    }
    return emit(&r, gates, gate_list.n, json, md, html, record, t0);
}
