/* The lmq container (byte layout in formats/CONTAINER.md): a streaming writer and an mmap
 * reader that checks every offset, size and name before use. The container stores tensors
 * as opaque bytes described by lmq_qparams; schemes/ knows what the bytes mean. The manifest is
 * text to this layer: formats/manifest.h knows its schema, formats/artefact.h writes and reads
 * whole artefacts with it. */
#ifndef LMQ_CONTAINER_H
#define LMQ_CONTAINER_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/file.h"
#include "formats/encoding.h"
#include "formats/model.h"

#define LMQ_CONTAINER_VERSION 1
#define LMQ_CONTAINER_ALIGN 64
#define LMQ_ZSTD_LEVEL 3

typedef enum { LMQ_CODEC_NONE = 0, LMQ_CODEC_ZSTD = 1, LMQ_CODEC_COUNT } lmq_codec;

/* What an index entry holds: a tensor in an encoding, or a carried file (a tokenizer's own file,
 * kept byte for byte; named LMQ_FILE_PREFIX + its name, rank 1, its size the one dim). */
typedef enum { LMQ_ENTRY_TENSOR = 0, LMQ_ENTRY_FILE = 1 } lmq_entry_kind;

/* One index entry. */
typedef struct {
    char name[LMQ_NAME_MAX];
    uint8_t kind;  /* lmq_entry_kind: ask lmq_entry_is_file */
    lmq_qparams q; /* a tensor's encoding; all zero for a file */
    int ndim;
    int64_t shape[LMQ_MAX_DIMS];
    uint8_t codec;        /* lmq_codec */
    uint64_t offset;      /* of the stored blob, from the start of the file */
    uint64_t stored_size; /* bytes in the file */
    uint64_t raw_size;    /* bytes after decoding */
    uint64_t checksum;    /* XXH3-64 of the raw bytes */
} lmq_tensor_entry;

extern const char *const lmq_codec_names[LMQ_CODEC_COUNT];

/* A carried file's entry is named this + the file's name (lmq_file_name_check), and no other is. */
#define LMQ_FILE_PREFIX "file:"

/* Whether t is a carried file rather than a tensor. */
int lmq_entry_is_file(const lmq_tensor_entry *t);
/* A carried file's own name (its entry's, LMQ_FILE_PREFIX left off); NULL for a tensor. */
const char *lmq_entry_file_name(const lmq_tensor_entry *t);

int64_t lmq_entry_numel(const lmq_tensor_entry *t);

/* One problem found by a check that keeps going: tensor is NULL when the problem is not
 * about one tensor (the whole-file checksum, a manifest key). */
typedef void (*lmq_issue_fn)(void *ctx, const char *tensor, lmq_code code, const char *msg);

/* ---- reading ---- */

typedef struct {
    lmq_blob blob; /* the mapping (unused by lmq_container_open_mem) */
    const uint8_t *data;
    size_t size;
    uint32_t version;
    int n_tensors;
    lmq_tensor_entry *tensors; /* sorted by name */
    int *by_offset;            /* tensor indices in file order */
    const char *manifest;      /* YAML text inside the file, not NUL-terminated */
    size_t manifest_size;
    uint64_t file_checksum; /* as the footer states it (lmq_container_verify checks it): the file's identity */
    char *path;
} lmq_container;

/* Maps the file and checks header, footer, index and manifest checksum (not tensor data). */
lmq_code lmq_container_open(lmq_container *c, const char *path, lmq_err *err);
/* The same over bytes the caller keeps alive until close; name is used in messages. */
lmq_code lmq_container_open_mem(lmq_container *c, const void *data, size_t size, const char *name,
                                lmq_err *err);
void lmq_container_close(lmq_container *c);

const lmq_tensor_entry *lmq_container_find(const lmq_container *c, const char *name);
/* The stored bytes inside the mapping (64-byte aligned); for codec none these are the raw
 * bytes, usable without a copy once verified. */
const void *lmq_container_stored(const lmq_container *c, const lmq_tensor_entry *t);
/* Lets t's mapped pages go from this process once it is done with them (lmq_blob_release). */
void lmq_container_release(const lmq_container *c, const lmq_tensor_entry *t);
/* Decodes t into dst (at least raw_size bytes) and checks its checksum. */
lmq_code lmq_container_read(const lmq_container *c, const lmq_tensor_entry *t, void *dst, size_t dst_size,
                            lmq_err *err);
/* The same into a malloc'd buffer of raw_size bytes (at least 1) the caller frees. */
lmq_code lmq_container_read_alloc(const lmq_container *c, const lmq_tensor_entry *t, void **out, lmq_err *err);
/* Checks every tensor checksum and the file checksum, reporting each failure through fn
 * (may be NULL). Returns LMQ_OK or the first failure's code with err summarising. */
lmq_code lmq_container_verify(const lmq_container *c, lmq_issue_fn fn, void *ctx, lmq_err *err);

/* Checks every carried file's name (lmq_file_name_check), reporting each bad one through fn.
 * Returns the number of problems. */
int lmq_container_check_files(const lmq_container *c, lmq_issue_fn fn, void *ctx);

/* ---- writing ---- */

typedef struct lmq_writer lmq_writer;

/* Starts "<path>.tmp.XXXXXX"; path is only replaced by a successful finish. */
lmq_code lmq_writer_open(lmq_writer **out, const char *path, lmq_err *err);
/* Validates and writes one tensor of size raw bytes. codec LMQ_CODEC_ZSTD asks for zstd; the
 * bytes are stored raw when zstd does not make them smaller. After any error the writer only
 * accepts abort (or finish, which then fails and cleans up). */
lmq_code lmq_writer_add(lmq_writer *w, const char *name, lmq_qparams q, int ndim, const int64_t *shape,
                        const void *data, size_t size, lmq_codec codec, lmq_err *err);
/* The same for a carried file of size bytes, name its own (checked: lmq_file_name_check). */
lmq_code lmq_writer_add_file(lmq_writer *w, const char *name, const void *data, size_t size, lmq_codec codec,
                             lmq_err *err);
/* Commits with the given manifest text as is: lmq_writer_finish (formats/artefact.h) checks and
 * emits a manifest first; tests of hostile input write any text. Always frees w. */
lmq_code lmq_writer_finish_text(lmq_writer *w, const char *text, size_t len, lmq_err *err);
/* Removes the temporary file; path is untouched. Accepts NULL. */
void lmq_writer_abort(lmq_writer *w);
/* The entries added so far (in the order added until finish sorts them), for the layer that
 * writes the manifest (formats/artefact.h); and whether an add failed. */
const lmq_tensor_entry *lmq_writer_index(const lmq_writer *w, int *n);
int lmq_writer_failed(const lmq_writer *w);

/* A stored tensor's raw bytes, checksum verified: inside the mapping for codec none (*owned
 * NULL), else decoded into *owned (malloc'd; the caller frees it). */
lmq_code lmq_container_view(const lmq_container *c, const lmq_tensor_entry *t, const void **raw, void **owned,
                            lmq_err *err);

#endif
