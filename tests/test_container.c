/* formats/container + formats/manifest: round trips, determinism, atomic writes, and hostile
 * input (every truncation, every single-bit flip, hand-crafted bad indexes).
 *
 * With LMQ_WRITE_SAMPLE=<path> in the environment the program only writes the sample
 * artefact there and exits (LMQ_SAMPLE_KIND=unlisted: one whose manifest misses a tensor; the
 * kinds of write_hostile: one with a thing a loader refuses; with LMQ_RESIGN_FROM=<artefact> and
 * LMQ_RESIGN_MANIFEST=<yaml>: that artefact with this manifest, and the entry LMQ_RESIGN_ZERO
 * zeroed when set, checksums recomputed):
 * tests/integration/audit.sh and arch_fields.sh use it to get files to corrupt. */
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/file.h"
#include "common/stats.h"
#include "convert/convert.h"
#include "formats/artefact.h"
#include "formats/container.h"
#include "formats/manifest.h"
#include "runtime/artefact.h"
#include "schemes/scheme.h"
#include "tests/testutil.h"

/* ---- helpers ---- */

static uint32_t rng(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(*s >> 32);
}

static lmq_code add_tensor(lmq_model *m, const char *name, int64_t d0, int64_t d1, uint64_t *seed, float fill,
                           lmq_err *e)
{
    int64_t shape[2] = { d0, d1 };
    lmq_tensor *t;
    lmq_code rc = lmq_model_add(m, name, d1 ? 2 : 1, shape, &t, e);
    for (int64_t i = 0; !rc && i < lmq_tensor_numel(t); i++)
        t->data[i] = fill != 0 ? fill : (float)rng(seed) / 4294967296.0f * 2.0f - 1.0f;
    return rc;
}

static lmq_code add_file(lmq_model *m, const char *name, size_t n, uint64_t *seed, const char *text, lmq_err *e)
{
    uint8_t *d = malloc(n ? n : 1);
    if (!d)
        return lmq_fail(e, LMQ_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        d[i] = text ? (uint8_t)text[i % strlen(text)] : (uint8_t)rng(seed);
    return lmq_model_add_file(m, name, d, n, e);
}

/* A small Llama model (complete: what a reader refuses otherwise): random matrices, constant norms (zstd shrinks those), a random
 * carried file (zstd cannot), a text file (it can) and an empty one. No Check asserts here:
 * the sample mode of main() uses it outside any test. */
static lmq_code make_model(lmq_model *m, lmq_err *e)
{
    uint64_t seed = 42;
    lmq_model_init(m);
    m->arch = (lmq_arch){ .family = LMQ_FAMILY_LLAMA, .dim = 8, .hidden_dim = 64, .n_layers = 1, .n_heads = 2,
                          .n_kv_heads = 1, .vocab_size = 16, .max_seq = 32, .norm_eps = 1e-5f,
                          .rope_theta = 10000.0f, .tied_embedding = 1, .rope = LMQ_ROPE_INTERLEAVED,
                          .tokenizer = LMQ_TOK_NONE, .bos_id = 1, .eos_id = 2 };
    snprintf(m->source, sizeof m->source, "in-memory test model: \"quoted\", colons: yes");
    snprintf(m->notes, sizeof m->notes, "random weights\nconstant norms\n");
    m->source_checksum = 0x0123456789abcdefULL;
    lmq_code rc;
    if ((rc = add_tensor(m, "tok_embd.weight", 16, 8, &seed, 0, e)) ||
        (rc = add_tensor(m, "blk.0.attn_norm.weight", 8, 0, &seed, 1.0f, e)) ||
        (rc = add_tensor(m, "blk.0.attn_q.weight", 8, 8, &seed, 0, e)) ||
        (rc = add_tensor(m, "blk.0.attn_v.weight", 4, 8, &seed, 0, e)) ||
        (rc = add_tensor(m, "blk.0.ffn_down.weight", 8, 64, &seed, 0, e)) ||
        (rc = add_tensor(m, "blk.0.ffn_norm.weight", 8, 0, &seed, 1.0f, e)) ||
        (rc = add_tensor(m, "out_norm.weight", 8, 0, &seed, 0.5f, e)) ||
        (rc = add_tensor(m, "blk.0.attn_k.weight", 4, 8, &seed, 0, e)) ||
        (rc = add_tensor(m, "blk.0.attn_out.weight", 8, 8, &seed, 0, e)) ||
        (rc = add_tensor(m, "blk.0.ffn_gate.weight", 64, 8, &seed, 0, e)) ||
        (rc = add_tensor(m, "blk.0.ffn_up.weight", 64, 8, &seed, 0, e)) ||
        (rc = add_file(m, "random.bin", 300, &seed, NULL, e)) ||
        (rc = add_file(m, "notes.txt", 400, &seed, "the quick brown fox. ", e)) ||
        (rc = add_file(m, "empty.txt", 0, &seed, NULL, e)))
        lmq_model_free(m);
    return rc;
}

static lmq_code write_sample(const char *path, lmq_codec codec, lmq_err *e)
{
    lmq_model m;
    lmq_code rc = make_model(&m, e);
    if (rc)
        return rc;
    rc = lmq_container_write_model_codec(path, &m, NULL, codec, e);
    lmq_model_free(&m);
    return rc;
}

static uint8_t *load(const char *path, size_t *n)
{
    lmq_blob b;
    lmq_err e;
    ck_assert_int_eq(lmq_blob_open(path, &b, &e), LMQ_OK);
    uint8_t *d = malloc(b.size ? b.size : 1);
    ck_assert_ptr_nonnull(d);
    memcpy(d, b.data, b.size);
    *n = b.size;
    lmq_blob_close(&b);
    return d;
}

static void save(const char *path, const void *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(d, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* Names in a directory, to show that failed writes leave no temporary files behind. */
static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    closedir(d);
    return n;
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++, v >>= 8)
        p[i] = (uint8_t)v;
}

/* Recomputes the index, manifest and file checksums after a deliberate edit, so the edit
 * itself is what the reader must catch. */
static void reseal(uint8_t *d, size_t n)
{
    uint8_t *f = d + n - 64;
    uint64_t io = get_le(f, 8), is = get_le(f + 8, 8), mo = get_le(f + 16, 8), ms = get_le(f + 24, 8);
    if (io <= n && is <= n - io)
        put_le(f + 32, XXH3_64bits(d + io, is), 8);
    if (mo <= n && ms <= n - mo)
        put_le(f + 40, XXH3_64bits(d + mo, ms), 8);
    put_le(f + 48, XXH3_64bits(d, n - 16), 8);
}

typedef struct {
    int n;
    char names[64][LMQ_NAME_MAX];
    lmq_code codes[64];
} issues;

static void collect(void *ctx, const char *tensor, lmq_code code, const char *msg)
{
    issues *is = ctx;
    ck_assert_ptr_nonnull(msg);
    if (is->n < 64) {
        snprintf(is->names[is->n], LMQ_NAME_MAX, "%s", tensor ? tensor : "");
        is->codes[is->n] = code;
    }
    is->n++;
}

static int has_issue(const issues *is, const char *name)
{
    for (int i = 0; i < is->n && i < 64; i++)
        if (!strcmp(is->names[i], name))
            return 1;
    return 0;
}

static int float_bits_equal(float a, float b)
{
    return !memcmp(&a, &b, sizeof a);
}

static void assert_models_equal(const lmq_model *a, const lmq_model *b)
{
    ck_assert_int_eq(a->arch.family, b->arch.family);
    ck_assert_int_eq(a->arch.dim, b->arch.dim);
    ck_assert_int_eq(a->arch.hidden_dim, b->arch.hidden_dim);
    ck_assert_int_eq(a->arch.n_layers, b->arch.n_layers);
    ck_assert_int_eq(a->arch.n_heads, b->arch.n_heads);
    ck_assert_int_eq(a->arch.n_kv_heads, b->arch.n_kv_heads);
    ck_assert_int_eq(a->arch.vocab_size, b->arch.vocab_size);
    ck_assert_int_eq(a->arch.max_seq, b->arch.max_seq);
    ck_assert(float_bits_equal(a->arch.norm_eps, b->arch.norm_eps));
    ck_assert(float_bits_equal(a->arch.rope_theta, b->arch.rope_theta));
    ck_assert_int_eq(a->arch.tied_embedding, b->arch.tied_embedding);
    ck_assert_int_eq(a->arch.rope, b->arch.rope);
    ck_assert_int_eq(a->arch.tokenizer, b->arch.tokenizer);
    ck_assert_int_eq(a->arch.bos_id, b->arch.bos_id);
    ck_assert_int_eq(a->arch.eos_id, b->arch.eos_id);
    ck_assert_int_eq(a->n_tensors, b->n_tensors);
    for (int i = 0; i < a->n_tensors; i++) {
        const lmq_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        ck_assert_str_eq(x->name, y->name);
        ck_assert_int_eq(x->ndim, y->ndim);
        ck_assert(!memcmp(x->shape, y->shape, sizeof x->shape[0] * (size_t)x->ndim));
        ck_assert(!memcmp(x->data, y->data, (size_t)lmq_tensor_numel(x) * sizeof(float)));
    }
    ck_assert_int_eq(a->n_files, b->n_files);
    for (int i = 0; i < a->n_files; i++) {
        ck_assert_str_eq(a->files[i].name, b->files[i].name);
        ck_assert_uint_eq(a->files[i].size, b->files[i].size);
        ck_assert(!a->files[i].size || !memcmp(a->files[i].data, b->files[i].data, a->files[i].size));
    }
    ck_assert_str_eq(a->source, b->source);
    ck_assert_str_eq(a->notes, b->notes);
    ck_assert_uint_eq(a->source_checksum, b->source_checksum);
}

/* ---- round trips and determinism ---- */

START_TEST(model_round_trip)
{
    static const lmq_codec codecs[] = { LMQ_CODEC_NONE, LMQ_CODEC_ZSTD };
    const char *dir = test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/m.lmq", dir);
    for (size_t k = 0; k < 2; k++) {
        lmq_model m, back;
        lmq_err e = { 0 };
        ck_assert_int_eq(make_model(&m, &e), LMQ_OK);
        ck_assert_msg(lmq_container_write_model_codec(path, &m, NULL, codecs[k], &e) == LMQ_OK, "%s", e.msg);
        ck_assert_msg(lmq_container_read_model(path, NULL, &back, &e) == LMQ_OK, "%s", e.msg);
        assert_models_equal(&m, &back);

        /* Per-tensor codec choice: zstd only where it shrinks the bytes. */
        lmq_container c;
        ck_assert_int_eq(lmq_container_open(&c, path, &e), LMQ_OK);
        ck_assert_int_eq(c.n_tensors, m.n_tensors + m.n_files);
        int zstd = 0;
        for (int i = 0; i < c.n_tensors; i++) {
            const lmq_tensor_entry *t = &c.tensors[i];
            zstd += t->codec == LMQ_CODEC_ZSTD;
            ck_assert(t->codec == LMQ_CODEC_ZSTD ? t->stored_size < t->raw_size : t->stored_size == t->raw_size);
            ck_assert_uint_eq((uintptr_t)lmq_container_stored(&c, t) % 64, 0);
            /* The files are the entries named file:, kept with no encoding. */
            const int file = !strncmp(t->name, "file:", 5);
            ck_assert_int_eq(lmq_entry_is_file(t), file);
            ck_assert(!file || (t->q.dtype == 0 && t->q.gran == 0 && t->q.asym == 0 && t->q.group == 0));
            ck_assert_ptr_eq(lmq_entry_file_name(t), file ? t->name + 5 : NULL);
        }
        const lmq_tensor_entry *rnd = lmq_container_find(&c, "file:random.bin");
        const lmq_tensor_entry *txt = lmq_container_find(&c, "file:notes.txt");
        ck_assert_ptr_nonnull(rnd);
        ck_assert_ptr_nonnull(txt);
        ck_assert_int_eq(rnd->codec, LMQ_CODEC_NONE);
        ck_assert_int_eq(txt->codec, codecs[k]);
        ck_assert_int_eq(zstd > 0, k == 1);
        ck_assert_int_eq(lmq_container_verify(&c, NULL, NULL, &e), LMQ_OK);
        lmq_container_close(&c);
        lmq_model_free(&m);
        lmq_model_free(&back);
    }
    test_rmtree(dir);
}
END_TEST

START_TEST(deterministic_bytes)
{
    const char *dir = test_tmpdir();
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/a.lmq", dir);
    snprintf(b, sizeof b, "%s/other-name.lmq", dir);
    for (int codec = 0; codec < 2; codec++) {
        lmq_err e;
        ck_assert_int_eq(write_sample(a, (lmq_codec)codec, &e), LMQ_OK);
        ck_assert_int_eq(write_sample(b, (lmq_codec)codec, &e), LMQ_OK);
        size_t na, nb;
        uint8_t *da = load(a, &na), *db = load(b, &nb);
        ck_assert_uint_eq(na, nb);
        ck_assert(!memcmp(da, db, na));
        free(da);
        free(db);
    }
    test_rmtree(dir);
}
END_TEST

/* The real fixtures, imported by convert/: stored and read back bit for bit, still valid
 * models, and the manifest built from them passes the checks audit runs. */
START_TEST(real_models_round_trip)
{
    static const struct {
        const char *src;
        lmq_codec codec;
    } models[] = {
        { STORIES, LMQ_CODEC_ZSTD },
        { SOTU, LMQ_CODEC_NONE },
    };
    const char *dir = test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/real.lmq", dir);
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        lmq_model m, back;
        lmq_err e;
        ck_assert_msg(lmq_convert(fixture(models[i].src), NULL, &m, &e) == LMQ_OK, "%s", e.msg);
        ck_assert_msg(lmq_container_write_model_codec(path, &m, NULL, models[i].codec, &e) == LMQ_OK, "%s", e.msg);
        ck_assert_msg(lmq_container_read_model(path, NULL, &back, &e) == LMQ_OK, "%s", e.msg);
        assert_models_equal(&m, &back);
        ck_assert_int_eq(lmq_model_validate(&back, &e), LMQ_OK);
        ck_assert_int_ge(back.n_files, 1);

        lmq_container c;
        lmq_manifest man;
        ck_assert_int_eq(lmq_container_open(&c, path, &e), LMQ_OK);
        ck_assert_int_eq(lmq_container_verify(&c, NULL, NULL, &e), LMQ_OK);
        ck_assert_int_eq(lmq_manifest_parse(c.manifest, c.manifest_size, &man, &e), LMQ_OK);
        ck_assert_int_eq(lmq_manifest_check(&man, c.tensors, c.n_tensors, c.version, NULL, NULL), 0);
        ck_assert(man.totals.linear_bpw == 32);
        uint64_t params = 0;
        for (int t = 0; t < m.n_tensors; t++)
            params += (uint64_t)lmq_tensor_numel(&m.tensors[t]);
        ck_assert_uint_eq(man.totals.params, params);
        ck_assert_uint_eq(man.totals.tensor_bytes, 4 * params);
        ck_assert_str_eq(man.source, m.source);
        lmq_manifest_free(&man);
        lmq_container_close(&c);
        lmq_model_free(&m);
        lmq_model_free(&back);
    }
    test_rmtree(dir);
}
END_TEST

