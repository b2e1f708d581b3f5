/* Hugging Face checkpoints (config.json + safetensors, single or sharded) to an lmq_plan.
 * Tensor names go through the architecture's table (formats/hf_model.h: Hugging Face pattern →
 * canonical name, how to copy it); config.json goes through one reader per kind of architecture,
 * over the table's keys. */
#include "convert/convert.h"

#include <dirent.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "common/file.h"
#include "convert/paths.h"
#include "formats/hf_model.h"
#include "formats/safetensors.h"

/* Fused tensors stored as lmq's canonical row blocks: rows stacked in the source, cut apart at
 * convert (the runtime has no fused Llama rows). */
typedef enum { SPLIT_QKV, SPLIT_GATE_UP, SPLIT_KINDS } split_kind;

static const struct {
    const char *fused;   /* the canonical stem the table rows give the fused tensor */
    const char *part[3]; /* canonical stems, in row order */
    int n;
} SPLITS[] = {
    [SPLIT_QKV] = { "attn_qkv", { "attn_q", "attn_k", "attn_v" }, 3 }, /* rows: heads·hd, kv_heads·hd twice */
    [SPLIT_GATE_UP] = { "ffn_gate_up", { "ffn_gate", "ffn_up" }, 2 }, /* rows: hidden twice (gate first) */
};

/* ---- config.json ---------------------------------------------------------------------- */

#define CFG_REQUIRED (-1)
#define CFG_MAX_INT (1 << 24) /* bounds every dimension so products of two fit comfortably */

/* A positive integer field; absent or null gives def (CFG_REQUIRED: an error). */
static lmq_code cfg_int(json_t *cfg, const char *key, int def, int *out, lmq_err *err)
{
    json_t *v = json_object_get(cfg, key);
    if (!v || json_is_null(v)) {
        if (def == CFG_REQUIRED)
            return lmq_fail(err, LMQ_E_FORMAT, "config.json: %s is missing", key);
        *out = def;
        return LMQ_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > CFG_MAX_INT)
        return lmq_fail(err, LMQ_E_FORMAT, "config.json: %s is not a positive integer up to %d", key, CFG_MAX_INT);
    *out = (int)json_integer_value(v);
    return LMQ_OK;
}

static lmq_code cfg_num(json_t *cfg, const char *key, double def, float *out, lmq_err *err)
{
    json_t *v = json_object_get(cfg, key);
    if (!v || json_is_null(v)) {
        *out = (float)def;
        return LMQ_OK;
    }
    if (!json_is_number(v) || !(json_number_value(v) > 0) || json_number_value(v) > 1e30)
        return lmq_fail(err, LMQ_E_FORMAT, "config.json: %s is not a positive number", key);
    *out = (float)json_number_value(v);
    return LMQ_OK;
}

static lmq_code cfg_bool(json_t *cfg, const char *key, int def, int *out, lmq_err *err)
{
    json_t *v = json_object_get(cfg, key);
    if (!v || json_is_null(v))
        *out = def;
    else if (json_is_boolean(v))
        *out = json_is_true(v);
    else
        return lmq_fail(err, LMQ_E_FORMAT, "config.json: %s is not true or false", key);
    return LMQ_OK;
}

/* Family f's key for field k. */
static const char *key(const lmq_hf_family *f, lmq_hf_field k)
{
    return lmq_hf_key_of(f, k)->key;
}

/* A string field that must equal want when present (want is also the default). */
static lmq_code cfg_expect(json_t *cfg, const char *key, const char *want, lmq_err *err)
{
    json_t *v = json_object_get(cfg, key);
    if (!v || json_is_null(v))
        return LMQ_OK;
    if (!json_is_string(v))
        return lmq_fail(err, LMQ_E_FORMAT, "config.json: %s is not a string", key);
    if (strcmp(json_string_value(v), want))
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "config.json: %s \"%s\" is not supported (lmq runs \"%s\")", key,
                        json_string_value(v), want);
    return LMQ_OK;
}

