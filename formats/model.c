#include "formats/model.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lmq_model_init(lmq_model *m)
{
    memset(m, 0, sizeof *m);
    m->arch.bos_id = m->arch.eos_id = -1;
}

void lmq_model_free(lmq_model *m)
{
    for (int i = 0; i < m->n_tensors; i++)
        free(m->tensors[i].owned);
    for (int i = 0; i < m->n_files; i++)
        free(m->files[i].data);
    free(m->tensors);
    free(m->files);
    if (m->mapping.data)
        lmq_blob_close(&m->mapping);
    lmq_model_init(m);
}

int64_t lmq_tensor_numel(const lmq_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

static int grow(void **p, int *cap, int n, size_t elem)
{
    if (n < *cap)
        return 1;
    int nc = *cap ? *cap * 2 : 64;
    void *q = realloc(*p, (size_t)nc * elem);
    if (!q)
        return 0;
    *p = q;
    *cap = nc;
    return 1;
}

/* The element count of a valid name and shape (at most 2^40 elements). */
static lmq_code check_shape(const lmq_model *m, const char *name, int ndim, const int64_t *shape, int64_t *numel,
                            lmq_err *err)
{
    if (strlen(name) >= LMQ_NAME_MAX || ndim < 1 || ndim > LMQ_MAX_DIMS)
        return lmq_fail(err, LMQ_E_ARG, "tensor %s: bad name or rank %d", name, ndim);
    if (lmq_model_find(m, name))
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: defined twice", name);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] <= 0 || shape[i] > ((int64_t)1 << 40) / n)
            return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: bad shape", name);
        n *= shape[i];
    }
    *numel = n;
    return LMQ_OK;
}

lmq_code lmq_model_add_view(lmq_model *m, const char *name, int ndim, const int64_t *shape, lmq_qparams q,
                            const void *raw, size_t raw_size, void *owned, lmq_tensor **out, lmq_err *err)
{
    int64_t n;
    lmq_code c = check_shape(m, name, ndim, shape, &n, err);
    if (!c && !grow((void **)&m->tensors, &m->cap_tensors, m->n_tensors, sizeof *m->tensors))
        c = lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory", name);
    if (c) {
        free(owned);
        return c;
    }
    lmq_tensor *t = &m->tensors[m->n_tensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->q = q;
    t->raw = raw;
    t->raw_size = raw_size;
    t->data = q.dtype == LMQ_T_F32 ? (float *)raw : NULL; /* writable only when owned */
    t->owned = owned;
    if (out)
        *out = t;
    return LMQ_OK;
}

lmq_code lmq_model_add(lmq_model *m, const char *name, int ndim, const int64_t *shape,
                       lmq_tensor **out, lmq_err *err)
{
    int64_t n;
    lmq_code c = check_shape(m, name, ndim, shape, &n, err);
    if (c)
        return c;
    float *data = calloc((size_t)n, sizeof(float));
    if (!data)
        return lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory (%lld floats)", name, (long long)n);
    return lmq_model_add_view(m, name, ndim, shape, (lmq_qparams){ .dtype = LMQ_T_F32 }, data,
                              (size_t)n * sizeof(float), data, out, err);
}

lmq_code lmq_file_name_check(const char *name, lmq_err *err)
{
    size_t n = strlen(name);
    if (n == 0 || n >= LMQ_NAME_MAX)
        return lmq_fail(err, LMQ_E_FORMAT, "file name of %zu bytes: a carried file's name has 1..%d", n,
                        LMQ_NAME_MAX - 1);
    if (!strcmp(name, ".") || !strcmp(name, ".."))
        return lmq_fail(err, LMQ_E_FORMAT, "file %s: a carried file's name is not \".\" or \"..\"", name);
    for (size_t i = 0; i < n; i++) {
        const unsigned char ch = (unsigned char)name[i];
        if (ch == '/' || ch == '\\')
            return lmq_fail(err, LMQ_E_FORMAT, "file %s: a carried file's name has no '/' or '\\' (byte %zu)",
                            name, i);
        if (ch < 0x20 || ch == 0x7f)
            return lmq_fail(err, LMQ_E_FORMAT, "file name with control byte 0x%02x at %zu: a carried file's name "
                            "has none", ch, i);
    }
    return LMQ_OK;
}

lmq_code lmq_model_add_file(lmq_model *m, const char *name, uint8_t *data, size_t size, lmq_err *err)
{
    lmq_code c = lmq_file_name_check(name, err);
    if (c || lmq_model_find_file(m, name)) {
        free(data);
        return c ? c : lmq_fail(err, LMQ_E_ARG, "file %s: carried twice", name);
    }
    if (!grow((void **)&m->files, &m->cap_files, m->n_files, sizeof *m->files)) {
        free(data);
        return lmq_fail(err, LMQ_E_NOMEM, "file %s: out of memory", name);
    }
    lmq_file *f = &m->files[m->n_files++];
    snprintf(f->name, sizeof f->name, "%s", name);
    f->data = data;
    f->size = size;
    return LMQ_OK;
}

lmq_code lmq_tensor_own(lmq_tensor *t, lmq_err *err)
{
    if (t->owned && t->owned == t->raw)
        return LMQ_OK;
    void *copy = malloc(t->raw_size ? t->raw_size : 1);
    if (!copy)
        return lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory (%zu bytes)", t->name, t->raw_size);
    memcpy(copy, t->raw, t->raw_size);
    free(t->owned);
    t->owned = copy;
    t->raw = copy;
    if (t->q.dtype == LMQ_T_F32)
        t->data = copy;
    return LMQ_OK;
}

lmq_tensor *lmq_model_find(const lmq_model *m, const char *name)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0)
            return &m->tensors[i];
    return NULL;
}

