/* Saved reference logits (lmq verify --save-reference-logits / --reference-logits): the
 * reference's fp32 logits at every scored P1 position, so that later runs compare candidates
 * with them instead of running the reference, with bit-for-bit the same metrics.
 *
 * Layout: "LMQLOGIT", u32 version (1), u32 n, n bytes of header JSON (vf_logits_head), then per
 * window a u64 size and one zstd frame of its (ctx - 1) × vocab floats, byte planes split (the
 * four bytes of every float grouped by significance, which zstd compresses far better than the
 * floats interleaved: sign and exponent bytes repeat); last, the XXH3-64 of every byte before it,
 * the file's own checksum. Integers little-endian. Lossless: the floats come back bit for bit. */
#ifndef LMQ_VF_REF_LOGITS_H
#define LMQ_VF_REF_LOGITS_H

#include <stdint.h>

#include "common/err.h"
#include "verify/report.h"

/* What the logits are bound to: a later run must match every field (vf_logits_match). */
typedef struct {
    int ctx, vocab;
    int64_t windows, tokens;
    uint64_t tokens_checksum; /* XXH3-64 of the P1 token stream (int32 ids) */
    uint64_t text_checksum;   /* XXH3-64 of the text file */
    vf_row ref;               /* the reference's storage facts: path, file_checksum, scheme, linear_bpw, mib */
} vf_logits_head;

/* The XXH3-64 of a token stream, as heads bind it. */
uint64_t vf_tokens_checksum(const int32_t *ids, size_t n);

typedef struct vf_logits_file vf_logits_file;

/* Starts writing path (atomically) for head; windows are added in order by vf_logits_save. */
lmq_code vf_logits_create(const char *path, const vf_logits_head *head, vf_logits_file **out, lmq_err *err);
/* A vf_logits_fn (verify/metrics.h): appends window w (it must be the next one). */
lmq_code vf_logits_save(void *file, int64_t w, float *logits, size_t n, lmq_err *err);
/* Writes the checksum and commits once every window is in; *checksum (may be NULL) gets it. */
lmq_code vf_logits_finish(vf_logits_file *f, uint64_t *checksum, lmq_err *err);

/* Opens path, checks its own checksum (LMQ_E_CHECKSUM when damaged) and layout, and reads head. */
lmq_code vf_logits_open(const char *path, vf_logits_head *head, uint64_t *checksum, vf_logits_file **out,
                        lmq_err *err);
/* A vf_logits_fn: reads window w (windows are read in order) into logits. */
lmq_code vf_logits_load(void *file, int64_t w, float *logits, size_t n, lmq_err *err);

/* LMQ_E_ARG naming the file and the first difference when saved (from it) and run (this run's)
 * are not bound to the same text, token stream and protocol; the reference's checksum is
 * compared when run->ref.file_checksum is not 0. */
lmq_code vf_logits_match(const char *path, const vf_logits_head *saved, const vf_logits_head *run, lmq_err *err);

/* Closes a file opened for reading, or abandons one being written (nothing is left). NULL ok. */
void vf_logits_close(vf_logits_file *f);

#endif