/* Reading tensors: lookup, exact and short buffers, allocation, zstd decoding. */
START_TEST(tensor_access)
{
    const char *dir = test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/m.lmq", dir);
    lmq_err e;
    lmq_model m;
    ck_assert_int_eq(make_model(&m, &e), LMQ_OK);
    ck_assert_int_eq(lmq_container_write_model_codec(path, &m, NULL, LMQ_CODEC_ZSTD, &e), LMQ_OK);
    lmq_container c;
    ck_assert_int_eq(lmq_container_open(&c, path, &e), LMQ_OK);
    ck_assert_ptr_null(lmq_container_find(&c, "nope"));
    ck_assert_ptr_null(lmq_container_find(&c, "blk.0.attn_q"));
    int views[LMQ_CODEC_COUNT] = { 0 };
    for (int i = 0; i < m.n_tensors; i++) {
        const lmq_tensor *mt = &m.tensors[i];
        const lmq_tensor_entry *t = lmq_container_find(&c, mt->name);
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(t->q.dtype, LMQ_T_F32);
        ck_assert_int_eq(t->ndim, mt->ndim);
        size_t n = (size_t)lmq_tensor_numel(mt);
        ck_assert_uint_eq(t->raw_size, n * 4);
        ck_assert_uint_eq(t->checksum, XXH3_64bits(mt->data, n * 4));
        float *buf = malloc(n * 4);
        ck_assert_int_eq(lmq_container_read(&c, t, buf, n * 4, &e), LMQ_OK);
        ck_assert(!memcmp(buf, mt->data, n * 4));
        ck_assert_int_eq(lmq_container_read(&c, t, buf, n * 4 - 1, &e), LMQ_E_ARG);
        ck_assert(strstr(e.msg, mt->name));
        free(buf);
        void *p;
        ck_assert_int_eq(lmq_container_read_alloc(&c, t, &p, &e), LMQ_OK);
        ck_assert(!memcmp(p, mt->data, n * 4));
        free(p);
        /* In place when stored raw (released pages read back); a zstd blob decoded into a buffer. */
        const void *v;
        void *owned;
        views[t->codec]++;
        ck_assert_int_eq(lmq_container_view(&c, t, &v, &owned, &e), LMQ_OK);
        if (t->codec == LMQ_CODEC_NONE) {
            ck_assert_ptr_eq(v, lmq_container_stored(&c, t));
            ck_assert_ptr_null(owned);
            lmq_container_release(&c, t);
        } else {
            ck_assert_ptr_eq(v, owned);
        }
        ck_assert(!memcmp(v, mt->data, n * 4));
        free(owned);
    }
    ck_assert(views[LMQ_CODEC_NONE] && views[LMQ_CODEC_ZSTD]);
    const lmq_tensor_entry *empty = lmq_container_find(&c, "file:empty.txt");
    ck_assert_ptr_nonnull(empty);
    ck_assert_uint_eq(empty->raw_size, 0);
    void *p;
    ck_assert_int_eq(lmq_container_read_alloc(&c, empty, &p, &e), LMQ_OK);
    free(p);
    lmq_container_close(&c);
    lmq_model_free(&m);
    test_rmtree(dir);
}
END_TEST

/* The manifest spells dtypes the way the scheme table names its rows. */
START_TEST(linear_tensor_names)
{
    ck_assert(lmq_is_linear("blk.3.ffn_up.weight", 2));
    ck_assert(!lmq_is_linear("blk.3.ffn_up.bias", 1));
    ck_assert(!lmq_is_linear("tok_embd.weight", 2));
}
END_TEST

/* ---- atomic writes ---- */

START_TEST(atomic_writes)
{
    const char *dir = test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/out.lmq", dir);
    lmq_err e;
    const float x[4] = { 1, 2, 3, 4 };
    const int64_t shape[1] = { 4 };
    const lmq_qparams f32 = { .dtype = LMQ_T_F32 };

    /* Aborted after a tensor: nothing at all in the directory. */
    lmq_writer *w;
    ck_assert_int_eq(lmq_writer_open(&w, path, &e), LMQ_OK);
    ck_assert_int_eq(lmq_writer_add(w, "a", f32, 1, shape, x, sizeof x, LMQ_CODEC_NONE, &e), LMQ_OK);
    lmq_writer_abort(w);
    ck_assert_int_eq(dir_entries(dir), 0);

    /* A destination that exists is untouched by a writer that fails, whichever way it fails. */
    save(path, "precious", 8);
    ck_assert_int_eq(lmq_writer_open(&w, path, &e), LMQ_OK);
    ck_assert_int_eq(lmq_writer_add(w, "a", f32, 1, shape, x, sizeof x, LMQ_CODEC_NONE, &e), LMQ_OK);
    ck_assert_int_eq(lmq_writer_add(w, "a", f32, 1, shape, x, sizeof x, LMQ_CODEC_NONE, &e), LMQ_E_ARG);
    ck_assert(strstr(e.msg, "added twice"));
    ck_assert_int_ne(lmq_writer_add(w, "b", f32, 1, shape, x, sizeof x, LMQ_CODEC_NONE, &e), LMQ_OK);
    lmq_manifest man;
    lmq_manifest_init(&man);
    ck_assert_int_ne(lmq_writer_finish(w, &man, &e), LMQ_OK);

    ck_assert_int_eq(lmq_writer_open(&w, path, &e), LMQ_OK);
    ck_assert_int_eq(lmq_writer_add(w, "a", f32, 1, shape, x, sizeof x - 1, LMQ_CODEC_NONE, &e), LMQ_E_FORMAT);
    ck_assert(strstr(e.msg, "tensor a"));
    lmq_writer_abort(w);

    ck_assert_int_eq(lmq_writer_open(&w, path, &e), LMQ_OK);
    ck_assert_int_eq(lmq_writer_add(w, "bad name", f32, 1, shape, x, sizeof x, LMQ_CODEC_NONE, &e), LMQ_E_FORMAT);
    lmq_writer_abort(w);

    /* A manifest that does not describe the tensors is refused before anything is renamed. */
    ck_assert_int_eq(lmq_writer_open(&w, path, &e), LMQ_OK);
    ck_assert_int_eq(lmq_writer_add(w, "a", f32, 1, shape, x, sizeof x, LMQ_CODEC_NONE, &e), LMQ_OK);
    ck_assert_int_eq(lmq_writer_finish(w, &man, &e), LMQ_E_ARG);
    ck_assert(strstr(e.msg, "manifest does not describe the tensors written"));
    lmq_manifest_free(&man);

    size_t n;
    uint8_t *d = load(path, &n);
    ck_assert_uint_eq(n, 8);
    ck_assert(!memcmp(d, "precious", 8));
    free(d);
    ck_assert_int_eq(dir_entries(dir), 1);

    /* A successful write replaces it whole. */
    ck_assert_int_eq(write_sample(path, LMQ_CODEC_NONE, &e), LMQ_OK);
    ck_assert_int_eq(dir_entries(dir), 1);
    lmq_container c;
    ck_assert_int_eq(lmq_container_open(&c, path, &e), LMQ_OK);
    lmq_container_close(&c);

    /* Unwritable destination: an error naming it, no file. */
    ck_assert_int_eq(write_sample("/nonexistent-dir/x.lmq", LMQ_CODEC_NONE, &e), LMQ_E_IO);
    ck_assert(strstr(e.msg, "/nonexistent-dir/x.lmq"));
    test_rmtree(dir);
}
END_TEST

/* ---- the manifest ---- */

