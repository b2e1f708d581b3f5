/* What the calibrated methods recover, on the protocol: each fixture model calibrated on
 * the first documents of its text and scored (P1, ctx 256) on the others, KL against the fp32
 * model. KL gap closed = 1 − KL_method / KL_RTN at the same scheme (int4 g128); the floors are the
 * issue's (a faithful reference closes about 35 % / 30 % on stories260K, 82 % / 38 % on
 * sotu-gpt2). And SmoothQuant on a model built with activation outliers (lmq outliers: 4 channels
 * per block and input scaled by 30, the function unchanged): W8A8 with one activation scale per
 * layer call gets clearly worse there than on the original model, and SmoothQuant (α 0.5) brings
 * its KL back within 2× of the original's. Whole-text scoring: the optimised `make check` only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate/calibrate.h"
#include "calibrate/methods.h"
#include "calibrate/outliers.h"
#include "common/file.h"
#include "convert/convert.h"
#include "formats/artefact.h"
#include "formats/container.h"
#include "quantize/quantize.h"
#include "tests/testutil.h"
#include "tokenizer/stream.h"
#include "verify/run.h"

/* In dir: the fixture model_rel as an fp32 artefact, and its text split into documents
 * [0, calib_docs) to calibrate on and the rest to score, each a P1 text. Returns the number of
 * documents. */
