/* lmq_gguf_export: an lmq artefact as a GGUF file (export/gguf.h). */
#include "export/gguf.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/file.h"
#include "common/le.h"
#include "formats/gguf.h"
#include "formats/gguf_model.h"
#include "runtime/artefact.h"
#include "schemes/scheme.h"
#include "tokenizer/tokenizer.h"

/* ---- tensors ------------------------------------------------------------------------------- */

/* The GGUF type lmq's encoding q maps onto exactly for a [rows, cols] tensor, or -1: 1-D
 * tensors go as F32 (llama.cpp wants its norms so), and a row must be whole blocks. */
static int exact_type(const lmq_qparams *q, int ndim, int64_t cols)
{
    const int t = lmq_gguf_type_for(q);
    if (t < 0 || (ndim == 1 && t != GGML_F32))
        return -1;
    return cols % gf_type_of((uint32_t)t).block ? -1 : t;
}

/* One tensor's GGUF bytes (*out, malloc'd, *size) as type *type. */
static lmq_code tensor_bytes(const lmq_tensor *t, int allow_requantize, int *type, uint8_t **out, size_t *size,
                             char *why, size_t why_size, lmq_err *err)
{
    const int64_t n = lmq_tensor_numel(t), rows = t->ndim > 1 ? t->shape[0] : 1, cols = n / rows;
    char desc[64];
    q_describe(&t->q, desc, sizeof desc);
    *type = exact_type(&t->q, t->ndim, cols);
    why[0] = '\0';
    float *f = NULL;
    lmq_qparams q8 = { .dtype = LMQ_T_INT8, .gran = LMQ_GRAN_GROUP, .group = 32 };
    lmq_layout L;
    lmq_code rc = lmq_layout_of(&t->q, rows, cols, &L, err);
    if (rc)
        return lmq_err_prefix(err, "tensor %s: ", t->name);
    const uint8_t *src = t->raw;
    const lmq_qparams *src_q = &t->q; /* what src holds */
    uint8_t *q8_bytes = NULL;
    if (*type < 0) {
        const int widen = t->ndim == 1 || cols % 32;
        if (!allow_requantize && !(t->ndim == 1))
            return lmq_fail(err, LMQ_E_UNSUPPORTED, "tensor %s: %s has no exact GGUF type (Q8_0 and Q4_0 take int8 "
                            "and int4 symmetric g32 with a multiple of 32 columns); --allow-requantize "
                            "re-quantises it to Q8_0", t->name, desc);
        if (!(f = malloc((size_t)n * sizeof *f)))
            return lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory", t->name);
        if ((rc = q_dequantize(&t->q, t->raw, t->raw_size, rows, cols, f, NULL, err))) {
            free(f);
            return lmq_err_prefix(err, "tensor %s: ", t->name);
        }
        if (widen) {
            *type = GGML_F32;
            if (t->ndim > 1)
                snprintf(why, why_size, "%s: %s -> f32 (%" PRId64 " columns: no Q8_0 blocks)", t->name, desc, cols);
            *out = (uint8_t *)f;
            *size = (size_t)n * sizeof *f;
            return LMQ_OK;
        }
        lmq_layout L8;
        if ((rc = lmq_layout_of(&q8, rows, cols, &L8, err)) || !(q8_bytes = malloc(L8.bytes)) ||
            (rc = q_quantize(&q8, f, rows, cols, q8_bytes, L8.bytes, NULL, err))) {
            free(f);
            free(q8_bytes);
            return rc ? lmq_err_prefix(err, "tensor %s: ", t->name) : lmq_fail(err, LMQ_E_NOMEM, "out of memory");
        }
        free(f);
        snprintf(why, why_size, "%s: %s -> q8_0", t->name, desc);
        *type = GGML_Q8_0;
        L = L8;
        src = q8_bytes;
        src_q = &q8;
    }
    const gf_type_info ti = gf_type_of((uint32_t)*type);
    *size = (size_t)(n / ti.block * ti.block_bytes);
    if (!(*out = malloc(*size ? *size : 1))) {
        free(q8_bytes);
        return lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory", t->name);
    }
    lmq_gguf_repack(src_q, &L, 1, src, *out);
    free(q8_bytes);
    return LMQ_OK;
}

