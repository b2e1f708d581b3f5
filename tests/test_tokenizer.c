/* runtime/ tokenizers and verify/ P1 token stream, against the golden files, known answers,
 * straightforward reference implementations, round trips and hostile inputs. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/file.h"
#include "tokenizer/stream.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tests/testutil.h"

/* ---- helpers ---- */

static lmq_blob load(const char *rel)
{
    lmq_blob b;
    lmq_err e;
    ck_assert_msg(lmq_blob_open(fixture(rel), &b, &e) == LMQ_OK, "%s", e.msg);
    return b;
}

static json_t *load_json(const char *rel)
{
    json_error_t je;
    json_t *j = json_load_file(fixture(rel), 0, &je);
    ck_assert_msg(j != NULL, "%s: %s", rel, je.text);
    return j;
}

static tok_tokenizer *open_l2c(void)
{
    lmq_blob b = load("stories260K/tok512.bin");
    tok_tokenizer *t;
    lmq_err e;
    ck_assert_msg(tok_open_llama2c(b.data, b.size, 512, &t, &e) == LMQ_OK, "%s", e.msg);
    lmq_blob_close(&b);
    return t;
}

static tok_tokenizer *open_gpt2(void)
{
    lmq_blob v = load("gpt2-tokenizer/vocab.json"), m = load("gpt2-tokenizer/merges.txt");
    tok_tokenizer *t;
    lmq_err e;
    ck_assert_msg(tok_open_gpt2(v.data, v.size, m.data, m.size, &t, &e) == LMQ_OK, "%s", e.msg);
    lmq_blob_close(&v);
    lmq_blob_close(&m);
    return t;
}

static void encode_ok(const tok_tokenizer *t, const char *s, size_t n, int32_t **ids, size_t *k)
{
    lmq_err e;
    ck_assert_msg(tok_encode(t, s, n, ids, k, &e) == LMQ_OK, "%s", e.msg);
}

/* decode(ids) must give back exactly s[0..n). */
static void assert_decodes_to(const tok_tokenizer *t, const int32_t *ids, size_t k, const char *s,
                              size_t n)
{
    char *d;
    size_t dn;
    lmq_err e;
    ck_assert_msg(tok_decode(t, ids, k, &d, &dn, &e) == LMQ_OK, "%s", e.msg);
    size_t at = 0;
    while (at < dn && at < n && d[at] == s[at])
        at++;
    ck_assert_msg(dn == n && at == n, "decode differs at byte %zu (lengths %zu, %zu)", at, dn, n);
    free(d);
}

static const char *const TEXTS[] = { "text/tinystories-valid.txt", "text/sotu-eval.txt",
                                     "text/moby-dick-eval.txt" };
#define N_TEXTS (sizeof TEXTS / sizeof TEXTS[0])

/* h encodes every fixture text to want's ids (the first difference named) and decodes them back. */
static void assert_same_ids(const tok_tokenizer *want, const tok_tokenizer *h)
{
    for (size_t f = 0; f < N_TEXTS; f++) {
        lmq_blob text = load(TEXTS[f]);
        int32_t *a, *b;
        size_t na, nb;
        encode_ok(want, (const char *)text.data, text.size, &a, &na);
        encode_ok(h, (const char *)text.data, text.size, &b, &nb);
        size_t i = 0;
        while (i < na && i < nb && a[i] == b[i])
            i++;
        ck_assert_msg(na == nb && i == na, "%s: ids differ at token %zu of %zu", TEXTS[f], i, na);
        assert_decodes_to(h, b, nb, (const char *)text.data, text.size);
        free(a);
        free(b);
        lmq_blob_close(&text);
    }
}

/* A small deterministic generator for the randomised comparisons. */
static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* ---- golden P1 streams ---- */

/* Every text x tokenizer of golden/tokens.json: documents, stream length, windows, first 64. */
START_TEST(golden_streams)
{
    tok_tokenizer *l2c = open_l2c(), *gpt2 = open_gpt2();
    json_t *g = load_json("golden/tokens.json");
    const char *path, *name;
    json_t *entry, *exp;
    int checked = 0;
    json_object_foreach(g, path, entry) {
        const char *prefix = "shared/fixtures/";
        ck_assert_msg(strncmp(path, prefix, strlen(prefix)) == 0, "%s", path);
        lmq_blob text = load(path + strlen(prefix));
        json_object_foreach(entry, name, exp) {
            if (strcmp(name, "documents") == 0)
                continue;
            const tok_tokenizer *t = strcmp(name, "gpt2") == 0             ? gpt2
                                     : strcmp(name, "llama2c-tok512") == 0 ? l2c
                                                                           : NULL;
            ck_assert_msg(t != NULL, "unknown tokenizer %s", name);
            int32_t *ids;
            size_t n;
            int nd;
            lmq_err e;
            ck_assert_msg(tok_stream_build(t, (const char *)text.data, text.size, &ids, &n, &nd, &e) ==
                              LMQ_OK, "%s %s: %s", path, name, e.msg);
            ck_assert_int_eq(nd, json_integer_value(json_object_get(entry, "documents")));
            ck_assert_int_eq(n, json_integer_value(json_object_get(exp, "p1_stream_tokens")));
            ck_assert_int_eq(n / 256, json_integer_value(json_object_get(exp, "p1_windows_ctx256")));
            json_t *first = json_object_get(exp, "first64");
            ck_assert_int_eq(json_array_size(first), 64);
            for (size_t i = 0; i < 64; i++)
                ck_assert_msg(ids[i] == json_integer_value(json_array_get(first, i)),
                              "%s %s: id %zu is %d", path, name, i, (int)ids[i]);
            free(ids);
            checked++;
        }
        lmq_blob_close(&text);
    }
    ck_assert_int_eq(checked, 6);
    json_decref(g);
    tok_free(l2c);
    tok_free(gpt2);
}
END_TEST

START_TEST(gpt2_known_answers)
{
    tok_tokenizer *t = open_gpt2();
    json_t *known = load_json("golden/gpt2-tokenizer-known.json");
    const char *text;
    json_t *ids;
    int checked = 0;
    json_object_foreach(known, text, ids) {
        int32_t *got;
        size_t n;
        encode_ok(t, text, strlen(text), &got, &n);
        ck_assert_msg(n == json_array_size(ids), "\"%s\": %zu tokens", text, n);
        for (size_t i = 0; i < n; i++)
            ck_assert_int_eq(got[i], json_integer_value(json_array_get(ids, i)));
        assert_decodes_to(t, got, n, text, strlen(text));
        free(got);
        checked++;
    }
    ck_assert_int_ge(checked, 3);
    json_decref(known);
    tok_free(t);
}
END_TEST

/* ---- round trips and decoding ---- */

/* decode(encode(x)) == x for every document and every whole text, both tokenizers; the streams
 * decode to the documents (llama2c: back to back, BOS printing nothing; gpt2: joined by the
 * <|endoftext|> token's text), and the document starts tok_stream_build_docs gives cut the stream
 * into the documents' own encodings. */