/* A token id: an integer, the first of a list of them, or null (none: -1). */
static lmq_code cfg_token(json_t *cfg, const char *key, int def, int *out, lmq_err *err)
{
    json_t *v = json_object_get(cfg, key);
    if (json_is_array(v))
        v = json_array_get(v, 0);
    if (!json_object_get(cfg, key))
        *out = def;
    else if (!v || json_is_null(v))
        *out = -1;
    else if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= CFG_MAX_INT)
        *out = (int)json_integer_value(v);
    else
        return lmq_fail(err, LMQ_E_FORMAT, "config.json: %s is not a token id", key);
    return LMQ_OK;
}

static lmq_code gpt2_config(json_t *cfg, const lmq_hf_family *f, lmq_arch *a, lmq_err *err)
{
    lmq_code c;
    int ctx; /* older configs name the context n_ctx; n_positions wins when both are given */
    a->family = LMQ_FAMILY_GPT2;
    a->rope = LMQ_ROPE_NONE;
    if ((c = cfg_int(cfg, key(f, LMQ_HK_DIM), CFG_REQUIRED, &a->dim, err)) ||
        (c = cfg_int(cfg, key(f, LMQ_HK_N_LAYERS), CFG_REQUIRED, &a->n_layers, err)) ||
        (c = cfg_int(cfg, key(f, LMQ_HK_N_HEADS), CFG_REQUIRED, &a->n_heads, err)) ||
        (c = cfg_int(cfg, key(f, LMQ_HK_VOCAB_SIZE), CFG_REQUIRED, &a->vocab_size, err)) ||
        (c = cfg_int(cfg, key(f, LMQ_HK_MAX_SEQ_OLD), 0, &ctx, err)) ||
        (c = cfg_int(cfg, key(f, LMQ_HK_MAX_SEQ), ctx ? ctx : CFG_REQUIRED, &a->max_seq, err)) ||
        (c = cfg_int(cfg, key(f, LMQ_HK_HIDDEN_DIM), 4 * a->dim, &a->hidden_dim, err)) ||
        (c = cfg_num(cfg, key(f, LMQ_HK_NORM_EPS), 1e-5, &a->norm_eps, err)) ||
        (c = cfg_bool(cfg, key(f, LMQ_HK_TIED), 1, &a->tied_embedding, err)) ||
        (c = cfg_expect(cfg, key(f, LMQ_HK_ACTIVATION), lmq_hf_key_of(f, LMQ_HK_ACTIVATION)->value, err)) ||
        (c = cfg_token(cfg, key(f, LMQ_HK_BOS), 50256, &a->bos_id, err)) ||
        (c = cfg_token(cfg, key(f, LMQ_HK_EOS), 50256, &a->eos_id, err)))
        return c;
    a->n_kv_heads = a->n_heads;
    return LMQ_OK;
}

/* Options that change the computation and that the runtime does not implement. */
static lmq_code llama_unsupported(json_t *cfg, const lmq_hf_family *f, const lmq_arch *a, lmq_err *err)
{
    const char *flags[] = { key(f, LMQ_HK_ATTN_BIAS), key(f, LMQ_HK_MLP_BIAS) };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (json_is_true(json_object_get(cfg, flags[i])))
            return lmq_fail(err, LMQ_E_UNSUPPORTED, "config.json: %s = true is not supported", flags[i]);
    json_t *rs = json_object_get(cfg, "rope_scaling");
    if (rs && !json_is_null(rs))
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "config.json: rope_scaling is not supported");
    json_t *hd = json_object_get(cfg, "head_dim");
    if (hd && !json_is_null(hd) && /* compared by division: head_dim * n_heads may overflow */
        (!json_is_integer(hd) || a->dim % a->n_heads || json_integer_value(hd) != a->dim / a->n_heads))
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "config.json: head_dim is not hidden_size / num_attention_heads");
    return LMQ_OK;
}

