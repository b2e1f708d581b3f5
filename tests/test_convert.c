/* convert/: Hugging Face import (GPT-2, Llama; single, sharded, F16/BF16) and dispatch.
 * Every imported tensor is compared bit for bit with the source read independently through
 * the st_ API, under the test's own statement of the name map and the GPT-2 transposition;
 * damaged checkpoints each give their own message naming the tensor or file. */
#include <math.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/file.h"
#include "common/fp.h"
#include "convert/convert.h"
#include "formats/artefact.h"
#include "formats/container.h"
#include "formats/safetensors.h"
#include "tests/testutil.h"

/* ---- scratch space ------------------------------------------------------------------- */

static char scratch[64];

static void scratch_up(void)
{
    snprintf(scratch, sizeof scratch, "%s", test_tmpdir());
}

static void scratch_down(void)
{
    test_rmtree(scratch);
}

/* <scratch>/<sub>, created. */
static const char *subdir(const char *sub, char *out)
{
    snprintf(out, 512, "%s/%s", scratch, sub);
    ck_assert_int_eq(mkdir(out, 0755), 0);
    return out;
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void copy_file(const char *src, const char *dir, const char *name)
{
    lmq_blob b;
    lmq_err e;
    ck_assert_msg(lmq_blob_open(src, &b, &e) == LMQ_OK, "%s", e.msg);
    char dst[1024];
    snprintf(dst, sizeof dst, "%s/%s", dir, name);
    write_bytes(dst, b.data, b.size);
    lmq_blob_close(&b);
}

/* Copies a fixture's config.json into dir, replacing the text `from` (which must occur) by `to`. */
static void write_config(const char *fixture_dir, const char *dir, const char *from, const char *to)
{
    char src[1024];
    snprintf(src, sizeof src, "%s/config.json", fixture(fixture_dir));
    lmq_blob b;
    lmq_err e;
    ck_assert_int_eq(lmq_blob_open(src, &b, &e), LMQ_OK);
    char *text = calloc(1, b.size + 1 + (to ? strlen(to) : 0));
    memcpy(text, b.data, b.size);
    lmq_blob_close(&b);
    if (from) {
        char *p = strstr(text, from);
        ck_assert_msg(p != NULL, "config has no \"%s\"", from);
        memmove(p + strlen(to), p + strlen(from), strlen(p + strlen(from)) + 1);
        memcpy(p, to, strlen(to));
    }
    char dst[1024];
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    write_bytes(dst, text, strlen(text));
    free(text);
}

static int contains(const char *msg, const char *needle)
{
    return strstr(msg, needle) != NULL;
}

/* ---- a checkpoint held as fp32 arrays, to edit and write back ------------------------------ */

typedef struct {
    char name[160];
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    int64_t numel;
    float *data;
} ck_tensor;

typedef struct {
    ck_tensor t[256];
    int n;
} ckpt;

static void ck_load(ckpt *c, const char *path)
{
    st_file f;
    lmq_err e;
    ck_assert_msg(st_open(path, &f, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_le(f.n_tensors, 256);
    c->n = 0;
    for (int i = 0; i < f.n_tensors; i++) {
        const st_tensor *s = &f.tensors[i];
        ck_tensor *t = &c->t[c->n++];
        snprintf(t->name, sizeof t->name, "%s", s->name);
        t->ndim = s->ndim;
        memcpy(t->shape, s->shape, sizeof t->shape);
        t->numel = s->numel;
        t->data = malloc((size_t)(s->numel ? s->numel : 1) * sizeof(float));
        ck_assert_int_eq(st_read_f32(&f, s, t->data, &e), LMQ_OK);
    }
    st_close(&f);
}

static void ck_free(ckpt *c)
{
    for (int i = 0; i < c->n; i++)
        free(c->t[i].data);
    c->n = 0;
}

static ck_tensor *ck_get(ckpt *c, const char *name)
{
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->t[i].name, name))
            return &c->t[i];
    ck_abort_msg("no tensor %s", name);
    return NULL;
}

static void ck_drop(ckpt *c, const char *name)
{
    ck_tensor *t = ck_get(c, name);
    free(t->data);
    *t = c->t[--c->n];
}

/* Appends a tensor (values: a copy of src, or zeros). */
static ck_tensor *ck_add(ckpt *c, const char *name, int ndim, const int64_t *shape, const float *src)
{
    ck_assert_int_lt(c->n, 256);
    ck_tensor *t = &c->t[c->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->numel = 1;
    for (int i = 0; i < ndim; i++)
        t->numel *= (t->shape[i] = shape[i]);
    t->data = calloc((size_t)t->numel, sizeof(float));
    if (src)
        memcpy(t->data, src, (size_t)t->numel * sizeof(float));
    return t;
}

/* Writes tensors [from, to) of c as dtype into path. */
static void ck_write(const ckpt *c, int from, int to, st_dtype dtype, const char *path)
{
    st_out *o = calloc((size_t)(to - from), sizeof *o);
    for (int i = from; i < to; i++)
        o[i - from] = (st_out){ c->t[i].name, dtype, c->t[i].ndim, c->t[i].shape, c->t[i].data };
    lmq_err e;
    ck_assert_msg(st_write(path, o, to - from, &e) == LMQ_OK, "%s", e.msg);
    free(o);
}

/* A checkpoint directory: c as <dir>/model.safetensors, the fixture's config (edited), and the
 * named files copied from the fixture directory. */
static void ck_dir(const ckpt *c, st_dtype dtype, const char *fixture_dir, const char *dir, const char *cfg_from,
                   const char *cfg_to, const char *const *files)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ck_write(c, 0, c->n, dtype, path);
    write_config(fixture_dir, dir, cfg_from, cfg_to);
    for (; files && *files; files++) {
        snprintf(path, sizeof path, "%s/%s", fixture_dir, *files);
        copy_file(fixture(path), dir, *files);
    }
}

static float rounded(st_dtype d, float v)
{
    return d == ST_F16 ? lmq_f16_to_f32(lmq_f32_to_f16(v)) : d == ST_BF16 ? lmq_bf16_to_f32(lmq_f32_to_bf16(v)) : v;
}

/* ---- the expected mapping, stated independently of convert/hf.c ------------------------- */

/* Canonical name of a Hugging Face tensor (prefix already removed); "" for ignored buffers. */
static void expect_name(int gpt2, const char *hf, char *canon, int *transposed)
{
    static const char *const gpt2_layer[][3] = {
        { "ln_1.weight", "attn_norm.weight", "" },         { "ln_1.bias", "attn_norm.bias", "" },
        { "attn.c_attn.weight", "attn_qkv.weight", "T" },  { "attn.c_attn.bias", "attn_qkv.bias", "" },
        { "attn.c_proj.weight", "attn_out.weight", "T" },  { "attn.c_proj.bias", "attn_out.bias", "" },
        { "ln_2.weight", "ffn_norm.weight", "" },          { "ln_2.bias", "ffn_norm.bias", "" },
        { "mlp.c_fc.weight", "ffn_up.weight", "T" },       { "mlp.c_fc.bias", "ffn_up.bias", "" },
        { "mlp.c_proj.weight", "ffn_down.weight", "T" },   { "mlp.c_proj.bias", "ffn_down.bias", "" },
        { "attn.bias", "", "" },                           { "attn.masked_bias", "", "" },
    };
    static const char *const llama_layer[][3] = {
        { "input_layernorm.weight", "attn_norm.weight", "" },
        { "self_attn.q_proj.weight", "attn_q.weight", "" },
        { "self_attn.k_proj.weight", "attn_k.weight", "" },
        { "self_attn.v_proj.weight", "attn_v.weight", "" },
        { "self_attn.o_proj.weight", "attn_out.weight", "" },
        { "post_attention_layernorm.weight", "ffn_norm.weight", "" },
        { "mlp.gate_proj.weight", "ffn_gate.weight", "" },
        { "mlp.up_proj.weight", "ffn_up.weight", "" },
        { "mlp.down_proj.weight", "ffn_down.weight", "" },
        { "self_attn.rotary_emb.inv_freq", "", "" },
    };
    static const char *const top[][2] = {
        { "wte.weight", "tok_embd.weight" },   { "wpe.weight", "pos_embd.weight" }, { "ln_f.weight", "out_norm.weight" },
        { "ln_f.bias", "out_norm.bias" },      { "embed_tokens.weight", "tok_embd.weight" },
        { "norm.weight", "out_norm.weight" },  { "lm_head.weight", "output.weight" },
    };
    *transposed = 0;
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (!strcmp(hf, top[i][0])) {
            strcpy(canon, top[i][1]);
            return;
        }
    int layer, n = 0;
    ck_assert_msg(sscanf(hf, gpt2 ? "h.%d.%n" : "layers.%d.%n", &layer, &n) == 1 && n > 0, "unmapped %s", hf);
    const char *const(*rows)[3] = gpt2 ? gpt2_layer : llama_layer;
    size_t nrows = gpt2 ? sizeof gpt2_layer / sizeof gpt2_layer[0] : sizeof llama_layer / sizeof llama_layer[0];
    for (size_t i = 0; i < nrows; i++)
        if (!strcmp(hf + n, rows[i][0])) {
            if (rows[i][1][0])
                sprintf(canon, "blk.%d.%s", layer, rows[i][1]);
            else
                canon[0] = '\0';
            *transposed = rows[i][2][0] == 'T';
            return;
        }
    ck_abort_msg("unmapped %s", hf);
}

/* Every weight of src (stored as dtype) is in m under its canonical name, equal bit for bit to
 * the dtype-rounded source value, transposed where GPT-2 stores [in, out]; m has nothing else
 * except what `skip` names (a classifier that repeats the embedding). */
static void expect_same(const lmq_model *m, ckpt *src, st_dtype dtype, const char *skip)
{
    const int gpt2 = m->arch.family == LMQ_FAMILY_GPT2;
    const char *prefix = gpt2 ? "transformer." : "model.";
    int matched = 0;
    for (int k = 0; k < src->n; k++) {
        const ck_tensor *s = &src->t[k];
        if (skip && !strcmp(s->name, skip))
            continue;
        const char *bare = strncmp(s->name, prefix, strlen(prefix)) ? s->name : s->name + strlen(prefix);
        char canon[160];
        int tr;
        expect_name(gpt2, bare, canon, &tr);
        if (!canon[0])
            continue;
        const lmq_tensor *t = lmq_model_find(m, canon);
        ck_assert_msg(t != NULL, "%s (%s) not imported", canon, s->name);
        ck_assert_int_eq(t->ndim, s->ndim);
        for (int d = 0; d < s->ndim; d++)
            ck_assert_int_eq(t->shape[d], s->shape[tr ? 1 - d : d]);
        const int64_t rows = s->shape[0], cols = s->ndim > 1 ? s->shape[1] : 1;
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) {
                const float want = rounded(dtype, s->data[i * cols + j]);
                const float got = tr ? t->data[j * rows + i] : t->data[i * cols + j];
                if (lmq_f32_bits(got) != lmq_f32_bits(want))
                    ck_abort_msg("%s [%lld, %lld]: %a, source %a", canon, (long long)i, (long long)j, (double)got,
                                 (double)want);
            }
        matched++;
    }
    ck_assert_int_eq(matched, m->n_tensors);
}

