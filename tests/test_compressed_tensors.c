/* compressed-tensors export (export/compressed_tensors.h), checked against independent values:
 * the Hugging Face fixtures themselves (float exports must reproduce their tensors byte for
 * byte, rope order and Conv1D orientation included), and an unpacking of the int32 words written
 * here from the published layout (pack_to_int32: value i of a word in bits [b·i, b·(i+1)),
 * stored signed value + 2^(b-1); w = (q - z)·s), which must give lmq's dequantised weights bit
 * for bit. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fp.h"
#include "convert/convert.h"
#include "formats/artefact.h"
#include "formats/container.h"
#include "export/compressed_tensors.h"
#include "formats/safetensors.h"
#include "quantize/quantize.h"
#include "runtime/artefact.h"
#include "schemes/scheme.h"
#include "tests/testutil.h"

/* The Linear modules as HF names them, written out by hand (not the importer's table). */
static void hf_module(int gpt2, const char *canon, char *out, size_t cap)
{
    static const char *const llama[][2] = { { "attn_q", "self_attn.q_proj" }, { "attn_k", "self_attn.k_proj" },
                                            { "attn_v", "self_attn.v_proj" }, { "attn_out", "self_attn.o_proj" },
                                            { "ffn_gate", "mlp.gate_proj" },  { "ffn_up", "mlp.up_proj" },
                                            { "ffn_down", "mlp.down_proj" } };
    static const char *const gpt[][2] = { { "attn_qkv", "attn.c_attn" }, { "attn_out", "attn.c_proj" },
                                          { "ffn_up", "mlp.c_fc" },       { "ffn_down", "mlp.c_proj" } };
    int layer;
    char part[64];
    ck_assert_int_eq(sscanf(canon, "blk.%d.%63[a-z_].weight", &layer, part), 2);
    const char *const(*rows)[2] = gpt2 ? gpt : llama;
    const size_t n = gpt2 ? 4 : 7;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(rows[i][0], part)) {
            snprintf(out, cap, gpt2 ? "transformer.h.%d.%s" : "model.layers.%d.%s", layer, rows[i][1]);
            return;
        }
    ck_abort_msg("no module for %s", canon);
}

static const st_tensor *need(const st_file *f, const char *name, st_dtype dtype, int ndim, int64_t d0, int64_t d1)
{
    const st_tensor *t = st_find(f, name);
    ck_assert_msg(t != NULL, "%s missing", name);
    ck_assert_msg(t->dtype == dtype, "%s: dtype %s", name, st_dtype_name(t->dtype));
    ck_assert_int_eq(t->ndim, ndim);
    ck_assert_int_eq(t->shape[0], d0);
    if (ndim == 2)
        ck_assert_int_eq(t->shape[1], d1);
    return t;
}

static int32_t word_at(const st_file *f, const st_tensor *t, int64_t i)
{
    const uint8_t *p = f->data + t->begin + 4 * i;
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* Signed value k of a packed word: bits [b·k, b·(k+1)), minus the 2^(b-1) offset. */
static int unpack(int32_t word, int k, int bits)
{
    return (int)(((uint32_t)word >> (bits * k)) & ((1u << bits) - 1)) - (1 << (bits - 1));
}

static const char *join(const char *dir, const char *name)
{
    static char buf[2][1024];
    static int k;
    k ^= 1;
    ck_assert_int_lt(snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name), (int)sizeof buf[k]);
    return buf[k];
}

static json_t *load_json(const char *path)
{
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    ck_assert_msg(j != NULL, "%s: %s", path, je.text);
    return j;
}

#define FMT_OF_MIXED "mixed-precision"

/* An e4m3 byte's value from the format's definition (bias 7, 3 mantissa bits, subnormals). */
static float e4m3(uint8_t b)
{
    const int e = (b >> 3) & 15, m = b & 7;
    const float v = e ? ldexpf(1.0f + m / 8.0f, e - 7) : ldexpf(m / 8.0f, -6);
    return b & 0x80 ? -v : v;
}

/* Every quantised Linear weight of the artefact at lmq_path, as written in dir, dequantised from
 * the file's own words, scales and zero points, equals lmq's dequantisation bit for bit; every
 * Linear weight lmq kept float is in the ignore list. Returns how many modules were checked. */
