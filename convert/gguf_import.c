/* lmq_gguf_load, lmq_gguf_convert: a GGUF file as an lmq model, encodings kept (convert/gguf.h). */
#include "convert/gguf.h"

#include <inttypes.h>
#include <math.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/le.h"
#include "common/stats.h"
#include "formats/artefact.h"
#include "formats/container.h"
#include "formats/gguf.h"
#include "formats/gguf_model.h"
#include "formats/manifest.h"
#include "schemes/scheme.h"

/* The ggml types lmq imports, for messages: those lmq_gguf_encoding_of maps, in ggml's order. */
static const char *importable(char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (uint32_t t = 0; t < GGML_TYPE_LIMIT && n < size; t++)
        if (lmq_encoding_of_ggml(t))
            n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? ", " : "", gf_type_of(t).name);
    return buf;
}

/* Describes tensor gt in m: lmq's name, shape and the encoding it keeps; no bytes yet. */
static lmq_code plan_tensor(lmq_model *m, const gf_file *f, const gf_tensor *gt, lmq_err *err)
{
    lmq_qparams q;
    char types[256];
    if (!lmq_gguf_encoding_of(f, gt, &q))
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "%s: tensor %s: ggml type %s is not one lmq imports (%s)", f->path,
                        gt->name, gf_type_of(gt->type).name, importable(types, sizeof types));
    for (uint32_t d = 2; d < gt->n_dims; d++)
        if (gt->ne[d] != 1)
            return lmq_fail(err, LMQ_E_UNSUPPORTED, "%s: tensor %s: %" PRIu32 " dimensions (lmq takes matrices and "
                            "vectors)", f->path, gt->name, gt->n_dims);
    char name[LMQ_NAME_MAX];
    lmq_gguf_name(gt->name, 0, name);
    const int ndim = gt->n_dims > 1 ? 2 : 1;
    const int64_t rows = (int64_t)gt->ne[1], cols = (int64_t)gt->ne[0];
    const int64_t shape[2] = { ndim == 2 ? rows : cols, cols };
    lmq_layout L;
    lmq_code rc = lmq_layout_of(&q, rows, cols, &L, err);
    if (rc)
        return lmq_err_prefix(err, "%s: tensor %s: ", f->path, gt->name);
    return lmq_model_add_view(m, name, ndim, shape, q, NULL, L.bytes, NULL, NULL, err);
}

/* The stored bytes of t (t->raw_size of them) from GGUF tensor gt into out, checked as a loader
 * checks them (q_validate: every weight finite). */
static lmq_code produce(const gf_file *f, const gf_tensor *gt, const lmq_tensor *t, uint8_t *out, lmq_err *err)
{
    const int64_t rows = (int64_t)gt->ne[1], cols = (int64_t)gt->ne[0];
    lmq_layout L;
    lmq_code rc = lmq_layout_of(&t->q, rows, cols, &L, err);
    if (!rc)
        lmq_gguf_repack(&t->q, &L, 0, gt->data, out);
    if (rc || (rc = q_validate(&t->q, out, L.bytes, rows, cols, err)))
        lmq_err_prefix(err, "%s: tensor %s: ", f->path, gt->name);
    return rc;
}

/* ---- hyperparameters ------------------------------------------------------------------------ */

/* The file's key for `field` of its architecture into *out, left as it is when the architecture
 * has no such key (or, `optional`, when the file has none). */
static lmq_code get_i(const gf_file *f, const lmq_gguf_arch *ga, lmq_gguf_field field, int optional, int *out,
                      lmq_err *err)
{
    char k[128];
    if (!lmq_gguf_key_name(ga, field, k, sizeof k))
        return LMQ_OK;
    int64_t v = *out;
    lmq_code rc = gf_get_int(f, k, optional, &v, err);
    if (!rc && (v < 1 || v > 1 << 30)) /* every count: a block_count of 0 is no model */
        rc = lmq_fail(err, LMQ_E_FORMAT, "%s: key %s: %" PRId64 " is out of range 1..2^30", f->path, k, v);
    if (!rc)
        *out = (int)v;
    return rc;
}