/* Hugging Face's rope order (pair i, i + hd/2 in a head) to the interleaved one (2i, 2i + 1):
 * rows of q and k move, each row's bytes whole (a GGUF row is a whole number of blocks). */
static lmq_code permute_rope(uint8_t *data, size_t size, int64_t rows, int hd, const char *name, lmq_err *err)
{
    const size_t rb = size / (size_t)rows;
    uint8_t *tmp = malloc(size ? size : 1);
    if (!tmp)
        return lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory", name);
    for (int64_t h = 0; h < rows / hd; h++)
        for (int i = 0; i < hd / 2; i++)
            for (int s = 0; s < 2; s++)
                memcpy(tmp + (size_t)(h * hd + 2 * i + s) * rb, data + (size_t)(h * hd + i + s * hd / 2) * rb, rb);
    memcpy(data, tmp, size);
    free(tmp);
    return LMQ_OK;
}

/* ---- tokenizer ----------------------------------------------------------------------------- */

/* llama.cpp's token types (llama_token_type). */
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER_DEFINED = 4, TT_BYTE = 6 };

typedef struct {
    char **s;
    uint64_t *len;
    float *score;
    int32_t *type;
    uint64_t n;
} token_list;

static void tokens_free(token_list *t)
{
    for (uint64_t i = 0; t->s && i < t->n; i++)
        free(t->s[i]);
    free(t->s);
    free(t->len);
    free(t->score);
    free(t->type);
    memset(t, 0, sizeof *t);
}

static lmq_code tokens_alloc(token_list *t, uint64_t n, lmq_err *err)
{
    t->n = n;
    t->s = calloc(n ? n : 1, sizeof *t->s);
    t->len = calloc(n ? n : 1, sizeof *t->len);
    t->score = calloc(n ? n : 1, sizeof *t->score);
    t->type = calloc(n ? n : 1, sizeof *t->type);
    return t->s && t->len && t->score && t->type ? LMQ_OK : lmq_fail(err, LMQ_E_NOMEM, "tokenizer: out of memory");
}

/* A copy of p[0..n) with every `from` byte sequence replaced by `to`. */
static char *replaced(const char *p, size_t n, const char *from, const char *to, uint64_t *len)
{
    const size_t fl = strlen(from), tl = strlen(to);
    char *o = malloc(n * (tl > fl ? tl : 1) + 1), *w = o;
    if (!o)
        return NULL;
    for (size_t i = 0; i < n;)
        if (n - i >= fl && !memcmp(p + i, from, fl)) {
            memcpy(w, to, tl);
            w += tl;
            i += fl;
        } else {
            *w++ = p[i++];
        }
    *len = (uint64_t)(w - o);
    return o;
}

static int is_byte_piece(const char *s, uint64_t n)
{
    return n == 6 && !memcmp(s, "<0x", 3) && s[5] == '>';
}

/* tokenizer.bin (llama2.c): i32 max_token_length, then per token f32 score, i32 len, bytes;
 * spaces were SentencePiece's U+2581, which GGUF's "llama" vocabulary keeps. */
static lmq_code llama2c_tokens(const lmq_file *f, int vocab, const lmq_arch *a, token_list *t, lmq_err *err)
{
    lmq_code rc = tokens_alloc(t, (uint64_t)vocab, err);
    size_t pos = 4;
    for (int i = 0; i < vocab && !rc; i++) {
        uint32_t len;
        if (f->size < pos + 8 || (len = lmq_le32(f->data + pos + 4)) > f->size - pos - 8)
            return lmq_fail(err, LMQ_E_FORMAT, "tokenizer.bin: token %d is truncated", i);
        t->score[i] = lmq_le_f32(f->data + pos);
        if (!(t->s[i] = replaced((const char *)f->data + pos + 8, len, " ", LMQ_SPM_SPACE, &t->len[i])))
            return lmq_fail(err, LMQ_E_NOMEM, "tokenizer: out of memory");
        t->type[i] = i == 0 ? TT_UNKNOWN : i == a->bos_id || i == a->eos_id ? TT_CONTROL
                     : is_byte_piece(t->s[i], t->len[i]) ? TT_BYTE : TT_NORMAL;
        pos += 8 + len;
    }
    return rc;
}

