/* GGUF files (ggml's docs/gguf.md), versions 2 and 3, little-endian:
 *   u32 magic "GGUF", u32 version, u64 tensor_count, u64 kv_count,
 *   kv_count × { string key, u32 value_type, value },
 *   tensor_count × { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset },
 *   zero padding to general.alignment (default 32), then the tensor data, each tensor at
 *   data_start + offset (a multiple of the alignment).
 * A string is u64 length + bytes (no NUL); an array is u32 element type, u64 count, elements.
 * ne[0] is the fastest-moving dimension: an lmq [rows, cols] matrix is ne = {cols, rows}.
 *
 * The reader is strict: every length, count and offset is checked against the file before it
 * is used, keys and tensor names are unique, types and ggml types are ones this file lists,
 * tensors lie inside the data section without overlapping, and errors name the file and the key
 * or tensor. Values stay views into the mapping. The writer builds a file in memory and writes
 * it atomically (common/file.h). Names start gf_ (GGUF_ / GGML_ for constants): ggml's own
 * gguf_* API must link beside liblmq.
 *
 * This file knows bytes, not models: formats/gguf_model.h maps an lmq model onto a GGUF file
 * (encodings, tensor names, <arch>.* keys), convert/gguf.h imports one, export/gguf.h writes one. */
#ifndef LMQ_GGUF_H
#define LMQ_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/file.h"

typedef enum {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5, GGUF_F32 = 6,
    GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10, GGUF_I64 = 11, GGUF_F64 = 12,
    GGUF_TYPE_COUNT
} gf_value_type;

/* ggml tensor types (the numbers of ggml.h's enum ggml_type) this reader knows the size of:
 * those an encoding row holds (formats/encoding.h's ggml), and the others listed in gguf.c. */
typedef enum {
    GGML_F32 = 0, GGML_F16 = 1, GGML_Q4_0 = 2, GGML_Q4_1 = 3, GGML_Q5_0 = 6, GGML_Q5_1 = 7, GGML_Q8_0 = 8,
    GGML_Q8_1 = 9, GGML_Q2_K = 10, GGML_Q3_K = 11, GGML_Q4_K = 12, GGML_Q5_K = 13, GGML_Q6_K = 14,
    GGML_Q8_K = 15, GGML_IQ4_NL = 20, GGML_IQ4_XS = 23, GGML_I8 = 24, GGML_I16 = 25, GGML_I32 = 26, GGML_I64 = 27, GGML_F64 = 28, GGML_BF16 = 30,
    GGML_TYPE_LIMIT = 31
} gf_ggml_type;

/* general.quantization_version: the spec requires it in a file with any quantised tensor; the
 * block layouts listed here are ggml's quantisation version 2 (ggml.h's GGML_QNT_VERSION). */
#define GGUF_QNT_VERSION 2

typedef struct {
    const char *name; /* "q4_k" as ggml spells it in lower case; NULL: not a type this file knows */
    unsigned block, block_bytes;
} gf_type_info;

/* What type t is: its name and sizes (name NULL when it is not a type this file knows). */
gf_type_info gf_type_of(uint32_t t);

typedef struct {
    const char *p; /* not NUL-terminated */
    uint64_t len;
} gf_str;

typedef struct {
    gf_str key;
    uint32_t type;      /* gf_value_type */
    uint32_t elem_type; /* arrays: the elements' type */
    uint64_t n;         /* arrays: the element count; 1 otherwise */
    const uint8_t *val; /* the value (arrays: the first element) */
} gf_kv;

#define GGUF_NAME_MAX 128
#define GGUF_MAX_DIMS 4

typedef struct {
    char name[GGUF_NAME_MAX];
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; /* 1 past n_dims */
    uint32_t type;              /* gf_ggml_type (ggml.h's numbers) */
    uint64_t offset, size;      /* within the data section */
    const uint8_t *data;
} gf_tensor;