const lmq_file *lmq_model_find_file(const lmq_model *m, const char *name)
{
    for (int i = 0; i < m->n_files; i++)
        if (strcmp(m->files[i].name, name) == 0)
            return &m->files[i];
    return NULL;
}

/* "[a, b, ...]" for a shape of ndim dimensions, into buf. Returns buf. */
static const char *shape_text(char *buf, size_t size, int ndim, const int64_t *shape)
{
    size_t k = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < size)
        snprintf(buf + k, size - k, "]");
    return buf;
}

/* The tensors lmq_model_validate found where the architecture wants them, by index into m->tensors:
 * whatever is left unmarked is a tensor the architecture does not describe. */
typedef struct {
    const lmq_model *m;
    unsigned char *seen;
} expected;

static lmq_code expect(expected *x, const char *name, int64_t d0, int64_t d1, lmq_err *err)
{
    const lmq_tensor *t = lmq_model_find(x->m, name);
    const lmq_arch *a = &x->m->arch;
    if (!t)
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: missing (architecture.family %s, n_layers %d, "
                        "tied_embedding %s)", name, a->family == LMQ_FAMILY_GPT2 ? "gpt2" : "llama", a->n_layers,
                        a->tied_embedding ? "true" : "false");
    x->seen[t - x->m->tensors] = 1;
    const int64_t want[2] = { d0, d1 };
    const int ndim = d1 ? 2 : 1;
    if (t->ndim != ndim || t->shape[0] != d0 || (d1 && t->shape[1] != d1)) {
        char got[96], wanted[96];
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: shape %s expected %s", name,
                        shape_text(got, sizeof got, t->ndim, t->shape), shape_text(wanted, sizeof wanted, ndim, want));
    }
    return LMQ_OK;
}

/* GPT-2 attention input: the fused blk.l.attn_qkv (+ bias), or attn_q, attn_k, attn_v (+ biases)
 * as lmq convert --split-qkv stores them; never a mix. */
static lmq_code gpt2_qkv(expected *x, int l, int64_t d, lmq_err *err)
{
    static const char *const fused[] = { "attn_qkv.weight", "attn_qkv.bias" };
    static const char *const split[] = { "attn_q.weight", "attn_q.bias", "attn_k.weight",
                                         "attn_k.bias",   "attn_v.weight", "attn_v.bias" };
    char n[LMQ_NAME_MAX];
    int n_fused = 0, n_split = 0;
    for (int i = 0; i < 2; i++)
        n_fused += (snprintf(n, sizeof n, "blk.%d.%s", l, fused[i]), lmq_model_find(x->m, n) != NULL);
    for (int i = 0; i < 6; i++)
        n_split += (snprintf(n, sizeof n, "blk.%d.%s", l, split[i]), lmq_model_find(x->m, n) != NULL);
    if (n_fused && n_split)
        return lmq_fail(err, LMQ_E_FORMAT, "tensor blk.%d.attn_qkv: both fused and separate q, k, v tensors", l);
    const int sep = n_split > 0;
    lmq_code c;
    for (int i = 0; i < (sep ? 6 : 2); i++) {
        const int bias = i % 2;
        snprintf(n, sizeof n, "blk.%d.%s", l, sep ? split[i] : fused[i]);
        if ((c = expect(x, n, sep ? d : 3 * d, bias ? 0 : d, err)))
            return c;
    }
    return LMQ_OK;
}

