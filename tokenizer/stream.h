/* Protocol P1, steps 1-2: a text becomes documents, the documents one token stream (what
 * verify/ measures over and calibrate/ observes activations on).
 * (Windows of ctx tokens are cut by the caller: n_ids / ctx of them, the rest dropped.) */
#ifndef LMQ_TOK_STREAM_H
#define LMQ_TOK_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "formats/model.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    size_t off, len; /* bytes of the text */
} tok_doc;

/* Splits text into documents: lines equal to "<|endoftext|>" (a trailing \r ignored) separate
 * them, each is stripped of leading and trailing ASCII whitespace, empty ones are dropped.
 * *docs is malloc'd (free() it; NULL when there are none). */
lmq_code tok_docs_split(const char *text, size_t len, tok_doc **docs, int *n_docs, lmq_err *err);

/* The P1 token stream: the text must be valid UTF-8 (errors name the byte offset) and hold at
 * least one document. llama2c: every document encoded with its own BOS and dummy prefix,
 * concatenated. Byte-level BPE: documents joined by one <|endoftext|> token. *ids malloc'd. */
lmq_code tok_stream_build(const tok_tokenizer *t, const char *text, size_t len, int32_t **ids,
                         size_t *n_ids, int *n_docs, lmq_err *err);
/* The same, with where each document's tokens start in *ids: (*starts)[i] for document i (a
 * joining <|endoftext|> belongs to the document after it); *starts malloc'd, *n_docs of them. */
lmq_code tok_stream_build_docs(const tok_tokenizer *t, const char *text, size_t len, int32_t **ids,
                              size_t *n_ids, size_t **starts, int *n_docs, lmq_err *err);

/* The P1 stream of the text file at text_path with m's tokenizer; *checksum (when not NULL) gets
 * the XXH3-64 of the file's bytes. */
lmq_code tok_stream_read(const lmq_model *m, const char *text_path, int32_t **ids, size_t *n, int *docs,
                        uint64_t *checksum, lmq_err *err);

#endif
