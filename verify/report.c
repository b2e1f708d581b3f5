#include "verify/report.h"

#include <ctype.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "formats/artefact.h"
#include "formats/container.h"
#include "formats/manifest.h"

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Appends name to the " + "-joined list in buf unless it is there already. */
static void add_scheme(char *buf, size_t cap, const char *name)
{
    for (const char *p = buf; (p = strstr(p, name)); p += strlen(name))
        if ((p == buf || p[-1] == ' ') && (p[strlen(name)] == '\0' || p[strlen(name)] == ' '))
            return;
    size_t n = strlen(buf);
    snprintf(buf + n, cap - n, "%s%s", n ? " + " : "", name);
}

lmq_act vf_act(const vf_row *row, int ndim, const int64_t *shape, const lmq_qparams *q, lmq_act stored)
{
    const lmq_act a = row->llama && ndim == 2 ? lmq_act_llama(q, shape[1], row->llama_groups) : (lmq_act){ 0 };
    return a.scheme != LMQ_ACT_NONE ? a : stored;
}

lmq_code vf_row_from_artefact(const char *path, vf_arith arith, vf_row *row, lmq_err *err)
{
    memset(row, 0, sizeof *row);
    snprintf(row->path, sizeof row->path, "%s", path);
    lmq_container c;
    lmq_manifest man;
    lmq_code rc = lmq_container_open_manifest(&c, &man, path, err);
    if (rc)
        return rc;
    row->mib = (double)c.size / (1024.0 * 1024.0);
    row->file_checksum = c.file_checksum;
    row->linear_bpw = man.totals.linear_bpw;
    row->calibration_checksum = man.calibration ? man.calibration_checksum : 0;
    uint64_t bits = 0;
    for (int i = 0; i < man.n_tensors; i++)
        bits += man.tensors[i].bits;
    row->model_bpw = man.totals.params ? (double)bits / (double)man.totals.params : 0;
    double *errs = malloc(((size_t)man.n_tensors + 1) * sizeof *errs);
    if (!errs) {
        rc = lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", path);
        goto done;
    }
    /* an import's tensors are all as it found them (imported, below, also wants one not fp32) */
    row->imported = !man.recipe;
    row->llama = arith == VF_ARITH_LLAMA || (arith == VF_ARITH_AUTO && row->imported);
    row->llama_groups = arith == VF_ARITH_LLAMA && row->imported;
    for (int i = 0; i < man.n_tensors; i++) {
        const lmq_manifest_tensor *t = &man.tensors[i];
        if (t->q.dtype == LMQ_T_F32)
            continue;
        const lmq_tensor_entry *e = lmq_container_find(&c, t->name);
        char act[32];
        lmq_act_describe(e ? vf_act(row, e->ndim, e->shape, &t->q, t->act) : t->act, t->q.dtype, act, sizeof act);
        add_scheme(row->scheme, sizeof row->scheme, t->scheme);
        if (*act)
            add_scheme(row->scheme, sizeof row->scheme, act);
        errs[row->n_changed++] = t->stats.rel_error;
        if (t->stats.rel_error >= row->err_worst) {
            row->err_worst = t->stats.rel_error;
            snprintf(row->worst, sizeof row->worst, "%s", t->name);
        }
    }
    row->imported = row->n_changed && !man.recipe;
    if (!row->n_changed)
        snprintf(row->scheme, sizeof row->scheme, "fp32");
    else if (row->imported) {
        char s[sizeof row->scheme];
        snprintf(s, sizeof s, "%s", row->scheme);
        snprintf(row->scheme, sizeof row->scheme, "imported %.*s", (int)sizeof s - 10, s);
    } else {
        qsort(errs, (size_t)row->n_changed, sizeof *errs, by_value);
        int h = row->n_changed / 2;
        row->err_median = row->n_changed % 2 ? errs[h] : 0.5 * (errs[h - 1] + errs[h]);
    }
    free(errs);
done:
    lmq_manifest_free(&man);
    lmq_container_close(&c);
    return rc;
}

const char *vf_file_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The columns of each table: heading, then how one row prints. The main table's last column,
 * the gates, shows only when there are gates. */
#define N_MAIN 16
static const char *const main_heads[N_MAIN] = { "artefact", "scheme",  "bpw lin", "bpw all",       "MiB",   "err med",
                                                "err max",  "PPL",     "dPPL %",  "top-1",         "KL mean", "KL p99",
                                                "tok/s pre/dec", "W MiB", "roofline", "gates" };

