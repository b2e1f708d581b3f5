/* The KV cache's formats (runtime/kv.h): each format's round trip against its analytic bound,
 * the integer formats' scales (at zero, tiny and huge blocks), and the bytes they take. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/fp.h"
#include "runtime/kv.h"
#include "tests/testutil.h"

static const char *const NAMES[] = { "fp32", "fp16", "bf16", "fp8", "int8", "int4" };

/* A value of magnitude 2^e (e in [lo, hi)) and random sign, from a fixed sequence. */
static float draw(uint64_t *st, int lo, int hi)
{
    *st = *st * 6364136223846793005ull + 1442695040888963407ull;
    const double u = (double)(*st >> 11) / 9007199254740992.0;
    const double mag = exp2(lo + (hi - lo) * u);
    return (float)((*st >> 10) & 1 ? mag : -mag);
}

/* heads × hd values through the format; the stored bytes checked not to run past their size. */
static void round_trip(const rt_kv_format *f, const float *x, int heads, int hd, uint8_t *buf, float *y)
{
    const size_t bytes = (size_t)heads * rt_kv_head_bytes(f, hd);
    memset(buf, 0xa5, bytes + 16);
    rt_kv_store(f, x, heads, hd, buf);
    for (size_t i = bytes; i < bytes + 16; i++)
        ck_assert_msg(buf[i] == 0xa5, "%s: stored past its %zu bytes", f->name, bytes);
    rt_kv_load(f, buf, heads, hd, y);
}

/* Floats keep their mantissa: relative error at most half an ulp, 2^-(mantissa bits + 1), over
 * each format's normal range (fp8 E4M3: 2^-6..448). */
START_TEST(floats_by_mantissa)
{
    const struct { const char *name; int mant, lo, hi; } rows[] = {
        { "fp32", 23, -60, 60 }, { "fp16", 10, -14, 15 }, { "bf16", 7, -60, 60 }, { "fp8", 3, -6, 8 },
    };
    enum { HEADS = 3, HD = 64, N = HEADS * HD };
    float x[N], y[N];
    uint8_t buf[N * 4 + 16];
    uint64_t st = 42;
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        const rt_kv_format *f = rt_kv_find(rows[r].name);
        ck_assert_ptr_nonnull(f);
        const double bound = ldexp(1.0, -(rows[r].mant + 1));
        for (int round = 0; round < 20; round++) {
            for (int i = 0; i < N; i++)
                x[i] = draw(&st, rows[r].lo, rows[r].hi);
            round_trip(f, x, HEADS, HD, buf, y);
            for (int i = 0; i < N; i++) {
                const double rel = fabs((double)y[i] - x[i]) / fabs((double)x[i]);
                ck_assert_msg(rel <= bound, "%s: %g came back %g (relative %g > %g)", f->name, x[i], y[i], rel,
                              bound);
                if (rows[r].mant == 23)
                    ck_assert(y[i] == x[i]);
            }
        }
    }
}
END_TEST

/* The fp16 scale of the block starting at p. */
static float scale_at(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return lmq_f16_to_f32(h);
}

/* Integers: per block of 32 (or the whole head when shorter, or the shorter last block) one
 * scale of at least amax / qmax (no code clips) and under one fp16 step more, and every element
 * within scale / 2. Heads of 8 (stories260K), 32, 64 and 48 (a block of 32 and one of 16). */
START_TEST(ints_within_half_a_scale)
{
    const struct { const char *name; int qmax; } rows[] = { { "int8", 127 }, { "int4", 7 } };
    const int hds[] = { 8, 32, 64, 48 };
    enum { HEADS = 4, MAX_HD = 64 };
    float x[HEADS * MAX_HD], y[HEADS * MAX_HD];
    uint8_t buf[HEADS * MAX_HD * 2 + 16];
    uint64_t st = 7;
    for (size_t r = 0; r < 2; r++)
        for (size_t k = 0; k < sizeof hds / sizeof hds[0]; k++) {
            const rt_kv_format *f = rt_kv_find(rows[r].name);
            const int hd = hds[k];
            for (int round = 0; round < 20; round++) {
                for (int h = 0; h < HEADS; h++) /* each head its own magnitude */
                    for (int i = 0; i < hd; i++)
                        x[h * hd + i] = draw(&st, -8 + 3 * h, -4 + 3 * h);
                round_trip(f, x, HEADS, hd, buf, y);
                const uint8_t *p = buf;
                for (int h = 0; h < HEADS; h++)
                    for (int e = 0; e < hd; e += RT_KV_BLOCK) {
                        const int n = hd - e < RT_KV_BLOCK ? hd - e : RT_KV_BLOCK;
                        const float *xb = x + h * hd + e, *yb = y + h * hd + e;
                        double amax = 0;
                        for (int i = 0; i < n; i++)
                            amax = fmax(amax, fabs(xb[i]));
                        const double s = scale_at(p), want = amax / rows[r].qmax;
                        ck_assert_msg(s >= want && s <= want * (1 + ldexp(1, -9)), "%s hd %d: scale %g for amax %g",
                                      f->name, hd, s, amax);
                        for (int i = 0; i < n; i++)
                            ck_assert_msg(fabs((double)yb[i] - xb[i]) <= s / 2, "%s hd %d: %g came back %g (scale %g)",
                                          f->name, hd, xb[i], yb[i], s);
                        p += 2 + (size_t)n * (r ? 4 : 8) / 8;
                    }
            }
        }
}
END_TEST

