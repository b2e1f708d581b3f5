/* Tokenizers: llama2.c's SentencePiece-BPE (tokenizer.bin), SentencePiece's tokenizer.model
 * (BPE), GPT-2's byte-level BPE (vocab.json + merges.txt), and Hugging Face tokenizer.json
 * files of the GPT-2, Llama-3 / Qwen2 (Split + ByteLevel) and Llama-2 (SentencePiece BPE with
 * byte fallback) kinds.
 *
 * Constructors take the files' bytes, not paths: tokenizer files travel inside the artefact
 * (lmq_file). A tokenizer is immutable once opened; encode and decode may run concurrently on
 * one tokenizer. Token ids are int32_t. Text must be valid UTF-8.
 */
#ifndef LMQ_TOKENIZER_H
#define LMQ_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "formats/model.h"

typedef struct tok_tokenizer tok_tokenizer;

/* llama2.c tokenizer.bin: int32 max_token_length, then vocab_size x (float32 score, int32 len,
 * len bytes). The file does not store vocab_size: pass the model's (the file must then hold
 * exactly that many entries, no byte more), or 0 to read entries until the file ends. Ids 0, 1,
 * 2 are <unk>, BOS and EOS (at least 3 tokens). The vocabulary has byte fallback when all 256
 * pieces "<0x00>".."<0xFF>" are in it, at whatever ids (llama2.c's trained vocabularies put them
 * at 3..258); a custom vocabulary without them (llama2.c's --vocab_size training path) has none,
 * and its ids 3.. are ordinary pieces. */
lmq_code tok_open_llama2c(const uint8_t *data, size_t size, int vocab_size, tok_tokenizer **out,
                          lmq_err *err);

/* GPT-2 vocab.json (token -> id, ids 0..n-1 each once) and merges.txt ("#version" line
 * optional, then one "a b" merge per line in rank order). "<|endoftext|>", when in the
 * vocabulary, is the end-of-text token and is recognised as one token inside text. */
lmq_code tok_open_gpt2(const uint8_t *vocab_json, size_t vocab_size, const uint8_t *merges_txt,
                       size_t merges_size, tok_tokenizer **out, lmq_err *err);

/* Hugging Face tokenizer.json with a BPE model: model.vocab, model.merges ("a b" strings or
 * [a, b] pairs, in rank order) and added_tokens, which are split out of text first (matched
 * literally, longest first; lstrip / rstrip take the whitespace before / after them; single_word
 * is refused). The pipelines read:
 *   GPT-2:   pre_tokenizer ByteLevel (its own regex, no prefix space);
 *   Llama-3, Qwen2: pre_tokenizer Sequence[Split(their pattern, Isolated), ByteLevel(no
 *            regex)], model.ignore_merges honoured;
 *   Llama-2 family (SentencePiece BPE): normalizer Sequence[Prepend "▁", Replace " " -> "▁"]
 *            (every segment between added tokens gets the prefix), or pre_tokenizer Metaspace
 *            (prepend_scheme always / first / never, split); byte_fallback, unk_token, fuse_unk.
 * post_processor: none, ByteLevel, or TemplateProcessing [special token] + text (that token is
 * BOS, put first by tok_encode). Other models, normalizers, pre-tokenisers, patterns and
 * templates give LMQ_E_UNSUPPORTED naming the component. */
lmq_code tok_open_hf_json(const uint8_t *json, size_t size, tok_tokenizer **out, lmq_err *err);

/* SentencePiece's tokenizer.model (protobuf ModelProto) of a BPE model with the identity
 * normalizer: pieces with their scores and types, unk/bos/eos ids, add_dummy_prefix,
 * byte_fallback. Encoded as llama2.c's tokenizer is (merges by score; only normal pieces are
 * merged into). Unigram models, other normalizers and user-defined pieces give
 * LMQ_E_UNSUPPORTED. */
lmq_code tok_open_spm_model(const uint8_t *data, size_t size, tok_tokenizer **out, lmq_err *err);

/* Opens the tokenizer a model carries, chosen by m->arch.tokenizer: "tokenizer.bin" (with
 * m->arch.vocab_size entries), "vocab.json" + "merges.txt", "tokenizer.json" or
 * "tokenizer.model". */