static int setup(const char *dir, const char *model_rel, const char *text_rel, int calib_docs, char *fp32,
                 char *calib, char *eval, size_t size)
{
    snprintf(fp32, size, "%s/fp32.lmq", dir);
    test_fp32_artefact(model_rel, fp32);
    snprintf(calib, size, "%s/calib.txt", dir);
    snprintf(eval, size, "%s/eval.txt", dir);
    lmq_blob b;
    lmq_err e;
    tok_doc *docs;
    int n;
    ck_assert_msg(lmq_blob_open(fixture(text_rel), &b, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(tok_docs_split((const char *)b.data, b.size, &docs, &n, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(calib_docs > 0 && calib_docs < n, "%s has %d documents, not more than %d", text_rel, n, calib_docs);
    for (int part = 0; part < 2; part++) {
        const int first = part ? calib_docs : 0, last = part ? n : calib_docs;
        FILE *f = fopen(part ? eval : calib, "w");
        ck_assert_ptr_nonnull(f);
        for (int i = first; i < last; i++) {
            if (i > first)
                fputs("\n<|endoftext|>\n", f);
            fwrite(b.data + docs[i].off, 1, docs[i].len, f);
        }
        fputc('\n', f);
        fclose(f);
    }
    free(docs);
    lmq_blob_close(&b);
    return n;
}

/* Each recipe applied to model (its statistics in stats) and scored against model on eval. */
static void score(const char *dir, const char *model, const char *stats, const char *const *recipes, int n,
                  const char *eval, vf_result *res)
{
    char paths[4][512], recipe[256];
    const char *cands[4];
    lmq_err e;
    ck_assert_int_le(n, 4);
    for (int i = 0; i < n; i++) {
        if (recipes[i][0] == '/') /* a recipe the test wrote */
            snprintf(recipe, sizeof recipe, "%s", recipes[i]);
        else
            snprintf(recipe, sizeof recipe, "recipes/%s.yaml", recipes[i]);
        snprintf(paths[i], sizeof paths[i], "%s/%d.lmq", dir, i);
        ck_assert_msg(cal_quantize_file(model, recipe, stats, paths[i], NULL, &e) == LMQ_OK, "%s: %s", recipe, e.msg);
        cands[i] = paths[i];
    }
    vf_report r;
    vf_run_opts vo = { .ctx = 256 };
    ck_assert_msg(vf_run(model, cands, n, eval, &vo, &r, &e) == LMQ_OK, "%s", e.msg);
    for (int i = 0; i <= n; i++)
        res[i] = r.rows[i].res;
    free((void *)r.rows);
}

typedef struct {
    const char *recipe;
    double min_closed; /* of the RTN row's KL (0: the RTN row itself) */
} method_row;

static void check_methods(const char *model_rel, const char *text_rel, int calib_docs, const method_row *rows, int n_rows)
{
    const char *dir = test_tmpdir();
    char fp32[512], calib[512], eval[512], stats[512];
    lmq_err e;
    const int docs = setup(dir, model_rel, text_rel, calib_docs, fp32, calib, eval, sizeof fp32);
    snprintf(stats, sizeof stats, "%s/stats.lmq", dir);
    ck_assert_msg(cal_calibrate_file(fp32, calib, stats, NULL, NULL, &e) == LMQ_OK, "%s", e.msg);

    const char *recipes[4];
    vf_result res[5];
    for (int i = 0; i < n_rows; i++)
        recipes[i] = rows[i].recipe;
    score(dir, fp32, stats, recipes, n_rows, eval, res);
    printf("%s on %s (calibrated on documents 1-%d, scored on %d-%d)\n  %-26s %10s %8s %11s %8s\n", model_rel,
           text_rel, calib_docs, calib_docs + 1, docs, "recipe", "PPL", "top-1", "KL", "closed");
    printf("  %-26s %10.4f\n", "fp32", res[0].ppl);
    double kl_rtn = 0;
    for (int i = 0; i < n_rows; i++) {
        const vf_result *q = &res[i + 1];
        if (rows[i].min_closed == 0)
            kl_rtn = q->kl_mean;
        const double closed = kl_rtn > 0 ? 1 - q->kl_mean / kl_rtn : 0;
        printf("  %-26s %10.4f %8.4f %11.4e %7.1f%%\n", rows[i].recipe, q->ppl, q->top1, q->kl_mean, 100 * closed);
        ck_assert_msg(rows[i].min_closed == 0 || closed >= rows[i].min_closed, "%s closes %.1f%% of RTN's KL, want %.0f%%",
                      rows[i].recipe, 100 * closed, 100 * rows[i].min_closed);
    }
    test_rmtree(dir);
}

START_TEST(smoothquant_on_outliers)
{
    const char *dir = test_tmpdir();
    char fp32[512], calib[512], eval[512], outl[512], stats[2][512];
    lmq_err e;
    setup(dir, STORIES, "text/tinystories-valid.txt", 227, fp32, calib, eval, sizeof fp32);
    snprintf(outl, sizeof outl, "%s/outliers.lmq", dir);
    const cal_outlier_opts oo = { .channels = 4, .factor = 30, .seed = 1 };
    ck_assert_msg(cal_outliers_file(fp32, outl, &oo, &e) == LMQ_OK, "%s", e.msg);
    const char *models[2] = { fp32, outl };
    for (int k = 0; k < 2; k++) {
        snprintf(stats[k], sizeof stats[k], "%s/stats-%d.lmq", dir, k);
        ck_assert_msg(cal_calibrate_file(models[k], calib, stats[k], NULL, NULL, &e) == LMQ_OK, "%s", e.msg);
    }
    static const char *const plain[] = { "w8a8-tensor", "w8a8" }, *const both[] = { "w8a8-tensor", "w8a8-smoothquant" };
    vf_result r[3];
    double orig[2], outlier[2];
    score(dir, fp32, stats[0], plain, 2, eval, r);
    orig[0] = r[1].kl_mean;
    orig[1] = r[2].kl_mean;
    score(dir, outl, stats[1], both, 2, eval, r);
    outlier[0] = r[1].kl_mean;
    outlier[1] = r[2].kl_mean;
    printf("stories260K, W8A8 KL (scored on documents 228-379):\n"
           "  original model:  per tensor %.4e, per token %.4e\n"
           "  with outliers (4 channels per block and input, x30): per tensor %.4e, after SmoothQuant a0.5 %.4e\n",
           orig[0], orig[1], outlier[0], outlier[1]);
    ck_assert_msg(outlier[0] > 2 * orig[0], "outliers did not hurt W8A8 per tensor (%.4g vs %.4g)", outlier[0], orig[0]);
    ck_assert_msg(outlier[1] <= 2 * orig[0], "SmoothQuant leaves KL %.4g, above twice the original's %.4g", outlier[1],
                  orig[0]);
    test_rmtree(dir);
}
END_TEST

START_TEST(stories260k)
{
    /* The first 60 % of the 379 documents calibrate; the other 152 score. */
    static const method_row rows[] = { { "int4-g128", 0 }, { "gptq-int4-g128", 0.28 }, { "awq-int4-g128", 0.24 } };
    check_methods(STORIES, "text/tinystories-valid.txt", 227, rows, 3);
}
END_TEST

START_TEST(sotu_gpt2)
{
    /* The first 6 addresses calibrate; the other 4 score. */
    static const method_row rows[] = { { "int4-g128", 0 }, { "gptq-int4-g128", 0.65 }, { "awq-int4-g128", 0.30 } };
    check_methods(SOTU, "text/sotu-eval.txt", 6, rows, 3);
}
END_TEST

/* The three ways of choosing codes on a GGUF block grid (q4_k) on sotu-llama256, whose matrices all
 * have 256·k inputs: per layer, the output error through the Gram matrix (the manifest's) of GPTQ is
 * below the importance-weighted search's and RTN's on every layer, the importance-weighted one below
 * RTN's on most; and end to end, KL on the held-out addresses: GPTQ < imatrix < RTN, GPTQ at most
 * half of RTN's (measured: RTN 2.16e-3, imatrix 2.05e-3, GPTQ 7.48e-4, AWQ 2.06e-3; imatrix below RTN on
 * 21 of the 28 layers). */
START_TEST(sotu_llama256_q4_k)
{
    static const char *const methods[] = { "rtn", "imatrix", "gptq", "awq" };
    const char *dir = test_tmpdir();
    char fp32[512], calib[512], eval[512], stats[512], paths[4][512];
    const char *recipes[4];
    lmq_err e;
    setup(dir, "sotu-llama256/model.bin", "text/sotu-eval.txt", 6, fp32, calib, eval, sizeof fp32);
    snprintf(stats, sizeof stats, "%s/stats.lmq", dir);
    ck_assert_msg(cal_calibrate_file(fp32, calib, stats, NULL, NULL, &e) == LMQ_OK, "%s", e.msg);
    for (int i = 0; i < 4; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/q4_k-%s.yaml", dir, methods[i]);
        FILE *f = fopen(paths[i], "w");
        ck_assert_ptr_nonnull(f);
        fprintf(f, "name: q4_k-%s\nrules:\n  - match: [\"blk.*.attn_*.weight\", \"blk.*.ffn_*.weight\"]\n"
                   "    scheme: q4_k\n    method: %s\n", methods[i], methods[i]);
        fclose(f);
        recipes[i] = paths[i];
    }
    vf_result res[5];
    score(dir, fp32, stats, recipes, 4, eval, res);
    printf("sotu-llama256 q4_k on documents 7-10 (calibrated on 1-6):\n");
    for (int i = 0; i < 4; i++)
        printf("  %-8s PPL %.4f top-1 %.4f KL %.4e\n", methods[i], res[i + 1].ppl, res[i + 1].top1, res[i + 1].kl_mean);
    ck_assert(res[3].kl_mean < res[2].kl_mean && res[2].kl_mean < res[1].kl_mean);
    ck_assert(res[3].kl_mean < 0.5 * res[1].kl_mean);
    ck_assert(res[4].kl_mean < res[1].kl_mean);

    /* Per layer, from the manifests: each records the output error of its bytes and of RTN's. */
    lmq_container c[2];
    lmq_manifest m[2];
    for (int k = 0; k < 2; k++) { /* imatrix, gptq */
        char art[512];
        snprintf(art, sizeof art, "%s/%d.lmq", dir, k + 1);
        ck_assert_msg(lmq_container_open_manifest(&c[k], &m[k], art, &e) == LMQ_OK, "%s", e.msg);
    }
    int layers = 0, imatrix_better = 0;
    for (int t = 0; t < m[0].n_tensors; t++) {
        const lmq_manifest_tensor *im = &m[0].tensors[t], *gq = lmq_manifest_find(&m[1], im->name);
        if (im->calib.method != LMQ_METHOD_IMATRIX)
            continue;
        ck_assert_ptr_nonnull(gq);
        ck_assert_int_eq(gq->calib.method, LMQ_METHOD_GPTQ);
        ck_assert_msg(gq->calib.out_error < im->calib.out_error && im->calib.out_error_rtn > 0,
                      "%s: GPTQ %g, imatrix %g, RTN %g", im->name, gq->calib.out_error, im->calib.out_error,
                      im->calib.out_error_rtn);
        layers++;
        imatrix_better += im->calib.out_error < im->calib.out_error_rtn;
    }
    printf("  imatrix below RTN on %d of %d layers\n", imatrix_better, layers);
    ck_assert_int_eq(layers, 28);
    ck_assert_int_gt(2 * imatrix_better, layers);
    for (int k = 0; k < 2; k++) {
        lmq_manifest_free(&m[k]);
        lmq_container_close(&c[k]);
    }
    test_rmtree(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("calibrated methods");
    TCase *tc = tcase_create("kl gap closed");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, stories260k);
    tcase_add_test(tc, sotu_gpt2);
    tcase_add_test(tc, smoothquant_on_outliers);
    suite_add_tcase(s, tc);
    /* Minutes of calibration and scoring: make check-golden (LMQ_GOLDEN=all) runs it; make check has
     * GPTQ, imatrix and AWQ on every block type in test_gptq_awq. */
    const char *g = getenv("LMQ_GOLDEN");
    if (g && !strcmp(g, "all")) {
        TCase *blocks = tcase_create("gguf blocks");
        tcase_set_timeout(blocks, 900);
        tcase_add_test(blocks, sotu_llama256_q4_k);
        suite_add_tcase(s, blocks);
    }
    return run_suite(s);
}