/* vocab.json ({token: id}, ids 0..n-1) in id order. */
static lmq_code gpt2_tokens(const lmq_file *f, const lmq_arch *a, token_list *t, lmq_err *err)
{
    json_error_t je;
    json_t *v = json_loadb((const char *)f->data, f->size, 0, &je);
    if (!json_is_object(v)) {
        json_decref(v);
        return lmq_fail(err, LMQ_E_FORMAT, "vocab.json: not a JSON object (%s)", je.text);
    }
    lmq_code rc = tokens_alloc(t, json_object_size(v), err);
    const char *k;
    json_t *id;
    json_object_foreach(v, k, id)
    {
        json_int_t i = json_is_integer(id) ? json_integer_value(id) : -1;
        if (rc)
            break;
        if (i < 0 || (uint64_t)i >= t->n || t->s[i])
            rc = lmq_fail(err, LMQ_E_FORMAT, "vocab.json: token '%s' has id %lld: ids must be 0..%" PRIu64 ", each once",
                          k, (long long)i, t->n - 1);
        else if (!(t->s[i] = strdup(k)))
            rc = lmq_fail(err, LMQ_E_NOMEM, "tokenizer: out of memory");
        else {
            t->len[i] = strlen(k);
            t->type[i] = i == a->bos_id || i == a->eos_id ? TT_CONTROL : TT_NORMAL;
        }
    }
    json_decref(v);
    return rc;
}

/* merges.txt: one "a b" pair a line after the "#version" line. */
static lmq_code gpt2_merges(const lmq_file *f, token_list *m, lmq_err *err)
{
    uint64_t n = 0;
    const char *p = (const char *)f->data, *end = p + f->size;
    for (int pass = 0; pass < 2; pass++) {
        if (pass && tokens_alloc(m, n, err))
            return LMQ_E_NOMEM;
        n = 0;
        for (const char *l = p; l < end;) {
            const char *e = memchr(l, '\n', (size_t)(end - l));
            e = e ? e : end;
            size_t len = (size_t)(e - l) - (e > l && e[-1] == '\r');
            if (len && !(l == p && len >= 8 && !memcmp(l, "#version", 8))) {
                if (pass && !(m->s[n] = strndup(l, len)))
                    return lmq_fail(err, LMQ_E_NOMEM, "tokenizer: out of memory");
                if (pass)
                    m->len[n] = len;
                n++;
            }
            l = e + 1;
        }
    }
    return LMQ_OK;
}

/* Token i of a list being filled: s, once; false when i is out of range or taken. */
static int token_set(token_list *t, json_int_t i, const char *s, int32_t type)
{
    if (i < 0 || (uint64_t)i >= t->n || t->s[i] || !(t->s[i] = strdup(s)))
        return 0;
    t->len[i] = strlen(s);
    t->type[i] = type;
    return 1;
}

/* A byte-level BPE tokenizer.json (its model.vocab, added_tokens and model.merges: "a b"
 * strings or [a, b] pairs) as GGUF's "gpt2" vocabulary: the ids 0..n-1 each once, the added
 * tokens CONTROL when special, else USER_DEFINED. */
