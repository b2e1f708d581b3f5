#include "export/compressed_tensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file.h"
#include "common/le.h"
#include "formats/artefact.h"
#include "formats/encoding.h"
#include "formats/hf_model.h"
#include "formats/model.h"
#include "formats/safetensors.h"
#include "runtime/artefact.h"
#include "schemes/pack.h"
#include "schemes/scheme.h"
#include "tokenizer/tokenizer.h"

#define HF_NAME_MAX (2 * LMQ_NAME_MAX)
/* The compressed-tensors release whose config.json layout this export follows (version,
 * sparsity_config and transform_config beside quantization_config's own keys). */
#define CT_VERSION "0.11.0"

/* How a config group's weights are stored: pack-quantized for 4 and 8 bits, int-quantized for
 * W8A8, naive-quantized (one int8 per weight) for the other widths, float-quantized (one e4m3
 * byte per weight) for fp8. */
typedef enum { FMT_PACK, FMT_INT, FMT_NAIVE, FMT_FLOAT } ct_format;
static const char *const FORMAT_NAMES[] = { "pack-quantized", "int-quantized", "naive-quantized", "float-quantized" };
#define FMT_MIXED "mixed-precision" /* the top-level format when the groups' differ */

/* One scheme of config_groups: a weight encoding, how its codes were chosen (act-order) and the
 * activations of the layer reading it; the format follows from them. */
typedef struct {
    lmq_qparams q;
    lmq_act act;
    int act_order;
    ct_format format;
} ct_scheme;

/* One tensor of the artefact as it is written. */
typedef struct {
    const lmq_tensor *t;
    char hf[HF_NAME_MAX]; /* HF tensor name; for a quantised weight, its module's name */
    int transpose;        /* float Conv1D weight: written [in, out] */
    int rope_heads;       /* > 0: q/k rows go from interleaved to rotate_half order, per head */
    int group;            /* config group, -1 when written as floats */
    int act_order;        /* GPTQ act-order (the manifest's), which compressed-tensors calls "weight" */
    st_dtype dtype;       /* a float tensor's dtype as written; a quantised one's weight_scale's */
    lmq_layout L;
} ct_item;

/* What each safetensors entry holds, and the function that produces its bytes. */
typedef enum { E_FLOAT, E_PACKED, E_INT8, E_FP8, E_SCALE, E_ZERO, E_ZERO8, E_SHAPE } ct_entry_kind;

typedef struct {
    ct_entry_kind kind;
    int item;
    char name[HF_NAME_MAX + 32];
    int64_t shape[2];
} ct_entry;

typedef struct {
    lmq_model m;
    ct_item *items;
    int n_items;
    ct_scheme schemes[16];
    int n_schemes;
    const char *format; /* the top-level format: the groups' own, or FMT_MIXED */
    st_dtype dtype;     /* torch_dtype: the float tensors' one dtype, else F32 (all widened) */
    lmq_manifest man;   /* the artefact's: act-order per tensor */
    ct_entry *entries;
    int n_entries;
} ct_ctx;

/* The source row of output row r: rotate_half order (i, i + hd/2) from llama2.c's interleaved
 * (2i, 2i+1), as HF's own Llama conversion permutes q and k. */
static int64_t src_row(const ct_item *it, int64_t r)
{
    if (!it->rope_heads)
        return r;
    const int64_t hd = it->L.rows / it->rope_heads, half = hd / 2, j = r % hd;
    return r - j + 2 * (j % half) + j / half;
}

static unsigned code_bits(const ct_item *it)
{
    return lmq_encoding_of(it->t->q.dtype)->bits;
}

/* Codes per int32 word: compressed-tensors' pack_factor. */
static int64_t pack_factor(const ct_item *it)
{
    return 32 / code_bits(it);
}

static int64_t scale_cols(const ct_item *it)
{
    return it->t->q.gran == LMQ_GRAN_TENSOR ? 1 : it->L.groups_per_row;
}

/* The stored zero point of scale group g of row r (asymmetric tensors). */
static int zero_at(const ct_item *it, int64_t r, int64_t g)
{
    return (int16_t)lmq_le16(it->t->raw + it->L.zero_offset + 2 * (size_t)(r * it->L.groups_per_row + g));
}

/* ---- planning: names, schemes, what cannot be written ------------------------------------ */

static int is_linear(const lmq_tensor *t)
{
    return t->ndim == 2 && strcmp(t->name, "tok_embd.weight") && strcmp(t->name, "pos_embd.weight");
}

static ct_format format_of(const lmq_tensor *t)
{
    const lmq_encoding *e = lmq_encoding_of(t->q.dtype);
    if (!e->integer)
        return FMT_FLOAT;
    return t->act.scheme != LMQ_ACT_NONE ? FMT_INT : e->bits == 4 || e->bits == 8 ? FMT_PACK : FMT_NAIVE;
}