static int check_weights(const char *lmq_path, const char *dir, int gpt2)
{
    lmq_model m;
    lmq_err err;
    ck_assert_msg(rt_load_artefact(lmq_path, &m, &err) == LMQ_OK, "%s", err.msg);
    st_file f;
    ck_assert_msg(st_open(join(dir, "model.safetensors"), &f, &err) == LMQ_OK, "%s", err.msg);
    json_t *cfg = load_json(join(dir, "config.json"));
    json_t *qc = json_object_get(cfg, "quantization_config");
    const char *format = json_string_value(json_object_get(qc, "format"));
    /* Scales in torch_dtype where it holds them exactly: fp32 holds every scale; else lmq's own. */
    const int f32 = !strcmp(json_string_value(json_object_get(cfg, "torch_dtype")), "float32");
    int checked = 0;
    for (int i = 0; i < m.n_tensors; i++) {
        const lmq_tensor *t = &m.tensors[i];
        if (t->ndim != 2 || strncmp(t->name, "blk.", 4))
            continue;
        char mod[256], name[300];
        hf_module(gpt2, t->name, mod, sizeof mod);
        const int64_t rows = t->shape[0], cols = t->shape[1];
        if (t->q.gran == LMQ_GRAN_NONE) { /* kept float: ignored by the quantisation config */
            int listed = 0;
            json_t *v;
            size_t k;
            json_array_foreach(json_object_get(qc, "ignore"), k, v) listed |= !strcmp(json_string_value(v), mod);
            ck_assert_msg(!qc || listed, "%s is float but not ignored", mod);
            continue;
        }
        const int bits = (int)lmq_encoding_of(t->q.dtype)->bits, pf = 32 / bits;
        const int fp8 = t->q.dtype == LMQ_T_F8_E4M3;
        const st_dtype sd = f32 || fp8 ? ST_F32 : ST_F16;
        const int64_t groups = t->q.gran == LMQ_GRAN_GROUP ? (cols + t->q.group - 1) / t->q.group : 1;
        float *ref = malloc((size_t)(rows * cols) * sizeof *ref), *s = malloc((size_t)(rows * groups) * sizeof *s);
        ck_assert_int_eq(q_dequantize(&t->q, t->raw, t->raw_size, rows, cols, ref, NULL, &err), LMQ_OK);
        /* pack-quantized: packed int32 words; int-quantized and naive-quantized: one int8 a weight.
         * A one-format file says which; mixed-precision files, each module's entries. */
        snprintf(name, sizeof name, "%s.weight_packed", mod);
        const int w8a8 = !strcmp(format, FMT_OF_MIXED) ? !st_find(&f, name) : strcmp(format, "pack-quantized") != 0;
        const st_tensor *w = NULL, *zp = NULL;
        if (fp8) {
            snprintf(name, sizeof name, "%s.weight", mod);
            w = need(&f, name, ST_F8_E4M3, 2, rows, cols);
        } else if (w8a8) {
            snprintf(name, sizeof name, "%s.weight", mod);
            w = need(&f, name, ST_I8, 2, rows, cols);
        } else {
            snprintf(name, sizeof name, "%s.weight_packed", mod);
            w = need(&f, name, ST_I32, 2, rows, (cols + pf - 1) / pf);
            snprintf(name, sizeof name, "%s.weight_shape", mod);
            const st_tensor *shape = need(&f, name, ST_I64, 1, 2, 0);
            int64_t dims[2];
            memcpy(dims, f.data + shape->begin, sizeof dims);
            ck_assert(dims[0] == rows && dims[1] == cols);
        }
        snprintf(name, sizeof name, "%s.weight_scale", mod);
        const st_tensor *sc = t->q.gran == LMQ_GRAN_TENSOR ? need(&f, name, sd, 1, 1, 0)
                                                           : need(&f, name, sd, 2, rows, groups);
        ck_assert_int_eq(st_read_f32(&f, sc, s, &err), LMQ_OK);
        snprintf(name, sizeof name, "%s.weight_zero_point", mod);
        if (t->q.asym && w8a8)
            zp = need(&f, name, ST_I8, 2, rows, groups);
        else if (t->q.asym)
            zp = need(&f, name, ST_I32, 2, (rows + pf - 1) / pf, groups);
        else
            ck_assert_ptr_null(st_find(&f, name));
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {
                const int64_t g = c / (t->q.gran == LMQ_GRAN_GROUP ? t->q.group : cols);
                const float q = fp8  ? e4m3(f.data[w->begin + r * cols + c])
                              : w8a8 ? (int8_t)f.data[w->begin + r * cols + c]
                                   : unpack(word_at(&f, w, r * ((cols + pf - 1) / pf) + c / pf), (int)(c % pf), bits);
                const int z = !zp ? 0
                              : w8a8 ? (int8_t)f.data[zp->begin + r * groups + g]
                                     : unpack(word_at(&f, zp, (r / pf) * groups + g), (int)(r % pf), bits);
                const float scale = t->q.gran == LMQ_GRAN_TENSOR ? s[0] : s[r * groups + g];
                const float got = (float)(q - z) * scale;
                ck_assert_msg(lmq_f32_bits(got) == lmq_f32_bits(ref[r * cols + c]), "%s [%lld, %lld]: %g, lmq %g",
                              mod, (long long)r, (long long)c, got, ref[r * cols + c]);
            }
        /* Padding past the last column is zero bits. */
        for (int64_t r = 0; r < rows && !w8a8 && !fp8 && cols % pf; r++)
            ck_assert_int_eq((uint32_t)word_at(&f, w, r * ((cols + pf - 1) / pf) + cols / pf) >> (bits * (cols % pf)),
                             0);
        free(ref);
        free(s);
        checked++;
    }
    json_decref(cfg);
    st_close(&f);
    lmq_model_free(&m);
    return checked;
}