/* XXH3-64 of the named files' bytes, concatenated in order. */
static uint64_t files_hash(const char *const *paths)
{
    size_t total = 0, at = 0;
    lmq_blob b[8];
    lmq_err e;
    int n = 0;
    for (; paths[n]; n++) {
        ck_assert_int_eq(lmq_blob_open(paths[n], &b[n], &e), LMQ_OK);
        total += b[n].size;
    }
    uint8_t *all = malloc(total);
    for (int i = 0; i < n; i++) {
        memcpy(all + at, b[i].data, b[i].size);
        at += b[i].size;
        lmq_blob_close(&b[i]);
    }
    uint64_t h = XXH3_64bits(all, total);
    free(all);
    return h;
}

static void expect_file(const lmq_model *m, const char *stored, const char *path)
{
    const lmq_file *f = lmq_model_find_file(m, stored);
    ck_assert_msg(f != NULL, "no carried file %s", stored);
    lmq_blob b;
    lmq_err e;
    ck_assert_int_eq(lmq_blob_open(path, &b, &e), LMQ_OK);
    ck_assert_uint_eq(f->size, b.size);
    ck_assert(!memcmp(f->data, b.data, b.size));
    lmq_blob_close(&b);
}

static void convert_ok(const char *src, const char *tokenizer, lmq_model *m)
{
    lmq_err e = { 0 };
    lmq_convert_opts o = { .tokenizer = tokenizer };
    lmq_code c = lmq_convert(src, &o, m, &e);
    ck_assert_msg(c == LMQ_OK, "%s: %s", src, e.msg);
}

