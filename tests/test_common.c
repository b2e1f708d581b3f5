/* common/: half and bfloat16 conversions, errors, atomic files. */
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/err.h"
#include "common/file.h"
#include "common/fp.h"
#include "common/pool.h"
#include "common/yaml_json.h"
#include "tests/testutil.h"

/* Every half value converts to float and back to itself (NaNs stay NaN). */
START_TEST(f16_round_trip_all)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = lmq_f16_to_f32((uint16_t)h);
        if (isnan(f))
            ck_assert(isnan(lmq_f16_to_f32(lmq_f32_to_f16(f))));
        else
            ck_assert_uint_eq(lmq_f32_to_f16(f), h);
    }
}
END_TEST

/* Known values, including ties that must go to even and the overflow/underflow edges. */
/* The bulk conversions (F16C where the CPU has it) give the scalar functions' bits: every half,
 * and floats across the whole bit range (NaNs, Infs, subnormals, ties and overflow among them),
 * at lengths that leave a tail after the blocks of 8. */
START_TEST(f16_bulk_as_scalar)
{
    enum { N = 1 << 16 };
    uint16_t *h = malloc(N * sizeof *h), *h2 = malloc(N * sizeof *h2);
    float *f = malloc(N * sizeof *f), *f2 = malloc(N * sizeof *f2);
    for (int i = 0; i < N; i++)
        h[i] = (uint16_t)i;
    lmq_f16_to_f32_n(h, f, N - 3);
    for (int i = 0; i < N - 3; i++)
        ck_assert_msg(lmq_f32_bits(f[i]) == lmq_f32_bits(lmq_f16_to_f32(h[i])), "half %04x", i);
    for (uint64_t base = 0; base < (1ull << 32); base += (uint64_t)N * 4099) {
        for (int i = 0; i < N; i++)
            f2[i] = lmq_bits_f32((uint32_t)(base + (uint64_t)i * 4099));
        for (int i = 0; i < 64; i++) /* ties around 1 and the overflow threshold */
            f2[(i * 977) % N] = lmq_bits_f32((i % 2 ? 0x3f801000u : 0x477ff000u) + (uint32_t)(i / 2 % 3) - 1);
        lmq_f32_to_f16_n(f2, h2, N - 5);
        for (int i = 0; i < N - 5; i++)
            ck_assert_msg(h2[i] == lmq_f32_to_f16(f2[i]), "float %08x", lmq_f32_bits(f2[i]));
    }
    free(h), free(h2), free(f), free(f2);
}
END_TEST

START_TEST(f16_rounding)
{
    ck_assert_uint_eq(lmq_f32_to_f16(1.0f), 0x3c00);
    ck_assert_uint_eq(lmq_f32_to_f16(65504.0f), 0x7bff);
    ck_assert_uint_eq(lmq_f32_to_f16(65519.0f), 0x7bff);
    ck_assert_uint_eq(lmq_f32_to_f16(65520.0f), 0x7c00);
    ck_assert_uint_eq(lmq_f32_to_f16(1.0f + 1.0f / 2048), 0x3c00);       /* tie, even below */
    ck_assert_uint_eq(lmq_f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);       /* tie, even above */
    ck_assert_uint_eq(lmq_f32_to_f16(ldexpf(1.0f, -24)), 0x0001);        /* smallest subnormal */
    ck_assert_uint_eq(lmq_f32_to_f16(ldexpf(1.0f, -25)), 0x0000);        /* tie to even zero */
    ck_assert_uint_eq(lmq_f32_to_f16(ldexpf(1.5f, -25)), 0x0001);
    ck_assert_uint_eq(lmq_f32_to_f16(-2.0f), 0xc000);
    ck_assert_uint_eq(lmq_f32_to_f16(INFINITY), 0x7c00);
    ck_assert_float_eq(lmq_f16_to_f32(0x3555), 0.333251953125f);
}
END_TEST

/* The nearest half: brute force over all finite halves agrees with the conversion. */
START_TEST(f16_nearest)
{
    const float xs[] = { 0.1f, 3.14159f, -1234.567f, 6.1e-5f, 3.0e-6f, 1e-7f, 40000.3f };
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        double best = INFINITY;
        for (uint32_t h = 0; h < 0x7c00; h++) {
            double v = lmq_f16_to_f32((uint16_t)(h | (xs[i] < 0 ? 0x8000 : 0)));
            if (fabs(v - xs[i]) < best)
                best = fabs(v - xs[i]);
        }
        ck_assert(fabs(lmq_f16_to_f32(lmq_f32_to_f16(xs[i])) - xs[i]) == best);
    }
}
END_TEST