START_TEST(round_trips)
{
    tok_tokenizer *toks[2] = { open_l2c(), open_gpt2() };
    for (size_t f = 0; f < N_TEXTS; f++) {
        lmq_blob text = load(TEXTS[f]);
        const char *s = (const char *)text.data;
        tok_doc *docs;
        int nd;
        lmq_err e;
        ck_assert_int_eq(tok_docs_split(s, text.size, &docs, &nd, &e), LMQ_OK);
        for (int k = 0; k < 2; k++) {
            const tok_tokenizer *t = toks[k];
            size_t total = 0;
            for (int d = 0; d < nd; d++)
                total += docs[d].len + 13;
            char *joined = malloc(total + 1);
            size_t jn = 0, n_stream, *starts;
            int32_t *stream;
            int nd2;
            ck_assert_int_eq(tok_stream_build_docs(t, s, text.size, &stream, &n_stream, &starts, &nd2, &e),
                             LMQ_OK);
            ck_assert_int_eq(nd2, nd);
            for (int d = 0; d < nd; d++) {
                int32_t *ids;
                size_t n;
                encode_ok(t, s + docs[d].off, docs[d].len, &ids, &n);
                assert_decodes_to(t, ids, n, s + docs[d].off, docs[d].len);
                /* Document d's part of the stream: the <|endoftext|> joining it (gpt2), its ids. */
                size_t at = starts[d] + (k == 1 && d > 0), end = d + 1 < nd ? starts[d + 1] : n_stream;
                ck_assert_uint_eq(end - at, n);
                ck_assert_msg(memcmp(stream + at, ids, n * sizeof *ids) == 0, "%s document %d", TEXTS[f], d);
                ck_assert(at == starts[d] || stream[starts[d]] == tok_eos_id(t));
                free(ids);
                if (d > 0 && k == 1) {
                    memcpy(joined + jn, "<|endoftext|>", 13);
                    jn += 13;
                }
                memcpy(joined + jn, s + docs[d].off, docs[d].len);
                jn += docs[d].len;
            }
            assert_decodes_to(t, stream, n_stream, joined, jn);
            free(stream);
            free(starts);
            free(joined);
            int32_t *ids;
            size_t n;
            encode_ok(t, s, text.size, &ids, &n);
            assert_decodes_to(t, ids, n, s, text.size);
            free(ids);
        }
        free(docs);
        lmq_blob_close(&text);
    }
    tok_free(toks[0]);
    tok_free(toks[1]);
}
END_TEST

/* The greedy continuations decode to the golden text; the GPT-2 prompt encodes to the ids it
 * starts with. */
START_TEST(greedy_texts)
{
    json_t *g = load_json("golden/greedy.json");
    static const char *const models[] = { "stories260K", "sotu-gpt2" };
    for (int k = 0; k < 2; k++) {
        tok_tokenizer *t = k == 0 ? open_l2c() : open_gpt2();
        json_t *m = json_object_get(g, models[k]), *jids = json_object_get(m, "ids");
        size_t n = json_array_size(jids);
        ck_assert_uint_gt(n, 10);
        int32_t *ids = malloc(n * sizeof *ids);
        for (size_t i = 0; i < n; i++)
            ids[i] = (int32_t)json_integer_value(json_array_get(jids, i));
        const char *want = json_string_value(json_object_get(m, "text"));
        assert_decodes_to(t, ids, n, want, strlen(want));
        const char *prompt = json_string_value(json_object_get(m, "prompt"));
        int32_t *p;
        size_t pn;
        encode_ok(t, prompt, strlen(prompt), &p, &pn);
        ck_assert_uint_ge(pn, 1);
        for (size_t i = 0; i < pn; i++)
            ck_assert_int_eq(p[i], ids[i]);
        free(p);
        free(ids);
        tok_free(t);
    }
    json_decref(g);
}
END_TEST

/* llama2.c's decode: BOS prints nothing, the dummy-prefix space after BOS goes, byte pieces
 * are raw bytes; ids outside the vocabulary are refused. */
START_TEST(decode_pieces)
{
    tok_tokenizer *t = open_l2c();
    ck_assert_int_eq(tok_kind(t), LMQ_TOK_LLAMA2C);
    ck_assert_int_eq(tok_vocab_size(t), 512);
    ck_assert_int_eq(tok_bos_id(t), 1);
    ck_assert_int_eq(tok_eos_id(t), 2);
    const uint8_t *p;
    size_t n;
    lmq_err e;
    ck_assert_int_eq(tok_decode_token(t, -1, 1, &p, &n, &e), LMQ_OK);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(tok_decode_token(t, 5, 3 + 0xE2, &p, &n, &e), LMQ_OK);
    ck_assert(n == 1 && p[0] == 0xE2);
    int32_t *ids;
    size_t k;
    encode_ok(t, "x", 1, &ids, &k);
    ck_assert_int_ge(k, 2);
    ck_assert_int_eq(ids[0], 1);
    ck_assert_int_eq(tok_decode_token(t, -1, ids[1], &p, &n, &e), LMQ_OK);
    ck_assert(n >= 1 && p[0] == ' '); /* the dummy prefix is kept without BOS before it */
    ck_assert_int_eq(tok_decode_token(t, 1, ids[1], &p, &n, &e), LMQ_OK);
    ck_assert(n == 0 || p[0] != ' ');
    free(ids);
    encode_ok(t, "", 0, &ids, &k);
    ck_assert(k == 1 && ids[0] == 1); /* no dummy prefix for empty text */
    free(ids);
    ck_assert_int_eq(tok_decode_token(t, -1, 512, &p, &n, &e), LMQ_E_ARG);
    ck_assert_int_eq(tok_decode_token(t, -1, -1, &p, &n, &e), LMQ_E_ARG);
    int32_t bad[] = { 1, 300, 9999 };
    char *d;
    ck_assert_int_eq(tok_decode(t, bad, 3, &d, &n, &e), LMQ_E_ARG);
    ck_assert_msg(strstr(e.msg, "position 2") != NULL, "%s", e.msg);
    tok_free(t);

    t = open_gpt2();
    ck_assert_int_eq(tok_kind(t), LMQ_TOK_GPT2);
    ck_assert_int_eq(tok_vocab_size(t), 50257);
    ck_assert_int_eq(tok_bos_id(t), -1);
    ck_assert_int_eq(tok_eos_id(t), 50256);
    ck_assert_int_eq(tok_decode_token(t, -1, 50256, &p, &n, &e), LMQ_OK);
    ck_assert(n == 13 && memcmp(p, "<|endoftext|>", 13) == 0);
    ck_assert_int_eq(tok_decode_token(t, -1, 50257, &p, &n, &e), LMQ_E_ARG);
    tok_free(t);
}
END_TEST

/* ---- llama2c against llama2.c's own O(n^2) algorithm ---- */

typedef struct {
    const uint8_t *s;
    int len, id;
    float score;
} ref_piece;

typedef struct {
    ref_piece *sorted; /* by bytes, as llama2.c sorts for bsearch */
    ref_piece *by_id;
    int n;
} ref_vocab;

static int ref_cmp(const void *a, const void *b)
{
    const ref_piece *x = a, *y = b;
    int m = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, (size_t)m);
    return c ? c : x->len - y->len;
}

static void ref_load(ref_vocab *v, const lmq_blob *b)
{
    v->n = 512;
    v->by_id = malloc((size_t)v->n * sizeof *v->by_id);
    v->sorted = malloc((size_t)v->n * sizeof *v->sorted);
    size_t pos = 4;
    for (int i = 0; i < v->n; i++) {
        ref_piece *p = &v->by_id[i];
        memcpy(&p->score, b->data + pos, 4);
        memcpy(&p->len, b->data + pos + 4, 4);
        p->s = b->data + pos + 8;
        p->id = i;
        pos += 8 + (size_t)p->len;
    }
    ck_assert_uint_eq(pos, b->size);
    memcpy(v->sorted, v->by_id, (size_t)v->n * sizeof *v->sorted);
    qsort(v->sorted, (size_t)v->n, sizeof *v->sorted, ref_cmp);
    for (int i = 1; i < v->n; i++) /* with duplicates bsearch's pick would be arbitrary */
        ck_assert_int_ne(ref_cmp(&v->sorted[i - 1], &v->sorted[i]), 0);
}