/* Sliding-window attention (Mistral; Qwen2 and Phi-3 when enabled): every position attends to at
 * most `window` positions, the same as full attention while the context is no longer than the
 * window. The model's max_seq is capped at the window, so lmq never runs a context where the two
 * differ; the note records it. */
static lmq_code sliding_window(json_t *cfg, lmq_arch *a, int enabled, char *note, size_t cap, lmq_err *err)
{
    int window;
    lmq_code c = cfg_int(cfg, "sliding_window", 0, &window, err);
    if (c || !enabled || !window || window >= a->max_seq)
        return c;
    snprintf(note, cap, "sliding_window %d: max_seq capped from %d to the window (exact: no context runs past it)",
             window, a->max_seq);
    a->max_seq = window;
    return LMQ_OK;
}

static lmq_code llama_config(json_t *cfg, const lmq_hf_family *f, lmq_arch *a, lmq_err *err)
{
    lmq_code c;
    a->family = LMQ_FAMILY_LLAMA;
    a->rope = LMQ_ROPE_HALF; /* HF Llama rotates (i, i + hd/2) pairs: rotate_half */
    if ((c = cfg_int(cfg, key(f, LMQ_HK_DIM), CFG_REQUIRED, &a->dim, err)) ||
        (c = cfg_int(cfg, key(f, LMQ_HK_HIDDEN_DIM), CFG_REQUIRED, &a->hidden_dim, err)) ||
        (c = cfg_int(cfg, key(f, LMQ_HK_N_LAYERS), CFG_REQUIRED, &a->n_layers, err)) ||
        (c = cfg_int(cfg, key(f, LMQ_HK_N_HEADS), CFG_REQUIRED, &a->n_heads, err)) ||
        (c = cfg_int(cfg, key(f, LMQ_HK_N_KV_HEADS), a->n_heads, &a->n_kv_heads, err)) ||
        (c = cfg_int(cfg, key(f, LMQ_HK_VOCAB_SIZE), CFG_REQUIRED, &a->vocab_size, err)) ||
        (c = cfg_int(cfg, key(f, LMQ_HK_MAX_SEQ), CFG_REQUIRED, &a->max_seq, err)) ||
        (c = cfg_num(cfg, key(f, LMQ_HK_NORM_EPS), 1e-6, &a->norm_eps, err)) ||
        (c = cfg_num(cfg, key(f, LMQ_HK_ROPE_THETA), 10000.0, &a->rope_theta, err)) ||
        (c = cfg_bool(cfg, key(f, LMQ_HK_TIED), 0, &a->tied_embedding, err)) ||
        (c = cfg_expect(cfg, key(f, LMQ_HK_ACTIVATION), lmq_hf_key_of(f, LMQ_HK_ACTIVATION)->value, err)) ||
        (c = cfg_token(cfg, key(f, LMQ_HK_BOS), 1, &a->bos_id, err)) ||
        (c = cfg_token(cfg, key(f, LMQ_HK_EOS), 2, &a->eos_id, err)))
        return c;
    return llama_unsupported(cfg, f, a, err);
}

/* Llama's config plus what the Llama-like families add: f->window names the flag that turns
 * their sliding window on ("": always on; NULL: the family has none). */
static lmq_code llama_like_config(json_t *cfg, const lmq_hf_family *f, lmq_arch *a, char *note, size_t cap,
                                  lmq_err *err)
{
    json_t *prf = json_object_get(cfg, "partial_rotary_factor");
    if (prf && !json_is_null(prf) && !(json_is_number(prf) && json_number_value(prf) == 1.0))
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "config.json: partial_rotary_factor other than 1 is not supported");
    lmq_code c = llama_config(cfg, f, a, err);
    int enabled = 0;
    if (!c && f->window)
        c = f->window[0] ? cfg_bool(cfg, f->window, 0, &enabled, err) : (enabled = 1, LMQ_OK);
    return c ? c : sliding_window(cfg, a, enabled, note, cap, err);
}