/* Every tensor of the reference checkpoint is in the export with the same dtype, shape and
 * bytes (the export may hold no other), its name under prefix (the sotu-gpt2 fixture's names
 * lack the "transformer." that GPT2LMHeadModel's save_pretrained writes; both load). */
static void same_tensors_prefixed(const char *ref_path, const char *got_path, const char *prefix)
{
    st_file r, g;
    lmq_err err;
    ck_assert_msg(st_open(ref_path, &r, &err) == LMQ_OK, "%s", err.msg);
    ck_assert_msg(st_open(got_path, &g, &err) == LMQ_OK, "%s", err.msg);
    ck_assert_int_eq(g.n_tensors, r.n_tensors);
    for (int i = 0; i < r.n_tensors; i++) {
        char name[512];
        snprintf(name, sizeof name, "%s%s", prefix, r.tensors[i].name);
        const st_tensor *a = &r.tensors[i], *b = st_find(&g, name);
        ck_assert_msg(b != NULL, "%s missing", a->name);
        ck_assert_int_eq(b->dtype, a->dtype);
        ck_assert_int_eq(b->ndim, a->ndim);
        for (int k = 0; k < a->ndim; k++)
            ck_assert_int_eq(b->shape[k], a->shape[k]);
        ck_assert_msg(!memcmp(r.data + a->begin, g.data + b->begin, a->end - a->begin), "%s differs", a->name);
    }
    st_close(&r);
    st_close(&g);
}

static void same_tensors(const char *ref_path, const char *got_path)
{
    same_tensors_prefixed(ref_path, got_path, "");
}

static void export_ok(const char *lmq_path, const char *dir, ct_summary *sum)
{
    lmq_err err;
    ck_assert_msg(ct_export(lmq_path, dir, 1, sum, &err) == LMQ_OK, "%s", err.msg);
}

static void quantise(const char *in, const char *recipe, const char *out)
{
    lmq_err err;
    ck_assert_msg(q_quantize_file(in, recipe, out, NULL, &err) == LMQ_OK, "%s: %s", recipe, err.msg);
}

/* stories260K.bin holds q/k in llama2.c's interleaved rope order; the HF fixture is the same
 * model permuted by HF's own conversion. The fp32 export of the .bin must be that checkpoint. */