static int ref_lookup(const ref_vocab *v, const uint8_t *s, int len)
{
    ref_piece key = { s, len, 0, 0 };
    ref_piece *hit = bsearch(&key, v->sorted, (size_t)v->n, sizeof key, ref_cmp);
    return hit ? hit->id : -1;
}

/* llama2.c's encode(text, bos=1, eos=0), loop for loop. */
static size_t ref_encode(const ref_vocab *v, const uint8_t *text, size_t len, int32_t *tok)
{
    size_t n = 0;
    uint8_t buf[64];
    tok[n++] = 1;
    if (len > 0)
        tok[n++] = ref_lookup(v, (const uint8_t *)" ", 1);
    int str_len = 0;
    for (size_t i = 0; i < len; i++) {
        if ((text[i] & 0xC0) != 0x80)
            str_len = 0;
        buf[str_len++] = text[i];
        if (i + 1 < len && (text[i + 1] & 0xC0) == 0x80 && str_len < 4)
            continue;
        int id = ref_lookup(v, buf, str_len);
        if (id != -1)
            tok[n++] = id;
        else
            for (int j = 0; j < str_len; j++)
                tok[n++] = buf[j] + 3;
        str_len = 0;
    }
    for (;;) {
        float best_score = -1e10f;
        int best_id = -1;
        size_t best_idx = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            const ref_piece *a = &v->by_id[tok[i]], *b = &v->by_id[tok[i + 1]];
            uint8_t cat[128];
            memcpy(cat, a->s, (size_t)a->len);
            memcpy(cat + a->len, b->s, (size_t)b->len);
            int id = ref_lookup(v, cat, a->len + b->len);
            if (id != -1 && v->by_id[id].score > best_score) {
                best_score = v->by_id[id].score;
                best_id = id;
                best_idx = i;
            }
        }
        if (best_id == -1)
            break;
        tok[best_idx] = best_id;
        memmove(tok + best_idx + 1, tok + best_idx + 2, (n - best_idx - 2) * sizeof *tok);
        n--;
    }
    return n;
}

START_TEST(llama2c_matches_reference)
{
    lmq_blob b = load("stories260K/tok512.bin");
    ref_vocab v;
    ref_load(&v, &b);
    tok_tokenizer *t = open_l2c();
    lmq_blob story = load("text/tinystories-valid.txt"), moby = load("text/moby-dick-eval.txt");
    static const char *const frag[] = { "a", "e", "t", "h", " ", "  ", "the", " the", "Once", " upon",
                                        "o", "n", "s", ".", "\n", "aaa", "é", "—", "中", "😀", "x",
                                        "'", ",", "Lily", "\t", "ing", "ed",
                                        /* "ll", "pp", "oo" are tokens: overlapping pairs tie */
                                        "l", "lll", "p", "pp", "oo", "ooo", "ball" };
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    uint8_t s[400];
    int32_t ref[800];
    for (int iter = 0; iter < 600; iter++) {
        size_t n = 0;
        if (iter % 3 == 2) { /* a window of real text, cut at UTF-8 boundaries */
            const lmq_blob *src = iter % 2 ? &story : &moby;
            size_t len = rng_next(&rng) % 160, at = rng_next(&rng) % (src->size - len);
            while (at > 0 && (src->data[at] & 0xC0) == 0x80)
                at--;
            while (len > 0 && at + len < src->size && (src->data[at + len] & 0xC0) == 0x80)
                len--;
            memcpy(s, src->data + at, len);
            n = len;
        } else {
            int parts = (int)(rng_next(&rng) % 40);
            for (int p = 0; p < parts; p++) {
                const char *f = frag[rng_next(&rng) % (sizeof frag / sizeof frag[0])];
                memcpy(s + n, f, strlen(f));
                n += strlen(f);
            }
        }
        size_t rn = ref_encode(&v, s, n, ref);
        int32_t *ids;
        size_t k;
        encode_ok(t, (const char *)s, n, &ids, &k);
        ck_assert_msg(k == rn, "iteration %d: %zu tokens, reference %zu", iter, k, rn);
        for (size_t i = 0; i < k; i++)
            ck_assert_msg(ids[i] == ref[i], "iteration %d: token %zu is %d, reference %d", iter, i,
                          (int)ids[i], (int)ref[i]);
        assert_decodes_to(t, ids, k, (const char *)s, n);
        free(ids);
    }
    lmq_blob_close(&story);
    lmq_blob_close(&moby);
    lmq_blob_close(&b);
    free(v.by_id);
    free(v.sorted);
    tok_free(t);
}
END_TEST

/* ---- gpt2 merges against the reference loop (GPT-2's encoder.py bpe()) ---- */

/* Long single words (one pre-token each, letters only, so the byte-level strings are the
 * letters themselves; a leading space is "Ġ"): merge the lowest-ranked pair everywhere until
 * none is in merges.txt. */
START_TEST(gpt2_merges_match_reference)
{
    tok_tokenizer *t = open_gpt2();
    json_t *vocab = load_json("gpt2-tokenizer/vocab.json");
    lmq_blob mb = load("gpt2-tokenizer/merges.txt");
    json_t *rank = json_object();
    const char *s = (const char *)mb.data, *end = s + mb.size;
    s = (const char *)memchr(s, '\n', mb.size) + 1; /* past "#version" */
    for (int r = 0; s < end; r++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        char line[256];
        snprintf(line, sizeof line, "%.*s", (int)(nl - s), s);
        json_object_set_new(rank, line, json_integer(r));
        s = nl + 1;
    }
    ck_assert_int_eq(json_object_size(rank), 50000);

    uint64_t rng = 12345;
    static const char alphabet[] = "aeinorstlhu";
    char word[200], *sym[200];
    for (int iter = 0; iter < 120; iter++) {
        size_t n = 1 + rng_next(&rng) % 120, m = 0;
        int space = iter % 2;
        if (space)
            word[0] = ' ';
        for (size_t i = space; i < n; i++)
            word[i] = iter % 10 == 9 ? 'a' : alphabet[rng_next(&rng) % (sizeof alphabet - 1)];
        for (size_t i = 0; i < n; i++) {
            sym[m++] = strdup(word[i] == ' ' ? "\xc4\xa0" : (char[]){ word[i], 0 });
        }
        for (;;) {
            long long best = -1;
            char key[512];
            for (size_t i = 0; i + 1 < m; i++) {
                snprintf(key, sizeof key, "%s %s", sym[i], sym[i + 1]);
                json_t *r = json_object_get(rank, key);
                if (r && (best < 0 || json_integer_value(r) < best))
                    best = json_integer_value(r);
            }
            if (best < 0)
                break;
            size_t out = 0;
            for (size_t i = 0; i < m; i++) {
                snprintf(key, sizeof key, "%s %s", sym[i], i + 1 < m ? sym[i + 1] : "");
                json_t *r = json_object_get(rank, key);
                if (i + 1 < m && r && json_integer_value(r) == best) {
                    char *cat = malloc(strlen(sym[i]) + strlen(sym[i + 1]) + 1);
                    sprintf(cat, "%s%s", sym[i], sym[i + 1]);
                    free(sym[i]);
                    free(sym[i + 1]);
                    sym[out++] = cat;
                    i++;
                } else {
                    sym[out++] = sym[i];
                }
            }
            m = out;
        }
        int32_t *ids;
        size_t k;
        encode_ok(t, word, n, &ids, &k);
        ck_assert_msg(k == m, "word %d: %zu tokens, reference %zu", iter, k, m);
        for (size_t i = 0; i < m; i++) {
            json_t *id = json_object_get(vocab, sym[i]);
            ck_assert_msg(id && ids[i] == json_integer_value(id), "word %d token %zu", iter, i);
            free(sym[i]);
        }
        free(ids);
    }
    json_decref(rank);
    json_decref(vocab);
    lmq_blob_close(&mb);
    tok_free(t);
}
END_TEST