lmq_code tok_open_model(const lmq_model *m, tok_tokenizer **out, lmq_err *err);

void tok_free(tok_tokenizer *t);

/* The Hugging Face files of a tokenizer, NUL-terminated JSON texts (malloc'd). */
typedef struct {
    char *tokenizer_json, *tokenizer_config_json, *special_tokens_map_json;
} tok_hf_text;

/* A llama2.c vocabulary as Hugging Face's Llama-2 tokenizer files (tok_hf_write.c): a BPE
 * tokenizer.json (Prepend/Replace normalizer, byte fallback when the vocabulary has it,
 * <unk>/<s>/</s> as added tokens, a merge for each split of a piece into two pieces, ranked by
 * its score), whose encoding tok_open_hf_json reads back as the tokenizer.bin's; max_seq is
 * tokenizer_config.json's model_max_length. Other kinds give LMQ_E_UNSUPPORTED. */
lmq_code tok_hf_write(const tok_tokenizer *t, int max_seq, tok_hf_text *out, lmq_err *err);
void tok_hf_text_free(tok_hf_text *h);

/* llama.cpp's name for a byte-level BPE tokenizer's pre-tokenizer (GGUF's tokenizer.ggml.pre, as
 * llama-vocab.cpp spells them): "gpt-2" (GPT-2's regex), "llama-bpe" (Llama-3's Split),
 * "qwen2"; NULL for the SentencePiece kinds. */
const char *tok_ggml_pre(const tok_tokenizer *t);

lmq_tok_kind tok_kind(const tok_tokenizer *t); /* the kind it was opened as */
int tok_vocab_size(const tok_tokenizer *t);    /* ids are 0..vocab_size-1 */
int tok_bos_id(const tok_tokenizer *t);        /* what tok_encode puts first (llama2c: 1), or -1 */
int tok_eos_id(const tok_tokenizer *t);        /* llama2c: 2; json: <|endoftext|>, </s> or
                                                  <|end_of_text|>; or -1 */

/* Encodes text[0..len) into a malloc'd array (*ids, *n; free() it). BOS first when the
 * tokenizer has one (tok_bos_id); special tokens are split out of the text first, and each
 * stretch between them is encoded on its own.
 * llama2c: exactly llama2.c's encode(text, bos=1, eos=0): BOS, the dummy-prefix " " when the
 *   text is not empty, code points as tokens, then merges of the adjacent pair with the
 *   highest-scoring concatenation, leftmost on ties. A code point that is not a piece becomes
 *   its UTF-8 bytes' "<0xHH>" tokens when the vocabulary has byte fallback, else one <unk>
 *   (id 0), as SentencePiece encoded the model's training data: such text is not an error, and
 *   does not decode back to itself. tokenizer.model: the same. SentencePiece-style
 *   tokenizer.json: the same with merges by rank and its prefix rule (tok_open_hf_json).
 * byte-level (gpt2, tokenizer.json): the pre-tokeniser (GPT-2's, Llama-3's or Qwen2's), then
 *   rank-ordered merges within each pre-token.
 * Text that is not valid UTF-8 gives LMQ_E_FORMAT naming the byte offset. */
lmq_code tok_encode(const tok_tokenizer *t, const char *text, size_t len, int32_t **ids,
                    size_t *n, lmq_err *err);

/* The bytes token id stands for when it follows prev_id (-1: nothing before it), as llama2.c's
 * decode: after BOS a leading space (the dummy prefix) is dropped, "<0xHH>" pieces are the raw
 * byte, and BOS itself is empty. *bytes points into t. Byte-level BPE ignores prev_id.
 * A token may hold part of a UTF-8 sequence; concatenate before treating bytes as text. */
lmq_code tok_decode_token(const tok_tokenizer *t, int32_t prev_id, int32_t id,
                          const uint8_t **bytes, size_t *len, lmq_err *err);

/* Decodes ids[0..n) into a malloc'd, NUL-terminated buffer (*len excludes the NUL).
 * decode(encode(text)) == text for valid UTF-8 text, for both kinds (llama2c: when every code
 * point is a piece or the vocabulary has byte fallback). */
lmq_code tok_decode(const tok_tokenizer *t, const int32_t *ids, size_t n, char **text,
                    size_t *len, lmq_err *err);

#endif
