/* lmq budget's arithmetic (runtime/budget.h) against numbers worked out by hand in the comments:
 * the two fixture models' artefacts (shape and stored size from their manifests) and the 7B
 * shape of the synth table. */
#include <stdlib.h>
#include <string.h>

#include "convert/synth.h"
#include "formats/artefact.h"
#include "formats/container.h"
#include "formats/manifest.h"
#include "runtime/budget.h"
#include "tests/testutil.h"

#define GIB (1024ull * 1024 * 1024)
#define MIB (1024ull * 1024)

/* The budget model of a fixture converted to an fp32 artefact. */
static rt_budget_model fixture_model(const char *rel)
{
    const char *dir = test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/m.lmq", dir);
    test_fp32_artefact(rel, path);
    lmq_container c;
    lmq_manifest man;
    lmq_err e;
    ck_assert_msg(lmq_container_open_manifest(&c, &man, path, &e) == LMQ_OK, "%s", e.msg);
    rt_budget_model m;
    rt_budget_model_of(&man, &m);
    lmq_manifest_free(&man);
    lmq_container_close(&c);
    test_rmtree(dir);
    return m;
}

static rt_budget plan(const rt_budget_model *m, uint64_t memory, int ctx, int page, const char *kv,
                      const int32_t *lengths, size_t n)
{
    rt_budget_opts o = { .memory = memory, .ctx = ctx, .page = page, .kv = rt_kv_find(kv),
                         .lengths = lengths, .n_lengths = n };
    ck_assert_ptr_nonnull(o.kv);
    rt_budget b;
    lmq_err e;
    ck_assert_msg(rt_budget_plan(m, &o, &b, &e) == LMQ_OK, "%s", e.msg);
    return b;
}

START_TEST(stories260k)
{
    const rt_budget_model m = fixture_model(STORIES);
    /* dim 64, 5 layers, 8 heads, 4 kv heads (head dim 8), hidden 172, vocab 512, tied classifier:
     *   tok_embd 512·64 = 32768; per layer: 2 norms 128, q 64·64 4096, k and v 32·64 2048 each,
     *   out 4096, gate/up/down 172·64 = 11008 each: 45440; ×5 = 227200; out_norm 64
     *   = 260032 parameters × 4 bytes = 1040128 bytes */
    ck_assert_int_eq(m.n_layers, 5);
    ck_assert_int_eq(m.n_kv_heads, 4);
    ck_assert_int_eq(m.head_dim, 8);
    ck_assert_uint_eq(m.weight_bytes, 1040128);
    /* 16 MiB, ctx 512, lengths 1, 16, 17, 100 in pages of 16:
     *   KV per token fp16: 2·5·4·8·2 = 640; per sequence 512·640 = 327680
     *   free 16777216 − 1040128 = 15737088; at ctx ⌊15737088 / 327680⌋ = 48
     *   used 134; contiguous 4·512 = 2048; pages 1 + 1 + 2 + 7 = 11 → 176 tokens
     *   free pages ⌊15737088 / (16·640)⌋ = 1536; paged sequences ⌊1536·4 / 11⌋ = 558 */
    const int32_t L[] = { 1, 16, 17, 100 };
    rt_budget b = plan(&m, 16 * MIB, 512, 16, "fp16", L, 4);
    ck_assert_uint_eq(b.kv_token_bytes, 640);
    ck_assert_uint_eq(b.kv_seq_bytes, 327680);
    ck_assert_uint_eq(b.free_bytes, 15737088);
    ck_assert_uint_eq(b.seqs_at_ctx, 48);
    ck_assert_uint_eq(b.used_tokens, 134);
    ck_assert_uint_eq(b.contiguous_tokens, 2048);
    ck_assert_uint_eq(b.paged_tokens, 176);
    ck_assert_double_eq_tol(b.contiguous_waste, 1914.0 / 2048, 1e-12);
    ck_assert_double_eq_tol(b.paged_waste, 42.0 / 176, 1e-12);
    ck_assert_uint_eq(b.seqs_paged, 558);
    /* int8: 2·5·4·(8·1 + 2) = 400 per token; fp32: 2·5·4·8·4 = 1280 */
    ck_assert_uint_eq(plan(&m, 16 * MIB, 512, 16, "int8", L, 4).kv_token_bytes, 400);
    ck_assert_uint_eq(plan(&m, 16 * MIB, 512, 16, "fp32", L, 4).kv_token_bytes, 1280);
    /* page 1: nothing wasted; page = ctx: a page per sequence, as contiguous */
    b = plan(&m, 16 * MIB, 512, 1, "fp16", L, 4);
    ck_assert_uint_eq(b.paged_tokens, 134);
    ck_assert_double_eq(b.paged_waste, 0);
    b = plan(&m, 16 * MIB, 512, 512, "fp16", L, 4);
    ck_assert_uint_eq(b.paged_tokens, 2048);
    ck_assert_uint_eq(b.seqs_paged, 48);
}
END_TEST