static lmq_code pick_family(json_t *cfg, const lmq_hf_family **out, lmq_err *err)
{
    json_t *mt = json_object_get(cfg, "model_type"), *archs = json_object_get(cfg, "architectures");
    const char *arch = json_string_value(json_array_get(archs, 0));
    if (mt && !json_is_string(mt))
        return lmq_fail(err, LMQ_E_FORMAT, "config.json: model_type is not a string");
    if (!mt && !arch)
        return lmq_fail(err, LMQ_E_FORMAT, "config.json: neither model_type nor architectures is given");
    for (size_t i = 0; i < lmq_hf_n_families; i++) {
        const lmq_hf_family *f = &lmq_hf_families[i];
        if (mt ? strcmp(json_string_value(mt), f->model_type) : strcmp(arch, f->architecture))
            continue;
        if (arch && strcmp(arch, f->architecture))
            return lmq_fail(err, LMQ_E_UNSUPPORTED,
                            "config.json: architecture %s is not supported for model_type %s (lmq reads %s)", arch,
                            f->model_type, f->architecture);
        *out = f;
        return LMQ_OK;
    }
    char known[256] = "";
    for (size_t i = 0; i < lmq_hf_n_families; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s / %s", i ? ", " : "",
                 lmq_hf_families[i].model_type, lmq_hf_families[i].architecture);
    return lmq_fail(err, LMQ_E_UNSUPPORTED, "config.json: unsupported %s \"%s\" (lmq reads %s)",
                    mt ? "model_type" : "architecture", mt ? json_string_value(mt) : arch, known);
}

/* ---- the import ------------------------------------------------------------------------ */

typedef struct {
    const char *src;
    int split_qkv; /* --split-qkv */
    const lmq_hf_family *fam;
    char dir[PATH_CAP];    /* where config.json, the index and the shards are */
    char index[PATH_CAP];  /* empty for a single file */
    lmq_blob config, index_blob;
    st_file *shards; /* sorted by file name; handed to the plan */
    int n_shards;
    int prefixed;  /* the checkpoint's names carry the family prefix */
    unsigned dtypes_seen;
} hf_ctx;