/* Gate g as it failed on w: its text, and "(unknown)" when w has no value for its metric. */
static void gate_failure(const vf_report *r, const vf_row *w, int g, char *out, size_t size)
{
    snprintf(out, size, "%s%s", r->gates[g].text, w->gates_unknown >> g & 1 ? " (unknown)" : "");
}

/* "PASS", or "FAIL" and the gates that failed; "ref" for the reference. */
static void gate_cell(const vf_report *r, int i, char *out)
{
    const vf_row *w = &r->rows[i];
    size_t n = (size_t)snprintf(out, VF_CELL, "%s", !i ? "ref" : w->gates_failed ? "FAIL" : "PASS");
    for (int g = 0; g < r->n_gates && n < VF_CELL; g++)
        if (i && w->gates_failed >> g & 1) {
            char f[sizeof r->gates[g].text + 16];
            gate_failure(r, w, g, f, sizeof f);
            n += (size_t)snprintf(out + n, VF_CELL - n, " %s", f);
        }
}

static void main_cells(const vf_report *r, int i, char out[][VF_CELL])
{
    const vf_row *w = &r->rows[i];
    snprintf(out[0], VF_CELL, "%s", vf_file_name(w->path));
    snprintf(out[1], VF_CELL, "%s", w->scheme);
    snprintf(out[2], VF_CELL, "%.3f", w->linear_bpw);
    snprintf(out[3], VF_CELL, "%.3f", w->model_bpw);
    snprintf(out[4], VF_CELL, "%.2f", w->mib);
    const int e = w->n_changed && !w->imported; /* errors known */
    snprintf(out[5], VF_CELL, e ? "%.4f" : "-", w->err_median);
    snprintf(out[6], VF_CELL, e ? "%.4f" : "-", w->err_worst);
    const int q = w->res.positions > 0; /* quality measured (not --speed-only) */
    snprintf(out[7], VF_CELL, q ? "%.4f" : "-", w->res.ppl);
    snprintf(out[8], VF_CELL, q ? "%+.3f" : "-", w->dppl_pct);
    snprintf(out[9], VF_CELL, q ? "%.4f" : "-", w->res.top1);
    snprintf(out[10], VF_CELL, q ? "%.3g" : "-", w->res.kl_mean);
    snprintf(out[11], VF_CELL, q ? "%.3g" : "-", w->res.kl_p99);
    const int sp = w->decode_tps > 0; /* speed measured (not a reference given by saved logits) */
    snprintf(out[12], VF_CELL, sp ? "%.0f/%.0f" : "-", w->prefill_tps, w->decode_tps);
    snprintf(out[13], VF_CELL, sp ? "%.2f" : "-", w->weight_mib);
    if (w->roofline > 0)
        snprintf(out[14], VF_CELL, "%.0f%% of %.0f GB/s", 100.0 * w->roofline, w->read_gbps);
    else
        snprintf(out[14], VF_CELL, "-");
    if (r->n_gates)
        gate_cell(r, i, out[15]);
}

/* llama-perplexity's statistics: fixed columns, then one per KL percentile level. */
enum { K_NAME, K_LNR, K_MEAN, K_PCT, K_MAX = K_PCT + VF_KL_LEVELS, K_TOP, K_DP, N_KL };

static void kl_heads(char out[][VF_CELL])
{
    snprintf(out[K_NAME], VF_CELL, "artefact");
    snprintf(out[K_LNR], VF_CELL, "ln(PPL/PPL ref)");
    snprintf(out[K_MEAN], VF_CELL, "KL mean");
    for (int k = 0; k < VF_KL_LEVELS; k++)
        snprintf(out[K_PCT + k], VF_CELL, k == VF_KL_MEDIAN ? "KL median" : "KL p%g", 100 * vf_kl_levels[k]);
    snprintf(out[K_MAX], VF_CELL, "KL max");
    snprintf(out[K_TOP], VF_CELL, "same top %%");
    snprintf(out[K_DP], VF_CELL, "RMS dp %%");
}

