/* Synthetic checkpoints (convert/synth.h): one tensor table per family, expanded per layer;
 * values from a splitmix64 stream of its own per tensor; tokenizers made of generated words. */
#include "convert/synth.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/file.h"
#include "common/le.h"
#include "convert/paths.h"
#include "formats/hf_model.h"
#include "formats/safetensors.h"

/* What --shape takes. */
static const cv_synth_shape shapes[] = {
    { "gpt2-124m", LMQ_FAMILY_GPT2, 12, 768, 3072, 12, 12, 50257, 1024, 1 },
    { "llama-1b", LMQ_FAMILY_LLAMA, 16, 2048, 8192, 32, 8, 32000, 2048, 0 },
    { "llama-7b", LMQ_FAMILY_LLAMA, 32, 4096, 11008, 32, 32, 32000, 4096, 0 },
    { "tiny-gpt2", LMQ_FAMILY_GPT2, 2, 64, 256, 4, 4, 512, 128, 1 },
    { "tiny-llama", LMQ_FAMILY_LLAMA, 2, 64, 176, 4, 2, 512, 256, 0 },
};
#define N_SHAPES (int)(sizeof shapes / sizeof shapes[0])

const cv_synth_shape *cv_synth_find(const char *name)
{
    for (int i = 0; i < N_SHAPES; i++)
        if (!strcmp(shapes[i].name, name))
            return &shapes[i];
    return NULL;
}

char *cv_synth_names(char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < N_SHAPES && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? ", " : "", shapes[i].name);
    return buf;
}

/* ---- the tensors ---------------------------------------------------------------------- */

typedef enum {
    INIT_MATRIX,   /* std 0.02, GPT-2's initializer_range */
    INIT_RESIDUAL, /* into the residual stream: std 0.02 / sqrt(2 · layers), as GPT-2 scales them */
    INIT_POSITION, /* std 0.01 */
    INIT_NORM,     /* gains: 1, std 0.05 */
    INIT_BIAS,     /* std 0.01 */
} synth_init;

/* A tensor by its canonical name ("{L}": one per layer; written under the Hugging Face name the
 * family's table gives it, formats/hf_model.h) and dimensions by letter: v vocab, p positions,
 * d dim, h hidden, k the k/v width, q 3·dim, 0 none. */
typedef struct {
    const char *name;
    char d0, d1;
    synth_init init;
    int untied; /* only when the classifier is not the embedding */
} synth_row;

/* GPT-2's Conv1D weights are stored [in, out]. */
static const synth_row GPT2_ROWS[] = {
    { "tok_embd.weight", 'v', 'd', INIT_MATRIX, 0 },
    { "pos_embd.weight", 'p', 'd', INIT_POSITION, 0 },
    { "blk.{L}.attn_norm.weight", 'd', 0, INIT_NORM, 0 },
    { "blk.{L}.attn_norm.bias", 'd', 0, INIT_BIAS, 0 },
    { "blk.{L}.attn_qkv.weight", 'd', 'q', INIT_MATRIX, 0 },
    { "blk.{L}.attn_qkv.bias", 'q', 0, INIT_BIAS, 0 },
    { "blk.{L}.attn_out.weight", 'd', 'd', INIT_RESIDUAL, 0 },
    { "blk.{L}.attn_out.bias", 'd', 0, INIT_BIAS, 0 },
    { "blk.{L}.ffn_norm.weight", 'd', 0, INIT_NORM, 0 },
    { "blk.{L}.ffn_norm.bias", 'd', 0, INIT_BIAS, 0 },
    { "blk.{L}.ffn_up.weight", 'd', 'h', INIT_MATRIX, 0 },
    { "blk.{L}.ffn_up.bias", 'h', 0, INIT_BIAS, 0 },
    { "blk.{L}.ffn_down.weight", 'h', 'd', INIT_RESIDUAL, 0 },
    { "blk.{L}.ffn_down.bias", 'd', 0, INIT_BIAS, 0 },
    { "out_norm.weight", 'd', 0, INIT_NORM, 0 },
    { "out_norm.bias", 'd', 0, INIT_BIAS, 0 },
    { "output.weight", 'v', 'd', INIT_MATRIX, 1 },
};

