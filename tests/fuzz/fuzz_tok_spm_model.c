/* SentencePiece tokenizer.model, which artefacts may carry: tok_open_spm_model on raw bytes (the
 * protobuf reader and its checks); what opens must encode a fixed text and the input itself
 * (when it is UTF-8) to ids inside the vocabulary that decode without error, or refuse it with
 * LMQ_E_FORMAT (a vocabulary without byte fallback whose unk_id is -1 lacks some text). */
#include "tests/fuzz/fuzz_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

static const char TEXT[] = "Once upon a time, Lily saw a big dog. \"Hi!\" she said.\n\t 3.14 caf\xc3\xa9 "
                           "\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 <0x41> <s></s>";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tok_tokenizer *t;
    lmq_err err = { 0 };
    if (tok_open_spm_model(data, size, &t, &err))
        return 0;
    fz_encode_decodes(t, TEXT, sizeof TEXT - 1, LMQ_E_FORMAT);
    if (tok_utf8_valid_prefix(data, size) == size)
        fz_encode_decodes(t, (const char *)data, size, LMQ_E_FORMAT);
    tok_free(t);
    return 0;
}
