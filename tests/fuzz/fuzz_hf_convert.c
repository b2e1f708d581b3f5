/* Hugging Face import: config.json and model.safetensors, the input being the two files joined
 * by one NUL byte (config first; JSON holds no raw NUL), written into a scratch directory
 * beside a copy of the fixture tokenizer tok512.bin, then lmq_convert on the directory.
 * What converts must be a valid model. */
#include <sys/stat.h>

#include "convert/convert.h"
#include "tests/fuzz/fuzz_util.h"

static char dir[256], config[300], weights[300];

static void put(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        abort();
}

static void cleanup(void)
{
    char tok[300];
    snprintf(tok, sizeof tok, "%s/tok512.bin", dir);
    unlink(tok);
    unlink(config);
    unlink(weights);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(dir, sizeof dir, "%s/lmq-fuzz-hf-%ld", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp",
             (long)getpid());
    snprintf(config, sizeof config, "%s/config.json", dir);
    snprintf(weights, sizeof weights, "%s/model.safetensors", dir);
    char tok[300];
    snprintf(tok, sizeof tok, "%s/tok512.bin", dir);
    if (mkdir(dir, 0755) != 0)
        abort();
    atexit(cleanup);
    size_t n;
    uint8_t *t = fz_read_fixture("stories260K/tok512.bin", &n);
    put(tok, t, n);
    free(t);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t nc = nul ? (size_t)(nul - data) : size;
    put(config, data, nc);
    put(weights, nul ? nul + 1 : data + size, nul ? (size_t)(data + size - nul - 1) : 0);
    lmq_model m;
    lmq_err err = { 0 };
    if (lmq_convert(dir, NULL, &m, &err))
        return 0;
    FZ_CHECK(lmq_model_validate(&m, &err) == LMQ_OK, "%s", err.msg);
    lmq_model_free(&m);
    return 0;
}