static void fill_manifest(lmq_manifest *m)
{
    lmq_err e;
    lmq_manifest_init(m);
    m->arch = (lmq_arch){ .family = LMQ_FAMILY_GPT2, .dim = 768, .hidden_dim = 3072, .n_layers = 12, .n_heads = 12,
                          .n_kv_heads = 12, .vocab_size = 50257, .max_seq = 1024, .norm_eps = 1e-5f,
                          .rope_theta = 0, .tied_embedding = 1, .rope = LMQ_ROPE_NONE, .tokenizer = LMQ_TOK_GPT2,
                          .bos_id = 50256, .eos_id = -1 };
    ck_assert_int_eq(lmq_manifest_set(&m->source, "/data/gpt2 dir/model.safetensors: \"main\" ünïcode", &e), 0);
    ck_assert_int_eq(lmq_manifest_set(&m->source_notes, "Conv1D [in, out] transposed → [out, in]\n"
                                                         "\ttabbed line  \n  indented\n", &e), 0);
    m->source_checksum = 0xfedcba9876543210ULL;
    const char *recipe = "# int4 recipe\nname: w4\nrules:\n  - match: \"blk.*.weight\"\n    scheme: int4 g32 asym\n"
                         "\n\n";
    ck_assert_int_eq(lmq_manifest_set(&m->recipe, recipe, &e), 0);
    m->recipe_checksum = XXH3_64bits(recipe, strlen(recipe));
    ck_assert_int_eq(lmq_manifest_set(&m->calibration, "text/sotu-calib.txt", &e), 0);
    m->calibration_checksum = 0x00000000000000ffULL;
    lmq_manifest_tensor *t;
    ck_assert_int_eq(lmq_manifest_add_tensor(m, "blk.0.attn_qkv.weight", &t, &e), 0);
    snprintf(t->scheme, sizeof t->scheme, "int4 g32 asym");
    t->q = (lmq_qparams){ LMQ_T_INT4, LMQ_GRAN_GROUP, 1, 32 };
    t->linear = 1;
    t->bits = 5 * 64;
    t->bpw = 4.0 + 32.0 / 32;
    t->stats = (lmq_stats){ .rel_error = 0.1, .peak = 1e-300, .rms = 123456.789, .kurtosis = -1.5 };
    t->calib = (lmq_manifest_calib){ .method = LMQ_METHOD_GPTQ, .damp = 0.01, .damp_used = 0.1, .block = 128,
                                     .act_order = 1, .smooth_alpha = 0.5, .out_error_rtn = 0.25, .out_error = 0.125 };
    snprintf(t->calib.note, sizeof t->calib.note, "a \"note\"");
    m->calib_model_checksum = 0x0123456789abcdefULL;
    m->calib_stats_checksum = 1;
    m->calib_windows = 6;
    m->calib_ctx = 256;
    m->calib_tokens = 1536;
    t->act = (lmq_act){ LMQ_ACT_INT8, LMQ_ACT_TENSOR };
    ck_assert_int_eq(lmq_manifest_add_tensor(m, "tok_embd.weight", &t, &e), 0);
    snprintf(t->scheme, sizeof t->scheme, "fp32");
    t->q = (lmq_qparams){ .dtype = LMQ_T_F32 };
    t->bits = 32 * 64;
    t->bpw = 32;
    t->stats = (lmq_stats){ .peak = 0.3, .rms = 1.0 / 3, .kurtosis = 7.25 };
    snprintf(t->reason, sizeof t->reason, "embedding: kept at source precision");
    ck_assert_int_eq(lmq_manifest_add_file(m, "vocab.json", 12345, &e), 0);
    m->totals = (lmq_manifest_totals){ 10, 20, 30, 4.5 };
    ck_assert_int_eq(lmq_manifest_set(&m->lineage_path, "in: int8.lmq", &e), 0);
    ck_assert_int_eq(lmq_manifest_set(&m->lineage_recipe, "int8-channel", &e), 0);
    ck_assert_int_eq(lmq_manifest_set(&m->lineage_schemes, "fp32, int8 per-channel", &e), 0);
    m->lineage_file_checksum = 0xfedcba9876543210ULL;
    m->lineage_recipe_checksum = 2;
    m->lineage_bpw = 9.125;
    m->lineage_linear_bpw = 1.0 / 3;
}

static void assert_manifests_equal(const lmq_manifest *a, const lmq_manifest *b)
{
    ck_assert_str_eq(a->tool_version, b->tool_version);
    ck_assert_uint_eq(a->format_version, b->format_version);
    ck_assert(!memcmp(&a->arch, &b->arch, sizeof a->arch));
    ck_assert_str_eq(a->source ? a->source : "", b->source ? b->source : "");
    ck_assert_str_eq(a->source_notes ? a->source_notes : "", b->source_notes ? b->source_notes : "");
    ck_assert_uint_eq(a->source_checksum, b->source_checksum);
    ck_assert_int_eq(!a->recipe, !b->recipe);
    if (a->recipe)
        ck_assert_str_eq(a->recipe, b->recipe);
    ck_assert_uint_eq(a->recipe_checksum, b->recipe_checksum);
    ck_assert_int_eq(!a->calibration, !b->calibration);
    if (a->calibration)
        ck_assert_str_eq(a->calibration, b->calibration);
    ck_assert_uint_eq(a->calibration_checksum, b->calibration_checksum);
    ck_assert(a->kind == b->kind && a->calib_model_checksum == b->calib_model_checksum &&
              a->calib_stats_checksum == b->calib_stats_checksum && a->calib_windows == b->calib_windows &&
              a->calib_ctx == b->calib_ctx && a->calib_tokens == b->calib_tokens);
    ck_assert_int_eq(!a->lineage_path, !b->lineage_path);
    if (a->lineage_path) {
        ck_assert_str_eq(a->lineage_path, b->lineage_path);
        ck_assert_str_eq(a->lineage_recipe ? a->lineage_recipe : "", b->lineage_recipe ? b->lineage_recipe : "");
        ck_assert_str_eq(a->lineage_schemes, b->lineage_schemes);
    }
    ck_assert(a->lineage_file_checksum == b->lineage_file_checksum &&
              a->lineage_recipe_checksum == b->lineage_recipe_checksum && a->lineage_bpw == b->lineage_bpw &&
              a->lineage_linear_bpw == b->lineage_linear_bpw);
    ck_assert_int_eq(a->n_tensors, b->n_tensors);
    for (int i = 0; i < a->n_tensors; i++) {
        const lmq_manifest_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        ck_assert_str_eq(x->name, y->name);
        ck_assert_str_eq(x->scheme, y->scheme);
        ck_assert_str_eq(x->reason, y->reason);
        ck_assert(!memcmp(&x->q, &y->q, sizeof x->q));
        ck_assert_int_eq(x->linear, y->linear);
        ck_assert(x->bits == y->bits && x->bpw == y->bpw && !memcmp(&x->stats, &y->stats, sizeof x->stats));
        ck_assert(!memcmp(&x->calib, &y->calib, sizeof x->calib));
        ck_assert(x->act.scheme == y->act.scheme && x->act.gran == y->act.gran);
    }
    ck_assert_int_eq(a->n_files, b->n_files);
    for (int i = 0; i < a->n_files; i++) {
        ck_assert_str_eq(a->files[i].name, b->files[i].name);
        ck_assert_uint_eq(a->files[i].size, b->files[i].size);
    }
    ck_assert(!memcmp(&a->totals, &b->totals, sizeof a->totals));
}