static int scheme_index(ct_ctx *x, const ct_item *it, lmq_err *err)
{
    const lmq_tensor *t = it->t;
    const ct_scheme s = { t->q, t->act, it->act_order, format_of(t) };
    for (int i = 0; i < x->n_schemes; i++)
        if (!memcmp(&x->schemes[i].q, &s.q, sizeof s.q) && x->schemes[i].act.scheme == s.act.scheme &&
            x->schemes[i].act.gran == s.act.gran && x->schemes[i].act_order == s.act_order)
            return i;
    if (x->n_schemes == (int)(sizeof x->schemes / sizeof x->schemes[0])) {
        lmq_fail(err, LMQ_E_UNSUPPORTED, "tensor %s: more than %d distinct schemes", t->name, x->n_schemes);
        return -1;
    }
    x->schemes[x->n_schemes] = s;
    return x->n_schemes++;
}

/* Checks that t's grid is one compressed-tensors holds exactly. */
static lmq_code check_quantised(const ct_item *it, lmq_err *err)
{
    const lmq_tensor *t = it->t;
    const lmq_encoding *e = lmq_encoding_of(t->q.dtype);
    char d[64];
    q_describe(&t->q, d, sizeof d);
    if (!is_linear(t))
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "tensor %s is %s: compressed-tensors quantises Linear modules "
                        "only (keep embeddings float in the recipe)", t->name, d);
    if (!e->integer && (t->q.dtype != LMQ_T_F8_E4M3 || t->q.gran == LMQ_GRAN_GROUP))
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "tensor %s is %s: the floats compressed-tensors quantises to are "
                        "fp8 e4m3 per tensor or channel (float-quantized)", t->name, d);
    if (!e->integer && t->act.scheme == LMQ_ACT_INT8)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "tensor %s is %s with int8 activations: float-quantized takes fp8 "
                        "activations or none", t->name, d);
    if (e->integer && t->act.scheme == LMQ_ACT_FP8_E4M3)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "tensor %s is %s with fp8 activations: compressed-tensors' integer "
                        "formats take int8 activations or none", t->name, d);
    if (t->q.asym && t->q.gran == LMQ_GRAN_TENSOR)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "tensor %s is %s: pack-quantized stores zero points per channel "
                        "or group only", t->name, d);
    if (t->act.gran == LMQ_ACT_BLOCK && t->act.scheme != LMQ_ACT_NONE)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "tensor %s is %s with int8 activations per block: compressed-tensors "
                        "has no such strategy (keep per-token activations to export)", t->name, d);
    if (t->act.scheme == LMQ_ACT_INT8 && (t->q.dtype != LMQ_T_INT8 || t->q.asym))
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "tensor %s is %s with int8 activations: int-quantized holds "
                        "symmetric int8 weights only", t->name, d);
    /* vLLM's kernels read whole groups; the format defines no padding of a short last one. */
    if (t->q.gran == LMQ_GRAN_GROUP && it->L.cols % t->q.group)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "tensor %s is %s: its %lld columns are not a whole number of "
                        "groups of %u, which compressed-tensors (and vLLM's kernels) need; choose a group that "
                        "divides %lld, or per-channel scales", t->name, d, (long long)it->L.cols, t->q.group,
                        (long long)it->L.cols);
    if (!t->q.asym)
        return LMQ_OK;
    /* lmq stores int16 zero points; the format packs them in `bits` bits, offset like the codes. */
    const int zmax = (1 << e->bits) - 1;
    for (int64_t r = 0; r < it->L.rows; r++)
        for (int64_t g = 0; g < it->L.groups_per_row; g++) {
            const int z = zero_at(it, r, g);
            if (z < 0 || z > zmax)
                return lmq_fail(err, LMQ_E_UNSUPPORTED, "tensor %s: row %lld group %lld: zero point %d is "
                                "outside 0..%d, which %u-bit packed zero points cannot hold", t->name,
                                (long long)r, (long long)g, z, zmax, e->bits);
        }
    return LMQ_OK;
}

