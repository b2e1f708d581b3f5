/* The side-by-side report of lmq verify: one row per artefact with the four measurements
 * (storage, reconstruction, behaviour, speed), as a terminal table, JSON or Markdown. */
#ifndef LMQ_VF_REPORT_H
#define LMQ_VF_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "common/err.h"
#include "verify/metrics.h"

typedef struct {
    char path[512];
    char scheme[256];     /* what was done: the distinct encodings of its changed tensors, and "a8 token"
                             or "a8 tensor" when their inputs are quantised */
    double linear_bpw;    /* storage bits per weight over the linear layers */
    double model_bpw;     /* storage bits per weight over every tensor (the whole model) */
    double mib;           /* the whole artefact on disk */
    int n_changed;        /* tensors whose encoding is not fp32 */
    double err_median;    /* relative Frobenius error over the changed tensors */
    double err_worst;
    char worst[128];      /* the tensor with the worst error */
    vf_result res;
    double dppl_pct;      /* 100 (PPL / PPL_ref - 1) */
    double prefill_tps;   /* tokens/s evaluating one window of ctx tokens in a pass (a prompt) */
    double decode_tps;    /* tokens/s decoding one token at a time from the cache */
    double weight_mib;    /* stored weight matrices one decoded token reads (resident as mapped) */
    double roofline;      /* decode_tps · weight bytes / read bandwidth: 1 = memory-bound limit */
} vf_row;

typedef struct {
    const char *text;       /* the evaluation text's path; NULL when only speed was measured */
    int ctx, threads;
    const char *isa;        /* the kernel set */
    double bandwidth_gbps;  /* read bandwidth the rooflines are taken against (lmq probe) */
    int64_t tokens;         /* stream length */
    int documents;
    const vf_row *rows;     /* rows[0] is the reference */
    int n_rows;
} vf_report;

/* The file name of a path (after its last '/'), as the reports name artefacts. */
const char *vf_file_name(const char *path);
/* Code points in UTF-8 text: its width in columns ("±" is one column, two bytes). */
int vf_text_columns(const char *s);

/* Reads what the row needs from an artefact's manifest and file (scheme, bpw, sizes, errors). */
lmq_code vf_row_from_artefact(const char *path, vf_row *row, lmq_err *err);

/* The report's tables as text cells, shared by every format. VF_TABLE_MAIN: one row per
 * artefact, the four measurements; VF_TABLE_KL: one row per candidate, llama-perplexity's
 * statistics (empty without candidates or without a text). */
enum { VF_TABLE_MAIN, VF_TABLE_KL, VF_TABLES };
#define VF_MAX_COLS 16
#define VF_CELL 600 /* holds any field of a row */
typedef struct {
    int rows, cols;  /* rows counts the heading (row 0); rows = 0: the table is empty */
    int left;        /* the first `left` columns are text (left-aligned), the rest numbers */
    const char *title, *caption; /* a heading, and what the table shows */
    char (*cell)[VF_MAX_COLS][VF_CELL];
} vf_grid;
/* Fills g (g->cell malloc'd; vf_grid_free) with table `which`. */
lmq_code vf_report_grid(const vf_report *r, int which, vf_grid *g, lmq_err *err);
void vf_grid_free(vf_grid *g);
/* Line i (0, 1, ...) of the text above the tables, into buf; returns 0 past the last line. */
int vf_report_header(const vf_report *r, int i, char *buf, size_t cap);

void vf_report_table(FILE *f, const vf_report *r);
void vf_report_markdown(FILE *f, const vf_report *r);
void vf_report_json(FILE *f, const vf_report *r);

#endif