START_TEST(manifest_round_trip)
{
    lmq_manifest m, back, back2, plain;
    lmq_err e;
    fill_manifest(&m);
    char *text, *again;
    size_t len, len2;
    ck_assert_msg(lmq_manifest_emit(&m, &text, &len, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_uint_eq(strlen(text), len);
    ck_assert_msg(lmq_manifest_parse(text, len, &back, &e) == LMQ_OK, "%s\n%s", e.msg, text);
    assert_manifests_equal(&m, &back);
    ck_assert_int_eq(lmq_manifest_emit(&back, &again, &len2, &e), LMQ_OK);
    ck_assert_uint_eq(len, len2);
    ck_assert_str_eq(text, again);
    /* Readable as YAML by people and other tools: plain keys, literal recipe text, floats with a dot. */
    ck_assert(strstr(text, "\nrecipe:\n  checksum: \""));
    ck_assert(strstr(text, "  text: |"));
    ck_assert(strstr(text, "norm_eps: 1.0e-05\n"));
    ck_assert(strstr(text, "peak_abs: 1.0e-300\n"));
    ck_assert(strstr(text, "family: gpt2\n"));
    /* A calibrated tensor says so; a plain one has no calibration map, and a model no kind key. */
    ck_assert(strstr(text, "  calibration:\n    method: gptq\n    damp: 0.01\n"));
    ck_assert(strstr(text, "\ncalibration:\n  source: \"text/sotu-calib.txt\""));
    ck_assert(strstr(text, "  windows: 6\n"));
    ck_assert(!strstr(strstr(text, "tok_embd.weight"), "method:"));
    ck_assert(!strstr(text, "kind:"));
    /* activations only where set: the first tensor's, not the embedding's. */
    ck_assert(strstr(text, "activations:\n") && !strstr(strstr(text, "activations:\n") + 1, "activations:"));
    ck_assert(strstr(text, "scheme: int8\n") && strstr(text, "granularity: tensor\n"));
    free(text);
    free(again);
    m.kind = LMQ_KIND_STATS;
    ck_assert_int_eq(lmq_manifest_emit(&m, &text, &len, &e), LMQ_OK);
    ck_assert(strstr(text, "\nkind: stats\n"));
    ck_assert_int_eq(lmq_manifest_parse(text, len, &back2, &e), LMQ_OK);
    assert_manifests_equal(&m, &back2);
    lmq_manifest_free(&back2);
    free(text);
    /* int8 activations per block (a8 block) are written by name and come back. */
    m.kind = 0;
    m.tensors[0].act = (lmq_act){ LMQ_ACT_INT8, LMQ_ACT_BLOCK };
    ck_assert_int_eq(lmq_manifest_emit(&m, &text, &len, &e), LMQ_OK);
    ck_assert(strstr(text, "granularity: block\n"));
    ck_assert_int_eq(lmq_manifest_parse(text, len, &back2, &e), LMQ_OK);
    ck_assert(back2.tensors[0].act.scheme == LMQ_ACT_INT8 && back2.tensors[0].act.gran == LMQ_ACT_BLOCK);
    assert_manifests_equal(&m, &back2);
    lmq_manifest_free(&back2);
    free(text);
    m.tensors[0].act = (lmq_act){ LMQ_ACT_INT8, LMQ_ACT_TENSOR };

    /* Without the optional parts (a plain conversion): recipe and calibration absent. */
    lmq_manifest_init(&plain);
    plain.arch = m.arch;
    ck_assert_int_eq(lmq_manifest_emit(&plain, &text, &len, &e), LMQ_OK);
    ck_assert(!strstr(text, "recipe"));
    ck_assert(!strstr(text, "calibration"));
    lmq_manifest_free(&back);
    ck_assert_int_eq(lmq_manifest_parse(text, len, &back, &e), LMQ_OK);
    assert_manifests_equal(&plain, &back);
    free(text);

    /* Non-finite numbers and invalid UTF-8 cannot be written. */
    m.tensors[0].stats.rel_error = INFINITY;
    ck_assert_int_eq(lmq_manifest_emit(&m, &text, &len, &e), LMQ_E_NUMERIC);
    ck_assert_ptr_null(text);
    m.tensors[0].stats.rel_error = 0;
    ck_assert_int_eq(lmq_manifest_set(&m.source, "bad \xff utf-8", &e), LMQ_OK);
    ck_assert_int_eq(lmq_manifest_emit(&m, &text, &len, &e), LMQ_E_ARG);
    lmq_manifest_free(&m);
    lmq_manifest_free(&back);
    lmq_manifest_free(&plain);
}
END_TEST

/* Replaces the first occurrence of from in text with to (text malloc'd, returns a new string). */
static char *replace(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    ck_assert_msg(at != NULL, "'%s' not in the manifest", from);
    size_t n = strlen(text) - strlen(from) + strlen(to);
    char *out = malloc(n + 1);
    size_t k = (size_t)(at - text);
    memcpy(out, text, k);
    memcpy(out + k, to, strlen(to));
    strcpy(out + k + strlen(to), at + strlen(from));
    return out;
}

START_TEST(manifest_parse_errors)
{
    lmq_manifest m, back;
    lmq_err e;
    fill_manifest(&m);
    char *text;
    size_t len;
    ck_assert_int_eq(lmq_manifest_emit(&m, &text, &len, &e), LMQ_OK);
    char *twice = malloc(2 * len + 8);
    sprintf(twice, "%s---\n%s", text, text);
    static const struct {
        const char *from, *to, *expect;
    } cases[] = {
        { "  dim: 768\n", "", "architecture: missing key 'dim'" },
        { "format_version:", "format_versoin:", "unknown key 'format_versoin'" },
        { "  dim: 768\n", "  dim: 768\n  dim: 768\n", "key 'dim' appears twice" },
        { "dim: 768", "dim: seven", "architecture.dim: 'seven' is not an integer" },
        { "dim: 768", "dim: 99999999999", "architecture.dim: 99999999999 is out of range" },
        { "dim: 768", "dim: \"768\"", "architecture.dim: expected a plain" },
        { "dim: 768", "dim: [768]", "architecture.dim: expected a value" },
        { "family: gpt2", "family: gpt3", "architecture.family: unknown value 'gpt3'" },
        { "tied_embedding: true", "tied_embedding: yes", "is not true or false" },
        { "norm_eps: 1.0e-05", "norm_eps: .nan", "is not a finite number" },
        { "norm_eps: 1.0e-05", "norm_eps: 1e999", "is not a finite number" },
        { "checksum: \"fedcba9876543210\"", "checksum: \"fedcba987654321\"", "source.checksum: expected 16 hex" },
        { "checksum: \"fedcba9876543210\"", "checksum: \"fedcba987654321g\"", "source.checksum: expected 16 hex" },
        { "bits_per_weight: 5", "bits_per_weight: five", "tensors[0] (blk.0.attn_qkv.weight).bits_per_weight" },
        { "granularity: group", "granularity: row", "tensors[0] (blk.0.attn_qkv.weight).granularity: unknown" },
        { "    rms: 123456.789\n", "", "tensors[0] (blk.0.attn_qkv.weight).stats: missing key 'rms'" },
        { "- name: \"vocab.json\"", "- name: \"vocab\\0.json\"", "files[0] (vocab?.json).name: text contains a NUL" },
        { "bytes: 12345", "bytes: -1", "files[0] (vocab.json).bytes: '-1' is not an unsigned integer" },
        { "group: 32", "group: 4294967296", "group: 4294967296 is out of range" },
        { "tensors:\n", "tensors: 3\nx:\n", "tensors: expected a list" },
        { "format_version: 1", "format_version: [1", "malformed YAML" },
        { "method: gptq", "method: optq", "tensors[0] (blk.0.attn_qkv.weight).calibration.method: unknown value" },
        { "    method: gptq\n", "", "calibration: missing key 'method'" },
        { "format_version: 1\n", "kind: weights\nformat_version: 1\n", "kind: unknown value 'weights'" },
        { "scheme: int8", "scheme: none", "tensors[0] (blk.0.attn_qkv.weight).activations.scheme: unknown value 'none'" },
        { "granularity: tensor", "granularity: channel", "activations.granularity: unknown value 'channel'" },
        { "    scheme: int8\n", "", "tensors[0] (blk.0.attn_qkv.weight).activations: missing key 'scheme'" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *bad = replace(text, cases[i].from, cases[i].to);
        lmq_code rc = lmq_manifest_parse(bad, strlen(bad), &back, &e);
        ck_assert_msg(rc == LMQ_E_FORMAT, "case %zu accepted", i);
        ck_assert_msg(strstr(e.msg, cases[i].expect), "case %zu: '%s' lacks '%s'", i, e.msg, cases[i].expect);
        free(bad);
    }
    ck_assert_int_eq(lmq_manifest_parse("", 0, &back, &e), LMQ_E_FORMAT);
    ck_assert(strstr(e.msg, "empty"));
    ck_assert_int_eq(lmq_manifest_parse(twice, strlen(twice), &back, &e), LMQ_E_FORMAT);
    ck_assert(strstr(e.msg, "a second YAML document"));
    ck_assert_int_eq(lmq_manifest_parse("[1, 2]", 6, &back, &e), LMQ_E_FORMAT);
    ck_assert_int_eq(lmq_manifest_parse("a: &x 1\nb: *x\n", 14, &back, &e), LMQ_E_FORMAT);
    ck_assert(strstr(e.msg, "aliases are not allowed"));
    /* Deep nesting is refused at once (libyaml alone needs time quadratic in the depth). */
    size_t deep = 4000000;
    char *nest = malloc(deep + 4);
    memcpy(nest, "a: ", 3);
    memset(nest + 3, '[', deep);
    ck_assert_int_eq(lmq_manifest_parse(nest, deep + 3, &back, &e), LMQ_E_FORMAT);
    ck_assert(strstr(e.msg, "nested deeper than 8 levels"));
    free(nest);
    ck_assert_int_eq(lmq_manifest_parse("a\0b: 1", 6, &back, &e), LMQ_E_FORMAT);
    free(twice);
    free(text);
    lmq_manifest_free(&m);
}
END_TEST

/* The schema check against the index reports every problem, each by tensor. */
START_TEST(manifest_check_reports_all)
{
    const char *dir = test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/m.lmq", dir);
    lmq_err e;
    ck_assert_int_eq(write_sample(path, LMQ_CODEC_NONE, &e), LMQ_OK);
    lmq_container c;
    lmq_manifest m;
    ck_assert_int_eq(lmq_container_open(&c, path, &e), LMQ_OK);
    ck_assert_int_eq(lmq_manifest_parse(c.manifest, c.manifest_size, &m, &e), LMQ_OK);
    issues is = { 0 };
    ck_assert_int_eq(lmq_manifest_check(&m, c.tensors, c.n_tensors, c.version, collect, &is), 0);
    ck_assert_int_eq(is.n, 0);
    ck_assert_str_eq(m.tensors[0].reason, "plain conversion: no recipe applied");
    ck_assert(m.tensors[1].stats.peak == 1 && m.tensors[1].stats.rms == 1 && m.tensors[1].stats.kurtosis == 0);
    ck_assert_uint_eq(m.totals.params, 16 * 8 + 8 + 64 + 32 + 512 + 8 + 8 + 32 + 64 + 512 + 512);
    ck_assert_uint_eq(m.totals.linear_params, 64 + 32 + 512 + 32 + 64 + 512 + 512);
    ck_assert(m.totals.linear_bpw == 32);

    /* tensors: 0 tok_embd, 1 attn_norm, 2 attn_q, 3 attn_v, 4 ffn_down, 5 ffn_norm, 6 out_norm */
    m.tensors[0].bpw = 16;
    m.tensors[1].reason[0] = '\0';
    m.tensors[2].q.dtype = LMQ_T_INT8;
    m.tensors[3].linear = 0;
    m.tensors[4].stats.kurtosis = -3;
    m.tensors[4].calib.out_error = -1;
    snprintf(m.tensors[5].name, LMQ_NAME_MAX, "ghost.weight");
    m.files[0].size = 1;
    m.n_files = 2; /* drops the last carried file */
    m.totals.params++;
    m.format_version = 2;
    m.recipe = strdup("recipe text");
    m.recipe_checksum = 1;
    m.tensors[6].act = (lmq_act){ LMQ_ACT_INT8, LMQ_ACT_TOKEN }; /* on a vector */
    int n = lmq_manifest_check(&m, c.tensors, c.n_tensors, c.version, collect, &is);
    ck_assert_int_eq(n, is.n);
    const char *named[] = { "tok_embd.weight", "blk.0.attn_norm.weight", "blk.0.attn_q.weight",
                            "blk.0.attn_v.weight", "blk.0.ffn_down.weight", "ghost.weight",
                            "blk.0.ffn_norm.weight", "file:random.bin", "file:empty.txt", "out_norm.weight", "" };
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        ck_assert_msg(has_issue(&is, named[i]), "no issue for '%s'", named[i]);
    ck_assert_int_eq(n, 14); /* the 10 named above (ffn_down twice: stats and calibration) and 3 about the whole manifest */
    lmq_manifest_free(&m);
    lmq_container_close(&c);
    test_rmtree(dir);
}
END_TEST

/* A tensor quantised by the scheme table, stored with the manifest the quantiser would write:
 * the manifest check and verify pass, the bytes come back and dequantise to the same
 * weights, and read_model (fp32 only) refuses the artefact by tensor name. */
START_TEST(quantised_entry)
{
    const char *dir = test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/q.lmq", dir);
    lmq_err e;
    enum { ROWS = 8, COLS = 64 };
    const int64_t shape[2] = { ROWS, COLS };
    const lmq_qparams q4 = { LMQ_T_INT4, LMQ_GRAN_GROUP, 1, 32 };
    float w[ROWS * COLS], wq[ROWS * COLS], back_w[ROWS * COLS];
    uint64_t seed = 7;
    for (int i = 0; i < ROWS * COLS; i++)
        w[i] = (float)rng(&seed) / 4294967296.0f - 0.5f;
    lmq_layout L;
    ck_assert_int_eq(lmq_layout_of(&q4, ROWS, COLS, &L, &e), LMQ_OK);
    uint8_t *packed = malloc(L.bytes);
    ck_assert_int_eq(q_quantize(&q4, w, ROWS, COLS, packed, L.bytes, NULL, &e), LMQ_OK);
    ck_assert_int_eq(q_dequantize(&q4, packed, L.bytes, ROWS, COLS, wq, NULL, &e), LMQ_OK);

    lmq_writer *wr;
    /* The container knows every encoding's layout: a byte short is refused, by name. */
    ck_assert_int_eq(lmq_writer_open(&wr, path, &e), LMQ_OK);
    ck_assert_int_eq(lmq_writer_add(wr, "blk.0.ffn_down.weight", q4, 2, shape, packed, L.bytes - 1, LMQ_CODEC_NONE, &e),
                     LMQ_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "blk.0.ffn_down.weight: 319 raw bytes, int4 of 512 elements needs 320"), "%s", e.msg);
    lmq_writer_abort(wr);
    ck_assert_int_eq(lmq_writer_open(&wr, path, &e), LMQ_OK);
    ck_assert_int_eq(lmq_writer_add(wr, "blk.0.ffn_down.weight", q4, 2, shape, packed, L.bytes, LMQ_CODEC_ZSTD, &e),
                     LMQ_OK);
    lmq_manifest m;
    lmq_manifest_init(&m);
    lmq_model mod; /* the rest of the model (ffn_down is [8, 64] there), in fp32 */
    ck_assert_int_eq(make_model(&mod, &e), LMQ_OK);
    m.arch = mod.arch;
    for (int i = 0; i < mod.n_tensors; i++) {
        const lmq_tensor *mt = &mod.tensors[i];
        if (strcmp(mt->name, "blk.0.ffn_down.weight")) {
            ck_assert_int_eq(lmq_writer_add(wr, mt->name, mt->q, mt->ndim, mt->shape, mt->raw, mt->raw_size,
                                            LMQ_CODEC_NONE, &e), LMQ_OK);
            ck_assert_int_eq(lmq_manifest_add_plain(&m, mt, mt->data, &e), LMQ_OK);
        }
    }
    lmq_model_free(&mod);
    lmq_manifest_tensor *t;
    ck_assert_int_eq(lmq_manifest_add_tensor(&m, "blk.0.ffn_down.weight", &t, &e), LMQ_OK);
    q_describe(&q4, t->scheme, sizeof t->scheme);
    t->q = q4;
    t->linear = 1;
    t->bits = L.bits;
    t->bpw = (double)L.bits / (ROWS * COLS);
    lmq_tensor_stats(w, wq, ROWS * COLS, &t->stats);
    ck_assert_msg(lmq_writer_finish(wr, &m, &e) == LMQ_OK, "%s", e.msg);
    lmq_manifest_free(&m);

    lmq_container c;
    ck_assert_int_eq(lmq_container_open(&c, path, &e), LMQ_OK);
    ck_assert_int_eq(lmq_manifest_parse(c.manifest, c.manifest_size, &m, &e), LMQ_OK);
    ck_assert_int_eq(lmq_manifest_check(&m, c.tensors, c.n_tensors, c.version, NULL, NULL), 0);
    const lmq_manifest_tensor *mq = lmq_manifest_find(&m, "blk.0.ffn_down.weight");
    ck_assert_str_eq(mq->scheme, "int4 g32 asym");
    /* 4-bit codes plus a 16-bit scale and a 16-bit zero point per 32 weights: 5 bits (beside
     * 1216 fp32 linear weights: 24 over all 1728). */
    ck_assert(mq->bpw == 5.0 && m.totals.linear_bpw == 24.0);
    ck_assert(mq->stats.rel_error > 0 && mq->stats.rel_error < 0.1);
    ck_assert_int_eq(lmq_container_verify(&c, NULL, NULL, &e), LMQ_OK);
    void *bytes;
    const lmq_tensor_entry *cq = lmq_container_find(&c, "blk.0.ffn_down.weight");
    ck_assert_int_eq(lmq_container_read_alloc(&c, cq, &bytes, &e), LMQ_OK);
    ck_assert_int_eq(q_dequantize(&cq->q, bytes, cq->raw_size, ROWS, COLS, back_w, NULL, &e), LMQ_OK);
    ck_assert(!memcmp(back_w, wq, sizeof wq));
    free(bytes);
    free(packed);
    lmq_manifest_free(&m);
    lmq_container_close(&c);

    lmq_model back;
    ck_assert_int_eq(lmq_container_read_model(path, NULL, &back, &e), LMQ_E_UNSUPPORTED);
    ck_assert(strstr(e.msg, "blk.0.ffn_down.weight is int4 (granularity group), not fp32"));
    ck_assert_int_eq(back.n_tensors, 0);
    /* The runtime's loader keeps it packed, as a view of the stored bytes, which decode to exactly
     * the dequantised values. */
    ck_assert_msg(rt_load_artefact(path, &back, &e) == LMQ_OK, "%s", e.msg);
    const lmq_tensor *bt = lmq_model_find(&back, "blk.0.ffn_down.weight");
    ck_assert(bt->data == NULL && bt->q.dtype == LMQ_T_INT4 && bt->q.group == 32 && bt->q.asym);
    ck_assert(bt->raw >= back.mapping.data && bt->raw + bt->raw_size <= back.mapping.data + back.mapping.size);
    ck_assert_int_eq(q_dequantize(&bt->q, bt->raw, bt->raw_size, ROWS, COLS, back_w, NULL, &e), LMQ_OK);
    ck_assert(!memcmp(back_w, wq, sizeof wq));
    lmq_model_free(&back);
    test_rmtree(dir);
}
END_TEST

/* ---- hostile input ---- */

/* Every prefix of a valid file is refused, in memory (ASan sees any read past the end)
 * and, at a few lengths, through the mapping. */
START_TEST(every_truncation_refused)
{
    const char *dir = test_tmpdir();
    char path[256], cut[256];
    snprintf(path, sizeof path, "%s/m.lmq", dir);
    snprintf(cut, sizeof cut, "%s/cut.lmq", dir);
    lmq_err e;
    ck_assert_int_eq(write_sample(path, LMQ_CODEC_ZSTD, &e), LMQ_OK);
    size_t n;
    uint8_t *d = load(path, &n);
    for (size_t len = 0; len < n; len++) {
        uint8_t *p = malloc(len ? len : 1);
        memcpy(p, d, len);
        lmq_container c;
        ck_assert_msg(lmq_container_open_mem(&c, p, len, "cut", &e) != LMQ_OK, "prefix of %zu bytes accepted", len);
        ck_assert(!strncmp(e.msg, "cut: ", 5));
        free(p);
    }
    const size_t lens[] = { 0, 3, 64, 135, 136, n / 2, n - 64, n - 1 };
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        save(cut, d, lens[i]);
        lmq_container c;
        ck_assert_int_ne(lmq_container_open(&c, cut, &e), LMQ_OK);
        ck_assert(strstr(e.msg, cut));
    }
    free(d);
    test_rmtree(dir);
}
END_TEST

/* Every single-bit flip anywhere in the file: in a blob it passes open and verify names that
 * tensor; in padding or the file checksum field verify reports the whole file; anywhere else
 * open refuses the file. Nothing is ever accepted. */
START_TEST(every_bit_flip_caught)
{
    const char *dir = test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/m.lmq", dir);
    lmq_err e;
    ck_assert_int_eq(write_sample(path, LMQ_CODEC_ZSTD, &e), LMQ_OK);
    size_t n;
    uint8_t *d = load(path, &n);
    lmq_container c0;
    ck_assert_int_eq(lmq_container_open_mem(&c0, d, n, "orig", &e), LMQ_OK);
    const uint64_t index_offset = get_le(d + n - 64, 8);
    int refused = 0, in_blob = 0, in_padding = 0, zstd_ignored = 0;
    for (size_t pos = 0; pos < n; pos++) {
        const char *owner = NULL;
        for (int i = 0; i < c0.n_tensors; i++)
            if (pos >= c0.tensors[i].offset && pos - c0.tensors[i].offset < c0.tensors[i].stored_size)
                owner = c0.tensors[i].name;
        int padding = !owner && ((pos >= 64 && pos < index_offset) || (pos >= n - 16 && pos < n - 8));
        for (int bit = 0; bit < 8; bit++) {
            uint8_t *p = malloc(n);
            memcpy(p, d, n);
            p[pos] ^= (uint8_t)(1u << bit);
            lmq_container c;
            lmq_code rc = lmq_container_open_mem(&c, p, n, "flip", &e);
            if (owner || padding) {
                ck_assert_msg(rc == LMQ_OK, "flip at %zu bit %d refused at open: %s", pos, bit, e.msg);
                issues is = { 0 };
                ck_assert_msg(lmq_container_verify(&c, collect, &is, &e) != LMQ_OK, "flip at %zu bit %d accepted",
                              pos, bit);
                ck_assert(has_issue(&is, ""));
                if (owner && !has_issue(&is, owner)) {
                    /* Only possible where zstd ignores the bit (the frame header's unused bit): the
                     * tensor still decodes to its own bytes, and the file checksum caught the flip. */
                    const lmq_tensor_entry *t = lmq_container_find(&c, owner);
                    void *a, *b;
                    ck_assert_msg(t->codec == LMQ_CODEC_ZSTD, "flip in %s at %zu not reported by name", owner, pos);
                    ck_assert_int_eq(lmq_container_read_alloc(&c, t, &a, &e), LMQ_OK);
                    ck_assert_int_eq(lmq_container_read_alloc(&c0, t, &b, &e), LMQ_OK);
                    ck_assert(!memcmp(a, b, t->raw_size));
                    free(a);
                    free(b);
                    zstd_ignored++;
                }
                ck_assert_int_eq(is.n, 1 + (owner && has_issue(&is, owner)));
                lmq_container_close(&c);
                in_blob += !!owner;
                in_padding += padding;
            } else {
                ck_assert_msg(rc != LMQ_OK, "flip at %zu bit %d accepted at open", pos, bit);
                refused++;
            }
            free(p);
        }
    }
    ck_assert_int_gt(refused, 8 * (64 + 64));
    ck_assert_int_gt(in_blob, 0);
    ck_assert_int_gt(in_padding, 8 * 8);
    ck_assert_int_lt(zstd_ignored, in_blob / 100);
    lmq_container_close(&c0);
    free(d);
    test_rmtree(dir);
}
END_TEST

enum { AT_HEADER, AT_FOOTER, AT_INDEX, AT_ENTRY };

/* One hand-crafted edit: width bytes at (region + off) set to value (or incremented by it),
 * all checksums recomputed, and the reader must refuse with a message holding expect. */
typedef struct {
    int at;
    const char *tensor; /* AT_ENTRY: whose entry */
    int off, width;
    uint64_t value;
    int add;
    const char *expect;
} hostile;

static const hostile hostiles[] = {
    { AT_HEADER, NULL, 0, 1, 'X', 0, "no LMQ1 magic" },
    { AT_HEADER, NULL, 4, 4, 2, 0, "format version 2 is not supported" },
    { AT_HEADER, NULL, 8, 4, 128, 0, "header: size 128" },
    { AT_HEADER, NULL, 12, 4, 4096, 0, "alignment 4096" },
    { AT_HEADER, NULL, 40, 1, 1, 0, "reserved byte 40" },
    { AT_FOOTER, NULL, 56, 1, 'x', 0, "no end marker" },
    { AT_FOOTER, NULL, 0, 8, UINT64_C(1) << 62, 0, "index offset" },
    { AT_FOOTER, NULL, 0, 8, 1, 1, "index offset" },
    { AT_FOOTER, NULL, 0, 8, 64, 1, "does not sit between" },
    { AT_FOOTER, NULL, 8, 8, UINT64_MAX, 0, "does not fit" },
    { AT_FOOTER, NULL, 16, 8, UINT64_MAX, 1, "does not sit between" },
    { AT_FOOTER, NULL, 24, 8, 1, 1, "does not sit between" },
    { AT_INDEX, NULL, 0, 8, UINT64_MAX, 0, "entries do not fit" },
    { AT_INDEX, NULL, 0, 8, UINT64_C(1) << 30, 0, "entries do not fit" },
    { AT_INDEX, NULL, 0, 8, 1, 1, "" },
    { AT_INDEX, NULL, 0, 8, UINT64_MAX, 1, "" },
    { AT_ENTRY, "tok_embd.weight", 0, 4, 0xffffffff, 0, "name of 4294967295 bytes runs past the index" },
    { AT_ENTRY, "tok_embd.weight", 0, 4, 0, 0, "name length 0" },
    { AT_ENTRY, "tok_embd.weight", 0, 4, 1, 1, "" },
    { AT_ENTRY, "tok_embd.weight", 4, 2, 99, 0, "tensor tok_embd.weight: unknown dtype 99" },
    { AT_ENTRY, "tok_embd.weight", 4, 2, 9, 0, "tensor tok_embd.weight: stored as a carried file (dtype 9), whose names "
                                              "start with file:" },
    { AT_ENTRY, "tok_embd.weight", 6, 1, LMQ_GRAN_CHANNEL, 0, "tok_embd.weight: fp32 cannot have granularity channel" },
    { AT_ENTRY, "tok_embd.weight", 6, 1, 9, 0, "tok_embd.weight: bad quantisation parameters" },
    { AT_ENTRY, "tok_embd.weight", 7, 1, 1, 0, "tok_embd.weight: fp32 cannot have granularity none (asymmetric)" },
    { AT_ENTRY, "tok_embd.weight", 8, 4, 32, 0, "tok_embd.weight: bad quantisation parameters" },
    { AT_ENTRY, "tok_embd.weight", 12, 1, 0, 0, "tok_embd.weight: rank 0" },
    { AT_ENTRY, "tok_embd.weight", 12, 1, 5, 0, "tok_embd.weight: rank 5" },
    { AT_ENTRY, "tok_embd.weight", 13, 1, 7, 0, "tok_embd.weight: unknown codec 7" },
    { AT_ENTRY, "tok_embd.weight", 13, 1, LMQ_CODEC_ZSTD, 0, "tok_embd.weight: zstd blob of 512 bytes cannot hold 512" },
    { AT_ENTRY, "tok_embd.weight", 14, 2, 1, 0, "tok_embd.weight: reserved index bytes" },
    { AT_ENTRY, "tok_embd.weight", 16, 8, 1, 1, "tok_embd.weight: 512 raw bytes, fp32 of 136 elements needs 544" },
    { AT_ENTRY, "tok_embd.weight", 16, 8, UINT64_C(1) << 50, 0, "tok_embd.weight: dim 0 is 1125899906842624" },
    { AT_ENTRY, "tok_embd.weight", 24, 8, UINT64_C(1) << 39, 0, "tok_embd.weight: bad shape (dim 1" },
    { AT_ENTRY, "tok_embd.weight", 32, 8, 1, 0, "tok_embd.weight: bad shape (dim 2 is 1)" },
    { AT_ENTRY, "tok_embd.weight", 48, 8, UINT64_C(1) << 40, 0, "tok_embd.weight: blob [1099511627776, +512) outside" },
    { AT_ENTRY, "tok_embd.weight", 48, 8, UINT64_MAX - 100, 0, "tok_embd.weight: blob" },
    { AT_ENTRY, "tok_embd.weight", 48, 8, 0, 0, "tok_embd.weight: blob [0, +512) outside" },
    { AT_ENTRY, "tok_embd.weight", 48, 8, 1, 1, "tok_embd.weight: blob at 65 is not 64-byte aligned" },
    { AT_ENTRY, "tok_embd.weight", 48, 8, 64, 1, "tok_embd.weight: blob at 128 leaves a gap" },
    { AT_ENTRY, "tok_embd.weight", 56, 8, 4, 1, "tok_embd.weight: stored 516 bytes, raw 512" },
    { AT_ENTRY, "tok_embd.weight", 64, 8, 4, 1, "tok_embd.weight: 516 raw bytes, fp32 of 128 elements needs 512" },
    { AT_ENTRY, "file:notes.txt", 16, 8, 1, 1, "file:notes.txt: 400 raw bytes, a carried file of 401 elements needs 401" },
    { AT_ENTRY, "file:notes.txt", 4, 2, LMQ_T_F32, 0, "file:notes.txt: named as a carried file (file:...) but stored as fp32" },
    { AT_ENTRY, "file:notes.txt", 6, 1, LMQ_GRAN_TENSOR, 0, "file:notes.txt: bad quantisation parameters (granularity 1" },
    { AT_ENTRY, "file:notes.txt", 7, 1, 1, 0, "file:notes.txt: bad quantisation parameters (granularity 0, asym 1" },
    { AT_ENTRY, "file:notes.txt", 12, 1, 2, 0, "file:notes.txt: a carried file must have rank 1" },
};

static uint8_t *entry_at(uint8_t *d, size_t n, const lmq_container *c, const char *name)
{
    const lmq_tensor_entry *t = lmq_container_find(c, name);
    ck_assert_ptr_nonnull(t);
    return d + get_le(d + n - 64, 8) + 8 + 80 * (size_t)(t - c->tensors);
}

START_TEST(hostile_headers_and_indexes)
{
    const char *dir = test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/m.lmq", dir);
    lmq_err e;
    ck_assert_int_eq(write_sample(path, LMQ_CODEC_ZSTD, &e), LMQ_OK);
    size_t n;
    uint8_t *d = load(path, &n);
    lmq_container c0, c;
    ck_assert_int_eq(lmq_container_open_mem(&c0, d, n, "orig", &e), LMQ_OK);
    ck_assert_int_eq(lmq_container_find(&c0, "tok_embd.weight")->offset, 64); /* the cases assume it */
    ck_assert_uint_eq(get_le(entry_at(d, n, &c0, "file:notes.txt") + 4, 2), 9); /* a file's dtype field on disk */
    for (size_t i = 0; i < sizeof hostiles / sizeof hostiles[0]; i++) {
        const hostile *h = &hostiles[i];
        uint8_t *p = malloc(n);
        memcpy(p, d, n);
        uint8_t *at = h->at == AT_HEADER ? p
                    : h->at == AT_FOOTER ? p + n - 64
                    : h->at == AT_INDEX  ? p + get_le(d + n - 64, 8)
                                         : entry_at(p, n, &c0, h->tensor);
        at += h->off;
        put_le(at, h->add ? get_le(at, h->width) + h->value : h->value, h->width);
        reseal(p, n);
        lmq_code rc = lmq_container_open_mem(&c, p, n, "hostile", &e);
        ck_assert_msg(rc != LMQ_OK, "case %zu accepted", i);
        ck_assert_msg(strstr(e.msg, h->expect) && !strncmp(e.msg, "hostile: ", 9), "case %zu: '%s' lacks '%s'", i,
                      e.msg, h->expect);
        free(p);
    }

    /* Two blobs at one offset; names out of order; a name twice; a byte outside the name alphabet. */
    const lmq_tensor_entry *ta = &c0.tensors[c0.by_offset[1]], *tb = &c0.tensors[c0.by_offset[2]];
    int k = 0;
    while (k + 1 < c0.n_tensors && strlen(c0.tensors[k].name) != strlen(c0.tensors[k + 1].name))
        k++;
    ck_assert_int_lt(k + 1, c0.n_tensors);
    const size_t len = strlen(c0.tensors[k].name);
    const uint64_t names = get_le(d + n - 64, 8) + 8 + 80 * (uint64_t)c0.n_tensors;
    uint64_t name_k = names;
    for (int i = 0; i < k; i++)
        name_k += strlen(c0.tensors[i].name);
    for (int v = 0; v < 4; v++) {
        uint8_t *p = malloc(n);
        memcpy(p, d, n);
        const char *expect = NULL;
        if (v == 0) {
            put_le(entry_at(p, n, &c0, tb->name) + 48, ta->offset, 8);
            expect = ta->offset < tb->offset ? tb->name : ta->name;
        } else if (v == 1) {
            memcpy(p + name_k, c0.tensors[k + 1].name, len);
            memcpy(p + name_k + len, c0.tensors[k].name, len);
            expect = "index not sorted by name";
        } else if (v == 2) {
            memcpy(p + name_k + len, c0.tensors[k].name, len);
            expect = "defined twice";
        } else {
            p[names + 3] = ' ';
            expect = "index entry 0: name has byte 0x20 at position 3";
        }
        reseal(p, n);
        ck_assert_msg(lmq_container_open_mem(&c, p, n, "hostile", &e) != LMQ_OK, "variant %d accepted", v);
        ck_assert_msg(strstr(e.msg, expect), "variant %d: '%s' lacks '%s'", v, e.msg, expect);
        if (v == 0)
            ck_assert(strstr(e.msg, "overlaps"));
        free(p);
    }
    lmq_container_close(&c0);
    free(d);
    test_rmtree(dir);
}
END_TEST

/* A zstd blob that decodes to fewer or more bytes than its entry says, with consistent
 * checksums otherwise: open accepts it (sizes look plausible), reading and verifying refuse. */
START_TEST(hostile_zstd_sizes)
{
    const char *dir = test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/m.lmq", dir);
    lmq_err e;
    ck_assert_int_eq(write_sample(path, LMQ_CODEC_ZSTD, &e), LMQ_OK);
    size_t n;
    uint8_t *d = load(path, &n);
    lmq_container c0, c;
    ck_assert_int_eq(lmq_container_open_mem(&c0, d, n, "orig", &e), LMQ_OK);
    const lmq_tensor_entry *t0 = lmq_container_find(&c0, "file:notes.txt");
    ck_assert_int_eq(t0->codec, LMQ_CODEC_ZSTD);
    const int64_t deltas[] = { 1, -1, 1000 };
    for (size_t i = 0; i < 3; i++) {
        uint8_t *p = malloc(n);
        memcpy(p, d, n);
        uint8_t *ent = entry_at(p, n, &c0, t0->name);
        put_le(ent + 16, t0->raw_size + (uint64_t)deltas[i], 8);
        put_le(ent + 64, t0->raw_size + (uint64_t)deltas[i], 8);
        reseal(p, n);
        ck_assert_int_eq(lmq_container_open_mem(&c, p, n, "zs", &e), LMQ_OK);
        void *out;
        ck_assert_int_eq(lmq_container_read_alloc(&c, lmq_container_find(&c, t0->name), &out, &e), LMQ_E_FORMAT);
        ck_assert(strstr(e.msg, "zs: tensor file:notes.txt: "));
        issues is = { 0 };
        ck_assert_int_eq(lmq_container_verify(&c, collect, &is, &e), LMQ_E_FORMAT);
        ck_assert_int_eq(is.n, 1);
        ck_assert(has_issue(&is, "file:notes.txt"));
        lmq_container_close(&c);
        free(p);
    }
    lmq_container_close(&c0);
    free(d);
    test_rmtree(dir);
}
END_TEST

/* Verify goes on past the first failure: two damaged tensors and the padding, all reported. */
START_TEST(verify_reports_every_failure)
{
    const char *dir = test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/m.lmq", dir);
    lmq_err e;
    ck_assert_int_eq(write_sample(path, LMQ_CODEC_NONE, &e), LMQ_OK);
    size_t n;
    uint8_t *d = load(path, &n);
    lmq_container c;
    ck_assert_int_eq(lmq_container_open_mem(&c, d, n, "two", &e), LMQ_OK);
    const lmq_tensor_entry *a = lmq_container_find(&c, "blk.0.attn_q.weight");
    const lmq_tensor_entry *b = lmq_container_find(&c, "file:random.bin");
    d[a->offset + 5] ^= 0x10;
    d[b->offset + b->stored_size - 1] ^= 0x01;
    issues is = { 0 };
    ck_assert_int_eq(lmq_container_verify(&c, collect, &is, &e), LMQ_E_CHECKSUM);
    ck_assert_int_eq(is.n, 3);
    ck_assert(has_issue(&is, a->name) && has_issue(&is, b->name) && has_issue(&is, ""));
    ck_assert(strstr(e.msg, "3 of 15 checks failed"));
    void *p;
    ck_assert_int_eq(lmq_container_read_alloc(&c, a, &p, &e), LMQ_E_CHECKSUM);
    ck_assert(strstr(e.msg, "tensor blk.0.attn_q.weight: checksum mismatch"));
    const void *v;
    void *owned;
    ck_assert_int_eq(lmq_container_view(&c, a, &v, &owned, &e), LMQ_E_CHECKSUM);
    ck_assert_ptr_null(v);
    ck_assert(strstr(e.msg, "tensor blk.0.attn_q.weight: checksum mismatch"));
    ck_assert_int_eq(lmq_container_view(&c, lmq_container_find(&c, "blk.0.attn_v.weight"), &v, &owned, &e), LMQ_OK);
    free(owned);
    lmq_container_close(&c);
    free(d);
    test_rmtree(dir);
}
END_TEST

/* Found by tests/fuzz/fuzz_container: an index entry may claim any shape up to 2^40 elements for a
 * few stored bytes. The container checks the bytes against the encoding's layout (the same
 * check_entry serves the writer and the index reader), so such an entry never reaches a loader. */
START_TEST(huge_shape_refused_before_allocation)
{
    const char *dir = test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/huge.lmq", dir);
    lmq_err e;
    lmq_writer *w;
    const int64_t shape[2] = { (int64_t)1 << 20, (int64_t)1 << 20 };
    const uint8_t bytes[16] = { 0 };
    ck_assert_int_eq(lmq_writer_open(&w, path, &e), LMQ_OK);
    ck_assert_int_eq(lmq_writer_add(w, "blk.0.attn_q.weight", (lmq_qparams){ .dtype = LMQ_T_INT4, .gran = LMQ_GRAN_TENSOR },
                                    2, shape, bytes, sizeof bytes, LMQ_CODEC_NONE, &e), LMQ_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "blk.0.attn_q.weight: 16 raw bytes, int4 of 1099511627776 elements needs 549755813890"),
                  "%s", e.msg);
    lmq_writer_abort(w);
    test_rmtree(dir);
}
END_TEST

