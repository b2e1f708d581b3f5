/* runtime/generate: greedy continuations against the independent reference (golden greedy.json),
 * through the real path (checkpoint → artefact file → rt_load_artefact); greedy = argmax over
 * logits recomputed from scratch; sampling reproducible by seed and equal to a hand-driven
 * sampler; the three stops (length, end of text, full context); prompt handling and errors. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/convert.h"
#include "formats/artefact.h"
#include "formats/container.h"
#include "runtime/artefact.h"
#include "runtime/forward.h"
#include "runtime/generate.h"
#include "runtime/sample.h"
#include "tests/testutil.h"

#define MAX_IDS 1024

/* ---- helpers ------------------------------------------------------------------------- */

/* The checkpoint converted, written as an fp32 artefact and read back as the runtime does. */
static void load_artefact(const char *rel, lmq_model *m)
{
    lmq_model src;
    lmq_err e;
    ck_assert_msg(lmq_convert(fixture(rel), NULL, &src, &e) == LMQ_OK, "%s: %s", rel, e.msg);
    const char *dir = test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/model.lmq", dir);
    ck_assert_msg(lmq_container_write_model(path, &src, NULL, &e) == LMQ_OK, "%s: %s", rel, e.msg);
    lmq_model_free(&src);
    ck_assert_msg(rt_load_artefact(path, m, &e) == LMQ_OK, "%s: %s", path, e.msg);
    test_rmtree(dir);
}

/* Collects the generated ids; fails the run with LMQ_E_IO at token fail_at (0: never). */
typedef struct {
    int32_t ids[MAX_IDS];
    int n, fail_at;
} collected;

static lmq_code collect(void *user, int32_t id, lmq_err *err)
{
    collected *c = user;
    if (c->n + 1 == c->fail_at)
        return lmq_fail(err, LMQ_E_IO, "collector full");
    ck_assert_int_lt(c->n, MAX_IDS);
    c->ids[c->n++] = id;
    return LMQ_OK;
}

static rt_gen_opts greedy(int max_new)
{
    return (rt_gen_opts){ .max_new = max_new, .temperature = 0.0f, .top_p = 1.0f };
}