static lmq_code hf_json_tokens(const lmq_file *f, token_list *t, token_list *merges, lmq_err *err)
{
    json_error_t je;
    json_t *root = json_loadb((const char *)f->data, f->size, 0, &je);
    json_t *model = json_object_get(root, "model"), *vocab = json_object_get(model, "vocab");
    json_t *mg = json_object_get(model, "merges"), *added = json_object_get(root, "added_tokens");
    lmq_code rc = LMQ_OK;
    if (!json_is_object(vocab) || !json_is_array(mg) || (added && !json_is_array(added)))
        rc = lmq_fail(err, LMQ_E_FORMAT, "tokenizer.json: no model.vocab object and model.merges list (%s)", je.text);
    json_int_t n = 0;
    const char *k;
    json_t *v;
    size_t i;
    json_object_foreach(vocab, k, v)
        n = json_is_integer(v) && json_integer_value(v) >= n ? json_integer_value(v) + 1 : n;
    json_array_foreach(added, i, v)
        n = json_is_integer(json_object_get(v, "id")) && json_integer_value(json_object_get(v, "id")) >= n
                ? json_integer_value(json_object_get(v, "id")) + 1 : n;
    if (!rc)
        rc = tokens_alloc(t, (uint64_t)n, err);
    json_array_foreach(added, i, v)
    {
        const char *s = json_string_value(json_object_get(v, "content"));
        if (!rc && (!s || !token_set(t, json_integer_value(json_object_get(v, "id")), s,
                                     json_is_true(json_object_get(v, "special")) ? TT_CONTROL : TT_USER_DEFINED)))
            rc = lmq_fail(err, LMQ_E_FORMAT, "tokenizer.json: added_tokens[%zu] has no content or an id taken", i);
    }
    json_object_foreach(vocab, k, v)
    {
        json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
        if (!rc && !token_set(t, id, k, TT_NORMAL) && !(id >= 0 && id < n && t->s[id] && !strcmp(t->s[id], k)))
            rc = lmq_fail(err, LMQ_E_FORMAT, "tokenizer.json: token '%s' has id %lld, not free", k, (long long)id);
    }
    for (json_int_t id = 0; id < n && !rc; id++)
        if (!t->s[id])
            rc = lmq_fail(err, LMQ_E_FORMAT, "tokenizer.json: no token has id %lld (ids must be 0..%lld)",
                          (long long)id, (long long)n - 1);
    if (!rc)
        rc = tokens_alloc(merges, json_array_size(mg), err);
    json_array_foreach(mg, i, v)
    {
        const char *a = json_is_string(v) ? json_string_value(v) : json_string_value(json_array_get(v, 0));
        const char *b = json_is_string(v) ? NULL : json_string_value(json_array_get(v, 1));
        if (rc)
            break;
        if (!a || (!json_is_string(v) && (!b || json_array_size(v) != 2)))
            rc = lmq_fail(err, LMQ_E_FORMAT, "tokenizer.json: model.merges[%zu] is not \"a b\" or [a, b]", i);
        else if (!(merges->s[i] = malloc(strlen(a) + (b ? strlen(b) + 2 : 1))))
            rc = lmq_fail(err, LMQ_E_NOMEM, "tokenizer: out of memory");
        else
            merges->len[i] = (uint64_t)sprintf(merges->s[i], b ? "%s %s" : "%s", a, b);
    }
    json_decref(root);
    return rc;
}