static void kl_cells(const vf_report *rep, int i, char out[][VF_CELL])
{
    const vf_row *w = &rep->rows[i];
    const vf_result *r = &w->res;
    snprintf(out[K_NAME], VF_CELL, "%s", vf_file_name(w->path));
    snprintf(out[K_LNR], VF_CELL, "%.6f ± %.6f", r->ln_ppl_ratio.value, r->ln_ppl_ratio.se);
    snprintf(out[K_MEAN], VF_CELL, "%.4g ± %.2g", r->kl_mean, r->kl_se);
    for (int k = 0; k < VF_KL_LEVELS; k++)
        snprintf(out[K_PCT + k], VF_CELL, "%.3g", r->kl_pct[k]);
    snprintf(out[K_MAX], VF_CELL, "%.3g", r->kl_max);
    snprintf(out[K_TOP], VF_CELL, "%.3f ± %.3f", 100 * r->top1, 100 * r->top1_se);
    snprintf(out[K_DP], VF_CELL, "%.3f ± %.3f", 100 * r->dp_rms.value, 100 * r->dp_rms.se);
}

/* The batch sweep: a row per artefact and batch size. */
static const char *const batch_heads[] = { "artefact", "batch", "prompt", "new", "TTFT ms", "ms/token", "tok/s" };
#define N_BATCH (int)(sizeof batch_heads / sizeof batch_heads[0])

static lmq_code batch_grid(const vf_report *r, vf_grid *g, lmq_err *err)
{
    int n = 0;
    for (int i = 0; i < r->n_rows; i++)
        n += r->rows[i].n_batch;
    *g = (vf_grid){ .cols = N_BATCH, .left = 1, .title = "Batch sweep",
                    .caption = "batch sweep: TTFT = the prompts prefilled in turn until the last has "
                               "its first token; ms/token = one decoding step of every sequence; tok/s = all "
                               "sequences' new tokens over the decoding time" };
    if (!n)
        return LMQ_OK;
    if (!(g->cell = calloc((size_t)n + 1, sizeof *g->cell)))
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory for a report of %d rows", n);
    g->rows = n + 1;
    for (int j = 0; j < N_BATCH; j++)
        snprintf(g->cell[0][j], VF_CELL, "%s", batch_heads[j]);
    int k = 1;
    for (int i = 0; i < r->n_rows; i++)
        for (int b = 0; b < r->rows[i].n_batch; b++, k++) {
            const vf_batch *v = &r->rows[i].batch[b];
            char(*c)[VF_CELL] = g->cell[k];
            snprintf(c[0], VF_CELL, "%s", vf_file_name(r->rows[i].path));
            snprintf(c[1], VF_CELL, "%d", v->seqs);
            snprintf(c[2], VF_CELL, "%d", v->prompt);
            snprintf(c[3], VF_CELL, "%d", v->new_tokens);
            snprintf(c[4], VF_CELL, "%.1f", 1e3 * v->ttft_s);
            snprintf(c[5], VF_CELL, "%.3f", v->token_ms);
            snprintf(c[6], VF_CELL, "%.1f", v->tokens_per_s);
        }
    return LMQ_OK;
}

lmq_code vf_report_grid(const vf_report *r, int which, vf_grid *g, lmq_err *err)
{
    if (which == VF_TABLE_BATCH)
        return batch_grid(r, g, err);
    const int kl = which == VF_TABLE_KL;
    /* The KL table compares candidates with the reference: none without both. */
    const int first = kl ? 1 : 0, n = kl && !r->text ? 0 : r->n_rows - first;
    *g = (vf_grid){ .cols = kl ? N_KL : r->n_gates ? N_MAIN : N_MAIN - 1, .left = kl ? 1 : 2,
                    .title = kl ? "Against the reference: llama-perplexity's statistics" : "Side by side",
                    .caption = kl ? "llama-perplexity --kl-divergence statistics against the reference (± one "
                                    "standard error; percentiles interpolate linearly between order statistics)"
                                  : "storage, reconstruction, behaviour and speed of every artefact" };
    if (n <= 0)
        return LMQ_OK;
    if (!(g->cell = calloc((size_t)n + 1, sizeof *g->cell)))
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory for a report of %d rows", n);
    g->rows = n + 1;
    if (kl)
        kl_heads(g->cell[0]);
    else
        for (int j = 0; j < g->cols; j++)
            snprintf(g->cell[0][j], VF_CELL, "%s", main_heads[j]);
    for (int i = 0; i < n; i++)
        (kl ? kl_cells : main_cells)(r, first + i, g->cell[i + 1]);
    return LMQ_OK;
}

