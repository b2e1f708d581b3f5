/* Hugging Face tokenizer.json (byte-level or SentencePiece-style BPE), which artefacts may carry:
 * tok_open_hf_json on raw bytes; what opens must encode a fixed text and the input itself (when
 * it is UTF-8) to ids inside the vocabulary that decode, or refuse the text with a clear error
 * (a SentencePiece vocabulary without byte fallback or unknown token, text an NFC normalizer
 * would change). */
#include "tests/fuzz/fuzz_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

static const char TEXT[] = "Once upon a time, the dog's 3 friends<|endoftext|> said \"hi\" \n\n caf\xc3\xa9 "
                           "\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tok_tokenizer *t;
    lmq_err err = { 0 };
    if (tok_open_hf_json(data, size, &t, &err))
        return 0;
    fz_encode_decodes(t, TEXT, sizeof TEXT - 1, LMQ_E_UNSUPPORTED);
    if (tok_utf8_valid_prefix(data, size) == size)
        fz_encode_decodes(t, (const char *)data, size, LMQ_E_UNSUPPORTED);
    tok_free(t);
    return 0;
}