/* A block of zeros: scale 0, zeros back. Tiny values: a nonzero (subnormal) scale, still within
 * half of it. Huge ones (beyond 65504 · qmax): the largest fp16 scale, codes at ±qmax, finite. */
START_TEST(int_scales_at_the_edges)
{
    const char *names[] = { "int8", "int4" };
    const int qmax[] = { 127, 7 };
    float x[32], y[32];
    uint8_t buf[80];
    for (int r = 0; r < 2; r++) {
        const rt_kv_format *f = rt_kv_find(names[r]);
        memset(x, 0, sizeof x);
        round_trip(f, x, 1, 32, buf, y);
        ck_assert(scale_at(buf) == 0.0f);
        for (int i = 0; i < 32; i++)
            ck_assert(y[i] == 0.0f);
        for (int i = 0; i < 32; i++)
            x[i] = (i % 2 ? 1e-9f : -3e-10f) * (float)(i + 1);
        round_trip(f, x, 1, 32, buf, y);
        ck_assert(scale_at(buf) > 0.0f);
        for (int i = 0; i < 32; i++)
            ck_assert(fabsf(y[i] - x[i]) <= scale_at(buf) / 2);
        for (int i = 0; i < 32; i++)
            x[i] = i % 2 ? 1e30f : -1e30f;
        round_trip(f, x, 1, 32, buf, y);
        ck_assert(scale_at(buf) == 65504.0f);
        for (int i = 0; i < 32; i++)
            ck_assert(y[i] == (i % 2 ? 1.0f : -1.0f) * 65504.0f * (float)qmax[r]);
    }
}
END_TEST

/* Bytes: a head is its blocks' elements plus a 2-byte scale per block for the integers. */
START_TEST(bytes_per_token)
{
    const rt_kv_format *f32 = rt_kv_find("fp32"), *f16 = rt_kv_find("fp16"), *bf = rt_kv_find("bf16"),
                       *f8 = rt_kv_find("fp8"), *i8 = rt_kv_find("int8"), *i4 = rt_kv_find("int4");
    ck_assert_uint_eq(rt_kv_head_bytes(f32, 64), 256);
    ck_assert_uint_eq(rt_kv_head_bytes(f16, 64), 128);
    ck_assert_uint_eq(rt_kv_head_bytes(bf, 64), 128);
    ck_assert_uint_eq(rt_kv_head_bytes(f8, 64), 64);
    ck_assert_uint_eq(rt_kv_head_bytes(i8, 64), 2 * (32 + 2));
    ck_assert_uint_eq(rt_kv_head_bytes(i4, 64), 2 * (16 + 2));
    ck_assert_uint_eq(rt_kv_head_bytes(i8, 8), 8 + 2);    /* a short head is one block */
    ck_assert_uint_eq(rt_kv_head_bytes(i4, 48), 18 + 10); /* 32 + 16 */
    ck_assert_uint_eq(rt_kv_head_bytes(i8, 128), 128 + 4 * 2);
    /* GPT-2 124M: 12 layers of 12 heads of 64; keys int8, values fp16 */
    ck_assert_uint_eq(rt_kv_token_bytes(i8, f16, 12, 12, 64), 12 * 12 * (68 + 128));
    /* stories260K: 5 layers, 4 kv heads of 8: 400 bytes in int8, 240 in int4, 1280 in fp32 */
    ck_assert_uint_eq(rt_kv_token_bytes(i8, i8, 5, 4, 8), 400);
    ck_assert_uint_eq(rt_kv_token_bytes(i4, i4, 5, 4, 8), 240);
    ck_assert_uint_eq(rt_kv_token_bytes(f32, f32, 5, 4, 8), 1280);
}
END_TEST

START_TEST(names)
{
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++) {
        const rt_kv_format *f = rt_kv_find(NAMES[i]);
        ck_assert_msg(f && !strcmp(f->name, NAMES[i]), "%s", NAMES[i]);
        ck_assert_msg(strstr(rt_kv_names(), NAMES[i]) != NULL, "%s not in '%s'", NAMES[i], rt_kv_names());
    }
    ck_assert_ptr_null(rt_kv_find("q8_0"));
    ck_assert_ptr_null(rt_kv_find(""));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kv");
    TCase *tc = tcase_create("formats");
    tcase_add_test(tc, floats_by_mantissa);
    tcase_add_test(tc, ints_within_half_a_scale);
    tcase_add_test(tc, int_scales_at_the_edges);
    tcase_add_test(tc, bytes_per_token);
    tcase_add_test(tc, names);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