/* Activations travel model → manifest → model; on a vector the writer and the reader refuse them. */
START_TEST(activations_round_trip)
{
    const char *dir = test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/a.lmq", dir);
    lmq_model m, back;
    lmq_manifest man;
    lmq_err e;
    ck_assert_int_eq(make_model(&m, &e), LMQ_OK);
    lmq_model_find(&m, "blk.0.attn_q.weight")->act = (lmq_act){ LMQ_ACT_INT8, LMQ_ACT_TENSOR };
    ck_assert_msg(lmq_container_write_model(path, &m, NULL, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(lmq_container_read_model(path, NULL, &back, &e) == LMQ_OK, "%s", e.msg);
    for (int i = 0; i < back.n_tensors; i++) {
        const lmq_tensor *t = &back.tensors[i];
        const int want = !strcmp(t->name, "blk.0.attn_q.weight");
        ck_assert_msg(t->act.scheme == (want ? LMQ_ACT_INT8 : LMQ_ACT_NONE) && t->act.gran == (want ? LMQ_ACT_TENSOR : 0),
                      "%s: activations %d/%d", t->name, t->act.scheme, t->act.gran);
    }
    lmq_model_free(&back);

    /* On the norm: the writer's manifest check refuses; a file holding it anyway is refused by the reader. */
    lmq_model_find(&m, "blk.0.attn_norm.weight")->act = (lmq_act){ LMQ_ACT_INT8, LMQ_ACT_TOKEN };
    ck_assert_int_eq(lmq_container_write_model(path, &m, NULL, &e), LMQ_E_ARG);
    ck_assert_msg(strstr(e.msg, "blk.0.attn_norm.weight") && strstr(e.msg, "activations"), "%s", e.msg);
    ck_assert_int_eq(lmq_manifest_from_model(&m, &man, &e), LMQ_OK);
    char *text;
    size_t len;
    lmq_writer *w;
    ck_assert_int_eq(lmq_manifest_emit(&man, &text, &len, &e), LMQ_OK);
    ck_assert_int_eq(lmq_writer_open(&w, path, &e), LMQ_OK);
    for (int i = 0; i < m.n_tensors; i++)
        ck_assert_int_eq(lmq_writer_add(w, m.tensors[i].name, m.tensors[i].q, m.tensors[i].ndim, m.tensors[i].shape,
                                        m.tensors[i].raw, m.tensors[i].raw_size, LMQ_CODEC_NONE, &e), LMQ_OK);
    for (int i = 0; i < m.n_files; i++)
        ck_assert_int_eq(lmq_writer_add_file(w, m.files[i].name, m.files[i].data, m.files[i].size, LMQ_CODEC_NONE, &e),
                         LMQ_OK);
    ck_assert_msg(lmq_writer_finish_text(w, text, len, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(lmq_container_read_model(path, NULL, &back, &e), LMQ_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "blk.0.attn_norm.weight") && strstr(e.msg, "activations"), "%s", e.msg);
    free(text);
    lmq_manifest_free(&man);
    lmq_model_free(&m);
    test_rmtree(dir);
}
END_TEST

/* ---- what audit and the loaders refuse in artefacts whose checksums are right ---- */

/* Replaces every occurrence of from in d[0..n) by to (the same length); returns how many. */
static int replace_all(uint8_t *d, size_t n, const char *from, const char *to)
{
    const size_t k = strlen(from);
    int count = 0;
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(d + i, from, k)) {
            memcpy(d + i, to, k);
            count++;
        }
    return count;
}

/* The sample model written with one thing a loader refuses, all checksums right (resealed):
 *   tokenizer  a llama2.c model carrying 300 random bytes as tokenizer.bin
 *   kurtosis   blk.0.attn_q.weight's excess_kurtosis is -3 in the manifest
 *   dotdot     a carried file named "../x"
 *   nan_scale  blk.0.attn_q.weight at int8 per channel, its first fp16 scale NaN (the tensor's
 *              checksum recomputed, so only the value check can catch it)
 *   neg_scale  the same with that scale negated (a requantizing reader must not launder it)
 *   nan_weight blk.0.attn_v.weight (fp32) holds a NaN; its manifest statistics are the clean ones
 *   nan_norm   blk.0.ffn_norm.weight (fp32, a copied vector) holds a NaN at element 2
 *   denormal   blk.0.attn_q.weight's weights all subnormal: valid (quantize warns about it) */
static lmq_code write_hostile(const char *path, const char *kind, lmq_err *e)
{
    lmq_model m;
    lmq_manifest man;
    lmq_writer *w = NULL;
    uint8_t *packed = NULL;
    uint64_t seed = 9;
    lmq_code rc = make_model(&m, e);
    if (rc)
        return rc;
    const lmq_qparams q8 = { LMQ_T_INT8, LMQ_GRAN_CHANNEL, 0, 0 };
    lmq_tensor *q = lmq_model_find(&m, "blk.0.attn_q.weight");
    const int neg_scale = !strcmp(kind, "neg_scale"), nan_scale = neg_scale || !strcmp(kind, "nan_scale");
    if (!strcmp(kind, "tokenizer")) {
        m.arch.tokenizer = LMQ_TOK_LLAMA2C;
        rc = add_file(&m, "tokenizer.bin", 300, &seed, NULL, e);
    } else if (!strcmp(kind, "dotdot")) {
        rc = add_file(&m, "..-x", 16, &seed, "dots", e);
    } else if (!strcmp(kind, "denormal")) {
        for (int64_t i = 0; i < lmq_tensor_numel(q); i++)
            q->data[i] *= 1e-39f;
    }
    if (rc || (rc = lmq_manifest_from_model(&m, &man, e))) {
        lmq_model_free(&m);
        return rc;
    }
    lmq_manifest_tensor *mt = (lmq_manifest_tensor *)lmq_manifest_find(&man, q->name);
    lmq_layout L;
    float back[64];
    if (nan_scale && !(rc = lmq_layout_of(&q8, 8, 8, &L, e)) && (packed = malloc(L.bytes)) &&
        !(rc = q_quantize(&q8, q->data, 8, 8, packed, L.bytes, NULL, e)) &&
        !(rc = q_dequantize(&q8, packed, L.bytes, 8, 8, back, NULL, e))) {
        mt->q = q8;
        q_describe(&q8, mt->scheme, sizeof mt->scheme);
        mt->bits = L.bits;
        mt->bpw = (double)L.bits / 64;
        mt->reason[0] = '\0';
        lmq_tensor_stats(q->data, back, 64, &mt->stats);
    }
    if (!strcmp(kind, "nan_weight"))
        lmq_model_find(&m, "blk.0.attn_v.weight")->data[3] = NAN;
    if (!strcmp(kind, "nan_norm"))
        lmq_model_find(&m, "blk.0.ffn_norm.weight")->data[2] = NAN;
    const int bad_stats = !strcmp(kind, "kurtosis");
    if (bad_stats) { /* lmq_writer_finish would refuse it: the totals as it computes them */
        mt->stats.kurtosis = -3;
        lmq_tensor_entry idx[16] = { 0 };
        for (int i = 0; i < m.n_tensors; i++) {
            snprintf(idx[i].name, sizeof idx[i].name, "%s", m.tensors[i].name);
            idx[i].q = m.tensors[i].q;
            idx[i].ndim = m.tensors[i].ndim;
            memcpy(idx[i].shape, m.tensors[i].shape, sizeof idx[i].shape);
            idx[i].raw_size = m.tensors[i].raw_size;
        }
        man.totals = lmq_manifest_totals_of(&man, idx, m.n_tensors);
    }
    if (!rc)
        rc = lmq_writer_open(&w, path, e);
    for (int i = 0; i < m.n_tensors && !rc; i++) {
        const lmq_tensor *t = &m.tensors[i];
        const int pack = nan_scale && t == q;
        rc = lmq_writer_add(w, t->name, pack ? q8 : t->q, t->ndim, t->shape, pack ? packed : t->raw,
                            pack ? L.bytes : t->raw_size, LMQ_CODEC_NONE, e);
    }
    for (int i = 0; i < m.n_files && !rc; i++)
        rc = lmq_writer_add_file(w, m.files[i].name, m.files[i].data, m.files[i].size, LMQ_CODEC_NONE, e);
    char *text = NULL;
    size_t len;
    if (rc)
        lmq_writer_abort(w);
    else if (!bad_stats)
        rc = lmq_writer_finish(w, &man, e);
    else if (!(rc = lmq_manifest_emit(&man, &text, &len, e)))
        rc = lmq_writer_finish_text(w, text, len, e);
    free(text);
    free(packed);
    lmq_manifest_free(&man);
    lmq_model_free(&m);
    if (rc || (!nan_scale && strcmp(kind, "dotdot")))
        return rc;
    lmq_blob b;
    if ((rc = lmq_blob_open(path, &b, e)))
        return rc;
    size_t n = b.size;
    uint8_t *d = malloc(n);
    memcpy(d, b.data, n);
    lmq_blob_close(&b);
    if (nan_scale) {
        lmq_container c;
        if (!(rc = lmq_container_open_mem(&c, d, n, path, e))) {
            const lmq_tensor_entry *t = lmq_container_find(&c, "blk.0.attn_q.weight");
            const uint64_t io = get_le(d + n - 64, 8);
            put_le(d + t->offset, neg_scale ? get_le(d + t->offset, 2) ^ 0x8000 : 0x7e00, 2); /* -s, or NaN */
            put_le(d + io + 8 + (uint64_t)(t - c.tensors) * 80 + 72, XXH3_64bits(d + t->offset, t->raw_size), 8);
            lmq_container_close(&c);
        }
    } else if (replace_all(d, n, "..-x", "../x") != 2) { /* the index and the manifest */
        rc = lmq_fail(e, LMQ_E_ARG, "dotdot: the name is not where expected");
    }
    if (!rc) {
        reseal(d, n);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(d, 1, n, f) != n || fclose(f))
            rc = lmq_fail(e, LMQ_E_IO, "%s: write failed", path);
    }
    free(d);
    return rc;
}

typedef struct {
    int n;
    char name[LMQ_NAME_MAX + 8], msg[600];
} one_issue;

static void keep_first(void *ctx, const char *tensor, lmq_code code, const char *msg)
{
    one_issue *o = ctx;
    (void)code;
    if (!o->n++) {
        snprintf(o->name, sizeof o->name, "%s", tensor ? tensor : "");
        snprintf(o->msg, sizeof o->msg, "%s", msg);
    }
}

/* Each hostile sample passes the checksums and fails exactly one of audit's other checks, with
 * the tensor or file and the rule named; the loaders (and quantize's check) refuse the same files. */
START_TEST(audit_refuses_what_loaders_refuse)
{
    static const struct {
        const char *kind, *name, *msg;
        int manifest; /* a manifest problem (lmq_artefact_check's), not a value's (rt_artefact_check's) */
    } cases[] = {
        { "tokenizer", "", "tokenizer.bin: ", 0 },
        { "kurtosis", "blk.0.attn_q.weight", "stats.excess_kurtosis is -3: the schema wants a finite number >= -2", 1 },
        { "dotdot", "file:../x", "file ../x: a carried file's name has no '/' or '\\' (byte 2)", 0 },
        { "nan_scale", "blk.0.attn_q.weight", "scale 0 is nan: scales are finite and >= 0", 0 },
        { "neg_scale", "blk.0.attn_q.weight", "scales are finite and >= 0", 0 },
        { "nan_weight", "", "tensor blk.0.attn_v.weight: non-finite value nan at element 3", 0 },
        { "nan_norm", "", "tensor blk.0.ffn_norm.weight: non-finite value nan at element 2", 0 },
        { "denormal", NULL, NULL, 0 },
    };
    const char *dir = test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/h.lmq", dir);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        lmq_err e;
        ck_assert_msg(write_hostile(path, cases[k].kind, &e) == LMQ_OK, "%s: %s", cases[k].kind, e.msg);
        lmq_container c;
        lmq_manifest man;
        ck_assert_int_eq(lmq_container_open(&c, path, &e), LMQ_OK); /* as audit opens it */
        ck_assert_int_eq(lmq_manifest_parse(c.manifest, c.manifest_size, &man, &e), LMQ_OK);
        ck_assert_int_eq(lmq_container_verify(&c, NULL, NULL, &e), LMQ_OK);
        one_issue o = { 0 };
        lmq_manifest_check(&man, c.tensors, c.n_tensors, c.version, keep_first, &o);
        rt_audit_values(&c, keep_first, &o);
        lmq_container_check_files(&c, keep_first, &o);
        rt_audit_tokenizer(&c, &man, keep_first, &o);
        ck_assert_msg(o.n == (cases[k].name ? 1 : 0), "%s: %d problems, first %s: %s", cases[k].kind, o.n, o.name,
                      o.msg);
        if (cases[k].name) {
            ck_assert_str_eq(o.name, cases[k].name);
            ck_assert_msg(strstr(o.msg, cases[k].msg), "%s: %s", cases[k].kind, o.msg);
        }
        /* The readers' two checks (open_manifest's and quantize's) refuse exactly these. */
        ck_assert_int_eq(lmq_artefact_check(&c, &man, &e) != LMQ_OK, cases[k].manifest);
        ck_assert_int_eq(rt_artefact_check(&c, &man, &e) != LMQ_OK, cases[k].name && !cases[k].manifest);
        if (cases[k].name && !cases[k].manifest)
            ck_assert_msg(strstr(e.msg, cases[k].msg), "%s: %s", cases[k].kind, e.msg);
        lmq_manifest_free(&man);
        lmq_container_close(&c);
        lmq_model back;
        lmq_code rc = rt_load_artefact(path, &back, &e);
        ck_assert_msg((rc != LMQ_OK) == (cases[k].name != NULL), "%s: load gave %d", cases[k].kind, rc);
        if (!rc)
            lmq_model_free(&back);
        else
            ck_assert_msg(strstr(e.msg, cases[k].name + 5 * !strncmp(cases[k].name, "file:", 5)), "%s", e.msg);
    }
    test_rmtree(dir);
}
END_TEST