static lmq_code plan_item(ct_ctx *x, const lmq_tensor *t, ct_item *it, lmq_err *err)
{
    const lmq_arch *a = &x->m.arch;
    memset(it, 0, sizeof *it);
    it->t = t;
    it->group = -1;
    lmq_code c = lmq_hf_name(a->family, t->name, it->hf, sizeof it->hf, &it->transpose, err);
    if (c)
        return a->family == LMQ_FAMILY_GPT2 ? lmq_err_prefix(err, "GPT-2 artefacts with split q/k/v cannot be "
                                                             "exported (HF's GPT-2 has one c_attn): ")
                                            : c;
    const int64_t rows = t->ndim == 2 ? t->shape[0] : 1, cols = t->shape[t->ndim - 1];
    if ((c = lmq_layout_of(&t->q, rows, cols, &it->L, err)))
        return lmq_err_prefix(err, "tensor %s: ", t->name);
    if (a->rope == LMQ_ROPE_INTERLEAVED && t->ndim == 2) {
        const size_t n = strlen(t->name);
        if (n > 14 && !strcmp(t->name + n - 14, ".attn_q.weight"))
            it->rope_heads = a->n_heads;
        else if (n > 14 && !strcmp(t->name + n - 14, ".attn_k.weight"))
            it->rope_heads = a->n_kv_heads;
    }
    if (t->q.gran == LMQ_GRAN_NONE) {
        if (t->q.dtype != LMQ_T_F32 && t->q.dtype != LMQ_T_F16 && t->q.dtype != LMQ_T_BF16)
            return lmq_fail(err, LMQ_E_UNSUPPORTED, "tensor %s is %s: only fp32, fp16, bf16 and integer "
                            "encodings are exported", t->name, lmq_encoding_of(t->q.dtype)->name);
        if (t->act.scheme != LMQ_ACT_NONE)
            return lmq_fail(err, LMQ_E_UNSUPPORTED, "tensor %s: int8 activations on a float weight cannot be "
                            "expressed", t->name);
        return LMQ_OK;
    }
    if ((c = check_quantised(it, err)))
        return c;
    it->hf[strlen(it->hf) - strlen(".weight")] = '\0'; /* the module */
    const lmq_manifest_tensor *mt = lmq_manifest_find(&x->man, t->name);
    it->act_order = mt && mt->calib.method == LMQ_METHOD_GPTQ && mt->calib.act_order;
    it->group = scheme_index(x, it, err);
    return it->group < 0 ? LMQ_E_UNSUPPORTED : LMQ_OK;
}

/* ---- the bytes of each entry: out holds the entry's size, zeroed ------------------------- */

/* Value i of n stored as from (fp32, fp16, bf16) into out as to: the same bits, or widened to
 * fp32 (exact). */
static void put_value(uint8_t *out, size_t i, st_dtype to, const uint8_t *src, size_t j, st_dtype from)
{
    if (to == from) {
        const size_t es = (size_t)st_dtype_bits(to) / 8;
        memcpy(out + i * es, src + j * es, es);
        return;
    }
    const uint16_t h = (uint16_t)lmq_le16(src + 2 * j);
    lmq_put_le32(out + 4 * i, lmq_f32_bits(from == ST_F16 ? lmq_f16_to_f32(h) : lmq_bf16_to_f32(h)));
}

static st_dtype float_dtype(lmq_dtype d)
{
    return d == LMQ_T_F16 ? ST_F16 : d == LMQ_T_BF16 ? ST_BF16 : ST_F32;
}

/* The dtype lmq stores t's scales in: fp16 for integer encodings, fp32 for fp8. */
static st_dtype scale_dtype(const lmq_tensor *t)
{
    return lmq_encoding_of(t->q.dtype)->scale_bits == 32 ? ST_F32 : ST_F16;
}

/* A float tensor, rows permuted (rope) or the matrix transposed (Conv1D), in it->dtype. */
static void put_float(const ct_item *it, uint8_t *out, uint32_t *codes)
{
    (void)codes;
    const int64_t rows = it->L.rows, cols = it->L.cols;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            const int64_t to = it->transpose ? c * rows + r : r * cols + c;
            put_value(out, (size_t)to, it->dtype, it->t->raw, (size_t)(src_row(it, r) * cols + c),
                      float_dtype(it->t->q.dtype));
        }
}

/* Output row r's codes, as stored (offset by 2^(bits-1)). */
static void row_codes(const ct_item *it, int64_t r, uint32_t *codes)
{
    const unsigned bits = code_bits(it);
    q_unpack(it->t->raw + it->L.code_offset, (uint64_t)(src_row(it, r) * it->L.cols) * bits, codes,
             (size_t)it->L.cols, bits);
}

/* weight_packed: pack_factor codes per little-endian int32, code i in bits [bits·i, ...). */
static void put_packed(const ct_item *it, uint8_t *out, uint32_t *codes)
{
    const unsigned bits = code_bits(it);
    const int64_t cols = it->L.cols, pf = pack_factor(it), words = (cols + pf - 1) / pf;
    for (int64_t r = 0; r < it->L.rows; r++) {
        row_codes(it, r, codes);
        for (int64_t w = 0; w < words; w++) {
            uint32_t v = 0;
            for (int64_t c = w * pf; c < cols && c < (w + 1) * pf; c++)
                v |= codes[c] << (bits * (unsigned)(c - w * pf));
            lmq_put_le32(out + 4 * (size_t)(r * words + w), v);
        }
    }
}

/* A stored code or zero point (offset by 2^(bits-1)) as the signed int8 it stands for. */
static uint8_t signed8(const ct_item *it, int code)
{
    return (uint8_t)(int8_t)(code - (1 << (code_bits(it) - 1)));
}

/* int-quantized and naive-quantized weight: one int8 (two's complement q) per weight. */
static void put_int8(const ct_item *it, uint8_t *out, uint32_t *codes)
{
    for (int64_t r = 0; r < it->L.rows; r++) {
        row_codes(it, r, codes);
        for (int64_t c = 0; c < it->L.cols; c++)
            out[r * it->L.cols + c] = signed8(it, (int)codes[c]);
    }
}

