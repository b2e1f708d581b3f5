/* calibrate/transform and calibrate/outliers on both fixture models (converted here):
 *   transform  random positive scales at every block's two norm-fed inputs leave a window's fp32
 *              logits unchanged within 1e-5 of their largest magnitude, on converted models, a
 *              GPT-2 with q, k, v apart, and an artefact's read-only views; the weights moved
 *              exactly as stated (norm × s, columns ÷ s); bad scales and non-fp32 tensors refused;
 *   outliers   the artefact round trip keeps the logits; the chosen channels' activations at the
 *              norm output grow by the factor; channels are seeded, distinct and recorded; bad
 *              arguments are errors that write nothing. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate/outliers.h"
#include "calibrate/transform.h"
#include "convert/convert.h"
#include "formats/artefact.h"
#include "formats/container.h"
#include "formats/manifest.h"
#include "quantize/quantize.h"
#include "runtime/artefact.h"
#include "runtime/forward.h"
#include "runtime/sample.h"
#include "tests/testutil.h"

#define WINDOW 48

static void convert(const char *rel, int split_qkv, lmq_model *m)
{
    lmq_err e;
    lmq_convert_opts o = { .split_qkv = split_qkv };
    ck_assert_msg(lmq_convert(fixture(rel), &o, m, &e) == LMQ_OK, "%s: %s", rel, e.msg);
}

/* A window of seeded tokens (BOS first where the model has one) and its fp32 logits. */
static float *logits_of(const lmq_model *m)
{
    lmq_err e;
    rt_model rm;
    lmq_pool *pool;
    rt_state *st;
    ck_assert_msg(rt_model_init(&rm, m, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(lmq_pool_create(2, &pool, &e) == LMQ_OK, "%s", e.msg);
    rt_exec ex = { .pool = pool, .isa = rt_isa_best() };
    ck_assert_msg(rt_state_create(&rm, &ex, WINDOW, &st, &e) == LMQ_OK, "%s", e.msg);
    rt_rng r;
    rt_rng_seed(&r, 7);
    int32_t tok[WINDOW];
    for (int i = 0; i < WINDOW; i++)
        tok[i] = i == 0 && m->arch.bos_id >= 0 ? m->arch.bos_id : (int32_t)(rt_rng_u32(&r) % (uint32_t)m->arch.vocab_size);
    float *lg = malloc((size_t)WINDOW * m->arch.vocab_size * sizeof *lg);
    ck_assert_msg(rt_forward(st, tok, WINDOW, 0, RT_LOGITS_ALL, lg, &e) == LMQ_OK, "%s", e.msg);
    rt_state_free(st);
    lmq_pool_free(pool);
    rt_model_free(&rm);
    return lg;
}

/* max |a − b| / max |a| over a window's logits. */
static double rel_change(const float *a, const float *b, const lmq_model *m)
{
    double d = 0, mag = 0;
    for (size_t i = 0; i < (size_t)WINDOW * m->arch.vocab_size; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        mag = fmax(mag, fabs((double)a[i]));
    }
    return d / mag;
}

static float *copy_of(const lmq_tensor *t)
{
    float *c = malloc((size_t)lmq_tensor_numel(t) * sizeof *c);
    memcpy(c, t->data, (size_t)lmq_tensor_numel(t) * sizeof *c);
    return c;
}

/* The attention output projection of block 0 (for a rows-out-of-range check). */
static lmq_tensor *out_of_range(const lmq_model *m) { return lmq_model_find(m, "blk.0.attn_out.weight"); }

/* Scales every block's two norm-fed inputs, and the inputs a layer produces where the function
 * allows, by random s in [0.1, 10]; checks layer 0's attention input moved exactly as stated;
 * then the logits. */
static void scale_everything(lmq_model *m, const char *what)
{
    lmq_err e;
    float *before = logits_of(m);
    const int dim = m->arch.dim;
    float *s = malloc((size_t)dim * sizeof *s);
    rt_rng r;
    rt_rng_seed(&r, 3);
    lmq_tensor *readers[CAL_MAX_READERS];
    const int n = cal_input_readers(m, 0, LMQ_IN_ATTN, readers);
    ck_assert_int_gt(n, 0);
    lmq_tensor *norm = lmq_model_find(m, "blk.0.attn_norm.weight");
    float *norm0 = copy_of(norm), *reader0 = copy_of(readers[n - 1]);
    for (int l = 0; l < m->arch.n_layers; l++)
        for (int k = 0; k < 2; k++) {
            const lmq_input which = k ? LMQ_IN_FFN : LMQ_IN_ATTN;
            for (int j = 0; j < dim; j++)
                s[j] = 0.1f * powf(100.0f, (float)(rt_rng_u32(&r) >> 8) / 16777216.0f);
            ck_assert_msg(cal_scale_norm_input(m, l, which, s, &e) == LMQ_OK, "%s: %s", what, e.msg);
            if (l == 0 && which == LMQ_IN_ATTN)
                for (int j = 0; j < dim; j++) {
                    ck_assert(norm->data[j] == norm0[j] * s[j]);
                    for (int64_t row = 0; row < readers[n - 1]->shape[0]; row += 7)
                        ck_assert(readers[n - 1]->data[row * dim + j] == reader0[row * dim + j] / s[j]);
                }
        }
    /* The inputs a layer produces: the values for the attention output (every head with its own
     * values), the up projection for Llama's down projection (silu(gate)·up is linear in up). */
    char name[3][LMQ_NAME_MAX];
    for (int l = 0; l < m->arch.n_layers; l++) {
        for (int j = 0; j < dim; j++)
            s[j] = 0.1f * powf(100.0f, (float)(rt_rng_u32(&r) >> 8) / 16777216.0f);
        lmq_tensor *v = NULL, *vb = NULL, *out;
        int64_t row0 = 0;
        snprintf(name[0], LMQ_NAME_MAX, "blk.%d.attn_v.weight", l);
        snprintf(name[1], LMQ_NAME_MAX, "blk.%d.attn_qkv.weight", l);
        snprintf(name[2], LMQ_NAME_MAX, "blk.%d.attn_out.weight", l);
        if (m->arch.n_kv_heads == m->arch.n_heads && (v = lmq_model_find(m, name[0]))) {
            snprintf(name[0], LMQ_NAME_MAX, "blk.%d.attn_v.bias", l);
            vb = lmq_model_find(m, name[0]);
        } else if (m->arch.n_kv_heads == m->arch.n_heads && (v = lmq_model_find(m, name[1]))) {
            snprintf(name[1], LMQ_NAME_MAX, "blk.%d.attn_qkv.bias", l);
            vb = lmq_model_find(m, name[1]);
            row0 = 2 * (int64_t)dim;
        }
        out = lmq_model_find(m, name[2]);
        if (v) {
            ck_assert_msg(cal_scale_rows(v, vb, row0, dim, s, &e) == LMQ_OK, "%s", e.msg);
            ck_assert_msg(cal_scale_columns(&out, 1, s, &e) == LMQ_OK, "%s", e.msg);
        }
        snprintf(name[0], LMQ_NAME_MAX, "blk.%d.ffn_gate.weight", l);
        snprintf(name[1], LMQ_NAME_MAX, "blk.%d.ffn_up.weight", l);
        snprintf(name[2], LMQ_NAME_MAX, "blk.%d.ffn_down.weight", l);
        if (lmq_model_find(m, name[0])) {
            const int hid = m->arch.hidden_dim;
            float *h = malloc((size_t)hid * sizeof *h);
            for (int j = 0; j < hid; j++)
                h[j] = 0.1f * powf(100.0f, (float)(rt_rng_u32(&r) >> 8) / 16777216.0f);
            lmq_tensor *down = lmq_model_find(m, name[2]);
            ck_assert_msg(cal_scale_rows(lmq_model_find(m, name[1]), NULL, 0, hid, h, &e) == LMQ_OK, "%s", e.msg);
            ck_assert_msg(cal_scale_columns(&down, 1, h, &e) == LMQ_OK, "%s", e.msg);
            free(h);
        }
    }
    ck_assert_int_eq(cal_scale_rows(out_of_range(m), NULL, 1, dim, s, &e), LMQ_E_ARG);
    float *after = logits_of(m);
    const double d = rel_change(before, after, m);
    printf("%s: logits moved by %.3g of their largest magnitude\n", what, d);
    ck_assert_msg(d <= 1e-5, "%s: logits moved by %.3g of their largest magnitude", what, d);
    free(before);
    free(after);
    free(norm0);
    free(reader0);
    free(s);
}

START_TEST(scaling_keeps_the_function)
{
    const struct { const char *rel; int split; } cases[] = { { STORIES, 0 }, { SOTU, 0 }, { SOTU, 1 } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lmq_model m;
        convert(cases[i].rel, cases[i].split, &m);
        scale_everything(&m, cases[i].rel);
        lmq_model_free(&m);
    }
}
END_TEST

/* An artefact's tensors are views into a read-only mapping: they are copied before they change. */
START_TEST(scaling_an_artefact)
{
    lmq_model m, a;
    lmq_err e;
    convert(STORIES, 0, &m);
    const char *dir = test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/fp32.lmq", dir);
    ck_assert_msg(lmq_container_write_model(path, &m, NULL, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(rt_load_artefact(path, &a, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_ptr_null(lmq_model_find(&a, "blk.2.ffn_up.weight")->owned);
    scale_everything(&a, "stories260K artefact");
    ck_assert_ptr_nonnull(lmq_model_find(&a, "blk.2.ffn_up.weight")->owned);
    lmq_model_free(&a);
    lmq_model_free(&m);
    test_rmtree(dir);
}
END_TEST

START_TEST(readers)
{
    static const struct { const char *rel; int split, input; const char *names[4]; } cases[] = {
        { STORIES, 0, LMQ_IN_ATTN, { "blk.3.attn_q.weight", "blk.3.attn_k.weight", "blk.3.attn_v.weight" } },
        { STORIES, 0, LMQ_IN_FFN, { "blk.3.ffn_gate.weight", "blk.3.ffn_up.weight" } },
        { SOTU, 0, LMQ_IN_ATTN, { "blk.3.attn_qkv.weight" } },
        { SOTU, 0, LMQ_IN_FFN, { "blk.3.ffn_up.weight" } },
        { SOTU, 1, LMQ_IN_ATTN, { "blk.3.attn_q.weight", "blk.3.attn_k.weight", "blk.3.attn_v.weight" } },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lmq_model m;
        lmq_tensor *r[CAL_MAX_READERS];
        convert(cases[i].rel, cases[i].split, &m);
        const int n = cal_input_readers(&m, 3, (lmq_input)cases[i].input, r);
        int want = 0;
        while (want < 4 && cases[i].names[want])
            want++;
        ck_assert_int_eq(n, want);
        for (int k = 0; k < n; k++)
            ck_assert_str_eq(r[k]->name, cases[i].names[k]);
        ck_assert_int_eq(cal_input_readers(&m, m.arch.n_layers, LMQ_IN_ATTN, r), 0);
        ck_assert_int_eq(cal_input_readers(&m, -1, LMQ_IN_FFN, r), 0);
        lmq_model_free(&m);
    }
}
END_TEST

START_TEST(bad_scales_and_encodings)
{
    lmq_model m, q;
    lmq_err e;
    convert(STORIES, 0, &m);
    const int dim = m.arch.dim;
    float *s = malloc((size_t)dim * sizeof *s);
    lmq_tensor *norm = lmq_model_find(&m, "blk.1.ffn_norm.weight");
    float *was = copy_of(norm);
    const float bad[] = { 0.0f, -1.0f, NAN, INFINITY };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (int j = 0; j < dim; j++)
            s[j] = j == 5 ? bad[i] : 2.0f;
        ck_assert_int_eq(cal_scale_norm_input(&m, 1, LMQ_IN_FFN, s, &e), LMQ_E_ARG);
        ck_assert_msg(strstr(e.msg, "blk.1.ffn_norm") && strstr(e.msg, "channel 5"), "%s", e.msg);
        ck_assert(!memcmp(norm->data, was, (size_t)dim * sizeof *was));
    }
    for (int j = 0; j < dim; j++)
        s[j] = 2.0f;
    ck_assert_int_eq(cal_scale_norm_input(&m, m.arch.n_layers, LMQ_IN_FFN, s, &e), LMQ_E_ARG);

    /* Quantised readers are refused by name, and the norm is left as it was. */
    const char *dir = test_tmpdir();
    char in[256], out[256];
    snprintf(in, sizeof in, "%s/fp32.lmq", dir);
    snprintf(out, sizeof out, "%s/int8.lmq", dir);
    ck_assert_msg(lmq_container_write_model(in, &m, NULL, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(q_quantize_file(in, "recipes/int8-channel.yaml", out, NULL, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(rt_load_artefact(out, &q, &e) == LMQ_OK, "%s", e.msg);
    float *qnorm = copy_of(lmq_model_find(&q, "blk.1.ffn_norm.weight"));
    ck_assert_int_eq(cal_scale_norm_input(&q, 1, LMQ_IN_FFN, s, &e), LMQ_E_UNSUPPORTED);
    ck_assert_msg(strstr(e.msg, "blk.1.ffn_gate.weight") && strstr(e.msg, "fp32"), "%s", e.msg);
    ck_assert(!memcmp(lmq_model_find(&q, "blk.1.ffn_norm.weight")->data, qnorm, (size_t)dim * sizeof *qnorm));
    free(qnorm);
    lmq_model_free(&q);
    test_rmtree(dir);
    free(was);
    free(s);
    lmq_model_free(&m);
}
END_TEST

/* ---- outliers ---- */

START_TEST(channels_seeded_and_distinct)
{
    lmq_err e;
    enum { DIM = 64, LAYERS = 5, CH = 7 };
    int a[LAYERS * 2 * CH], b[LAYERS * 2 * CH], c[LAYERS * 2 * CH];
    cal_outlier_opts o = { .channels = CH, .factor = 30, .seed = 1 };
    ck_assert_int_eq(cal_outlier_channels(&o, DIM, LAYERS, a, &e), LMQ_OK);
    ck_assert_int_eq(cal_outlier_channels(&o, DIM, LAYERS, b, &e), LMQ_OK);
    ck_assert(!memcmp(a, b, sizeof a));
    o.seed = 2;
    ck_assert_int_eq(cal_outlier_channels(&o, DIM, LAYERS, c, &e), LMQ_OK);
    ck_assert(memcmp(a, c, sizeof a));
    int differ = 0;
    for (int set = 0; set < LAYERS * 2; set++) {
        for (int k = 0; k < CH; k++) {
            ck_assert(a[set * CH + k] >= 0 && a[set * CH + k] < DIM);
            if (k)
                ck_assert_int_lt(a[set * CH + k - 1], a[set * CH + k]);
        }
        differ += set && memcmp(a + set * CH, a, CH * sizeof *a) != 0;
    }
    ck_assert_int_gt(differ, 0); /* not one set repeated */
    /* All channels: every one once. */
    int all[LAYERS * 2 * DIM];
    o.channels = DIM;
    ck_assert_int_eq(cal_outlier_channels(&o, DIM, LAYERS, all, &e), LMQ_OK);
    for (int k = 0; k < DIM; k++)
        ck_assert_int_eq(all[k], k);
}
END_TEST

/* Paths of one run's files. */
typedef struct {
    const char *dir;
    char fp32[256], out[256];
} files;

static void fp32_artefact(const char *rel, files *f)
{
    lmq_model m;
    lmq_err e;
    convert(rel, 0, &m);
    f->dir = test_tmpdir();
    snprintf(f->fp32, sizeof f->fp32, "%s/fp32.lmq", f->dir);
    snprintf(f->out, sizeof f->out, "%s/outliers.lmq", f->dir);
    ck_assert_msg(lmq_container_write_model(f->fp32, &m, NULL, &e) == LMQ_OK, "%s", e.msg);
    lmq_model_free(&m);
}

/* Max |x_j| per channel at block 0's attention input over the window: the runtime's embedding
 * lookup (token, and position for GPT-2), then the norm written out here. */
static void attn_input_max(const lmq_model *m, float *mx)
{
    lmq_err e;
    rt_model rm;
    ck_assert_msg(rt_model_init(&rm, m, &e) == LMQ_OK, "%s", e.msg);
    const int d = m->arch.dim;
    float *x = malloc((size_t)d * sizeof *x), *p = malloc((size_t)d * sizeof *p);
    const float *w = rm.layers[0].attn_norm_w, *b = rm.layers[0].attn_norm_b;
    for (int j = 0; j < d; j++)
        mx[j] = 0;
    for (int t = 0; t < WINDOW; t++) {
        ck_assert(rt_weight_rows(&rt_kernels_scalar, &rm.tok_embd, (t * 37) % m->arch.vocab_size, 1, x, &e) ==
                  LMQ_OK);
        if (b) {
            ck_assert(rt_weight_rows(&rt_kernels_scalar, &rm.pos_embd, t, 1, p, &e) == LMQ_OK);
            for (int j = 0; j < d; j++)
                x[j] += p[j];
        }
        double mean = 0, ss = 0;
        for (int j = 0; j < d; j++)
            mean += b ? x[j] / (double)d : 0;
        for (int j = 0; j < d; j++)
            ss += (x[j] - mean) * (x[j] - mean);
        const double inv = 1 / sqrt(ss / d + m->arch.norm_eps);
        for (int j = 0; j < d; j++)
            mx[j] = fmaxf(mx[j], fabsf((float)((x[j] - mean) * inv * w[j] + (b ? b[j] : 0))));
    }
    free(x);
    free(p);
    rt_model_free(&rm);
}

START_TEST(outliers_keep_the_function)
{
    const char *models[] = { STORIES, SOTU };
    for (int k = 0; k < 2; k++) {
        files f;
        lmq_err e;
        lmq_model a, b;
        fp32_artefact(models[k], &f);
        const cal_outlier_opts o = { .channels = 4, .factor = 30, .seed = 1 };
        ck_assert_msg(cal_outliers_file(f.fp32, f.out, &o, &e) == LMQ_OK, "%s", e.msg);
        ck_assert_msg(rt_load_artefact(f.fp32, &a, &e) == LMQ_OK, "%s", e.msg);
        ck_assert_msg(rt_load_artefact(f.out, &b, &e) == LMQ_OK, "%s", e.msg);
        float *la = logits_of(&a), *lb = logits_of(&b);
        const double d = rel_change(la, lb, &a);
        printf("%s with outliers: logits moved by %.3g of their largest magnitude\n", models[k], d);
        ck_assert_msg(d <= 1e-5, "%s: logits moved by %.3g", models[k], d);

        /* The chosen channels, and only they, grow by the factor at the norm output... */
        const int dim = a.arch.dim, L = a.arch.n_layers;
        int *ch = malloc((size_t)L * 2 * o.channels * sizeof *ch);
        ck_assert_int_eq(cal_outlier_channels(&o, dim, L, ch, &e), LMQ_OK);
        float *ma = malloc((size_t)dim * sizeof *ma), *mb = malloc((size_t)dim * sizeof *mb);
        attn_input_max(&a, ma);
        attn_input_max(&b, mb);
        for (int j = 0, c = 0; j < dim; j++) {
            const int chosen = c < o.channels && ch[c] == j;
            c += chosen;
            const double ratio = mb[j] / ma[j];
            ck_assert_msg(fabs(ratio / (chosen ? o.factor : 1) - 1) < 1e-4, "%s: channel %d%s grew %.6g times",
                          models[k], j, chosen ? " (chosen)" : "", ratio);
        }
        /* ...in every block: the norms carry the factor on the chosen channels alone. */
        char name[64];
        for (int set = 0; set < 2 * L; set++) {
            snprintf(name, sizeof name, "blk.%d.%s_norm.weight", set / 2, set % 2 ? "ffn" : "attn");
            const float *wa = lmq_model_find(&a, name)->data, *wb = lmq_model_find(&b, name)->data;
            for (int j = 0, c = 0; j < dim; j++) {
                const int chosen = c < o.channels && ch[set * o.channels + c] == j;
                c += chosen;
                ck_assert_msg(wb[j] == (chosen ? wa[j] * o.factor : wa[j]), "%s: %s[%d]", models[k], name, j);
            }
        }
        /* The manifest says what was done. */
        lmq_container c;
        lmq_manifest man;
        ck_assert_int_eq(lmq_container_open_manifest(&c, &man, f.out, &e), LMQ_OK);
        char want[128];
        snprintf(want, sizeof want, "blk.0.attn_in %d %d %d %d;", ch[0], ch[1], ch[2], ch[3]);
        ck_assert_msg(strstr(man.source_notes, "4 channels of each norm-fed input scaled by 30") &&
                      strstr(man.source_notes, "seed 1") && strstr(man.source_notes, want),
                      "%s", man.source_notes);
        ck_assert_msg(strstr(man.source_notes, a.notes), "the import's notes are kept");
        lmq_manifest_free(&man);
        lmq_container_close(&c);
        free(ch);
        free(ma);
        free(mb);
        free(la);
        free(lb);
        lmq_model_free(&a);
        lmq_model_free(&b);
        test_rmtree(f.dir);
    }
}
END_TEST

static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));)
        n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    closedir(d);
    return n;
}

START_TEST(outliers_bad_arguments)
{
    files f;
    lmq_err e;
    fp32_artefact(STORIES, &f);
    const struct { cal_outlier_opts o; const char *expect; } cases[] = {
        { { 4, 0.0f, 1 }, "factor 0 is not finite and positive" },
        { { 4, -30.0f, 1 }, "factor -30 is not finite and positive" },
        { { 4, NAN, 1 }, "is not finite and positive" },
        { { 4, INFINITY, 1 }, "is not finite and positive" },
        { { 65, 30.0f, 1 }, "65 channels per block and input: the model's width is 64" },
        { { 0, 30.0f, 1 }, "0 channels per block" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_int_eq(cal_outliers_file(f.fp32, f.out, &cases[i].o, &e), LMQ_E_ARG);
        ck_assert_msg(strstr(e.msg, cases[i].expect), "case %zu: %s", i, e.msg);
        ck_assert_int_eq(entries(f.dir), 1); /* nothing written, no temporary file left */
    }
    char q[256];
    snprintf(q, sizeof q, "%s/w8a8.lmq", f.dir);
    ck_assert_msg(q_quantize_file(f.fp32, "recipes/w8a8.yaml", q, NULL, &e) == LMQ_OK, "%s", e.msg);
    const cal_outlier_opts o = { 4, 30.0f, 1 };
    ck_assert_int_eq(cal_outliers_file(q, f.out, &o, &e), LMQ_E_UNSUPPORTED);
    ck_assert_msg(strstr(e.msg, "fp32 artefact") && strstr(e.msg, "is int8"), "%s", e.msg);
    ck_assert_int_eq(entries(f.dir), 2);
    test_rmtree(f.dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("transform");
    TCase *tc = tcase_create("transform");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, scaling_keeps_the_function);
    tcase_add_test(tc, scaling_an_artefact);
    tcase_add_test(tc, readers);
    tcase_add_test(tc, bad_scales_and_encodings);
    suite_add_tcase(s, tc);
    tc = tcase_create("outliers");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, channels_seeded_and_distinct);
    tcase_add_test(tc, outliers_keep_the_function);
    tcase_add_test(tc, outliers_bad_arguments);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