/* lmq_model_validate names a shape as it is: one dimension, or three, not two. */
START_TEST(validate_shape_messages)
{
    lmq_model m;
    lmq_err e;
    ck_assert_int_eq(make_model(&m, &e), LMQ_OK);
    ck_assert_msg(lmq_model_validate(&m, &e) == LMQ_OK, "%s", e.msg);
    lmq_tensor *t = lmq_model_find(&m, "out_norm.weight");
    t->data = NULL; /* shapes only: the values no longer fit the shape */
    t->shape[0] = 64;
    ck_assert_int_eq(lmq_model_validate(&m, &e), LMQ_E_FORMAT);
    ck_assert_str_eq(e.msg, "tensor out_norm.weight: shape [64] expected [8]");
    t->ndim = 3;
    t->shape[0] = 8, t->shape[1] = 2, t->shape[2] = 3;
    ck_assert_int_eq(lmq_model_validate(&m, &e), LMQ_E_FORMAT);
    ck_assert_str_eq(e.msg, "tensor out_norm.weight: shape [8, 2, 3] expected [8]");
    lmq_model_free(&m);
}
END_TEST

/* Carried files have plain names: writers refuse the rest (the reader's side is above). */
START_TEST(carried_file_names)
{
    static const char *const bad[] = { "../x", "a/b", "a\\b", ".", "..", "", "tab\there", "/abs" };
    static const char *const good[] = { "tokenizer.bin", "..x", "x..", ".hidden", "vocab.json" };
    lmq_err e;
    lmq_model m;
    lmq_model_init(&m);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(lmq_file_name_check(bad[i], &e) == LMQ_E_FORMAT, "'%s' passed", bad[i]);
        ck_assert_int_eq(lmq_model_add_file(&m, bad[i], malloc(1), 1, &e), LMQ_E_FORMAT);
    }
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        ck_assert_msg(lmq_file_name_check(good[i], &e) == LMQ_OK, "'%s': %s", good[i], e.msg);
        ck_assert_int_eq(lmq_model_add_file(&m, good[i], malloc(1), 1, &e), LMQ_OK);
    }
    ck_assert_int_eq(lmq_model_add_file(&m, good[0], malloc(1), 1, &e), LMQ_E_ARG); /* twice */
    lmq_model_free(&m);
    const char *dir = test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/f.lmq", dir);
    lmq_writer *w;
    const int64_t one[1] = { 1 };
    ck_assert_int_eq(lmq_writer_open(&w, path, &e), LMQ_OK);
    ck_assert_int_eq(lmq_writer_add_file(w, "../x", "x", 1, LMQ_CODEC_NONE, &e), LMQ_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "file ../x: a carried file's name has no '/'"), "%s", e.msg);
    lmq_writer_abort(w);
    /* Files are added as files: a tensor may not take a file's name, nor dtype 9, their number on disk. */
    ck_assert_int_eq(lmq_writer_open(&w, path, &e), LMQ_OK);
    ck_assert_int_eq(lmq_writer_add(w, "file:x", (lmq_qparams){ .dtype = LMQ_T_F32 }, 1, one, "xxxx", 4,
                                    LMQ_CODEC_NONE, &e), LMQ_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "tensor file:x: named as a carried file (file:...) but stored as fp32"), "%s", e.msg);
    lmq_writer_abort(w);
    ck_assert_int_eq(lmq_writer_open(&w, path, &e), LMQ_OK);
    ck_assert_int_eq(lmq_writer_add(w, "x", (lmq_qparams){ .dtype = 9 }, 1, one, "x", 1, LMQ_CODEC_NONE, &e),
                     LMQ_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "tensor x: unknown dtype 9"), "%s", e.msg);
    lmq_writer_abort(w);
    ck_assert_int_eq(dir_entries(dir), 0);
    test_rmtree(dir);
}
END_TEST

