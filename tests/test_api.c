/* The public API (include/lmq.h) as a caller sees it: codes and messages as values, handles,
 * and the audit's problems on a damaged copy. The end-to-end use from an installed copy is
 * tests/integration/install.sh. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/safetensors.h"
#include "include/lmq.h"
#include "tests/testutil.h"

static char fp[1024], dir[512];

static void setup(void)
{
    snprintf(dir, sizeof dir, "%s", test_tmpdir());
    snprintf(fp, sizeof fp, "%s/s.lmq", dir);
    lmq_status st;
    ck_assert_msg(lmq_convert_file(fixture("stories260K-hf"), fp, NULL, &st) == LMQ_STATUS_OK, "%s", st.message);
    ck_assert_int_eq(st.code, LMQ_STATUS_OK);
    ck_assert_str_eq(st.message, "");
}

static void teardown(void)
{
    test_rmtree(dir);
}

START_TEST(errors_are_values)
{
    lmq_status st;
    char out[1024];
    snprintf(out, sizeof out, "%s/x.lmq", dir);
    ck_assert_int_eq(lmq_convert_file("/nonexistent/model.bin", out, NULL, &st), LMQ_STATUS_IO);
    ck_assert_int_eq(st.code, LMQ_STATUS_IO);
    ck_assert_ptr_nonnull(strstr(st.message, "/nonexistent/model.bin"));
    ck_assert_str_eq(lmq_status_name(st.code), "i/o error");
    ck_assert_int_ne(access(out, F_OK), 0);
    /* st may be NULL: the code alone. */
    ck_assert_int_eq(lmq_convert_file("/nonexistent/model.bin", out, NULL, NULL), LMQ_STATUS_IO);
    /* An output that is an input is refused before anything runs. */
    ck_assert_int_eq(lmq_quantize_file(fp, "recipes/int4-g32.yaml", fp, NULL, &st), LMQ_STATUS_ARG);
    ck_assert_int_eq(lmq_quantize_file(fp, "/nonexistent/r.yaml", out, NULL, &st), LMQ_STATUS_IO);
    ck_assert_ptr_nonnull(strstr(st.message, "/nonexistent/r.yaml"));
    ck_assert_int_ne(access(out, F_OK), 0);
    ck_assert_str_eq(lmq_status_name(12345), "unknown error");
    ck_assert_int_eq(strncmp(lmq_version(), "lmq ", 4), 0);
}
END_TEST

/* The artefact handle sees every tensor of the checkpoint, and the carried tokenizer. */
START_TEST(artefact_handle)
{
    lmq_status st;
    lmq_artefact *a;
    ck_assert_int_eq(lmq_artefact_open(fp, &a, &st), LMQ_STATUS_OK);
    st_file f;
    lmq_err err;
    ck_assert_int_eq(st_open(fixture("stories260K-hf/model.safetensors"), &f, &err), LMQ_OK);
    ck_assert_int_eq(lmq_artefact_tensors(a), f.n_tensors + 1);
    st_close(&f);
    size_t n;
    const char *man = lmq_artefact_manifest(a, &n);
    ck_assert_uint_gt(n, 0);
    char *text = strndup(man, n);
    ck_assert_ptr_nonnull(strstr(text, "tokenizer"));
    free(text);
    lmq_artefact_close(a);
    lmq_artefact_close(NULL);
    ck_assert_int_eq(lmq_artefact_open("/nonexistent.lmq", &a, &st), LMQ_STATUS_IO);
    ck_assert_ptr_null(a);
}
END_TEST

/* A clean artefact has no problems; a copy with one byte of tensor data changed has a checksum
 * problem naming a tensor; a missing file one "open" problem. */