/* Runs rt_generate, which must succeed; out receives the ids. */
static rt_gen_stats generate(const lmq_model *m, const rt_exec *ex, const int32_t *prompt, int n,
                             rt_gen_opts o, collected *out)
{
    memset(out, 0, sizeof *out);
    rt_gen_stats st;
    lmq_err e;
    ck_assert_msg(rt_generate(m, ex, prompt, n, &o, collect, out, &st, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(st.generated, out->n);
    ck_assert_int_eq(st.prompt_tokens, n);
    return st;
}

static void encode(const lmq_model *m, const char *text, int32_t **ids, int *n)
{
    tok_tokenizer *tk;
    lmq_err e;
    ck_assert_msg(tok_open_model(m, &tk, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(rt_gen_prompt(m, tk, text, ids, n, &e) == LMQ_OK, "%s", e.msg);
    tok_free(tk);
}

static json_t *golden_entry(json_t **root, const char *key)
{
    json_error_t je;
    *root = json_load_file(fixture("golden/greedy.json"), 0, &je);
    ck_assert_msg(*root != NULL, "greedy.json: %s", je.text);
    json_t *entry = json_object_get(*root, key);
    ck_assert_ptr_nonnull(entry);
    return entry;
}

static int32_t golden_id(json_t *entry, size_t i)
{
    json_t *ids = json_object_get(entry, "ids");
    ck_assert_uint_lt(i, json_array_size(ids));
    return (int32_t)json_integer_value(json_array_get(ids, i));
}

/* The next token by argmax over logits computed from an empty cache for the whole sequence:
 * independent of the decode path's cache. */
static int32_t argmax_from_scratch(const lmq_model *m, const int32_t *seq, int n)
{
    rt_model rm;
    rt_state *s;
    lmq_err e;
    ck_assert_msg(rt_model_init(&rm, m, &e) == LMQ_OK, "%s", e.msg);
    rt_exec ex = { .pool = NULL, .isa = rt_isa_best() };
    ck_assert_msg(rt_state_create(&rm, &ex, n, &s, &e) == LMQ_OK, "%s", e.msg);
    float *lg = malloc((size_t)m->arch.vocab_size * sizeof *lg);
    ck_assert_msg(rt_forward(s, seq, n, 0, RT_LOGITS_LAST, lg, &e) == LMQ_OK, "%s", e.msg);
    int32_t next = (int32_t)rt_argmax(lg, m->arch.vocab_size);
    free(lg);
    rt_state_free(s);
    rt_model_free(&rm);
    return next;
}

/* ---- against the reference ----------------------------------------------------------- */

/* The golden prompt encoded as rt_gen_prompt does (stories260K: "" → BOS alone) must be the
 * golden ids' start, and 40 greedy tokens their rest; decoded, the golden text. */
static void check_golden(const char *key, const char *rel, int threads)
{
    json_t *root, *entry = golden_entry(&root, key);
    const char *prompt = json_string_value(json_object_get(entry, "prompt"));
    const size_t total = json_array_size(json_object_get(entry, "ids"));
    lmq_model m;
    load_artefact(rel, &m);
    int32_t *ids;
    int n;
    encode(&m, prompt, &ids, &n);
    ck_assert_uint_eq(total, (size_t)n + 40);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(ids[i], golden_id(entry, (size_t)i));

    lmq_pool *pool;
    lmq_err e;
    ck_assert_msg(lmq_pool_create(threads, &pool, &e) == LMQ_OK, "%s", e.msg);
    rt_exec ex = { .pool = pool, .isa = rt_isa_best() };
    collected out;
    rt_gen_stats st = generate(&m, &ex, ids, n, greedy(40), &out);
    ck_assert_int_eq(st.stop, RT_STOP_LENGTH);
    ck_assert_int_eq(out.n, 40);
    ck_assert_int_eq(st.decoded, 39); /* the last token is never fed back */
    ck_assert(st.prefill_s > 0.0 && st.decode_s > 0.0);
    for (int i = 0; i < out.n; i++)
        ck_assert_msg(out.ids[i] == golden_id(entry, (size_t)(n + i)), "%s: new token %d is %d, reference %d", key, i,
                      out.ids[i], golden_id(entry, (size_t)(n + i)));

    /* The whole sequence decoded is the reference's text. */
    int32_t all[MAX_IDS];
    memcpy(all, ids, (size_t)n * sizeof *ids);
    memcpy(all + n, out.ids, (size_t)out.n * sizeof *all);
    tok_tokenizer *tk;
    char *text;
    size_t len;
    ck_assert(tok_open_model(&m, &tk, &e) == LMQ_OK);
    ck_assert_msg(tok_decode(tk, all, (size_t)(n + out.n), &text, &len, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_str_eq(text, json_string_value(json_object_get(entry, "text")));
    free(text);
    tok_free(tk);
    lmq_pool_free(pool);
    free(ids);
    lmq_model_free(&m);
    json_decref(root);
}

START_TEST(golden_stories)
{
    check_golden("stories260K", STORIES, 1);
}
END_TEST

START_TEST(golden_sotu)
{
    check_golden("sotu-gpt2", SOTU, 2);
}
END_TEST

/* ---- greedy and sampling ------------------------------------------------------------- */

/* Temperature 0 is argmax over logits recomputed from scratch at every step; the seed and
 * top-p do not change it, and a nucleus too small for a second token gives the same at any
 * temperature. */
static void check_greedy_is_argmax(const char *rel, const char *prompt, int max_new)
{
    lmq_model m;
    load_artefact(rel, &m);
    int32_t *ids;
    int n;
    encode(&m, prompt, &ids, &n);
    collected g, other;
    rt_gen_stats st = generate(&m, NULL, ids, n, greedy(max_new), &g);
    ck_assert_int_eq(st.stop, RT_STOP_LENGTH);
    int32_t seq[MAX_IDS];
    memcpy(seq, ids, (size_t)n * sizeof *ids);
    for (int i = 0; i < g.n; i++) {
        ck_assert_msg(g.ids[i] == argmax_from_scratch(&m, seq, n + i), "%s: token %d is not the argmax", rel, i);
        seq[n + i] = g.ids[i];
    }
    rt_gen_opts o = { .max_new = max_new, .temperature = 0.0f, .top_p = 0.3f, .seed = 12345 };
    generate(&m, NULL, ids, n, o, &other);
    ck_assert(other.n == g.n && !memcmp(other.ids, g.ids, (size_t)g.n * sizeof *g.ids));
    o = (rt_gen_opts){ .max_new = max_new, .temperature = 1.5f, .top_p = 1e-6f, .seed = 7 };
    generate(&m, NULL, ids, n, o, &other);
    ck_assert(other.n == g.n && !memcmp(other.ids, g.ids, (size_t)g.n * sizeof *g.ids));
    free(ids);
    lmq_model_free(&m);
}

START_TEST(greedy_is_argmax)
{
    check_greedy_is_argmax(STORIES, "Tom had a red ball", 60);
    check_greedy_is_argmax(SOTU, "The state of the Union", 30);
}
END_TEST

/* The same seed gives the same tokens (for any thread count), and they are the tokens a sampler
 * with that seed draws from the model's logits step by step; another seed gives other tokens. */
START_TEST(sampling_by_seed)
{
    lmq_model m;
    load_artefact(STORIES, &m);
    int32_t *ids;
    int n;
    encode(&m, "", &ids, &n);
    const rt_gen_opts o = { .max_new = 60, .temperature = 1.0f, .top_p = 0.9f, .seed = 42 };
    collected a, b;
    generate(&m, NULL, ids, n, o, &a);
    lmq_pool *pool;
    lmq_err e;
    ck_assert(lmq_pool_create(3, &pool, &e) == LMQ_OK);
    rt_exec ex3 = { .pool = pool, .isa = rt_isa_best() };
    generate(&m, &ex3, ids, n, o, &b);
    ck_assert(a.n == b.n && !memcmp(a.ids, b.ids, (size_t)a.n * sizeof *a.ids));

    /* By hand: the sampler fed the logits of the growing sequence. */
    rt_sampler smp;
    ck_assert(rt_sampler_init(&smp, m.arch.vocab_size, o.temperature, o.top_p, o.seed, &e) == LMQ_OK);
    rt_model rm;
    rt_state *s;
    ck_assert(rt_model_init(&rm, &m, &e) == LMQ_OK);
    ck_assert(rt_state_create(&rm, &ex3, 0, &s, &e) == LMQ_OK);
    float *lg = malloc((size_t)m.arch.vocab_size * sizeof *lg);
    ck_assert(rt_forward(s, ids, n, 0, RT_LOGITS_LAST, lg, &e) == LMQ_OK);
    for (int i = 0; i < a.n; i++) {
        ck_assert_int_eq(rt_sample(&smp, lg), a.ids[i]);
        ck_assert(rt_decode(s, a.ids[i], n + i, lg, &e) == LMQ_OK);
    }
    free(lg);
    rt_state_free(s);
    rt_model_free(&rm);
    rt_sampler_free(&smp);

    rt_gen_opts o2 = o;
    o2.seed = 43;
    generate(&m, NULL, ids, n, o2, &b);
    ck_assert_msg(a.n != b.n || memcmp(a.ids, b.ids, (size_t)a.n * sizeof *a.ids) != 0, "seeds 42 and 43 agree");
    collected g;
    generate(&m, NULL, ids, n, greedy(60), &g);
    ck_assert_msg(a.n != g.n || memcmp(a.ids, g.ids, (size_t)a.n * sizeof *a.ids) != 0, "sampled = greedy");
    lmq_pool_free(pool);
    free(ids);
    lmq_model_free(&m);
}
END_TEST

/* ---- the stops ------------------------------------------------------------------------ */

/* stories260K ends its story from BOS with BOS (it was trained with BOS between stories and
 * never emits EOS): the run stops there, the end token is not passed on, and every token up to
 * it is the one a plain argmax loop chooses. */
START_TEST(stop_at_end_of_text)
{
    json_t *root, *entry = golden_entry(&root, "stories260K");
    lmq_model m;
    load_artefact(STORIES, &m);
    const int32_t bos = 1;
    collected out;
    rt_gen_stats st = generate(&m, NULL, &bos, 1, greedy(1000), &out);
    ck_assert_int_eq(st.stop, RT_STOP_END);
    ck_assert_int_eq(st.stop_token, m.arch.bos_id);
    ck_assert_int_gt(out.n, 40);
    ck_assert_int_lt(out.n + 1, m.arch.max_seq);
    ck_assert_int_eq(st.decoded, out.n);
    for (int i = 0; i < 40; i++)
        ck_assert_int_eq(out.ids[i], golden_id(entry, (size_t)i + 1));

    rt_model rm;
    rt_state *s;
    lmq_err e;
    rt_exec ex = { .pool = NULL, .isa = &rt_kernels_scalar };
    ck_assert(rt_model_init(&rm, &m, &e) == LMQ_OK);
    ck_assert(rt_state_create(&rm, &ex, 0, &s, &e) == LMQ_OK);
    float *lg = malloc((size_t)m.arch.vocab_size * sizeof *lg);
    int32_t tok = bos;
    for (int pos = 0; pos <= out.n; pos++) {
        ck_assert(rt_decode(s, tok, pos, lg, &e) == LMQ_OK);
        tok = (int32_t)rt_argmax(lg, m.arch.vocab_size);
        if (pos < out.n) {
            ck_assert_int_eq(tok, out.ids[pos]);
            ck_assert(tok != m.arch.bos_id && tok != m.arch.eos_id);
        }
    }
    ck_assert_int_eq(tok, m.arch.bos_id);
    free(lg);
    rt_state_free(s);
    rt_model_free(&rm);

    /* The model's EOS stops it too: declare the golden continuation's 20th token the EOS; the
     * run must end just before that token first appears. */
    const int32_t stop = golden_id(entry, 20);
    int first = 1;
    while (golden_id(entry, (size_t)first) != stop)
        first++;
    m.arch.eos_id = stop;
    st = generate(&m, NULL, &bos, 1, greedy(1000), &out);
    ck_assert_int_eq(st.stop, RT_STOP_END);
    ck_assert_int_eq(st.stop_token, stop);
    ck_assert_int_eq(out.n, first - 1);
    for (int i = 0; i < out.n; i++)
        ck_assert_int_eq(out.ids[i], golden_id(entry, (size_t)i + 1));
    lmq_model_free(&m);
    json_decref(root);
}
END_TEST

/* A full context ends the run, not an error: sotu-gpt2's 256 positions hold the 12-token golden
 * prompt and 244 new tokens (the first 40 the reference's). Asking for exactly that many stops
 * at the length; a smaller context (stories260K told it has 64) stops at its size. */
START_TEST(stop_at_context)
{
    json_t *root, *entry = golden_entry(&root, "sotu-gpt2");
    lmq_model m;
    load_artefact(SOTU, &m);
    int32_t *ids;
    int n;
    encode(&m, json_string_value(json_object_get(entry, "prompt")), &ids, &n);
    ck_assert_int_eq(n, 12);
    ck_assert_int_eq(m.arch.max_seq, 256);
    collected out;
    rt_gen_stats st = generate(&m, NULL, ids, n, greedy(1000), &out);
    ck_assert_int_eq(st.stop, RT_STOP_CONTEXT);
    ck_assert_int_eq(st.context, 256);
    ck_assert_int_eq(out.n, 256 - 12);
    ck_assert_int_eq(st.decoded, out.n - 1);
    for (int i = 0; i < 40; i++)
        ck_assert_int_eq(out.ids[i], golden_id(entry, (size_t)(n + i)));
    int32_t first[MAX_IDS];
    memcpy(first, out.ids, sizeof first);
    st = generate(&m, NULL, ids, n, greedy(256 - 12), &out);
    ck_assert_int_eq(st.stop, RT_STOP_LENGTH);
    ck_assert(out.n == 256 - 12 && !memcmp(out.ids, first, (size_t)out.n * sizeof *first));
    free(ids);
    lmq_model_free(&m);

    load_artefact(STORIES, &m);
    m.arch.max_seq = 64;
    const int32_t bos = 1;
    st = generate(&m, NULL, &bos, 1, greedy(100), &out);
    ck_assert_int_eq(st.stop, RT_STOP_CONTEXT);
    ck_assert_int_eq(st.context, 64);
    ck_assert_int_eq(out.n, 63);
    /* A prompt one short of the context leaves room for exactly one token. */
    int32_t long_prompt[63];
    long_prompt[0] = bos;
    memcpy(long_prompt + 1, out.ids, 62 * sizeof *long_prompt);
    st = generate(&m, NULL, long_prompt, 63, greedy(100), &out);
    ck_assert_int_eq(st.stop, RT_STOP_CONTEXT);
    ck_assert_int_eq(out.n, 1);
    ck_assert_int_eq(st.decoded, 0);
    lmq_model_free(&m);
    json_decref(root);
}
END_TEST

/* ---- prompts and errors ---------------------------------------------------------------- */

/* llama2.c: "" is BOS alone. GPT-2, which has no BOS in its prompts, starts from <|endoftext|>;
 * a model with neither cannot start from nothing. */
START_TEST(empty_prompts)
{
    lmq_model m;
    load_artefact(STORIES, &m);
    int32_t *ids;
    int n;
    encode(&m, "", &ids, &n);
    ck_assert(n == 1 && ids[0] == 1);
    free(ids);
    lmq_model_free(&m);

    load_artefact(SOTU, &m);
    encode(&m, "", &ids, &n);
    ck_assert(n == 1 && ids[0] == 50256);
    collected out;
    rt_gen_stats st = generate(&m, NULL, ids, n, greedy(5), &out);
    ck_assert_int_eq(st.stop, RT_STOP_LENGTH);
    ck_assert_int_eq(out.n, 5);
    free(ids);
    tok_tokenizer *tk;
    lmq_err e;
    ck_assert(tok_open_model(&m, &tk, &e) == LMQ_OK);
    m.arch.bos_id = -1;
    ck_assert_int_eq(rt_gen_prompt(&m, tk, "", &ids, &n, &e), LMQ_E_ARG);
    ck_assert_ptr_null(ids);
    ck_assert_msg(strstr(e.msg, "empty prompt") != NULL, "%s", e.msg);
    ck_assert_int_eq(rt_gen_prompt(&m, tk, "\xff", &ids, &n, &e), LMQ_E_FORMAT); /* not UTF-8 */
    ck_assert_msg(strstr(e.msg, "prompt") != NULL, "%s", e.msg);
    tok_free(tk);
    lmq_model_free(&m);
}
END_TEST

START_TEST(errors)
{
    lmq_model m;
    load_artefact(STORIES, &m);
    int32_t prompt[600];
    for (int i = 0; i < 600; i++)
        prompt[i] = 300;
    lmq_err e;
    rt_gen_stats st;
    collected out = { 0 };
    rt_gen_opts o = greedy(10);
    ck_assert_int_eq(rt_generate(&m, NULL, prompt, 600, &o, collect, &out, &st, &e), LMQ_E_ARG);
    ck_assert_msg(strstr(e.msg, "600 tokens") && strstr(e.msg, "512 tokens"), "%s", e.msg);
    ck_assert_int_eq(rt_generate(&m, NULL, prompt, 512, &o, collect, &out, &st, &e), LMQ_E_ARG);
    ck_assert_int_eq(rt_generate(&m, NULL, prompt, 0, &o, collect, &out, &st, &e), LMQ_E_ARG);
    o.max_new = 0;
    ck_assert_int_eq(rt_generate(&m, NULL, prompt, 5, &o, collect, &out, &st, &e), LMQ_E_ARG);
    o = (rt_gen_opts){ .max_new = 5, .temperature = -1.0f, .top_p = 1.0f };
    ck_assert_int_eq(rt_generate(&m, NULL, prompt, 5, &o, collect, &out, &st, &e), LMQ_E_ARG);
    o = (rt_gen_opts){ .max_new = 5, .temperature = 1.0f, .top_p = 0.0f };
    ck_assert_int_eq(rt_generate(&m, NULL, prompt, 5, &o, collect, &out, &st, &e), LMQ_E_ARG);
    ck_assert_int_eq(out.n, 0);
    prompt[3] = 512; /* outside the vocabulary */
    o = greedy(5);
    ck_assert_int_eq(rt_generate(&m, NULL, prompt, 5, &o, collect, &out, &st, &e), LMQ_E_ARG);
    ck_assert_msg(strstr(e.msg, "512") != NULL, "%s", e.msg);
    prompt[3] = 300;
    /* The callback's error ends the run and comes back; the tokens before it were counted. */
    out.fail_at = 3;
    o = greedy(10);
    ck_assert_int_eq(rt_generate(&m, NULL, prompt, 5, &o, collect, &out, &st, &e), LMQ_E_IO);
    ck_assert_str_eq(e.msg, "collector full");
    ck_assert_int_eq(out.n, 2);
    ck_assert_int_eq(st.generated, 2);
    /* No callback: the stats alone. */
    ck_assert_int_eq(rt_generate(&m, NULL, prompt, 5, &o, NULL, NULL, &st, &e), LMQ_OK);
    ck_assert_int_eq(st.generated, 10);
    /* Finite weights whose logits overflow: an error, not a token picked from them. */
    lmq_tensor *norm = lmq_model_find(&m, "out_norm.weight");
    ck_assert_int_eq(lmq_tensor_own(norm, &e), LMQ_OK);
    for (int64_t i = 0; i < lmq_tensor_numel(norm); i++)
        norm->data[i] = 3e38f;
    memset(&out, 0, sizeof out);
    ck_assert_int_eq(rt_generate(&m, NULL, prompt, 5, &o, collect, &out, &st, &e), LMQ_E_NUMERIC);
    ck_assert_msg(strstr(e.msg, "generate: non-finite logit") && strstr(e.msg, "at position 5"), "%s", e.msg);
    ck_assert_int_eq(out.n, 0);
    lmq_model_free(&m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("generate");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, golden_stories);
    tcase_add_test(tc, golden_sotu);
    tcase_add_test(tc, greedy_is_argmax);
    tcase_add_test(tc, sampling_by_seed);
    tcase_add_test(tc, stop_at_end_of_text);
    tcase_add_test(tc, stop_at_context);
    tcase_add_test(tc, empty_prompts);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
