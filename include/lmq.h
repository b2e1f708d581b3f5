/* lmq as a library: convert checkpoints into artefacts, quantise them with a recipe, verify them
 * against a reference on a text (perplexity, top-1, KL, speed), audit them, and export them to
 * compressed-tensors. The same stages the lmq command runs, called from C.
 *
 * Build against the installed copy with pkg-config:
 *     cc app.c $(pkg-config --cflags --libs lmq)                 (shared)
 *     cc -static app.c $(pkg-config --static --cflags --libs lmq)  (static)
 *
 * Errors are values: every call that can fail returns an lmq_status code (LMQ_STATUS_OK = 0) and,
 * when st is not NULL, fills *st with the code and a message naming the file, tensor or line.
 * Nothing is printed and nothing exits. Outputs are written atomically (a temporary file renamed
 * into place), never half-written. Handles are opaque; each has its own free function, which
 * accepts NULL. Calls are independent: different handles may be used from different threads. */
#ifndef LMQ_PUBLIC_H
#define LMQ_PUBLIC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The calls liblmq.so exports: the library is built with hidden visibility, so these and only
 * these are its interface (nm -D --defined-only liblmq.so lists them). */
#if defined(__GNUC__)
#define LMQ_API __attribute__((visibility("default")))
#else
#define LMQ_API
#endif

/* The error codes (the lmq command's messages use the same names). */
enum {
    LMQ_STATUS_OK = 0,
    LMQ_STATUS_IO = 1,          /* open/read/write/rename failed */
    LMQ_STATUS_FORMAT = 2,      /* malformed, truncated or hostile input */
    LMQ_STATUS_CHECKSUM = 3,    /* a stored checksum does not match the bytes */
    LMQ_STATUS_NOMEM = 4,
    LMQ_STATUS_ARG = 5,         /* a bad argument or option */
    LMQ_STATUS_UNSUPPORTED = 6, /* valid input lmq does not handle (dtype, architecture) */
    LMQ_STATUS_NUMERIC = 7,     /* NaN/Inf or out-of-range values */
    LMQ_STATUS_RECIPE = 8,      /* a recipe error */
};

typedef struct {
    int code;
    char message[1024];
} lmq_status;

/* "lmq 0.1.0": the version the artefacts' manifests record. */
LMQ_API const char *lmq_version(void);
/* "ok", "i/o error", "format error", ... for a code; "unknown error" for anything else. */
LMQ_API const char *lmq_status_name(int code);

/* ---- convert: a checkpoint in, an fp32 artefact out ---------------------------------------- */

typedef struct {
    const char *tokenizer; /* a tokenizer file or directory; NULL: beside the checkpoint */
    int split_qkv;         /* GPT-2: store the fused c_attn as attn_q / attn_k / attn_v */
    int zstd;              /* compress each tensor where that makes it smaller */
} lmq_convert_options;

/* src: a Hugging Face model directory, .safetensors file or index.json, or a llama2.c .bin.
 * Tensor by tensor: memory holds about one tensor, not the model. opts may be NULL. */
LMQ_API int lmq_convert_file(const char *src, const char *out_path, const lmq_convert_options *opts,
                             lmq_status *st);

/* ---- quantize: an artefact and a YAML recipe in, a quantised artefact out ------------------ */

typedef struct {
    int threads;            /* 0: one per CPU; the bytes written do not depend on it */
    const char *stats;      /* statistics from lmq calibrate, for gptq / awq / smoothquant recipes */
    const char *calib_text; /* the calibration text, when not where the statistics name it */
} lmq_quantize_options;

LMQ_API int lmq_quantize_file(const char *in_path, const char *recipe_path, const char *out_path,
                              const lmq_quantize_options *opts, lmq_status *st);

/* ---- verify: artefacts scored against a reference on a text (protocol P1) ------------------ */

typedef struct lmq_verify_report lmq_verify_report;

typedef struct {
    int ctx;               /* window length in tokens; 0: 256 */
    int threads;           /* 0: one per CPU */
    int speed_only;        /* 1: speed alone (text may be NULL) */
    double bandwidth_gbps; /* for the rooflines; 0: measured */
    const char *device;    /* where the passes run and speed is measured: "cpu" (NULL) or "cuda"
                              (LMQ_STATUS_UNSUPPORTED, saying why, where this build or machine has none) */
} lmq_verify_options;

