/* Encoding arbitrary bytes with the fixture tokenizers (GPT-2 byte-level BPE and llama2.c's
 * tok512): text that is not UTF-8 is refused with LMQ_E_FORMAT; valid text gives ids inside
 * the vocabulary and decode(encode(x)) == x, as tokenizer/tokenizer.h promises for both kinds. */
#include "tests/fuzz/fuzz_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

static tok_tokenizer *toks[2];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_fixture_tokenizers(&toks[0], &toks[1]);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    int valid = tok_utf8_valid_prefix(data, size) == size;
    for (int k = 0; k < 2; k++) {
        const tok_tokenizer *t = toks[k];
        int32_t *ids;
        size_t n;
        lmq_err err = { 0 };
        lmq_code c = tok_encode(t, text, size, &ids, &n, &err);
        if (!valid) {
            FZ_CHECK(c == LMQ_E_FORMAT, "invalid UTF-8 encoded (code %d)", c);
            continue;
        }
        FZ_CHECK(c == LMQ_OK, "%s", err.msg);
        for (size_t i = 0; i < n; i++)
            FZ_CHECK(ids[i] >= 0 && ids[i] < tok_vocab_size(t), "id %d", (int)ids[i]);
        char *back;
        size_t len;
        FZ_CHECK(tok_decode(t, ids, n, &back, &len, &err) == LMQ_OK, "%s", err.msg);
        FZ_CHECK(len == size && !memcmp(back, text, size), "%s: decode(encode(x)) != x (%zu bytes, %zu back)",
                 k ? "llama2c" : "gpt2", size, len);
        free(back);
        free(ids);
    }
    return 0;
}