static lmq_code get_f(const gf_file *f, const lmq_gguf_arch *ga, lmq_gguf_field field, int optional, float *out,
                      lmq_err *err)
{
    char k[128];
    if (!lmq_gguf_key_name(ga, field, k, sizeof k))
        return LMQ_OK;
    double v = *out;
    lmq_code rc = gf_get_float(f, k, optional, &v, err);
    if (!rc && (!((float)v > 0.0f) || !isfinite((float)v))) /* an epsilon, a rope base */
        rc = lmq_fail(err, LMQ_E_FORMAT, "%s: key %s: %g is not a finite number > 0", f->path, k, v);
    if (!rc)
        *out = (float)v;
    return rc;
}

static lmq_code read_arch(const gf_file *f, lmq_model *m, lmq_err *err)
{
    gf_str s;
    lmq_arch *a = &m->arch;
    lmq_code rc = gf_get_str(f, "general.architecture", 0, &s, err);
    if (rc)
        return rc;
    const lmq_gguf_arch *ga = lmq_gguf_arch_named(s);
    if (!ga)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "%s: general.architecture '%.*s': lmq imports llama and gpt2", f->path,
                        (int)(s.len > 40 ? 40 : s.len), s.p);
    const int llama = ga->family == LMQ_FAMILY_LLAMA;
    a->family = ga->family;
    a->rope = llama ? LMQ_ROPE_INTERLEAVED : LMQ_ROPE_NONE; /* GGUF's llama order (Meta's) */
    a->tokenizer = llama ? LMQ_TOK_LLAMA2C : LMQ_TOK_GPT2;
    a->norm_eps = 1e-5f;
    a->rope_theta = llama ? 10000.0f : 0.0f; /* no rope in gpt2 */
    a->bos_id = a->eos_id = -1;
    int64_t bos = -1, eos = -1;
    if ((rc = get_i(f, ga, LMQ_GK_DIM, 0, &a->dim, err)) ||
        (rc = get_i(f, ga, LMQ_GK_HIDDEN_DIM, 0, &a->hidden_dim, err)) ||
        (rc = get_i(f, ga, LMQ_GK_N_LAYERS, 0, &a->n_layers, err)) ||
        (rc = get_i(f, ga, LMQ_GK_N_HEADS, 0, &a->n_heads, err)) ||
        (rc = get_i(f, ga, LMQ_GK_MAX_SEQ, 0, &a->max_seq, err)) ||
        (rc = get_f(f, ga, LMQ_GK_NORM_EPS, 0, &a->norm_eps, err)) ||
        (rc = get_f(f, ga, LMQ_GK_ROPE_THETA, 1, &a->rope_theta, err)) ||
        (rc = gf_get_int(f, "tokenizer.ggml.bos_token_id", 1, &bos, err)) ||
        (rc = gf_get_int(f, "tokenizer.ggml.eos_token_id", 1, &eos, err)))
        return rc;
    a->n_kv_heads = a->n_heads;
    int rope_dims = a->dim / a->n_heads; /* lmq rotates whole heads: a file that says otherwise is refused */
    if ((rc = get_i(f, ga, LMQ_GK_N_KV_HEADS, 1, &a->n_kv_heads, err)) ||
        (rc = get_i(f, ga, LMQ_GK_ROPE_DIMS, 1, &rope_dims, err)))
        return rc;
    if (rope_dims != a->dim / a->n_heads) {
        char k[128];
        lmq_gguf_key_name(ga, LMQ_GK_ROPE_DIMS, k, sizeof k);
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "%s: key %s: %d, but the head size (embedding_length / head_count) "
                        "is %d: lmq rotates whole heads", f->path, k, rope_dims, a->dim / a->n_heads);
    }
    const gf_tensor *emb = gf_find_tensor(f, "token_embd.weight");
    if (!emb || emb->n_dims != 2)
        return lmq_fail(err, LMQ_E_FORMAT, "%s: no 2-D token_embd.weight", f->path);
    a->vocab_size = emb->ne[1] > 1 << 30 ? -1 : (int)emb->ne[1];
    a->tied_embedding = !gf_find_tensor(f, "output.weight");
    a->bos_id = bos >= 0 && bos < a->vocab_size ? (int)bos : -1;
    a->eos_id = eos >= 0 && eos < a->vocab_size ? (int)eos : -1;
    return LMQ_OK;
}

/* ---- tokenizer ----------------------------------------------------------------------------- */

/* A carried file written through a memory stream (open_memstream). */
typedef struct {
    FILE *fp;
    char *p;
    size_t n;
} mem_out;

