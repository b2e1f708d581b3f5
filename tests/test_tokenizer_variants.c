/* The tokenizer variants real checkpoints carry, each built here in its exact file layout with a
 * tiny vocabulary: tokenizer.json of the Llama-2 family (SentencePiece BPE: Prepend/Replace
 * normalizer or Metaspace, byte fallback), of Llama-3 / Qwen2 (Split pattern + ByteLevel,
 * ignore_merges), and SentencePiece's tokenizer.model. Expected ids are derived by hand from the
 * published algorithms; each derivation is in the comment beside it. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/file.h"
#include "convert/convert.h"
#include "formats/artefact.h"
#include "formats/container.h"
#include "runtime/artefact.h"
#include "tests/testutil.h"
#include "tokenizer/stream.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

#define SP "\xE2\x96\x81" /* U+2581 */

static void assert_encodes(const tok_tokenizer *t, const char *text, const int32_t *want, size_t n)
{
    int32_t *ids;
    size_t k;
    lmq_err e;
    ck_assert_msg(tok_encode(t, text, strlen(text), &ids, &k, &e) == LMQ_OK, "%s", e.msg);
    char got[512] = "";
    for (size_t i = 0; i < k && strlen(got) < sizeof got - 16; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), " %d", (int)ids[i]);
    ck_assert_msg(k == n && memcmp(ids, want, n * sizeof *ids) == 0, "\"%s\" encodes to%s", text, got);
    free(ids);
}
#define ENC(t, text, ...)                                                                              \
    do {                                                                                               \
        static const int32_t want_[] = { __VA_ARGS__ };                                                \
        assert_encodes(t, text, want_, sizeof want_ / sizeof want_[0]);                                \
    } while (0)

static void assert_decodes(const tok_tokenizer *t, const int32_t *ids, size_t n, const char *want)
{
    char *d;
    size_t len;
    lmq_err e;
    ck_assert_msg(tok_decode(t, ids, n, &d, &len, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(len == strlen(want) && !memcmp(d, want, len), "decoded \"%s\", want \"%s\"", d, want);
    free(d);
}

static lmq_code open_json(json_t *root, tok_tokenizer **t, lmq_err *e)
{
    char *text = json_dumps(root, JSON_COMPACT);
    *t = NULL;
    lmq_code c = tok_open_hf_json((const uint8_t *)text, strlen(text), t, e);
    free(text);
    return c;
}

static tok_tokenizer *open_json_ok(json_t *root)
{
    tok_tokenizer *t;
    lmq_err e;
    ck_assert_msg(open_json(root, &t, &e) == LMQ_OK, "%s", e.msg);
    return t;
}

/* ---- Llama-2 family tokenizer.json ---------------------------------------------------------
 * ids: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then the pieces below; merges in rank
 * order as in the list. */
static const char *const SP_PIECES[] = { SP, "a", "b", "h", "i", "b" SP, SP "a", "ab", SP "ab", "hi", SP "hi" };
enum { P_SPACE = 259, P_A, P_B, P_H, P_I, P_B_SP, P_SP_A, P_AB, P_SP_AB, P_HI, P_SP_HI };
static const char *const SP_MERGES[] = { "b " SP, SP " a", "a b", SP "a b", "h i", SP " hi" };
#define BYTE(b) (3 + (b))

static json_t *sp_vocab(void)
{
    json_t *v = json_object();
    json_object_set_new(v, "<unk>", json_integer(0));
    json_object_set_new(v, "<s>", json_integer(1));
    json_object_set_new(v, "</s>", json_integer(2));
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        json_object_set_new(v, name, json_integer(BYTE(b)));
    }
    for (size_t i = 0; i < sizeof SP_PIECES / sizeof SP_PIECES[0]; i++)
        json_object_set_new(v, SP_PIECES[i], json_integer(P_SPACE + (int)i));
    return v;
}

/* Llama-2's tokenizer.json, as transformers writes it (legacy normalizer, no pre-tokenizer). */
static json_t *llama2_json(void)
{
    json_t *merges = json_array();
    for (size_t i = 0; i < sizeof SP_MERGES / sizeof SP_MERGES[0]; i++)
        json_array_append_new(merges, json_string(SP_MERGES[i]));
    json_t *added = json_array();
    static const char *const specials[] = { "<unk>", "<s>", "</s>" };
    for (int i = 0; i < 3; i++)
        json_array_append_new(added, json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", i, "content",
                                               specials[i], "single_word", 0, "lstrip", 0, "rstrip", 0,
                                               "normalized", 0, "special", 1));
    json_t *root = json_pack(
        "{s:s, s:o, s:{s:s, s:[{s:s, s:s}, {s:s, s:{s:s}, s:s}]}, s:n, "
        "s:{s:s, s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}], s:[], "
        "   s:{s:{s:s, s:[i], s:[s]}}}, "
        "s:{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s}, {s:s}, {s:s, s:s, s:i, s:i}]}, "
        "s:{s:s, s:n, s:s, s:n, s:n, s:b, s:b, s:o, s:o}}",
        "version", "1.0", "added_tokens", added,
        "normalizer", "type", "Sequence", "normalizers", "type", "Prepend", "prepend", SP, "type", "Replace",
        "pattern", "String", " ", "content", SP,
        "pre_tokenizer",
        "post_processor", "type", "TemplateProcessing", "single", "SpecialToken", "id", "<s>", "type_id", 0,
        "Sequence", "id", "A", "type_id", 0, "pair", "special_tokens", "<s>", "id", "<s>", "ids", 1, "tokens",
        "<s>",
        "decoder", "type", "Sequence", "decoders", "type", "Replace", "pattern", "String", SP, "content", " ",
        "type", "ByteFallback", "type", "Fuse", "type", "Strip", "content", " ", "start", 1, "stop", 0,
        "model", "type", "BPE", "dropout", "unk_token", "<unk>", "continuing_subword_prefix",
        "end_of_word_suffix", "fuse_unk", 1, "byte_fallback", 1, "vocab", sp_vocab(), "merges", merges);
    ck_assert_ptr_nonnull(root);
    return root;
}

