/* llama2.c tokenizer.bin: tok_open_llama2c on raw bytes (vocabulary size read from the file);
 * what opens must open again when told its own size and refuse one entry less, and must encode
 * a fixed text to ids inside the vocabulary that decode without error. */
#include "tests/fuzz/fuzz_util.h"
#include "tokenizer/tokenizer.h"

static const char TEXT[] = "Once upon a time, Lily saw a big dog. \"Hi!\" she said.\n\t 3.14 caf\xc3\xa9 "
                           "\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 <0x41> <s></s>";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tok_tokenizer *t, *again;
    lmq_err err = { 0 };
    if (tok_open_llama2c(data, size, 0, &t, &err))
        return 0;
    int n = tok_vocab_size(t);
    FZ_CHECK(tok_open_llama2c(data, size, n, &again, &err) == LMQ_OK, "%d tokens: %s", n, err.msg);
    tok_free(again);
    FZ_CHECK(tok_open_llama2c(data, size, n - 1, &again, &err) == LMQ_E_FORMAT, "opens with %d of %d tokens",
             n - 1, n);
    int32_t *ids;
    size_t n_ids;
    if (!tok_encode(t, TEXT, sizeof TEXT - 1, &ids, &n_ids, &err)) {
        /* BOS is usually ids[0], but like llama2.c the merges run over it: a vocabulary in
         * which BOS's piece followed by the next piece is a piece merges BOS away. */
        FZ_CHECK(n_ids >= 1, "no ids");
        for (size_t i = 0; i < n_ids; i++)
            FZ_CHECK(ids[i] >= 0 && ids[i] < n, "id %d outside [0, %d)", (int)ids[i], n);
        char *text;
        size_t len;
        FZ_CHECK(tok_decode(t, ids, n_ids, &text, &len, &err) == LMQ_OK, "%s", err.msg);
        free(text);
        free(ids);
    }
    tok_free(t);
    return 0;
}