/* Llama q/k/v biases (Qwen2): none, or all three. */
static lmq_code llama_qkv_bias(expected *x, int l, int64_t d, int64_t kv, lmq_err *err)
{
    static const char *const names[] = { "attn_q.bias", "attn_k.bias", "attn_v.bias" };
    char n[LMQ_NAME_MAX];
    int have = 0;
    for (int i = 0; i < 3; i++)
        have += (snprintf(n, sizeof n, "blk.%d.%s", l, names[i]), lmq_model_find(x->m, n) != NULL);
    lmq_code c = LMQ_OK;
    for (int i = 0; have && i < 3 && !c; i++) {
        snprintf(n, sizeof n, "blk.%d.%s", l, names[i]);
        c = expect(x, n, i ? kv : d, 0, err);
    }
    return c;
}

/* The architecture fields that count something: each must be positive. */
static const struct {
    const char *key;
    size_t off;
} positive_fields[] = {
    { "dim", offsetof(lmq_arch, dim) },           { "hidden_dim", offsetof(lmq_arch, hidden_dim) },
    { "n_layers", offsetof(lmq_arch, n_layers) }, { "n_heads", offsetof(lmq_arch, n_heads) },
    { "n_kv_heads", offsetof(lmq_arch, n_kv_heads) }, { "vocab_size", offsetof(lmq_arch, vocab_size) },
    { "max_seq", offsetof(lmq_arch, max_seq) },
};

lmq_code lmq_arch_validate(const lmq_arch *a, lmq_err *err)
{
    if (a->family != LMQ_FAMILY_GPT2 && a->family != LMQ_FAMILY_LLAMA)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "architecture.family %d is not a known model family", (int)a->family);
    for (size_t i = 0; i < sizeof positive_fields / sizeof positive_fields[0]; i++) {
        const int v = *(const int *)((const char *)a + positive_fields[i].off);
        if (v <= 0)
            return lmq_fail(err, LMQ_E_FORMAT, "architecture.%s is %d: must be positive", positive_fields[i].key, v);
    }
    if (a->dim % a->n_heads)
        return lmq_fail(err, LMQ_E_FORMAT, "architecture.dim %d is not a multiple of architecture.n_heads %d", a->dim,
                        a->n_heads);
    if (a->n_heads % a->n_kv_heads)
        return lmq_fail(err, LMQ_E_FORMAT, "architecture.n_kv_heads %d does not divide architecture.n_heads %d",
                        a->n_kv_heads, a->n_heads);
    if (!(a->norm_eps > 0.0f) || !isfinite(a->norm_eps))
        return lmq_fail(err, LMQ_E_FORMAT, "architecture.norm_eps is %g: must be a finite number > 0",
                        (double)a->norm_eps);
    if (a->tokenizer < LMQ_TOK_NONE || a->tokenizer > LMQ_TOK_SPM)
        return lmq_fail(err, LMQ_E_FORMAT, "architecture.tokenizer %d is not a known tokenizer", (int)a->tokenizer);
    if (a->bos_id < -1 || a->bos_id >= a->vocab_size || a->eos_id < -1 || a->eos_id >= a->vocab_size)
        return lmq_fail(err, LMQ_E_FORMAT, "architecture.bos_id %d / eos_id %d: outside the %d-token vocabulary",
                        a->bos_id, a->eos_id, a->vocab_size);
    if (a->family == LMQ_FAMILY_GPT2) {
        if (a->rope != LMQ_ROPE_NONE)
            return lmq_fail(err, LMQ_E_UNSUPPORTED, "architecture.rope is %d, but architecture.family gpt2 has no "
                            "rope", (int)a->rope);
        if (a->n_kv_heads != a->n_heads)
            return lmq_fail(err, LMQ_E_UNSUPPORTED, "architecture.n_kv_heads %d, but architecture.family gpt2 has one "
                            "per head (n_heads %d)", a->n_kv_heads, a->n_heads);
        return LMQ_OK;
    }
    if (a->rope != LMQ_ROPE_INTERLEAVED && a->rope != LMQ_ROPE_HALF)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "architecture.rope is %d, but architecture.family llama rotates "
                        "interleaved or half pairs", (int)a->rope);
    if ((a->dim / a->n_heads) % 2)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "architecture.dim %d / n_heads %d: a llama head size is even (rope "
                        "pairs)", a->dim, a->n_heads);
    if (!(a->rope_theta > 0.0f) || !isfinite(a->rope_theta))
        return lmq_fail(err, LMQ_E_FORMAT, "architecture.rope_theta is %g: a llama model needs a finite number > 0",
                        (double)a->rope_theta);
    return LMQ_OK;
}