static lmq_code mem_open(mem_out *o, lmq_err *err)
{
    o->p = NULL;
    o->n = 0;
    o->fp = open_memstream(&o->p, &o->n);
    return o->fp ? LMQ_OK : lmq_fail(err, LMQ_E_NOMEM, "tokenizer: out of memory");
}

/* Closes the stream; on success the bytes go to the model as carried file `name`. */
static lmq_code mem_close(mem_out *o, lmq_model *m, const char *name, lmq_code rc, lmq_err *err)
{
    const int failed = ferror(o->fp);
    if (fclose(o->fp) || failed)
        rc = rc ? rc : lmq_fail(err, LMQ_E_NOMEM, "tokenizer: out of memory");
    if (rc) {
        free(o->p);
        return rc;
    }
    return lmq_model_add_file(m, name, (uint8_t *)o->p, o->n, err);
}

/* A token's length with each U+2581 (3 bytes) as one space. */
static uint64_t spaced_len(gf_str s)
{
    uint64_t len = s.len;
    for (uint64_t k = 0; k + 3 <= s.len; k++)
        if (!memcmp(s.p + k, LMQ_SPM_SPACE, 3)) {
            len -= 2;
            k += 2;
        }
    return len;
}

/* tokenizer.bin from the "llama" vocabulary: U+2581 back to spaces, scores as given,
 * max_token_length the longest token. */
static lmq_code llama_tokenizer(const gf_file *f, lmq_model *m, lmq_err *err)
{
    const gf_kv *tok = gf_get_array(f, "tokenizer.ggml.tokens", GGUF_STRING, err), *sc;
    if (!tok || !(sc = gf_get_array(f, "tokenizer.ggml.scores", GGUF_F64, err)))
        return err->code;
    if (sc->n != tok->n || tok->n != (uint64_t)m->arch.vocab_size)
        return lmq_fail(err, LMQ_E_FORMAT, "%s: %" PRIu64 " tokens, %" PRIu64 " scores, %d rows of token_embd", f->path,
                        tok->n, sc->n, m->arch.vocab_size);
    /* Lengths first (max_token_length leads the file), then the entries. */
    uint64_t longest = 0;
    const uint8_t *pos = tok->val;
    for (uint64_t i = 0; i < tok->n; i++) {
        const uint64_t len = spaced_len(gf_arr_next_str(&pos));
        if (len > INT32_MAX)
            return lmq_fail(err, LMQ_E_FORMAT, "%s: token %" PRIu64 " is too long", f->path, i);
        longest = len > longest ? len : longest;
    }
    mem_out o;
    lmq_code rc = mem_open(&o, err);
    if (rc)
        return rc;
    lmq_write_le32(o.fp, (uint32_t)longest);
    pos = tok->val;
    for (uint64_t i = 0; i < tok->n; i++) {
        const gf_str s = gf_arr_next_str(&pos);
        lmq_write_le32(o.fp, lmq_f32_bits((float)gf_arr_float(sc, i)));
        lmq_write_le32(o.fp, (uint32_t)spaced_len(s));
        for (uint64_t k = 0; k < s.len; k++)
            if (s.len - k >= 3 && !memcmp(s.p + k, LMQ_SPM_SPACE, 3)) {
                fputc(' ', o.fp);
                k += 2;
            } else {
                fputc(s.p[k], o.fp);
            }
    }
    return mem_close(&o, m, "tokenizer.bin", rc, err);
}