/* The sample with a manifest that leaves out its last tensor (checksums all correct): what
 * audit's manifest check must catch. */
static lmq_code write_sample_unlisted(const char *path, lmq_err *e)
{
    lmq_model m;
    lmq_manifest man;
    lmq_writer *w = NULL;
    char *text = NULL;
    size_t len;
    lmq_code rc = make_model(&m, e);
    if (rc)
        return rc;
    if (!(rc = lmq_manifest_from_model(&m, &man, e))) {
        man.n_tensors--;
        man.n_files = 0;
        if (!(rc = lmq_manifest_emit(&man, &text, &len, e)) && !(rc = lmq_writer_open(&w, path, e)))
            for (int i = 0; i < m.n_tensors && !rc; i++)
                rc = lmq_writer_add(w, m.tensors[i].name, (lmq_qparams){ .dtype = LMQ_T_F32 }, m.tensors[i].ndim,
                                    m.tensors[i].shape, m.tensors[i].data,
                                    (size_t)lmq_tensor_numel(&m.tensors[i]) * 4, LMQ_CODEC_NONE, e);
        if (w && !rc)
            rc = lmq_writer_finish_text(w, text, len, e);
        else
            lmq_writer_abort(w);
        lmq_manifest_free(&man);
    }
    free(text);
    lmq_model_free(&m);
    return rc;
}

