/* calibrate/: the statistics lmq calibrate records, against the same quantities computed directly
 * (naively, in one thread) from the linear layers' inputs as the forward pass hands them over; the
 * stats file's invariances (threads, passes) and its refusals (short text, corruption); and
 * SmoothQuant's fold, which must leave the fp32 function as it was. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calibrate/calibrate.h"
#include "calibrate/methods.h"
#include "calibrate/stats.h"
#include "convert/convert.h"
#include "formats/artefact.h"
#include "formats/container.h"
#include "runtime/artefact.h"
#include "runtime/forward.h"
#include "tests/testutil.h"
#include "tokenizer/stream.h"

#define TEXT "text/tinystories-valid.txt"
#define CTX 64
#define WINDOWS 3

/* The fixture as an fp32 artefact in dir. */
static void write_fp32(const char *dir, const char *rel, char *path, size_t size)
{
    snprintf(path, size, "%s/fp32.lmq", dir);
    test_fp32_artefact(rel, path);
}

/* Every input x the forward pass gives one named layer, kept whole. */
typedef struct {
    const char *name;
    float *x;
    int64_t rows;
    int dim;
} capture;

static lmq_code capture_fn(void *ctx, const rt_weight *W, const float *x, int n, lmq_err *err)
{
    (void)err;
    capture *c = ctx;
    if (strcmp(W->name, c->name))
        return LMQ_OK;
    c->dim = W->in;
    c->x = realloc(c->x, (size_t)(c->rows + n) * (size_t)W->in * sizeof *c->x);
    ck_assert_ptr_nonnull(c->x);
    memcpy(c->x + (size_t)c->rows * W->in, x, (size_t)n * (size_t)W->in * sizeof *x);
    c->rows += n;
    return LMQ_OK;
}

/* Runs the first `windows` windows of the text through the artefact at path with the kernel set
 * calibrate runs (so that the activations are the same floats), cap observing (when not NULL);
 * returns the last window's logits (malloc'd) and the vocabulary size. */
