/* verify/gate, verify/record, verify/ref_logits: gate parsing and evaluation against hand-made
 * rows; verification records written by a real verify run of stories260K and checked against
 * requirements, a corrupted record, an artefact changed by one byte or replaced, another text;
 * saved reference logits that round-trip every bit pattern and give bit-for-bit the metrics of
 * running the reference, and that are refused for another text, ctx, reference or when damaged. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/file.h"
#include "quantize/quantize.h"
#include "verify/gate.h"
#include "verify/record.h"
#include "verify/ref_logits.h"
#include "verify/run.h"
#include "tests/testutil.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    ck_assert(fread(buf, 1, (size_t)len, f) == (size_t)len);
    buf[len] = '\0';
    fclose(f);
    if (n)
        *n = (size_t)len;
    return buf;
}

static void spill(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "%s", path);
    ck_assert(fwrite(p, 1, n, f) == n);
    fclose(f);
}

static void flip_byte(const char *path, size_t at)
{
    size_t n;
    char *b = slurp(path, &n);
    ck_assert(at < n);
    b[at] ^= 0x5a;
    spill(path, b, n);
    free(b);
}

/* The models and text a verify run needs, in a fresh folder. */
typedef struct {
    char dir[64], ref[128], q8[128], q4[128], text[128], text2[128], logits[128];
} bench;

static void bench_make(bench *b)
{
    snprintf(b->dir, sizeof b->dir, "%s", test_tmpdir());
    snprintf(b->ref, sizeof b->ref, "%s/s.lmq", b->dir);
    snprintf(b->q8, sizeof b->q8, "%s/q8.lmq", b->dir);
    snprintf(b->q4, sizeof b->q4, "%s/q4.lmq", b->dir);
    snprintf(b->text, sizeof b->text, "%s/t.txt", b->dir);
    snprintf(b->text2, sizeof b->text2, "%s/t2.txt", b->dir);
    snprintf(b->logits, sizeof b->logits, "%s/ref.logits", b->dir);
    test_fp32_artefact(STORIES, b->ref);
    lmq_err e;
    ck_assert_msg(q_quantize_file(b->ref, "recipes/int8-channel.yaml", b->q8, NULL, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(q_quantize_file(b->ref, "recipes/int4-g32.yaml", b->q4, NULL, &e) == LMQ_OK, "%s", e.msg);
    /* A few thousand tokens of the validation text; the second text differs in one byte. */
    size_t n;
    char *t = slurp(fixture("text/tinystories-valid.txt"), &n);
    ck_assert(n > 12000);
    spill(b->text, t, 12000);
    t[5000] = t[5000] == 'a' ? 'b' : 'a';
    spill(b->text2, t, 12000);
    free(t);
}

static lmq_code verify(const char *ref, const char *cand1, const char *cand2, const char *text,
                       int ctx, const char *save, const char *load, vf_report *r, lmq_err *e)
{
    const char *cands[] = { cand1, cand2 };
    /* A given bandwidth skips the probe, which has no bearing here. */
    vf_run_opts o = { .ctx = ctx, .threads = 2, .bandwidth_gbps = 10, .save_ref_logits = save, .ref_logits = load };
    return vf_run(ref, cands, cand2 ? 2 : 1, text, &o, r, e);
}

/* ---- gates -------------------------------------------------------------------------------- */

START_TEST(gate_syntax)
{
    const struct {
        const char *s, *metric;
        double limit;
    } good[] = { { "kl_mean<=0.01", "kl_mean", 0.01 },  { " top1 >= 0.98 ", "top1", 0.98 },
                 { "dppl_pct<1", "dppl_pct", 1.0 },      { "ppl>2e0", "ppl", 2.0 },
                 { "kl_p99 <= -0", "kl_p99", 0.0 },      { "changed_tensors>=3", "changed_tensors", 3.0 } };
    lmq_err e;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        vf_gate g;
        ck_assert_msg(vf_gate_parse(good[i].s, &g, &e) == LMQ_OK, "%s: %s", good[i].s, e.msg);
        ck_assert_str_eq(g.metric, good[i].metric);
        ck_assert(g.limit == good[i].limit);
        ck_assert_str_eq(g.text, good[i].s);
    }
    const struct {
        const char *s, *says;
    } bad[] = { { "kl<=0.01", "unknown metric 'kl'" },   { "artefact<=1", "unknown metric 'artefact'" },
                { "is_reference>=0", "unknown metric" },  { "kl_mean=0.01", "operator" },
                { "kl_mean==0.01", "operator" }, { "kl_mean<=", "not a finite number" },
                { "kl_mean<=abc", "not a finite number" }, { "kl_mean<=inf", "not a finite number" },
                { "kl_mean<=0.01x", "not a finite number" }, { "<=0.1", "expected METRIC OP LIMIT" },
                { "", "expected METRIC OP LIMIT" } };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vf_gate g;
        ck_assert_msg(vf_gate_parse(bad[i].s, &g, &e) == LMQ_E_ARG, "%s accepted", bad[i].s);
        ck_assert_msg(strstr(e.msg, bad[i].says), "%s: %s", bad[i].s, e.msg);
        ck_assert_msg(strstr(e.msg, "gate '"), "%s: the message names no gate: %s", bad[i].s, e.msg);
    }
    /* An unknown metric's message lists the metrics there are. */
    vf_gate g;
    ck_assert(vf_gate_parse("kl<=1", &g, &e) == LMQ_E_ARG);
    ck_assert_msg(strstr(e.msg, "kl_mean") && strstr(e.msg, "top1") && strstr(e.msg, "dppl_pct"), "%s", e.msg);
}
END_TEST