START_TEST(llama_fp32_is_the_hf_checkpoint)
{
    const char *dir = test_tmpdir();
    char lmq[1024], out[1024];
    snprintf(lmq, sizeof lmq, "%s/s.lmq", dir);
    snprintf(out, sizeof out, "%s/ct", dir);
    test_fp32_artefact(STORIES, lmq);
    ct_summary sum;
    export_ok(lmq, out, &sum);
    ck_assert_int_eq(sum.quantized, 0);
    ck_assert_ptr_null(sum.format);
    same_tensors(fixture("stories260K-hf/model.safetensors"), join(out, "model.safetensors"));
    /* Every hyper-parameter of the fixture's config.json, with the same value. */
    json_t *ref = load_json(fixture("stories260K-hf/config.json")), *got = load_json(join(out, "config.json"));
    const char *key;
    json_t *v;
    int compared = 0;
    json_object_foreach(ref, key, v)
    {
        json_t *w = json_object_get(got, key);
        if (json_is_number(v)) {
            ck_assert_msg(json_is_number(w), "config.json: %s", key);
            ck_assert_msg((float)json_number_value(w) == (float)json_number_value(v), "config.json: %s", key);
            compared++;
        } else if (json_is_string(v) && strcmp(key, "torch_dtype") && strcmp(key, "transformers_version")) {
            ck_assert_msg(json_equal(v, w), "config.json: %s", key);
        }
    }
    ck_assert_int_ge(compared, 8);
    ck_assert(json_equal(json_object_get(ref, "architectures"), json_object_get(got, "architectures")));
    ck_assert_ptr_null(json_object_get(got, "quantization_config"));
    ck_assert_int_eq(access(join(out, "tokenizer.bin"), R_OK), 0);
    json_decref(ref);
    json_decref(got);
    test_rmtree(dir);
}
END_TEST

/* GPT-2's Conv1D weights go back to HF's [in, out]: the export is the fixture checkpoint. */
START_TEST(gpt2_fp32_is_the_hf_checkpoint)
{
    const char *dir = test_tmpdir();
    char lmq[1024], out[1024];
    snprintf(lmq, sizeof lmq, "%s/g.lmq", dir);
    snprintf(out, sizeof out, "%s/ct", dir);
    test_fp32_artefact(SOTU, lmq);
    export_ok(lmq, out, NULL);
    same_tensors_prefixed(fixture("sotu-gpt2/model.safetensors"), join(out, "model.safetensors"), "transformer.");
    json_t *got = load_json(join(out, "config.json"));
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(got, "architectures"), 0)), "GPT2LMHeadModel");
    ck_assert_int_eq(json_integer_value(json_object_get(got, "n_embd")), 128);
    ck_assert_int_eq(json_integer_value(json_object_get(got, "n_positions")), 256);
    json_decref(got);
    ck_assert_int_eq(access(join(out, "vocab.json"), R_OK), 0);
    ck_assert_int_eq(access(join(out, "merges.txt"), R_OK), 0);
    test_rmtree(dir);
}
END_TEST

