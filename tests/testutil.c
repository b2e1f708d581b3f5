#define _XOPEN_SOURCE 700 /* nftw */
#include "tests/testutil.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

const char *fixture(const char *rel)
{
    static char buf[4096];
    const char *root = getenv("LMQ_FIXTURES");
    snprintf(buf, sizeof buf, "%s/%s", root ? root : "../shared/fixtures", rel);
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

int run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