START_TEST(gate_holds)
{
    const struct {
        const char *gate;
        double value;
        int holds;
    } cases[] = { { "kl_mean<=0.01", 0.01, 1 }, { "kl_mean<0.01", 0.01, 0 },  { "kl_mean<=0.01", 0.0100001, 0 },
                  { "top1>=0.98", 0.98, 1 },     { "top1>0.98", 0.98, 0 },     { "top1>0.98", 0.99, 1 },
                  { "dppl_pct<=1", -3, 1 },      { "dppl_pct>=-1", -3, 0 } };
    lmq_err e;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vf_gate g;
        ck_assert(vf_gate_parse(cases[i].gate, &g, &e) == LMQ_OK);
        json_t *row = json_pack("{s:f}", g.metric, cases[i].value);
        ck_assert_msg(vf_gate_holds(&g, row) == cases[i].holds, "%s on %g", cases[i].gate, cases[i].value);
        json_decref(row);
    }
    /* A row without the metric, or with it not a number, fails. */
    vf_gate g;
    ck_assert(vf_gate_parse("kl_mean<=1", &g, &e) == LMQ_OK);
    json_t *row = json_pack("{s:f, s:s}", "top1", 0.5, "kl_mean", "0");
    ck_assert(!vf_gate_holds(&g, row));
    json_decref(row);
}
END_TEST

