/* Path and note helpers shared by the importers (convert/ only). */
#ifndef LMQ_CONVERT_PATHS_H
#define LMQ_CONVERT_PATHS_H

#include "common/err.h"
#include "formats/model.h"

#define PATH_CAP 4096

/* out (PATH_CAP bytes) = dir/name. */
lmq_code cv_join(char *out, const char *dir, const char *name, lmq_err *err);
int cv_is_file(const char *path);
int cv_ends_with(const char *s, const char *suffix);
/* The directory part of path ("." when there is none) into out (PATH_CAP bytes). */
void cv_dir_of(const char *path, char *out);
/* Appends "; "-separated text to m->notes (what the import did, for the manifest). */
void cv_note(lmq_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Carries the tokenizer into m: the file (or directory) `given`, else the one found in dir
 * (what names the checkpoint in messages). Sets m->arch.tokenizer and notes it. The tokenizer
 * must open (tok_open_model) with m->arch.vocab_size. */
lmq_code cv_add_tokenizer(lmq_model *m, const char *dir, const char *what, const char *given, lmq_err *err);

#endif