/* The same vocabulary with the newer Metaspace pre-tokenizer instead of the normalizer. */
static json_t *metaspace_json(const char *scheme, int split)
{
    json_t *root = llama2_json();
    json_object_set_new(root, "normalizer", json_null());
    json_object_set_new(root, "pre_tokenizer", json_pack("{s:s, s:s, s:s, s:b}", "type", "Metaspace", "replacement",
                                                         SP, "prepend_scheme", scheme, "split", split));
    return root;
}

START_TEST(llama2_normalizer)
{
    json_t *root = llama2_json();
    tok_tokenizer *t = open_json_ok(root);
    ck_assert_int_eq(tok_kind(t), LMQ_TOK_HF_JSON);
    ck_assert_int_eq(tok_vocab_size(t), P_SP_HI + 1);
    ck_assert_int_eq(tok_bos_id(t), 1); /* from the TemplateProcessing post-processor */
    ck_assert_int_eq(tok_eos_id(t), 2);
    /* "ab" -> "▁ab" = ▁ a b; ranks: (▁,a) 1, (a,b) 2 -> ▁a b; (▁a,b) 3 -> ▁ab */
    ENC(t, "ab", 1, P_SP_AB);
    /* "ab ab" -> ▁ a b ▁ a b: (b,▁) rank 0 first: ▁ a b▁ a b; then (▁,a) 1: ▁a b▁ a b;
     * (a,b) 2: ▁a b▁ ab; nothing else pairs */
    ENC(t, "ab ab", 1, P_SP_A, P_B_SP, P_AB);
    /* "bab" -> ▁ b a b: only (a,b) merges */
    ENC(t, "bab", 1, P_SPACE, P_B, P_AB);
    /* "é" is not a piece: byte fallback to its UTF-8 bytes C3 A9 */
    ENC(t, "a\xC3\xA9", 1, P_SP_A, BYTE(0xC3), BYTE(0xA9));
    /* the normalizer prefixes every stretch between added tokens: ▁hi </s> ▁hi */
    ENC(t, "hi</s>hi", 1, P_SP_HI, 2, P_SP_HI);
    /* " hi" -> ▁ ▁ h i: (h,i) 4: ▁ ▁ hi; (▁,hi) 5 at the leftmost place it pairs: ▁ ▁hi */
    ENC(t, " hi", 1, P_SPACE, P_SP_HI);
    ENC(t, "", 1);
    /* decoding: BOS is empty, the dummy-prefix space after it goes, byte pieces are bytes */
    static const int32_t ids[] = { 1, P_SP_A, BYTE(0xC3), BYTE(0xA9), P_B_SP, P_SP_HI };
    assert_decodes(t, ids, 6, "a\xC3\xA9" "b  hi");
    static const int32_t ids2[] = { 1, P_SPACE, P_SP_HI };
    assert_decodes(t, ids2, 3, " hi");
    tok_free(t);

    /* without byte fallback: <unk>, consecutive unknowns fused (fuse_unk) or not */
    json_object_set_new(json_object_get(root, "model"), "byte_fallback", json_false());
    t = open_json_ok(root);
    ENC(t, "a\xC3\xA9\xC3\xA9", 1, P_SP_A, 0);
    tok_free(t);
    json_object_set_new(json_object_get(root, "model"), "fuse_unk", json_false());
    t = open_json_ok(root);
    ENC(t, "a\xC3\xA9\xC3\xA9", 1, P_SP_A, 0, 0);
    tok_free(t);
    json_decref(root);
}
END_TEST

/* Llama-2's file with two chat tokens as Phi-3's carry them: one taking the whitespace after it
 * (rstrip), one the whitespace before it (lstrip). */
enum { P_END = P_SP_HI + 1, P_USER };
static json_t *llama2_chat_json(void)
{
    json_t *root = llama2_json();
    json_t *added = json_object_get(root, "added_tokens");
    json_array_append_new(added, json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", P_END, "content", "<|end|>",
                                           "single_word", 0, "lstrip", 0, "rstrip", 1, "normalized", 0, "special", 1));
    json_array_append_new(added, json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", P_USER, "content",
                                           "<|user|>", "single_word", 0, "lstrip", 1, "rstrip", 0, "normalized", 0,
                                           "special", 1));
    return root;
}

