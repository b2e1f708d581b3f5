/* The artefact manifest: what was done to each tensor, where the model came from, and the
 * totals. The pipeline fills the struct; it is stored in the container as YAML (keys and
 * rules in manifests/schema.md) and parsed back by readers and `lmq audit`. */
#ifndef LMQ_MANIFEST_H
#define LMQ_MANIFEST_H

#include <stdint.h>

#include "common/err.h"
#include "common/stats.h"
#include "formats/container.h"
#include "formats/dtype.h"
#include "formats/model.h"

#define LMQ_TOOL_VERSION "lmq 0.1.0"
#define LMQ_SCHEME_MAX 64
#define LMQ_REASON_MAX 256

/* How a tensor's codes were chosen: round to nearest, or a calibrated method (calibrate/). */
typedef enum {
    LMQ_METHOD_RTN = 0,
    LMQ_METHOD_GPTQ = 1,
    LMQ_METHOD_AWQ = 2,
    LMQ_METHOD_IMATRIX = 3, /* GGUF block encodings: the scale search weighted by mean x² per input */
    LMQ_METHOD_COUNT
} lmq_method;
extern const char *const lmq_method_names[LMQ_METHOD_COUNT];

/* What the calibrate stage did to one tensor; all zero (and absent from the YAML) when nothing. */
typedef struct {
    lmq_method method;
    double damp, damp_used;     /* gptq: the damping asked for, and the one Cholesky accepted */
    uint32_t block;             /* gptq: columns per lazy block */
    int act_order;              /* gptq: columns in decreasing order of the Hessian's diagonal */
    double awq_ratio;           /* awq: the exponent r of s = mean|x|^r chosen for this input */
    double clip_mean, clip_min; /* awq: the clip ratios chosen over the tensor's groups */
    double smooth_alpha;        /* SmoothQuant's alpha when it scaled this tensor's input columns */
    char note[LMQ_REASON_MAX];  /* what a method could not do here, and why */
    double out_error_rtn;       /* relative output error on the calibration inputs with RTN, */
    double out_error;           /* and as stored: |X(W' - W)ᵀ|² / |XWᵀ|² */
} lmq_manifest_calib;

typedef struct {
    char name[LMQ_NAME_MAX];     /* as in the index */
    char scheme[LMQ_SCHEME_MAX]; /* the encoding as q_describe names it: "fp32", "int4 g32 asym" */
    lmq_qparams q;               /* dtype, granularity, asymmetry, group: equal to the index entry */
    int linear;                  /* a 2-D projection inside a block (lmq_is_linear) */
    uint64_t bits;               /* exact storage bits (codes, scales, zero points) before the
                                    last byte's padding: lmq_layout.bits (formats/encoding.h) */
    double bpw;                  /* bits / elements */
    lmq_stats stats;             /* of the source weights, and rel_error of their reconstruction */
    char reason[LMQ_REASON_MAX]; /* why the tensor stayed fp32; required exactly for fp32 tensors */
    lmq_manifest_calib calib;
    lmq_act act;                 /* run-time quantisation of its linear layer's input; matrices only */
} lmq_manifest_tensor;

typedef struct {
    char name[LMQ_NAME_MAX]; /* the carried file's name; its index entry is "file:<name>" */
    uint64_t size;
} lmq_manifest_file;

typedef struct {
    uint64_t params;        /* elements of every tensor (files excluded) */
    uint64_t tensor_bytes;  /* raw bytes of every tensor (files excluded) */
    uint64_t linear_params; /* elements of the linear tensors */
    double linear_bpw;      /* storage bits / elements over the linear tensors; 0 if none */
} lmq_manifest_totals;

typedef struct lmq_manifest lmq_manifest;

/* What a container holds: a model, or the calibrate stage's statistics about one. */
typedef enum { LMQ_KIND_MODEL = 0, LMQ_KIND_STATS = 1 } lmq_kind;