START_TEST(bf16_rounding)
{
    ck_assert_uint_eq(lmq_f32_to_bf16(1.0f), 0x3f80);
    ck_assert_uint_eq(lmq_f32_to_bf16(lmq_bits_f32(0x3f808000u)), 0x3f80); /* tie, even below */
    ck_assert_uint_eq(lmq_f32_to_bf16(lmq_bits_f32(0x3f818000u)), 0x3f82); /* tie, even above */
    ck_assert_uint_eq(lmq_f32_to_bf16(lmq_bits_f32(0x3f808001u)), 0x3f81);
    ck_assert(isnan(lmq_bf16_to_f32(lmq_f32_to_bf16(NAN))));
    for (uint32_t h = 0; h < 0x7f80; h += 7)
        ck_assert_uint_eq(lmq_f32_to_bf16(lmq_bf16_to_f32((uint16_t)h)), h);
}
END_TEST

START_TEST(err_prefix)
{
    lmq_err e;
    ck_assert_int_eq(lmq_fail(&e, LMQ_E_FORMAT, "tensor %s: bad", "x"), LMQ_E_FORMAT);
    lmq_err_prefix(&e, "%s: ", "a.lmq");
    ck_assert_str_eq(e.msg, "a.lmq: tensor x: bad");
    ck_assert_int_eq(e.code, LMQ_E_FORMAT);
}
END_TEST

/* An aborted atomic write leaves nothing; a committed one replaces the file whole. */
START_TEST(atomic_write)
{
    char path[256];
    snprintf(path, sizeof path, "%s/out.bin", test_tmpdir());
    lmq_atomic a;
    lmq_err e;
    ck_assert_int_eq(lmq_atomic_open(&a, path, &e), LMQ_OK);
    fputs("half", a.fp);
    lmq_atomic_abort(&a);
    struct stat st;
    ck_assert_int_ne(stat(path, &st), 0);
    ck_assert_int_eq(lmq_atomic_open(&a, path, &e), LMQ_OK);
    fputs("whole", a.fp);
    ck_assert_int_eq(lmq_atomic_commit(&a, &e), LMQ_OK);
    lmq_blob b;
    ck_assert_int_eq(lmq_blob_open(path, &b, &e), LMQ_OK);
    ck_assert_uint_eq(b.size, 5);
    ck_assert(memcmp(b.data, "whole", 5) == 0);
    lmq_blob_close(&b);
    ck_assert_int_ne(lmq_blob_open("/nonexistent/x", &b, &e), LMQ_OK);
    ck_assert(strstr(e.msg, "/nonexistent/x") != NULL);
}
END_TEST

static void touch(const char *path)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("input", f);
    ck_assert_int_eq(fclose(f), 0);
}

/* An output that is an input, by its own name, a hard link or a path through a linked directory,
 * is refused; so is one inside a directory input; a new file is not. */
START_TEST(output_same_file)
{
    char dir[256], in[300], hard[300], linked[300], via[320], fresh[300];
    snprintf(dir, sizeof dir, "%s/same", test_tmpdir());
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    snprintf(in, sizeof in, "%s/in.lmq", dir);
    snprintf(hard, sizeof hard, "%s/hard.lmq", test_tmpdir());
    snprintf(linked, sizeof linked, "%s/linked", test_tmpdir());
    snprintf(via, sizeof via, "%s/in.lmq", linked);
    snprintf(fresh, sizeof fresh, "%s/fresh.lmq", test_tmpdir());
    touch(in);
    ck_assert_int_eq(link(in, hard), 0);
    ck_assert_int_eq(symlink(dir, linked), 0);
    const char *inputs[] = { NULL, in };
    lmq_err e;
    ck_assert_int_eq(lmq_output_check(in, inputs, 2, &e), LMQ_E_ARG);
    ck_assert(strstr(e.msg, "same file as the input") != NULL);
    ck_assert_int_eq(lmq_output_check(hard, inputs, 2, &e), LMQ_E_ARG);
    ck_assert(strstr(e.msg, hard) != NULL);
    ck_assert_int_eq(lmq_output_check(via, inputs, 2, &e), LMQ_E_ARG);
    const char *dirs[] = { dir };
    ck_assert_int_eq(lmq_output_check(hard, dirs, 1, &e), LMQ_E_ARG);
    ck_assert_int_eq(lmq_output_check(fresh, inputs, 2, &e), LMQ_OK);
    touch(fresh);
    ck_assert_int_eq(lmq_output_check(fresh, inputs, 2, &e), LMQ_OK);
}
END_TEST