typedef struct {
    char path[512]; /* for messages */
    lmq_blob blob;  /* the mapping, when opened from a file */
    uint32_t version;
    uint64_t alignment;
    gf_kv *kvs;
    int64_t n_kv;
    gf_tensor *tensors;
    int64_t n_tensors;
    const uint8_t *data; /* the data section */
    uint64_t data_size;
} gf_file;

lmq_code gf_open(const char *path, gf_file *f, lmq_err *err);
/* The same over bytes the caller keeps alive until gf_close; name is used in messages. */
lmq_code gf_open_mem(const void *data, size_t size, const char *name, gf_file *f, lmq_err *err);
void gf_close(gf_file *f);

const gf_kv *gf_find(const gf_file *f, const char *key);
const gf_tensor *gf_find_tensor(const gf_file *f, const char *name);
/* Typed reads of a key. An absent key is LMQ_E_FORMAT ("<file>: key <key> missing") unless
 * `optional`, which leaves *out as it was and returns LMQ_OK; a key of another type is
 * LMQ_E_FORMAT. gf_get_int accepts any integer type whose value fits int64 (and bool);
 * gf_get_float any float or integer type. */
lmq_code gf_get_int(const gf_file *f, const char *key, int optional, int64_t *out, lmq_err *err);
lmq_code gf_get_float(const gf_file *f, const char *key, int optional, double *out, lmq_err *err);
lmq_code gf_get_str(const gf_file *f, const char *key, int optional, gf_str *out, lmq_err *err);
/* An array key of element type `elem` (any integer type when elem is GGUF_I64; any float when
 * GGUF_F64), n elements; NULL with an error otherwise. */
const gf_kv *gf_get_array(const gf_file *f, const char *key, uint32_t elem, lmq_err *err);
/* Element i of a numeric array (checked at open: i < n is the caller's). */
int64_t gf_arr_int(const gf_kv *kv, uint64_t i);
double gf_arr_float(const gf_kv *kv, uint64_t i);
/* Walks a string array: *pos starts at kv->val; each call gives the next string. */
gf_str gf_arr_next_str(const uint8_t **pos);
/* 1 when s equals the NUL-terminated c. */
int gf_str_eq(gf_str s, const char *c);

/* ---- writing ---- */

typedef struct gf_writer gf_writer;

lmq_code gf_writer_new(gf_writer **out, lmq_err *err);
void gf_writer_free(gf_writer *w);
/* Metadata, in the order added (keys must be unique: the reader refuses repeats). Errors are
 * remembered: the first one is returned by gf_writer_write. */
void gf_w_u32(gf_writer *w, const char *key, uint32_t v);
void gf_w_f32(gf_writer *w, const char *key, float v);
void gf_w_str(gf_writer *w, const char *key, const char *v);
/* Arrays: n strings (lens[i] bytes each at s[i]), floats, int32s. */
void gf_w_arr_str(gf_writer *w, const char *key, uint64_t n, const char *const *s, const uint64_t *lens);
void gf_w_arr_f32(gf_writer *w, const char *key, uint64_t n, const float *v);
void gf_w_arr_i32(gf_writer *w, const char *key, uint64_t n, const int32_t *v);
/* A tensor of ggml type `type`, ne[0] fastest, of size bytes (the type's size for that shape).
 * data is copied; NULL: its bytes come from gf_writer_write's fill when the file is written. */
void gf_w_tensor(gf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne,
                 const void *data, size_t size);
/* Tensor k's bytes (k counts gf_w_tensor calls from 0) into *bytes, malloc'd, exactly the size
 * declared; the writer frees them once written. */
typedef lmq_code (*gf_fill_fn)(void *ctx, size_t k, uint8_t **bytes, lmq_err *err);
/* Writes the file (version 3, alignment 32) atomically; fill (may be NULL when every tensor was
 * given its data) makes the others' bytes one at a time. */
lmq_code gf_writer_write(gf_writer *w, const char *path, gf_fill_fn fill, void *ctx, lmq_err *err);

#endif