void vf_grid_free(vf_grid *g)
{
    free(g->cell);
    g->cell = NULL;
    g->rows = 0;
}

int vf_report_header(const vf_report *r, int i, char *buf, size_t cap)
{
    const vf_result *ref = &r->rows[0].res;
    switch (i) {
    case 0:
        if (r->text)
            snprintf(buf, cap, "%s: %d documents, %lld tokens, ctx %d: %lld windows, %lld scored positions", r->text,
                     r->documents, (long long)r->tokens, r->ctx, (long long)ref->windows, (long long)ref->positions);
        else
            snprintf(buf, cap, "speed only, ctx %d", r->ctx);
        return 1;
    case 1:
        snprintf(buf, cap,
                 "reference %s (fp32 logits computed once); bpw lin = storage bits per weight over the linear "
                 "layers, bpw all = over every tensor; err = relative Frobenius error of the changed tensors; "
                 "KL(P_ref || P) in nats per position",
                 vf_file_name(r->rows[0].path));
        return 1;
    case 2:
        if (r->device && !strcmp(r->device, "cuda"))
            snprintf(buf, cap,
                     "speed on cuda (%s); prefill = one pass over ctx tokens, decode = one token at a time; "
                     "W MiB = stored weights read per decoded token; roofline = decode tok/s × those bytes / %.1f "
                     "GB/s device copy bandwidth ('-' where they fit in its L2 cache)",
                     r->device_desc, r->bandwidth_gbps);
        else
            snprintf(buf, cap,
                     "speed: %d thread%s, kernels %s; prefill = one pass over ctx tokens, decode = one token at a "
                     "time; W MiB = stored weights read per decoded token; roofline = decode tok/s × those bytes / "
                     "%s ('-' where they fit in the last-level cache)",
                     r->threads, r->threads == 1 ? "" : "s", r->isa,
                     r->bandwidth_gbps > 0 ? "the read bandwidth given"
                                           : "the rate every thread read the same bytes just before the decode");
        return 1;
    default:
        return 0;
    }
}

static void header_lines(FILE *f, const vf_report *r)
{
    char line[2048];
    for (int i = 0; vf_report_header(r, i, line, sizeof line); i++)
        fprintf(f, "%s\n", line);
}