/* ---- gpt2 pre-tokeniser ---- */

/* Each text must split into the listed pre-tokens (what the Python regex module gives for
 * GPT-2's pattern): encoding the text equals encoding each pre-token alone, concatenated. */
START_TEST(gpt2_pretokenizer_splits)
{
    static const char *const cases[][9] = {
        { "Hello  world", "Hello", " ", " world" },
        { "don't", "don", "'t" },
        { "'S'sx", "'", "S", "'s", "x" },
        { "we'll've 'RE", "we", "'ll", "'ve", " '", "RE" },
        { "I'd 'dx'm'M", "I", "'d", " '", "dx", "'m", "'", "M" },
        { "a\u00a0b", "a", "\u00a0", "b" },
        { "x \u00a0y", "x", " ", "\u00a0", "y" },
        { "1234 56", "1234", " 56" },
        { "x\u00b2\u00bd", "x", "\u00b2\u00bd" },
        { "end.\n\nNext", "end", ".", "\n", "\n", "Next" },
        { "a  ", "a", "  " },
        { "\u4e2d\u6587 \u5b57", "\u4e2d\u6587", " \u5b57" },
        { "?!  ...", "?!", " ", " ..." },
        { " \tx", " ", "\t", "x" },
        { "x\u3000\u3000", "x", "\u3000\u3000" },
        { "abc123def", "abc", "123", "def" },
        { "\u03a9\u0301x", "\u03a9", "\u0301", "x" },
        { "$5.00", "$", "5", ".", "00" },
        { "\x1c\x1dx", "\x1c\x1d", "x" }, /* U+001C..1F are not White_Space */
        { "\u2160\u2161 \u0663", "\u2160\u2161", " \u0663" },
    };
    tok_tokenizer *t = open_gpt2();
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int32_t want[64], *ids;
        size_t nw = 0, k;
        for (int p = 1; p < 9 && cases[c][p]; p++) {
            encode_ok(t, cases[c][p], strlen(cases[c][p]), &ids, &k);
            memcpy(want + nw, ids, k * sizeof *ids);
            nw += k;
            free(ids);
        }
        encode_ok(t, cases[c][0], strlen(cases[c][0]), &ids, &k);
        ck_assert_msg(k == nw, "case %zu: %zu tokens, want %zu", c, k, nw);
        for (size_t i = 0; i < k; i++)
            ck_assert_msg(ids[i] == want[i], "case %zu: token %zu", c, i);
        free(ids);
    }
    /* <|endoftext|> inside text is the one special token, wherever it stands */
    int32_t *a, *b, *ids;
    size_t na, nb, k;
    encode_ok(t, "x<|endoftext|> y", 16, &ids, &k);
    encode_ok(t, "x", 1, &a, &na);
    encode_ok(t, " y", 2, &b, &nb);
    ck_assert_uint_eq(k, na + 1 + nb);
    ck_assert_int_eq(ids[na], 50256);
    ck_assert(memcmp(ids, a, na * sizeof *a) == 0 && memcmp(ids + na + 1, b, nb * sizeof *b) == 0);
    free(a);
    free(b);
    free(ids);
    tok_free(t);
}
END_TEST

/* ---- tokenizer.json ---- */

/* A tokenizer.json holding the fixture's vocabulary and merges, merges as "a b" strings or as
 * [a, b] pairs. */
static json_t *tokenizer_json(int pairs)
{
    json_t *vocab = load_json("gpt2-tokenizer/vocab.json");
    lmq_blob mb = load("gpt2-tokenizer/merges.txt");
    json_t *merges = json_array();
    const char *s = (const char *)mb.data, *end = s + mb.size;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *sp = memchr(s, ' ', (size_t)(nl - s));
        if (strncmp(s, "#version", 8) != 0) {
            if (pairs)
                json_array_append_new(merges, json_pack("[s#s#]", s, (int)(sp - s), sp + 1,
                                                        (int)(nl - sp - 1)));
            else
                json_array_append_new(merges, json_stringn(s, (size_t)(nl - s)));
        }
        s = nl + 1;
    }
    lmq_blob_close(&mb);
    json_t *root = json_pack(
        "{s:s, s:[{s:i, s:s, s:b, s:b, s:b, s:b, s:b}], s:n, s:{s:s, s:b, s:b, s:b}, "
        "s:{s:s, s:n, s:n, s:s, s:s, s:b, s:o, s:o}}",
        "version", "1.0", "added_tokens", "id", 50256, "content", "<|endoftext|>", "single_word", 0,
        "lstrip", 0, "rstrip", 0, "normalized", 1, "special", 1, "normalizer", "pre_tokenizer",
        "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1, "use_regex", 1, "model",
        "type", "BPE", "dropout", "unk_token", "continuing_subword_prefix", "",
        "end_of_word_suffix", "", "fuse_unk", 0, "vocab", vocab, "merges", merges);
    ck_assert_ptr_nonnull(root);
    return root;
}

static char *make_tokenizer_json(int pairs)
{
    json_t *root = tokenizer_json(pairs);
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return text;
}

static lmq_code open_json(json_t *root, tok_tokenizer **t, lmq_err *e)
{
    char *text = json_dumps(root, JSON_COMPACT);
    lmq_code c = tok_open_hf_json((const uint8_t *)text, strlen(text), t, e);
    free(text);
    return c;
}

START_TEST(hf_json_matches_gpt2)
{
    tok_tokenizer *g = open_gpt2();
    for (int pairs = 0; pairs < 2; pairs++) {
        char *js = make_tokenizer_json(pairs);
        tok_tokenizer *h;
        lmq_err e;
        ck_assert_msg(tok_open_hf_json((const uint8_t *)js, strlen(js), &h, &e) == LMQ_OK, "%s", e.msg);
        free(js);
        ck_assert_int_eq(tok_kind(h), LMQ_TOK_HF_JSON);
        ck_assert_int_eq(tok_vocab_size(h), 50257);
        ck_assert_int_eq(tok_eos_id(h), 50256);
        assert_same_ids(g, h);
        tok_free(h);
    }
    tok_free(g);
}
END_TEST

/* A llama2.c vocabulary written as Hugging Face's files (tok_hf_write) and read back as
 * tokenizer.json encodes every fixture text to the tokenizer.bin's ids (llama2.c's merges by score
 * become merges by rank) and decodes them back; the files name the specials as Llama-2's do. */