START_TEST(sotu_gpt2)
{
    const rt_budget_model m = fixture_model(SOTU);
    /* dim 128, 4 layers, 4 heads (head dim 32, kv heads = heads), hidden 512, vocab 50257, 256
     * positions, tied: wte 50257·128 = 6432896, wpe 256·128 = 32768; per layer: ln_1 and ln_2
     * 4·128 = 512, qkv 128·384 + 384 = 49536, attn_out 128·128 + 128 = 16512, fc 512·128 + 512 =
     * 66048, proj 128·512 + 128 = 65664: 198272; ×4 = 793088; ln_f 256
     *   = 7259008 parameters × 4 bytes = 29036032 bytes */
    ck_assert_int_eq(m.n_layers, 4);
    ck_assert_int_eq(m.n_kv_heads, 4);
    ck_assert_int_eq(m.head_dim, 32);
    ck_assert_uint_eq(m.weight_bytes, 29036032);
    /* 1 GiB, ctx 256, default distribution (uniform 1..256), pages of 16:
     *   KV per token 2·4·4·32·2 = 2048; per sequence 256·2048 = 524288
     *   free 1073741824 − 29036032 = 1044705792; at ctx ⌊/ 524288⌋ = 1992 (1992.6)
     *   used 256·257/2 = 32896; contiguous 256·256 = 65536
     *   pages Σ⌈L/16⌉ = 16·(1 + … + 16) = 2176 → 34816 tokens
     *   free pages ⌊1044705792 / 32768⌋ = 31881; paged sequences ⌊31881·256 / 2176⌋ = 3750 */
    int32_t L[256];
    for (int i = 0; i < 256; i++)
        L[i] = i + 1;
    const rt_budget b = plan(&m, GIB, 256, 16, "fp16", L, 256);
    ck_assert_uint_eq(b.kv_token_bytes, 2048);
    ck_assert_uint_eq(b.kv_seq_bytes, 524288);
    ck_assert_uint_eq(b.free_bytes, 1044705792);
    ck_assert_uint_eq(b.seqs_at_ctx, 1992);
    ck_assert_uint_eq(b.used_tokens, 32896);
    ck_assert_uint_eq(b.contiguous_tokens, 65536);
    ck_assert_uint_eq(b.paged_tokens, 34816);
    ck_assert_uint_eq(b.seqs_paged, 3750);
    /* int8: 2·4·4·(32 + 2) = 1088 */
    ck_assert_uint_eq(plan(&m, GIB, 256, 16, "int8", L, 256).kv_token_bytes, 1088);
}
END_TEST

