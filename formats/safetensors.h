/* safetensors files: an 8-byte little-endian header length N, N bytes of JSON
 * ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}}),
 * then the data region the offsets point into, row-major, little-endian.
 * st_open validates the whole header (lengths, offsets, sizes, overlaps) before anything is
 * read; st_read_f32 converts F32/F16/BF16 exactly to fp32. Every error names the file and,
 * where there is one, the tensor. */
#ifndef LMQ_SAFETENSORS_H
#define LMQ_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/file.h"

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER 100000000u /* bytes of JSON; larger headers are refused */

/* Every dtype the safetensors format defines. The first three are the ones lmq reads and
 * writes; the others are recognised (so their byte sizes are checked) but not converted. */
typedef enum {
    ST_F32 = 0,
    ST_F16,
    ST_BF16,
    ST_F64,
    ST_I64,
    ST_U64,
    ST_I32,
    ST_U32,
    ST_I16,
    ST_U16,
    ST_I8,
    ST_U8,
    ST_BOOL,
    ST_F8_E4M3,
    ST_F8_E5M2,
    ST_F8_E8M0,
    ST_F6_E2M3,
    ST_F6_E3M2,
    ST_F4,
    ST_DTYPE_COUNT
} st_dtype;

typedef struct {
    char *name; /* owned */
    st_dtype dtype;
    int ndim; /* 0 for a scalar */
    int64_t shape[ST_MAX_DIMS];
    int64_t numel;
    uint64_t begin, end; /* byte offsets into the data region */
} st_tensor;

typedef struct {
    char *path; /* owned copy, for messages */
    lmq_blob blob;       /* the mapping (unused by st_open_mem) */
    const uint8_t *data; /* the data region */
    uint64_t data_size;
    st_tensor *tensors; /* in header order */
    int n_tensors;
    int n_metadata; /* entries of __metadata__ */
} st_file;

const char *st_dtype_name(st_dtype t);

/* Maps path and validates its header. On failure f is left closed. */
lmq_code st_open(const char *path, st_file *f, lmq_err *err);
/* The same over bytes the caller keeps alive until st_close (blob stays empty); name stands
 * for the file in messages. */
lmq_code st_open_mem(const void *data, size_t size, const char *name, st_file *f, lmq_err *err);
void st_close(st_file *f);

const st_tensor *st_find(const st_file *f, const char *name);

/* Converts tensor t (of f) to fp32 into out[t->numel]. Unsupported dtypes fail here. */
lmq_code st_read_f32(const st_file *f, const st_tensor *t, float *out, lmq_err *err);
/* The error st_read_f32 gives for t, found before anything is read. */
lmq_code st_readable(const st_file *f, const st_tensor *t, lmq_err *err);
/* Converts n little-endian values of a readable dtype (F32, F16, BF16) at src to fp32. */
void st_decode(st_dtype dtype, const uint8_t *src, float *out, size_t n);
int st_dtype_bits(st_dtype t);

/* A tensor to write: data is fp32 and is rounded to dtype (round-to-nearest-even). Tensors of
 * other whole-byte dtypes (I32, I8, ...) are written from their stored bytes instead
 * (st_stream_write_raw; data unused). */
typedef struct {
    const char *name;
    st_dtype dtype; /* ST_F32, ST_F16 or ST_BF16 from values; any whole-byte dtype from bytes */
    int ndim;
    const int64_t *shape;
    const float *data;
} st_out;

/* Writes a safetensors file atomically: tensors in the given order, packed, the header padded
 * with spaces to a multiple of 8 bytes, "__metadata__": {"format": "pt"}. */
lmq_code st_write(const char *path, const st_out *tensors, int n, lmq_err *err);

/* The same file written piece by piece, for models too large to hold: st_stream_open writes
 * the header from the tensors' names, dtypes and shapes (their data is not read), then
 * st_stream_write takes the values of every tensor in order, in pieces of any size (a piece may
 * run on into the next tensor), and st_stream_commit checks that every value came and renames
 * the file into place (or, failing, removes it). After a failed open nothing is left to undo;
 * after a failed write, st_stream_abort. The caller keeps `tensors` alive until then. */
typedef struct {
    lmq_atomic file;
    const st_out *tensors;
    int n, next;   /* next: the tensor whose values come next */
    uint64_t left; /* values still due for tensors[next] */
} st_stream;

lmq_code st_stream_open(st_stream *s, const char *path, const st_out *tensors, int n, lmq_err *err);
lmq_code st_stream_write(st_stream *s, const float *values, size_t n, lmq_err *err);
/* The same for stored bytes: n bytes, little-endian, whole values of the tensors due (any dtype). */
lmq_code st_stream_write_raw(st_stream *s, const void *bytes, size_t n, lmq_err *err);
lmq_code st_stream_commit(st_stream *s, lmq_err *err);
/* Abandons the file: nothing appears at path. */
void st_stream_abort(st_stream *s);

#endif