/* float-quantized weight: the stored e4m3 bytes, one a weight (fp8 codes are bytes as they are). */
static void put_fp8(const ct_item *it, uint8_t *out, uint32_t *codes)
{
    (void)codes;
    for (int64_t r = 0; r < it->L.rows; r++)
        memcpy(out + (size_t)(r * it->L.cols), it->t->raw + it->L.code_offset + (size_t)(src_row(it, r) * it->L.cols),
               (size_t)it->L.cols);
}

/* weight_scale: the stored scales, rows permuted with their weights, in it->dtype. */
static void put_scale(const ct_item *it, uint8_t *out, uint32_t *codes)
{
    (void)codes;
    const int64_t per_row = scale_cols(it);
    for (int64_t r = 0; r < (it->t->q.gran == LMQ_GRAN_TENSOR ? 1 : it->L.rows); r++)
        for (int64_t g = 0; g < per_row; g++)
            put_value(out, (size_t)(r * per_row + g), it->dtype, it->t->raw, /* the scales come first */
                      (size_t)(src_row(it, r) * per_row + g), scale_dtype(it->t));
}

/* weight_zero_point: packed along the rows, pack_factor rows per int32. */
static void put_zero(const ct_item *it, uint8_t *out, uint32_t *codes)
{
    (void)codes;
    const unsigned bits = code_bits(it);
    const int64_t pf = pack_factor(it), groups = it->L.groups_per_row;
    for (int64_t r = 0; r < it->L.rows; r++)
        for (int64_t g = 0; g < groups; g++) {
            uint8_t *w = out + 4 * (size_t)((r / pf) * groups + g);
            lmq_put_le32(w, lmq_le32(w) | (uint32_t)zero_at(it, src_row(it, r), g) << (bits * (unsigned)(r % pf)));
        }
}

/* naive-quantized weight_zero_point: one int8 (signed z) per scale. */
static void put_zero8(const ct_item *it, uint8_t *out, uint32_t *codes)
{
    (void)codes;
    const int64_t groups = it->L.groups_per_row;
    for (int64_t r = 0; r < it->L.rows; r++)
        for (int64_t g = 0; g < groups; g++)
            out[r * groups + g] = signed8(it, zero_at(it, src_row(it, r), g));
}

/* weight_shape: [out, in] as little-endian int64. */
static void put_shape(const ct_item *it, uint8_t *out, uint32_t *codes)
{
    (void)codes;
    lmq_put_le(out, (uint64_t)it->L.rows, 8);
    lmq_put_le(out + 8, (uint64_t)it->L.cols, 8);
}

/* Each kind of entry: its name after the module's, its dtype (floats keep the tensor's), and
 * what writes its bytes. */
static const struct {
    const char *suffix;
    st_dtype dtype;
    void (*put)(const ct_item *it, uint8_t *out, uint32_t *codes);
} KINDS[] = {
    [E_FLOAT] = { "", ST_F32, put_float },
    [E_PACKED] = { ".weight_packed", ST_I32, put_packed },
    [E_INT8] = { ".weight", ST_I8, put_int8 },
    [E_FP8] = { ".weight", ST_F8_E4M3, put_fp8 },
    [E_SCALE] = { ".weight_scale", ST_F32, put_scale }, /* its dtype: the item's */
    [E_ZERO] = { ".weight_zero_point", ST_I32, put_zero },
    [E_ZERO8] = { ".weight_zero_point", ST_I8, put_zero8 },
    [E_SHAPE] = { ".weight_shape", ST_I64, put_shape },
};

static void add_entry(ct_ctx *x, ct_entry_kind kind, int item, int64_t d0, int64_t d1)
{
    ct_entry *e = &x->entries[x->n_entries++];
    e->kind = kind;
    e->item = item;
    snprintf(e->name, sizeof e->name, "%s%s", x->items[item].hf, KINDS[kind].suffix);
    e->shape[0] = d0;
    e->shape[1] = d1;
}