START_TEST(audit_reports_problems)
{
    lmq_status st;
    lmq_audit_report *r;
    ck_assert_int_eq(lmq_audit(fp, &r, &st), LMQ_STATUS_OK);
    ck_assert_int_eq(lmq_audit_problems(r), 0);
    lmq_audit_problem p;
    ck_assert_int_eq(lmq_audit_problem_get(r, 0, &p), LMQ_STATUS_ARG);
    lmq_audit_free(r);

    char bad[1024];
    snprintf(bad, sizeof bad, "%s/bad.lmq", dir);
    FILE *in = fopen(fp, "rb"), *out = fopen(bad, "wb");
    ck_assert(in && out);
    fseek(in, 0, SEEK_END);
    const long size = ftell(in);
    rewind(in);
    char *bytes = malloc((size_t)size);
    ck_assert_int_eq(fread(bytes, 1, (size_t)size, in), size);
    bytes[size / 2] ^= 0x40; /* inside the tensor data (the index and manifest are at the end) */
    ck_assert_int_eq(fwrite(bytes, 1, (size_t)size, out), size);
    fclose(in);
    fclose(out);
    free(bytes);
    ck_assert_int_eq(lmq_audit(bad, &r, &st), LMQ_STATUS_OK);
    ck_assert_int_ge(lmq_audit_problems(r), 1);
    int tensor_checksum = 0;
    for (int i = 0; i < lmq_audit_problems(r); i++) {
        ck_assert_int_eq(lmq_audit_problem_get(r, i, &p), LMQ_STATUS_OK);
        tensor_checksum |= !strcmp(p.check, "checksum") && p.tensor && p.code == LMQ_STATUS_CHECKSUM;
    }
    ck_assert(tensor_checksum);
    lmq_audit_free(r);

    ck_assert_int_eq(lmq_audit("/nonexistent.lmq", &r, &st), LMQ_STATUS_OK);
    ck_assert_int_eq(lmq_audit_problems(r), 1);
    ck_assert_int_eq(lmq_audit_problem_get(r, 0, &p), LMQ_STATUS_OK);
    ck_assert_str_eq(p.check, "open");
    ck_assert_int_eq(p.code, LMQ_STATUS_IO);
    ck_assert_ptr_null(p.tensor);
    lmq_audit_free(r);
    lmq_audit_free(NULL);
}
END_TEST

/* The reference against itself: one row per artefact, the same perplexity, no divergence. */
START_TEST(verify_rows)
{
    char text[1024];
    snprintf(text, sizeof text, "%s/t.txt", dir);
    FILE *f = fopen(text, "w");
    fputs("Once upon a time there was a little girl named Lily. She liked to play in the park.\n", f);
    fclose(f);
    lmq_status st;
    lmq_verify_report *r;
    const char *cands[] = { fp };
    ck_assert_msg(lmq_verify(fp, cands, 1, text, &(lmq_verify_options){ .ctx = 16, .threads = 1, .bandwidth_gbps = 1 },
                             &r, &st) == LMQ_STATUS_OK, "%s", st.message);
    ck_assert_int_eq(lmq_verify_rows(r), 2);
    lmq_verify_row a, b;
    ck_assert_int_eq(lmq_verify_row_get(r, 0, &a), LMQ_STATUS_OK);
    ck_assert_int_eq(lmq_verify_row_get(r, 1, &b), LMQ_STATUS_OK);
    ck_assert_int_eq(lmq_verify_row_get(r, 2, &b), LMQ_STATUS_ARG);
    ck_assert_int_eq(lmq_verify_row_get(r, -1, &b), LMQ_STATUS_ARG);
    ck_assert_str_eq(a.path, fp);
    ck_assert(a.ppl > 1 && a.ppl == b.ppl);
    ck_assert(b.top1 == 1 && b.kl_mean == 0);
    ck_assert(a.linear_bpw == 32);
    lmq_verify_free(r);
    ck_assert_int_eq(lmq_verify(fp, cands, 1, "/nonexistent.txt", NULL, &r, &st), LMQ_STATUS_IO);
    ck_assert_ptr_null(r);

    /* The device: cpu is the default; cuda runs where it can (the same perplexity within 0.1 %)
     * and says why not elsewhere; any other name is refused by name. */
    lmq_verify_options o = { .ctx = 16, .threads = 1, .bandwidth_gbps = 1, .device = "cpu" };
    ck_assert_msg(lmq_verify(fp, NULL, 0, text, &o, &r, &st) == LMQ_STATUS_OK, "%s", st.message);
    ck_assert_int_eq(lmq_verify_row_get(r, 0, &b), LMQ_STATUS_OK);
    ck_assert(b.ppl == a.ppl);
    lmq_verify_free(r);
    o.device = "cuda";
    const int cuda = lmq_verify(fp, NULL, 0, text, &o, &r, &st);
    if (cuda == LMQ_STATUS_OK) {
        ck_assert_int_eq(lmq_verify_row_get(r, 0, &b), LMQ_STATUS_OK);
        ck_assert_msg(fabs(b.ppl / a.ppl - 1) < 1e-3, "cuda PPL %.6f, cpu %.6f", b.ppl, a.ppl);
        lmq_verify_free(r);
    } else {
        ck_assert_int_eq(cuda, LMQ_STATUS_UNSUPPORTED);
        ck_assert_msg(strstr(st.message, "CUDA") || strstr(st.message, "cuda"), "%s", st.message);
        ck_assert_ptr_null(r);
    }
    o.device = "abacus";
    ck_assert_int_eq(lmq_verify(fp, NULL, 0, text, &o, &r, &st), LMQ_STATUS_ARG);
    ck_assert_msg(strstr(st.message, "abacus"), "%s", st.message);
    ck_assert_ptr_null(r);
}
END_TEST

