/* Tokenizer files found beside a checkpoint (or named) and carried into the model. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/file.h"
#include "convert/paths.h"
#include "tokenizer/tokenizer.h"

/* ---- tokenizer files ------------------------------------------------------------------- */

/* A tokenizer file by name (suffix), the kind it implies, what it is stored as, and the file
 * that must come with it. Rows with `searched` are looked for (as `stored`) beside a
 * checkpoint, in this order; a llama2.c tokenizer may also be a lone tok*.bin. */
static const struct {
    const char *suffix;
    lmq_tok_kind kind;
    const char *stored, *companion;
    int searched;
} TOKENIZERS[] = {
    { "vocab.json", LMQ_TOK_GPT2, "vocab.json", "merges.txt", 1 },
    { "merges.txt", LMQ_TOK_GPT2, "merges.txt", "vocab.json", 0 },
    { "tokenizer.json", LMQ_TOK_HF_JSON, "tokenizer.json", NULL, 1 },
    { "tokenizer.model", LMQ_TOK_SPM, "tokenizer.model", NULL, 1 }, /* only where no tokenizer.json is */
    { ".bin", LMQ_TOK_LLAMA2C, "tokenizer.bin", NULL, 1 },
};
#define N_TOKENIZERS (sizeof TOKENIZERS / sizeof TOKENIZERS[0])
#define TOK_LLAMA2C_ROW (N_TOKENIZERS - 1)

static lmq_code carry_file(lmq_model *m, const char *path, const char *stored, lmq_err *err)
{
    lmq_blob b;
    lmq_code c = lmq_blob_open(path, &b, err);
    if (c)
        return c;
    uint8_t *copy = b.size ? malloc(b.size) : NULL;
    if (!b.size)
        c = lmq_fail(err, LMQ_E_FORMAT, "%s: tokenizer file is empty", path);
    else if (!copy)
        c = lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", path);
    else {
        memcpy(copy, b.data, b.size);
        c = lmq_model_add_file(m, stored, copy, b.size, err);
    }
    lmq_blob_close(&b);
    return c;
}

/* Carries the tokenizer file at path (and its companion beside it), as TOKENIZERS[k] says. */
static lmq_code carry_tokenizer(lmq_model *m, const char *path, size_t k, lmq_err *err)
{
    const char *comp = TOKENIZERS[k].companion;
    lmq_code c = carry_file(m, path, TOKENIZERS[k].stored, err);
    if (!c && comp) {
        char dir[PATH_CAP], other[PATH_CAP];
        cv_dir_of(path, dir);
        if (!(c = cv_join(other, dir, comp, err)))
            c = cv_is_file(other) ? carry_file(m, other, comp, err)
                               : lmq_fail(err, LMQ_E_IO, "%s: found without %s beside it", path, comp);
    }
    if (c)
        return c;
    m->arch.tokenizer = TOKENIZERS[k].kind;
    const char *base = strrchr(path, '/');
    cv_note(m, "tokenizer: %s%s%s (from %s)", TOKENIZERS[k].stored, comp ? " + " : "", comp ? comp : "",
                base ? base + 1 : path);
    return LMQ_OK;
}

/* A llama2.c tokenizer named tok*.bin in dir, when exactly one is there (out untouched if none). */
static lmq_code find_tok_bin(const char *dir, char *out, lmq_err *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return LMQ_OK;
    struct dirent *e;
    int found = 0;
    char first[256] = "";
    lmq_code c = LMQ_OK;
    while ((e = readdir(d)) && !c) {
        if (strncmp(e->d_name, "tok", 3) || !cv_ends_with(e->d_name, ".bin"))
            continue;
        if (found++)
            c = lmq_fail(err, LMQ_E_ARG, "%s: several tokenizers (%s, %s): choose one with --tokenizer", dir, first,
                         e->d_name);
        else
            snprintf(first, sizeof first, "%s", e->d_name);
    }
    closedir(d);
    if (!c && found)
        c = cv_join(out, dir, first, err);
    return c;
}

static lmq_code tokenizer_in_dir(lmq_model *m, const char *dir, const char *what, lmq_err *err)
{
    char path[PATH_CAP];
    lmq_code c;
    for (size_t k = 0; k < N_TOKENIZERS; k++) {
        if (!TOKENIZERS[k].searched)
            continue;
        if ((c = cv_join(path, dir, TOKENIZERS[k].stored, err)))
            return c;
        if (cv_is_file(path))
            return carry_tokenizer(m, path, k, err);
    }
    path[0] = '\0';
    if ((c = find_tok_bin(dir, path, err)))
        return c;
    if (path[0])
        return carry_tokenizer(m, path, TOK_LLAMA2C_ROW, err);
    return lmq_fail(err, LMQ_E_ARG,
                    "%s: no tokenizer found (vocab.json + merges.txt, tokenizer.json, tokenizer.model, tokenizer.bin or "
                    "tok*.bin); "
                    "pass --tokenizer FILE",
                    what);
}

static lmq_code carry_found(lmq_model *m, const char *dir, const char *what, const char *given, lmq_err *err)
{
    struct stat st;
    if (!given)
        return tokenizer_in_dir(m, dir, what, err);
    if (stat(given, &st) != 0)
        return lmq_fail(err, LMQ_E_IO, "%s: tokenizer not found", given);
    if (S_ISDIR(st.st_mode))
        return tokenizer_in_dir(m, given, given, err);
    for (size_t k = 0; k < N_TOKENIZERS; k++)
        if (cv_ends_with(given, TOKENIZERS[k].suffix))
            return carry_tokenizer(m, given, k, err);
    return lmq_fail(err, LMQ_E_ARG,
                    "%s: not a tokenizer lmq knows (vocab.json, merges.txt, tokenizer.json, tokenizer.model or a "
                    "llama2.c .bin)", given);
}

/* The tokenizer is opened as generate and verify will open it, so that an artefact never
 * carries one they refuse (bytes that do not parse, a vocabulary that does not fit the model). */
lmq_code cv_add_tokenizer(lmq_model *m, const char *dir, const char *what, const char *given, lmq_err *err)
{
    tok_tokenizer *tok = NULL;
    lmq_code c = carry_found(m, dir, what, given, err);
    if (c)
        return c;
    if ((c = tok_open_model(m, &tok, err)))
        return lmq_err_prefix(err, "%s: tokenizer for a %d-token model: ", given ? given : what, m->arch.vocab_size);
    tok_free(tok);
    return LMQ_OK;
}
