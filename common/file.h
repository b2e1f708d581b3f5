/* Whole-file access: read-only mappings for inputs, atomic replacement for outputs. */
#ifndef LMQ_FILE_H
#define LMQ_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"

typedef struct {
    const uint8_t *data;
    size_t size;
    int mapped; /* 1: munmap on free; 0: free() */
} lmq_blob;

/* Maps (or, for empty files, allocates) the whole file read-only. */
lmq_code lmq_blob_open(const char *path, lmq_blob *out, lmq_err *err);
void lmq_blob_close(lmq_blob *b);
/* Lets go of the pages holding [p, p + n) inside a read-only file mapping (a later read faults
 * them in again from the file): a pass over a mapping larger than memory then holds only what
 * it is reading, since the pages it has touched otherwise stay resident. */
void lmq_map_drop(const void *p, size_t n);
/* lmq_map_drop for [offset, offset + size) of b when b is a mapping; a no-op for allocated
 * blobs, whose pages must not be dropped. */
void lmq_blob_release(const lmq_blob *b, size_t offset, size_t size);

/* An output file written to "<path>.tmp.XXXXXX" and renamed over path on commit. */
typedef struct {
    FILE *fp;
    char *path, *tmp;
} lmq_atomic;

lmq_code lmq_atomic_open(lmq_atomic *a, const char *path, lmq_err *err);
/* Flushes, fsyncs and renames; on failure the temporary file is removed. */
lmq_code lmq_atomic_commit(lmq_atomic *a, lmq_err *err);
/* Abandons the output: the temporary file is removed, path is untouched. */
void lmq_atomic_abort(lmq_atomic *a);

#endif