START_TEST(hf_json_written_from_llama2c)
{
    tok_tokenizer *l = open_l2c(), *h;
    tok_hf_text hf;
    lmq_err e;
    ck_assert_msg(tok_hf_write(l, 512, &hf, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(tok_open_hf_json((const uint8_t *)hf.tokenizer_json, strlen(hf.tokenizer_json), &h, &e) == LMQ_OK,
                  "%s", e.msg);
    ck_assert_int_eq(tok_vocab_size(h), 512);
    ck_assert_int_eq(tok_bos_id(h), 1);
    ck_assert_int_eq(tok_eos_id(h), 2);
    assert_same_ids(l, h);
    json_error_t je;
    json_t *cfg = json_loads(hf.tokenizer_config_json, 0, &je), *map = json_loads(hf.special_tokens_map_json, 0, &je);
    ck_assert(cfg && map);
    ck_assert_str_eq(json_string_value(json_object_get(cfg, "bos_token")), "<s>");
    ck_assert(json_is_true(json_object_get(cfg, "add_bos_token")));
    ck_assert_int_eq(json_integer_value(json_object_get(cfg, "model_max_length")), 512);
    ck_assert_str_eq(json_string_value(json_object_get(map, "eos_token")), "</s>");
    json_decref(cfg);
    json_decref(map);
    tok_hf_text_free(&hf);
    tok_free(h);
    /* Only a llama2.c vocabulary is written. */
    tok_tokenizer *g = open_gpt2();
    ck_assert_int_eq(tok_hf_write(g, 1024, &hf, &e), LMQ_E_UNSUPPORTED);
    ck_assert_ptr_null(hf.tokenizer_json);
    tok_free(g);
    tok_free(l);
}
END_TEST

/* Added tokens beyond the vocabulary are matched in text and decode to their own text; ids
 * must stay contiguous. */
START_TEST(hf_json_added_tokens)
{
    json_t *root = tokenizer_json(1);
    json_t *added = json_object_get(root, "added_tokens");
    json_array_append_new(added, json_pack("{s:i, s:s}", "id", 50257, "content", "<|\u2192|>"));
    json_array_append_new(added, json_pack("{s:i, s:s}", "id", 50258, "content", "<|\u2192|>x"));
    tok_tokenizer *t;
    lmq_err e;
    ck_assert_msg(open_json(root, &t, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(tok_vocab_size(t), 50259);
    const char *text = "a<|\u2192|>b<|\u2192|>x";
    int32_t *ids, *a, *b;
    size_t n, na, nb;
    encode_ok(t, text, strlen(text), &ids, &n);
    encode_ok(t, "a", 1, &a, &na);
    encode_ok(t, "b", 1, &b, &nb);
    ck_assert_uint_eq(n, na + nb + 2);
    ck_assert_int_eq(ids[na], 50257);
    ck_assert_int_eq(ids[n - 1], 50258); /* the longer of two matches */
    assert_decodes_to(t, ids, n, text, strlen(text));
    free(ids);
    free(a);
    free(b);
    tok_free(t);
    /* a gap in the ids */
    json_object_set_new(json_array_get(added, 2), "id", json_integer(50259));
    ck_assert_int_eq(open_json(root, &t, &e), LMQ_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "id 50258") != NULL, "%s", e.msg);
    json_decref(root);
}
END_TEST

/* Models, normalizers and pre-tokenisers other than GPT-2's are refused, not misread. */
START_TEST(hf_json_refusals)
{
    static const struct {
        const char *json;
        lmq_code code;
    } cases[] = {
        { "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", LMQ_E_UNSUPPORTED },
        { "{\"pre_tokenizer\": {\"type\": \"Metaspace\"}, \"model\": {\"type\": \"BPE\"}}",
          LMQ_E_UNSUPPORTED },
        { "{\"normalizer\": {\"type\": \"NFKC\"}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}, "
          "\"model\": {\"type\": \"BPE\"}}", LMQ_E_UNSUPPORTED },
        { "{\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true}, "
          "\"model\": {\"type\": \"BPE\"}}", LMQ_E_UNSUPPORTED },
        { "{\"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", "
          "\"vocab\": [1, 2]}}", LMQ_E_FORMAT },
        { "{\"pre_tokenizer\": {\"type\": \"ByteLevel\"}}", LMQ_E_FORMAT },
        { "{\"model\": ", LMQ_E_FORMAT },
        { "", LMQ_E_FORMAT },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tok_tokenizer *t = NULL;
        lmq_err e;
        ck_assert_msg(tok_open_hf_json((const uint8_t *)cases[i].json, strlen(cases[i].json), &t, &e) ==
                          cases[i].code, "case %zu", i);
        ck_assert_ptr_null(t);
        ck_assert_msg(strstr(e.msg, "tokenizer.json") != NULL, "%s", e.msg);
    }
    /* a merge that is neither "a b" nor [a, b] */
    char *js = make_tokenizer_json(0);
    char *at = strstr(js, "\"merges\":[");
    ck_assert_ptr_nonnull(at);
    at += strlen("\"merges\":[");
    size_t head = (size_t)(at - js);
    char *bad = malloc(strlen(js) + 8);
    memcpy(bad, js, head);
    strcpy(bad + head, "7,");
    strcpy(bad + head + 2, at);
    tok_tokenizer *t;
    lmq_err e;
    ck_assert_int_eq(tok_open_hf_json((const uint8_t *)bad, strlen(bad), &t, &e), LMQ_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "model.merges[0]") != NULL, "%s", e.msg);
    free(bad);
    free(js);
}
END_TEST

/* ---- hostile tokenizer files ---- */

START_TEST(llama2c_bad_files)
{
    lmq_blob b = load("stories260K/tok512.bin");
    tok_tokenizer *t;
    lmq_err e;
    /* every truncation is refused (with the vocabulary size given, the file must hold it all) */
    for (size_t n = 0; n < b.size; n++) {
        t = NULL;
        ck_assert_msg(tok_open_llama2c(b.data, n, 512, &t, &e) == LMQ_E_FORMAT, "prefix %zu", n);
        ck_assert_ptr_null(t);
    }
    ck_assert_int_eq(tok_open_llama2c(b.data, b.size - 1, 512, &t, &e), LMQ_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "tokenizer.bin: token 511") != NULL, "%s", e.msg);
    ck_assert_int_eq(tok_open_llama2c(b.data, b.size, 511, &t, &e), LMQ_E_FORMAT); /* left over */
    ck_assert_msg(strstr(e.msg, "left over") != NULL, "%s", e.msg);
    ck_assert_int_eq(tok_open_llama2c(b.data, b.size, 513, &t, &e), LMQ_E_FORMAT);
    ck_assert_int_eq(tok_open_llama2c(b.data, b.size, -1, &t, &e), LMQ_E_ARG);
    /* read to the end of the file: all 512 */
    ck_assert_int_eq(tok_open_llama2c(b.data, b.size, 0, &t, &e), LMQ_OK);
    ck_assert_int_eq(tok_vocab_size(t), 512);
    tok_free(t);

    uint8_t *copy = malloc(b.size + 8);
    memcpy(copy, b.data, b.size);
    static const int32_t bad_len[] = { -1, INT32_MIN, INT32_MAX, 1 << 20 };
    for (size_t i = 0; i < sizeof bad_len / sizeof bad_len[0]; i++) {
        memcpy(copy + 4 + 4, &bad_len[i], 4); /* token 0's length */
        ck_assert_int_eq(tok_open_llama2c(copy, b.size, 512, &t, &e), LMQ_E_FORMAT);
        ck_assert_msg(strstr(e.msg, "token 0 at byte 4") != NULL, "%s", e.msg);
        ck_assert_int_eq(tok_open_llama2c(copy, b.size, 0, &t, &e), LMQ_E_FORMAT);
    }
    memcpy(copy, b.data, b.size);
    int32_t neg = -7;
    memcpy(copy, &neg, 4);
    ck_assert_int_eq(tok_open_llama2c(copy, b.size, 512, &t, &e), LMQ_E_FORMAT);
    /* fewer entries than <unk>, BOS and EOS; 100 are a vocabulary (its byte pieces stop at
     * <0x60>: no byte fallback) */
    size_t pos = 4, two = 0;
    for (int i = 0; i < 100; i++) {
        int32_t len;
        memcpy(&len, b.data + pos + 4, 4);
        pos += 8 + (size_t)len;
        two = i == 1 ? pos : two;
    }
    ck_assert_int_eq(tok_open_llama2c(b.data, two, 0, &t, &e), LMQ_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "2 tokens") != NULL, "%s", e.msg);
    ck_assert_msg(tok_open_llama2c(b.data, pos, 0, &t, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(tok_vocab_size(t), 100);
    tok_free(t);
    free(copy);
    lmq_blob_close(&b);
}
END_TEST

/* A tokenizer.bin of n pieces (max_token_length first; scores as given, 0 where scores is NULL). */
static uint8_t *l2c_file(const char *const *pieces, const float *scores, int n, size_t *size)
{
    size_t total = 4, max = 0;
    for (int i = 0; i < n; i++) {
        total += 8 + strlen(pieces[i]);
        max = strlen(pieces[i]) > max ? strlen(pieces[i]) : max;
    }
    uint8_t *d = malloc(total), *p = d + 4;
    ck_assert_ptr_nonnull(d);
    int32_t m = (int32_t)max;
    memcpy(d, &m, 4);
    for (int i = 0; i < n; i++) {
        float sc = scores ? scores[i] : 0.0f;
        int32_t len = (int32_t)strlen(pieces[i]);
        memcpy(p, &sc, 4);
        memcpy(p + 4, &len, 4);
        memcpy(p + 8, pieces[i], (size_t)len);
        p += 8 + (size_t)len;
    }
    *size = total;
    return d;
}

static void assert_ids(const tok_tokenizer *t, const char *text, const int32_t *want, size_t n)
{
    int32_t *ids;
    size_t k;
    encode_ok(t, text, strlen(text), &ids, &k);
    ck_assert_msg(k == n, "\"%s\": %zu ids, expected %zu", text, k, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(ids[i] == want[i], "\"%s\": id %zu is %d, expected %d", text, i, ids[i], want[i]);
    free(ids);
}

static char *decoded(const tok_tokenizer *t, const int32_t *ids, size_t n)
{
    char *s;
    size_t len;
    lmq_err e;
    ck_assert_msg(tok_decode(t, ids, n, &s, &len, &e) == LMQ_OK, "%s", e.msg);
    return s;
}

/* llama2.c's merge loop runs over BOS too: a vocabulary where BOS's piece followed by the dummy
 * prefix is a piece merges BOS away. "a" -> <s> " " a; ("<s>", " ") makes "<s> " (score 5), the
 * best pair, then ("<s> ", "a") makes nothing: [5, 4]. */
START_TEST(llama2c_merges_over_bos)
{
    static const char *const pieces[] = { "<unk>", "<s>", "</s>", " ", "a", "<s> " };
    static const float scores[] = { 0, 0, 0, -1, -2, 5 };
    size_t size;
    uint8_t *d = l2c_file(pieces, scores, 6, &size);
    tok_tokenizer *t;
    lmq_err e;
    ck_assert_msg(tok_open_llama2c(d, size, 6, &t, &e) == LMQ_OK, "%s", e.msg);
    assert_ids(t, "a", (const int32_t[]){ 5, 4 }, 2);
    assert_ids(t, "", (const int32_t[]){ 1 }, 1);
    tok_free(t);
    free(d);
}
END_TEST

/* Vocabularies trained by llama2.c's custom-tokenizer path: 105 pieces without byte pieces, and
 * 2048 whose ids 3..258 are ordinary characters; then byte pieces away from ids 3..258. Byte
 * fallback is a property of the pieces, not of the vocabulary's size. */
START_TEST(llama2c_custom_vocabularies)
{
    enum { SMALL = 105, LARGE = 2048, MOVED = 400 };
    static char store[LARGE][16];
    const char *pieces[LARGE];
    float scores[LARGE] = { 0 };
    tok_tokenizer *t;
    lmq_err e;
    size_t size;
    const char *const special[] = { "<unk>", "<s>", "</s>" };

    /* 105: specials, ' ' (3), 'a'..'z' (4..29), '!' (30), merges " c" (31), "at" (32), " cat" (33),
     * then pieces that never form from any text below */
    int n = 0;
    for (; n < 3; n++)
        pieces[n] = special[n];
    pieces[n++] = " ";
    for (char c = 'a'; c <= 'z'; c++, n++) {
        store[n][0] = c;
        pieces[n] = store[n];
    }
    pieces[n++] = "!";
    scores[n] = 5, pieces[n++] = " c";
    scores[n] = 4, pieces[n++] = "at";
    scores[n] = 6, pieces[n++] = " cat";
    for (; n < SMALL; n++) {
        snprintf(store[n], sizeof store[n], "Q%d", n);
        pieces[n] = store[n];
    }
    uint8_t *f = l2c_file(pieces, scores, SMALL, &size);
    ck_assert_msg(tok_open_llama2c(f, size, SMALL, &t, &e) == LMQ_OK, "%s", e.msg);
    /* " c" (5) first, then "at" (4), then " cat" (6); the é (not a piece) is one <unk> */
    const int32_t cat[] = { 1, 33, 3, 0, 30 };
    assert_ids(t, "cat \xc3\xa9!", cat, 5);
    char *s = decoded(t, cat, 5);
    ck_assert_str_eq(s, "cat <unk>!");
    free(s);
    const int32_t tab[] = { 1, 3, 0, 0, 0 }; /* three unknown characters, one <unk> each */
    assert_ids(t, "\t\xe2\x82\xac\xf0\x9f\x98\x80", tab, 5);
    tok_free(t);
    free(f);

    /* 2048: ids 3..97 are ' '..'~', 98..258 the two-byte characters U+00A1.., the rest pieces that
     * never form */
    for (n = 3; n < 3 + 95; n++) {
        snprintf(store[n], sizeof store[n], "%c", ' ' + n - 3);
        pieces[n] = store[n];
    }
    for (unsigned cp = 0xa1; n < 259; n++, cp++) {
        snprintf(store[n], sizeof store[n], "%c%c", 0xc0 | cp >> 6, 0x80 | (cp & 0x3f));
        pieces[n] = store[n];
    }
    for (; n < LARGE; n++) {
        snprintf(store[n], sizeof store[n], "~~%d", n);
        pieces[n] = store[n];
    }
    f = l2c_file(pieces, NULL, LARGE, &size);
    ck_assert_msg(tok_open_llama2c(f, size, LARGE, &t, &e) == LMQ_OK, "%s", e.msg);
    /* 'H' is 0x48 (id 3 + 0x48 - 0x20 = 43), 'i' 76, U+00E9 id 98 + 0xe9 - 0xa1 = 170; the euro
     * sign is no piece: <unk>, not ids 3 + its bytes */
    const int32_t hi[] = { 1, 3, 43, 76, 3, 170, 0 };
    assert_ids(t, "Hi \xc3\xa9\xe2\x82\xac", hi, 7);
    s = decoded(t, hi, 6);
    ck_assert_str_eq(s, "Hi \xc3\xa9");
    free(s);
    tok_free(t);
    free(f);

    /* byte pieces at ids 144..399 (after 141 ordinary ones): byte fallback, through those ids */
    for (n = 98; n < 144; n++) { /* 3..97 stay ' '..'~' */
        snprintf(store[n], sizeof store[n], "w%d", n);
        pieces[n] = store[n];
    }
    for (int b = 0; b < 256; b++, n++) {
        snprintf(store[n], sizeof store[n], "<0x%02X>", b);
        pieces[n] = store[n];
    }
    f = l2c_file(pieces, NULL, MOVED, &size);
    ck_assert_msg(tok_open_llama2c(f, size, MOVED, &t, &e) == LMQ_OK, "%s", e.msg);
    const int32_t euro[] = { 1, 3, 144 + 0xe2, 144 + 0x82, 144 + 0xac, 3 + '!' - ' ' };
    assert_ids(t, "\xe2\x82\xac!", euro, 6);
    s = decoded(t, euro, 6);
    ck_assert_str_eq(s, "\xe2\x82\xac!");
    free(s);
    tok_free(t);
    free(f);
}
END_TEST

static lmq_code open_gpt2_text(const char *vocab, const char *merges, lmq_err *e)
{
    tok_tokenizer *t = NULL;
    lmq_code c = tok_open_gpt2((const uint8_t *)vocab, strlen(vocab), (const uint8_t *)merges,
                               strlen(merges), &t, e);
    ck_assert(c ? t == NULL : t != NULL);
    tok_free(t);
    return c;
}

START_TEST(gpt2_bad_files)
{
    lmq_err e;
    static const char *const bad_vocab[] = {
        "", "garbage", "[1, 2, 3]", "{\"a\": \"x\"}", "{\"a\": -1}", "{\"a\": 0, \"b\": 0}",
        "{\"a\": 0, \"b\": 5}", "{\"a\": 0, \"a\": 1}", "{\"a\": 0, \"b\": 1.5}",
        "{\"a\": 0}", /* a vocabulary without the 256 byte tokens */
    };
    for (size_t i = 0; i < sizeof bad_vocab / sizeof bad_vocab[0]; i++) {
        ck_assert_msg(open_gpt2_text(bad_vocab[i], "", &e) == LMQ_E_FORMAT, "case %zu", i);
        ck_assert_msg(strstr(e.msg, "vocab.json") != NULL, "%s", e.msg);
    }

    /* the real vocabulary with damaged merges: errors name the line */
    lmq_blob vb = load("gpt2-tokenizer/vocab.json");
    char *vocab = strndup((const char *)vb.data, vb.size);
    json_t *v = load_json("gpt2-tokenizer/vocab.json");
    ck_assert_ptr_null(json_object_get(v, "\xc4\xa0\xc4\xa0")); /* "ĠĠ" is no token */
    ck_assert_ptr_null(json_object_get(v, "qqqzz"));
    json_decref(v);
    static const struct {
        const char *merges, *needle;
    } cases[] = {
        { "#version: 0.2\n\xc4\xa0 t\nqqqzz x\n", "merges.txt: line 3: token \"qqqzz\"" },
        { "\xc4\xa0 t\n\xc4\xa0 \xc4\xa0\n", "line 2: the merged token" },
        { "#version: 0.2\nabc\n", "line 2:" },
        { "a  b\n", "line 1:" },
        { "a b c\n", "line 1:" },
        { " a\n", "line 1:" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_msg(open_gpt2_text(vocab, cases[i].merges, &e) == LMQ_E_FORMAT, "case %zu", i);
        ck_assert_msg(strstr(e.msg, cases[i].needle) != NULL, "case %zu: %s", i, e.msg);
    }
    /* empty merges, CRLF lines and no "#version" line are fine */
    ck_assert_int_eq(open_gpt2_text(vocab, "", &e), LMQ_OK);
    ck_assert_int_eq(open_gpt2_text(vocab, "\xc4\xa0 t\r\nh e\r\n", &e), LMQ_OK);
    free(vocab);
    lmq_blob_close(&vb);
}
END_TEST

/* ---- P1 documents and stream errors ---- */

START_TEST(documents)
{
    static const struct {
        const char *text;
        int n;
        const char *docs[3];
    } cases[] = {
        { "one", 1, { "one" } },
        { "  one\n\n", 1, { "one" } },
        { "a\n<|endoftext|>\nb", 2, { "a", "b" } },
        { "a\r\n<|endoftext|>\r\nb\r\n", 2, { "a", "b" } },
        { "<|endoftext|>\na\n<|endoftext|>", 1, { "a" } },
        { "a\n<|endoftext|>\n \t\n<|endoftext|>\nb c\nd", 2, { "a", "b c\nd" } },
        { "a<|endoftext|>\nb", 1, { "a<|endoftext|>\nb" } }, /* not a line of its own */
        { "a\n<|endoftext|> \nb", 1, { "a\n<|endoftext|> \nb" } },
        { "\v\fx\n<|endoftext|>\n\n", 1, { "x" } },
        { "<|endoftext|>", 0, { 0 } },
        { "", 0, { 0 } },
        { " \n\t ", 0, { 0 } },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tok_doc *d;
        int n;
        lmq_err e;
        const char *s = cases[i].text;
        ck_assert_int_eq(tok_docs_split(s, strlen(s), &d, &n, &e), LMQ_OK);
        ck_assert_msg(n == cases[i].n, "case %zu: %d documents", i, n);
        for (int k = 0; k < n; k++) {
            ck_assert_uint_eq(d[k].len, strlen(cases[i].docs[k]));
            ck_assert_msg(memcmp(s + d[k].off, cases[i].docs[k], d[k].len) == 0, "case %zu doc %d", i, k);
        }
        free(d);
    }
}
END_TEST

START_TEST(stream_errors)
{
    tok_tokenizer *toks[2] = { open_l2c(), open_gpt2() };
    static const struct {
        const char *text;
        size_t len, offset;
    } bad[] = {
        { "abc\xff" "def", 7, 3 },
        { "ok\xe2\x82", 4, 2 },          /* truncated sequence */
        { "\xc0\xaf", 2, 0 },            /* overlong '/' */
        { "x\n\xed\xa0\x80", 5, 2 },     /* a surrogate */
        { "xy\xf4\x90\x80\x80", 6, 2 },  /* above U+10FFFF */
        { "\xe2\x82\xac\x80", 4, 3 },    /* a stray continuation byte */
    };
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            int32_t *ids;
            size_t n;
            int nd;
            lmq_err e;
            char want[64];
            snprintf(want, sizeof want, "byte offset %zu", bad[i].offset);
            ck_assert_int_eq(tok_stream_build(toks[k], bad[i].text, bad[i].len, &ids, &n, &nd, &e),
                             LMQ_E_FORMAT);
            ck_assert_msg(strstr(e.msg, want) != NULL, "case %zu: %s", i, e.msg);
            ck_assert_int_eq(tok_encode(toks[k], bad[i].text, bad[i].len, &ids, &n, &e), LMQ_E_FORMAT);
            ck_assert_msg(strstr(e.msg, want) != NULL, "case %zu: %s", i, e.msg);
        }
        static const char *const empty[] = { "", "  \n", "<|endoftext|>\n\n<|endoftext|>\r\n" };
        for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
            int32_t *ids;
            size_t n;
            int nd;
            lmq_err e;
            ck_assert_int_eq(tok_stream_build(toks[k], empty[i], strlen(empty[i]), &ids, &n, &nd, &e),
                             LMQ_E_FORMAT);
            ck_assert_msg(strstr(e.msg, "no document") != NULL, "%s", e.msg);
        }
    }
    tok_free(toks[0]);
    tok_free(toks[1]);
}
END_TEST

/* ---- Unicode ---- */

/* Classes of code points whose properties the Unicode standard fixes. */
START_TEST(unicode_classes)
{
    static const struct {
        uint32_t cp;
        tok_uni_class cls;
    } cases[] = {
        { 'a', TOK_UNI_LETTER },    { 'Z', TOK_UNI_LETTER },    { '7', TOK_UNI_NUMBER },
        { ' ', TOK_UNI_SPACE },     { '\t', TOK_UNI_SPACE },    { '\v', TOK_UNI_SPACE },
        { 0x1C, TOK_UNI_OTHER },    { 0x1F, TOK_UNI_OTHER },    { 0x85, TOK_UNI_SPACE },
        { 0xA0, TOK_UNI_SPACE },    { 0xAA, TOK_UNI_LETTER },   { 0xB2, TOK_UNI_NUMBER },
        { 0xBD, TOK_UNI_NUMBER },   { 0xD7, TOK_UNI_OTHER },    { 0xDF, TOK_UNI_LETTER },
        { 0x1680, TOK_UNI_SPACE },  { 0x180E, TOK_UNI_OTHER },  { 0x2000, TOK_UNI_SPACE },
        { 0x200A, TOK_UNI_SPACE },  { 0x200B, TOK_UNI_OTHER },  { 0x2028, TOK_UNI_SPACE },
        { 0x202F, TOK_UNI_SPACE },  { 0x3000, TOK_UNI_SPACE },  { 0x0301, TOK_UNI_OTHER },
        { 0x0663, TOK_UNI_NUMBER }, { 0x2160, TOK_UNI_NUMBER }, { 0x4E00, TOK_UNI_LETTER },
        { 0xAC00, TOK_UNI_LETTER }, { 0x02B0, TOK_UNI_LETTER }, { 0x01C5, TOK_UNI_LETTER },
        { 0x2014, TOK_UNI_OTHER },  { 0x1F600, TOK_UNI_OTHER }, { 0x1D7CE, TOK_UNI_NUMBER },
        { 0x20000, TOK_UNI_LETTER }, { 0xE000, TOK_UNI_OTHER }, { 0x10FFFF, TOK_UNI_OTHER },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(tok_uni_classify(cases[i].cp) == cases[i].cls, "U+%04X", cases[i].cp);
    /* the range table is sorted, disjoint, and agrees with the Latin-1 table */
    for (size_t i = 0; i < tok_uni_n_ranges; i++) {
        ck_assert_uint_le(tok_uni_ranges[i].lo, tok_uni_ranges[i].hi);
        if (i)
            ck_assert_uint_gt(tok_uni_ranges[i].lo, tok_uni_ranges[i - 1].hi);
    }
    for (uint32_t cp = 0; cp < 256; cp++) {
        tok_uni_class c = TOK_UNI_OTHER;
        for (size_t i = 0; i < tok_uni_n_ranges && tok_uni_ranges[i].lo <= cp; i++)
            if (cp <= tok_uni_ranges[i].hi)
                c = tok_uni_ranges[i].cls;
        ck_assert_int_eq(tok_uni_latin1[cp], c);
    }
}
END_TEST

START_TEST(utf8_decoding)
{
    uint32_t cp;
    ck_assert_int_eq(tok_utf8_decode((const uint8_t *)"\xf0\x9f\x98\x80", 4, &cp), 4);
    ck_assert_uint_eq(cp, 0x1F600);
    ck_assert_int_eq(tok_utf8_decode((const uint8_t *)"\xf4\x8f\xbf\xbf", 4, &cp), 4);
    ck_assert_uint_eq(cp, 0x10FFFF);
    ck_assert_int_eq(tok_utf8_decode((const uint8_t *)"\xed\x9f\xbf", 3, &cp), 3);
    ck_assert_uint_eq(cp, 0xD7FF);
    ck_assert_int_eq(tok_utf8_decode((const uint8_t *)"\xe0\x80\x80", 3, &cp), 0);  /* overlong */
    ck_assert_int_eq(tok_utf8_decode((const uint8_t *)"\xf0\x8f\xbf\xbf", 4, &cp), 0);
    ck_assert_int_eq(tok_utf8_decode((const uint8_t *)"\xf8\x88\x80\x80", 4, &cp), 0);
    ck_assert_int_eq(tok_utf8_decode((const uint8_t *)"\xc3", 1, &cp), 0);
    ck_assert_uint_eq(tok_utf8_valid_prefix((const uint8_t *)"a\xc3\xa9\xc3", 4), 3);
    /* NUL is a valid code point and encodes (llama2c: byte fallback <0x00>) */
    tok_tokenizer *t = open_l2c();
    int32_t *ids;
    size_t n;
    encode_ok(t, "a\0b", 3, &ids, &n);
    assert_decodes_to(t, ids, n, "a\0b", 3);
    free(ids);
    tok_free(t);
}
END_TEST

/* ---- tokenizers carried by a model ---- */

static void add_fixture_file(lmq_model *m, const char *name, const char *rel)
{
    lmq_blob b = load(rel);
    uint8_t *copy = malloc(b.size);
    memcpy(copy, b.data, b.size);
    lmq_err e;
    ck_assert_int_eq(lmq_model_add_file(m, name, copy, b.size, &e), LMQ_OK);
    lmq_blob_close(&b);
}

START_TEST(open_from_model)
{
    lmq_model m;
    tok_tokenizer *t;
    lmq_err e;
    lmq_model_init(&m);
    m.arch.tokenizer = LMQ_TOK_LLAMA2C;
    m.arch.vocab_size = 512;
    ck_assert_int_eq(tok_open_model(&m, &t, &e), LMQ_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "tokenizer.bin") != NULL, "%s", e.msg);
    add_fixture_file(&m, "tokenizer.bin", "stories260K/tok512.bin");
    ck_assert_int_eq(tok_open_model(&m, &t, &e), LMQ_OK);
    ck_assert_int_eq(tok_kind(t), LMQ_TOK_LLAMA2C);
    tok_free(t);
    m.arch.vocab_size = 32000; /* the file must hold the model's vocabulary */
    ck_assert_int_eq(tok_open_model(&m, &t, &e), LMQ_E_FORMAT);
    lmq_model_free(&m);

    lmq_model_init(&m);
    m.arch.tokenizer = LMQ_TOK_GPT2;
    m.arch.vocab_size = 50257;
    add_fixture_file(&m, "vocab.json", "gpt2-tokenizer/vocab.json");
    ck_assert_int_eq(tok_open_model(&m, &t, &e), LMQ_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "merges.txt") != NULL, "%s", e.msg);
    add_fixture_file(&m, "merges.txt", "gpt2-tokenizer/merges.txt");
    ck_assert_int_eq(tok_open_model(&m, &t, &e), LMQ_OK);
    ck_assert_int_eq(tok_kind(t), LMQ_TOK_GPT2);
    tok_free(t);
    m.arch.vocab_size = 50000; /* ids the model has no embedding for */
    ck_assert_int_eq(tok_open_model(&m, &t, &e), LMQ_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "50257") != NULL, "%s", e.msg);
    m.arch.vocab_size = 50304; /* a padded embedding is fine */
    ck_assert_int_eq(tok_open_model(&m, &t, &e), LMQ_OK);
    tok_free(t);
    m.arch.tokenizer = LMQ_TOK_HF_JSON;
    ck_assert_int_eq(tok_open_model(&m, &t, &e), LMQ_E_FORMAT);
    char *js = make_tokenizer_json(1);
    size_t n = strlen(js);
    lmq_model_add_file(&m, "tokenizer.json", (uint8_t *)js, n, &e);
    ck_assert_int_eq(tok_open_model(&m, &t, &e), LMQ_OK);
    ck_assert_int_eq(tok_kind(t), LMQ_TOK_HF_JSON);
    tok_free(t);
    m.arch.tokenizer = LMQ_TOK_NONE;
    ck_assert_int_eq(tok_open_model(&m, &t, &e), LMQ_E_UNSUPPORTED);
    lmq_model_free(&m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tokenizer");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, golden_streams);
    tcase_add_test(tc, hf_json_written_from_llama2c);
    tcase_add_test(tc, gpt2_known_answers);
    tcase_add_test(tc, round_trips);
    tcase_add_test(tc, greedy_texts);
    tcase_add_test(tc, decode_pieces);
    tcase_add_test(tc, llama2c_matches_reference);
    tcase_add_test(tc, gpt2_merges_match_reference);
    tcase_add_test(tc, gpt2_pretokenizer_splits);
    tcase_add_test(tc, hf_json_matches_gpt2);
    tcase_add_test(tc, hf_json_added_tokens);
    tcase_add_test(tc, hf_json_refusals);
    tcase_add_test(tc, llama2c_bad_files);
    tcase_add_test(tc, llama2c_custom_vocabularies);
    tcase_add_test(tc, llama2c_merges_over_bos);
    tcase_add_test(tc, gpt2_bad_files);
    tcase_add_test(tc, documents);
    tcase_add_test(tc, stream_errors);
    tcase_add_test(tc, unicode_classes);
    tcase_add_test(tc, utf8_decoding);
    tcase_add_test(tc, open_from_model);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
