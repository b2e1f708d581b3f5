/* lmq verify: perplexity (protocol P1) of one artefact, or a side-by-side report of several
 * against a reference: storage, reconstruction error, PPL, top-1 agreement, KL and speed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/file.h"
#include "common/pool.h"
#include "tools/args.h"
#include "tools/cmd.h"
#include "tools/progress.h"
#include "verify/html.h"
#include "verify/run.h"

static const char usage[] =
    "usage: lmq verify A.lmq [B.lmq ...] --text FILE [--reference REF.lmq] [--ctx N] [--threads N]\n"
    "                  [--json FILE] [--markdown FILE] [--html FILE] [--speed-only] [--bandwidth GBPS]\n"
    "Scores every artefact on FILE by protocol P1 (windows of N tokens, default 256, each from an\n"
    "empty cache). The reference (default: the first artefact) is run once; every other artefact\n"
    "is compared with it: top-1 agreement and KL(P_ref || P) per position. Then measures each\n"
    "artefact's speed on its packed weights: prefill (one pass over N tokens) and decode (one token\n"
    "at a time), and decode's fraction of the memory roofline (weight bytes per token over the\n"
    "read bandwidth, probed at start unless --bandwidth gives it in GB/s). --speed-only skips the\n"
    "scoring (no --text needed). Prints a table; --json and --markdown write the same report to files,\n"
    "--html one self-contained page with it and its plots (inline SVG; no script or network).\n";

#define MAX_ARTEFACTS 256

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

int cmd_verify(int argc, char **argv)
{
    const char *text = NULL, *ref = NULL, *ctx_s = "256", *threads_s = "0", *json = NULL, *md = NULL, *html = NULL;
    const char *bw_s = "0", *pos[MAX_ARTEFACTS];
    int n, speed_only = 0;
    const arg_opt opts[] = { { "--text", "-t", &text, NULL },      { "--reference", NULL, &ref, NULL },
                             { "--ctx", NULL, &ctx_s, NULL },      { "--threads", NULL, &threads_s, NULL },
                             { "--json", NULL, &json, NULL },      { "--markdown", NULL, &md, NULL },
                             { "--speed-only", NULL, NULL, &speed_only }, { "--bandwidth", NULL, &bw_s, NULL },
                             { "--html", NULL, &html, NULL },
                             { 0 } };
    int rc = args_parse(argc, argv, opts, pos, MAX_ARTEFACTS, &n, usage);
    if (rc >= 0)
        return rc;
    long ctx, threads;
    double bw;
    if (!args_int("verify", "--ctx", ctx_s, 2, 1 << 20, &ctx) || !args_int("verify", "--threads", threads_s, 0, LMQ_POOL_MAX_THREADS, &threads) ||
        !args_double("verify", "--bandwidth", bw_s, 0, 1e6, &bw))
        return 2;
    if ((!text && !speed_only) || (n == 0 && !ref)) {
        fprintf(stderr, "lmq verify: need at least one artefact and --text FILE\n%s", usage);
        return 2;
    }
    const char *reports[] = { json, md, html };
    /* Reports replace no input: checked before the long run, and again as they are written. */
    const char *inputs[MAX_ARTEFACTS + 2];
    memcpy(inputs, pos, (size_t)n * sizeof *pos);
    inputs[n] = ref;
    inputs[n + 1] = text;
    lmq_err err;
    for (int i = 0; i < 3; i++)
        if (reports[i] && lmq_output_check(reports[i], inputs, n + 2, &err)) {
            fprintf(stderr, "lmq verify: %s\n", err.msg);
            return 1;
        }
    /* The reference first; candidates are the others, each once. */
    const char *cands[MAX_ARTEFACTS];
    int n_cands = 0;
    if (!ref)
        ref = pos[0];
    for (int i = 0; i < n; i++)
        if (strcmp(pos[i], ref) != 0)
            cands[n_cands++] = pos[i];

    progress pr;
    progress_init(&pr, "verify");
    vf_run_opts vo = { .ctx = (int)ctx, .threads = (int)threads, .speed_only = speed_only, .bandwidth_gbps = bw,
                       .progress = on_progress, .user = &pr };
    const double t0 = lmq_now();
    vf_report r;
    lmq_code c = vf_run(ref, cands, n_cands, text, &vo, &r, &err);
    progress_end(&pr);
    if (c) {
        fprintf(stderr, "lmq verify: %s\n", err.msg);
        return 1;
    }
    vf_report_table(stdout, &r);
    printf("time: %.2f s\n", lmq_now() - t0);
    int ok = (!json || write_report(json, vf_report_json, &r)) && (!md || write_report(md, vf_report_markdown, &r)) &&
             (!html || write_report(html, vf_report_html, &r));
    free((void *)r.rows);
    return ok ? 0 : 1;
}