static lmq_code open_shard(hf_ctx *x, const char *name, lmq_err *err)
{
    char path[PATH_CAP];
    lmq_code c = cv_join(path, x->dir, name, err);
    if (!c && !(c = st_open(path, &x->shards[x->n_shards], err)))
        x->n_shards++;
    return c;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The shards an index names, each opened once, checked against the weight map both ways. */
static lmq_code open_sharded(hf_ctx *x, lmq_err *err)
{
    lmq_code c = lmq_blob_open(x->index, &x->index_blob, err);
    if (c)
        return c;
    json_error_t je;
    json_t *root = json_loadb((const char *)x->index_blob.data, x->index_blob.size, JSON_REJECT_DUPLICATES, &je);
    json_t *wm = json_object_get(root, "weight_map");
    const char **names = NULL;
    size_t n_names = 0;
    if (!root)
        c = lmq_fail(err, LMQ_E_FORMAT, "%s: not valid JSON: %s (line %d)", x->index, je.text, je.line);
    else if (!json_is_object(wm) || json_object_size(wm) == 0)
        c = lmq_fail(err, LMQ_E_FORMAT, "%s: no weight_map object (tensor name -> shard file)", x->index);
    else if (!(names = calloc(json_object_size(wm), sizeof *names)))
        c = lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    const char *key;
    json_t *v;
    if (!c)
        json_object_foreach(wm, key, v) {
            const char *s = json_string_value(v);
            if (!s || !*s || strchr(s, '/') || !strcmp(s, ".") || !strcmp(s, "..")) {
                c = lmq_fail(err, LMQ_E_FORMAT, "%s: weight_map entry %s is not a plain shard file name", x->index,
                             key);
                break;
            }
            size_t k = 0;
            while (k < n_names && strcmp(names[k], s))
                k++;
            if (k < n_names)
                continue;
            char path[PATH_CAP];
            if ((c = cv_join(path, x->dir, s, err)))
                break;
            if (!cv_is_file(path)) {
                c = lmq_fail(err, LMQ_E_IO, "%s: shard %s (holding tensor %s) is missing: no file %s", x->index,
                             s, key, path);
                break;
            }
            names[n_names++] = s;
        }
    if (!c) {
        qsort(names, n_names, sizeof *names, by_name);
        if (!(x->shards = calloc(n_names, sizeof *x->shards)))
            c = lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n_names && !c; i++)
        c = open_shard(x, names[i], err);
    if (!c)
        json_object_foreach(wm, key, v) {
            size_t k = 0;
            while (strcmp(names[k], json_string_value(v)))
                k++;
            if (!st_find(&x->shards[k], key)) {
                c = lmq_fail(err, LMQ_E_FORMAT, "%s: tensor %s is mapped to shard %s, which does not hold it",
                             x->index, key, names[k]);
                break;
            }
        }
    for (int s = 0; s < x->n_shards && !c; s++)
        for (int i = 0; i < x->shards[s].n_tensors && !c; i++) {
            const char *t = x->shards[s].tensors[i].name;
            const char *mapped = json_string_value(json_object_get(wm, t));
            if (!mapped)
                c = lmq_fail(err, LMQ_E_FORMAT, "%s: tensor %s is not listed in the index %s", x->shards[s].path, t,
                             x->index);
            else if (strcmp(mapped, names[s]))
                c = lmq_fail(err, LMQ_E_FORMAT, "%s: tensor %s is in two shards: %s (where the index puts it) and %s",
                             x->index, t, mapped, names[s]);
        }
    free(names);
    json_decref(root);
    return c;
}

/* Decides what src is and opens config.json and the weights. */
static lmq_code open_source(hf_ctx *x, lmq_err *err)
{
    struct stat st;
    if (stat(x->src, &st) != 0)
        return lmq_fail(err, LMQ_E_IO, "%s: no such file or directory", x->src);
    char single[PATH_CAP] = "";
    lmq_code c = LMQ_OK;
    if (S_ISDIR(st.st_mode)) {
        snprintf(x->dir, sizeof x->dir, "%s", x->src);
        if ((c = cv_join(x->index, x->dir, "model.safetensors.index.json", err)) ||
            (c = cv_join(single, x->dir, "model.safetensors", err)))
            return c;
        if (!cv_is_file(x->index)) {
            x->index[0] = '\0';
            if (!cv_is_file(single))
                return lmq_fail(err, LMQ_E_IO,
                                "%s: no model.safetensors or model.safetensors.index.json in it (for a llama2.c "
                                "checkpoint, name its .bin file)",
                                x->src);
        }
    } else {
        cv_dir_of(x->src, x->dir);
        snprintf(cv_ends_with(x->src, ".index.json") ? x->index : single, PATH_CAP, "%s", x->src);
    }
    char config[PATH_CAP];
    if ((c = cv_join(config, x->dir, "config.json", err)))
        return c;
    if (!cv_is_file(config))
        return lmq_fail(err, LMQ_E_IO, "%s: no config.json beside the weights (looked for %s)", x->src, config);
    if ((c = lmq_blob_open(config, &x->config, err)))
        return c;
    if (x->index[0])
        return open_sharded(x, err);
    if (!(x->shards = calloc(1, sizeof *x->shards)))
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    if ((c = st_open(single, &x->shards[0], err)))
        return c;
    x->n_shards = 1;
    return LMQ_OK;
}

static lmq_code read_config(hf_ctx *x, lmq_model *m, lmq_err *err)
{
    char note[256] = "";
    json_error_t je;
    json_t *cfg = json_loadb((const char *)x->config.data, x->config.size, JSON_REJECT_DUPLICATES, &je);
    lmq_code c;
    if (!cfg)
        c = lmq_fail(err, LMQ_E_FORMAT, "config.json: not valid JSON: %s (line %d)", je.text, je.line);
    else if (!json_is_object(cfg))
        c = lmq_fail(err, LMQ_E_FORMAT, "config.json: not a JSON object");
    else if (!(c = pick_family(cfg, &x->fam, err)))
        c = x->fam->family == LMQ_FAMILY_LLAMA ? llama_like_config(cfg, x->fam, &m->arch, note, sizeof note, err)
                                               : gpt2_config(cfg, x->fam, &m->arch, err);
    json_decref(cfg);
    if (!c && note[0])
        cv_note(m, "%s", note);
    return c ? lmq_err_prefix(err, "%s: ", x->dir) : LMQ_OK;
}

/* Describes t as fp32 in canonical orientation: a new plan tensor named canon. */
static lmq_code load_tensor(hf_ctx *x, lmq_plan *p, const st_file *f, const st_tensor *t, const char *canon,
                            int transpose, lmq_err *err)
{
    if (t->ndim < 1 || t->ndim > LMQ_MAX_DIMS || (transpose && t->ndim != 2))
        return lmq_fail(err, LMQ_E_FORMAT, "%s: tensor %s: %d dimensions, expected %s", f->path, t->name, t->ndim,
                        transpose ? "2 (a Conv1D weight)" : "1 to 4");
    int64_t dims[LMQ_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++)
        dims[i] = t->shape[transpose ? 1 - i : i];
    const lmq_tensor *dup = lmq_model_find(&p->model, canon);
    if (dup)
        return lmq_fail(err, LMQ_E_FORMAT, "%s: tensors %s and %s are both %s", f->path,
                        p->sources[dup - p->model.tensors].origin, t->name, canon);
    const int64_t rows = transpose ? t->shape[0] : t->numel; /* Conv1D: stored [in, out] */
    const lmq_source src = { .src = f->data + t->begin, .dtype = t->dtype, .rows = rows, .cols = t->numel / rows,
                             .transpose = transpose, .origin = t->name };
    if (lmq_plan_add(p, canon, t->ndim, dims, &src, err))
        return lmq_err_prefix(err, "%s: tensor %s: ", f->path, t->name);
    x->dtypes_seen |= 1u << t->dtype;
    return st_readable(f, t, err);
}

/* lm_head.weight: kept as output.weight unless the config ties it and it repeats tok_embd. */
static lmq_code load_classifier(hf_ctx *x, lmq_plan *p, const st_file *f, const st_tensor *t, lmq_err *err)
{
    lmq_model *m = &p->model;
    lmq_code c = load_tensor(x, p, f, t, "output.weight", 0, err);
    if (c || !m->arch.tied_embedding)
        return c;
    const lmq_tensor *out = &m->tensors[m->n_tensors - 1], *emb = lmq_model_find(m, "tok_embd.weight");
    if (emb && out->ndim == emb->ndim && !memcmp(out->shape, emb->shape, sizeof out->shape) &&
        lmq_source_equal(&p->sources[m->n_tensors - 1], &p->sources[emb - m->tensors], lmq_tensor_numel(out))) {
        m->n_tensors--;
        cv_note(m, "%s equals the token embedding: tied, dropped", t->name);
    } else {
        m->arch.tied_embedding = 0;
        cv_note(m, "%s differs from the token embedding: untied, kept as output.weight", t->name);
    }
    return LMQ_OK;
}

/* Replaces the tensor just described, a fused blk.L.<stem>.<suffix> (GPT-2's attn_qkv under
 * --split-qkv, Phi-3's qkv_proj and gate_up_proj), by its row blocks blk.L.<part>.<suffix>, as
 * many rows each as the architecture gives: q|k|v heads·hd, kv_heads·hd, kv_heads·hd (GPT-2: d
 * each); gate|up hidden each. */
static lmq_code split_rows(lmq_plan *p, int layer, split_kind k, const char *suffix, lmq_err *err)
{
    const lmq_tensor fused = p->model.tensors[--p->model.n_tensors];
    lmq_source part = p->sources[p->model.n_tensors];
    const lmq_arch *a = &p->model.arch;
    const int64_t kv = (int64_t)a->dim / a->n_heads * a->n_kv_heads;
    const int64_t rows[3] = { k == SPLIT_QKV ? a->dim : a->hidden_dim, k == SPLIT_QKV ? kv : a->hidden_dim, kv };
    const int64_t cols = lmq_tensor_numel(&fused) / fused.shape[0];
    int64_t total = 0;
    for (int i = 0; i < SPLITS[k].n; i++)
        total += rows[i];
    if (fused.shape[0] != total)
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: %lld rows, but the %s it holds have %lld", part.origin,
                        (long long)fused.shape[0], k == SPLIT_QKV ? "q, k, v" : "gate and up", (long long)total);
    int64_t dims[LMQ_MAX_DIMS], row0 = 0;
    memcpy(dims, fused.shape, sizeof dims);
    lmq_code c = LMQ_OK;
    for (int i = 0; i < SPLITS[k].n && !c; i++) {
        char name[LMQ_NAME_MAX];
        snprintf(name, sizeof name, "blk.%d.%s.%s", layer, SPLITS[k].part[i], suffix);
        dims[0] = rows[i];
        part.first = row0 * cols;
        row0 += rows[i];
        c = lmq_plan_add(p, name, fused.ndim, dims, &part, err);
    }
    return c;
}

