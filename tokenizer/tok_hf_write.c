/* A llama2.c vocabulary (tokenizer.bin: pieces and scores) written as the Hugging Face files
 * vLLM and transformers load: tokenizer.json in the Llama-2 (SentencePiece BPE) form, with byte
 * fallback when the vocabulary has the 256 "<0xHH>" pieces, tokenizer_config.json and
 * special_tokens_map.json. llama2.c merges the adjacent pair whose concatenation scores highest;
 * a BPE model merges by rank, so every way of splitting a piece into two pieces becomes a merge,
 * ranked by the piece's score (then id), as transformers' own SentencePiece conversion does. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

#define SP_SPACE "\xE2\x96\x81" /* U+2581: how the vocabulary spells a space */
#define L2C_SPECIALS 3          /* ids 0, 1, 2: <unk>, <s>, </s> */
#define L2C_NO_MERGE -1e10f     /* llama2.c merges only into pieces scoring above this */

static const char *const SPECIALS[L2C_SPECIALS] = { "<unk>", "<s>", "</s>" };

/* Piece id as the vocabulary spells it (spaces as U+2581), malloc'd; NULL when out of memory. */
static char *piece_text(const tok_tokenizer *t, int id)
{
    if (id < L2C_SPECIALS)
        return strdup(SPECIALS[id]);
    const uint8_t *p = t->bytes + t->off[id];
    const size_t n = t->off[id + 1] - t->off[id];
    char *s = malloc(3 * n + 1), *o = s;
    for (size_t i = 0; s && i < n; i++) {
        if (p[i] == ' ') {
            memcpy(o, SP_SPACE, 3);
            o += 3;
        } else {
            *o++ = (char)p[i];
        }
    }
    if (s)
        *o = '\0';
    return s;
}

typedef struct {
    float score;
    int id, split; /* the merged piece, and where it splits (bytes into its text) */
} merge;

static int by_rank(const void *a, const void *b)
{
    const merge *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return x->id != y->id ? (x->id < y->id ? -1 : 1) : (x->split > y->split) - (x->split < y->split);
}

static json_t *added_token(int id)
{
    return json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", id, "content", SPECIALS[id], "single_word", 0,
                     "lstrip", 0, "rstrip", 0, "normalized", 0, "special", 1);
}

/* model.merges: [left, right] for every split of a mergeable piece into two pieces, by rank. */
static lmq_code merges_of(const tok_tokenizer *t, char **text, json_t *vocab, json_t **out, lmq_err *err)
{
    size_t n = 0, cap = 0;
    merge *m = NULL;
    for (int id = L2C_SPECIALS; id < t->n_vocab; id++) {
        if (t->byte_piece[id] >= 0 || !(t->score[id] > L2C_NO_MERGE))
            continue;
        const size_t len = strlen(text[id]);
        for (size_t k = 1; k < len; k++) {
            if (((unsigned char)text[id][k] & 0xC0) == 0x80) /* inside a code point */
                continue;
            char *right = text[id] + k, keep = *right;
            *right = '\0';
            const int left_in = json_object_get(vocab, text[id]) != NULL;
            *right = keep;
            if (!left_in || !json_object_get(vocab, right))
                continue;
            if (n == cap) {
                merge *grown = realloc(m, (cap = cap ? 2 * cap : 1024) * sizeof *m);
                if (!grown) {
                    free(m);
                    return lmq_fail(err, LMQ_E_NOMEM, "tokenizer.json: out of memory");
                }
                m = grown;
            }
            m[n++] = (merge){ t->score[id], id, (int)k };
        }
    }
    if (n)
        qsort(m, n, sizeof *m, by_rank);
    json_t *arr = *out = json_array();
    for (size_t i = 0; i < n; i++) {
        const char *s = text[m[i].id];
        json_array_append_new(arr, json_pack("[s%, s]", s, (size_t)m[i].split, s + m[i].split));
    }
    free(m);
    return LMQ_OK;
}