static lmq_code tokenizer_meta(gf_writer *w, const lmq_model *m, lmq_err *err)
{
    const lmq_arch *a = &m->arch;
    token_list t = { 0 }, merges = { 0 };
    lmq_code rc;
    const lmq_file *tb = lmq_model_find_file(m, "tokenizer.bin"), *vj = lmq_model_find_file(m, "vocab.json"),
                   *mt = lmq_model_find_file(m, "merges.txt"), *tj = lmq_model_find_file(m, "tokenizer.json");
    tok_tokenizer *tok = NULL;
    if (a->tokenizer == LMQ_TOK_HF_JSON && tj) {
        /* lmq's reading of it says which pipeline it is: byte-level BPE has a pre-tokenizer
         * llama.cpp names; a SentencePiece-style one is not written (yet) */
        if ((rc = tok_open_model(m, &tok, err)))
            return lmq_err_prefix(err, "tokenizer.json: ");
        const char *pre = tok_ggml_pre(tok);
        tok_free(tok);
        if (!pre)
            return lmq_fail(err, LMQ_E_UNSUPPORTED, "tokenizer.json: a SentencePiece-style BPE (Llama-2's kind) has no "
                            "GGUF form lmq writes; byte-level BPE tokenizer.json files (GPT-2, Llama-3, Qwen2) do");
        gf_w_str(w, "tokenizer.ggml.model", "gpt2");
        gf_w_str(w, "tokenizer.ggml.pre", pre);
        rc = hf_json_tokens(tj, &t, &merges, err);
    } else if (a->tokenizer == LMQ_TOK_LLAMA2C && tb) {
        gf_w_str(w, "tokenizer.ggml.model", "llama");
        rc = llama2c_tokens(tb, a->vocab_size, a, &t, err);
    } else if (a->tokenizer == LMQ_TOK_GPT2 && vj && mt) {
        gf_w_str(w, "tokenizer.ggml.model", "gpt2");
        gf_w_str(w, "tokenizer.ggml.pre", "gpt-2"); /* GPT-2's pre-tokenizer regex in llama.cpp */
        if (!(rc = gpt2_tokens(vj, a, &t, err)))
            rc = gpt2_merges(mt, &merges, err);
    } else {
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "the artefact's tokenizer (%s) has no GGUF form lmq writes "
                        "(a llama2.c tokenizer.bin, vocab.json + merges.txt, or a byte-level BPE tokenizer.json)",
                        a->tokenizer == LMQ_TOK_SPM ? "tokenizer.model" : "none");
    }
    if (!rc) {
        gf_w_arr_str(w, "tokenizer.ggml.tokens", t.n, (const char *const *)t.s, t.len);
        if (a->tokenizer == LMQ_TOK_LLAMA2C)
            gf_w_arr_f32(w, "tokenizer.ggml.scores", t.n, t.score);
        gf_w_arr_i32(w, "tokenizer.ggml.token_type", t.n, t.type);
        if (a->tokenizer != LMQ_TOK_LLAMA2C) /* byte-level BPE, even when empty: its vocabulary has the key */
            gf_w_arr_str(w, "tokenizer.ggml.merges", merges.n, (const char *const *)merges.s, merges.len);
        if (a->bos_id >= 0)
            gf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)a->bos_id);
        if (a->eos_id >= 0)
            gf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)a->eos_id);
    }
    tokens_free(&t);
    tokens_free(&merges);
    return rc;
}

/* ---- the file ------------------------------------------------------------------------------ */

/* general.architecture and its <arch>.* keys, in the table's order. */
static void arch_meta(gf_writer *w, const lmq_arch *a)
{
    const lmq_gguf_arch *ga = lmq_gguf_arch_of(a->family);
    gf_w_str(w, "general.architecture", ga->name);
    gf_w_str(w, "general.name", "lmq export");
    for (size_t i = 0; i < ga->n_keys; i++) {
        char k[96];
        snprintf(k, sizeof k, "%s.%s", ga->name, ga->keys[i].key);
        switch (ga->keys[i].field) {
        case LMQ_GK_MAX_SEQ: gf_w_u32(w, k, (uint32_t)a->max_seq); break;
        case LMQ_GK_DIM: gf_w_u32(w, k, (uint32_t)a->dim); break;
        case LMQ_GK_N_LAYERS: gf_w_u32(w, k, (uint32_t)a->n_layers); break;
        case LMQ_GK_HIDDEN_DIM: gf_w_u32(w, k, (uint32_t)a->hidden_dim); break;
        case LMQ_GK_N_HEADS: gf_w_u32(w, k, (uint32_t)a->n_heads); break;
        case LMQ_GK_N_KV_HEADS: gf_w_u32(w, k, (uint32_t)a->n_kv_heads); break;
        case LMQ_GK_NORM_EPS: gf_w_f32(w, k, a->norm_eps); break;
        case LMQ_GK_ROPE_THETA: gf_w_f32(w, k, a->rope_theta); break;
        case LMQ_GK_ROPE_DIMS: gf_w_u32(w, k, (uint32_t)(a->dim / a->n_heads)); break;
        case LMQ_GK_VOCAB_SIZE: gf_w_u32(w, k, (uint32_t)a->vocab_size); break;
        }
    }
}

