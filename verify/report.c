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
    row->file_checksum = c.file_checksum;
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
#define N_COLS 15
#define CELL 600 /* holds any field of a row */
static const char *const heads[N_COLS] = { "artefact", "scheme",   "bpw",   "MiB",    "err med", "err max",
                                           "PPL",      "dPPL %",   "top-1", "KL mean", "KL p99", "tok/s pre/dec",
                                           "W MiB",    "roofline", "gates" };

/* The last column, the gates, shows only when there are gates. */
static int n_cols(const vf_report *r)
{
    return r->n_gates ? N_COLS : N_COLS - 1;
}

/* "PASS", or "FAIL" and the gates that failed; "ref" for the reference. */
static void gate_cell(const vf_report *r, int i, char *out)
{
    const vf_row *w = &r->rows[i];
    size_t n = (size_t)snprintf(out, CELL, "%s", !i ? "ref" : w->gates_failed ? "FAIL" : "PASS");
    for (int g = 0; g < r->n_gates && n < CELL; g++)
        if (i && w->gates_failed >> g & 1)
            n += (size_t)snprintf(out + n, CELL - n, " %s", r->gates[g].text);
}

static void cells(const vf_report *r, int i, char out[N_COLS][CELL])
{
    const vf_row *w = &r->rows[i];
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
    const int s = w->decode_tps > 0; /* speed measured (not a reference given by saved logits) */
    snprintf(out[11], CELL, s ? "%.0f/%.0f" : "-", w->prefill_tps, w->decode_tps);
    snprintf(out[12], CELL, s ? "%.2f" : "-", w->weight_mib);
    snprintf(out[13], CELL, w->roofline > 0 ? "%.0f%%" : "-", 100.0 * w->roofline);
    gate_cell(r, i, out[14]);
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
    const int nc = n_cols(r);
    int width[N_COLS];
    for (int j = 0; j < nc; j++)
        width[j] = (int)strlen(heads[j]);
    for (int i = 0; i < r->n_rows; i++) {
        cells(r, i, c[i]);
        for (int j = 0; j < nc; j++)
            if ((int)strlen(c[i][j]) > width[j])
                width[j] = (int)strlen(c[i][j]);
    }
    header_lines(f, r, "");
    for (int i = -1; i < r->n_rows; i++) { /* the heading, then the rows */
        for (int j = 0; j < nc; j++)
            fprintf(f, j < 2 || j == N_COLS - 1 ? "%s%-*s" : "%s%*s", j ? "  " : "", j == N_COLS - 1 ? 0 : width[j],
                    i < 0 ? heads[j] : c[i][j]);
        fputc('\n', f);
    }
    free(c);
}

void vf_report_markdown(FILE *f, const vf_report *r)
{
    const int nc = n_cols(r);
    header_lines(f, r, "");
    fputc('\n', f);
    for (int j = 0; j < nc; j++)
        fprintf(f, "| %s ", heads[j]);
    fputs("|\n", f);
    for (int j = 0; j < nc; j++)
        fputs(j < 2 || j == N_COLS - 1 ? "| --- " : "| ---: ", f);
    fputs("|\n", f);
    for (int i = 0; i < r->n_rows; i++) {
        char c[N_COLS][CELL];
        cells(r, i, c);
        for (int j = 0; j < nc; j++)
            fprintf(f, "| %s ", c[j]);
        fputs("|\n", f);
    }
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

static json_t *hex_json(uint64_t v)
{
    char h[17];
    vf_hex(v, h);
    return json_string(h);
}

json_t *vf_row_json(const vf_report *r, int i)
{
    const vf_row *w = &r->rows[i];
    json_t *o = json_pack("{s:s, s:s, s:o, s:b, s:s, s:f, s:f, s:i, s:f, s:f, s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:f, "
                          "s:f, s:f, s:f}",
                          "artefact", base(w->path), "path", w->path, "file_checksum", hex_json(w->file_checksum),
                          "is_reference", i == 0, "scheme", w->scheme, "linear_bpw", w->linear_bpw, "mib", w->mib,
                          "changed_tensors", w->n_changed, "rel_error_median", w->err_median, "rel_error_worst",
                          w->err_worst, "worst_tensor", w->worst, "ppl", w->res.ppl, "nll", w->res.nll, "dppl_pct",
                          w->dppl_pct, "top1", w->res.top1, "kl_mean", w->res.kl_mean, "kl_p99", w->res.kl_p99,
                          "prefill_tokens_per_s", w->prefill_tps, "decode_tokens_per_s", w->decode_tps, "weight_mib",
                          w->weight_mib, "decode_roofline", w->roofline);
    if (o && r->n_gates && i > 0) {
        json_t *failed = json_array();
        for (int g = 0; g < r->n_gates; g++)
            if (w->gates_failed >> g & 1)
                json_array_append_new(failed, json_string(r->gates[g].text));
        json_object_set_new(o, "pass", json_boolean(!w->gates_failed));
        json_object_set_new(o, "failed_gates", failed);
    }
    return o;
}

void vf_report_gate(vf_report *r)
{
    vf_row *rows = (vf_row *)r->rows;
    for (int i = 1; i < r->n_rows; i++) {
        json_t *o = vf_row_json(r, i);
        rows[i].gates_failed = 0;
        for (int g = 0; g < r->n_gates; g++)
            if (!vf_gate_holds(&r->gates[g], o))
                rows[i].gates_failed |= 1u << g;
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
    json_t *doc = json_pack("{s:s, s:s, s:s?, s:o, s:i, s:i, s:s, s:f, s:I, s:i, s:I, s:I, s:f, s:s, s:o}", "tool_version",
                            LMQ_TOOL_VERSION, "protocol", "P1", "text", r->text, "text_checksum",
                            r->text ? hex_json(r->text_checksum) : json_null(), "ctx", r->ctx, "threads", r->threads,
                            "kernels", r->isa, "read_gbps", r->bandwidth_gbps, "tokens", (json_int_t)r->tokens,
                            "documents", r->documents, "windows", (json_int_t)ref->windows, "positions",
                            (json_int_t)ref->positions, "ppl", ref->ppl, "reference", base(r->rows[0].path), "rows", rows);
    if (r->ref_logits)
        json_object_set_new(doc, "reference_logits",
                            json_pack("{s:s, s:o}", "path", r->ref_logits, "checksum", hex_json(r->ref_logits_checksum)));
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