START_TEST(export_refuses_what_the_format_cannot_hold)
{
    char q[1024], out[1024];
    snprintf(q, sizeof q, "%s/e.lmq", dir);
    snprintf(out, sizeof out, "%s/ct", dir);
    lmq_status st;
    ck_assert_int_eq(lmq_quantize_file(fp, "recipes/emb-int4-g32.yaml", q, &(lmq_quantize_options){ .threads = 1 },
                                       &st), LMQ_STATUS_OK);
    ck_assert_int_eq(lmq_export_compressed_tensors(q, out, &st), LMQ_STATUS_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(st.message, "tok_embd.weight"));
    ck_assert_int_eq(lmq_export_compressed_tensors(fp, out, &st), LMQ_STATUS_OK);
}
END_TEST

/* int4 g64 has no GGUF type: refused naming a tensor, or re-quantised on request; the file
 * written then imports again. */
START_TEST(export_gguf_refuses_or_requantizes)
{
    char q[1024], g[1024], back[1024];
    snprintf(q, sizeof q, "%s/g64.lmq", dir);
    snprintf(g, sizeof g, "%s/g64.gguf", dir);
    snprintf(back, sizeof back, "%s/back.lmq", dir);
    lmq_status st;
    ck_assert_int_eq(lmq_quantize_file(fp, "recipes/int4-g64.yaml", q, &(lmq_quantize_options){ .threads = 1 },
                                       &st), LMQ_STATUS_OK);
    ck_assert_int_eq(lmq_export_gguf(q, g, 0, &st), LMQ_STATUS_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(st.message, "blk.0."));
    ck_assert_int_eq(access(g, F_OK), -1);
    ck_assert_msg(lmq_export_gguf(q, g, 1, &st) == LMQ_STATUS_OK, "%s", st.message);
    ck_assert_msg(lmq_convert_file(g, back, NULL, &st) == LMQ_STATUS_OK, "%s", st.message);
    ck_assert_int_eq(lmq_export_gguf(q, q, 1, &st), LMQ_STATUS_ARG);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, errors_are_values);
    tcase_add_test(tc, artefact_handle);
    tcase_add_test(tc, audit_reports_problems);
    tcase_add_test(tc, export_gguf_refuses_or_requantizes);
    tcase_add_test(tc, verify_rows);
    tcase_add_test(tc, export_refuses_what_the_format_cannot_hold);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