START_TEST(added_token_strips)
{
    json_t *root = llama2_chat_json();
    tok_tokenizer *t = open_json_ok(root);
    /* "hi " keeps its space (no lstrip): ▁hi▁ -> (h,i) 4, (▁,hi) 5 -> ▁hi ▁; rstrip takes " "
     * after <|end|>, so "ab" follows alone: ▁ab */
    ENC(t, "hi <|end|> \tab", 1, P_SP_HI, P_SPACE, P_END, P_SP_AB);
    /* lstrip takes the spaces before <|user|>: "ab" then "hi", each prefixed */
    ENC(t, "ab  <|user|>hi", 1, P_SP_AB, P_USER, P_SP_HI);
    /* the stretch is only whitespace: nothing is left of it */
    ENC(t, " <|user|><|end|>  ", 1, P_USER, P_END);
    tok_free(t);
    /* single_word is refused */
    json_object_set_new(json_array_get(json_object_get(root, "added_tokens"), 3), "single_word", json_true());
    lmq_err e;
    ck_assert_int_eq(open_json(root, &t, &e), LMQ_E_UNSUPPORTED);
    ck_assert_msg(strstr(e.msg, "single_word"), "%s", e.msg);
    json_decref(root);
}
END_TEST

START_TEST(metaspace_schemes)
{
    /* prepend_scheme "first": only the stretch at the start of the text, and not when it starts
     * with a space already; split false: BPE over the whole stretch, so (b,▁) still merges */
    json_t *root = metaspace_json("first", 0);
    tok_tokenizer *t = open_json_ok(root);
    ENC(t, "hi</s>hi", 1, P_SP_HI, 2, P_HI);
    ENC(t, " hi", 1, P_SP_HI);
    ENC(t, "ab ab", 1, P_SP_A, P_B_SP, P_AB);
    tok_free(t);
    json_decref(root);
    /* "always": every stretch; split true: each word (▁ and what follows) merged on its own, so
     * "ab ab" -> [▁ a b] [▁ a b] -> ▁ab ▁ab, and (b,▁) never applies */
    root = metaspace_json("always", 1);
    t = open_json_ok(root);
    ENC(t, "hi</s>hi", 1, P_SP_HI, 2, P_SP_HI);
    ENC(t, "ab ab", 1, P_SP_AB, P_SP_AB);
    tok_free(t);
    json_decref(root);
    /* "never": no prefix at all */
    root = metaspace_json("never", 0);
    t = open_json_ok(root);
    ENC(t, "ab", 1, P_AB);
    tok_free(t);
    json_decref(root);
}
END_TEST

/* ---- Llama-3 / Qwen2 pre-tokenisers ---- */