/* lmq_convert must fail; the message must contain both needles. */
static void convert_fails(const char *src, const char *tokenizer, const char *needle1, const char *needle2)
{
    lmq_model m;
    lmq_err e = { 0 };
    lmq_convert_opts o = { .tokenizer = tokenizer };
    lmq_code c = lmq_convert(src, &o, &m, &e);
    ck_assert_msg(c != LMQ_OK, "%s converted", src);
    ck_assert_msg(contains(e.msg, needle1), "message lacks \"%s\": %s", needle1, e.msg);
    if (needle2)
        ck_assert_msg(contains(e.msg, needle2), "message lacks \"%s\": %s", needle2, e.msg);
    ck_assert_int_eq(m.n_tensors, 0);
    ck_assert_int_eq(m.n_files, 0);
}

#define STORIES_HF "stories260K-hf"
static const char *const TOK512[] = { "tok512.bin", NULL };

static void load_stories(ckpt *c)
{
    ck_load(c, fixture(STORIES_HF "/model.safetensors"));
}

/* ---- the fixtures ----------------------------------------------------------------------- */

START_TEST(gpt2_fixture)
{
    lmq_model m;
    convert_ok(fixture(SOTU), NULL, &m);
    const lmq_arch *a = &m.arch;
    ck_assert_int_eq(a->family, LMQ_FAMILY_GPT2);
    ck_assert_int_eq(a->dim, 128);
    ck_assert_int_eq(a->n_layers, 4);
    ck_assert_int_eq(a->n_heads, 4);
    ck_assert_int_eq(a->n_kv_heads, 4);
    ck_assert_int_eq(a->hidden_dim, 512); /* n_inner null: 4 × n_embd */
    ck_assert_int_eq(a->vocab_size, 50257);
    ck_assert_int_eq(a->max_seq, 256);
    ck_assert_float_eq(a->norm_eps, 1e-5f);
    ck_assert_int_eq(a->tied_embedding, 1);
    ck_assert_int_eq(a->rope, LMQ_ROPE_NONE);
    ck_assert_int_eq(a->tokenizer, LMQ_TOK_GPT2);
    ck_assert_int_eq(a->bos_id, 50256);
    ck_assert_int_eq(a->eos_id, 50256);
    ckpt src;
    ck_load(&src, fixture(SOTU "/model.safetensors"));
    ck_assert_int_eq(src.n, 52);
    expect_same(&m, &src, ST_F32, NULL);
    ck_free(&src);
    ck_assert_int_eq(m.n_files, 2);
    expect_file(&m, "vocab.json", fixture(SOTU "/vocab.json"));
    expect_file(&m, "merges.txt", fixture(SOTU "/merges.txt"));
    char cfg[512], st[512];
    snprintf(cfg, sizeof cfg, "%s", fixture(SOTU "/config.json"));
    snprintf(st, sizeof st, "%s", fixture(SOTU "/model.safetensors"));
    ck_assert_uint_eq(m.source_checksum, files_hash((const char *const[]){ cfg, st, NULL }));
    ck_assert_str_eq(m.source, fixture(SOTU));
    ck_assert_msg(contains(m.notes, "Conv1D weights (c_attn, attn.c_proj, c_fc, mlp.c_proj) transposed to [out, in]"),
                  "%s", m.notes);
    ck_assert_msg(contains(m.notes, "tied"), "%s", m.notes);
    lmq_model_free(&m);
}
END_TEST

/* --split-qkv: attn_q / attn_k / attn_v are the row thirds of the fused canonical attn_qkv, bit
 * for bit, biases too; nothing else changes. */