/* Links (dangling or not), FIFOs and directories are never replaced, and no temporary file is
 * made beside them; a FIFO input is refused without waiting for a writer. */
START_TEST(output_not_regular)
{
    char dir[256], target[300], paths[4][300];
    snprintf(dir, sizeof dir, "%s/kinds", test_tmpdir());
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    snprintf(target, sizeof target, "%s/target", dir);
    touch(target);
    static const char *names[] = { "link", "dangling", "fifo", "dir" };
    for (int i = 0; i < 4; i++)
        snprintf(paths[i], sizeof paths[i], "%s/%s", dir, names[i]);
    ck_assert_int_eq(symlink("target", paths[0]), 0);
    ck_assert_int_eq(symlink("nowhere", paths[1]), 0);
    ck_assert_int_eq(mkfifo(paths[2], 0644), 0);
    ck_assert_int_eq(mkdir(paths[3], 0755), 0);
    lmq_err e;
    lmq_atomic a;
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(lmq_atomic_open(&a, paths[i], &e), LMQ_E_ARG);
        ck_assert(strstr(e.msg, paths[i]) != NULL);
    }
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));)
        n += de->d_name[0] != '.';
    closedir(d);
    ck_assert_int_eq(n, 5);
    lmq_blob b;
    ck_assert_int_eq(lmq_blob_open(paths[2], &b, &e), LMQ_E_IO);
    ck_assert(strstr(e.msg, "not a regular file") != NULL);
}
END_TEST

static void count_stale(void *user, const char *path, int removed)
{
    (void)path;
    *(int *)user += removed;
}

/* A temporary file of a process that no longer runs goes when its output is opened again; one
 * of a running process stays. */
START_TEST(atomic_stale)
{
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(dead, NULL, 0), dead);
    char out[256], stale[300], live[300];
    snprintf(out, sizeof out, "%s/stale.bin", test_tmpdir());
    snprintf(stale, sizeof stale, "%s.tmp.%ld.AbC123", out, (long)dead);
    snprintf(live, sizeof live, "%s.tmp.%ld.AbC123", out, (long)getpid());
    touch(stale);
    touch(live);
    int removed = 0;
    lmq_atomic_on_stale(count_stale, &removed);
    lmq_atomic a;
    lmq_err e;
    ck_assert_int_eq(lmq_atomic_open(&a, out, &e), LMQ_OK);
    lmq_atomic_abort(&a);
    lmq_atomic_on_stale(NULL, NULL);
    ck_assert_int_eq(removed, 1);
    ck_assert_int_ne(access(stale, F_OK), 0);
    ck_assert_int_eq(access(live, F_OK), 0);
    unlink(live);
}
END_TEST

/* Any name the filesystem accepts is an output name: up to NAME_MAX bytes, the temporary file's
 * name cut to fit (and a stale one of a name that long still found). */
START_TEST(atomic_long_names)
{
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(dead, NULL, 0), dead);
    const char *dir = test_tmpdir();
    static const int lens[] = { 200, 238, 239, 240, 254, NAME_MAX };
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        char name[NAME_MAX + 1], out[PATH_MAX], stale[PATH_MAX];
        memset(name, 'n', (size_t)lens[k]);
        name[lens[k]] = 0;
        snprintf(out, sizeof out, "%s/%s", dir, name);
        snprintf(stale, sizeof stale, "%s/%.*s.tmp.%ld.AbC123", dir, lens[k] < NAME_MAX - 22 ? lens[k] : NAME_MAX - 22,
                 name, (long)dead);
        touch(stale);
        int removed = 0;
        lmq_atomic_on_stale(count_stale, &removed);
        lmq_atomic a;
        lmq_err e;
        ck_assert_msg(lmq_atomic_open(&a, out, &e) == LMQ_OK, "%d bytes: %s", lens[k], e.msg);
        lmq_atomic_on_stale(NULL, NULL);
        ck_assert_int_eq(removed, 1);
        ck_assert_int_eq(lmq_atomic_write(&a, "x", 1, &e), LMQ_OK);
        ck_assert_msg(lmq_atomic_commit(&a, &e) == LMQ_OK, "%d bytes: %s", lens[k], e.msg);
        ck_assert_int_eq(access(out, F_OK), 0);
        unlink(out);
    }
    test_rmtree(dir);
}
END_TEST

/* lmq_pool_try: every item once when nothing fails; when items fail, the error of the first
 * failing item, on any number of threads. */
typedef struct {
    int64_t fail_a, fail_b;
    int *seen;
} try_ctx;

