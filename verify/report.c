#include "verify/report.h"

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

lmq_code vf_row_from_artefact(const char *path, vf_row *row, lmq_err *err)
{
    memset(row, 0, sizeof *row);
    snprintf(row->path, sizeof row->path, "%s", path);
    lmq_container c;
    lmq_manifest man;
    lmq_code rc = lmq_container_open_manifest(&c, &man, path, err);
    if (rc)
        return rc;
    row->mib = (double)c.size / (1024.0 * 1024.0);
    row->linear_bpw = man.totals.linear_bpw;
    double *errs = malloc(((size_t)man.n_tensors + 1) * sizeof *errs);
    if (!errs) {
        rc = lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", path);
        goto done;
    }
    for (int i = 0; i < man.n_tensors; i++) {
        const lmq_manifest_tensor *t = &man.tensors[i];
        if (t->q.dtype == LMQ_T_F32)
            continue;
        char act[32];
        lmq_act_describe(t->act, act, sizeof act);
        add_scheme(row->scheme, sizeof row->scheme, t->scheme);
        if (*act)
            add_scheme(row->scheme, sizeof row->scheme, act);
        errs[row->n_changed++] = t->stats.rel_error;
        if (t->stats.rel_error >= row->err_worst) {
            row->err_worst = t->stats.rel_error;
            snprintf(row->worst, sizeof row->worst, "%s", t->name);
        }
    }
    if (!row->n_changed)
        snprintf(row->scheme, sizeof row->scheme, "fp32");
    else {
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

static const char *base(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The columns, shared by the table and Markdown: heading, then how one row prints. */
#define N_COLS 14
#define CELL 600 /* holds any field of a row */
static const char *const heads[N_COLS] = { "artefact", "scheme",   "bpw",   "MiB",    "err med", "err max",
                                           "PPL",      "dPPL %",   "top-1", "KL mean", "KL p99", "tok/s pre/dec",
                                           "W MiB",    "roofline" };

static void cells(const vf_row *w, char out[N_COLS][CELL])
{
    snprintf(out[0], CELL, "%s", base(w->path));
    snprintf(out[1], CELL, "%s", w->scheme);
    snprintf(out[2], CELL, "%.3f", w->linear_bpw);
    snprintf(out[3], CELL, "%.2f", w->mib);
    snprintf(out[4], CELL, w->n_changed ? "%.4f" : "-", w->err_median);
    snprintf(out[5], CELL, w->n_changed ? "%.4f" : "-", w->err_worst);
    const int q = w->res.positions > 0; /* quality measured (not --speed-only) */
    snprintf(out[6], CELL, q ? "%.4f" : "-", w->res.ppl);
    snprintf(out[7], CELL, q ? "%+.3f" : "-", w->dppl_pct);
    snprintf(out[8], CELL, q ? "%.4f" : "-", w->res.top1);
    snprintf(out[9], CELL, q ? "%.3g" : "-", w->res.kl_mean);
    snprintf(out[10], CELL, q ? "%.3g" : "-", w->res.kl_p99);
    snprintf(out[11], CELL, "%.0f/%.0f", w->prefill_tps, w->decode_tps);
    snprintf(out[12], CELL, "%.2f", w->weight_mib);
    snprintf(out[13], CELL, w->roofline > 0 ? "%.0f%%" : "-", 100.0 * w->roofline);
}

static void header_lines(FILE *f, const vf_report *r, const char *prefix)
{
    const vf_result *ref = &r->rows[0].res;
    if (r->text)
        fprintf(f, "%s%s: %d documents, %lld tokens, ctx %d: %lld windows, %lld scored positions\n", prefix, r->text,
                r->documents, (long long)r->tokens, r->ctx, (long long)ref->windows, (long long)ref->positions);
    else
        fprintf(f, "%sspeed only, ctx %d\n", prefix, r->ctx);
    fprintf(f, "%sreference %s (fp32 logits computed once); bpw over the linear layers; err = relative Frobenius "
               "error of the changed tensors; KL(P_ref || P) in nats per position\n",
            prefix, base(r->rows[0].path));
    fprintf(f, "%sspeed: %d thread%s, kernels %s; prefill = one pass over ctx tokens, decode = one token at a time; "
               "W MiB = stored weights read per decoded token; roofline = decode tok/s × those bytes / %.1f GB/s "
               "read bandwidth ('-' where they fit in the last-level cache)\n", prefix, r->threads, r->threads == 1 ? "" : "s", r->isa, r->bandwidth_gbps);
}

void vf_report_table(FILE *f, const vf_report *r)
{
    char (*c)[N_COLS][CELL] = calloc((size_t)r->n_rows, sizeof *c);
    if (!c)
        return;
    int width[N_COLS];
    for (int j = 0; j < N_COLS; j++)
        width[j] = (int)strlen(heads[j]);
    for (int i = 0; i < r->n_rows; i++) {
        cells(&r->rows[i], c[i]);
        for (int j = 0; j < N_COLS; j++)
            if ((int)strlen(c[i][j]) > width[j])
                width[j] = (int)strlen(c[i][j]);
    }
    header_lines(f, r, "");
    for (int i = -1; i < r->n_rows; i++) { /* the heading, then the rows */
        for (int j = 0; j < N_COLS; j++)
            fprintf(f, j < 2 ? "%s%-*s" : "%s%*s", j ? "  " : "", width[j], i < 0 ? heads[j] : c[i][j]);
        fputc('\n', f);
    }
    free(c);
}

void vf_report_markdown(FILE *f, const vf_report *r)
{
    header_lines(f, r, "");
    fputc('\n', f);
    for (int j = 0; j < N_COLS; j++)
        fprintf(f, "| %s ", heads[j]);
    fputs("|\n", f);
    for (int j = 0; j < N_COLS; j++)
        fputs(j < 2 ? "| --- " : "| ---: ", f);
    fputs("|\n", f);
    for (int i = 0; i < r->n_rows; i++) {
        char c[N_COLS][CELL];
        cells(&r->rows[i], c);
        for (int j = 0; j < N_COLS; j++)
            fprintf(f, "| %s ", c[j]);
        fputs("|\n", f);
    }
}

void vf_report_json(FILE *f, const vf_report *r)
{
    const vf_result *ref = &r->rows[0].res;
    json_t *rows = json_array();
    for (int i = 0; i < r->n_rows; i++) {
        const vf_row *w = &r->rows[i];
        json_array_append_new(
            rows, json_pack("{s:s, s:s, s:f, s:f, s:i, s:f, s:f, s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "artefact",
                            w->path, "scheme", w->scheme, "linear_bpw", w->linear_bpw, "mib", w->mib, "changed_tensors",
                            w->n_changed, "rel_error_median", w->err_median, "rel_error_worst", w->err_worst,
                            "worst_tensor", w->worst, "ppl", w->res.ppl, "nll", w->res.nll, "dppl_pct", w->dppl_pct,
                            "top1", w->res.top1, "kl_mean", w->res.kl_mean, "kl_p99", w->res.kl_p99,
                            "prefill_tokens_per_s", w->prefill_tps, "decode_tokens_per_s", w->decode_tps));
        json_object_set_new(json_array_get(rows, (size_t)i), "weight_mib", json_real(w->weight_mib));
        json_object_set_new(json_array_get(rows, (size_t)i), "decode_roofline", json_real(w->roofline));
    }
    json_t *doc = json_pack("{s:s, s:s?, s:i, s:i, s:s, s:f, s:I, s:i, s:I, s:I, s:f, s:o}", "protocol", "P1", "text",
                            r->text, "ctx", r->ctx, "threads", r->threads, "kernels", r->isa, "read_gbps",
                            r->bandwidth_gbps, "tokens", (json_int_t)r->tokens, "documents", r->documents, "windows",
                            (json_int_t)ref->windows, "positions", (json_int_t)ref->positions, "ppl", ref->ppl, "rows",
                            rows);
    json_dumpf(doc, f, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    fputc('\n', f);
    json_decref(doc);
}