static const synth_row LLAMA_ROWS[] = {
    { "tok_embd.weight", 'v', 'd', INIT_MATRIX, 0 },
    { "blk.{L}.attn_norm.weight", 'd', 0, INIT_NORM, 0 },
    { "blk.{L}.attn_q.weight", 'd', 'd', INIT_MATRIX, 0 },
    { "blk.{L}.attn_k.weight", 'k', 'd', INIT_MATRIX, 0 },
    { "blk.{L}.attn_v.weight", 'k', 'd', INIT_MATRIX, 0 },
    { "blk.{L}.attn_out.weight", 'd', 'd', INIT_RESIDUAL, 0 },
    { "blk.{L}.ffn_norm.weight", 'd', 0, INIT_NORM, 0 },
    { "blk.{L}.ffn_gate.weight", 'h', 'd', INIT_MATRIX, 0 },
    { "blk.{L}.ffn_up.weight", 'h', 'd', INIT_MATRIX, 0 },
    { "blk.{L}.ffn_down.weight", 'd', 'h', INIT_RESIDUAL, 0 },
    { "out_norm.weight", 'd', 0, INIT_NORM, 0 },
    { "output.weight", 'v', 'd', INIT_MATRIX, 1 },
};

typedef struct {
    char name[96];
    int64_t shape[2];
    synth_init init;
} synth_tensor;

static int64_t dim_of(const cv_synth_shape *s, char letter)
{
    switch (letter) {
    case 'v': return s->vocab_size;
    case 'p': return s->max_seq;
    case 'd': return s->dim;
    case 'h': return s->hidden_dim;
    case 'k': return (int64_t)s->dim / s->n_heads * s->n_kv_heads;
    default: return 3 * (int64_t)s->dim; /* 'q' */
    }
}

/* Appends row r (for layer) to t[*n], or only counts it when t is NULL. */
static void add_tensor(const cv_synth_shape *s, const synth_row *r, int layer, synth_tensor *t, int *n)
{
    if (!t) {
        ++*n;
        return;
    }
    synth_tensor *x = &t[(*n)++];
    char canon[LMQ_NAME_MAX];
    lmq_hf_expand(r->name, layer, canon, sizeof canon);
    lmq_hf_reverse(lmq_hf_family_of(s->family), canon, 1, x->name, sizeof x->name);
    x->shape[0] = dim_of(s, r->d0);
    x->shape[1] = r->d1 ? dim_of(s, r->d1) : 0;
    x->init = r->init;
}

/* The tensors in file order: rows without {L} once, each run of {L} rows once per layer. Returns
 * their count; t may be NULL to count only. */
static int list_tensors(const cv_synth_shape *s, synth_tensor *t)
{
    const int gpt2 = s->family == LMQ_FAMILY_GPT2;
    const synth_row *rows = gpt2 ? GPT2_ROWS : LLAMA_ROWS;
    const size_t n_rows = gpt2 ? sizeof GPT2_ROWS / sizeof *GPT2_ROWS : sizeof LLAMA_ROWS / sizeof *LLAMA_ROWS;
    int n = 0;
    for (size_t i = 0; i < n_rows;) {
        size_t end = i;
        while (end < n_rows && strstr(rows[end].name, "{L}"))
            end++;
        if (end == i) {
            if (!(rows[i].untied && s->tied))
                add_tensor(s, &rows[i], 0, t, &n);
            i++;
            continue;
        }
        for (int l = 0; l < s->n_layers; l++)
            for (size_t k = i; k < end; k++)
                add_tensor(s, &rows[k], l, t, &n);
        i = end;
    }
    return n;
}

lmq_code cv_synth_stored_bytes(const cv_synth_shape *s, const lmq_qparams *matrices, uint64_t *bytes, lmq_err *err)
{
    const int n = list_tensors(s, NULL);
    synth_tensor *t = malloc((size_t)n * sizeof *t);
    if (!t)
        return lmq_fail(err, LMQ_E_NOMEM, "synth %s: out of memory", s->name);
    list_tensors(s, t);
    const lmq_qparams plain = { .dtype = LMQ_T_F32 };
    lmq_code c = LMQ_OK;
    *bytes = 0;
    for (int i = 0; i < n && !c; i++) {
        const int vector = t[i].shape[1] == 0;
        lmq_layout L;
        c = lmq_layout_of(vector ? &plain : matrices, t[i].shape[0], vector ? 1 : t[i].shape[1], &L, err);
        if (c)
            lmq_err_prefix(err, "synth %s: %s: ", s->name, t[i].name);
        else
            *bytes += L.bytes;
    }
    free(t);
    return c;
}

/* ---- values --------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

/* Mean 0, std 1, from one draw: the sum of its four 16-bit quarters (Irwin-Hall, 4 terms) is
 * close to normal, bounded at ±3.46 std. Cheap enough for a billion values. */