/* The quantization_config of a one-scheme export, field by field as the format names them. */
static void check_group0(const char *dir, const char *format, int bits, int symmetric, const char *strategy,
                         int group_size, const char *act_strategy)
{
    json_t *cfg = load_json(join(dir, "config.json"));
    json_t *qc = json_object_get(cfg, "quantization_config");
    ck_assert_str_eq(json_string_value(json_object_get(qc, "quant_method")), "compressed-tensors");
    ck_assert_str_eq(json_string_value(json_object_get(qc, "format")), format);
    /* The keys compressed-tensors writes beside the quantisation's own. */
    ck_assert(json_is_string(json_object_get(qc, "version")));
    ck_assert(json_is_object(json_object_get(qc, "sparsity_config")) &&
              !json_object_size(json_object_get(qc, "sparsity_config")));
    ck_assert(json_is_object(json_object_get(qc, "transform_config")) &&
              !json_object_size(json_object_get(qc, "transform_config")));
    const double ratio = json_real_value(json_object_get(qc, "global_compression_ratio"));
    ck_assert_msg(ratio > 16.0 / (bits + 1.5) && ratio < 16.0 / bits, "ratio %g for %d bits", ratio, bits);
    json_t *groups = json_object_get(qc, "config_groups");
    ck_assert_int_eq(json_object_size(groups), 1);
    json_t *g = json_object_get(groups, "group_0");
    json_t *targets = json_object_get(g, "targets");
    ck_assert_int_eq(json_array_size(targets), 1);
    ck_assert_str_eq(json_string_value(json_array_get(targets, 0)), "Linear");
    ck_assert_str_eq(json_string_value(json_object_get(g, "format")), format);
    json_t *w = json_object_get(g, "weights");
    ck_assert(json_is_null(json_object_get(w, "actorder")));
    ck_assert_int_eq(json_integer_value(json_object_get(w, "num_bits")), bits);
    const char *type = strcmp(format, "float-quantized") ? "int" : "float";
    ck_assert_str_eq(json_string_value(json_object_get(w, "type")), type);
    ck_assert(json_is_boolean(json_object_get(w, "symmetric")) && json_is_true(json_object_get(w, "symmetric")) == symmetric);
    ck_assert_str_eq(json_string_value(json_object_get(w, "strategy")), strategy);
    if (group_size)
        ck_assert_int_eq(json_integer_value(json_object_get(w, "group_size")), group_size);
    else
        ck_assert(json_is_null(json_object_get(w, "group_size")));
    ck_assert(json_is_false(json_object_get(w, "dynamic")));
    json_t *in = json_object_get(g, "input_activations");
    if (!act_strategy) {
        ck_assert(json_is_null(in));
    } else {
        ck_assert_int_eq(json_integer_value(json_object_get(in, "num_bits")), 8);
        ck_assert_str_eq(json_string_value(json_object_get(in, "strategy")), act_strategy);
        ck_assert_str_eq(json_string_value(json_object_get(in, "type")), type);
        ck_assert(json_is_true(json_object_get(in, "dynamic")) && json_is_true(json_object_get(in, "symmetric")));
    }
    /* The classifier is the float embedding (tied): never quantised. */
    json_t *ignore = json_object_get(qc, "ignore");
    ck_assert_str_eq(json_string_value(json_array_get(ignore, json_array_size(ignore) - 1)), "lm_head");
    ck_assert_str_eq(json_string_value(json_object_get(cfg, "torch_dtype")), "float32"); /* fp32 norms, embedding */
    json_decref(cfg);
}

static const struct {
    const char *recipe, *format;
    int bits, symmetric;
    const char *strategy;
    int group_size;
    const char *act;
} RECIPES[] = {
    { "recipes/int8-channel.yaml", "pack-quantized", 8, 1, "channel", 0, NULL },
    { "recipes/int4-channel.yaml", "pack-quantized", 4, 1, "channel", 0, NULL },
    { "recipes/int8-tensor.yaml", "pack-quantized", 8, 1, "tensor", 0, NULL },
    { "recipes/w8a8.yaml", "int-quantized", 8, 1, "channel", 0, "token" },
    { "int3-channel", "naive-quantized", 3, 1, "channel", 0, NULL },      /* written below */
    { "int2-channel-asym", "naive-quantized", 2, 0, "channel", 0, NULL }, /* written below */
    { "FP8", "float-quantized", 8, 1, "channel", 0, NULL },                 /* presets: written below */
    { "FP8_DYNAMIC", "float-quantized", 8, 1, "channel", 0, "token" },
};

/* The recipe file of RECIPES[i]: shipped, or (no '/') one rule written into dir: the preset it
 * names (capitals), else a channel rule of the scheme its name begins with. */
static const char *recipe_file(size_t i, const char *dir)
{
    static char path[1024];
    const char *r = RECIPES[i].recipe;
    if (strchr(r, '/'))
        return r;
    snprintf(path, sizeof path, "%s/%s.yaml", dir, r);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    if (*r >= 'A' && *r <= 'Z')
        fprintf(f, "name: preset\nrules:\n  - match: \"blk.*\"\n    scheme: %s\n", r);
    else
        fprintf(f, "name: %s\nrules:\n  - match: \"blk.*\"\n    scheme: %.4s\n    granularity: channel\n"
                "    symmetric: %s\n", r, r, RECIPES[i].symmetric ? "true" : "false");
    fclose(f);
    return path;
}

