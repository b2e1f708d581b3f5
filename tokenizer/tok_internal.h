/* Shared inside the tokenizers: the tokenizer object, hash maps, and the BPE merge engine. */
#ifndef LMQ_TOK_INTERNAL_H
#define LMQ_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

/* Byte strings -> id, open addressing. Keys live outside the map: key i is
 * arena[off[i] .. off[i+1]). Lookups may give the key in two parts (a concatenation). */
typedef struct {
    uint32_t *slot; /* id + 1; 0 = empty */
    size_t mask;
    const uint8_t *arena;
    const size_t *off;
} tok_strmap;

/* Build over ids 0..n-1; for equal keys the lowest id wins. */
lmq_code tok_strmap_build(tok_strmap *m, const uint8_t *arena, const size_t *off, int n);
int32_t tok_strmap_get2(const tok_strmap *m, const uint8_t *a, size_t na, const uint8_t *b,
                        size_t nb); /* -1 when absent */
void tok_strmap_free(tok_strmap *m);

/* (left id, right id) -> (rank, merged id), open addressing. */
typedef struct {
    uint64_t key;
    int32_t rank, merged; /* rank -1 = empty slot */
} tok_pair_slot;

typedef struct {
    tok_pair_slot *slot;
    size_t mask;
} tok_pairmap;

lmq_code tok_pairmap_init(tok_pairmap *m, size_t expected);
/* Sets (a, b), replacing an earlier rank for the same pair. */
void tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t merged);
void tok_pairmap_free(tok_pairmap *m);

/* How a byte-level tokenizer splits text before merging (tok_pretok.c). */
typedef enum { TOK_PRE_GPT2 = 0, TOK_PRE_LLAMA3, TOK_PRE_QWEN2 } tok_pretok;

/* The end of the pre-token that starts at s[i] (i < n; s valid UTF-8). */
size_t tok_pretoken_end(tok_pretok kind, const uint8_t *s, size_t n, size_t i);
/* Recognises a tokenizer.json Split pattern: 1 and *kind when lmq implements it, else 0. */
int tok_split_pattern(const char *regex, tok_pretok *kind);

/* When a SentencePiece-style tokenizer puts the dummy-prefix space in front of a segment of text
 * (a stretch between special tokens). */
typedef enum {
    TOK_PREPEND_NEVER = 0,
    TOK_PREPEND_ALWAYS,    /* every non-empty segment (llama2.c; tokenizer.json's Prepend normalizer) */
    TOK_PREPEND_META,      /* Metaspace "always": every segment not starting with a space */
    TOK_PREPEND_META_FIRST /* Metaspace "first": only a segment at the start of the text, likewise */
} tok_prepend;

/* A special token matched literally inside text before pre-tokenisation; lstrip / rstrip: the
 * whitespace before / after it belongs to the match (Hugging Face's added-token options). */
typedef struct {
    uint8_t *text;
    size_t len;
    int32_t id;
    int lstrip, rstrip;
} tok_special;

struct tok_tokenizer {
    lmq_tok_kind kind;
    int n_vocab;
    int32_t bos_id, eos_id; /* bos_id >= 0: tok_encode puts it first */
    /* SentencePiece conventions (llama2.c, tokenizer.model, tokenizer.json with byte fallback):
     * pieces hold " " where the vocabulary has U+2581, text starts as code points (byte
     * fallback, else unk_id), and decoding drops the dummy prefix after BOS. Otherwise
     * byte-level BPE. */
    int sp;
    int32_t unk_id;  /* sp: the piece for a code point without one (no byte fallback), or -1 */
    int fuse_unk;    /* sp: consecutive unknown code points give one unk_id */
    tok_prepend prepend;
    int split_words; /* sp (Metaspace split): BPE runs on each word, a word starting at a space */
    /* What each token decodes to: bytes[off[i] .. off[i+1]). sp: the piece (byte pieces are
     * mapped at decode time); byte-level: the raw bytes. */
    uint8_t *bytes;
    size_t *off;
    int16_t *byte_piece; /* sp: the byte a "<0xHH>" piece stands for, or -1 */
    uint8_t byte_value[256];

    /* llama2c, tokenizer.model: merges by score (NULL: by rank, from `merges`) */
    float *score;
    tok_strmap pieces; /* bytes -> id: sp's code points; byte-level's ignore_merges */
    int32_t space_id; /* the dummy prefix " ", -1 when absent */
    int byte_fallback; /* all 256 "<0xHH>" pieces are present (byte_token holds their ids) */

    /* byte-level BPE */
    tok_pretok pretok;
    int ignore_merges; /* a pre-token that is a vocabulary entry is that token (Llama-3) */
    int nfc; /* tokenizer.json's NFC normalizer (Qwen2): text must be NFC already (tok_uni_nfc_stable) */
    tok_pairmap merges;
    int32_t byte_token[256]; /* also sp: the "<0xHH>" piece of each byte, -1 if none */
    tok_special *special;
    int n_special;
    uint8_t special_first[32]; /* bit set of the first bytes of the specials */
};

tok_tokenizer *tok_alloc(lmq_tok_kind kind);

/* Completes a SentencePiece-style tokenizer whose n_vocab, bytes and off are set: finds the
 * "<0xHH>" byte pieces (byte_piece, byte_token, byte_fallback) and builds `pieces`. */
lmq_code tok_sp_finish(tok_tokenizer *t, const char *file, lmq_err *err);

/* The merge engine. For an adjacent pair (a, b) the callback says whether it merges, into
 * which id, and with which priority (lower key first; equal keys: the leftmost pair). */
typedef int (*tok_pair_fn)(const tok_tokenizer *t, int32_t a, int32_t b, int32_t *merged,
                           double *key);

typedef struct {
    double key;
    uint32_t left, right;
    int32_t a, b, merged;
} tok_heap_entry;

/* Scratch space reused across calls (a linked list over the symbols and a heap of pairs). */
typedef struct {
    uint32_t *prev, *next;
    size_t cap;
    tok_heap_entry *heap;
    size_t heap_n, heap_cap;
} tok_bpe_work;

/* Applies merges to sym[0..*n) until none applies; *n becomes the new count. Same result as
 * repeatedly scanning for the lowest (key, position) pair and merging it, in O(n log n). */
lmq_code tok_bpe_merge(tok_bpe_work *w, const tok_tokenizer *t, tok_pair_fn pair, int32_t *sym,
                       size_t *n, lmq_err *err);
void tok_bpe_work_free(tok_bpe_work *w);

/* A growable id array. */
typedef struct {
    int32_t *v;
    size_t n, cap;
} tok_ids;

lmq_code tok_ids_reserve(tok_ids *a, size_t extra, lmq_err *err);
lmq_code tok_ids_push(tok_ids *a, int32_t id, lmq_err *err);

/* Merge by rank: the pair's entry in t->merges. */
int tok_rank_pair(const tok_tokenizer *t, int32_t a, int32_t b, int32_t *merged, double *key);

/* Encoders of each family for one segment of text (between special tokens; `first`: it starts
 * the text). Text is valid UTF-8 (checked by tok_encode). */
lmq_code tok_sp_segment(const tok_tokenizer *t, const uint8_t *s, size_t n, int first,
                        tok_bpe_work *w, tok_ids *out, lmq_err *err);
lmq_code tok_bytelevel_segment(const tok_tokenizer *t, const uint8_t *s, size_t n,
                               tok_bpe_work *w, tok_ids *out, lmq_err *err);

#endif