static lmq_code try_items(void *ctx, int64_t begin, int64_t end, int thread, lmq_err *err)
{
    (void)thread;
    try_ctx *t = ctx;
    for (int64_t i = begin; i < end; i++) {
        if (i == t->fail_a || i == t->fail_b)
            return lmq_fail(err, LMQ_E_NUMERIC, "item %lld failed", (long long)i);
        t->seen[i]++;
    }
    return LMQ_OK;
}

START_TEST(pool_try)
{
    int seen[500];
    for (int threads = 1; threads <= 4; threads += 3) {
        lmq_pool *pool;
        lmq_err err;
        ck_assert_int_eq(lmq_pool_create(threads, &pool, &err), LMQ_OK);
        memset(seen, 0, sizeof seen);
        try_ctx ok = { -1, -1, seen };
        ck_assert_int_eq(lmq_pool_try(pool, 500, 7, try_items, &ok, &err), LMQ_OK);
        for (int i = 0; i < 500; i++)
            ck_assert_int_eq(seen[i], 1);
        try_ctx bad = { 370, 81, seen };
        ck_assert_int_eq(lmq_pool_try(pool, 500, 7, try_items, &bad, &err), LMQ_E_NUMERIC);
        ck_assert_str_eq(err.msg, "item 81 failed");
        lmq_pool_free(pool);
    }
}
END_TEST

/* The generic YAML -> JSON conversion against JSON written by hand for the same document. */
START_TEST(yaml_to_json)
{
    static const char yaml[] = "a: 1\n"
                               "b: -12.5e-1\n"
                               "c: [true, False, ~, null, '', \"7\", 0x10, 1e, .inf, 9223372036854775808, -.5]\n"
                               "d:\n"
                               "  - name: \"x: y\"\n"
                               "    e:\n"
                               "  - |\n"
                               "    two\n"
                               "    lines\n"
                               "f: 9223372036854775807\n"
                               "g: plain words\n";
    static const char want[] = "{\"a\": 1, \"b\": -1.25, \"c\": [true, false, null, null, \"\", \"7\", \"0x10\", \"1e\","
                               " \".inf\", \"9223372036854775808\", -0.5], \"d\": [{\"name\": \"x: y\", \"e\": null},"
                               " \"two\\nlines\\n\"], \"f\": 9223372036854775807, \"g\": \"plain words\"}";
    json_t *got = NULL, *expect = json_loads(want, 0, NULL);
    lmq_err err = { 0 };
    ck_assert_ptr_nonnull(expect);
    ck_assert_int_eq(lmq_yaml_to_json(yaml, sizeof yaml - 1, "t.yaml", &got, &err), LMQ_OK);
    char *dump = json_dumps(got, JSON_SORT_KEYS);
    ck_assert_msg(json_equal(got, expect), "got %s", dump);
    free(dump);
    json_decref(got);
    json_decref(expect);

    ck_assert_int_eq(lmq_yaml_to_json("", 0, "t.yaml", &got, &err), LMQ_OK);
    ck_assert(json_is_null(got));
    json_decref(got);

    static const char twice[] = "a: 1\nb:\n  c: 2\n  c: 3\n";
    ck_assert_int_eq(lmq_yaml_to_json(twice, sizeof twice - 1, "t.yaml", &got, &err), LMQ_E_FORMAT);
    ck_assert_str_eq(err.msg, "t.yaml:4: key 'c' repeated");
    static const char complex_key[] = "? [1, 2]\n: 3\n";
    ck_assert_int_eq(lmq_yaml_to_json(complex_key, sizeof complex_key - 1, "t.yaml", &got, &err), LMQ_E_FORMAT);
    ck_assert_str_eq(err.msg, "t.yaml:1: a key that is not a plain value");
    static const char alias[] = "a: &x 1\nb: *x\n";
    ck_assert_int_eq(lmq_yaml_to_json(alias, sizeof alias - 1, "t.yaml", &got, &err), LMQ_E_FORMAT);
    ck_assert_str_eq(err.msg, "t.yaml:2:4: YAML aliases are not allowed");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("common");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, f16_round_trip_all);
    tcase_add_test(tc, f16_rounding);
    tcase_add_test(tc, f16_bulk_as_scalar);
    tcase_add_test(tc, f16_nearest);
    tcase_add_test(tc, bf16_rounding);
    tcase_add_test(tc, err_prefix);
    tcase_add_test(tc, atomic_write);
    tcase_add_test(tc, output_same_file);
    tcase_add_test(tc, output_not_regular);
    tcase_add_test(tc, atomic_stale);
    tcase_add_test(tc, atomic_long_names);
    tcase_add_test(tc, pool_try);
    tcase_add_test(tc, yaml_to_json);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