/* Each recipe on stories260K-hf (ffn_down has 172 inputs: padded words) and on the .bin
 * (interleaved rope): both exports must be the same bytes, q/k included. Groups need a row that
 * divides (below, and on GPT-2). */
START_TEST(quantised_weights_unpack_to_lmqs)
{
    const char *dir = test_tmpdir();
    char fp[2][1024], q[2][1024], out[2][1024];
    const char *src[2] = { "stories260K-hf", STORIES };
    for (int k = 0; k < 2; k++) {
        snprintf(fp[k], sizeof fp[k], "%s/fp%d.lmq", dir, k);
        snprintf(q[k], sizeof q[k], "%s/q%d.lmq", dir, k);
        snprintf(out[k], sizeof out[k], "%s/ct%d", dir, k);
        test_fp32_artefact(src[k], fp[k]);
    }
    for (size_t i = 0; i < sizeof RECIPES / sizeof RECIPES[0]; i++) {
        for (int k = 0; k < 2; k++) {
            quantise(fp[k], recipe_file(i, dir), q[k]);
            ct_summary sum;
            export_ok(q[k], out[k], &sum);
            ck_assert_int_eq(sum.quantized, 35); /* 5 layers × 7 */
            ck_assert_str_eq(sum.format, RECIPES[i].format);
        }
        ck_assert_int_eq(check_weights(q[0], out[0], 0), 35);
        check_group0(out[0], RECIPES[i].format, RECIPES[i].bits, RECIPES[i].symmetric, RECIPES[i].strategy,
                     RECIPES[i].group_size, RECIPES[i].act);
        same_tensors(join(out[0], "model.safetensors"), join(out[1], "model.safetensors"));
    }
    test_rmtree(dir);
}
END_TEST

/* GPT-2 quantised: packed weights in [out, in] (as the Linear layers vLLM builds), floats in HF's
 * Conv1D orientation. */
START_TEST(gpt2_quantised)
{
    const char *dir = test_tmpdir();
    char fp[1024], q[1024], out[1024];
    snprintf(fp, sizeof fp, "%s/g.lmq", dir);
    snprintf(q, sizeof q, "%s/g4.lmq", dir);
    snprintf(out, sizeof out, "%s/ct", dir);
    test_fp32_artefact(SOTU, fp);
    static const struct {
        const char *recipe, *format;
        int bits, symmetric;
    } groups[] = {
        { "recipes/int4-g32.yaml", "pack-quantized", 4, 1 },
        { "recipes/int4-g32-asym.yaml", "pack-quantized", 4, 0 },
        { "recipes/int3-g32.yaml", "naive-quantized", 3, 1 },
    };
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        quantise(fp, groups[i].recipe, q);
        export_ok(q, out, NULL);
        ck_assert_int_eq(check_weights(q, out, 1), 16);
        check_group0(out, groups[i].format, groups[i].bits, groups[i].symmetric, "group", 32, NULL);
    }
    quantise(fp, "recipes/int4-g32.yaml", q);
    export_ok(q, out, NULL);
    st_file f;
    lmq_err err;
    ck_assert_int_eq(st_open(join(out, "model.safetensors"), &f, &err), LMQ_OK);
    need(&f, "transformer.h.0.attn.c_attn.weight_packed", ST_I32, 2, 384, 16);
    need(&f, "transformer.h.0.attn.c_attn.bias", ST_F32, 1, 384, 0);
    ck_assert_ptr_null(st_find(&f, "transformer.h.0.attn.c_attn.weight"));
    st_close(&f);
    test_rmtree(dir);
}
END_TEST

/* W8A8 attention beside weight-only int4 MLPs: mixed-precision, each config group with its own
 * format, the modules of each named as its targets. */
