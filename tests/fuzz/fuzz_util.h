/* Shared by the libFuzzer targets (tests/fuzz/README.md): fixtures, a scratch file for the APIs that
 * take a path, and a check that reports a broken invariant as a crash libFuzzer records. */
#ifndef LMQ_FUZZ_UTIL_H
#define LMQ_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A property the code under test promises; a failure aborts with the reason. */
#define FZ_CHECK(cond, ...)                                                                       \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "fuzz invariant failed at %s:%d: %s: ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fputc('\n', stderr);                                                                  \
            abort();                                                                              \
        }                                                                                         \
    } while (0)

/* Text through an opened tokenizer: ids inside its vocabulary that decode without error, or a
 * refusal with LMQ_E_FORMAT or `refusal` (the other code the tokenizer kind may give). */
static inline void fz_encode_decodes(const tok_tokenizer *t, const char *text, size_t size, lmq_code refusal)
{
    int32_t *ids;
    size_t n;
    lmq_err err = { 0 };
    lmq_code c = tok_encode(t, text, size, &ids, &n, &err);
    FZ_CHECK(c == LMQ_OK || c == LMQ_E_FORMAT || c == refusal, "%s", err.msg);
    if (c)
        return;
    for (size_t i = 0; i < n; i++)
        FZ_CHECK(ids[i] >= 0 && ids[i] < tok_vocab_size(t), "id %d", (int)ids[i]);
    char *back;
    size_t len;
    FZ_CHECK(tok_decode(t, ids, n, &back, &len, &err) == LMQ_OK, "%s", err.msg);
    free(back);
    free(ids);
}

/* <fixtures>/<rel>, where fixtures is $LMQ_FIXTURES or ../shared/fixtures (as for the tests). */
static inline const char *fz_fixture(const char *rel)
{
    static char path[1024];
    const char *root = getenv("LMQ_FIXTURES");
    snprintf(path, sizeof path, "%s/%s", root && *root ? root : "../shared/fixtures", rel);
    return path;
}

/* The whole file, malloc'd; a missing fixture ends the run (the target cannot do its job). */
static inline uint8_t *fz_read_fixture(const char *rel, size_t *size)
{
    const char *path = fz_fixture(rel);
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
        fclose(f);
        *size = (size_t)n;
        return buf;
    }
    fprintf(stderr, "fuzz: cannot read fixture %s (set LMQ_FIXTURES)\n", path);
    exit(2);
}

static char fz_scratch_path[256];

static inline void fz_scratch_remove(void)
{
    unlink(fz_scratch_path);
}

/* Writes data to this process's scratch file (in /dev/shm when there is one) and returns its
 * path; the file is removed at exit. */
static inline const char *fz_scratch(const uint8_t *data, size_t size)
{
    if (!fz_scratch_path[0]) {
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fz_scratch_path, sizeof fz_scratch_path, "%s/lmq-fuzz-%ld", dir, (long)getpid());
        atexit(fz_scratch_remove);
    }
    FILE *f = fopen(fz_scratch_path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        fprintf(stderr, "fuzz: cannot write %s\n", fz_scratch_path);
        abort();
    }
    return fz_scratch_path;
}

/* The fixture tokenizers, opened once per process: GPT-2's (gpt2-tokenizer/) and llama2.c's
 * 512-token one (stories260K/tok512.bin). */
static inline void fz_fixture_tokenizers(tok_tokenizer **gpt2, tok_tokenizer **l2c)
{
    size_t nv, nm, nt;
    uint8_t *vocab = fz_read_fixture("gpt2-tokenizer/vocab.json", &nv);
    uint8_t *merges = fz_read_fixture("gpt2-tokenizer/merges.txt", &nm);
    uint8_t *tok512 = fz_read_fixture("stories260K/tok512.bin", &nt);
    lmq_err err = { 0 };
    if (tok_open_gpt2(vocab, nv, merges, nm, gpt2, &err) || tok_open_llama2c(tok512, nt, 512, l2c, &err)) {
        fprintf(stderr, "fuzz: fixture tokenizer: %s\n", err.msg);
        exit(2);
    }
    free(vocab);
    free(merges);
    free(tok512);
}

#endif