static int is_rope_tensor(const char *name)
{
    const char *p = strstr(name, ".attn_q.weight");
    p = p ? p : strstr(name, ".attn_k.weight");
    return p && !strncmp(name, "blk.", 4) && strlen(p) == 14;
}

/* One export under way. */
typedef struct {
    const lmq_model *m;
    int allow_requantize;
    gf_writer *w;
    lmq_gguf_report *rep;
    size_t log_len, log_cap;
    int *src;      /* src[k]: the lmq tensor GGUF tensor k is made from */
    int quantized; /* a block-quantised tensor was declared */
    int n_of_type[GGML_TYPE_LIMIT]; /* matrices declared, by GGUF type */
    int dominant;                   /* the type with the most of them (the first to reach it), or -1 */
    char (*rows)[LMQ_NAME_MAX + 8]; /* the GGUF names LMQ_GGUF_BLOCK_ROWS lists */
    int n_rows;
} exporter;

/* Records one re-quantised tensor in the report's log. */
static lmq_code note(exporter *x, const char *why, lmq_err *err)
{
    const size_t n = strlen(why);
    if (x->log_len + n + 2 > x->log_cap) {
        char *g = realloc(x->rep->log, x->log_cap = 2 * x->log_cap + n + 2);
        if (!g)
            return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
        x->rep->log = g;
    }
    memcpy(x->rep->log + x->log_len, why, n);
    x->log_len += n;
    x->rep->log[x->log_len++] = '\n';
    x->rep->log[x->log_len] = '\0';
    x->rep->requantized++;
    return LMQ_OK;
}

/* The log's lines as the lmq.requantized string array. */
static lmq_code requantized_meta(exporter *x, lmq_err *err)
{
    const int n = x->rep->requantized;
    const char **s = malloc((size_t)n * sizeof *s);
    uint64_t *len = malloc((size_t)n * sizeof *len);
    if (!s || !len) {
        free(s);
        free(len);
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    }
    const char *p = x->rep->log;
    for (int i = 0; i < n; i++) {
        const char *e = strchr(p, '\n');
        s[i] = p;
        len[i] = (uint64_t)(e - p);
        p = e + 1;
    }
    gf_w_arr_str(x->w, "lmq.requantized", (uint64_t)n, s, len);
    free(s);
    free(len);
    return LMQ_OK;
}

/* LMQ_GGUF_BLOCK_ROWS: the tensors held in lmq's q8_0 / q4_0 rows, so that import keeps them so. */
static lmq_code rows_meta(exporter *x, lmq_err *err)
{
    const char **s = malloc((size_t)x->n_rows * sizeof *s);
    uint64_t *len = malloc((size_t)x->n_rows * sizeof *len);
    if (!s || !len) {
        free(s);
        free(len);
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    }
    for (int i = 0; i < x->n_rows; i++) {
        s[i] = x->rows[i];
        len[i] = strlen(x->rows[i]);
    }
    gf_w_arr_str(x->w, LMQ_GGUF_BLOCK_ROWS, (uint64_t)x->n_rows, s, len);
    free(s);
    free(len);
    return LMQ_OK;
}

/* The GGUF tensor that lmq tensor t becomes: its bytes (malloc'd), type, rows and elements;
 * *bytes NULL for nothing. A GPT-2 artefact converted with --split-qkv holds q, k and v apart,
 * where llama.cpp wants the fused attn_qkv (rows q|k|v, as lmq's own fused tensor): at attn_q the
 * three become one, their GGUF rows one after another (each row is whole blocks), if their GGUF
 * types agree; attn_k and attn_v become nothing. `record`: re-quantised tensors go to the log. */