static const char LLAMA3_REGEX[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                                   "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char QWEN2_REGEX[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                                  "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* The pre-tokens of text, joined with '|'. */
static void assert_splits(tok_pretok kind, const char *text, const char *want)
{
    char got[256] = "";
    size_t n = strlen(text);
    for (size_t i = 0; i < n;) {
        size_t e = tok_pretoken_end(kind, (const uint8_t *)text, n, i);
        ck_assert_msg(e > i && e <= n, "no progress at %zu in \"%s\"", i, text);
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%.*s", i ? "|" : "", (int)(e - i), text + i);
        i = e;
    }
    ck_assert_msg(!strcmp(got, want), "\"%s\" splits as \"%s\", want \"%s\"", text, got, want);
}

START_TEST(split_patterns)
{
    tok_pretok k;
    ck_assert(tok_split_pattern(LLAMA3_REGEX, &k) && k == TOK_PRE_LLAMA3);
    ck_assert(tok_split_pattern(QWEN2_REGEX, &k) && k == TOK_PRE_QWEN2);
    ck_assert(!tok_split_pattern("\\w+", &k));
    /* Alternatives in order: (A1) contraction, (A2) one non-letter/number/CR/LF then letters,
     * (A3) 1-3 digits, (A4) " ?" then symbols then CR/LF, (A5) spaces up to the last CR/LF,
     * (A6) spaces but the last before a non-space, (A7) spaces.
     * "Hello" A2; " world" A2 with the space as prefix; "'s" A1; the space before "12345" takes
     * neither A2 (a digit follows) nor A4, so A6 alone: " "; "123" "45" A3; " ok" A2; "!!\n\n" A4;
     * "  x": A6 leaves the last space to " x" (A2). */
    assert_splits(TOK_PRE_LLAMA3, "Hello world's 12345 ok!!\n\n  x", "Hello| world|'s| |123|45| ok|!!\n\n| | x");
    /* Qwen2: one digit at a time */
    assert_splits(TOK_PRE_QWEN2, "Hello world's 12345 ok", "Hello| world|'s| |1|2|3|4|5| ok");
    /* case-insensitive contractions (also U+017F, which folds to s); GPT-2's are lower case only */
    assert_splits(TOK_PRE_LLAMA3, "I'M don'T we'Ll x'\xC5\xBF", "I|'M| don|'T| we|'Ll| x|'\xC5\xBF");
    assert_splits(TOK_PRE_GPT2, "I'M x's", "I|'|M| x|'s");
    /* A5: "a \n b": the run " \n " ends at its last newline, then " b" */
    assert_splits(TOK_PRE_LLAMA3, "a \n b\n\nc", "a| \n| b|\n\n|c");
    /* A2's prefix is any one character but CR/LF, letters and numbers: a tab, a quote */
    assert_splits(TOK_PRE_LLAMA3, "\tabc\"quoted\" $%^abc", "\tabc|\"quoted|\"| $%^|abc");
    /* a space before a quote is A4's " ?" (A2 fails: no letter follows the space) */
    assert_splits(TOK_PRE_LLAMA3, "a \"b", "a| \"|b");
    /* letters and numbers of other scripts; trailing spaces stay together (A6 at the end) */
    assert_splits(TOK_PRE_LLAMA3, "\xE6\x97\xA5\xE6\x9C\xAC 4\xD9\xA3   ", "\xE6\x97\xA5\xE6\x9C\xAC| |4\xD9\xA3|   ");
}
END_TEST

/* GPT-2's bytes_to_unicode, written from its definition: bytes '!'..'~', 0xA1..0xAC, 0xAE..0xFF
 * stand for themselves; the rest, in byte order, for U+0100, U+0101, ... */
static void byte_char(int b, char out[3])
{
    int n = 0, cp = -1;
    for (int x = 0; x < 256 && cp < 0; x++) {
        int self = (x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE;
        if (x == b)
            cp = self ? x : 256 + n;
        n += !self;
    }
    if (cp < 0x80) {
        out[0] = (char)cp, out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
    }
}

/* ids 0..255: the byte alphabet in byte order; then the merged pieces below (Ġ is the space). */
static const char *const BL_PIECES[] = { "\xC4\xA0t", "he", "\xC4\xA0the", "xyz", "<|begin_of_text|>",
                                         "<|end_of_text|>" };
enum { B_GT = 256, B_HE, B_GTHE, B_XYZ, B_BOT, B_EOT };
static const char *const BL_MERGES[] = { "\xC4\xA0 t", "h e", "\xC4\xA0t he" };

static json_t *split_json(const char *regex, int ignore_merges, int bos)
{
    json_t *vocab = json_object();
    for (int b = 0; b < 256; b++) {
        char c[3];
        byte_char(b, c);
        json_object_set_new(vocab, c, json_integer(b));
    }
    for (int i = 0; i < 4; i++)
        json_object_set_new(vocab, BL_PIECES[i], json_integer(B_GT + i));
    json_t *merges = json_array();
    for (int i = 0; i < 3; i++) {
        char a[16], b[16];
        sscanf(BL_MERGES[i], "%15s %15s", a, b);
        json_array_append_new(merges, json_pack("[s, s]", a, b));
    }
    json_t *post = bos ? json_pack("{s:s, s:[{s:s, s:b, s:b, s:b}, {s:s, s:[{s:{s:s, s:i}}, "
                                   "{s:{s:s, s:i}}], s:{s:{s:s, s:[i], s:[s]}}}]}",
                                   "type", "Sequence", "processors", "type", "ByteLevel",
                                   "add_prefix_space", 1, "trim_offsets", 0, "use_regex", 1, "type",
                                   "TemplateProcessing", "single", "SpecialToken", "id", "<|begin_of_text|>",
                                   "type_id", 0, "Sequence", "id", "A", "type_id", 0, "special_tokens",
                                   "<|begin_of_text|>", "id", "<|begin_of_text|>", "ids", B_BOT, "tokens",
                                   "<|begin_of_text|>")
                       : json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0,
                                   "trim_offsets", 0, "use_regex", 0);
    json_t *root = json_pack(
        "{s:[{s:i, s:s, s:b}, {s:i, s:s, s:b}], s:n, "
        "s:{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b, s:b}]}, s:o, s:{s:s}, "
        "s:{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:b, s:o, s:o}}",
        "added_tokens", "id", B_BOT, "content", BL_PIECES[4], "special", 1, "id", B_EOT, "content", BL_PIECES[5],
        "special", 1, "normalizer",
        "pre_tokenizer", "type", "Sequence", "pretokenizers", "type", "Split", "pattern", "Regex", regex, "behavior",
        "Isolated", "invert", 0, "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1, "use_regex", 0,
        "post_processor", post, "decoder", "type", "ByteLevel",
        "model", "type", "BPE", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
        "fuse_unk", 0, "byte_fallback", 0, "ignore_merges", ignore_merges, "vocab", vocab, "merges", merges);
    ck_assert_ptr_nonnull(root);
    return root;
}

START_TEST(split_bytelevel_json)
{
    /* Llama-3: BOS from the template, ignore_merges */
    json_t *root = split_json(LLAMA3_REGEX, 1, 1);
    tok_tokenizer *t = open_json_ok(root);
    ck_assert_int_eq(tok_bos_id(t), B_BOT);
    ck_assert_int_eq(tok_eos_id(t), B_EOT);
    /* " the" is one pre-token; its bytes Ġ t h e merge (Ġ,t) 0, (h,e) 1, (Ġt,he) 2 -> Ġthe. It is a
     * vocabulary entry too, so ignore_merges gives the same. */
    ENC(t, "a the", B_BOT, 'a', B_GTHE);
    /* "xyz" has no merges but is in the vocabulary: ignore_merges takes it whole */
    ENC(t, "xyz", B_BOT, B_XYZ);
    /* "12345": Llama-3's digits go three at a time, each byte its own token here */
    ENC(t, "12345", B_BOT, '1', '2', '3', '4', '5');
    /* the added token is split out before pre-tokenising; "!\n" is one A4 pre-token */
    ENC(t, "x<|end_of_text|>!\n", B_BOT, 'x', B_EOT, '!', 0x0A);
    int32_t *ids;
    size_t n;
    lmq_err e;
    const char *text = "Hello the world's\n\n 12345 \xC3\xA9t\xC3\xA9 xyz  ";
    ck_assert_int_eq(tok_encode(t, text, strlen(text), &ids, &n, &e), LMQ_OK);
    ck_assert_int_eq(ids[0], B_BOT);
    assert_decodes(t, ids + 1, n - 1, text); /* a byte-level BOS decodes to its text: left out */
    tok_free(t);
    free(ids);
    json_decref(root);

    /* without ignore_merges "xyz" stays three bytes; Qwen2 adds no BOS */
    root = split_json(QWEN2_REGEX, 0, 0);
    t = open_json_ok(root);
    ck_assert_int_eq(tok_bos_id(t), -1);
    ENC(t, "xyz the", 'x', 'y', 'z', B_GTHE);
    tok_free(t);
    json_decref(root);
}
END_TEST

/* Qwen2's NFC normalizer: the identity on text already in NFC, which is all lmq accepts. */
START_TEST(nfc_normalizer)
{
    /* by the Unicode definitions: U+0301 combines (ccc 230); U+2126 OHM SIGN and U+F900 are
     * singletons (NFC maps them to U+03A9, U+8C48); U+1161 is a Hangul vowel jamo, composing with
     * a leading consonant; precomposed U+00E9, U+D55C and U+03A9 are NFC as they are */
    static const uint32_t unstable[] = { 0x0301, 0x2126, 0xF900, 0x1161, 0x11A8, 0x0344 };
    static const uint32_t stable[] = { 'A', 0x00E9, 0xD55C, 0x03A9, 0x4E2D, 0x034F, 0x1100 };
    for (size_t i = 0; i < sizeof unstable / sizeof unstable[0]; i++)
        ck_assert_msg(!tok_uni_nfc_stable(unstable[i]), "U+%04X", (unsigned)unstable[i]);
    for (size_t i = 0; i < sizeof stable / sizeof stable[0]; i++)
        ck_assert_msg(tok_uni_nfc_stable(stable[i]), "U+%04X", (unsigned)stable[i]);
    json_t *root = split_json(QWEN2_REGEX, 0, 0);
    json_object_set_new(root, "normalizer", json_pack("{s:s}", "type", "NFC"));
    tok_tokenizer *t = open_json_ok(root);
    ENC(t, "xyz", 'x', 'y', 'z');
    /* "é" precomposed: its two UTF-8 bytes, one pre-token with the letters around it */
    ENC(t, "\xC3\xA9", 0xC3, 0xA9);
    int32_t *ids;
    size_t n;
    lmq_err e;
    const char *decomposed = "cafe\xCC\x81"; /* e + U+0301: NFC would give U+00E9 */
    ck_assert_int_eq(tok_encode(t, decomposed, strlen(decomposed), &ids, &n, &e), LMQ_E_UNSUPPORTED);
    ck_assert_msg(strstr(e.msg, "U+0301") && strstr(e.msg, "NFC"), "%s", e.msg);
    tok_free(t);
    json_decref(root);
}
END_TEST

/* Components lmq does not implement are refused by name, never misread. */
START_TEST(variant_refusals)
{
    static const struct {
        const char *path, *json, *names;
    } cases[] = {
        { "pre_tokenizer", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
                           "{\"Regex\": \"\\\\w+\"}, \"behavior\": \"Isolated\"}, {\"type\": \"ByteLevel\"}]}",
          "Split pattern" },
        { "pre_tokenizer", "{\"type\": \"Whitespace\"}", "Whitespace" },
        { "pre_tokenizer", "{\"type\": \"Metaspace\", \"replacement\": \"_\"}", "Metaspace replacement" },
        { "normalizer", "{\"type\": \"NFKC\"}", "NFKC" },
        { "post_processor", "{\"type\": \"TemplateProcessing\", \"single\": [{\"Sequence\": {\"id\": \"A\"}}, "
                            "{\"SpecialToken\": {\"id\": \"</s>\"}}], \"special_tokens\": {}}",
          "template" },
        { "post_processor", "{\"type\": \"RobertaProcessing\"}", "RobertaProcessing" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *root = llama2_json();
        json_error_t je;
        json_t *v = json_loads(cases[i].json, 0, &je);
        ck_assert_msg(v != NULL, "case %zu: %s", i, je.text);
        if (!strcmp(cases[i].path, "pre_tokenizer"))
            json_object_set_new(root, "normalizer", json_null());
        json_object_set_new(root, cases[i].path, v);
        tok_tokenizer *t;
        lmq_err e;
        ck_assert_int_eq(open_json(root, &t, &e), LMQ_E_UNSUPPORTED);
        ck_assert_ptr_null(t);
        ck_assert_msg(strstr(e.msg, "tokenizer.json") && strstr(e.msg, cases[i].names), "case %zu: %s", i, e.msg);
        json_decref(root);
    }
    /* a byte-level model with byte_fallback, a SentencePiece one with ignore_merges */
    json_t *root = split_json(LLAMA3_REGEX, 0, 0);
    json_object_set_new(json_object_get(root, "model"), "byte_fallback", json_true());
    tok_tokenizer *t;
    lmq_err e;
    ck_assert_int_eq(open_json(root, &t, &e), LMQ_E_UNSUPPORTED);
    json_decref(root);
    root = llama2_json();
    json_object_set_new(json_object_get(root, "model"), "ignore_merges", json_true());
    ck_assert_int_eq(open_json(root, &t, &e), LMQ_E_UNSUPPORTED);
    json_decref(root);
}
END_TEST

/* P1: a tokenizer that adds BOS starts every document with it; one without joins documents
 * with its end-of-text token. */
START_TEST(streams_follow_bos)
{
    json_t *root = llama2_json();
    tok_tokenizer *t = open_json_ok(root);
    const char *text = "ab\n<|endoftext|>\nab\n";
    int32_t *ids;
    size_t n;
    int docs;
    lmq_err e;
    ck_assert_msg(tok_stream_build(t, text, strlen(text), &ids, &n, &docs, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(docs, 2);
    static const int32_t want[] = { 1, P_SP_AB, 1, P_SP_AB };
    ck_assert(n == 4 && !memcmp(ids, want, sizeof want));
    free(ids);
    tok_free(t);
    json_decref(root);
    root = split_json(QWEN2_REGEX, 0, 0);
    json_array_append_new(json_object_get(root, "added_tokens"),
                          json_pack("{s:i, s:s}", "id", B_EOT + 1, "content", "<|endoftext|>"));
    t = open_json_ok(root);
    ck_assert_msg(tok_stream_build(t, text, strlen(text), &ids, &n, &docs, &e) == LMQ_OK, "%s", e.msg);
    static const int32_t want2[] = { 'a', 'b', B_EOT + 1, 'a', 'b' };
    ck_assert(n == 5 && !memcmp(ids, want2, sizeof want2));
    free(ids);
    tok_free(t);
    json_decref(root);
}
END_TEST

/* ---- tokenizer.model ---------------------------------------------------------------------- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} pb_buf;

static void pb_bytes(pb_buf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        ck_assert_ptr_nonnull(b->p);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void pb_varint(pb_buf *b, uint64_t v)
{
    do {
        uint8_t byte = (uint8_t)(v & 0x7F) | (v > 0x7F ? 0x80 : 0);
        pb_bytes(b, &byte, 1);
        v >>= 7;
    } while (v);
}

static void pb_key(pb_buf *b, unsigned field, unsigned wire) { pb_varint(b, (uint64_t)field << 3 | wire); }

static void pb_len(pb_buf *b, unsigned field, const void *p, size_t n)
{
    pb_key(b, field, 2);
    pb_varint(b, n);
    pb_bytes(b, p, n);
}

static void pb_float(pb_buf *b, unsigned field, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint8_t le[4] = { (uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24) };
    pb_key(b, field, 5);
    pb_bytes(b, le, 4);
}

static void pb_piece(pb_buf *m, const char *text, float score, int type)
{
    pb_buf p = { 0 };
    pb_len(&p, 1, text, strlen(text));
    pb_float(&p, 2, score);
    if (type != 1) {
        pb_key(&p, 3, 0);
        pb_varint(&p, (uint64_t)type);
    }
    pb_len(m, 1, p.p, p.n);
    free(p.p);
}

/* A Llama-style tokenizer.model: <unk> (UNKNOWN), <s>, </s> (CONTROL), 256 BYTE pieces, then
 * normal pieces with scores (SentencePiece BPE merges the pair whose piece scores highest). */
static const struct {
    const char *text;
    float score;
} SPM_PIECES[] = { { SP, -100 }, { "a", -101 }, { "b", -102 }, { "h", -103 }, { "i", -104 },
                   { SP "a", -1 }, { "ab", -2 }, { SP "ab", -3 }, { "hi", -0.5f }, { SP "hi", -4 } };
enum { S_SPACE = 259, S_A, S_B, S_H, S_I, S_SP_A, S_AB, S_SP_AB, S_HI, S_SP_HI };

static pb_buf spm_file(int model_type, const char *normalizer, int user_piece)
{
    pb_buf m = { 0 }, spec = { 0 }, norm = { 0 };
    pb_piece(&m, "<unk>", 0, 2);
    pb_piece(&m, "<s>", 0, 3);
    pb_piece(&m, "</s>", 0, 3);
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        pb_piece(&m, name, 0, 6);
    }
    for (size_t i = 0; i < sizeof SPM_PIECES / sizeof SPM_PIECES[0]; i++)
        pb_piece(&m, SPM_PIECES[i].text, SPM_PIECES[i].score, 1);
    if (user_piece)
        pb_piece(&m, "<tool>", 0, 4);
    pb_key(&spec, 3, 0); /* model_type */
    pb_varint(&spec, (uint64_t)model_type);
    pb_key(&spec, 35, 0); /* byte_fallback */
    pb_varint(&spec, 1);
    pb_key(&spec, 40, 0); /* unk_id 0; pad_id -1 (field 43) as a sign-extended varint */
    pb_varint(&spec, 0);
    pb_key(&spec, 43, 0);
    pb_varint(&spec, UINT64_MAX);
    pb_len(&spec, 7, "llama", 5); /* a field lmq skips */
    pb_len(&m, 2, spec.p, spec.n);
    pb_len(&norm, 1, normalizer, strlen(normalizer));
    pb_key(&norm, 3, 0);
    pb_varint(&norm, 1);
    pb_key(&norm, 4, 0);
    pb_varint(&norm, 0);
    pb_len(&m, 3, norm.p, norm.n);
    free(spec.p);
    free(norm.p);
    return m;
}

/* The same pieces as llama2.c's tokenizer.bin ("▁" written as " "). */
static uint8_t *spm_as_l2c(size_t *size)
{
    pb_buf b = { 0 };
    int32_t max = 16;
    pb_bytes(&b, &max, 4);
    for (int i = 0; i < S_SP_HI + 1; i++) {
        char text[16];
        float score = 0;
        if (i < 3)
            snprintf(text, sizeof text, "%s", (const char *[]){ "<unk>", "<s>", "</s>" }[i]);
        else if (i < S_SPACE)
            snprintf(text, sizeof text, "<0x%02X>", i - 3);
        else {
            const char *s = SPM_PIECES[i - S_SPACE].text;
            size_t k = 0;
            for (; *s; s++)
                if (!strncmp(s, SP, 3))
                    text[k++] = ' ', s += 2;
                else
                    text[k++] = *s;
            text[k] = 0;
            score = SPM_PIECES[i - S_SPACE].score;
        }
        int32_t len = (int32_t)strlen(text);
        pb_bytes(&b, &score, 4);
        pb_bytes(&b, &len, 4);
        pb_bytes(&b, text, (size_t)len);
    }
    *size = b.n;
    return b.p;
}

START_TEST(spm_model)
{
    pb_buf f = spm_file(2, "identity", 0);
    tok_tokenizer *t;
    lmq_err e;
    ck_assert_msg(tok_open_spm_model(f.p, f.n, &t, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(tok_kind(t), LMQ_TOK_SPM);
    ck_assert_int_eq(tok_vocab_size(t), S_SP_HI + 1);
    ck_assert_int_eq(tok_bos_id(t), 1);
    ck_assert_int_eq(tok_eos_id(t), 2);
    /* "ab ab" -> ▁ a b ▁ a b: ▁a (-1) beats ab (-2): leftmost first, then the other: ▁a b ▁a b;
     * then ▁ab (-3) twice */
    ENC(t, "ab ab", 1, S_SP_AB, S_SP_AB);
    /* "hab" -> ▁ h a b: no ▁h, no ha: ab (-2): ▁ h ab; no more */
    ENC(t, "hab", 1, S_SPACE, S_H, S_AB);
    /* "hi": hi (-0.5) then ▁hi (-4) */
    ENC(t, "hi", 1, S_SP_HI);
    ENC(t, "a\xC3\xA9", 1, S_SP_A, BYTE(0xC3), BYTE(0xA9));
    /* control pieces are not matched in text: "<s>" is three byte-fallback characters */
    ENC(t, "<s>", 1, S_SPACE, BYTE('<'), BYTE('s'), BYTE('>'));
    static const int32_t ids[] = { 1, S_SP_AB, S_SP_A, BYTE(0xC3), BYTE(0xA9) };
    assert_decodes(t, ids, 5, "ab a\xC3\xA9");

    /* one encoder: llama2.c's tokenizer.bin of the same pieces and scores encodes alike */
    size_t size;
    uint8_t *bin = spm_as_l2c(&size);
    tok_tokenizer *l;
    ck_assert_msg(tok_open_llama2c(bin, size, S_SP_HI + 1, &l, &e) == LMQ_OK, "%s", e.msg);
    static const char *const texts[] = { "ab ab", "hab hi", " hi  ab", "a\xC3\xA9\xE2\x82\xAC b", "" };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        int32_t *x, *y;
        size_t nx, ny;
        ck_assert_int_eq(tok_encode(t, texts[i], strlen(texts[i]), &x, &nx, &e), LMQ_OK);
        ck_assert_int_eq(tok_encode(l, texts[i], strlen(texts[i]), &y, &ny, &e), LMQ_OK);
        ck_assert_msg(nx == ny && !memcmp(x, y, nx * sizeof *x), "\"%s\"", texts[i]);
        assert_decodes(t, x, nx, texts[i]);
        free(x);
        free(y);
    }
    tok_free(l);
    free(bin);
    tok_free(t);
    free(f.p);
}
END_TEST

START_TEST(spm_model_refusals)
{
    tok_tokenizer *t = NULL;
    lmq_err e;
    pb_buf f = spm_file(1, "identity", 0); /* Unigram */
    ck_assert_int_eq(tok_open_spm_model(f.p, f.n, &t, &e), LMQ_E_UNSUPPORTED);
    ck_assert_msg(strstr(e.msg, "tokenizer.model") && strstr(e.msg, "model_type 1"), "%s", e.msg);
    free(f.p);
    f = spm_file(2, "nmt_nfkc", 0);
    ck_assert_int_eq(tok_open_spm_model(f.p, f.n, &t, &e), LMQ_E_UNSUPPORTED);
    ck_assert_msg(strstr(e.msg, "nmt_nfkc"), "%s", e.msg);
    free(f.p);
    f = spm_file(2, "identity", 1);
    ck_assert_int_eq(tok_open_spm_model(f.p, f.n, &t, &e), LMQ_E_UNSUPPORTED);
    ck_assert_msg(strstr(e.msg, "<tool>") && strstr(e.msg, "user-defined"), "%s", e.msg);
    free(f.p);
    /* every truncation of a valid file is an error, never a crash */
    f = spm_file(2, "identity", 0);
    /* (a cut between whole fields loses the specs, whose defaults, Unigram and nmt_nfkc, are
     * refused; any other cut leaves a field short) */
    for (size_t cut = 0; cut < f.n; cut += 1 + cut / 7) {
        ck_assert_msg(tok_open_spm_model(f.p, cut, &t, &e) != LMQ_OK, "truncated at %zu of %zu opened", cut, f.n);
        ck_assert_ptr_null(t);
    }
    /* wire types: a group (3) is not protobuf 3; pieces (field 1) as a varint is not a ModelProto */
    static const uint8_t group[] = { 0x0B }, varint_piece[] = { 0x08, 0x01 };
    ck_assert_int_eq(tok_open_spm_model(group, sizeof group, &t, &e), LMQ_E_FORMAT);
    ck_assert_int_eq(tok_open_spm_model(varint_piece, sizeof varint_piece, &t, &e), LMQ_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "wire type 0"), "%s", e.msg);
    free(f.p);
}
END_TEST

/* ---- carried by convert, stored in the artefact ---- */

static void write_file(const char *dir, const char *name, const void *data, size_t n)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void copy_fixture(const char *rel, const char *dir, const char *name)
{
    lmq_blob b;
    lmq_err e;
    ck_assert_msg(lmq_blob_open(fixture(rel), &b, &e) == LMQ_OK, "%s", e.msg);
    write_file(dir, name, b.data, b.size);
    lmq_blob_close(&b);
}

/* A Llama checkpoint (stories260K-hf, 512 tokens) with only a tokenizer.model beside it: convert
 * carries it, the artefact stores it (manifest tokenizer: sentencepiece), and the artefact's
 * tokenizer encodes as the file does. With a tokenizer.json there too, that one is chosen. */
START_TEST(convert_carries_tokenizer_model)
{
    const char *dir = test_tmpdir();
    copy_fixture("stories260K-hf/config.json", dir, "config.json");
    copy_fixture("stories260K-hf/model.safetensors", dir, "model.safetensors");
    pb_buf f = spm_file(2, "identity", 0);
    write_file(dir, "tokenizer.model", f.p, f.n);
    free(f.p);
    lmq_model m, back;
    lmq_err e;
    ck_assert_msg(lmq_convert(dir, NULL, &m, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(m.arch.tokenizer, LMQ_TOK_SPM);
    ck_assert_msg(strstr(m.notes, "tokenizer.model"), "%s", m.notes);
    char path[600];
    snprintf(path, sizeof path, "%s/m.lmq", dir);
    ck_assert_msg(lmq_container_write_model(path, &m, NULL, &e) == LMQ_OK, "%s", e.msg);
    lmq_model_free(&m);
    ck_assert_msg(rt_load_artefact(path, &back, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(back.arch.tokenizer, LMQ_TOK_SPM);
    tok_tokenizer *t;
    ck_assert_msg(tok_open_model(&back, &t, &e) == LMQ_OK, "%s", e.msg);
    ENC(t, "ab ab", 1, S_SP_AB, S_SP_AB);
    tok_free(t);
    lmq_model_free(&back);

    json_t *root = llama2_json();
    char *js = json_dumps(root, JSON_COMPACT);
    write_file(dir, "tokenizer.json", js, strlen(js));
    free(js);
    json_decref(root);
    ck_assert_msg(lmq_convert(dir, NULL, &m, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(m.arch.tokenizer, LMQ_TOK_HF_JSON);
    lmq_model_free(&m);
    test_rmtree(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tokenizer_variants");
    TCase *tc = tcase_create("all");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, llama2_normalizer);
    tcase_add_test(tc, metaspace_schemes);
    tcase_add_test(tc, added_token_strips);
    tcase_add_test(tc, split_patterns);
    tcase_add_test(tc, split_bytelevel_json);
    tcase_add_test(tc, nfc_normalizer);
    tcase_add_test(tc, variant_refusals);
    tcase_add_test(tc, streams_follow_bos);
    tcase_add_test(tc, spm_model);
    tcase_add_test(tc, spm_model_refusals);
    tcase_add_test(tc, convert_carries_tokenizer_model);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