/* Every tensor the architecture wants, with its shape (the fields are valid). */
static lmq_code expect_all(expected *x, lmq_err *err)
{
    const lmq_arch *a = &x->m->arch;
    const int gpt2 = a->family == LMQ_FAMILY_GPT2;
    const int64_t d = a->dim, h = a->hidden_dim, kv = (int64_t)a->dim / a->n_heads * a->n_kv_heads;
    char n[LMQ_NAME_MAX];
    lmq_code c;
#define EXPECT(d0, d1, ...) do { snprintf(n, sizeof n, __VA_ARGS__); if ((c = expect(x, n, d0, d1, err))) return c; } while (0)
    EXPECT(a->vocab_size, d, "tok_embd.weight");
    if (gpt2)
        EXPECT(a->max_seq, d, "pos_embd.weight");
    for (int l = 0; l < a->n_layers; l++) {
        EXPECT(d, 0, "blk.%d.attn_norm.weight", l);
        EXPECT(d, 0, "blk.%d.ffn_norm.weight", l);
        EXPECT(d, d, "blk.%d.attn_out.weight", l);
        EXPECT(h, d, "blk.%d.ffn_up.weight", l);
        EXPECT(d, h, "blk.%d.ffn_down.weight", l);
        if (gpt2) {
            if ((c = gpt2_qkv(x, l, d, err)))
                return c;
            EXPECT(d, 0, "blk.%d.attn_norm.bias", l);
            EXPECT(d, 0, "blk.%d.ffn_norm.bias", l);
            EXPECT(d, 0, "blk.%d.attn_out.bias", l);
            EXPECT(h, 0, "blk.%d.ffn_up.bias", l);
            EXPECT(d, 0, "blk.%d.ffn_down.bias", l);
        } else {
            EXPECT(d, d, "blk.%d.attn_q.weight", l);
            EXPECT(kv, d, "blk.%d.attn_k.weight", l);
            EXPECT(kv, d, "blk.%d.attn_v.weight", l);
            EXPECT(h, d, "blk.%d.ffn_gate.weight", l);
            if ((c = llama_qkv_bias(x, l, d, kv, err)))
                return c;
        }
    }
    EXPECT(d, 0, "out_norm.weight");
    if (gpt2)
        EXPECT(d, 0, "out_norm.bias");
    if (!a->tied_embedding)
        EXPECT(a->vocab_size, d, "output.weight");
    else if (lmq_model_find(x->m, "output.weight"))
        return lmq_fail(err, LMQ_E_FORMAT, "tensor output.weight: present, but architecture.tied_embedding is true "
                        "(the classifier is tok_embd.weight)");
#undef EXPECT
    return LMQ_OK;
}

/* The first tensor the architecture does not describe, named with the field it contradicts. */
static lmq_code unexpected(const expected *x, lmq_err *err)
{
    const lmq_arch *a = &x->m->arch;
    for (int i = 0; i < x->m->n_tensors; i++) {
        if (x->seen[i])
            continue;
        const char *name = x->m->tensors[i].name;
        int l;
        if (sscanf(name, "blk.%d.", &l) == 1 && l >= a->n_layers)
            return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: block %d, but architecture.n_layers is %d", name, l,
                            a->n_layers);
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: not a tensor of a %s model (architecture.family)", name,
                        a->family == LMQ_FAMILY_GPT2 ? "gpt2" : "llama");
    }
    return LMQ_OK;
}

lmq_code lmq_model_validate(const lmq_model *m, lmq_err *err)
{
    lmq_code c = lmq_arch_validate(&m->arch, err);
    if (c)
        return c;
    expected x = { m, calloc((size_t)m->n_tensors + 1, 1) };
    if (!x.seen)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    if (!(c = expect_all(&x, err)))
        c = unexpected(&x, err);
    free(x.seen);
    for (int i = 0; i < m->n_tensors && !c; i++)
        if (m->tensors[i].data)
            c = lmq_tensor_finite(&m->tensors[i], m->tensors[i].data, err);
    return c;
}

lmq_code lmq_tensor_finite(const lmq_tensor *t, const float *values, lmq_err *err)
{
    const int64_t n = lmq_tensor_numel(t);
    for (int64_t j = 0; j < n; j++)
        if (!isfinite(values[j]))
            return lmq_fail(err, LMQ_E_NUMERIC, "tensor %s: non-finite value %g at element %lld", t->name,
                            (double)values[j], (long long)j);
    return LMQ_OK;
}