static float *run_text(const char *path, capture *cap, int windows, int *vocab)
{
    lmq_model m;
    rt_model rm;
    rt_state *st;
    lmq_err e;
    int32_t *ids;
    size_t n;
    int docs;
    ck_assert_msg(rt_load_artefact(path, &m, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(rt_model_init(&rm, &m, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(tok_stream_read(&m, fixture(TEXT), &ids, &n, &docs, NULL, &e) == LMQ_OK, "%s", e.msg);
    rt_exec ex = { .isa = rt_isa_best(), .observe = cap ? capture_fn : NULL, .observe_ctx = cap };
    ck_assert_msg(rt_state_create(&rm, &ex, CTX, &st, &e) == LMQ_OK, "%s", e.msg);
    *vocab = m.arch.vocab_size;
    float *lg = malloc((size_t)CTX * (size_t)*vocab * sizeof *lg);
    for (int w = 0; w < windows; w++)
        ck_assert_msg(rt_forward(st, ids + w * CTX, CTX, 0, RT_LOGITS_ALL, lg, &e) == LMQ_OK, "%s", e.msg);
    rt_state_free(st);
    rt_model_free(&rm);
    lmq_model_free(&m);
    free(ids);
    return lg;
}

static void calibrate(const char *model, const char *out, int threads, uint64_t gram_bytes)
{
    lmq_err e;
    cal_opts o = { .windows = WINDOWS, .ctx = CTX, .threads = threads, .gram_bytes = gram_bytes };
    cal_summary s;
    ck_assert_msg(cal_calibrate_file(model, fixture(TEXT), out, &o, &s, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(s.windows, WINDOWS);
    ck_assert_uint_eq(s.tokens, WINDOWS * CTX);
}

/* Each record's statistics equal the naive sums over the inputs its first reader saw; a record
 * holds each token once (q, k and v share one input). */
START_TEST(stats_match_direct)
{
    const char *dir = test_tmpdir();
    char model[512], stats[512];
    write_fp32(dir, STORIES, model, sizeof model);
    snprintf(stats, sizeof stats, "%s/stats.lmq", dir);
    calibrate(model, stats, 2, 0);
    static const struct {
        const char *reader;
        int layer;
        lmq_input in;
    } CASES[] = { { "blk.0.attn_q.weight", 0, LMQ_IN_ATTN }, { "blk.2.attn_out.weight", 2, LMQ_IN_ATTN_OUT },
                  { "blk.4.ffn_gate.weight", 4, LMQ_IN_FFN }, { "blk.1.ffn_down.weight", 1, LMQ_IN_FFN_DOWN } };
    cal_stats st;
    lmq_err e;
    ck_assert_msg(cal_stats_open(&st, stats, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(st.man.calib_windows, WINDOWS);
    ck_assert_int_eq(st.man.calib_ctx, CTX);
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        capture cap = { .name = CASES[k].reader };
        int vocab;
        free(run_text(model, &cap, WINDOWS, &vocab));
        ck_assert_int_eq(cap.rows, WINDOWS * CTX);
        const int d = cap.dim;
        float *mx, *ma, *ms;
        double *G;
        ck_assert(cal_stats_vector(&st, CASES[k].layer, CASES[k].in, "max_abs", d, &mx, &e) == LMQ_OK);
        ck_assert(cal_stats_vector(&st, CASES[k].layer, CASES[k].in, "mean_abs", d, &ma, &e) == LMQ_OK);
        ck_assert(cal_stats_vector(&st, CASES[k].layer, CASES[k].in, "mean_sq", d, &ms, &e) == LMQ_OK);
        ck_assert(cal_stats_gram(&st, CASES[k].layer, CASES[k].in, d, &G, &e) == LMQ_OK);
        float *wrong;
        ck_assert_msg(cal_stats_vector(&st, CASES[k].layer, CASES[k].in, "max_abs", d + 1, &wrong, &e) != LMQ_OK,
                      "a record of the wrong width was accepted");
        for (int i = 0; i < d; i++) {
            double peak = 0, sa = 0, sq = 0;
            for (int64_t t = 0; t < cap.rows; t++) {
                const double v = cap.x[t * d + i];
                peak = fmax(peak, fabs(v));
                sa += fabs(v);
                sq += v * v;
            }
            ck_assert_float_eq(mx[i], (float)peak);
            ck_assert_double_eq_tol(ma[i], sa / cap.rows, 1e-6 * (sa / cap.rows) + 1e-30);
            ck_assert_double_eq_tol(ms[i], sq / cap.rows, 1e-6 * (sq / cap.rows) + 1e-30);
            for (int j = 0; j < d; j++) {
                double g = 0;
                for (int64_t t = 0; t < cap.rows; t++)
                    g += (double)cap.x[t * d + i] * cap.x[t * d + j];
                /* stored as fp32: within its rounding */
                ck_assert_msg(fabs(G[(size_t)i * d + j] - g) <= 1e-6 * fabs(g) + 1e-30, "%s gram[%d][%d] %g vs %g",
                              CASES[k].reader, i, j, G[(size_t)i * d + j], g);
            }
        }
        free(mx);
        free(ma);
        free(ms);
        free(G);
        free(cap.x);
    }
    cal_stats_close(&st);
    test_rmtree(dir);
}
END_TEST

static void *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *b = malloc(*size);
    ck_assert_uint_eq(fread(b, 1, *size, f), *size);
    fclose(f);
    return b;
}

/* The same bytes for any thread count and any split of the layers into passes. */
START_TEST(stats_deterministic)
{
    const char *dir = test_tmpdir();
    char model[512], a[512], b[512], c[512];
    write_fp32(dir, STORIES, model, sizeof model);
    snprintf(a, sizeof a, "%s/a.lmq", dir);
    snprintf(b, sizeof b, "%s/b.lmq", dir);
    snprintf(c, sizeof c, "%s/c.lmq", dir);
    calibrate(model, a, 1, 0);
    calibrate(model, b, 2, 0);
    calibrate(model, c, 2, 1); /* one layer per pass */
    size_t na, nb, nc;
    void *ba = slurp(a, &na), *bb = slurp(b, &nb), *bc = slurp(c, &nc);
    ck_assert_msg(na == nb && !memcmp(ba, bb, na), "thread count changed the statistics");
    ck_assert_msg(na == nc && !memcmp(ba, bc, na), "passes changed the statistics");
    free(ba);
    free(bb);
    free(bc);
    test_rmtree(dir);
}
END_TEST

/* A text shorter than one window, a model that is not an artefact, a damaged stats file: clear
 * errors, nothing written. */
START_TEST(stats_refusals)
{
    const char *dir = test_tmpdir();
    char model[512], out[512], text[512], stats[512];
    write_fp32(dir, STORIES, model, sizeof model);
    snprintf(out, sizeof out, "%s/out.lmq", dir);
    snprintf(text, sizeof text, "%s/short.txt", dir);
    FILE *f = fopen(text, "w");
    fputs("Once upon a time there was a cat.\n", f);
    fclose(f);
    lmq_err e;
    cal_opts o = { .windows = 4, .ctx = CTX };
    ck_assert(cal_calibrate_file(model, text, out, &o, NULL, &e) == LMQ_E_ARG);
    ck_assert_msg(strstr(e.msg, "fewer than one window"), "%s", e.msg);
    ck_assert_msg(access(out, F_OK) != 0, "a failed run left %s", out);
    ck_assert(cal_calibrate_file(text, fixture(TEXT), out, &o, NULL, &e) != LMQ_OK);
    ck_assert_msg(access(out, F_OK) != 0, "a failed run left %s", out);

    /* A model is not a stats file; a flipped byte in a Gram matrix is caught when it is read. */
    cal_stats st;
    ck_assert(cal_stats_open(&st, model, &e) != LMQ_OK);
    ck_assert_msg(strstr(e.msg, "not a stats file"), "%s", e.msg);
    snprintf(stats, sizeof stats, "%s/stats.lmq", dir);
    calibrate(model, stats, 2, 0);
    ck_assert(cal_stats_open(&st, stats, &e) == LMQ_OK);
    const lmq_tensor_entry *g = lmq_container_find(&st.c, "stats.blk.3.ffn_in.gram");
    ck_assert_ptr_nonnull(g);
    const uint64_t at = g->offset + 100;
    cal_stats_close(&st);
    size_t n;
    uint8_t *bytes = slurp(stats, &n);
    bytes[at] ^= 0x40;
    f = fopen(stats, "wb");
    fwrite(bytes, 1, n, f);
    fclose(f);
    free(bytes);
    double *G;
    ck_assert(cal_stats_open(&st, stats, &e) == LMQ_OK); /* open reads no tensor data */
    ck_assert(cal_stats_gram(&st, 3, LMQ_IN_FFN, 64, &G, &e) == LMQ_E_CHECKSUM);
    ck_assert_msg(strstr(e.msg, "stats.blk.3.ffn_in.gram"), "%s", e.msg);
    cal_stats_close(&st);
    test_rmtree(dir);
}
END_TEST

/* SmoothQuant's fold with nothing quantised (every tensor stored fp32) keeps the function: the
 * logits move by at most 1e-5 of their largest magnitude, while the folded norms really changed. */
START_TEST(smoothquant_fold_keeps_logits)
{
    static const char *const MODELS[] = { STORIES, SOTU };
    for (int k = 0; k < 2; k++) {
        const char *dir = test_tmpdir();
        char model[512], stats[512], recipe[512], out[512];
        write_fp32(dir, MODELS[k], model, sizeof model);
        snprintf(stats, sizeof stats, "%s/stats.lmq", dir);
        snprintf(recipe, sizeof recipe, "%s/sq.yaml", dir);
        snprintf(out, sizeof out, "%s/sq.lmq", dir);
        lmq_err e;
        cal_opts o = { .windows = 2, .ctx = CTX };
        ck_assert_msg(cal_calibrate_file(model, fixture(TEXT), stats, &o, NULL, &e) == LMQ_OK, "%s", e.msg);
        FILE *f = fopen(recipe, "w");
        fputs("name: sq-fp32\nsmoothquant: {alpha: 0.5}\nrules:\n  - match: \"*\"\n    scheme: fp32\n", f);
        fclose(f);
        ck_assert_msg(cal_quantize_file(model, recipe, stats, out, NULL, &e) == LMQ_OK, "%s", e.msg);
        int vocab;
        float *a = run_text(model, NULL, 1, &vocab), *b = run_text(out, NULL, 1, &vocab);
        double d = 0, mag = 0;
        for (size_t i = 0; i < (size_t)CTX * (size_t)vocab; i++) {
            d = fmax(d, fabs((double)a[i] - b[i]));
            mag = fmax(mag, fabs((double)a[i]));
        }
        printf("%s: SmoothQuant's fold moved the logits by %.3g of their largest magnitude\n", MODELS[k], d / mag);
        ck_assert_msg(d <= 1e-5 * mag, "%s: logits moved by %.3g of %.3g", MODELS[k], d, mag);
        lmq_container c;
        lmq_manifest man;
        ck_assert_int_eq(lmq_container_open_manifest(&c, &man, out, &e), LMQ_OK);
        const lmq_manifest_tensor *norm = lmq_manifest_find(&man, "blk.1.ffn_norm.weight");
        const lmq_manifest_tensor *q = lmq_manifest_find(&man, k ? "blk.1.attn_qkv.weight" : "blk.1.attn_q.weight");
        const lmq_manifest_tensor *down = lmq_manifest_find(&man, "blk.1.ffn_down.weight");
        ck_assert(norm && q && down);
        ck_assert_double_eq(q->calib.smooth_alpha, 0.5);
        ck_assert_msg(strstr(down->calib.note, "not smoothed"), "%s", down->calib.note);
        lmq_manifest_free(&man);
        lmq_container_close(&c);
        lmq_model orig, folded;
        ck_assert(rt_load_artefact(model, &orig, &e) == LMQ_OK && rt_load_artefact(out, &folded, &e) == LMQ_OK);
        const lmq_tensor *n0 = lmq_model_find(&orig, "blk.1.ffn_norm.weight"), *n1 = lmq_model_find(&folded, "blk.1.ffn_norm.weight");
        ck_assert_msg(memcmp(n0->data, n1->data, (size_t)lmq_tensor_numel(n0) * sizeof(float)), "the norm was not folded");
        lmq_model_free(&orig);
        lmq_model_free(&folded);
        free(a);
        free(b);
        test_rmtree(dir);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("calibrate");
    TCase *tc = tcase_create("stats");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, stats_match_direct);
    tcase_add_test(tc, stats_deterministic);
    tcase_add_test(tc, stats_refusals);
    tcase_add_test(tc, smoothquant_fold_keeps_logits);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(suite()); }