static float normalish(uint64_t r)
{
    const double sum = (double)(r & 0xFFFF) + (double)(r >> 16 & 0xFFFF) + (double)(r >> 32 & 0xFFFF) +
                       (double)(r >> 48);
    return (float)((sum - 4 * 32767.5) * (1.7320508075688772 / 65536.0));
}

#define CHUNK 65536 /* values generated and written at a time */

static lmq_code write_values(st_stream *st, const cv_synth_shape *s, const synth_tensor *t, int index,
                             uint64_t seed, float *buf, lmq_err *err)
{
    double mean = 0, std = 0.02;
    switch (t->init) {
    case INIT_MATRIX: break;
    case INIT_RESIDUAL: std = 0.02 / sqrt(2.0 * s->n_layers); break;
    case INIT_POSITION: std = 0.01; break;
    case INIT_NORM: mean = 1, std = 0.05; break;
    case INIT_BIAS: std = 0.01; break;
    }
    /* Each tensor its own stream, so its values do not depend on the tensors before it. */
    uint64_t state = seed ^ (0xD1B54A32D192ED03u * (uint64_t)(index + 1));
    splitmix64(&state);
    int64_t left = t->shape[0] * (t->shape[1] ? t->shape[1] : 1);
    while (left > 0) {
        const size_t k = left < CHUNK ? (size_t)left : CHUNK;
        for (size_t i = 0; i < k; i++)
            buf[i] = (float)(mean + std * normalish(splitmix64(&state)));
        lmq_code c = st_stream_write(st, buf, k, err);
        if (c)
            return c;
        left -= (int64_t)k;
    }
    return LMQ_OK;
}

static lmq_code write_weights(const cv_synth_shape *s, const char *path, const cv_synth_opts *o,
                              cv_synth_info *info, lmq_err *err)
{
    const int n = list_tensors(s, NULL);
    synth_tensor *t = calloc((size_t)n, sizeof *t);
    st_out *out = calloc((size_t)n, sizeof *out);
    float *buf = malloc(CHUNK * sizeof *buf);
    lmq_code c = LMQ_OK;
    if (!t || !out || !buf)
        c = lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", path);
    st_stream st;
    if (!c) {
        list_tensors(s, t);
        for (int i = 0; i < n; i++) {
            out[i] = (st_out){ t[i].name, ST_F32, t[i].shape[1] ? 2 : 1, t[i].shape, NULL };
            info->params += t[i].shape[0] * (t[i].shape[1] ? t[i].shape[1] : 1);
        }
        info->n_tensors = n;
        c = st_stream_open(&st, path, out, n, err);
        for (int i = 0; i < n && !c; i++) {
            if (o->progress)
                o->progress(o->progress_ctx, i, n, t[i].name);
            c = write_values(&st, s, &t[i], i, o->seed, buf, err);
            if (c)
                st_stream_abort(&st);
        }
        if (!c)
            c = st_stream_commit(&st, err);
    }
    free(t);
    free(out);
    free(buf);
    return c;
}

/* ---- text files ----------------------------------------------------------------------- */

static lmq_code open_out(lmq_atomic *a, const char *dir, const char *name, lmq_err *err)
{
    char path[PATH_CAP];
    lmq_code c = cv_join(path, dir, name, err);
    return c ? c : lmq_atomic_open(a, path, err);
}

