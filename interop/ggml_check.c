/* lmq against ggml's own GGUF code (interop/ggml-check.sh builds and runs it; not part of make
 * check): (1) a tiny llama written by ggml's gguf writer with ggml's quantisers in every block
 * type lmq imports, converted by lmq, each tensor dequantised by lmq and by ggml's to_float,
 * compared bit for bit; (2) GGUF files lmq exported (arguments: GGUF, LMQ pairs), read by
 * ggml's gguf reader, each tensor compared the same way with the lmq artefact's values.
 * Usage: ggml_check SCRATCH_DIR [A.gguf A.lmq ...]; exit status 1 when anything differs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ggml.h"
#include "gguf.h"
#include "convert/gguf.h"
#include "formats/gguf_model.h"
#include "runtime/artefact.h"
#include "schemes/scheme.h"

static int compare(const char *what, const lmq_model *m, struct ggml_context *gctx, struct gguf_context *g)
{
    int bad = 0;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) {
        const char *name = gguf_get_tensor_name(g, i);
        struct ggml_tensor *t = ggml_get_tensor(gctx, name);
        int64_t n = ggml_nelements(t);
        float *gv = malloc(n * sizeof *gv), *lv = malloc(n * sizeof *lv);
        if (t->type == GGML_TYPE_F32)
            memcpy(gv, t->data, n * 4);
        else
            ggml_get_type_traits(t->type)->to_float(t->data, gv, n);
        char lname[128];
        lmq_gguf_name(name, 0, lname);
        const lmq_tensor *lt = lmq_model_find(m, lname);
        if (!lt) {
            printf("%s: %s: not in the lmq model\n", what, name);
            bad++;
            free(gv);
            free(lv);
            continue;
        }
        int64_t rows = lt->ndim > 1 ? lt->shape[0] : 1;
        lmq_err e;
        if (q_dequantize(&lt->q, lt->raw, lt->raw_size, rows, n / rows, lv, NULL, &e)) {
            printf("%s\n", e.msg);
            bad++;
            free(gv);
            free(lv);
            continue;
        }
        int64_t diff = 0;
        for (int64_t k = 0; k < n; k++)
            diff += memcmp(&gv[k], &lv[k], 4) != 0;
        char desc[64];
        q_describe(&lt->q, desc, sizeof desc);
        printf("%s: %-28s ggml %-5s lmq %-9s %8lld values, %lld differ\n", what, name, ggml_type_name(t->type), desc,
               (long long)n, (long long)diff);
        bad += diff != 0;
        free(gv);
        free(lv);
    }
    return bad;
}

static int check_file(const char *what, const char *gguf_path, const char *lmq_path)
{
    struct ggml_context *gctx = NULL;
    struct gguf_init_params p = {.no_alloc = false, .ctx = &gctx};
    struct gguf_context *g = gguf_init_from_file(gguf_path, p);
    if (!g) {
        printf("%s: ggml's reader refused %s\n", what, gguf_path);
        return 1;
    }
    printf("%s: ggml read %s: version %u, %lld keys, %lld tensors, arch %s\n", what, gguf_path, gguf_get_version(g),
           (long long)gguf_get_n_kv(g), (long long)gguf_get_n_tensors(g),
           gguf_get_val_str(g, gguf_find_key(g, "general.architecture")));
    lmq_model m;
    lmq_err e;
    if (rt_load_artefact(lmq_path, &m, &e)) {
        printf("%s\n", e.msg);
        return 1;
    }
    int bad = compare(what, &m, gctx, g);
    lmq_model_free(&m);
    gguf_free(g);
    ggml_free(gctx);
    return bad;
}

enum { DIM = 256, VOCAB = 260 };

static int written_by_ggml(const char *dir)
{
    struct ggml_init_params ip = {.mem_size = 64 << 20, .mem_buffer = NULL, .no_alloc = false};
    struct ggml_context *ctx = ggml_init(ip);
    struct gguf_context *g = gguf_init_empty();
    gguf_set_val_str(g, "general.architecture", "llama");
    gguf_set_val_u32(g, "llama.context_length", 64);
    gguf_set_val_u32(g, "llama.embedding_length", DIM);
    gguf_set_val_u32(g, "llama.block_count", 1);
    gguf_set_val_u32(g, "llama.feed_forward_length", DIM);
    gguf_set_val_u32(g, "llama.attention.head_count", 2);
    gguf_set_val_u32(g, "llama.attention.head_count_kv", 2);
    gguf_set_val_f32(g, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gguf_set_val_str(g, "tokenizer.ggml.model", "llama");
    static char toks[VOCAB][16];
    const char *tp[VOCAB];
    float scores[VOCAB];
    int32_t types[VOCAB];
    for (int i = 0; i < VOCAB; i++) {
        if (i < 3)
            snprintf(toks[i], 16, "%s", i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>");
        else if (i < 259)
            snprintf(toks[i], 16, "<0x%02X>", i - 3);
        else
            snprintf(toks[i], 16, "\xe2\x96\x81");
        tp[i] = toks[i];
        scores[i] = i == 259 ? -1.0f : 0.0f;
        types[i] = i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1;
    }
    gguf_set_arr_str(g, "tokenizer.ggml.tokens", tp, VOCAB);
    gguf_set_arr_data(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, VOCAB);
    gguf_set_arr_data(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, VOCAB);
    gguf_set_val_u32(g, "tokenizer.ggml.bos_token_id", 1);
    gguf_set_val_u32(g, "tokenizer.ggml.eos_token_id", 2);
    static const struct {
        const char *name;
        enum ggml_type type;
        int rows, cols;
    } ts[] = {
        {"token_embd.weight", GGML_TYPE_Q8_0, VOCAB, DIM}, {"blk.0.attn_norm.weight", GGML_TYPE_F32, 1, DIM},
        {"blk.0.attn_q.weight", GGML_TYPE_Q4_K, DIM, DIM}, {"blk.0.attn_k.weight", GGML_TYPE_Q5_K, DIM, DIM},
        {"blk.0.attn_v.weight", GGML_TYPE_Q6_K, DIM, DIM}, {"blk.0.attn_output.weight", GGML_TYPE_Q4_0, DIM, DIM},
        {"blk.0.ffn_norm.weight", GGML_TYPE_F32, 1, DIM},  {"blk.0.ffn_gate.weight", GGML_TYPE_Q4_1, DIM, DIM},
        {"blk.0.ffn_up.weight", GGML_TYPE_Q5_0, DIM, DIM}, {"blk.0.ffn_down.weight", GGML_TYPE_Q5_1, DIM, DIM},
        {"output_norm.weight", GGML_TYPE_F32, 1, DIM},     {"output.weight", GGML_TYPE_Q6_K, VOCAB, DIM},
    };
    uint64_t s = 12345;
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        int64_t n = (int64_t)ts[i].rows * ts[i].cols;
        float *w = malloc(n * sizeof *w);
        for (int64_t k = 0; k < n; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            double u1 = ((s >> 11) + 0.5) * 0x1p-53;
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            double u2 = ((s >> 11) + 0.5) * 0x1p-53;
            double z = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
            w[k] = ts[i].type == GGML_TYPE_F32 ? (float)(1 + 0.1 * z) : (float)(0.05 * z);
        }
        struct ggml_tensor *t = ts[i].rows > 1 ? ggml_new_tensor_2d(ctx, ts[i].type, ts[i].cols, ts[i].rows)
                                               : ggml_new_tensor_1d(ctx, ts[i].type, ts[i].cols);
        ggml_set_name(t, ts[i].name);
        if (ts[i].type == GGML_TYPE_F32)
            memcpy(t->data, w, n * 4);
        else
            ggml_quantize_chunk(ts[i].type, w, t->data, 0, ts[i].rows, ts[i].cols, NULL);
        gguf_add_tensor(g, t);
        free(w);
    }
    char path[512], out[512];
    snprintf(path, sizeof path, "%s/by-ggml.gguf", dir);
    snprintf(out, sizeof out, "%s/by-ggml.lmq", dir);
    if (!gguf_write_to_file(g, path, false)) {
        printf("ggml could not write\n");
        return 1;
    }
    gguf_free(g);
    ggml_free(ctx);
    lmq_err e;
    if (lmq_gguf_convert(path, out, 0, NULL, &e)) {
        printf("lmq convert: %s\n", e.msg);
        return 1;
    }
    return check_file("by-ggml", path, out);
}

int main(int argc, char **argv)
{
    int bad = written_by_ggml(argv[1]);
    for (int i = 2; i + 1 < argc; i += 2)
        bad += check_file(argv[i], argv[i], argv[i + 1]);
    printf("%s: %d problems\n", bad ? "FAIL" : "OK", bad);
    return bad != 0;
}
