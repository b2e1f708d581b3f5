/* GPT-2 vocab.json + merges.txt, which artefacts carry: the input is the two files joined by
 * one NUL byte (vocab first). What opens must encode a fixed text to ids inside the vocabulary
 * that decode back to the text (every byte has a token, and merges only join tokens). */
#include "tests/fuzz/fuzz_util.h"
#include "tokenizer/tokenizer.h"

static const char TEXT[] = "Once upon a time, the dog's 3 friends<|endoftext|> said \"hi\" \n\n caf\xc3\xa9 "
                           "\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t nv = nul ? (size_t)(nul - data) : size;
    const uint8_t *merges = nul ? nul + 1 : data + size;
    tok_tokenizer *t;
    lmq_err err = { 0 };
    if (tok_open_gpt2(data, nv, merges, (size_t)(data + size - merges), &t, &err))
        return 0;
    int32_t *ids;
    size_t n;
    FZ_CHECK(tok_encode(t, TEXT, sizeof TEXT - 1, &ids, &n, &err) == LMQ_OK, "%s", err.msg);
    for (size_t i = 0; i < n; i++)
        FZ_CHECK(ids[i] >= 0 && ids[i] < tok_vocab_size(t), "id %d", (int)ids[i]);
    char *back;
    size_t len;
    FZ_CHECK(tok_decode(t, ids, n, &back, &len, &err) == LMQ_OK, "%s", err.msg);
    FZ_CHECK(len == sizeof TEXT - 1 && !memcmp(back, TEXT, len), "decode(encode(x)) != x: %.*s", (int)len, back);
    free(back);
    free(ids);
    tok_free(t);
    return 0;
}
