#define _XOPEN_SOURCE 700 /* nftw */
#include "tests/testutil.h"

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert/convert.h"
#include "formats/artefact.h"
#include "formats/container.h"

/* Fixtures the repository carries byte for byte (demo/PROVENANCE.md), read from there when the
 * fixtures folder is absent. */
static const struct {
    const char *fixture, *repo;
} IN_REPO[] = {
    { "sotu-gpt2", "demo/sotu-gpt2" },
    { "gpt2-tokenizer", "demo/sotu-gpt2" }, /* the same vocab.json and merges.txt */
    { "text/sotu-eval.txt", "demo/sotu-eval.txt" },
};

const char *fixture(const char *rel)
{
    static char buf[4096];
    const char *env = getenv("LMQ_FIXTURES"), *root = env ? env : "../shared/fixtures", *ci = getenv("CI");
    struct stat st;
    const int absent = stat(root, &st) || !S_ISDIR(st.st_mode);
    for (size_t i = 0; absent && i < sizeof IN_REPO / sizeof IN_REPO[0]; i++) {
        const size_t n = strlen(IN_REPO[i].fixture);
        if (!strncmp(rel, IN_REPO[i].fixture, n) && (!rel[n] || rel[n] == '/')) {
            snprintf(buf, sizeof buf, "%s%s", IN_REPO[i].repo, rel + n);
            return buf;
        }
    }
    if (absent) {
        ck_assert_msg(!ci || strcmp(ci, "true"), "fixture %s: the fixtures folder %s is absent, and CI=true wants "
                      "every test run", rel, root);
        fprintf(stderr, "SKIP (%s): needs fixture %s; the fixtures folder %s is absent (" FIXTURES_FROM ")\n",
                tcase_name(), rel, root);
        const char *log = getenv("LMQ_SKIP_LOG");
        FILE *f = log ? fopen(log, "a") : NULL;
        if (f) {
            fprintf(f, "%s: needs fixture %s\n", tcase_name(), rel);
            fclose(f);
        }
        _exit(0); /* Check runs each test in a child of its own: this ends the test, passed */
    }
    snprintf(buf, sizeof buf, "%s/%s", root, rel);
    return buf;
}

const char *test_tmpdir(void)
{
    static char buf[64];
    snprintf(buf, sizeof buf, "/tmp/lmq-test-XXXXXX");
    if (!mkdtemp(buf)) {
        perror("mkdtemp");
        abort();
    }
    return buf;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void test_rmtree(const char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void test_fp32_artefact(const char *rel, const char *path)
{
    lmq_model m;
    lmq_err e;
    ck_assert_msg(lmq_convert(fixture(rel), &(lmq_convert_opts){ 0 }, &m, &e) == LMQ_OK, "%s: %s", rel, e.msg);
    ck_assert_msg(lmq_container_write_model(path, &m, NULL, &e) == LMQ_OK, "%s: %s", path, e.msg);
    lmq_model_free(&m);
}

int run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

double test_uniform(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}

double test_gauss(uint64_t *state)
{
    double u = test_uniform(state), v = test_uniform(state);
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}