static lmq_code load_weights(hf_ctx *x, lmq_plan *p, lmq_err *err)
{
    lmq_model *m = &p->model;
    const st_file *cf = NULL;
    const st_tensor *ct = NULL;
    int ignored = 0;
    for (int s = 0; s < x->n_shards; s++) {
        const st_file *f = &x->shards[s];
        for (int i = 0; i < f->n_tensors; i++) {
            const st_tensor *t = &f->tensors[i];
            int layer;
            const lmq_hf_name_row *row = lmq_hf_lookup(x->fam, t->name, &layer);
            if (!row)
                return lmq_fail(err, LMQ_E_FORMAT, "%s: unexpected tensor %s (not part of %s)", f->path, t->name,
                                x->fam->architecture);
            if (layer >= m->arch.n_layers)
                return lmq_fail(err, LMQ_E_FORMAT, "%s: unexpected tensor %s: layer %d, but config.json has %d",
                                f->path, t->name, layer, m->arch.n_layers);
            x->prefixed |= !strncmp(t->name, x->fam->prefix, strlen(x->fam->prefix));
            if (row->kind == LMQ_HF_IGNORE) {
                ignored++;
                continue;
            }
            if (row->kind == LMQ_HF_CLASSIFIER) {
                if (ct)
                    return lmq_fail(err, LMQ_E_FORMAT, "%s: tensors %s and %s are both the classifier", f->path,
                                    ct->name, t->name);
                cf = f;
                ct = t;
                continue;
            }
            char canon[LMQ_NAME_MAX];
            lmq_hf_expand(row->canon, layer, canon, sizeof canon);
            lmq_code c = load_tensor(x, p, f, t, canon, row->kind == LMQ_HF_TRANSPOSE, err);
            for (int k = 0; !c && k < SPLIT_KINDS; k++) {
                char fused[LMQ_NAME_MAX];
                const int n = snprintf(fused, sizeof fused, "blk.%d.%s.", layer, SPLITS[k].fused);
                if (!strncmp(canon, fused, (size_t)n) &&
                    (x->fam->fused == LMQ_HF_FUSED_SPLIT || (x->fam->fused == LMQ_HF_FUSED_ON_REQUEST && x->split_qkv)))
                    c = split_rows(p, layer, (split_kind)k, canon + n, err);
            }
            if (c)
                return c;
        }
    }
    if (ignored)
        cv_note(m, "%d non-weight buffers ignored", ignored);
    /* Last, so that the tied embedding it may repeat is already loaded. */
    if (ct)
        return load_classifier(x, p, cf, ct, err);
    if (m->arch.tied_embedding)
        cv_note(m, "classifier tied to the token embedding");
    return LMQ_OK;
}