START_TEST(gpt2_split_qkv)
{
    lmq_model f, sp;
    lmq_err e = { 0 };
    lmq_convert_opts o = { .split_qkv = 1 };
    convert_ok(fixture(SOTU), NULL, &f);
    ck_assert_msg(lmq_convert(fixture(SOTU), &o, &sp, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(sp.n_tensors, f.n_tensors + 4 * f.arch.n_layers);
    const int64_t d = f.arch.dim;
    for (int l = 0; l < f.arch.n_layers; l++)
        for (int b = 0; b < 2; b++) {
            char n[LMQ_NAME_MAX];
            snprintf(n, sizeof n, "blk.%d.attn_qkv.%s", l, b ? "bias" : "weight");
            const lmq_tensor *fused = lmq_model_find(&f, n);
            ck_assert_ptr_nonnull(fused);
            ck_assert_ptr_null(lmq_model_find(&sp, n));
            for (int i = 0; i < 3; i++) {
                snprintf(n, sizeof n, "blk.%d.attn_%c.%s", l, "qkv"[i], b ? "bias" : "weight");
                const lmq_tensor *t = lmq_model_find(&sp, n);
                ck_assert_msg(t != NULL, "%s missing", n);
                ck_assert_int_eq(t->ndim, b ? 1 : 2);
                ck_assert_int_eq(t->shape[0], d);
                if (!b)
                    ck_assert_int_eq(t->shape[1], d);
                const size_t k = (size_t)(b ? d : d * d);
                ck_assert_msg(!memcmp(t->data, fused->data + i * k, k * sizeof(float)), "%s is not rows %lld.. of %s",
                              n, (long long)(i * d), fused->name);
            }
        }
    for (int i = 0; i < f.n_tensors; i++) {
        const lmq_tensor *a = &f.tensors[i], *b = lmq_model_find(&sp, a->name);
        ck_assert_msg(contains(a->name, "attn_qkv") ||
                          (b && !memcmp(a->data, b->data, (size_t)lmq_tensor_numel(a) * sizeof(float))),
                      "%s differs", a->name);
    }
    ck_assert_msg(contains(sp.notes, "split by rows into attn_q, attn_k, attn_v"), "%s", sp.notes);
    ck_assert_msg(contains(f.notes, "fused c_attn kept as attn_qkv"), "%s", f.notes);
    ck_assert_uint_eq(sp.source_checksum, f.source_checksum);

    /* Validation: fused or separate per layer, never a mix, and no partial set. */
    lmq_tensor *t;
    const int64_t shape[1] = { 3 * d };
    ck_assert_int_eq(lmq_model_add(&sp, "blk.2.attn_qkv.bias", 1, shape, &t, &e), LMQ_OK);
    ck_assert_int_eq(lmq_model_validate(&sp, &e), LMQ_E_FORMAT);
    ck_assert_msg(contains(e.msg, "blk.2.attn_qkv") && contains(e.msg, "both fused and separate"), "%s", e.msg);
    sp.n_tensors--;
    free(t->data);
    t = lmq_model_find(&sp, "blk.1.attn_k.bias");
    snprintf(t->name, sizeof t->name, "blk.1.attn_k.other");
    ck_assert_int_eq(lmq_model_validate(&sp, &e), LMQ_E_FORMAT);
    ck_assert_msg(contains(e.msg, "tensor blk.1.attn_k.bias: missing"), "%s", e.msg);
    lmq_model_free(&sp);
    lmq_model_free(&f);

    /* Llama sources hold q, k, v separately already. */
    const char *llama[] = { fixture(STORIES_HF), fixture(STORIES) };
    for (int i = 0; i < 2; i++) {
        lmq_model m;
        ck_assert_int_eq(lmq_convert(llama[i], &o, &m, &e), LMQ_E_ARG);
        ck_assert_msg(contains(e.msg, "nothing to split: q, k, v are separate already"), "%s", e.msg);
        ck_assert_int_eq(m.n_tensors, 0);
    }
}
END_TEST

START_TEST(llama_fixture)
{
    lmq_model m;
    convert_ok(fixture(STORIES_HF), NULL, &m);
    const lmq_arch *a = &m.arch;
    ck_assert_int_eq(a->family, LMQ_FAMILY_LLAMA);
    ck_assert_int_eq(a->dim, 64);
    ck_assert_int_eq(a->hidden_dim, 172);
    ck_assert_int_eq(a->n_layers, 5);
    ck_assert_int_eq(a->n_heads, 8);
    ck_assert_int_eq(a->n_kv_heads, 4);
    ck_assert_int_eq(a->vocab_size, 512);
    ck_assert_int_eq(a->max_seq, 512);
    ck_assert_float_eq(a->norm_eps, 1e-5f);
    ck_assert_float_eq(a->rope_theta, 10000.0f);
    ck_assert_int_eq(a->tied_embedding, 1);
    ck_assert_int_eq(a->rope, LMQ_ROPE_HALF);
    ck_assert_int_eq(a->tokenizer, LMQ_TOK_LLAMA2C);
    ck_assert_int_eq(a->bos_id, 1);
    ck_assert_int_eq(a->eos_id, 2);
    ckpt src;
    load_stories(&src);
    expect_same(&m, &src, ST_F32, NULL);
    ck_free(&src);
    ck_assert_int_eq(m.n_files, 1);
    expect_file(&m, "tokenizer.bin", fixture(STORIES_HF "/tok512.bin"));
    ck_assert_msg(contains(m.notes, "rope: half (HF rotate_half)"), "%s", m.notes);
    char cfg[512], st[512];
    snprintf(cfg, sizeof cfg, "%s", fixture(STORIES_HF "/config.json"));
    snprintf(st, sizeof st, "%s", fixture(STORIES_HF "/model.safetensors"));
    const uint64_t want = files_hash((const char *const[]){ cfg, st, NULL });
    ck_assert_uint_eq(m.source_checksum, want);
    lmq_model_free(&m);
    /* The same weights named by their file: same import, same checksum. */
    convert_ok(st, NULL, &m);
    ck_assert_int_eq(m.n_tensors, 47);
    ck_assert_uint_eq(m.source_checksum, want);
    lmq_model_free(&m);
}
END_TEST

/* The HF copy of stories260K against the llama2.c original: v/o/FFN/norms/embedding equal
 * exactly; q/k rows stay as HF stored them — permuted for rotate_half: within each head, HF
 * row i is llama2.c row 2i and HF row hd/2 + i is llama2.c row 2i + 1 — with rope recorded. */
START_TEST(llama2c_vs_hf)
{
    lmq_model hf, l2c;
    convert_ok(fixture(STORIES_HF), NULL, &hf);
    convert_ok(fixture(STORIES), NULL, &l2c);
    ck_assert_int_eq(hf.arch.rope, LMQ_ROPE_HALF);
    ck_assert_int_eq(l2c.arch.rope, LMQ_ROPE_INTERLEAVED);
    ck_assert_int_eq(hf.n_tensors, l2c.n_tensors);
    const int dim = 64, hd = 8;
    int permuted_rows = 0;
    for (int i = 0; i < l2c.n_tensors; i++) {
        const lmq_tensor *b = &l2c.tensors[i], *a = lmq_model_find(&hf, b->name);
        ck_assert_msg(a != NULL, "%s missing from the HF import", b->name);
        ck_assert_int_eq(lmq_tensor_numel(a), lmq_tensor_numel(b));
        const int q = contains(b->name, "attn_q."), k = contains(b->name, "attn_k.");
        if (!q && !k) {
            ck_assert_msg(!memcmp(a->data, b->data, (size_t)lmq_tensor_numel(a) * 4), "%s differs", b->name);
            continue;
        }
        const int heads = (int)(b->shape[0] / hd);
        for (int h = 0; h < heads; h++)
            for (int r = 0; r < hd / 2; r++)
                for (int half = 0; half < 2; half++) {
                    const float *row_hf = a->data + (size_t)(h * hd + half * hd / 2 + r) * dim;
                    const float *row_l2c = b->data + (size_t)(h * hd + 2 * r + half) * dim;
                    ck_assert_msg(!memcmp(row_hf, row_l2c, (size_t)dim * 4), "%s head %d pair %d", b->name, h, r);
                    permuted_rows += memcmp(row_hf, b->data + (size_t)(h * hd + half * hd / 2 + r) * dim, dim * 4) != 0;
                }
    }
    ck_assert_int_gt(permuted_rows, 0); /* the HF rows really are in another order */
    lmq_model_free(&hf);
    lmq_model_free(&l2c);
}
END_TEST

/* ---- 16-bit and sharded copies --------------------------------------------------------- */

/* Stories260K in F16, with the rotary inv_freq buffers older HF versions save (ignored). */
START_TEST(llama_f16_copy)
{
    ckpt src;
    load_stories(&src);
    for (int l = 0; l < 5; l++) {
        char name[64];
        snprintf(name, sizeof name, "model.layers.%d.self_attn.rotary_emb.inv_freq", l);
        ck_add(&src, name, 1, (const int64_t[]){ 4 }, NULL)->data[0] = 1.0f;
    }
    char dir[512];
    ck_dir(&src, ST_F16, STORIES_HF, subdir("f16", dir), NULL, NULL, TOK512);
    lmq_model m;
    convert_ok(dir, NULL, &m);
    expect_same(&m, &src, ST_F16, NULL);
    ck_assert_msg(contains(m.notes, "F16 weights widened to fp32 exactly"), "%s", m.notes);
    ck_assert_msg(contains(m.notes, "5 non-weight buffers ignored"), "%s", m.notes);
    lmq_model_free(&m);
    ck_free(&src);
}
END_TEST

/* GPT-2 in BF16 with the "transformer." prefix, the attention-mask buffers older HF versions
 * save, and an lm_head.weight that repeats wte (tied: dropped); the config gives the context
 * only as n_ctx, as older ones do. */
START_TEST(gpt2_bf16_prefixed)
{
    ckpt src;
    ck_load(&src, fixture(SOTU "/model.safetensors"));
    for (int i = 0; i < src.n; i++) {
        char name[160];
        snprintf(name, sizeof name, "transformer.%s", src.t[i].name);
        strcpy(src.t[i].name, name);
    }
    const ck_tensor *wte = ck_get(&src, "transformer.wte.weight");
    ck_add(&src, "lm_head.weight", 2, wte->shape, wte->data);
    const int64_t mask[4] = { 1, 1, 256, 256 };
    for (int l = 0; l < 4; l++) {
        char name[64];
        snprintf(name, sizeof name, "transformer.h.%d.attn.bias", l);
        ck_add(&src, name, 4, mask, NULL);
        snprintf(name, sizeof name, "transformer.h.%d.attn.masked_bias", l);
        ck_add(&src, name, 0, mask, NULL)->data[0] = -1e4f;
    }
    char dir[512];
    ck_dir(&src, ST_BF16, SOTU, subdir("bf16", dir), "\"n_positions\": 256,", "",
           (const char *const[]){ "vocab.json", "merges.txt", NULL });
    lmq_model m;
    convert_ok(dir, NULL, &m);
    ck_assert_int_eq(m.arch.max_seq, 256);
    ck_assert_int_eq(m.arch.tied_embedding, 1);
    ck_assert_ptr_null(lmq_model_find(&m, "output.weight"));
    expect_same(&m, &src, ST_BF16, "lm_head.weight");
    ck_assert_msg(contains(m.notes, "BF16 weights widened"), "%s", m.notes);
    ck_assert_msg(contains(m.notes, "lm_head.weight equals the token embedding"), "%s", m.notes);
    ck_assert_msg(contains(m.notes, "8 non-weight buffers ignored"), "%s", m.notes);
    lmq_model_free(&m);
    ck_free(&src);
}
END_TEST

/* The classifier: kept when the config unties it, kept (and the model untied) when it differs
 * from the embedding, and required when untied. */
START_TEST(llama_classifier)
{
    ckpt src;
    load_stories(&src);
    const ck_tensor *emb = ck_get(&src, "model.embed_tokens.weight");
    ck_tensor *head = ck_add(&src, "lm_head.weight", 2, emb->shape, emb->data);
    for (int64_t i = 0; i < head->numel; i++)
        head->data[i] *= 0.5f;
    char dir[512];
    lmq_model m;
    ck_dir(&src, ST_F32, STORIES_HF, subdir("untied", dir), "\"tie_word_embeddings\": true",
           "\"tie_word_embeddings\": false", TOK512);
    convert_ok(dir, NULL, &m);
    ck_assert_int_eq(m.arch.tied_embedding, 0);
    expect_same(&m, &src, ST_F32, NULL);
    lmq_model_free(&m);

    ck_dir(&src, ST_F32, STORIES_HF, subdir("differs", dir), NULL, NULL, TOK512);
    convert_ok(dir, NULL, &m);
    ck_assert_int_eq(m.arch.tied_embedding, 0);
    ck_assert_msg(contains(m.notes, "lm_head.weight differs from the token embedding: untied"), "%s", m.notes);
    expect_same(&m, &src, ST_F32, NULL);
    lmq_model_free(&m);

    ck_drop(&src, "lm_head.weight");
    ck_dir(&src, ST_F32, STORIES_HF, subdir("nohead", dir), "\"tie_word_embeddings\": true",
           "\"tie_word_embeddings\": false", TOK512);
    convert_fails(dir, NULL, "tensor output.weight: missing", "lm_head.weight");
    ck_free(&src);
}
END_TEST

/* Writes src as 3 shards plus an index (weight_map listed in reverse, so the shard order must
 * come from sorting, not from the map). Returns the shard paths in order via paths[1..3]. */
static void write_sharded(const ckpt *src, const char *dir, char paths[5][1024])
{
    const int cut[4] = { 0, 16, 32, src->n };
    char map[16384] = "{\"metadata\": {\"total_size\": 1}, \"weight_map\": {";
    for (int i = src->n - 1; i >= 0; i--) {
        const int s = i < cut[1] ? 1 : i < cut[2] ? 2 : 3;
        char e[256];
        snprintf(e, sizeof e, "%s\"%s\": \"model-%05d-of-00003.safetensors\"", i == src->n - 1 ? "" : ", ",
                 src->t[i].name, s);
        strcat(map, e);
    }
    strcat(map, "}}");
    snprintf(paths[0], 1024, "%s/config.json", dir);
    snprintf(paths[1], 1024, "%s/model.safetensors.index.json", dir);
    write_bytes(paths[1], map, strlen(map));
    for (int s = 1; s <= 3; s++) {
        snprintf(paths[s + 1], 1024, "%s/model-%05d-of-00003.safetensors", dir, s);
        ck_write(src, cut[s - 1], cut[s], ST_F32, paths[s + 1]);
    }
    write_config(STORIES_HF, dir, NULL, NULL);
    copy_file(fixture(STORIES_HF "/tok512.bin"), dir, "tok512.bin");
}

START_TEST(llama_sharded)
{
    ckpt src;
    load_stories(&src);
    char dir[512], paths[5][1024];
    write_sharded(&src, subdir("sharded", dir), paths);
    lmq_model m;
    convert_ok(dir, NULL, &m);
    expect_same(&m, &src, ST_F32, NULL);
    ck_assert_uint_eq(m.source_checksum,
                      files_hash((const char *const[]){ paths[0], paths[1], paths[2], paths[3], paths[4], NULL }));
    const uint64_t sum = m.source_checksum;
    lmq_model_free(&m);
    convert_ok(paths[1], NULL, &m); /* the index named directly */
    expect_same(&m, &src, ST_F32, NULL);
    ck_assert_uint_eq(m.source_checksum, sum);
    lmq_model_free(&m);
    ck_free(&src);
}
END_TEST

START_TEST(sharded_errors)
{
    ckpt src;
    load_stories(&src);
    char dir[512], paths[5][1024];

    write_sharded(&src, subdir("missing", dir), paths);
    ck_assert_int_eq(unlink(paths[4]), 0);
    convert_fails(dir, NULL, "shard model-00003-of-00003.safetensors", "is missing");

    /* Shard 2 also holds a tensor the index puts in shard 1. */
    write_sharded(&src, subdir("twice", dir), paths);
    ck_write(&src, 15, 32, ST_F32, paths[3]);
    convert_fails(dir, NULL, src.t[15].name, "is in two shards");

    /* A shard holds a tensor the index does not list. */
    write_sharded(&src, subdir("unlisted", dir), paths);
    ck_add(&src, "model.layers.0.extra.weight", 1, src.t[0].shape, NULL);
    ck_write(&src, 32, src.n, ST_F32, paths[4]);
    convert_fails(dir, NULL, "model.layers.0.extra.weight is not listed in the index", NULL);
    ck_drop(&src, "model.layers.0.extra.weight");

    /* The index names a tensor its shard does not hold. */
    write_sharded(&src, subdir("absent", dir), paths);
    const char *idx = "{\"weight_map\": {\"model.norm.weight\": \"model-00001-of-00003.safetensors\"}}";
    write_bytes(paths[1], idx, strlen(idx));
    convert_fails(dir, NULL, "model.norm.weight is mapped to shard model-00001-of-00003.safetensors", "does not hold it");

    /* Shard names must stay inside the checkpoint directory. */
    idx = "{\"weight_map\": {\"model.norm.weight\": \"../model-00001-of-00003.safetensors\"}}";
    write_bytes(paths[1], idx, strlen(idx));
    convert_fails(dir, NULL, "weight_map entry model.norm.weight is not a plain shard file name", NULL);
    write_bytes(paths[1], "{\"weight_map\": 3}", 17);
    convert_fails(dir, NULL, "no weight_map object", NULL);
    ck_free(&src);
}
END_TEST

/* ---- damaged checkpoints ----------------------------------------------------------------- */

START_TEST(config_errors)
{
    ckpt src;
    load_stories(&src);
    char dir[512];
    static const struct { const char *from, *to, *needle; } cases[] = {
        { "\"model_type\": \"llama\"", "\"model_type\": \"mamba\"", "unsupported model_type \"mamba\"" },
        { "LlamaForCausalLM", "LlamaForSequenceClassification",
          "architecture LlamaForSequenceClassification is not supported for model_type llama" },
        { "\"hidden_size\"", "\"hidden_sz\"", "config.json: hidden_size is missing" },
        { "\"num_hidden_layers\": 5", "\"num_hidden_layers\": -5", "num_hidden_layers is not a positive integer" },
        { "\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"", "hidden_act \"gelu\" is not supported" },
        { "\"rope_theta\": 10000.0", "\"rope_theta\": 10000.0, \"rope_scaling\": {\"type\": \"linear\"}",
          "rope_scaling is not supported" },
        { "{", "[", "config.json: not valid JSON" },
        /* head_dim * num_attention_heads wraps to hidden_size (2^61 + 8 times 8 is 2^64 + 64):
         * signed overflow, which let the config through (found while fuzzing). */
        { "\"rope_theta\": 10000.0", "\"rope_theta\": 10000.0, \"head_dim\": 2305843009213693960",
          "head_dim is not hidden_size / num_attention_heads" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char sub[32];
        snprintf(sub, sizeof sub, "cfg%zu", i);
        ck_dir(&src, ST_F32, STORIES_HF, subdir(sub, dir), cases[i].from, cases[i].to, TOK512);
        convert_fails(dir, NULL, cases[i].needle, "config.json");
    }
    subdir("noconfig", dir);
    char st[1024];
    snprintf(st, sizeof st, "%s/model.safetensors", dir);
    ck_write(&src, 0, src.n, ST_F32, st);
    convert_fails(dir, NULL, "no config.json beside the weights", NULL);
    convert_fails(st, NULL, "no config.json beside the weights", NULL);
    ck_free(&src);
}
END_TEST

START_TEST(weight_errors)
{
    ckpt src;
    char dir[512];

    load_stories(&src);
    ck_drop(&src, "model.layers.2.mlp.up_proj.weight");
    ck_dir(&src, ST_F32, STORIES_HF, subdir("missing", dir), NULL, NULL, TOK512);
    convert_fails(dir, NULL, "tensor blk.2.ffn_up.weight: missing", "model.layers.2.mlp.up_proj.weight");
    ck_free(&src);

    load_stories(&src);
    ck_drop(&src, "model.layers.1.self_attn.k_proj.weight");
    ck_add(&src, "model.layers.1.self_attn.k_proj.weight", 2, (const int64_t[]){ 64, 64 }, NULL);
    ck_dir(&src, ST_F32, STORIES_HF, subdir("shape", dir), NULL, NULL, TOK512);
    convert_fails(dir, NULL, "tensor blk.1.attn_k.weight: shape [64, 64] expected [32, 64]",
                  "model.layers.1.self_attn.k_proj.weight");
    ck_free(&src);

    load_stories(&src);
    ck_get(&src, "model.layers.3.self_attn.o_proj.weight")->data[100] = NAN;
    ck_dir(&src, ST_F32, STORIES_HF, subdir("nan", dir), NULL, NULL, TOK512);
    convert_fails(dir, NULL, "tensor blk.3.attn_out.weight: non-finite value nan at element 100",
                  "model.layers.3.self_attn.o_proj.weight");
    ck_free(&src);

    /* 1e5 is beyond half's range: the F16 copy holds Inf. */
    load_stories(&src);
    ck_get(&src, "model.norm.weight")->data[7] = 1e5f;
    ck_dir(&src, ST_F16, STORIES_HF, subdir("inf", dir), NULL, NULL, TOK512);
    convert_fails(dir, NULL, "tensor out_norm.weight: non-finite value inf", "model.norm.weight");
    ck_free(&src);

    load_stories(&src);
    ck_add(&src, "model.layers.0.self_attn.q_norm.weight", 1, (const int64_t[]){ 8 }, NULL);
    ck_dir(&src, ST_F32, STORIES_HF, subdir("unexpected", dir), NULL, NULL, TOK512);
    convert_fails(dir, NULL, "unexpected tensor model.layers.0.self_attn.q_norm.weight", "model.safetensors");
    ck_free(&src);

    load_stories(&src);
    ck_add(&src, "model.layers.9.input_layernorm.weight", 1, (const int64_t[]){ 64 }, NULL);
    ck_dir(&src, ST_F32, STORIES_HF, subdir("layer", dir), NULL, NULL, TOK512);
    convert_fails(dir, NULL, "unexpected tensor model.layers.9.input_layernorm.weight: layer 9, but config.json has 5",
                  NULL);
    ck_free(&src);

    /* The same weight with and without the prefix. */
    load_stories(&src);
    ck_add(&src, "norm.weight", 1, (const int64_t[]){ 64 }, NULL);
    ck_dir(&src, ST_F32, STORIES_HF, subdir("twice", dir), NULL, NULL, TOK512);
    convert_fails(dir, NULL, "tensors model.norm.weight and norm.weight are both out_norm.weight", NULL);
    ck_free(&src);
}
END_TEST

/* ---- tokenizers ------------------------------------------------------------------------ */

/* A Hugging Face tokenizer.json of GPT-2's 256 byte tokens (ids = byte values), no merges. */
static char *byte_level_json(void)
{
    json_t *vocab = json_object();
    for (unsigned b = 0, extra = 0; b < 256; b++) {
        /* GPT-2's byte-to-character map: printable Latin-1 bytes stand for themselves, the rest
         * for U+0100 onwards in byte order */
        const unsigned cp = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174 ? b : 256 + extra++;
        char u[3] = { (char)cp, 0, 0 };
        if (cp >= 0x80) {
            u[0] = (char)(0xc0 | cp >> 6);
            u[1] = (char)(0x80 | (cp & 0x3f));
        }
        json_object_set_new(vocab, u, json_integer(b));
    }
    json_t *root = json_pack("{s:{s:s, s:o, s:[]}, s:{s:s}}", "model", "type", "BPE", "vocab", vocab, "merges",
                             "pre_tokenizer", "type", "ByteLevel");
    ck_assert_ptr_nonnull(root);
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return text;
}

START_TEST(tokenizers)
{
    ckpt src;
    load_stories(&src);
    char dir[512], path[1024];
    lmq_model m;

    ck_dir(&src, ST_F32, STORIES_HF, subdir("none", dir), NULL, NULL, NULL);
    convert_fails(dir, NULL, "no tokenizer found", "pass --tokenizer");
    convert_ok(dir, fixture(STORIES_HF "/tok512.bin"), &m);
    ck_assert_int_eq(m.arch.tokenizer, LMQ_TOK_LLAMA2C);
    expect_file(&m, "tokenizer.bin", fixture(STORIES_HF "/tok512.bin"));
    lmq_model_free(&m);

    /* vocab.json named explicitly brings merges.txt from beside it; a directory is searched (for
     * GPT-2: the tokenizer must fit the model's vocabulary, which stories260K's 512 do not). */
    char sotu[512], tok512[512];
    snprintf(sotu, sizeof sotu, "%s", fixture(SOTU)); /* fixture()'s buffer is reused */
    snprintf(tok512, sizeof tok512, "%s", fixture(STORIES_HF "/tok512.bin"));
    convert_ok(sotu, fixture("gpt2-tokenizer/vocab.json"), &m);
    ck_assert_int_eq(m.arch.tokenizer, LMQ_TOK_GPT2);
    expect_file(&m, "vocab.json", fixture("gpt2-tokenizer/vocab.json"));
    expect_file(&m, "merges.txt", fixture("gpt2-tokenizer/merges.txt"));
    lmq_model_free(&m);
    convert_ok(sotu, fixture("gpt2-tokenizer"), &m);
    ck_assert_int_eq(m.arch.tokenizer, LMQ_TOK_GPT2);
    ck_assert_int_eq(m.n_files, 2);
    lmq_model_free(&m);
    convert_fails(dir, fixture("gpt2-tokenizer"), "tokenizer for a 512-token model",
                  "tokenizer has 50257 tokens but the model only 512");
    convert_fails(sotu, tok512, "tokenizer for a 50257-token model", "token 512");
    convert_fails(dir, fixture("text/sotu-eval.txt"), "not a tokenizer lmq knows", NULL);
    convert_fails(dir, "/nonexistent/tokenizer.json", "/nonexistent/tokenizer.json", "not found");

    /* tokenizer.json beside the weights: one that does not parse is refused, a byte-level
     * vocabulary of 256 tokens is carried. */
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    write_bytes(path, "{\"model\": {}}", 13);
    convert_fails(dir, NULL, "tokenizer for a 512-token model: tokenizer.json: ", NULL);
    char *js = byte_level_json();
    write_bytes(path, js, strlen(js));
    free(js);
    convert_ok(dir, NULL, &m);
    ck_assert_int_eq(m.arch.tokenizer, LMQ_TOK_HF_JSON);
    expect_file(&m, "tokenizer.json", path);
    lmq_model_free(&m);
    ck_assert_int_eq(unlink(path), 0);

    /* vocab.json alone is not a tokenizer; two tok*.bin are ambiguous. */
    copy_file(fixture("gpt2-tokenizer/vocab.json"), dir, "vocab.json");
    convert_fails(dir, NULL, "vocab.json: found without merges.txt", NULL);
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    ck_assert_int_eq(unlink(path), 0);
    copy_file(fixture(STORIES_HF "/tok512.bin"), dir, "tok512.bin");
    copy_file(fixture(STORIES_HF "/tok512.bin"), dir, "tok4096.bin");
    convert_fails(dir, NULL, "several tokenizers", "--tokenizer");
    ck_free(&src);
}
END_TEST

/* lmq convert streams (lmq_convert_plan, then lmq_container_write_stream) what lmq_convert loads
 * whole: the two artefacts are the same bytes for every fixture, with and without --zstd and
 * --split-qkv. */
START_TEST(streamed_equals_loaded)
{
    static const struct { const char *src, *tokenizer; int split; } cases[] = {
        { STORIES, NULL, 0 }, { "stories260K-hf", NULL, 0 }, { SOTU, NULL, 0 },
        { SOTU, NULL, 1 }, { NULL, "gpt2-tokenizer", 0 }, { NULL, "gpt2-tokenizer", 1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int codec = 0; codec < LMQ_CODEC_COUNT; codec++) {
            char src[512], tok[512], whole[512], streamed[512];
            snprintf(src, sizeof src, "%s", cases[i].src ? fixture(cases[i].src) : "demo/sotu-gpt2");
            snprintf(tok, sizeof tok, "%s", cases[i].tokenizer ? fixture(cases[i].tokenizer) : "");
            snprintf(whole, sizeof whole, "%s/whole.lmq", scratch);
            snprintf(streamed, sizeof streamed, "%s/streamed.lmq", scratch);
            const lmq_convert_opts o = { .tokenizer = tok[0] ? tok : NULL, .split_qkv = cases[i].split };
            lmq_model m;
            lmq_plan p;
            lmq_err e = { 0 };
            ck_assert_msg(lmq_convert(src, &o, &m, &e) == LMQ_OK, "%s", e.msg);
            ck_assert_msg(lmq_container_write_model_codec(whole, &m, NULL, (lmq_codec)codec, &e) == LMQ_OK, "%s", e.msg);
            lmq_model_free(&m);
            ck_assert_msg(lmq_convert_plan(src, &o, &p, &e) == LMQ_OK, "%s", e.msg);
            ck_assert_msg(lmq_container_write_stream(streamed, &p.model, lmq_plan_produce, &p, (lmq_codec)codec, &e) ==
                              LMQ_OK, "%s", e.msg);
            lmq_plan_free(&p);
            lmq_blob a, b;
            ck_assert_int_eq(lmq_blob_open(whole, &a, &e), LMQ_OK);
            ck_assert_int_eq(lmq_blob_open(streamed, &b, &e), LMQ_OK);
            ck_assert_msg(a.size == b.size && !memcmp(a.data, b.data, a.size), "%s (split %d, codec %d): streamed "
                          "artefact differs", src, cases[i].split, codec);
            lmq_blob_close(&a);
            lmq_blob_close(&b);
        }
}
END_TEST

START_TEST(dispatch)
{
    convert_fails(fixture("text/sotu-eval.txt"), NULL, "cannot tell what checkpoint this is", NULL);
    convert_fails("/nonexistent/model", NULL, "/nonexistent/model: no such file or directory", NULL);
    convert_fails(fixture("stories260K"), NULL, "no model.safetensors", "name its .bin file");
    lmq_model m;
    convert_ok(fixture(STORIES), NULL, &m);
    ck_assert_int_eq(m.arch.rope, LMQ_ROPE_INTERLEAVED);
    ck_assert_ptr_nonnull(lmq_model_find_file(&m, "tokenizer.bin"));
    lmq_model_free(&m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("convert");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, scratch_up, scratch_down);
    tcase_add_test(tc, gpt2_fixture);
    tcase_add_test(tc, gpt2_split_qkv);
    tcase_add_test(tc, llama_fixture);
    tcase_add_test(tc, llama2c_vs_hf);
    tcase_add_test(tc, llama_f16_copy);
    tcase_add_test(tc, gpt2_bf16_prefixed);
    tcase_add_test(tc, llama_classifier);
    tcase_add_test(tc, llama_sharded);
    tcase_add_test(tc, sharded_errors);
    tcase_add_test(tc, config_errors);
    tcase_add_test(tc, weight_errors);
    tcase_add_test(tc, tokenizers);
    tcase_add_test(tc, streamed_equals_loaded);
    tcase_add_test(tc, dispatch);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