static lmq_code write_config(const cv_synth_shape *s, const char *dir, uint64_t seed, lmq_err *err)
{
    json_t *j = json_object(), *origin = json_object();
    char seed_s[24];
    snprintf(seed_s, sizeof seed_s, "%llu", (unsigned long long)seed);
    json_object_set_new(origin, "shape", json_string(s->name));
    json_object_set_new(origin, "seed", json_string(seed_s));
    /* The keys of the family's row of formats/hf_model.h, in an order of their own. */
    const lmq_hf_family *f = lmq_hf_family_of(s->family);
#define SET(key, value) json_object_set_new(j, key, value)
#define KEY(field) lmq_hf_key_of(f, LMQ_HK_##field)->key
    SET("architectures", json_pack("[s]", f->architecture));
    SET("model_type", json_string(f->model_type));
    if (s->family == LMQ_FAMILY_GPT2) {
        SET(KEY(VOCAB_SIZE), json_integer(s->vocab_size));
        SET(KEY(MAX_SEQ), json_integer(s->max_seq));
        SET(KEY(MAX_SEQ_OLD), json_integer(s->max_seq));
        SET(KEY(DIM), json_integer(s->dim));
        SET(KEY(N_LAYERS), json_integer(s->n_layers));
        SET(KEY(N_HEADS), json_integer(s->n_heads));
        SET(KEY(HIDDEN_DIM), json_integer(s->hidden_dim));
        SET(KEY(ACTIVATION), json_string(lmq_hf_key_of(f, LMQ_HK_ACTIVATION)->value));
        SET(KEY(NORM_EPS), json_real(1e-5));
        SET("initializer_range", json_real(0.02));
        SET(KEY(BOS), json_integer(s->vocab_size - 1)); /* <|endoftext|>, the last token */
        SET(KEY(EOS), json_integer(s->vocab_size - 1));
    } else {
        SET(KEY(DIM), json_integer(s->dim));
        SET(KEY(HIDDEN_DIM), json_integer(s->hidden_dim));
        SET(KEY(N_LAYERS), json_integer(s->n_layers));
        SET(KEY(N_HEADS), json_integer(s->n_heads));
        SET(KEY(N_KV_HEADS), json_integer(s->n_kv_heads));
        SET(KEY(VOCAB_SIZE), json_integer(s->vocab_size));
        SET(KEY(MAX_SEQ), json_integer(s->max_seq));
        SET(KEY(NORM_EPS), json_real(1e-5));
        SET(KEY(ROPE_THETA), json_real(10000.0));
        SET(KEY(ACTIVATION), json_string(lmq_hf_key_of(f, LMQ_HK_ACTIVATION)->value));
        SET(KEY(BOS), json_integer(1));
        SET(KEY(EOS), json_integer(2));
    }
    SET(KEY(TIED), json_boolean(s->tied));
    SET("torch_dtype", json_string("float32"));
    SET("lmq_synth", origin);
#undef KEY
#undef SET
    char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    json_decref(j);
    if (!text)
        return lmq_fail(err, LMQ_E_NOMEM, "%s: config.json: out of memory", dir);
    lmq_atomic a;
    lmq_code c = open_out(&a, dir, "config.json", err);
    if (!c) {
        fprintf(a.fp, "%s\n", text);
        c = lmq_atomic_commit(&a, err);
    }
    free(text);
    return c;
}

/* Tokenizer words, most frequent English letters first. Word n is a letter (n < 26), the
 * space mark and a letter (n < 52), or word (n - 52) / 26 and a letter: each is built once from
 * a shorter word, so all are distinct, and a BPE merge of the two parts makes it. */
static const char LETTERS[] = "etaoinsrhldcumfpgwybvkxjqz";

static size_t word(int n, const char *mark, char *out)
{
    size_t k = 0;
    if (n >= 52)
        k = word((n - 52) / 26, mark, out);
    else if (n >= 26)
        k = (size_t)sprintf(out, "%s", mark);
    out[k++] = LETTERS[n < 52 ? n % 26 : (n - 52) % 26];
    out[k] = '\0';
    return k;
}

/* The first part of word n >= 26 (the second is its last letter). */
static void word_head(int n, const char *mark, char *out)
{
    if (n < 52)
        sprintf(out, "%s", mark);
    else
        word((n - 52) / 26, mark, out);
}

#define GPT2_SPACE "\xC4\xA0" /* "Ġ": the space byte in GPT-2's byte alphabet */

/* GPT-2: the 256 byte tokens (in code point order of the byte alphabet, as GPT-2 numbers them),
 * one merge per generated word, and <|endoftext|> last. */
static lmq_code write_gpt2_tokenizer(const cv_synth_shape *s, const char *dir, lmq_err *err)
{
    const int n_words = s->vocab_size - 257;
    lmq_atomic v, m;
    lmq_code c = open_out(&v, dir, "vocab.json", err);
    if (c)
        return c;
    if ((c = open_out(&m, dir, "merges.txt", err))) {
        lmq_atomic_abort(&v);
        return c;
    }
    fputc('{', v.fp);
    int id = 0;
    for (int pass = 0; pass < 2; pass++) /* printable bytes stand for themselves; the rest follow */
        for (int b = 0; b < 256; b++) {
            const int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
            if (printable != !pass)
                continue;
            const unsigned cp = pass ? 256u + (unsigned)(id - 188) : (unsigned)b; /* 188 printable */
            if (cp == '"' || cp == '\\')
                fprintf(v.fp, "%s\"\\%c\": %d", id ? ", " : "", (char)cp, id);
            else if (cp < 0x80)
                fprintf(v.fp, "%s\"%c\": %d", id ? ", " : "", (char)cp, id);
            else
                fprintf(v.fp, "%s\"%c%c\": %d", id ? ", " : "", (char)(0xC0 | cp >> 6), (char)(0x80 | (cp & 0x3F)),
                        id);
            id++;
        }
    fputs("#version: 0.2\n", m.fp);
    char w[64], head[64];
    for (int i = 0; i < n_words; i++) {
        word(26 + i, GPT2_SPACE, w);
        word_head(26 + i, GPT2_SPACE, head);
        fprintf(v.fp, ", \"%s\": %d", w, id++);
        fprintf(m.fp, "%s %c\n", head, w[strlen(w) - 1]);
    }
    fprintf(v.fp, ", \"<|endoftext|>\": %d}\n", id);
    if ((c = lmq_atomic_commit(&v, err)))
        lmq_atomic_abort(&m);
    else
        c = lmq_atomic_commit(&m, err);
    return c;
}