/* The safetensors entries, in the artefact's tensor order; *outs describes them for the writer. */
static lmq_code plan_entries(ct_ctx *x, st_out **outs, lmq_err *err)
{
    x->entries = calloc((size_t)x->n_items * 4 + 1, sizeof *x->entries);
    *outs = calloc((size_t)x->n_items * 4 + 1, sizeof **outs);
    if (!x->entries || !*outs)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    for (int i = 0; i < x->n_items; i++) {
        const ct_item *it = &x->items[i];
        const lmq_tensor *t = it->t;
        if (it->group < 0) {
            const int64_t d0 = t->shape[0], d1 = t->ndim == 2 ? t->shape[1] : 0;
            add_entry(x, E_FLOAT, i, it->transpose ? d1 : d0, it->transpose ? d0 : d1);
            continue;
        }
        const int64_t rows = it->L.rows, cols = it->L.cols, pf = pack_factor(it);
        const ct_format fmt = x->schemes[it->group].format;
        const int packed = fmt == FMT_PACK;
        if (packed)
            add_entry(x, E_PACKED, i, rows, (cols + pf - 1) / pf);
        else
            add_entry(x, fmt == FMT_FLOAT ? E_FP8 : E_INT8, i, rows, cols);
        add_entry(x, E_SCALE, i, t->q.gran == LMQ_GRAN_TENSOR ? 1 : rows, scale_cols(it));
        if (t->q.asym && packed)
            add_entry(x, E_ZERO, i, (rows + pf - 1) / pf, scale_cols(it));
        else if (t->q.asym)
            add_entry(x, E_ZERO8, i, rows, scale_cols(it));
        if (packed)
            add_entry(x, E_SHAPE, i, 2, 0);
    }
    for (int k = 0; k < x->n_entries; k++) {
        ct_entry *e = &x->entries[k];
        const lmq_tensor *t = x->items[e->item].t;
        const int tensor_scale = e->kind == E_SCALE && t->q.gran == LMQ_GRAN_TENSOR; /* shape [1] */
        (*outs)[k] = (st_out){ .name = e->name,
                               .dtype = e->kind == E_FLOAT || e->kind == E_SCALE ? x->items[e->item].dtype
                                                                                 : KINDS[e->kind].dtype,
                               .ndim = e->shape[1] && !tensor_scale ? 2 : 1,
                               .shape = e->shape };
    }
    return LMQ_OK;
}

static size_t entry_bytes(const st_out *o)
{
    size_t n = (size_t)st_dtype_bits(o->dtype) / 8;
    for (int k = 0; k < o->ndim; k++)
        n *= (size_t)o->shape[k];
    return n;
}

static lmq_code write_weights(const ct_ctx *x, const st_out *outs, const char *path, lmq_err *err)
{
    int64_t max_cols = 1;
    size_t max_bytes = 1;
    for (int i = 0; i < x->n_items; i++)
        if (x->items[i].L.cols > max_cols)
            max_cols = x->items[i].L.cols;
    for (int k = 0; k < x->n_entries; k++)
        if (entry_bytes(&outs[k]) > max_bytes)
            max_bytes = entry_bytes(&outs[k]);
    uint8_t *buf = malloc(max_bytes);
    uint32_t *codes = malloc((size_t)max_cols * sizeof *codes);
    st_stream s;
    lmq_code c = !buf || !codes ? lmq_fail(err, LMQ_E_NOMEM, "out of memory")
                                : st_stream_open(&s, path, outs, x->n_entries, err);
    for (int k = 0; k < x->n_entries && !c; k++) {
        const size_t n = entry_bytes(&outs[k]);
        memset(buf, 0, n);
        KINDS[x->entries[k].kind].put(&x->items[x->entries[k].item], buf, codes);
        if ((c = st_stream_write_raw(&s, buf, n, err)))
            st_stream_abort(&s);
    }
    if (!c)
        c = st_stream_commit(&s, err);
    free(buf);
    free(codes);
    return c;
}

/* ---- config.json ------------------------------------------------------------------------- */

/* A float as the shortest decimal that reads back as the same float (1e-05, not
 * 9.9999997473787516e-06); config.json is dumped with 9 significant digits. */
static json_t *json_float(float f)
{
    char buf[32];
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)f);
        if ((float)strtod(buf, NULL) == f)
            break;
    }
    return json_real(strtod(buf, NULL));
}

static json_t *json_token(int id)
{
    return id < 0 ? json_null() : json_integer(id);
}

static json_t *quant_args(const ct_scheme *s)
{
    static const char *const strategy[] = { [LMQ_GRAN_TENSOR] = "tensor", [LMQ_GRAN_CHANNEL] = "channel",
                                            [LMQ_GRAN_GROUP] = "group" };
    json_t *w = json_object();
    json_object_set_new(w, "num_bits", json_integer(lmq_encoding_of(s->q.dtype)->bits));
    json_object_set_new(w, "type", json_string(s->format == FMT_FLOAT ? "float" : "int"));
    json_object_set_new(w, "symmetric", json_boolean(!s->q.asym));
    json_object_set_new(w, "strategy", json_string(strategy[s->q.gran]));
    json_object_set_new(w, "group_size", s->q.gran == LMQ_GRAN_GROUP ? json_integer(s->q.group) : json_null());
    json_object_set_new(w, "dynamic", json_false());
    json_object_set_new(w, "actorder", s->act_order ? json_string("weight") : json_null());
    json_object_set_new(w, "observer", json_string("minmax"));
    return w;
}

/* lmq's activations: int8 or fp8 e4m3, symmetric, the max taken per token or per call, at run
 * time. */
