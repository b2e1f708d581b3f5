/* verify/html: escaping of hostile names (markup characters, bytes that are not UTF-8, control
 * bytes), and the page of a made-up report: every table row, the plots, numbers placed on the
 * axes they belong to, no script or outside reference, and a manifest that cannot be read said
 * in the page (escaped) instead of failing the report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"
#include "verify/html.h"

static char *escaped(const char *s)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    ck_assert(f != NULL);
    vf_html_escape(f, s);
    fclose(f);
    return buf;
}

START_TEST(escape)
{
    const struct {
        const char *in, *want;
    } cases[] = {
        { "plain-name_1.lmq", "plain-name_1.lmq" },
        { "a<b>&\"c'd", "a&lt;b&gt;&amp;&quot;c&#39;d" },
        { "caf\xc3\xa9 \xe2\x82\xac", "caf\xc3\xa9 \xe2\x82\xac" },     /* UTF-8 kept as it is */
        { "x\xff\x01\xed\xa0\x80y", "x?????y" },                          /* not UTF-8, control, surrogate */
        { "\xc3", "?" },                                                  /* a sequence cut short */
        { "t\tn\nr\x7f" "c\xc2\x85", "t?n?r?c?" },                        /* C0, DEL and C1 controls */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = escaped(cases[i].in);
        ck_assert_msg(!strcmp(got, cases[i].want), "case %zu: '%s', want '%s'", i, got, cases[i].want);
        free(got);
    }
}
END_TEST

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

START_TEST(page)
{
    const char *dir = test_tmpdir();
    vf_row rows[3] = { 0 };
    const char *names[3] = { "ref.lmq", "q4.lmq", "odd<&>.lmq" };
    for (int i = 0; i < 3; i++) {
        snprintf(rows[i].path, sizeof rows[i].path, "%s/%s", dir, names[i]); /* none exists */
        snprintf(rows[i].scheme, sizeof rows[i].scheme, i ? "int4 g32" : "fp32");
        rows[i].model_bpw = i ? 4.0 + i : 32.0;
        rows[i].linear_bpw = rows[i].model_bpw;
        vf_result *q = &rows[i].res;
        q->positions = 1000;
        q->windows = 4;
        q->ppl = 10.0 + i;
        q->top1 = i ? 0.9 : 1.0;
        q->kl_mean = i ? 0.01 * i : 0.0;
        for (int k = 0; k < VF_KL_LEVELS; k++)
            q->kl_pct[k] = i ? 1e-5 * (k + 1) * i : 0.0;
        q->kl_max = i ? 0.5 * i : 0.0;
        rows[i].dppl_pct = 10.0 * i;
    }
    vf_report r = { .text = "eval.txt", .ctx = 256, .threads = 1, .isa = "scalar", .bandwidth_gbps = 10,
                    .tokens = 1024, .documents = 3, .rows = rows, .n_rows = 3 };
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    ck_assert(f != NULL);
    vf_report_html(f, &r);
    fclose(f);
    ck_assert(!strncmp(buf, "<!DOCTYPE html>", 15) && strstr(buf, "</html>\n") == buf + n - 8);
    /* Two tables: 1 + 3 and 1 + 2 rows; four quality plots (KL mean and dPPL against both bpw) and
     * the KL distribution (no error plot: the manifests cannot be read, and each says so, escaped). */
    ck_assert_int_eq(count(buf, "<tr>"), 7);
    ck_assert_int_eq(count(buf, "<svg "), 5);
    ck_assert_int_eq(count(buf, "<td>odd&lt;&amp;&gt;.lmq</td>"), 2);
    ck_assert_int_eq(count(buf, "odd<"), 0);
    ck_assert_int_eq(count(buf, "<script"), 0);
    ck_assert_int_eq(count(buf, "href="), 0);
    ck_assert_int_eq(count(buf, "/ref.lmq: cannot open"), 1);
    ck_assert_int_eq(count(buf, "/odd&lt;&amp;&gt;.lmq: cannot open"), 1);
    ck_assert_int_eq(count(buf, "<p class=\"note\">"), 3 + 4 + 1); /* 3 unreadable, 4 notes, the error-plot intro */
    /* The log axis of the KL distribution: powers of ten from 1e-05 to 1 labelled. */
    ck_assert(strstr(buf, ">1e-05</text>") && strstr(buf, ">0.0001</text>") && strstr(buf, ">1</text>"));
    /* Hover titles carry the numbers: q4 at 5 bits per weight, KL 0.01, dPPL 10 %. */
    ck_assert_int_eq(count(buf, "<title>q4: bpw all 5, KL mean 0.01</title>"), 1);
    ck_assert_int_eq(count(buf, "<title>q4: bpw lin 5, dPPL % 10</title>"), 1);
    free(buf);
    test_rmtree(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("html");
    TCase *tc = tcase_create("html");
    tcase_add_test(tc, escape);
    tcase_add_test(tc, page);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