static lmq_code tensor_out(exporter *x, const lmq_tensor *t, int record, uint8_t **out, size_t *total, int *out_type,
                           int64_t *rows, int64_t *elems, lmq_err *err)
{
    const lmq_arch *a = &x->m->arch;
    const char *qkv = a->family == LMQ_FAMILY_GPT2 ? strstr(t->name, ".attn_") : NULL;
    *out = NULL;
    *total = 0;
    *rows = *elems = 0;
    if (qkv && (!strncmp(qkv, ".attn_k.", 8) || !strncmp(qkv, ".attn_v.", 8)))
        return LMQ_OK;
    const int n_parts = qkv && !strncmp(qkv, ".attn_q.", 8) ? 3 : 1;
    const lmq_tensor *part[3] = { t, NULL, NULL };
    uint8_t *bytes[3] = { NULL, NULL, NULL };
    size_t size[3] = { 0, 0, 0 };
    int type[3] = { -1, -1, -1 };
    lmq_code rc = LMQ_OK;
    for (int k = 0; k < n_parts && !rc; k++) {
        char name[LMQ_NAME_MAX], why[LMQ_NAME_MAX + 128];
        snprintf(name, sizeof name, "%s", t->name);
        if (k) /* attn_k, attn_v */
            name[qkv - t->name + 6] = "qkv"[k];
        if (!(part[k] = k ? lmq_model_find(x->m, name) : t) || part[k]->ndim != t->ndim) {
            rc = lmq_fail(err, LMQ_E_FORMAT, "tensor %s: no %s of the same rank beside it to fuse into attn_qkv",
                          t->name, name);
            break;
        }
        if ((rc = tensor_bytes(part[k], x->allow_requantize, &type[k], &bytes[k], &size[k], why, sizeof why, err)) ||
            (record && why[0] && (rc = note(x, why, err))))
            break;
        if (type[k] != type[0])
            rc = lmq_fail(err, LMQ_E_UNSUPPORTED, "tensors %s and %s go to GGUF types %s and %s: llama.cpp's fused "
                          "attn_qkv holds one", part[0]->name, part[k]->name, gf_type_of((uint32_t)type[0]).name,
                          gf_type_of((uint32_t)type[k]).name);
        *rows += part[k]->ndim > 1 ? part[k]->shape[0] : 1;
        *elems += lmq_tensor_numel(part[k]);
        *total += size[k];
    }
    uint8_t *all = rc ? NULL : n_parts == 1 ? bytes[0] : malloc(*total ? *total : 1);
    if (!rc && !all)
        rc = lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory", t->name);
    for (size_t k = 0, at = 0; k < (size_t)n_parts && !rc && n_parts > 1; at += size[k], k++)
        memcpy(all + at, bytes[k], size[k]);
    if (!rc && a->family == LMQ_FAMILY_LLAMA && a->rope == LMQ_ROPE_HALF && is_rope_tensor(t->name))
        rc = permute_rope(all, *total, *rows, a->dim / a->n_heads, t->name, err);
    for (int k = 0; k < 3; k++)
        if (bytes[k] != all)
            free(bytes[k]);
    if (rc)
        free(all);
    else
        *out = all;
    *out_type = type[0];
    return rc;
}

/* Declares the GGUF tensor lmq tensor i becomes (tensor_out, its bytes let go of: they are made
 * again when the file is written, fill_tensor), remembering i. */