static json_t *act_args(lmq_act a)
{
    json_t *in = json_object();
    json_object_set_new(in, "num_bits", json_integer(8));
    json_object_set_new(in, "type", json_string(a.scheme == LMQ_ACT_FP8_E4M3 ? "float" : "int"));
    json_object_set_new(in, "symmetric", json_true());
    json_object_set_new(in, "strategy", json_string(lmq_act_gran_names[a.gran]));
    json_object_set_new(in, "dynamic", json_true());
    json_object_set_new(in, "observer", json_null());
    return in;
}

static json_t *quantization_config(const ct_ctx *x)
{
    json_t *qc = json_object(), *groups = json_object(), *ignore = json_array();
    for (int g = 0; g < x->n_schemes; g++) {
        json_t *grp = json_object(), *targets = json_array();
        for (int i = 0; i < x->n_items && x->n_schemes > 1; i++)
            if (x->items[i].group == g)
                json_array_append_new(targets, json_string(x->items[i].hf));
        if (x->n_schemes == 1)
            json_array_append_new(targets, json_string("Linear"));
        json_object_set_new(grp, "targets", targets);
        json_object_set_new(grp, "weights", quant_args(&x->schemes[g]));
        json_object_set_new(grp, "input_activations",
                            x->schemes[g].act.scheme == LMQ_ACT_NONE ? json_null() : act_args(x->schemes[g].act));
        json_object_set_new(grp, "output_activations", json_null());
        json_object_set_new(grp, "format", json_string(FORMAT_NAMES[x->schemes[g].format]));
        char key[32];
        snprintf(key, sizeof key, "group_%d", g);
        json_object_set_new(groups, key, grp);
    }
    for (int i = 0; i < x->n_items; i++)
        if (x->items[i].group < 0 && is_linear(x->items[i].t)) {
            char module[HF_NAME_MAX];
            snprintf(module, sizeof module, "%.*s", (int)(strlen(x->items[i].hf) - strlen(".weight")),
                     x->items[i].hf);
            json_array_append_new(ignore, json_string(module));
        }
    if (x->m.arch.tied_embedding) /* lm_head is the float embedding */
        json_array_append_new(ignore, json_string("lm_head"));
    json_object_set_new(qc, "quant_method", json_string("compressed-tensors"));
    json_object_set_new(qc, "format", json_string(x->format));
    json_object_set_new(qc, "quantization_status", json_string("compressed"));
    json_object_set_new(qc, "config_groups", groups);
    json_object_set_new(qc, "ignore", ignore);
    json_object_set_new(qc, "kv_cache_scheme", json_null());
    /* Informational: the quantised modules' weights at 16 bits over the bits stored for them
     * (codes, scales, zero points). */
    double dense = 0, stored = 0;
    for (int i = 0; i < x->n_items; i++)
        if (x->items[i].group >= 0) {
            dense += 16.0 * (double)x->items[i].L.rows * (double)x->items[i].L.cols;
            stored += (double)x->items[i].L.bits;
        }
    json_object_set_new(qc, "global_compression_ratio", json_real(dense / stored));
    json_object_set_new(qc, "sparsity_config", json_object()); /* no sparsity */
    json_object_set_new(qc, "transform_config", json_object()); /* no transforms */
    json_object_set_new(qc, "version", json_string(CT_VERSION));
    return qc;
}

/* The value of config.json key k for a model of arch a. */
static json_t *config_value(const lmq_hf_key *k, const lmq_arch *a)
{
    switch (k->field) {
    case LMQ_HK_VOCAB_SIZE: return json_integer(a->vocab_size);
    case LMQ_HK_DIM: return json_integer(a->dim);
    case LMQ_HK_HIDDEN_DIM: return json_integer(a->hidden_dim);
    case LMQ_HK_N_LAYERS: return json_integer(a->n_layers);
    case LMQ_HK_N_HEADS: return json_integer(a->n_heads);
    case LMQ_HK_N_KV_HEADS: return json_integer(a->n_kv_heads);
    case LMQ_HK_MAX_SEQ:
    case LMQ_HK_MAX_SEQ_OLD: return json_integer(a->max_seq);
    case LMQ_HK_NORM_EPS: return json_float(a->norm_eps);
    case LMQ_HK_ROPE_THETA: return json_float(a->rope_theta);
    case LMQ_HK_ACTIVATION: return json_string(k->value);
    case LMQ_HK_ATTN_BIAS:
    case LMQ_HK_MLP_BIAS: return json_false();
    case LMQ_HK_TIED: return json_boolean(a->tied_embedding);
    case LMQ_HK_BOS: return json_token(a->bos_id);
    case LMQ_HK_EOS: return json_token(a->eos_id);
    }
    return json_null();
}