/* Gates applied to a report: the failed bits, the JSON's pass / failed_gates, the table's column. */
START_TEST(gate_report)
{
    vf_row rows[3] = { { .path = "dir/ref.lmq" }, { .path = "dir/a.lmq" }, { .path = "dir/b.lmq" } };
    rows[1].res = (vf_result){ .kl_mean = 0.005, .top1 = 0.99, .positions = 10, .windows = 1 };
    rows[2].res = (vf_result){ .kl_mean = 0.02, .top1 = 0.97, .positions = 10, .windows = 1 };
    vf_gate g[2];
    lmq_err e;
    ck_assert(vf_gate_parse("kl_mean<=0.01", &g[0], &e) == LMQ_OK);
    ck_assert(vf_gate_parse("top1>=0.98", &g[1], &e) == LMQ_OK);
    vf_report r = { .text = "t.txt", .ctx = 8, .isa = "scalar", .rows = rows, .n_rows = 3, .gates = g, .n_gates = 2 };
    vf_report_gate(&r);
    ck_assert_uint_eq(rows[0].gates_failed, 0);
    ck_assert_uint_eq(rows[1].gates_failed, 0);
    ck_assert_uint_eq(rows[2].gates_failed, 3);
    ck_assert(!vf_report_passed(&r));

    json_t *ref = vf_row_json(&r, 0), *a = vf_row_json(&r, 1), *b = vf_row_json(&r, 2);
    ck_assert(json_is_true(json_object_get(ref, "is_reference")));
    ck_assert_ptr_null(json_object_get(ref, "pass"));
    ck_assert_str_eq(json_string_value(json_object_get(a, "artefact")), "a.lmq"); /* as the table names it */
    ck_assert_str_eq(json_string_value(json_object_get(a, "path")), "dir/a.lmq");
    ck_assert(json_is_false(json_object_get(a, "is_reference")));
    ck_assert(json_is_true(json_object_get(a, "pass")));
    ck_assert_int_eq(json_array_size(json_object_get(a, "failed_gates")), 0);
    ck_assert(json_is_false(json_object_get(b, "pass")));
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(b, "failed_gates"), 1)), "top1>=0.98");
    json_decref(ref);
    json_decref(a);
    json_decref(b);

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    vf_report_table(f, &r);
    fclose(f);
    ck_assert_msg(strstr(buf, "gates\n"), "%s", buf);
    ck_assert_msg(strstr(buf, "  ref\n") && strstr(buf, "  PASS\n") && strstr(buf, "  FAIL kl_mean<=0.01 top1>=0.98\n"),
                  "%s", buf);
    free(buf);
    /* Without gates: no column, and every row passes. */
    r.n_gates = 0;
    rows[2].gates_failed = 0;
    f = open_memstream(&buf, &len);
    vf_report_table(f, &r);
    fclose(f);
    ck_assert_msg(!strstr(buf, "gates") && !strstr(buf, "PASS"), "%s", buf);
    ck_assert(vf_report_passed(&r));
    free(buf);
}
END_TEST

/* ---- records ------------------------------------------------------------------------------ */

static vr_require no_requirement(void)
{
    return (vr_require){ .kl_mean_max = NAN, .top1_min = NAN, .dppl_pct_max = NAN };
}

static void expect_refusal(const char *artefact, const vr_require *req, lmq_code code, const char *says)
{
    lmq_err e;
    lmq_code c = vr_require_check(artefact, req, &e);
    ck_assert_msg(c == code, "%s: got %s (%s), expected %s", artefact, lmq_code_name(c), c ? e.msg : "",
                  lmq_code_name(code));
    ck_assert_msg(strstr(e.msg, says), "message lacks '%s': %s", says, e.msg);
    ck_assert_msg(strstr(e.msg, VR_SUFFIX) || code == LMQ_E_ARG, "message names no record: %s", e.msg);
}