START_TEST(llama_7b_shape)
{
    const cv_synth_shape *s = cv_synth_find("llama-7b");
    ck_assert_ptr_nonnull(s);
    /* 32 layers, dim 4096, hidden 11008, 32/32 heads, vocab 32000, untied:
     *   embeddings and classifier 2·32000·4096 = 262144000; per layer 4·4096² = 67108864 attention,
     *   3·11008·4096 = 135266304 MLP, 2·4096 norms; 65 norm vectors in all (266240 values)
     *   matrices 262144000 + 32·(67108864 + 135266304) = 6738149376 values
     *   fp16 matrices, fp32 vectors: 6738149376·2 + 266240·4 = 13477363712 bytes */
    const lmq_qparams fp16 = { .dtype = LMQ_T_F16 };
    rt_budget_model m = { .n_layers = s->n_layers, .n_kv_heads = s->n_kv_heads, .head_dim = s->dim / s->n_heads };
    lmq_err e;
    ck_assert_msg(cv_synth_stored_bytes(s, &fp16, &m.weight_bytes, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_uint_eq(m.weight_bytes, 13477363712ull);
    /* int4 g128: per matrix rows·cols/2 code bytes + rows·cols/128 fp16 scales = rows·cols·(1/2 + 1/64)
     *   6738149376·33/64 = 3474358272 (exact: every matrix's cols is a multiple of 128), + 1064960 */
    const lmq_qparams g128 = { .dtype = LMQ_T_INT4, .gran = LMQ_GRAN_GROUP, .group = 128 };
    uint64_t int4_bytes;
    ck_assert_msg(cv_synth_stored_bytes(s, &g128, &int4_bytes, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_uint_eq(int4_bytes, 3475423232ull);
    /* 80 GiB, ctx 4096, fp16 KV, uniform 1..4096, pages of 16:
     *   KV per token 2·32·32·128·2 = 524288 (512 KiB); per sequence 4096·512 KiB = 2 GiB
     *   free 85899345920 − 13477363712 = 72421982208; at ctx ⌊/ 2147483648⌋ = 33 (33.7)
     *   used 4096·4097/2 = 8390656; contiguous 4096² = 16777216 (waste 49.99 %)
     *   pages 16·(1 + … + 256) = 526336 → 8421376 tokens (waste 30720 / 8421376 = 0.365 %)
     *   free pages ⌊72421982208 / 8388608⌋ = 8633; paged sequences ⌊8633·4096 / 526336⌋ = 67 */
    int32_t *L = malloc(4096 * sizeof *L);
    for (int i = 0; i < 4096; i++)
        L[i] = i + 1;
    const rt_budget b = plan(&m, 80 * GIB, 4096, 16, "fp16", L, 4096);
    ck_assert_uint_eq(b.kv_token_bytes, 512 * 1024);
    ck_assert_uint_eq(b.kv_seq_bytes, 2 * GIB);
    ck_assert_uint_eq(b.free_bytes, 72421982208ull);
    ck_assert_uint_eq(b.seqs_at_ctx, 33);
    ck_assert_uint_eq(b.used_tokens, 8390656);
    ck_assert_uint_eq(b.contiguous_tokens, 16777216);
    ck_assert_uint_eq(b.paged_tokens, 8421376);
    ck_assert_double_eq_tol(b.contiguous_waste, 8386560.0 / 16777216, 1e-12);
    ck_assert_double_eq_tol(b.paged_waste, 30720.0 / 8421376, 1e-12);
    ck_assert_uint_eq(b.seqs_paged, 67);
    /* int8 KV, a scale per block of 32: 2·32·32·(128 + 4·2) = 278528 per token; int4
     * 2·32·32·(64 + 4·2) = 147456; bf16 as fp16, fp8 half of it */
    ck_assert_uint_eq(plan(&m, 80 * GIB, 4096, 16, "int8", L, 4096).kv_token_bytes, 278528);
    ck_assert_uint_eq(plan(&m, 80 * GIB, 4096, 16, "int4", L, 4096).kv_token_bytes, 147456);
    ck_assert_uint_eq(plan(&m, 80 * GIB, 4096, 16, "bf16", L, 4096).kv_token_bytes, 524288);
    ck_assert_uint_eq(plan(&m, 80 * GIB, 4096, 16, "fp8", L, 4096).kv_token_bytes, 262144);
    free(L);
}
END_TEST

/* Paging against a simulation: each sequence grows a token at a time and takes a new page when
 * the last is full; contiguous reserves ctx. Random lengths, several page sizes. */
START_TEST(paging_simulated)
{
    const rt_budget_model m = { .n_layers = 3, .n_kv_heads = 2, .head_dim = 16, .weight_bytes = 12345 };
    uint64_t seed = 7;
    int32_t L[500];
    const int ctx = 300;
    for (int i = 0; i < 500; i++)
        L[i] = 1 + (int32_t)(test_uniform(&seed) * ctx);
    const int pages[] = { 1, 7, 16, 64, 300 };
    for (size_t p = 0; p < sizeof pages / sizeof pages[0]; p++) {
        uint64_t used = 0, reserved = 0;
        for (int i = 0; i < 500; i++) {
            int have = 0; /* tokens the sequence's pages hold */
            for (int t = 0; t < L[i]; t++, used++)
                if (t == have)
                    have += pages[p], reserved += (uint64_t)pages[p];
        }
        const rt_budget b = plan(&m, 1ull << 30, ctx, pages[p], "fp16", L, 500);
        ck_assert_uint_eq(b.used_tokens, used);
        ck_assert_uint_eq(b.paged_tokens, reserved);
        ck_assert_uint_eq(b.contiguous_tokens, 500ull * ctx);
        ck_assert_double_eq_tol(b.paged_waste, 1 - (double)used / (double)reserved, 1e-12);
        /* 2·3·2·16·2 = 384 bytes a token; the paged mix fits ⌊free pages · 500 / pages used⌋ */
        const uint64_t free_pages = ((1ull << 30) - 12345) / (384ull * (uint64_t)pages[p]);
        ck_assert_uint_eq(b.seqs_paged, free_pages * 500 / (reserved / (uint64_t)pages[p]));
    }
}
END_TEST

/* What the plan refuses, each naming what is wrong. */
START_TEST(refusals)
{
    const rt_budget_model m = { .n_layers = 2, .n_kv_heads = 2, .head_dim = 4, .weight_bytes = 1000 };
    const int32_t L[] = { 3, 9 };
    const struct {
        uint64_t memory;
        int ctx, page;
        const char *want;
    } rows[] = {
        { 999, 8, 4, "do not fit" },      /* weights above memory */
        { 4096, 8, 4, "length 2 is 9" },  /* a length above ctx */
        { 4096, 8, 16, "page 16" },       /* a page beyond ctx */
        { 4096, 0, 1, "ctx 0" },
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        rt_budget_opts o = { .memory = rows[i].memory, .ctx = rows[i].ctx, .page = rows[i].page,
                             .kv = rt_kv_find("fp16"), .lengths = L, .n_lengths = 2 };
        rt_budget b;
        lmq_err e = { 0 };
        ck_assert_int_eq(rt_budget_plan(&m, &o, &b, &e), LMQ_E_ARG);
        ck_assert_msg(strstr(e.msg, rows[i].want), "row %zu: '%s' lacks '%s'", i, e.msg, rows[i].want);
    }
    ck_assert_ptr_null(rt_kv_find("q4_0"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("budget");
    TCase *tc = tcase_create("plan");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, stories260k);
    tcase_add_test(tc, sotu_gpt2);
    tcase_add_test(tc, llama_7b_shape);
    tcase_add_test(tc, paging_simulated);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