static json_t *config_json(const ct_ctx *x)
{
    const lmq_arch *a = &x->m.arch;
    const lmq_hf_family *f = lmq_hf_family_of(a->family);
    json_t *cfg = json_object();
    json_object_set_new(cfg, "architectures", json_pack("[s]", f->architecture));
    json_object_set_new(cfg, "model_type", json_string(f->model_type));
    for (size_t i = 0; i < f->n_keys; i++)
        json_object_set_new(cfg, f->keys[i].key, config_value(&f->keys[i], a));
    json_object_set_new(cfg, "torch_dtype", json_string(x->dtype == ST_F16    ? "float16"
                                                        : x->dtype == ST_BF16 ? "bfloat16"
                                                                              : "float32"));
    if (x->n_schemes)
        json_object_set_new(cfg, "quantization_config", quantization_config(x));
    return cfg;
}

static lmq_code write_bytes(const char *path, const void *p, size_t n, lmq_err *err)
{
    lmq_atomic a;
    lmq_code c = lmq_atomic_open(&a, path, err);
    if (!c && (c = lmq_atomic_write(&a, p, n, err)))
        lmq_atomic_abort(&a);
    return c ? c : lmq_atomic_commit(&a, err);
}

static lmq_code write_config(const ct_ctx *x, const char *path, lmq_err *err)
{
    json_t *cfg = config_json(x);
    char *text = json_dumps(cfg, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    json_decref(cfg);
    if (!text)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    lmq_code c = write_bytes(path, text, strlen(text), err);
    free(text);
    return c;
}

/* ---- the export ---------------------------------------------------------------------------- */

static lmq_code plan(ct_ctx *x, lmq_err *err)
{
    if (!lmq_hf_family_of(x->m.arch.family))
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "no Hugging Face architecture for this model family");
    x->items = calloc((size_t)x->m.n_tensors + 1, sizeof *x->items);
    if (!x->items)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    for (int i = 0; i < x->m.n_tensors; i++) {
        lmq_code c = plan_item(x, &x->m.tensors[i], &x->items[x->n_items], err);
        if (c)
            return c;
        x->n_items++;
    }
    /* torch_dtype: the float tensors' one dtype, else fp32, which holds each of them exactly;
     * scales in it where it holds them exactly (fp16 ones in fp32), else as lmq stores them. */
    for (int i = 0, first = 1; i < x->n_items; i++)
        if (x->items[i].group < 0) {
            const st_dtype d = float_dtype(x->items[i].t->q.dtype);
            x->dtype = first || d == x->dtype ? d : ST_F32;
            first = 0;
        }
    for (int i = 0; i < x->n_items; i++)
        x->items[i].dtype = x->items[i].group < 0 || x->dtype == ST_F32 ? x->dtype : scale_dtype(x->items[i].t);
    /* One format for the file, or mixed-precision with each config group's own. */
    for (int g = 0; g < x->n_schemes; g++)
        x->format = !g || x->format == FORMAT_NAMES[x->schemes[g].format] ? FORMAT_NAMES[x->schemes[g].format]
                                                                           : FMT_MIXED;
    return LMQ_OK;
}

static lmq_code join(char *out, size_t cap, const char *dir, const char *name, lmq_err *err)
{
    if ((size_t)snprintf(out, cap, "%s/%s", dir, name) >= cap)
        return lmq_fail(err, LMQ_E_ARG, "%s/%s: path too long", dir, name);
    return LMQ_OK;
}

/* Removes the directory at dir (in the directory fd at) and everything below it, following no
 * link; 0, or -1 with errno. */
static int remove_tree(int at, const char *dir)
{
    const int fd = openat(at, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        struct stat st;
        rc = fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW);
        if (!rc)
            rc = S_ISDIR(st.st_mode) ? remove_tree(fd, e->d_name) : unlinkat(fd, e->d_name, 0);
    }
    closedir(d);
    return rc ? rc : unlinkat(at, dir, AT_REMOVEDIR);
}

static int dir_is_empty(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return d && !n;
}

/* Where out_dir may be written: absent, an empty directory, or (force) a directory that does
 * not hold the artefact being read; never a link or another kind of file. */
static lmq_code check_target(const char *in_path, const char *out_dir, int force, int *exists, lmq_err *err)
{
    struct stat st;
    *exists = !lstat(out_dir, &st);
    if (!*exists)
        return errno == ENOENT ? LMQ_OK : lmq_fail(err, LMQ_E_IO, "%s: %s", out_dir, strerror(errno));
    if (S_ISLNK(st.st_mode))
        return lmq_fail(err, LMQ_E_ARG, "%s: is a symbolic link: give the directory itself", out_dir);
    if (!S_ISDIR(st.st_mode))
        return lmq_fail(err, LMQ_E_ARG, "%s: exists and is not a directory", out_dir);
    if (dir_is_empty(out_dir))
        return LMQ_OK;
    if (!force)
        return lmq_fail(err, LMQ_E_ARG, "%s: not empty (a previous export?): --force replaces the directory whole",
                        out_dir);
    char in_real[PATH_MAX], out_real[PATH_MAX];
    const size_t n = realpath(out_dir, out_real) ? strlen(out_real) : 0;
    if (n && realpath(in_path, in_real) && !strncmp(in_real, out_real, n) && in_real[n] == '/')
        return lmq_fail(err, LMQ_E_ARG, "%s: holds %s, the artefact being exported: --force would remove it", out_dir,
                        in_path);
    return LMQ_OK;
}