static void put_piece(FILE *f, float score, const char *text)
{
    lmq_write_le32(f, lmq_f32_bits(score));
    lmq_write_le32(f, (uint32_t)strlen(text));
    fputs(text, f);
}

/* llama2.c: <unk>, BOS, EOS, the byte pieces <0x00>..<0xFF> at 3..258, " " (the dummy prefix),
 * then the generated words; shorter words score higher, so they merge first. */
static lmq_code write_llama_tokenizer(const cv_synth_shape *s, const char *dir, lmq_err *err)
{
    const int n_words = s->vocab_size - 260;
    char w[64];
    uint32_t max_len = 6; /* "<0x00>", "\n</s>\n" */
    for (int i = 0; i < n_words; i++) {
        const size_t k = word(i, " ", w);
        if (k > max_len)
            max_len = (uint32_t)k;
    }
    lmq_atomic a;
    lmq_code c = open_out(&a, dir, "tokenizer.bin", err);
    if (c)
        return c;
    lmq_write_le32(a.fp, max_len);
    put_piece(a.fp, 0, "<unk>");
    put_piece(a.fp, 0, "\n<s>\n");
    put_piece(a.fp, 0, "\n</s>\n");
    for (int b = 0; b < 256; b++) {
        snprintf(w, sizeof w, "<0x%02X>", b);
        put_piece(a.fp, 0, w);
    }
    put_piece(a.fp, 0, " ");
    for (int i = 0; i < n_words; i++) {
        word(i, " ", w);
        put_piece(a.fp, -(float)i, w);
    }
    return lmq_atomic_commit(&a, err);
}

/* ---- the directory -------------------------------------------------------------------- */

/* Files lmq convert would read in preference to what is written here. */
static lmq_code check_dir(const cv_synth_shape *s, const char *dir, lmq_err *err)
{
    static const char *shadows[] = { "model.safetensors.index.json", "vocab.json", "tokenizer.json" };
    const int n = s->family == LMQ_FAMILY_GPT2 ? 1 : 3;
    for (int i = 0; i < n; i++) {
        char path[PATH_CAP];
        lmq_code c = cv_join(path, dir, shadows[i], err);
        if (c)
            return c;
        if (cv_is_file(path))
            return lmq_fail(err, LMQ_E_ARG, "%s: holds %s, which lmq convert would read instead: use another directory",
                            dir, shadows[i]);
    }
    return LMQ_OK;
}

lmq_code cv_synth_write(const cv_synth_shape *s, const char *dir, const cv_synth_opts *opts, cv_synth_info *info,
                        lmq_err *err)
{
    const cv_synth_opts none = { 0 };
    cv_synth_info scratch;
    const cv_synth_opts *o = opts ? opts : &none;
    info = info ? info : &scratch;
    memset(info, 0, sizeof *info);
    struct stat st;
    if (mkdir(dir, 0777) != 0) {
        const int e = errno;
        if (e != EEXIST)
            return lmq_fail(err, LMQ_E_IO, "%s: cannot create the directory: %s", dir, strerror(e));
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
            return lmq_fail(err, LMQ_E_IO, "%s: exists and is not a directory", dir);
    }
    char path[PATH_CAP];
    lmq_code c;
    if ((c = check_dir(s, dir, err)) || (c = write_config(s, dir, o->seed, err)) ||
        (c = s->family == LMQ_FAMILY_GPT2 ? write_gpt2_tokenizer(s, dir, err) : write_llama_tokenizer(s, dir, err)) ||
        (c = cv_join(path, dir, "model.safetensors", err)) || (c = write_weights(s, path, o, info, err)))
        return c;
    if (stat(path, &st) == 0)
        info->weight_bytes = (uint64_t)st.st_size;
    return LMQ_OK;
}