struct lmq_manifest {
    char tool_version[32];
    uint32_t format_version;
    lmq_kind kind;
    lmq_arch arch;
    char *source;        /* checkpoint path or description (owned; NULL reads as "") */
    uint64_t source_checksum;
    char *source_notes;  /* what the import did (owned; NULL reads as "") */
    char *recipe;        /* recipe text (owned); NULL for a plain conversion */
    uint64_t recipe_checksum;
    char *calibration;   /* calibration text path or description (owned); NULL when none was used */
    uint64_t calibration_checksum; /* XXH3-64 of the calibration text */
    uint64_t calib_model_checksum; /* file checksum of the artefact the statistics were taken on */
    uint64_t calib_stats_checksum; /* file checksum of the statistics a quantize run used (0: none) */
    int calib_windows, calib_ctx;  /* the P1 windows run */
    uint64_t calib_tokens;
    /* lineage: the already quantised artefact a quantize run read (--requantize); NULL when none. */
    char *lineage_path;            /* the input as given (owned) */
    uint64_t lineage_file_checksum; /* its file checksum (footer) */
    char *lineage_recipe;          /* its recipe's name (owned; NULL reads as "") */
    uint64_t lineage_recipe_checksum;
    char *lineage_schemes;         /* the schemes its tensors use, in order of first use (owned) */
    double lineage_bpw, lineage_linear_bpw; /* its bits per weight: all tensors, the linear ones */
    lmq_manifest_tensor *tensors;
    int n_tensors, cap_tensors;
    lmq_manifest_file *files;
    int n_files, cap_files;
    lmq_manifest_totals totals; /* filled by lmq_writer_finish from the index */
};

/* Sets tool and format version; everything else empty. */
void lmq_manifest_init(lmq_manifest *m);
void lmq_manifest_free(lmq_manifest *m);

/* Replaces *dst (one of the owned strings) with a copy of s (NULL clears it). */
lmq_code lmq_manifest_set(char **dst, const char *s, lmq_err *err);
/* Appends a zeroed entry named name and returns it via out. */
lmq_code lmq_manifest_add_tensor(lmq_manifest *m, const char *name, lmq_manifest_tensor **out, lmq_err *err);
lmq_code lmq_manifest_add_file(lmq_manifest *m, const char *name, uint64_t size, lmq_err *err);
const lmq_manifest_tensor *lmq_manifest_find(const lmq_manifest *m, const char *name);

/* Canonical-name rule for linear layers: a 2-D tensor inside a block ("blk.<i>..."). */
int lmq_is_linear(const char *name, int ndim);
/* The manifest of a plain fp32 conversion: arch, source and notes from the model, every tensor
 * fp32 with its statistics and the reason it stayed fp32, every file (out initialised here). */
lmq_code lmq_manifest_from_model(const lmq_model *mod, lmq_manifest *out, lmq_err *err);
/* Its two halves, for a model written one tensor at a time: arch, source, notes and files from
 * mod; and the entry of fp32 tensor t whose values are `values` (t->data may be NULL). */
lmq_code lmq_manifest_describe(lmq_manifest *m, const lmq_model *mod, lmq_err *err);
lmq_code lmq_manifest_add_plain(lmq_manifest *m, const lmq_tensor *t, const float *values, lmq_err *err);

/* YAML text (malloc'd, NUL-terminated, *len without the NUL). Deterministic; floats are
 * written so that they parse back to the same value. */
lmq_code lmq_manifest_emit(const lmq_manifest *m, char **text, size_t *len, lmq_err *err);
/* Parses and checks keys, types and enum values; out is initialised here. Errors name the key
 * (and the tensor). */
lmq_code lmq_manifest_parse(const char *text, size_t len, lmq_manifest *out, lmq_err *err);

/* Totals computed from the index (carried files excluded; linear per lmq_is_linear), with the
 * linear tensors' storage bits taken from the manifest's entries. */
lmq_manifest_totals lmq_manifest_totals_of(const lmq_manifest *m, const lmq_tensor_entry *index, int n);
/* Checks the manifest against the container's index and version: one entry per tensor and
 * per carried file and nothing else, encodings equal, bits per weight true, totals right,
 * values in range, fp32 tensors with a reason, recipe checksum right. Every problem goes to
 * fn (may be NULL); returns how many there were. */
int lmq_manifest_check(const lmq_manifest *m, const lmq_tensor_entry *index, int n, uint32_t format_version,
                       lmq_issue_fn fn, void *ctx);
/* Checks a model's architecture against the tensors the index holds, as the runtime will read them
 * (lmq_model_validate on their names and shapes: every tensor the fields want, none other); for
 * statistics, the fields alone (lmq_arch_validate). The error names the field or the tensor. */
lmq_code lmq_manifest_check_tensors(const lmq_manifest *m, const lmq_tensor_entry *index, int n, lmq_err *err);

#endif
