/* Protocol P1's token stream on arbitrary text, with both fixture tokenizers: documents lie
 * inside the text, in order, stripped and non-empty; the stream is built from exactly those
 * documents (llama2c: one BOS each; GPT-2: joined by <|endoftext|>). */
#include "tests/fuzz/fuzz_util.h"
#include "tokenizer/stream.h"
#include "tokenizer/tokenizer.h"

static tok_tokenizer *toks[2];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_fixture_tokenizers(&toks[0], &toks[1]);
    return 0;
}

static int space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    tok_doc *docs;
    int nd;
    lmq_err err = { 0 };
    FZ_CHECK(tok_docs_split(text, size, &docs, &nd, &err) == LMQ_OK, "%s", err.msg);
    size_t prev_end = 0;
    for (int i = 0; i < nd; i++) {
        const tok_doc *d = &docs[i];
        FZ_CHECK(d->len > 0 && d->off >= prev_end && d->len <= size - d->off, "document %d", i);
        FZ_CHECK(!space(text[d->off]) && !space(text[d->off + d->len - 1]), "document %d not stripped", i);
        prev_end = d->off + d->len;
    }
    free(docs);
    for (int k = 0; k < 2; k++) {
        int32_t *ids;
        size_t n;
        int n_docs;
        if (tok_stream_build(toks[k], text, size, &ids, &n, &n_docs, &err))
            continue;
        FZ_CHECK(n_docs == nd, "%d documents, the split found %d", n_docs, nd);
        size_t marks = 0;
        int mark = k ? tok_bos_id(toks[k]) : tok_eos_id(toks[k]);
        for (size_t i = 0; i < n; i++) {
            FZ_CHECK(ids[i] >= 0 && ids[i] < tok_vocab_size(toks[k]), "id %d", (int)ids[i]);
            marks += ids[i] == mark;
        }
        FZ_CHECK(k ? marks == (size_t)nd : marks >= (size_t)nd - 1, "%zu marks for %d documents", marks, nd);
        FZ_CHECK(!k || ids[0] == mark, "llama2c stream does not start with BOS");
        free(ids);
    }
    return 0;
}
