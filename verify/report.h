/* The side-by-side report of lmq verify: one row per artefact with the four measurements
 * (storage, reconstruction, behaviour, speed), as a terminal table, JSON or Markdown. */
#ifndef LMQ_VF_REPORT_H
#define LMQ_VF_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "common/err.h"
#include "formats/encoding.h"
#include "verify/gate.h"
#include "verify/metrics.h"

/* One batch size of the sweep: `seqs` sequences served together. */
#define VF_MAX_BATCH 8
typedef struct {
    int seqs, prompt, new_tokens;
    double ttft_s;    /* from the first prompt's start to the last prompt's first token (prefills in turn) */
    double token_ms;  /* per decode step, every sequence one token */
    double tokens_per_s; /* aggregate: seqs · new_tokens / decoding time */
} vf_batch;

typedef struct {
    char path[512];
    uint64_t file_checksum; /* the artefact's identity (its container's whole-file checksum) */
    char scheme[256];     /* what was done: the distinct encodings of its changed tensors, and "a8 token"
                             or "a8 tensor" when their inputs are quantised */
    double linear_bpw;    /* storage bits per weight over the linear layers */
    double model_bpw;     /* storage bits per weight over every tensor (the whole model) */
    double mib;           /* the whole artefact on disk */
    int n_changed;        /* tensors whose encoding is not fp32 */
    uint64_t calibration_checksum; /* of the text its calibrated methods were fitted on; 0: none */
    int on_calibration_text;       /* ... which is the text it is scored on: not held-out */
    int imported;         /* they came encoded (a plain conversion of a GGUF file, no recipe): their
                             error against fp32 weights is unknown, not 0 */
    int llama;            /* its matrices multiplied as llama.cpp does (vf_arith, vf_act) */
    int llama_groups;     /* ... lmq's g32 groups too (what an import keeps Q8_0 / Q4_0 as) */
    double err_median;    /* relative Frobenius error over the changed tensors */
    double err_worst;
    char worst[128];      /* the tensor with the worst error */
    vf_result res;
    double dppl_pct;      /* 100 (PPL / PPL_ref - 1) */
    double prefill_tps;   /* tokens/s evaluating one window of ctx tokens in a pass (a prompt) */
    double decode_tps;    /* tokens/s decoding one token at a time from the cache */
    double weight_mib;    /* stored weight matrices one decoded token reads (resident as mapped) */
    double read_gbps;     /* the bandwidth its roofline is taken against (see vf_report.bandwidth_gbps) */
    double roofline;      /* decode_tps · weight bytes / read_gbps: 1 = memory-bound limit */
    uint32_t gates_failed; /* bit g: the report's gates[g] failed on this row (vf_report_gate) */
    uint32_t gates_unknown; /* bit g: ... because the row has no value for its metric (JSON null) */
    vf_batch batch[VF_MAX_BATCH]; /* the batch sweep (vf_run_opts.batch), n_batch sizes */
    int n_batch;
    char kv_cache[16];    /* the KV cache's format (runtime/kv.h): "int8", or "K/V" ("int8/int4") */
    uint64_t kv_bytes_per_token; /* what the cache holds a token in, every layer, keys and values */
} vf_row;

typedef struct {
    const char *text;       /* the evaluation text's path; NULL when only speed was measured */
    int ctx, threads;
    const char *isa;        /* the kernel set */
    const char *device;     /* "cpu" or "cuda": where every forward pass ran */
    char device_desc[128];  /* the CUDA device ("" on the CPU) */
    double bandwidth_gbps;  /* bandwidth every roofline is taken against: given (--bandwidth), or the CUDA
                               device's copy bandwidth (lmq probe); 0: each row's own read_gbps, the rate
                               every thread reads that artefact's weights just before each decode */
    int64_t tokens;         /* stream length */
    int documents;
    uint64_t text_checksum; /* XXH3-64 of the text file */
    uint64_t tokens_checksum; /* XXH3-64 of the token stream (int32 ids; verify/ref_logits.h) */
    const char *ref_logits; /* the saved reference logits used instead of running the reference, or NULL */
    uint64_t ref_logits_checksum;
    const vf_row *rows;     /* rows[0] is the reference */
    int n_rows;
    const vf_gate *gates;   /* --gate conditions every other row must meet (set by the caller) */
    int n_gates;
} vf_report;