START_TEST(mixed_precision)
{
    const char *dir = test_tmpdir();
    char fp[1024], q[1024], out[1024], recipe[1024];
    snprintf(fp, sizeof fp, "%s/s.lmq", dir);
    snprintf(q, sizeof q, "%s/m.lmq", dir);
    snprintf(out, sizeof out, "%s/ct", dir);
    snprintf(recipe, sizeof recipe, "%s/mixed.yaml", dir);
    FILE *f = fopen(recipe, "w");
    ck_assert_ptr_nonnull(f);
    fputs("name: mixed\nrules:\n  - match: \"blk.*.attn_*\"\n    scheme: W8A8\n  - match: \"blk.*.ffn_*\"\n"
          "    scheme: int4\n    granularity: channel\n", f);
    fclose(f);
    test_fp32_artefact("stories260K-hf", fp);
    quantise(fp, recipe, q);
    ct_summary sum;
    export_ok(q, out, &sum);
    ck_assert_str_eq(sum.format, "mixed-precision");
    ck_assert_int_eq(sum.groups, 2);
    ck_assert_int_eq(check_weights(q, out, 0), 35);
    json_t *cfg = load_json(join(out, "config.json"));
    json_t *qc = json_object_get(cfg, "quantization_config");
    ck_assert_str_eq(json_string_value(json_object_get(qc, "format")), "mixed-precision");
    json_t *g0 = json_object_get(json_object_get(qc, "config_groups"), "group_0");
    json_t *g1 = json_object_get(json_object_get(qc, "config_groups"), "group_1");
    if (json_is_null(json_object_get(g0, "input_activations"))) { /* groups in order of first use */
        json_t *w8a8 = g1;
        g1 = g0;
        g0 = w8a8;
    }
    ck_assert_str_eq(json_string_value(json_object_get(g0, "format")), "int-quantized");
    ck_assert_str_eq(json_string_value(json_object_get(g1, "format")), "pack-quantized");
    ck_assert_int_eq(json_array_size(json_object_get(g0, "targets")), 20);
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(g0, "targets"), 0)),
                     "model.layers.0.self_attn.k_proj"); /* in the artefact's tensor order */
    ck_assert_int_eq(json_array_size(json_object_get(g1, "targets")), 15);
    ck_assert(json_is_null(json_object_get(g1, "input_activations")));
    json_decref(cfg);
    test_rmtree(dir);
}
END_TEST

/* What the format cannot hold is refused, naming the tensor, and nothing is written. */
START_TEST(refusals)
{
    const char *dir = test_tmpdir();
    char fp[1024], q[1024], out[1024];
    snprintf(fp, sizeof fp, "%s/s.lmq", dir);
    snprintf(q, sizeof q, "%s/e.lmq", dir);
    snprintf(out, sizeof out, "%s/ct", dir);
    test_fp32_artefact("stories260K-hf", fp);
    quantise(fp, "recipes/emb-int4-g32.yaml", q);
    lmq_err err;
    ck_assert_int_eq(ct_export(q, out, 0, NULL, &err), LMQ_E_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.msg, "tok_embd.weight"));
    ck_assert_ptr_nonnull(strstr(err.msg, "Linear modules only"));
    ck_assert_int_ne(access(join(out, "model.safetensors"), F_OK), 0);
    /* Groups of 32 over ffn_down's 172 columns: a short last group, which the format has not. */
    quantise(fp, "recipes/int4-g32.yaml", q);
    ck_assert_int_eq(ct_export(q, out, 0, NULL, &err), LMQ_E_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "tensor blk.0.ffn_down.weight is int4 g32: its 172 columns are not a whole "
                         "number of groups of 32"), "%s", err.msg);
    ck_assert_int_ne(access(join(out, "model.safetensors"), F_OK), 0);
    /* GPT-2 with q, k, v apart: HF's GPT-2 has one c_attn. */
    lmq_model m;
    ck_assert_int_eq(lmq_convert(fixture(SOTU), &(lmq_convert_opts){ .split_qkv = 1 }, &m, &err), LMQ_OK);
    ck_assert_int_eq(lmq_container_write_model(fp, &m, NULL, &err), LMQ_OK);
    lmq_model_free(&m);
    ck_assert_int_eq(ct_export(fp, out, 0, NULL, &err), LMQ_E_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.msg, "attn_q.weight"));
    test_rmtree(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("compressed_tensors");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, llama_fp32_is_the_hf_checkpoint);
    tcase_add_test(tc, gpt2_fp32_is_the_hf_checkpoint);
    tcase_add_test(tc, quantised_weights_unpack_to_lmqs);
    tcase_add_test(tc, gpt2_quantised);
    tcase_add_test(tc, mixed_precision);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