/* vocab.json and merges.txt from the "gpt2" vocabulary. */
static lmq_code gpt2_tokenizer(const gf_file *f, lmq_model *m, lmq_err *err)
{
    const gf_kv *tok = gf_get_array(f, "tokenizer.ggml.tokens", GGUF_STRING, err), *mg;
    if (!tok || !(mg = gf_get_array(f, "tokenizer.ggml.merges", GGUF_STRING, err)))
        return err->code;
    json_t *v = json_object();
    const uint8_t *pos = tok->val;
    lmq_code rc = v ? LMQ_OK : lmq_fail(err, LMQ_E_NOMEM, "tokenizer: out of memory");
    for (uint64_t i = 0; i < tok->n && !rc; i++) {
        gf_str s = gf_arr_next_str(&pos);
        char *k = strndup(s.p, (size_t)s.len);
        if (!k || strlen(k) != s.len || json_object_get(v, k) || json_object_set_new(v, k, json_integer((json_int_t)i)))
            rc = lmq_fail(err, LMQ_E_FORMAT, "%s: tokenizer.ggml.tokens: token %" PRIu64 " is not valid UTF-8, holds a "
                          "NUL or repeats an earlier one", f->path, i);
        free(k);
    }
    char *js = rc ? NULL : json_dumps(v, JSON_COMPACT);
    json_decref(v);
    if (rc)
        return rc;
    if (!js)
        return lmq_fail(err, LMQ_E_NOMEM, "tokenizer: out of memory");
    mem_out o;
    if ((rc = lmq_model_add_file(m, "vocab.json", (uint8_t *)js, strlen(js), err)) || (rc = mem_open(&o, err)))
        return rc;
    fputs("#version: 0.2\n", o.fp);
    pos = mg->val;
    for (uint64_t i = 0; i < mg->n && !rc; i++) {
        gf_str s = gf_arr_next_str(&pos);
        if (memchr(s.p, '\n', (size_t)s.len))
            rc = lmq_fail(err, LMQ_E_FORMAT, "%s: tokenizer.ggml.merges: merge %" PRIu64 " holds a newline", f->path, i);
        fwrite(s.p, 1, (size_t)s.len, o.fp);
        fputc('\n', o.fp);
    }
    return mem_close(&o, m, "merges.txt", rc, err);
}

/* ---- the model ----------------------------------------------------------------------------- */

/* Opens src into f and plans the import into out (initialised here): arch, tokenizer files,
 * source and notes, every tensor described (plan_tensor), the whole validated for shape. On
 * failure nothing stays open or allocated. */
static lmq_code plan(const char *src, gf_file *f, lmq_model *out, lmq_err *err)
{
    lmq_model_init(out);
    lmq_code rc = gf_open(src, f, err);
    if (rc)
        return rc;
    if (!(rc = read_arch(f, out, err))) {
        gf_str tm = { "", 0 };
        if ((rc = gf_get_str(f, "tokenizer.ggml.model", 0, &tm, err)))
            ;
        else if (!gf_str_eq(tm, out->arch.family == LMQ_FAMILY_LLAMA ? "llama" : "gpt2"))
            rc = lmq_fail(err, LMQ_E_UNSUPPORTED, "%s: tokenizer.ggml.model '%.*s' with a %s model (lmq reads 'llama' "
                          "for llama, 'gpt2' for gpt2)", src, (int)(tm.len > 40 ? 40 : tm.len), tm.p,
                          out->arch.family == LMQ_FAMILY_LLAMA ? "llama" : "gpt2");
        else
            rc = out->arch.family == LMQ_FAMILY_LLAMA ? llama_tokenizer(f, out, err) : gpt2_tokenizer(f, out, err);
    }
    for (int64_t i = 0; i < f->n_tensors && !rc; i++)
        rc = plan_tensor(out, f, &f->tensors[i], err);
    if (!rc) {
        out->source_checksum = XXH3_64bits(f->blob.data, f->blob.size);
        snprintf(out->source, sizeof out->source, "%s", src);
        snprintf(out->notes, sizeof out->notes, "GGUF v%" PRIu32 " (%s); tensor names mapped to lmq's, [out, in] as "
                 "GGUF stores them (ne[0] = columns); encodings kept (q8_0, q4_0 as int8, int4 symmetric g32 where "
                 "every block scale is >= 0); %s",
                 f->version, out->arch.family == LMQ_FAMILY_LLAMA ? "llama" : "gpt2",
                 out->arch.family == LMQ_FAMILY_LLAMA ? "rope: interleaved pairs (GGUF's llama order)"
                                                      : "tokenizer: vocab.json and merges.txt from the metadata");
        if ((rc = lmq_model_validate(out, err)))
            lmq_err_prefix(err, "%s: ", src);
    }
    if (rc) {
        gf_close(f);
        lmq_model_free(out);
    }
    return rc;
}