/* Adds the source tensor's name to a validation error about a canonical tensor. */
static void name_origin(const hf_ctx *x, const lmq_plan *p, lmq_err *err)
{
    const lmq_model *m = &p->model;
    char canon[LMQ_NAME_MAX];
    if (sscanf(err->msg, "tensor %127[^:]:", canon) != 1)
        return;
    char hf[2 * LMQ_NAME_MAX] = "";
    for (int i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, canon))
            snprintf(hf, sizeof hf, "%s", p->sources[i].origin);
    if (!hf[0])
        lmq_hf_reverse(x->fam, canon, x->prefixed, hf, sizeof hf);
    if (hf[0]) {
        size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof err->msg - n, " (checkpoint tensor %s)", hf);
    }
}

/* XXH3-64 over config.json, the index and the shards in order: what the model came from. */
static void checksum(hf_ctx *x, lmq_model *m)
{
    XXH3_state_t *s = XXH3_createState();
    if (!s)
        return;
    XXH3_64bits_reset(s);
    lmq_source_hash(s, &x->config);
    if (x->index[0])
        lmq_source_hash(s, &x->index_blob);
    for (int i = 0; i < x->n_shards; i++)
        lmq_source_hash(s, &x->shards[i].blob);
    m->source_checksum = XXH3_64bits_digest(s);
    XXH3_freeState(s);
}