START_TEST(records)
{
    bench b;
    bench_make(&b);
    vf_report r;
    lmq_err e;
    ck_assert_msg(verify(b.ref, b.q8, b.q4, b.text, 64, NULL, NULL, &r, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(r.n_rows, 3);
    /* The checksums the report binds, computed here from the files' bytes. */
    size_t n;
    char *t = slurp(b.text, &n);
    ck_assert(r.text_checksum == XXH3_64bits(t, n));
    free(t);
    char *q = slurp(b.q8, &n);
    ck_assert(r.rows[1].file_checksum == XXH3_64bits(q, n - 16)); /* the footer's checksum covers all but 16 bytes */
    free(q);
    for (int i = 1; i < 3; i++)
        ck_assert_msg(vr_write(&r, i, &e) == LMQ_OK, "%s", e.msg);
    char rec[256];
    ck_assert(vr_path(b.q8, rec, sizeof rec, &e) == LMQ_OK);
    ck_assert_str_eq(rec + strlen(b.q8), ".verify.json");

    /* The record's own checksum is that of its canonical text without it. */
    json_error_t je;
    json_t *doc = json_load_file(rec, 0, &je);
    ck_assert_msg(doc != NULL, "%s", je.text);
    uint64_t stated;
    ck_assert(vf_hex_parse(json_string_value(json_object_get(doc, "record_checksum")), &stated));
    json_object_del(doc, "record_checksum");
    char *canon = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    ck_assert(XXH3_64bits(canon, strlen(canon)) == stated);
    free(canon);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(doc, "protocol"), "ctx")), 64);
    ck_assert(json_real_value(json_object_get(json_object_get(doc, "metrics"), "kl_mean")) == r.rows[1].res.kl_mean);
    json_decref(doc);

    /* Requirements met and not met. */
    const double kl = r.rows[1].res.kl_mean, top1 = r.rows[1].res.top1, dppl = r.rows[1].dppl_pct;
    ck_assert(kl > 0 && top1 < 1);
    vr_require req = no_requirement();
    ck_assert_msg(vr_require_check(b.q8, &req, &e) == LMQ_OK, "%s", e.msg);
    req = (vr_require){ .kl_mean_max = kl, .top1_min = top1, .dppl_pct_max = dppl };
    ck_assert_msg(vr_require_check(b.q8, &req, &e) == LMQ_OK, "%s", e.msg);
    char hex[17], upper[17];
    vf_hex(r.text_checksum, hex);
    for (int i = 0; i < 17; i++)
        upper[i] = (char)(hex[i] >= 'a' && hex[i] <= 'f' ? hex[i] - 32 : hex[i]);
    req = no_requirement();
    req.text_checksum = upper;
    ck_assert_msg(vr_require_check(b.q8, &req, &e) == LMQ_OK, "%s", e.msg);
    req = no_requirement();
    req.kl_mean_max = kl * 0.5;
    expect_refusal(b.q8, &req, LMQ_E_RECIPE, "KL mean");
    req = no_requirement();
    req.top1_min = nextafter(top1, 2.0);
    expect_refusal(b.q8, &req, LMQ_E_RECIPE, "top-1 agreement");
    req = no_requirement();
    req.dppl_pct_max = dppl - 0.001;
    expect_refusal(b.q8, &req, LMQ_E_RECIPE, "dPPL");
    /* The int4 artefact's record holds its own, larger KL. */
    req = no_requirement();
    req.kl_mean_max = kl * 1.01;
    expect_refusal(b.q4, &req, LMQ_E_RECIPE, "q4.lmq.verify.json: KL mean");
    /* Another text; a checksum that is not one. */
    char other[17];
    t = slurp(b.text2, &n);
    vf_hex(XXH3_64bits(t, n), other);
    free(t);
    req = no_requirement();
    req.text_checksum = other;
    expect_refusal(b.q8, &req, LMQ_E_RECIPE, "another text");
    req.text_checksum = "12345";
    expect_refusal(b.q8, &req, LMQ_E_ARG, "not 16 hex digits");

    /* A corrupt record: one digit of a metric changed. */
    char *text = slurp(rec, &n);
    char *at = strstr(text, "\"kl_mean\": ");
    ck_assert(at);
    at += strlen("\"kl_mean\": ") + 3;
    *at = *at == '1' ? '2' : '1';
    char bad[300];
    snprintf(bad, sizeof bad, "%s/x.lmq", b.dir);
    char bad_rec[320];
    snprintf(bad_rec, sizeof bad_rec, "%s%s", bad, VR_SUFFIX);
    spill(bad_rec, text, n);
    free(text);
    ck_assert(symlink(b.q8, bad) == 0);
    req = no_requirement();
    expect_refusal(bad, &req, LMQ_E_CHECKSUM, "corrupt");
    spill(bad_rec, "[]", 2);
    expect_refusal(bad, &req, LMQ_E_FORMAT, "not a version 1 verification record");
    spill(bad_rec, "{", 1);
    expect_refusal(bad, &req, LMQ_E_FORMAT, "not a verification record");
    unlink(bad_rec);
    expect_refusal(bad, &req, LMQ_E_IO, "no verification record for");

    /* Stale: the artefact replaced by another valid one; back as verified it passes again; then
     * one byte of it changed. */
    size_t n8, n4;
    char *q8 = slurp(b.q8, &n8), *q4 = slurp(b.q4, &n4);
    spill(b.q8, q4, n4);
    expect_refusal(b.q8, &req, LMQ_E_RECIPE, "stale");
    spill(b.q8, q8, n8);
    ck_assert_msg(vr_require_check(b.q8, &req, &e) == LMQ_OK, "%s", e.msg);
    flip_byte(b.q8, 4096);
    expect_refusal(b.q8, &req, LMQ_E_CHECKSUM, "changed since it was verified");
    free(q8);
    free(q4);
    free((void *)r.rows);
    test_rmtree(b.dir);
}
END_TEST