lmq_code lmq_gguf_load(const char *src, lmq_model *out, lmq_err *err)
{
    gf_file f;
    lmq_code rc = plan(src, &f, out, err);
    if (rc)
        return rc;
    for (int i = 0; i < out->n_tensors && !rc; i++) {
        lmq_tensor *t = &out->tensors[i];
        uint8_t *bytes = malloc(t->raw_size ? t->raw_size : 1);
        if (!bytes) {
            rc = lmq_fail(err, LMQ_E_NOMEM, "%s: tensor %s: out of memory", src, t->name);
            break;
        }
        t->raw = t->owned = bytes;
        t->data = t->q.dtype == LMQ_T_F32 ? (float *)bytes : NULL;
        rc = produce(&f, &f.tensors[i], t, bytes, err);
    }
    gf_close(&f);
    if (rc)
        lmq_model_free(out);
    return rc;
}

/* The manifest entry of imported tensor t whose stored bytes are raw: its kept encoding, and
 * statistics of its values (decoded into vals, room for its elements). */
static lmq_code describe(lmq_manifest *man, const lmq_tensor *t, const uint8_t *raw, float *vals, lmq_err *err)
{
    const int64_t n = lmq_tensor_numel(t), rows = t->ndim > 1 ? t->shape[0] : 1;
    if (t->q.dtype == LMQ_T_F32) {
        lmq_code rc = lmq_manifest_add_plain(man, t, (const float *)raw, err);
        if (!rc)
            snprintf(man->tensors[man->n_tensors - 1].reason, LMQ_REASON_MAX, "F32 in the GGUF file");
        return rc;
    }
    lmq_layout L;
    lmq_manifest_tensor *e;
    lmq_code rc;
    if ((rc = lmq_layout_of(&t->q, rows, n / rows, &L, err)) ||
        (rc = q_dequantize(&t->q, raw, t->raw_size, rows, n / rows, vals, NULL, err)) ||
        (rc = lmq_manifest_add_tensor(man, t->name, &e, err)))
        return rc;
    q_describe(&t->q, e->scheme, sizeof e->scheme);
    e->q = t->q;
    e->linear = lmq_is_linear(t->name, t->ndim);
    e->bits = L.bits;
    e->bpw = (double)L.bits / (double)n;
    e->act = t->act;
    lmq_tensor_stats(vals, NULL, (size_t)n, &e->stats);
    return LMQ_OK;
}

lmq_code lmq_gguf_convert(const char *src, const char *out_path, int zstd, lmq_model *summary, lmq_err *err)
{
    gf_file f;
    lmq_model m;
    lmq_manifest man;
    lmq_manifest_init(&man);
    lmq_code rc = plan(src, &f, &m, err);
    if (rc) {
        lmq_manifest_free(&man);
        return rc;
    }
    /* One tensor at a time through one buffer for its bytes and one for its values. */
    size_t bytes_max = 1, elems_max = 1;
    for (int i = 0; i < m.n_tensors; i++) {
        bytes_max = m.tensors[i].raw_size > bytes_max ? m.tensors[i].raw_size : bytes_max;
        elems_max = (size_t)lmq_tensor_numel(&m.tensors[i]) > elems_max ? (size_t)lmq_tensor_numel(&m.tensors[i])
                                                                         : elems_max;
    }
    uint8_t *buf = malloc(bytes_max);
    float *vals = malloc(elems_max * sizeof *vals);
    const lmq_codec codec = zstd ? LMQ_CODEC_ZSTD : LMQ_CODEC_NONE;
    lmq_writer *w = NULL;
    if (!buf || !vals)
        rc = lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", src);
    if (!rc && !(rc = lmq_manifest_describe(&man, &m, err)))
        rc = lmq_writer_open(&w, out_path, err);
    for (int i = 0; i < m.n_tensors && !rc; i++) {
        const lmq_tensor *t = &m.tensors[i];
        if (!(rc = produce(&f, &f.tensors[i], t, buf, err)) && !(rc = describe(&man, t, buf, vals, err)))
            rc = lmq_writer_add(w, t->name, t->q, t->ndim, t->shape, buf, t->raw_size, codec, err);
    }
    for (int i = 0; i < m.n_files && !rc; i++)
        rc = lmq_writer_add_file(w, m.files[i].name, m.files[i].data, m.files[i].size, codec, err);
    if (rc)
        lmq_writer_abort(w);
    else
        rc = lmq_writer_finish(w, &man, err);
    free(buf);
    free(vals);
    gf_close(&f);
    lmq_manifest_free(&man);
    if (!rc && summary)
        *summary = m; /* tensors described (no bytes), files carried */
    else
        lmq_model_free(&m);
    return rc;
}