static void close_ctx(hf_ctx *x)
{
    for (int i = 0; i < x->n_shards; i++)
        st_close(&x->shards[i]);
    free(x->shards);
    if (x->config.data)
        lmq_blob_close(&x->config);
    if (x->index_blob.data)
        lmq_blob_close(&x->index_blob);
}

lmq_code lmq_convert_hf(const char *src, const lmq_convert_opts *opts, lmq_plan *plan, lmq_err *err)
{
    lmq_plan_init(plan);
    lmq_model *out = &plan->model;
    hf_ctx x = { .src = src, .split_qkv = opts && opts->split_qkv };
    lmq_code c;
    if ((c = open_source(&x, err)) || (c = read_config(&x, out, err)))
        goto done;
    if (x.split_qkv && x.fam->fused != LMQ_HF_FUSED_ON_REQUEST) {
        c = lmq_fail(err, LMQ_E_ARG, "%s: --split-qkv: nothing to split: q, k, v are separate already", src);
        goto done;
    }
    cv_note(out, "%s", x.fam->notes);
    if (x.fam->fused == LMQ_HF_FUSED_ON_REQUEST)
        cv_note(out, "%s",
                x.split_qkv ? "fused c_attn split by rows into attn_q, attn_k, attn_v (--split-qkv)"
                            : "fused c_attn kept as attn_qkv (q|k|v rows)");
    if ((c = load_weights(&x, plan, err)))
        goto done;
    if ((c = lmq_model_validate(out, err))) {
        name_origin(&x, plan, err);
        lmq_err_prefix(err, "%s: ", src);
        goto done;
    }
    char widened[64] = "";
    for (int d = 0; d < ST_DTYPE_COUNT; d++)
        if (d != ST_F32 && (x.dtypes_seen & (1u << d)))
            snprintf(widened + strlen(widened), sizeof widened - strlen(widened), "%s%s", widened[0] ? "+" : "",
                     st_dtype_name((st_dtype)d));
    if (widened[0])
        cv_note(out, "%s weights widened to fp32 exactly", widened);
    if ((c = cv_add_tokenizer(out, x.dir, src, opts ? opts->tokenizer : NULL, err)))
        goto done;
    snprintf(out->source, sizeof out->source, "%s", src);
    snprintf(plan->where, sizeof plan->where, "%s", src);
    checksum(&x, out);
    plan->shards = x.shards; /* the plan reads the weights from here on */
    plan->n_shards = x.n_shards;
    x.shards = NULL;
    x.n_shards = 0;
done:
    close_ctx(&x);
    if (c)
        lmq_plan_free(plan);
    return c;
}

