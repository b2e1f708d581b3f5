/* Helpers shared by the Check suites. Tests run from the repository root; fixtures live in
 * ../shared/fixtures unless LMQ_FIXTURES names another folder. */
#ifndef LMQ_TESTUTIL_H
#define LMQ_TESTUTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

/* Check's ck_assert* macros record the location of every assertion that passes (_mark_point: a
 * message written and flushed to the runner, one system call each, about 2 us): the suites that
 * compare every element (test_linear's 10 million, test_common's million in f16_bulk_as_scalar)
 * spent most of their time there, and timed out on a loaded machine. Passing assertions record
 * nothing here; a failing one still reports its own file, line and message, and a crash or a
 * timeout names the test (under the sanitizers with a stack trace). */
#undef _mark_point
#define _mark_point(file, line) ((void)0)

#define FIXTURES_FROM                                                                                  \
    "fixtures are ../shared/fixtures beside the repository, described by its PROVENANCE.md; "         \
    "LMQ_FIXTURES names another place"

/* The two fixture models, as fixture() takes them: llama2.c's stories260K and our sotu-gpt2 (a
 * Hugging Face checkpoint directory). */
#define STORIES "stories260K/stories260K.bin"
#define SOTU "sotu-gpt2"

/* Returns a static buffer holding <fixtures>/<rel>. When the fixtures folder is absent (a clone
 * on its own) the fixtures the repository carries (demo/: sotu-gpt2, the GPT-2 tokenizer, the
 * SOTU text) are read from there; for any other the calling test is skipped: a SKIP line on
 * stderr (and in $LMQ_SKIP_LOG when set), and the test ends as passed; under CI=true it fails. */
const char *fixture(const char *rel);
/* A fresh empty directory under /tmp for this test's outputs. */
const char *test_tmpdir(void);
/* Removes dir and everything under it (test outputs only). */
void test_rmtree(const char *dir);
/* Deterministic pseudo-random numbers (splitmix64) from *state: uniform in [0, 1), and standard
 * normal. */
double test_uniform(uint64_t *state);
double test_gauss(uint64_t *state);

/* The fixture at rel (a checkpoint lmq convert reads) converted and written as an fp32 artefact at path. */
void test_fp32_artefact(const char *rel, const char *path);
/* Runs a suite and returns the process exit status. */
int run_suite(Suite *s);

#endif
