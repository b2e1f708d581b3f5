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

/* Refuses (LMQ_E_ARG, naming out) an output path that exists and is a symbolic link (dangling or
 * not) or not a regular file (device, FIFO, directory, socket), or that is the same file (st_dev
 * and st_ino, links followed) as one of inputs[0..n_inputs) (NULL entries skipped) or, for an
 * input that is a directory, as a file directly inside it. Touches nothing. */
lmq_code lmq_output_check(const char *out, const char *const *inputs, int n_inputs, lmq_err *err);

/* An output file written to "<path>.tmp.<pid>.XXXXXX" (the name cut to fit NAME_MAX with the
 * suffix: any name the filesystem accepts works) and renamed over path on commit. Until then
 * SIGTERM, SIGHUP, SIGINT and SIGPIPE (where not ignored or handled by the program) remove it
 * before ending the process. */
typedef struct {
    FILE *fp;
    char *path, *tmp;
    int slot; /* 1 + index in the signal handler's table; 0: none */
} lmq_atomic;

/* Checks path with lmq_output_check (no inputs), removes temporary files of path left by
 * processes that no longer run (reported to the lmq_atomic_on_stale hook), and opens the
 * temporary file. */
lmq_code lmq_atomic_open(lmq_atomic *a, const char *path, lmq_err *err);
/* fwrite of n bytes; a failure names the path and the reason. */
lmq_code lmq_atomic_write(lmq_atomic *a, const void *p, size_t n, lmq_err *err);
/* Flushes, fsyncs and renames unless a write failed on the way (the error says why); on failure
 * the temporary file is removed. */
lmq_code lmq_atomic_commit(lmq_atomic *a, lmq_err *err);
/* Abandons the output: the temporary file is removed, path is untouched. */
void lmq_atomic_abort(lmq_atomic *a);

/* Called by lmq_atomic_open with how many stale temporary files of path it removed (at least 1). */
typedef void (*lmq_stale_hook)(void *user, const char *path, int removed);
void lmq_atomic_on_stale(lmq_stale_hook hook, void *user);

#endif