/* A llama2.c vocabulary (tokenizer.bin, which vLLM cannot read) beside its Hugging Face files. */
static lmq_code write_hf_tokenizer(const ct_ctx *x, const char *dir, lmq_err *err)
{
    if (x->m.arch.tokenizer != LMQ_TOK_LLAMA2C)
        return LMQ_OK;
    tok_tokenizer *t;
    tok_hf_text hf;
    lmq_code c = tok_open_model(&x->m, &t, err);
    if (c)
        return c;
    c = tok_hf_write(t, x->m.arch.max_seq, &hf, err);
    tok_free(t);
    const struct {
        const char *name, *text;
    } files[] = { { "tokenizer.json", hf.tokenizer_json },
                  { "tokenizer_config.json", hf.tokenizer_config_json },
                  { "special_tokens_map.json", hf.special_tokens_map_json } };
    char path[4096];
    for (size_t i = 0; !c && i < sizeof files / sizeof files[0]; i++)
        if (!(c = join(path, sizeof path, dir, files[i].name, err)))
            c = write_bytes(path, files[i].text, strlen(files[i].text), err);
    tok_hf_text_free(&hf);
    return c;
}

/* The export is written whole into a new directory beside out_dir, then put in its place: a
 * reader sees the old directory or the new one, never a mix of the two, and an old export's
 * other files do not stay beside the new one's. */
static lmq_code export_dir(ct_ctx *x, const char *in_path, const char *out_dir, int force, lmq_err *err)
{
    st_out *outs = NULL;
    char path[4096], tmp[4096], old[4096];
    int exists = 0, made = 0;
    lmq_code c = plan(x, err);
    if (!c)
        c = plan_entries(x, &outs, err);
    if (!c)
        c = check_target(in_path, out_dir, force, &exists, err);
    if (!c && ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", out_dir) >= sizeof tmp ||
               (size_t)snprintf(old, sizeof old, "%s.old.XXXXXX", out_dir) >= sizeof old))
        c = lmq_fail(err, LMQ_E_ARG, "%s: path too long", out_dir);
    if (!c && !(made = mkdtemp(tmp) != NULL))
        c = lmq_fail(err, LMQ_E_IO, "%s: cannot create a directory beside it: %s", out_dir, strerror(errno));
    if (!c && !(c = join(path, sizeof path, tmp, "model.safetensors", err)))
        c = write_weights(x, outs, path, err);
    if (!c && !(c = join(path, sizeof path, tmp, "config.json", err)))
        c = write_config(x, path, err);
    for (int i = 0; i < x->m.n_files && !c; i++)
        if (!(c = join(path, sizeof path, tmp, x->m.files[i].name, err)))
            c = write_bytes(path, x->m.files[i].data, x->m.files[i].size, err);
    if (!c)
        c = write_hf_tokenizer(x, tmp, err);
    /* An empty directory is replaced by rename itself; a full one moves aside first and goes after. */
    const int aside = !c && exists && !dir_is_empty(out_dir);
    if (aside && (!mkdtemp(old) || rename(out_dir, old)))
        c = lmq_fail(err, LMQ_E_IO, "%s: cannot move it aside: %s", out_dir, strerror(errno));
    if (!c && rename(tmp, out_dir)) {
        c = lmq_fail(err, LMQ_E_IO, "%s: cannot put the export in place: %s", out_dir, strerror(errno));
        if (aside)
            rename(old, out_dir);
    }
    if (!c)
        made = 0;
    if (!c && aside && remove_tree(AT_FDCWD, old))
        fprintf(stderr, "lmq export: note: %s (the replaced export) could not be removed: %s\n", old, strerror(errno));
    if (made)
        remove_tree(AT_FDCWD, tmp);
    free(outs);
    return c;
}

lmq_code ct_export(const char *in_path, const char *out_dir, int force, ct_summary *sum, lmq_err *err)
{
    ct_ctx x;
    memset(&x, 0, sizeof x);
    lmq_container in;
    lmq_code c = lmq_container_open_manifest(&in, &x.man, in_path, err);
    if (c)
        return c;
    lmq_container_close(&in);
    if ((c = rt_load_artefact(in_path, &x.m, err))) {
        lmq_manifest_free(&x.man);
        return c;
    }
    c = export_dir(&x, in_path, out_dir, force, err);
    if (!c && sum) {
        *sum = (ct_summary){ .groups = x.n_schemes, .format = x.format };
        for (int i = 0; i < x.n_items; i++)
            *(x.items[i].group >= 0 ? &sum->quantized : &sum->plain) += 1;
    }
    free(x.items);
    free(x.entries);
    lmq_model_free(&x.m);
    lmq_manifest_free(&x.man);
    return c ? lmq_err_prefix(err, "%s: ", in_path) : LMQ_OK;
}
