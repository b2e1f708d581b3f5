/* A conversion planned before any value is read: the model's tensors described (canonical names
 * and shapes, data NULL) together with where each one's values lie in the mapped checkpoint and
 * how they become canonical fp32 (widening, transposition, a row block). The values are then
 * produced one tensor at a time, into memory the caller chooses: all of them into the model
 * (lmq_plan_load), or each into one buffer that is written out before the next
 * (lmq_container_write_stream), so that converting holds one tensor rather than the model. */
#ifndef LMQ_SOURCE_H
#define LMQ_SOURCE_H

#include <stdint.h>
#include <xxhash.h>

#include "common/err.h"
#include "common/file.h"
#include "formats/model.h"
#include "formats/safetensors.h"

typedef struct {
    const uint8_t *src;  /* the source tensor's first value */
    st_dtype dtype;      /* a readable one (st_readable) */
    int64_t rows, cols;  /* the source tensor as [rows, cols] */
    int transpose;       /* canonical = source transposed, [cols, rows] (GPT-2 Conv1D) */
    int64_t first;       /* the canonical element the tensor starts at: a row block of the source
                            (--split-qkv), a whole number of canonical rows */
    const char *origin;  /* the checkpoint's name for the tensor, for messages; NULL: none */
} lmq_source;

typedef struct {
    lmq_model model;
    lmq_source *sources; /* sources[i]: where model.tensors[i] comes from */
    int cap_sources;
    char where[512];     /* what errors about values start with: the checkpoint */
    /* What the sources point into, kept mapped until lmq_plan_free: */
    lmq_blob blob;       /* a llama2.c checkpoint */
    st_file *shards;     /* Hugging Face weights */
    int n_shards;
} lmq_plan;

void lmq_plan_init(lmq_plan *p);
/* Frees the model, the sources and the mappings. */
void lmq_plan_free(lmq_plan *p);

/* Describes one more tensor, named and shaped as canonical fp32, produced from s. */
lmq_code lmq_plan_add(lmq_plan *p, const char *name, int ndim, const int64_t *shape, const lmq_source *s,
                      lmq_err *err);
/* 1 when two untransposed sources hold the same n values (compared as fp32, as they would be
 * produced). */
int lmq_source_equal(const lmq_source *a, const lmq_source *b, int64_t n);

/* Feeds the whole of b to s piece by piece, letting go of each mapped piece once hashed: the
 * source checksum reads every byte of the checkpoint. */
void lmq_source_hash(XXH3_state_t *s, const lmq_blob *b);

/* Tensor i's values into out (its raw_size bytes), checked finite; the source's pages are let go
 * of once read (lmq_map_drop). An lmq_produce_fn (formats/artefact.h) with ctx the plan. */
lmq_code lmq_plan_produce(void *plan, int i, float *out, lmq_err *err);
/* Produces every tensor into the model, which moves to out (initialised here); the plan is freed
 * either way. */
lmq_code lmq_plan_load(lmq_plan *p, lmq_model *out, lmq_err *err);

#endif
