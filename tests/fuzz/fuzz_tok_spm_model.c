/* SentencePiece tokenizer.model, which artefacts may carry: tok_open_spm_model on raw bytes (the
 * protobuf reader and its checks); what opens must encode a fixed text and the input itself
 * (when it is UTF-8) to ids inside the vocabulary that decode without error. */
#include "tests/fuzz/fuzz_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

static const char TEXT[] = "Once upon a time, Lily saw a big dog. \"Hi!\" she said.\n\t 3.14 caf\xc3\xa9 "
                           "\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 <0x41> <s></s>";

static void encode(const tok_tokenizer *t, const char *text, size_t size)
{
    int32_t *ids;
    size_t n;
    lmq_err err = { 0 };
    lmq_code c = tok_encode(t, text, size, &ids, &n, &err);
    /* a vocabulary without byte fallback whose unk_id is -1 refuses what it lacks */
    FZ_CHECK(c == LMQ_OK || c == LMQ_E_FORMAT, "%s", err.msg);
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tok_tokenizer *t;
    lmq_err err = { 0 };
    if (tok_open_spm_model(data, size, &t, &err))
        return 0;
    encode(t, TEXT, sizeof TEXT - 1);
    if (tok_utf8_valid_prefix(data, size) == size)
        encode(t, (const char *)data, size);
    tok_free(t);
    return 0;
}