static lmq_code declare_tensor(exporter *x, int i, lmq_err *err)
{
    const lmq_tensor *t = &x->m->tensors[i];
    uint8_t *bytes;
    size_t size;
    int type;
    int64_t rows, elems;
    lmq_code rc = tensor_out(x, t, 1, &bytes, &size, &type, &rows, &elems, err);
    if (rc || !bytes)
        return rc;
    free(bytes);
    char name[LMQ_NAME_MAX + 8];
    lmq_gguf_name(t->name, 1, name);
    if (strstr(t->name, ".attn_q.") && x->m->arch.family == LMQ_FAMILY_GPT2) { /* ".attn_q." -> ".attn_qkv." */
        char *q = strstr(name, ".attn_q.");
        memmove(q + 10, q + 8, strlen(q + 8) + 1);
        memcpy(q, ".attn_qkv.", 10);
    }
    const uint64_t ne[2] = { (uint64_t)(elems / rows), (uint64_t)rows };
    gf_w_tensor(x->w, name, (uint32_t)type, t->ndim > 1 ? 2 : 1, t->ndim > 1 ? ne : (const uint64_t[1]){ (uint64_t)elems },
                NULL, size);
    x->src[x->rep->tensors++] = i;
    if (lmq_gguf_names_row(&t->q))
        memcpy(x->rows[x->n_rows++], name, sizeof name);
    x->quantized |= gf_type_of((uint32_t)type).block > 1;
    if (t->ndim > 1 && ++x->n_of_type[type] > (x->dominant < 0 ? 0 : x->n_of_type[x->dominant]))
        x->dominant = type;
    return LMQ_OK;
}

/* gf_fill_fn: GGUF tensor k's bytes, made again from the lmq tensor declared as k. */
static lmq_code fill_tensor(void *ctx, size_t k, uint8_t **bytes, lmq_err *err)
{
    exporter *x = ctx;
    size_t size;
    int type;
    int64_t rows, elems;
    return tensor_out(x, &x->m->tensors[x->src[k]], 0, bytes, &size, &type, &rows, &elems, err);
}

lmq_code lmq_gguf_export(const char *in, const char *out, int allow_requantize, lmq_gguf_report *rep, lmq_err *err)
{
    lmq_gguf_report own = { 0 };
    rep = rep ? rep : &own;
    memset(rep, 0, sizeof *rep);
    lmq_model m;
    lmq_code rc = lmq_output_check(out, &in, 1, err);
    if (rc || (rc = rt_load_artefact(in, &m, err)))
        return rc;
    /* Two passes, so that memory holds one tensor's GGUF bytes at a time: every tensor is made
     * once to learn its type and size (and record re-quantisations), then again as the file is
     * written. */
    exporter x = { .m = &m, .allow_requantize = allow_requantize, .rep = rep, .dominant = -1 };
    if (!(x.src = malloc((size_t)(m.n_tensors ? m.n_tensors : 1) * sizeof *x.src)) ||
        !(x.rows = malloc((size_t)(m.n_tensors ? m.n_tensors : 1) * sizeof *x.rows)))
        rc = lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    if (!rc && !(rc = gf_writer_new(&x.w, err))) {
        arch_meta(x.w, &m.arch);
        rc = tokenizer_meta(x.w, &m, err);
    }
    for (int i = 0; i < m.n_tensors && !rc; i++)
        rc = declare_tensor(&x, i, err);
    /* general.file_type: the matrices' most frequent type as llama.cpp numbers it (1-D tensors
     * stay F32 in every llama.cpp type, "except 1d tensors"). */
    if (!rc && x.dominant >= 0 && lmq_gguf_file_type((uint32_t)x.dominant) >= 0)
        gf_w_u32(x.w, "general.file_type", (uint32_t)lmq_gguf_file_type((uint32_t)x.dominant));
    if (!rc && x.quantized) /* the spec's must (docs/gguf.md, general metadata) */
        gf_w_u32(x.w, "general.quantization_version", GGUF_QNT_VERSION);
    if (!rc && rep->requantized)
        rc = requantized_meta(&x, err);
    if (!rc && x.n_rows)
        rc = rows_meta(&x, err);
    if (!rc)
        rc = gf_writer_write(x.w, out, fill_tensor, &x, err);
    gf_writer_free(x.w);
    free(x.src);
    free(x.rows);
    lmq_model_free(&m);
    if (rep == &own)
        free(own.log);
    return rc;
}