/* ---- saved reference logits ----------------------------------------------------------------- */

/* Every float bit pattern (signed zeros, subnormals, infinities, NaN payloads) comes back as is. */
START_TEST(logits_round_trip)
{
    const char *dir = test_tmpdir();
    char path[128];
    snprintf(path, sizeof path, "%s/l.bin", dir);
    vf_logits_head h = { .ctx = 5, .vocab = 33, .windows = 3, .tokens = 17, .tokens_checksum = 7, .text_checksum = 9 };
    snprintf(h.ref.path, sizeof h.ref.path, "ref.lmq");
    snprintf(h.ref.scheme, sizeof h.ref.scheme, "fp32");
    h.ref.file_checksum = 0xfedcba9876543210u;
    h.ref.mib = 1.5;
    const size_t n = 4 * 33;
    uint32_t bits[3][4 * 33];
    uint64_t st = 42;
    for (int w = 0; w < 3; w++)
        for (size_t i = 0; i < n; i++)
            bits[w][i] = (uint32_t)(test_uniform(&st) * 4294967296.0);
    bits[0][0] = 0x80000000u; /* -0 */
    bits[0][1] = 0x00000001u; /* the smallest subnormal */
    bits[0][2] = 0x7f800000u; /* +inf */
    bits[0][3] = 0x7fc12345u; /* a NaN with a payload */
    lmq_err e;
    vf_logits_file *f;
    ck_assert_msg(vf_logits_create(path, &h, &f, &e) == LMQ_OK, "%s", e.msg);
    float win[4 * 33];
    memcpy(win, bits[1], sizeof win);
    ck_assert_int_eq(vf_logits_save(f, 1, win, n, &e), LMQ_E_ARG); /* out of order */
    for (int w = 0; w < 3; w++) {
        memcpy(win, bits[w], sizeof win);
        ck_assert_msg(vf_logits_save(f, w, win, n, &e) == LMQ_OK, "%s", e.msg);
    }
    uint64_t sum_w, sum_r;
    ck_assert_msg(vf_logits_finish(f, &sum_w, &e) == LMQ_OK, "%s", e.msg);

    vf_logits_head got;
    ck_assert_msg(vf_logits_open(path, &got, &sum_r, &f, &e) == LMQ_OK, "%s", e.msg);
    ck_assert(sum_r == sum_w);
    ck_assert_int_eq(got.ctx, 5);
    ck_assert_int_eq(got.vocab, 33);
    ck_assert_int_eq(got.windows, 3);
    ck_assert_int_eq(got.tokens, 17);
    ck_assert(got.ref.file_checksum == h.ref.file_checksum && got.ref.mib == 1.5);
    ck_assert_str_eq(got.ref.path, "ref.lmq");
    ck_assert_msg(vf_logits_match(path, &got, &h, &e) == LMQ_OK, "%s", e.msg);
    for (int w = 0; w < 3; w++) {
        ck_assert_msg(vf_logits_load(f, w, win, n, &e) == LMQ_OK, "%s", e.msg);
        ck_assert(!memcmp(win, bits[w], sizeof win));
    }
    ck_assert_int_eq(vf_logits_load(f, 3, win, n, &e), LMQ_E_ARG);
    vf_logits_close(f);

    /* Binding: each field of the run that differs is named. */
    const struct {
        vf_logits_head run;
        const char *says;
    } diffs[] = {
        { { .ctx = 6, .vocab = 33, .windows = 3, .tokens = 17, .tokens_checksum = 7, .text_checksum = 9 }, "ctx 6" },
        { { .ctx = 5, .vocab = 33, .windows = 3, .tokens = 17, .tokens_checksum = 7, .text_checksum = 8 }, "another text" },
        { { .ctx = 5, .vocab = 32, .windows = 3, .tokens = 17, .tokens_checksum = 7, .text_checksum = 9 }, "vocabulary" },
        { { .ctx = 5, .vocab = 33, .windows = 3, .tokens = 17, .tokens_checksum = 6, .text_checksum = 9 }, "token stream" },
        { { .ctx = 5, .vocab = 33, .windows = 3, .tokens = 17, .tokens_checksum = 7, .text_checksum = 9,
            .ref = { .path = "other.lmq", .file_checksum = 1 } }, "other.lmq has 0000000000000001" },
    };
    for (size_t i = 0; i < sizeof diffs / sizeof diffs[0]; i++) {
        ck_assert_int_eq(vf_logits_match(path, &got, &diffs[i].run, &e), LMQ_E_ARG);
        ck_assert_msg(strstr(e.msg, diffs[i].says) && strstr(e.msg, path), "%s", e.msg);
    }

    /* Damage anywhere is caught by the file's own checksum; a file cut short too. */
    size_t size;
    char *all = slurp(path, &size);
    for (size_t at = 0; at < size; at += size / 7 + 1) {
        flip_byte(path, at);
        lmq_code c = vf_logits_open(path, &got, NULL, &f, &e);
        ck_assert_msg(c == LMQ_E_CHECKSUM || c == LMQ_E_FORMAT, "byte %zu: %s", at, lmq_code_name(c));
        spill(path, all, size);
    }
    spill(path, all, size - 1);
    ck_assert(vf_logits_open(path, &got, NULL, &f, &e) != LMQ_OK);
    /* A file whose checksum holds but whose last window is missing (re-sealed here by the layout
     * the header describes): it opens, and reading that window fails with a clear error. */
    size_t at = 16;
    for (int i = 0; i < 4; i++)
        at += (size_t)(uint8_t)all[12 + i] << (8 * i);
    for (int w = 0; w < 2; w++) {
        uint64_t z = 0;
        for (int i = 7; i >= 0; i--)
            z = z << 8 | (uint8_t)all[at + (size_t)i];
        at += 8 + (size_t)z;
    }
    uint64_t seal = XXH3_64bits(all, at);
    for (int i = 0; i < 8; i++)
        all[at + (size_t)i] = (char)(seal >> (8 * i));
    spill(path, all, at + 8);
    ck_assert_msg(vf_logits_open(path, &got, NULL, &f, &e) == LMQ_OK, "%s", e.msg);
    for (int w = 0; w < 2; w++)
        ck_assert_msg(vf_logits_load(f, w, win, n, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(vf_logits_load(f, 2, win, n, &e), LMQ_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "window 2 does not fit"), "%s", e.msg);
    vf_logits_close(f);
    free(all);
    test_rmtree(dir);
}
END_TEST

static void same_result(const vf_result *a, const vf_result *b, const char *what)
{
    /* Bit for bit: memcmp, not ==. */
    ck_assert_msg(!memcmp(&a->ppl, &b->ppl, sizeof a->ppl) && !memcmp(&a->nll, &b->nll, sizeof a->nll) &&
                      !memcmp(&a->top1, &b->top1, sizeof a->top1) &&
                      !memcmp(&a->kl_mean, &b->kl_mean, sizeof a->kl_mean) &&
                      !memcmp(&a->kl_p99, &b->kl_p99, sizeof a->kl_p99) && a->positions == b->positions,
                  "%s: ppl %.17g / %.17g, kl %.17g / %.17g", what, a->ppl, b->ppl, a->kl_mean, b->kl_mean);
}

START_TEST(logits_reuse)
{
    bench b;
    bench_make(&b);
    vf_report run, reuse, reuse_named;
    lmq_err e;
    ck_assert_msg(verify(b.ref, b.q8, b.q4, b.text, 64, b.logits, NULL, &run, &e) == LMQ_OK, "%s", e.msg);
    /* Candidates in another order and one alone, with and without naming the reference. */
    ck_assert_msg(verify(NULL, b.q4, b.q8, b.text, 64, NULL, b.logits, &reuse, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(verify(b.ref, b.q8, NULL, b.text, 64, NULL, b.logits, &reuse_named, &e) == LMQ_OK, "%s", e.msg);
    same_result(&run.rows[0].res, &reuse.rows[0].res, "reference");
    same_result(&run.rows[1].res, &reuse.rows[2].res, "q8");
    same_result(&run.rows[2].res, &reuse.rows[1].res, "q4");
    same_result(&run.rows[1].res, &reuse_named.rows[1].res, "q8, reference named");
    ck_assert(run.rows[1].res.kl_mean > 0);
    /* The reference row comes from the file: its name and checksum; no speed, as it did not run. */
    ck_assert_str_eq(reuse.rows[0].path, b.ref);
    ck_assert(reuse.rows[0].file_checksum == run.rows[0].file_checksum);
    ck_assert(reuse.rows[0].decode_tps == 0 && run.rows[0].decode_tps > 0);
    ck_assert_str_eq(reuse.ref_logits, b.logits);
    ck_assert(reuse.ref_logits_checksum != 0);
    /* Lossless, and smaller than the floats. */
    size_t size;
    free(slurp(b.logits, &size));
    const double raw = (double)run.rows[0].res.positions * 512 * 4;
    ck_assert_msg(size < raw, "%zu bytes for %.0f of floats", size, raw);
    free((void *)run.rows);
    free((void *)reuse.rows);
    free((void *)reuse_named.rows);

    /* Refused: another text, another ctx, another reference, no candidate, damage. */
    const struct {
        const char *ref, *text;
        int ctx;
        lmq_code code;
        const char *says;
    } refusals[] = { { NULL, b.text2, 64, LMQ_E_ARG, "another text" },
                     { NULL, b.text, 32, LMQ_E_ARG, "ctx" },
                     { b.q4, b.text, 64, LMQ_E_ARG, "saved for reference" } };
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
        vf_report r;
        lmq_code c = verify(refusals[i].ref, b.q8, NULL, refusals[i].text, refusals[i].ctx, NULL, b.logits, &r, &e);
        ck_assert_msg(c == refusals[i].code, "case %zu: %s", i, lmq_code_name(c));
        ck_assert_msg(strstr(e.msg, refusals[i].says) && strstr(e.msg, "ref.logits"), "case %zu: %s", i, e.msg);
    }
    vf_report r;
    const char *none[1] = { NULL };
    vf_run_opts o = { .ctx = 64, .bandwidth_gbps = 10, .ref_logits = b.logits };
    ck_assert_int_eq(vf_run(NULL, none, 0, b.text, &o, &r, &e), LMQ_E_ARG);
    flip_byte(b.logits, 1000);
    ck_assert_int_eq(verify(NULL, b.q8, NULL, b.text, 64, NULL, b.logits, &r, &e), LMQ_E_CHECKSUM);
    ck_assert_msg(strstr(e.msg, "ref.logits: checksum mismatch"), "%s", e.msg);
    test_rmtree(b.dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("record");
    TCase *gates = tcase_create("gates");
    tcase_add_test(gates, gate_syntax);
    tcase_add_test(gates, gate_holds);
    tcase_add_test(gates, gate_report);
    suite_add_tcase(s, gates);
    TCase *rec = tcase_create("records");
    tcase_set_timeout(rec, 120);
    tcase_add_test(rec, records);
    tcase_add_test(rec, logits_round_trip);
    tcase_add_test(rec, logits_reuse);
    suite_add_tcase(s, rec);
    return run_suite(s);
}