/* A copy of artefact `from` whose manifest is the text of file `manifest`, as is, and whose entry
 * named `zero` (NULL: none) holds zero bytes, with every checksum made right: how
 * tests/integration/arch_fields.sh edits a field, and writers.sh a carried file, past the checksums. */
static lmq_code write_resigned(const char *path, const char *from, const char *manifest, const char *zero,
                               lmq_err *e)
{
    lmq_container c;
    lmq_blob text;
    lmq_writer *w = NULL;
    lmq_code rc = lmq_container_open(&c, from, e);
    if (rc)
        return rc;
    if ((rc = lmq_blob_open(manifest, &text, e))) {
        lmq_container_close(&c);
        return rc;
    }
    rc = lmq_writer_open(&w, path, e);
    for (int k = 0; k < c.n_tensors && !rc; k++) {
        const lmq_tensor_entry *t = &c.tensors[c.by_offset[k]];
        const void *raw;
        void *owned;
        if (!(rc = lmq_container_view(&c, t, &raw, &owned, e)) && zero && !strcmp(t->name, zero)) {
            free(owned);
            if (!(raw = owned = calloc(1, t->raw_size + 1)))
                rc = lmq_fail(e, LMQ_E_NOMEM, "out of memory");
        }
        if (!rc) {
            rc = lmq_entry_is_file(t)
                     ? lmq_writer_add_file(w, lmq_entry_file_name(t), raw, t->raw_size, LMQ_CODEC_NONE, e)
                     : lmq_writer_add(w, t->name, t->q, t->ndim, t->shape, raw, t->raw_size, LMQ_CODEC_NONE, e);
            free(owned);
        }
    }
    if (rc)
        lmq_writer_abort(w);
    else
        rc = lmq_writer_finish_text(w, (const char *)text.data, text.size, e);
    lmq_blob_close(&text);
    lmq_container_close(&c);
    return rc;
}

int main(void)
{
    const char *sample = getenv("LMQ_WRITE_SAMPLE");
    if (sample) {
        lmq_err e;
        const char *kind = getenv("LMQ_SAMPLE_KIND");
        const char *from = getenv("LMQ_RESIGN_FROM");
        lmq_code rc = from ? write_resigned(sample, from, getenv("LMQ_RESIGN_MANIFEST"), getenv("LMQ_RESIGN_ZERO"), &e)
                      : !kind ? write_sample(sample, LMQ_CODEC_ZSTD, &e)
                      : !strcmp(kind, "unlisted") ? write_sample_unlisted(sample, &e)
                                                  : write_hostile(sample, kind, &e);
        if (rc)
            fprintf(stderr, "%s\n", e.msg);
        return rc ? 1 : 0;
    }
    Suite *s = suite_create("container");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, model_round_trip);
    tcase_add_test(tc, deterministic_bytes);
    tcase_add_test(tc, real_models_round_trip);
    tcase_add_test(tc, tensor_access);
    tcase_add_test(tc, linear_tensor_names);
    tcase_add_test(tc, atomic_writes);
    tcase_add_test(tc, manifest_round_trip);
    tcase_add_test(tc, activations_round_trip);
    tcase_add_test(tc, manifest_parse_errors);
    tcase_add_test(tc, manifest_check_reports_all);
    tcase_add_test(tc, quantised_entry);
    tcase_add_test(tc, every_truncation_refused);
    tcase_add_test(tc, every_bit_flip_caught);
    tcase_add_test(tc, hostile_headers_and_indexes);
    tcase_add_test(tc, hostile_zstd_sizes);
    tcase_add_test(tc, verify_reports_every_failure);
    tcase_add_test(tc, huge_shape_refused_before_allocation);
    tcase_add_test(tc, audit_refuses_what_loaders_refuse);
    tcase_add_test(tc, carried_file_names);
    tcase_add_test(tc, validate_shape_messages);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