/* The file name of a path (after its last '/'), as the reports name artefacts. */
const char *vf_file_name(const char *path);
/* Code points in UTF-8 text: its width in columns ("±" is one column, two bytes). */
int vf_text_columns(const char *s);

/* Sets rows[0..n)'s results res[0..n) (the reference first), their ΔPPL and whether each is
 * scored on the text its calibrated methods were fitted on (text_checksum): what a single run
 * and a merge of shards share. */
void vf_rows_score(vf_row *rows, int n, const vf_result *res, uint64_t text_checksum);

/* How verify multiplies an artefact's matrices (lmq verify --arith): AUTO as llama.cpp does for
 * an imported artefact's GGUF block types and as stored for the rest (lmq's int8 / int4 g32 rows
 * too: an import of lmq's own export scores as the artefact it came from); EXACT as stored (fp32
 * activations unless its manifest quantises them); LLAMA as llama.cpp does for every artefact's
 * GGUF block types and, for an import, its g32 rows (its Q8_0 / Q4_0). */
typedef enum { VF_ARITH_AUTO = 0, VF_ARITH_EXACT, VF_ARITH_LLAMA } vf_arith;

/* The activations the row's artefact runs a tensor with (ndim, shape, weights q; stored: its
 * manifest's): with row->llama a matrix whose weights llama.cpp's vec_dot pairs with int8
 * activations (lmq_act_llama, with row->llama_groups lmq's g32 groups too) takes them per block
 * as there, any other tensor keeps stored. */
lmq_act vf_act(const vf_row *row, int ndim, const int64_t *shape, const lmq_qparams *q, lmq_act stored);

/* Reads what the row needs from an artefact's manifest and file (scheme, bpw, sizes, errors),
 * the matrices multiplied as arith says. */
lmq_code vf_row_from_artefact(const char *path, vf_arith arith, vf_row *row, lmq_err *err);

/* Row i as the JSON object of the report (also what a verification record stores, and what gates
 * read their metrics from): artefact (the file's base name, as the table shows it), path,
 * file_checksum, is_reference, the measurements, and pass / failed_gates when gates are set. */
json_t *vf_row_json(const vf_report *r, int i);

/* Parses gate s (verify/gate.h) over the metrics a report row has: the numeric fields of
 * vf_row_json. */
lmq_code vf_gate_parse(const char *s, vf_gate *g, lmq_err *err);
/* Sets every non-reference row's gates_failed from r->gates. */
void vf_report_gate(vf_report *r);
/* 1 when no row failed a gate. */
int vf_report_passed(const vf_report *r);

/* Checksums in reports and records: 16 lowercase hex digits, as manifests write them.
 * vf_hex_parse accepts exactly 16 hex digits (either case); returns 0 otherwise. */
void vf_hex(uint64_t v, char out[17]);
int vf_hex_parse(const char *s, uint64_t *v);
/* vf_hex's digits as a JSON string (NULL when out of memory). */
json_t *vf_hex_json(uint64_t v);

/* The report's tables as text cells, shared by every format. VF_TABLE_MAIN: one row per
 * artefact, the four measurements; VF_TABLE_KL: one row per candidate, llama-perplexity's
 * statistics (empty without candidates or without a text); VF_TABLE_BATCH: one row per artefact
 * and batch size of the sweep (empty without one). */
enum { VF_TABLE_MAIN, VF_TABLE_KL, VF_TABLE_BATCH, VF_TABLES };
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