static json_t *tokenizer_json(const tok_tokenizer *t, json_t *vocab, json_t *merges)
{
    json_t *added = json_array();
    for (int id = 0; id < L2C_SPECIALS; id++)
        json_array_append_new(added, added_token(id));
    json_t *seq_a = json_pack("{s:{s:s, s:i}}", "Sequence", "id", "A", "type_id", 0);
    json_t *post = json_pack("{s:s, s:[{s:{s:s, s:i}}, o], s:[{s:{s:s, s:i}}, O, {s:{s:s, s:i}}], s:{s:{s:s, s:[i], "
                             "s:[s]}}}",
                             "type", "TemplateProcessing", "single", "SpecialToken", "id", "<s>", "type_id", 0, seq_a,
                             "pair", "SpecialToken", "id", "<s>", "type_id", 0, seq_a, "Sequence", "id", "B",
                             "type_id", 1, "special_tokens", "<s>", "id", "<s>", "ids", 1, "tokens", "<s>");
    return json_pack(
        "{s:s, s:n, s:n, s:o, s:{s:s, s:[{s:s, s:s}, {s:s, s:{s:s}, s:s}]}, s:n, s:o, "
        "s:{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s}, {s:s}, {s:s, s:s, s:i, s:i}]}, "
        "s:{s:s, s:n, s:s, s:n, s:n, s:b, s:b, s:b, s:o, s:o}}",
        "version", "1.0", "truncation", "padding", "added_tokens", added,
        "normalizer", "type", "Sequence", "normalizers", "type", "Prepend", "prepend", SP_SPACE, "type", "Replace",
        "pattern", "String", " ", "content", SP_SPACE,
        "pre_tokenizer", "post_processor", post,
        "decoder", "type", "Sequence", "decoders", "type", "Replace", "pattern", "String", SP_SPACE, "content", " ",
        "type", "ByteFallback", "type", "Fuse", "type", "Strip", "content", " ", "start", 1, "stop", 0,
        "model", "type", "BPE", "dropout", "unk_token", "<unk>", "continuing_subword_prefix", "end_of_word_suffix",
        "fuse_unk", 1, "byte_fallback", t->byte_fallback, "ignore_merges", 0, "vocab", vocab, "merges", merges);
}

static json_t *tokenizer_config(int max_seq)
{
    json_t *decoder = json_object();
    for (int id = 0; id < L2C_SPECIALS; id++) {
        char key[16];
        snprintf(key, sizeof key, "%d", id);
        json_t *a = added_token(id);
        json_object_del(a, "id");
        json_object_set_new(decoder, key, a);
    }
    return json_pack("{s:b, s:b, s:o, s:s, s:s, s:s, s:n, s:b, s:b, s:i, s:s, s:{}}", "add_bos_token", 1,
                     "add_eos_token", 0, "added_tokens_decoder", decoder, "bos_token", "<s>", "eos_token", "</s>",
                     "unk_token", "<unk>", "pad_token", "clean_up_tokenization_spaces", 0, "legacy", 1,
                     "model_max_length", max_seq, "tokenizer_class", "LlamaTokenizerFast", "sp_model_kwargs");
}

static char *dump(json_t *j)
{
    char *s = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    return s;
}

lmq_code tok_hf_write(const tok_tokenizer *t, int max_seq, tok_hf_text *out, lmq_err *err)
{
    memset(out, 0, sizeof *out);
    if (t->kind != LMQ_TOK_LLAMA2C)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "only a llama2.c vocabulary (tokenizer.bin) is written as "
                        "tokenizer.json");
    char **text = calloc((size_t)t->n_vocab, sizeof *text);
    json_t *vocab = json_object(), *merges = NULL;
    lmq_code c = text && vocab ? LMQ_OK : lmq_fail(err, LMQ_E_NOMEM, "tokenizer.json: out of memory");
    for (int id = 0; !c && id < t->n_vocab; id++) {
        if (!(text[id] = piece_text(t, id)))
            c = lmq_fail(err, LMQ_E_NOMEM, "tokenizer.json: out of memory");
        else if (json_object_get(vocab, text[id]))
            c = lmq_fail(err, LMQ_E_UNSUPPORTED, "tokenizer.bin: token %d \"%.40s\" repeats token %d's piece: a "
                         "tokenizer.json vocabulary holds each piece once", id, text[id],
                         (int)json_integer_value(json_object_get(vocab, text[id])));
        else
            json_object_set_new(vocab, text[id], json_integer(id));
    }
    if (!c)
        c = merges_of(t, text, vocab, &merges, err);
    for (int id = 0; text && id < t->n_vocab; id++)
        free(text[id]);
    free(text);
    if (c) {
        json_decref(vocab);
        return c;
    }
    out->tokenizer_json = dump(tokenizer_json(t, vocab, merges));
    out->tokenizer_config_json = dump(tokenizer_config(max_seq));
    out->special_tokens_map_json = dump(json_pack("{s:s, s:s, s:s}", "bos_token", "<s>", "eos_token", "</s>",
                                                  "unk_token", "<unk>"));
    if (!out->tokenizer_json || !out->tokenizer_config_json || !out->special_tokens_map_json) {
        tok_hf_text_free(out);
        return lmq_fail(err, LMQ_E_NOMEM, "tokenizer.json: out of memory");
    }
    return LMQ_OK;
}

void tok_hf_text_free(tok_hf_text *h)
{
    free(h->tokenizer_json);
    free(h->tokenizer_config_json);
    free(h->special_tokens_map_json);
    memset(h, 0, sizeof *h);
}