int vf_text_columns(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

static void text_table(FILE *f, const vf_grid *g)
{
    int width[VF_MAX_COLS] = { 0 };
    for (int i = 0; i < g->rows; i++)
        for (int j = 0; j < g->cols; j++)
            if (vf_text_columns(g->cell[i][j]) > width[j])
                width[j] = vf_text_columns(g->cell[i][j]);
    for (int i = 0; i < g->rows; i++) {
        for (int j = 0; j < g->cols; j++) {
            const char *c = g->cell[i][j];
            const int pad = width[j] - vf_text_columns(c);
            fprintf(f, "%s%*s%s%*s", j ? "  " : "", j < g->left ? 0 : pad, "", c, j < g->left ? pad : 0, "");
        }
        fputc('\n', f);
    }
}

static void markdown_table(FILE *f, const vf_grid *g)
{
    for (int i = 0; i < g->rows; i++) {
        for (int j = 0; j < g->cols; j++)
            fprintf(f, "| %s ", g->cell[i][j]);
        fputs("|\n", f);
        if (i == 0) {
            for (int j = 0; j < g->cols; j++)
                fputs(j < g->left ? "| --- " : "| ---: ", f);
            fputs("|\n", f);
        }
    }
}

/* The header, then every non-empty table; the tables after the first with their caption.
 * Markdown needs a blank line before each table. */
static void tables(FILE *f, const vf_report *r, int markdown)
{
    header_lines(f, r);
    for (int t = 0; t < VF_TABLES; t++) {
        vf_grid g;
        if (vf_report_grid(r, t, &g, NULL) || !g.rows)
            continue;
        if (t)
            fprintf(f, "\n%s:\n", g.caption);
        if (markdown)
            fputc('\n', f);
        (markdown ? markdown_table : text_table)(f, &g);
        vf_grid_free(&g);
    }
    for (int i = 0; i < r->n_rows; i++)
        if (r->rows[i].on_calibration_text)
            fprintf(f, "%swarning: %s was calibrated on this text: its scores are not held-out\n", markdown ? "\n" : "",
                    vf_file_name(r->rows[i].path));
}

void vf_report_table(FILE *f, const vf_report *r)
{
    tables(f, r, 0);
}

void vf_report_markdown(FILE *f, const vf_report *r)
{
    tables(f, r, 1);
}

void vf_hex(uint64_t v, char out[17])
{
    snprintf(out, 17, "%016" PRIx64, v);
}

int vf_hex_parse(const char *s, uint64_t *v)
{
    *v = 0;
    for (int i = 0; i < 16; i++) {
        if (!s || !isxdigit((unsigned char)s[i]))
            return 0;
        *v = *v << 4 | (uint64_t)(isdigit((unsigned char)s[i]) ? s[i] - '0' : (s[i] | 0x20) - 'a' + 10);
    }
    return s[16] == '\0';
}

json_t *vf_hex_json(uint64_t v)
{
    char h[17];
    vf_hex(v, h);
    return json_string(h);
}

/* llama-perplexity's statistics of one row; kl_percentiles is keyed by the level in percent. */
static json_t *kl_stats_json(const vf_result *res)
{
    json_t *pct = json_object();
    for (int k = 0; k < VF_KL_LEVELS; k++) {
        char key[16];
        snprintf(key, sizeof key, "%g", 100 * vf_kl_levels[k]);
        json_object_set_new(pct, key, json_real(res->kl_pct[k]));
    }
    return json_pack("{s:f, s:o, s:f, s:f, s:f, s:f, s:f, s:f}", "kl_se", res->kl_se, "kl_percentiles", pct, "kl_max",
                     res->kl_max, "top1_se", res->top1_se, "rms_dp", res->dp_rms.value, "rms_dp_se", res->dp_rms.se,
                     "ln_ppl_ratio", res->ln_ppl_ratio.value, "ln_ppl_ratio_se", res->ln_ppl_ratio.se);
}

void vf_rows_score(vf_row *rows, int n, const vf_result *res, uint64_t text_checksum)
{
    for (int i = 0; i < n; i++) {
        rows[i].on_calibration_text = rows[i].calibration_checksum && rows[i].calibration_checksum == text_checksum;
        rows[i].res = res[i];
        rows[i].dppl_pct = 100.0 * (res[i].ppl / res[0].ppl - 1.0);
    }
}

json_t *vf_row_json(const vf_report *r, int i)
{
    const vf_row *w = &r->rows[i];
    /* No roofline (weights in the cache, or no rate): unknown, not zero, so a gate on it fails as unknown. */
    json_t *roofline = w->roofline > 0 ? json_real(w->roofline) : json_null();
    /* An imported artefact's errors against fp32 are unknown: null, as the table's '-'. */
    json_t *err_med = w->imported ? json_null() : json_real(w->err_median);
    json_t *err_max = w->imported ? json_null() : json_real(w->err_worst);
    json_t *o = json_pack("{s:s, s:s, s:o, s:b, s:s, s:f, s:f, s:i, s:o, s:o, s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:f, "
                          "s:f, s:f, s:o}",
                          "artefact", vf_file_name(w->path), "path", w->path, "file_checksum",
                          vf_hex_json(w->file_checksum), "is_reference", i == 0, "scheme", w->scheme, "linear_bpw",
                          w->linear_bpw, "mib", w->mib,
                          "changed_tensors", w->n_changed, "rel_error_median", err_med, "rel_error_worst",
                          err_max, "worst_tensor", w->worst, "ppl", w->res.ppl, "nll", w->res.nll, "dppl_pct",
                          w->dppl_pct, "top1", w->res.top1, "kl_mean", w->res.kl_mean, "kl_p99", w->res.kl_p99,
                          "prefill_tokens_per_s", w->prefill_tps, "decode_tokens_per_s", w->decode_tps, "weight_mib",
                          w->weight_mib, "decode_roofline", roofline);
    if (o && w->read_gbps > 0)
        json_object_set_new(o, "read_gbps", json_real(w->read_gbps));
    if (o) {
        json_object_set_new(o, "model_bpw", json_real(w->model_bpw));
        json_object_set_new(o, "kv_cache", json_string(w->kv_cache));
        json_object_set_new(o, "kv_bytes_per_token", json_integer((json_int_t)w->kv_bytes_per_token));
        json_object_set_new(o, "scored_on_calibration_text", json_boolean(w->on_calibration_text));
        if (r->text)
            json_object_update_new(o, kl_stats_json(&w->res));
    }
    if (o && w->n_batch) {
        json_t *sweep = json_array();
        for (int b = 0; b < w->n_batch; b++) {
            const vf_batch *v = &w->batch[b];
            json_array_append_new(sweep, json_pack("{s:i, s:i, s:i, s:f, s:f, s:f}", "batch", v->seqs, "prompt_tokens",
                                                   v->prompt, "new_tokens", v->new_tokens, "ttft_s", v->ttft_s,
                                                   "token_ms", v->token_ms, "tokens_per_s", v->tokens_per_s));
        }
        json_object_set_new(o, "batch_sweep", sweep);
    }
    if (o && r->n_gates && i > 0) {
        json_t *failed = json_array();
        for (int g = 0; g < r->n_gates; g++)
            if (w->gates_failed >> g & 1) {
                char f[sizeof r->gates[g].text + 16];
                gate_failure(r, w, g, f, sizeof f);
                json_array_append_new(failed, json_string(f));
            }
        json_object_set_new(o, "pass", json_boolean(!w->gates_failed));
        json_object_set_new(o, "failed_gates", failed);
    }
    return o;
}

lmq_code vf_gate_parse(const char *s, vf_gate *g, lmq_err *err)
{
    vf_row blank = { .path = "" };
    const vf_report r = { .rows = &blank, .n_rows = 1 };
    json_t *metrics = vf_row_json(&r, 0);
    if (!metrics)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    lmq_code c = vf_gate_parse_over(s, metrics, g, err);
    json_decref(metrics);
    return c;
}

void vf_report_gate(vf_report *r)
{
    vf_row *rows = (vf_row *)r->rows;
    for (int i = 1; i < r->n_rows; i++) {
        json_t *o = vf_row_json(r, i);
        rows[i].gates_failed = rows[i].gates_unknown = 0;
        for (int g = 0; g < r->n_gates; g++) {
            if (!vf_gate_holds(&r->gates[g], o))
                rows[i].gates_failed |= 1u << g;
            if (json_is_null(json_object_get(o, r->gates[g].metric)))
                rows[i].gates_unknown |= 1u << g;
        }
        json_decref(o);
    }
}

int vf_report_passed(const vf_report *r)
{
    for (int i = 1; i < r->n_rows; i++)
        if (r->rows[i].gates_failed)
            return 0;
    return 1;
}

void vf_report_json(FILE *f, const vf_report *r)
{
    const vf_result *ref = &r->rows[0].res;
    json_t *rows = json_array();
    for (int i = 0; i < r->n_rows; i++)
        json_array_append_new(rows, vf_row_json(r, i));
    json_t *doc = json_pack("{s:s, s:s, s:s?, s:o, s:i, s:i, s:s, s:f, s:I, s:i, s:I, s:I, s:f, s:s, s:o}",
                            "tool_version", LMQ_TOOL_VERSION, "protocol", "P1", "text", r->text, "text_checksum",
                            r->text ? vf_hex_json(r->text_checksum) : json_null(), "ctx", r->ctx, "threads", r->threads,
                            "kernels", r->isa, "read_gbps", r->bandwidth_gbps, "tokens", (json_int_t)r->tokens,
                            "documents", r->documents, "windows", (json_int_t)ref->windows, "positions",
                            (json_int_t)ref->positions, "ppl", ref->ppl, "reference", vf_file_name(r->rows[0].path),
                            "rows", rows);
    json_object_set_new(doc, "device", json_string(r->device ? r->device : "cpu"));
    if (r->device_desc[0]) { /* read_gbps then holds the device's copy bandwidth, named for what it is */
        json_object_set_new(doc, "device_name", json_string(r->device_desc));
        json_object_set_new(doc, "copy_gbps", json_real(r->bandwidth_gbps));
    }
    if (r->ref_logits)
        json_object_set_new(doc, "reference_logits",
                            json_pack("{s:s, s:o}", "path", r->ref_logits, "checksum",
                                      vf_hex_json(r->ref_logits_checksum)));
    if (r->n_gates) {
        json_t *gates = json_array();
        for (int g = 0; g < r->n_gates; g++)
            json_array_append_new(gates, json_string(r->gates[g].text));
        json_object_set_new(doc, "gates", gates);
        json_object_set_new(doc, "pass", json_boolean(vf_report_passed(r)));
    }
    json_dumpf(doc, f, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    fputc('\n', f);
    json_decref(doc);
}