/* One row of a report: the reference is row 0, then each candidate in the order given. */
typedef struct {
    const char *path;      /* valid while the report lives */
    const char *scheme;    /* the encodings of its tensors that are not fp32, "fp32" when none */
    double linear_bpw;     /* storage bits per weight over the linear layers */
    double mib;            /* the artefact on disk */
    double ppl;            /* perplexity */
    double dppl_pct;       /* 100 (PPL / PPL_ref - 1) */
    double top1;           /* agreement of the argmax with the reference's, 0..1 */
    double kl_mean;        /* KL(P_ref || P) in nats per position */
    double prefill_tps, decode_tps; /* tokens per second */
} lmq_verify_row;

/* Scores every candidate against reference on the text at text_path (n_candidates may be 0:
 * the reference alone). opts may be NULL. *out is NULL on failure. */
LMQ_API int lmq_verify(const char *reference, const char *const *candidates, int n_candidates,
                       const char *text_path, const lmq_verify_options *opts, lmq_verify_report **out,
                       lmq_status *st);
LMQ_API int lmq_verify_rows(const lmq_verify_report *r);
/* Row i (0 .. lmq_verify_rows - 1) into *row; LMQ_STATUS_ARG for any other i. */
LMQ_API int lmq_verify_row_get(const lmq_verify_report *r, int i, lmq_verify_row *row);
LMQ_API void lmq_verify_free(lmq_verify_report *r);

/* ---- audit: what lmq audit checks of one artefact ------------------------------------------- */

typedef struct lmq_audit_report lmq_audit_report;

/* One problem: which check found it ("open", "checksum", "manifest", "values", "files",
 * "tokenizer"), the tensor or carried file it is about (NULL when none), its code, the message. */
typedef struct {
    const char *check;
    const char *tensor;
    int code;
    const char *message;
} lmq_audit_problem;

/* Runs the checks on the artefact at path. A damaged artefact is not an error of the call: its
 * problems are in the report (the call fails only when the report cannot be made: NOMEM). */
LMQ_API int lmq_audit(const char *path, lmq_audit_report **out, lmq_status *st);
/* Problems found: 0 when the artefact passed. */
LMQ_API int lmq_audit_problems(const lmq_audit_report *r);
LMQ_API int lmq_audit_problem_get(const lmq_audit_report *r, int i, lmq_audit_problem *p);
LMQ_API void lmq_audit_free(lmq_audit_report *r);

/* ---- artefacts ------------------------------------------------------------------------------- */

typedef struct lmq_artefact lmq_artefact;

/* Opens an artefact (header, index and manifest checked; tensors not read). */
LMQ_API int lmq_artefact_open(const char *path, lmq_artefact **out, lmq_status *st);
LMQ_API int lmq_artefact_tensors(const lmq_artefact *a);
/* The manifest as stored (YAML), *size bytes, not NUL-terminated; valid while a is open. */
LMQ_API const char *lmq_artefact_manifest(const lmq_artefact *a, size_t *size);
LMQ_API void lmq_artefact_close(lmq_artefact *a);

/* ---- export ---------------------------------------------------------------------------------- */

/* Writes the artefact into directory out_dir as a compressed-tensors checkpoint (vLLM's
 * format: model.safetensors, config.json with its quantization_config, tokenizer files), whole:
 * out_dir must be absent or empty, and appears only when everything is written. */
LMQ_API int lmq_export_compressed_tensors(const char *in_path, const char *out_dir, lmq_status *st);
/* Writes the artefact as a GGUF file (llama.cpp) at out_path. Encodings whose grid GGUF lacks
 * are refused, naming the tensor, unless allow_requantize (then re-quantised to Q8_0 and listed
 * in the file's lmq.requantized metadata). */
LMQ_API int lmq_export_gguf(const char *in_path, const char *out_path, int allow_requantize,
                            lmq_status *st);

#ifdef __cplusplus
}
#endif

#endif
