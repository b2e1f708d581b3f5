/* Writes the fuzzers' seed corpora: small, valid inputs of every parser, built from synthetic
 * models and the shipped recipes (no fixture bytes are copied). Deterministic: rerunning it
 * rewrites the same files. Usage: make_seeds OUTDIR (tests/fuzz/corpus). */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/artefact.h"
#include "formats/container.h"
#include "formats/gguf.h"
#include "formats/llama2c.h"
#include "formats/manifest.h"
#include "formats/safetensors.h"
#include "quantize/quantize.h"
#include "verify/ref_logits.h"
#include "verify/shard.h"

static const char *outdir;

static void die(const char *what, const lmq_err *err)
{
    fprintf(stderr, "make_seeds: %s: %s\n", what, err ? err->msg : "failed");
    exit(1);
}

/* <outdir>/<target>/<name>, the folder made on the way. */
static const char *seed_path(const char *target, const char *name)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", outdir, target);
    mkdir(outdir, 0755);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s/%s", outdir, target, name);
    return path;
}

static void put(const char *target, const char *name, const void *data, size_t size)
{
    const char *path = seed_path(target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        die(path, NULL);
}

static void put_text(const char *target, const char *name, const char *text)
{
    put(target, name, text, strlen(text));
}

/* Small deterministic weights in [-0.25, 0.25]. */
static float weight(uint32_t i)
{
    return (float)((int)((i * 2654435761u) >> 21) % 2001 - 1000) / 4000.0f;
}

/* ---- llama2.c checkpoints (also the source of the container seeds) ---- */

static void put_i32(uint8_t *p, int32_t v)
{
    memcpy(p, &v, 4);
}

/* dim, hidden, layers, heads, kv heads, vocab (negative: separate classifier), seq. */
static void llama2c_seed(const char *name, const int32_t h[7])
{
    const int64_t d = h[0], hd = h[1], L = h[2], V = abs(h[5]), head = d / h[3], kv = head * h[4];
    const int64_t n = V * d + L * (2 * d + 2 * d * d + 2 * kv * d + 3 * hd * d) + d + h[6] * head +
                      (h[5] < 0 ? V * d : 0);
    size_t size = 28 + (size_t)n * 4;
    uint8_t *buf = malloc(size);
    for (int i = 0; i < 7; i++)
        put_i32(buf + 4 * i, h[i]);
    for (int64_t i = 0; i < n; i++) {
        float w = weight((uint32_t)i);
        memcpy(buf + 28 + 4 * i, &w, 4);
    }
    put("llama2c", name, buf, size);
    free(buf);
}

/* ---- safetensors ---- */

static void safetensors_seeds(void)
{
    lmq_err err = { 0 };
    float w[24];
    for (int i = 0; i < 24; i++)
        w[i] = weight((uint32_t)i) * (i % 5 == 0 ? 1e4f : 1.0f);
    const int64_t s23[] = { 2, 3 }, s4[] = { 4 }, s0[] = { 0, 3 }, s234[] = { 2, 3, 4 };
    const st_out ts[] = {
        { "model.embed_tokens.weight", ST_F32, 2, s23, w },
        { "model.layers.0.input_layernorm.weight", ST_F16, 1, s4, w + 6 },
        { "model.layers.0.self_attn.q_proj.weight", ST_BF16, 3, s234, w },
        { "empty", ST_F32, 2, s0, w },
        { "scalar", ST_F16, 0, NULL, w + 1 },
    };
    if (st_write(seed_path("safetensors", "mixed.safetensors"), ts, 5, &err))
        die("safetensors", &err);
    if (st_write(seed_path("safetensors", "one.safetensors"), ts, 1, &err))
        die("safetensors", &err);
    /* Dtypes lmq recognises but does not read, and metadata beyond "format". */
    static const char hdr[] = "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"x\"},"
                              "\"ids\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]},"
                              "\"mask\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[16,19]},"
                              "\"f8\":{\"dtype\":\"F8_E4M3\",\"shape\":[1,2],\"data_offsets\":[19,21]},"
                              "\"f4\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[21,22]}}";
    uint8_t buf[8 + sizeof hdr + 22] = { 0 };
    buf[0] = (uint8_t)(sizeof hdr - 1);
    memcpy(buf + 8, hdr, sizeof hdr - 1);
    put("safetensors", "other-dtypes.safetensors", buf, 8 + sizeof hdr - 1 + 22);
}

/* ---- Hugging Face checkpoints: config.json, NUL, model.safetensors ---- */

typedef struct {
    const char *name;
    int64_t d0, d1; /* d1 = 0: 1-D */
} hf_tensor;

static void hf_seed(const char *name, const char *config, const hf_tensor *ts, int n)
{
    static float w[4096];
    for (int i = 0; i < 4096; i++)
        w[i] = weight((uint32_t)i);
    st_out out[32];
    int64_t shapes[32][2];
    for (int i = 0; i < n; i++) {
        shapes[i][0] = ts[i].d0;
        shapes[i][1] = ts[i].d1;
        out[i] = (st_out){ ts[i].name, i % 3 == 2 ? ST_BF16 : ST_F32, ts[i].d1 ? 2 : 1, shapes[i], w };
    }
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s/hf.safetensors", outdir);
    lmq_err err = { 0 };
    if (st_write(tmp, out, n, &err))
        die(name, &err);
    lmq_blob b;
    if (lmq_blob_open(tmp, &b, &err))
        die(tmp, &err);
    size_t nc = strlen(config);
    uint8_t *buf = malloc(nc + 1 + b.size);
    memcpy(buf, config, nc + 1);
    memcpy(buf + nc + 1, b.data, b.size);
    put("hf_convert", name, buf, nc + 1 + b.size);
    free(buf);
    lmq_blob_close(&b);
    remove(tmp);
}

static void hf_seeds(void)
{
    /* Llama: dim 8, two heads sharing one kv head, hidden 12, vocab 16; untied. */
    static const hf_tensor llama[] = {
        { "model.embed_tokens.weight", 16, 8 },
        { "model.layers.0.input_layernorm.weight", 8, 0 },
        { "model.layers.0.self_attn.q_proj.weight", 8, 8 },
        { "model.layers.0.self_attn.k_proj.weight", 4, 8 },
        { "model.layers.0.self_attn.v_proj.weight", 4, 8 },
        { "model.layers.0.self_attn.o_proj.weight", 8, 8 },
        { "model.layers.0.self_attn.rotary_emb.inv_freq", 2, 0 },
        { "model.layers.0.post_attention_layernorm.weight", 8, 0 },
        { "model.layers.0.mlp.gate_proj.weight", 12, 8 },
        { "model.layers.0.mlp.up_proj.weight", 12, 8 },
        { "model.layers.0.mlp.down_proj.weight", 8, 12 },
        { "model.norm.weight", 8, 0 },
        { "lm_head.weight", 16, 8 },
    };
    hf_seed("llama.bin",
            "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 8, "
            "\"intermediate_size\": 12, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
            "\"num_key_value_heads\": 1, \"vocab_size\": 16, \"max_position_embeddings\": 32, "
            "\"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, \"tie_word_embeddings\": false, "
            "\"hidden_act\": \"silu\", \"bos_token_id\": 1, \"eos_token_id\": [2], \"head_dim\": 4}",
            llama, (int)(sizeof llama / sizeof llama[0]));
    /* GPT-2: dim 8, hidden 16, vocab 16, context 4; Conv1D weights stored [in, out]. */
    static const hf_tensor gpt2[] = {
        { "wte.weight", 16, 8 },          { "wpe.weight", 4, 8 },
        { "h.0.ln_1.weight", 8, 0 },      { "h.0.ln_1.bias", 8, 0 },
        { "h.0.attn.c_attn.weight", 8, 24 }, { "h.0.attn.c_attn.bias", 24, 0 },
        { "h.0.attn.c_proj.weight", 8, 8 }, { "h.0.attn.c_proj.bias", 8, 0 },
        { "h.0.attn.bias", 4, 4 },        { "h.0.ln_2.weight", 8, 0 },
        { "h.0.ln_2.bias", 8, 0 },        { "h.0.mlp.c_fc.weight", 8, 16 },
        { "h.0.mlp.c_fc.bias", 16, 0 },   { "h.0.mlp.c_proj.weight", 16, 8 },
        { "h.0.mlp.c_proj.bias", 8, 0 },  { "ln_f.weight", 8, 0 },
        { "ln_f.bias", 8, 0 },
    };
    hf_seed("gpt2.bin",
            "{\"architectures\": [\"GPT2LMHeadModel\"], \"model_type\": \"gpt2\", \"n_embd\": 8, "
            "\"n_layer\": 1, \"n_head\": 2, \"vocab_size\": 16, \"n_ctx\": 4, \"n_inner\": 16, "
            "\"layer_norm_epsilon\": 1e-05, \"activation_function\": \"gelu_new\", \"bos_token_id\": 0, "
            "\"eos_token_id\": 0}",
            gpt2, (int)(sizeof gpt2 / sizeof gpt2[0]));
}

/* ---- containers and manifests ---- */

/* An llm-compressor recipe (quantize/llmc.c): every modifier, a preset, two config groups. */
static const char LLMC_RECIPE[] =
    "quant_stage:\n"
    "  quant_modifiers:\n"
    "    SmoothQuantModifier: {smoothing_strength: 0.7}\n"
    "    QuantizationModifier: {targets: \"re:.*self_attn\\\\.(q|k)_proj$\", scheme: W8A8}\n"
    "    AWQModifier: {targets: [model.layers.0.mlp.up_proj], scheme: W4A16_ASYM}\n"
    "    GPTQModifier:\n"
    "      ignore: [lm_head]\n"
    "      dampening_frac: 0.05\n"
    "      config_groups:\n"
    "        group_0:\n"
    "          targets: [\"re:.*mlp.*\"]\n"
    "          weights: {num_bits: 4, type: int, symmetric: false, strategy: group, group_size: 32, actorder: weight}\n"
    "        group_1:\n"
    "          targets: [Linear]\n"
    "          weights: {num_bits: 8, type: int, strategy: channel}\n"
    "          input_activations: {num_bits: 8, type: int, strategy: token, dynamic: true}\n";

static const char MIXED_RECIPE[] =
    "name: fuzz-mixed\n"
    "description: one tensor kind per scheme, so one artefact holds every encoding\n"
    "rules:\n"
    "  - match: blk.*.attn_q.weight\n"
    "    scheme: fp8_e4m3\n"
    "  - match: blk.*.attn_k.weight\n"
    "    scheme: int2\n"
    "    granularity: tensor\n"
    "  - match: blk.*.attn_v.weight\n"
    "    scheme: int3\n"
    "    granularity: group\n"
    "    group: 16\n"
    "    symmetric: false\n"
    "  - match: blk.*.attn_out.weight\n"
    "    scheme: fp8_e5m2\n"
    "    granularity: channel\n"
    "  - match: blk.*.ffn_gate.weight\n"
    "    scheme: int8\n"
    "    granularity: channel\n"
    "    symmetric: false\n"
    "  - match: [blk.*.ffn_up.weight, tok_embd.weight]\n"
    "    scheme: int4\n"
    "    granularity: group\n"
    "    group: 32\n"
    "  - match: blk.*.ffn_down.weight\n"
    "    scheme: bf16\n"
    "  - match: \"*norm.weight\"\n"
    "    scheme: fp16\n";

/* The manifest of the artefact at path, as a manifest seed. */
static void manifest_of(const char *path, const char *name)
{
    lmq_container c;
    lmq_err err = { 0 };
    if (lmq_container_open(&c, path, &err))
        die(path, &err);
    put("manifest", name, c.manifest, c.manifest_size);
    lmq_container_close(&c);
}

static void container_seeds(const char *tmp)
{
    lmq_err err = { 0 };
    lmq_model m;
    if (l2c_load(seed_path("llama2c", "d16-untied.bin"), &m, &err))
        die("llama2c seed", &err);
    static const char notes[] = "carried file\n";
    uint8_t *a = malloc(sizeof notes - 1), *b = malloc(1);
    memcpy(a, notes, sizeof notes - 1);
    if (lmq_model_add_file(&m, "notes.txt", a, sizeof notes - 1, &err) ||
        lmq_model_add_file(&m, "empty.txt", b, 0, &err))
        die("carried files", &err);
    char fp32[1024];
    snprintf(fp32, sizeof fp32, "%s", seed_path("container", "fp32.lmq"));
    if (lmq_container_write_model(fp32, &m, NULL, &err) ||
        lmq_container_write_model_codec(seed_path("container", "fp32-zstd.lmq"), &m, NULL, LMQ_CODEC_ZSTD, &err))
        die("fp32 artefact", &err);
    lmq_model_free(&m);
    manifest_of(fp32, "fp32.yaml");

    char recipe[1024];
    snprintf(recipe, sizeof recipe, "%s/mixed.yaml", tmp);
    FILE *f = fopen(recipe, "w");
    if (!f || fputs(MIXED_RECIPE, f) < 0 || fclose(f))
        die(recipe, NULL);
    put_text("recipe", "fuzz-mixed.yaml", MIXED_RECIPE);
    put_text("recipe", "llmc-groups.yaml", LLMC_RECIPE);
    const struct { const char *recipe, *name; } q[] = {
        { recipe, "mixed" },
        { "recipes/int4-g32-asym.yaml", "int4-g32-asym" },
        { "recipes/int8-channel.yaml", "int8-channel" },
    };
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        char name[64], out[1024];
        snprintf(name, sizeof name, "%s.lmq", q[i].name);
        snprintf(out, sizeof out, "%s", seed_path("container", name));
        if (q_quantize_file(fp32, q[i].recipe, out, NULL, &err))
            die(q[i].name, &err);
        snprintf(name, sizeof name, "%s.yaml", q[i].name);
        manifest_of(out, name);
    }
    remove(recipe);
}

/* ---- GGUF ---- */

/* One file with a key of every type and a tensor of every type the importer keeps (the values
 * need not make a model), and the tiny llama2.c seed exported through lmq's own writer. */
static void gguf_seeds(void)
{
    lmq_err err = { 0 };
    gf_writer *w;
    if (gf_writer_new(&w, &err))
        die("gguf writer", &err);
    static const char *const toks[] = { "<unk>", "<s>", "</s>", "\xe2\x96\x81" "a" };
    static const uint64_t lens[] = { 5, 3, 4, 4 };
    static const float scores[] = { 0, 0, 0, -1 };
    static const int32_t types[] = { 2, 3, 3, 1 };
    gf_w_str(w, "general.architecture", "llama");
    gf_w_u32(w, "llama.context_length", 8);
    gf_w_u32(w, "llama.embedding_length", 32);
    gf_w_u32(w, "llama.block_count", 1);
    gf_w_u32(w, "llama.feed_forward_length", 32);
    gf_w_u32(w, "llama.attention.head_count", 1);
    gf_w_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gf_w_str(w, "tokenizer.ggml.model", "llama");
    gf_w_arr_str(w, "tokenizer.ggml.tokens", 4, toks, lens);
    gf_w_arr_f32(w, "tokenizer.ggml.scores", 4, scores);
    gf_w_arr_i32(w, "tokenizer.ggml.token_type", 4, types);
    static uint8_t bytes[4 * 256];
    for (size_t i = 0; i < sizeof bytes; i++)
        bytes[i] = (uint8_t)(i * 37 % 251 & 0x3b); /* fp16 scales finite: no exponent of all ones */
    static const struct { const char *name; uint32_t type, n_dims; uint64_t ne[2]; size_t size; } ts[] = {
        { "token_embd.weight", GGML_F16, 2, { 32, 4 }, 256 },
        { "output_norm.weight", GGML_F32, 1, { 32, 1 }, 128 },
        { "blk.0.attn_norm.weight", GGML_F32, 1, { 32, 1 }, 128 },
        { "blk.0.ffn_norm.weight", GGML_F32, 1, { 32, 1 }, 128 },
        { "blk.0.attn_q.weight", GGML_Q8_0, 2, { 32, 32 }, 34 * 32 },
        { "blk.0.attn_k.weight", GGML_Q4_0, 2, { 32, 32 }, 18 * 32 },
        { "blk.0.attn_v.weight", GGML_Q4_1, 2, { 32, 32 }, 20 * 32 },
        { "blk.0.attn_output.weight", GGML_Q5_0, 2, { 32, 32 }, 22 * 32 },
        { "blk.0.ffn_gate.weight", GGML_Q5_1, 2, { 32, 32 }, 24 * 32 },
        { "blk.0.ffn_up.weight", GGML_BF16, 2, { 32, 32 }, 2 * 1024 },
        { "blk.0.ffn_down.weight", GGML_Q8_0, 2, { 32, 32 }, 34 * 32 },
        { "k.weight", GGML_Q4_K, 1, { 256, 1 }, 144 },
        { "k5.weight", GGML_Q5_K, 1, { 256, 1 }, 176 },
        { "k6.weight", GGML_Q6_K, 1, { 256, 1 }, 210 },
    };
    static uint8_t big[2048];
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        for (size_t k = 0; k < ts[i].size; k++)
            big[k] = bytes[k % sizeof bytes];
        gf_w_tensor(w, ts[i].name, ts[i].type, ts[i].n_dims, ts[i].ne, big, ts[i].size);
    }
    if (gf_writer_write(w, seed_path("gguf", "mixed.gguf"), NULL, NULL, &err))
        die("gguf seed", &err);
    gf_writer_free(w);
}

/* ---- recipes and policies ---- */

/* Every *.yaml of a shipped folder as a seed of target. */
static void yaml_seeds(const char *dir, const char *target)
{
    DIR *d = opendir(dir);
    if (!d)
        die(dir, NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".yaml"))
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        lmq_blob b;
        lmq_err err = { 0 };
        if (lmq_blob_open(path, &b, &err))
            die(path, &err);
        put(target, e->d_name, b.data, b.size);
        lmq_blob_close(&b);
    }
    closedir(d);
}

static void recipe_seeds(void)
{
    yaml_seeds("recipes", "recipe");
    put_text("recipe", "ignore.yaml",
             "name: with-ignore\nrules:\n  - match: [\"blk.?.ffn_*\", \"*attn_?.weight\"]\n    scheme: int4\n"
             "    granularity: channel\n    symmetric: True\nignore: output.weight\n");
}

/* The shipped policies, and one with the keys they leave out (its reference relative to tests/fuzz/). */
static void policy_seeds(void)
{
    yaml_seeds("manifests/policies", "policy");
    put_text("policy", "every-key.yaml",
             "schemes:\n  - tensors: \"blk.?.attn_*\"\n    allow: [int4, \"int8 per-channel\"]\n  - tensors: \"*\"\n"
             "    allow: fp32\nmax_bpw: 8\nmax_linear_bpw: 4.5\nmax_rel_error: 0.05\n"
             "require: [recipe, calibration, calibration_stats, tokenizer]\nsource_checksum: \"1122334455667788\"\n"
             "tensors_like: ../../manifests/expected/fp32.yaml\nmin_tool_version: \"0.1.0\"\n");
}

/* ---- tokenizers ---- */

/* A llama2.c tokenizer.bin: <unk>, <s>, </s>, the 256 byte tokens, then extra pieces. */
static void tokenizer_bin(const char *name, const char *const *extra, int n_extra)
{
    uint8_t *buf = malloc(64 * 1024);
    size_t n = 4;
    put_i32(buf, 8);
    char piece[16];
    for (int i = 0; i < 259 + n_extra; i++) {
        const char *s = piece;
        if (i < 3)
            s = (const char *[]){ "<unk>", "<s>", "</s>" }[i];
        else if (i < 259)
            snprintf(piece, sizeof piece, "<0x%02X>", i - 3);
        else
            s = extra[i - 259];
        float score = i < 259 ? 0.0f : -(float)(i - 259);
        memcpy(buf + n, &score, 4);
        put_i32(buf + n + 4, (int32_t)strlen(s));
        memcpy(buf + n + 8, s, strlen(s));
        n += 8 + strlen(s);
    }
    put("tok_llama2c", name, buf, n);
    free(buf);
}

/* GPT-2's byte alphabet and a few merges, as a Hugging Face tokenizer.json (with one added
 * token) and as vocab.json + NUL + merges.txt (with <|endoftext|> in the vocabulary). */
static void bytelevel_seeds(void)
{
    json_t *vocab = json_object();
    uint32_t next = 256;
    int id = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        uint32_t cp = printable ? (uint32_t)b : next++;
        char u[3] = { 0 };
        if (cp < 0x80) {
            u[0] = (char)cp;
        } else {
            u[0] = (char)(0xC0 | cp >> 6);
            u[1] = (char)(0x80 | (cp & 0x3F));
        }
        json_object_set_new(vocab, u, json_integer(id++));
    }
    static const char *const merged[] = { "\xc4\xa0" "t", "he", "\xc4\xa0" "the", "in", "\xc4\xa0" "a" };
    static const char *const merges[] = { "\xc4\xa0 t", "h e", "\xc4\xa0" "t he", "i n", "\xc4\xa0 a" };
    for (int i = 0; i < 5; i++)
        json_object_set_new(vocab, merged[i], json_integer(id++));
    json_t *ml = json_array();
    char text[256] = "#version: 0.2\n";
    for (int i = 0; i < 5; i++) {
        json_array_append_new(ml, i == 3 ? json_pack("[ss]", "i", "n") : json_string(merges[i]));
        snprintf(text + strlen(text), sizeof text - strlen(text), "%s\n", merges[i]);
    }
    json_t *root = json_pack("{s:s, s:[{s:i, s:s, s:b}], s:n, s:{s:s, s:b, s:b}, s:{s:s, s:O, s:o}}", "version",
                             "1.0", "added_tokens", "id", id, "content", "<|endoftext|>", "special", 1,
                             "normalizer", "pre_tokenizer", "type", "ByteLevel", "add_prefix_space", 0,
                             "use_regex", 1, "model", "type", "BPE", "vocab", vocab, "merges", ml);
    char *s = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    put_text("tok_hf_json", "bytelevel.json", s);
    free(s);
    json_decref(root);

    json_object_set_new(vocab, "<|endoftext|>", json_integer(id));
    s = json_dumps(vocab, JSON_COMPACT | JSON_PRESERVE_ORDER);
    size_t nv = strlen(s), nm = strlen(text);
    char *both = malloc(nv + 1 + nm);
    memcpy(both, s, nv + 1); /* with its NUL: the separator */
    memcpy(both + nv + 1, text, nm);
    put("tok_gpt2_files", "bytelevel.txt", both, nv + 1 + nm);
    free(both);
    free(s);
    json_decref(vocab);
}

/* The Llama-2 family's tokenizer.json (normalizer, byte fallback, BOS template) and Llama-3's
 * (Split pattern + ByteLevel, ignore_merges), over small vocabularies. */
static void hf_json_variant_seeds(void)
{
    json_t *sp_vocab = json_object();
    static const char *const sp_pieces[] = { "<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "\xe2\x96\x81" "a" };
    for (int i = 0; i < 7; i++)
        json_object_set_new(sp_vocab, sp_pieces[i], json_integer(i));
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        json_object_set_new(sp_vocab, name, json_integer(7 + b));
    }
    json_t *root = json_pack(
        "{s:[{s:i, s:s, s:b}], s:{s:s, s:[{s:s, s:s}, {s:s, s:{s:s}, s:s}]}, s:n, "
        "s:{s:s, s:[{s:{s:s}}, {s:{s:s}}], s:{s:{s:s, s:[i], s:[s]}}}, "
        "s:{s:s, s:s, s:b, s:b, s:o, s:[s]}}",
        "added_tokens", "id", 2, "content", "</s>", "special", 1,
        "normalizer", "type", "Sequence", "normalizers", "type", "Prepend", "prepend", "\xe2\x96\x81", "type",
        "Replace", "pattern", "String", " ", "content", "\xe2\x96\x81", "pre_tokenizer",
        "post_processor", "type", "TemplateProcessing", "single", "SpecialToken", "id", "<s>", "Sequence", "id", "A",
        "special_tokens", "<s>", "id", "<s>", "ids", 1, "tokens", "<s>",
        "model", "type", "BPE", "unk_token", "<unk>", "fuse_unk", 1, "byte_fallback", 1, "vocab", sp_vocab, "merges",
        "\xe2\x96\x81 a");
    char *s = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    put_text("tok_hf_json", "llama2.json", s);
    free(s);
    json_decref(root);

    json_t *vocab = json_object();
    char u[3] = { 0 };
    for (int b = 0, next = 256; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        int cp = printable ? b : next++;
        u[0] = (char)(cp < 0x80 ? cp : 0xC0 | cp >> 6);
        u[1] = (char)(cp < 0x80 ? 0 : 0x80 | (cp & 0x3F));
        json_object_set_new(vocab, u, json_integer(b));
    }
    json_object_set_new(vocab, "he", json_integer(256));
    root = json_pack(
        "{s:[{s:i, s:s}], s:{s:s}, s:{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s, s:b}]}, "
        "s:{s:s, s:b, s:o, s:[s]}}",
        "added_tokens", "id", 257, "content", "<|end_of_text|>", "normalizer", "type", "NFC",
        "pre_tokenizer", "type", "Sequence", "pretokenizers", "type", "Split", "pattern", "Regex",
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
        "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "behavior", "Isolated", "type", "ByteLevel", "use_regex", 0,
        "model", "type", "BPE", "ignore_merges", 1, "vocab", vocab, "merges", "h e");
    s = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    put_text("tok_hf_json", "llama3.json", s);
    free(s);
    json_decref(root);
}

/* A SentencePiece tokenizer.model (protobuf ModelProto) of a BPE model: pieces <unk>, <s>, </s>,
 * the 256 byte pieces, "▁", "a", "▁a"; trainer_spec BPE with byte fallback; identity normalizer. */
static size_t pb_field(uint8_t *o, unsigned field, unsigned wire, const void *p, size_t n, uint64_t v)
{
    size_t k = 0;
    for (uint64_t key = (uint64_t)field << 3 | wire, x = key; k == 0 || x; x >>= 7)
        o[k++] = (uint8_t)(x & 0x7F) | (x > 0x7F ? 0x80 : 0);
    if (wire == 2)
        for (uint64_t x = n, first = 1; first || x; x >>= 7, first = 0)
            o[k++] = (uint8_t)(x & 0x7F) | (x > 0x7F ? 0x80 : 0);
    if (wire == 2 || wire == 5) {
        memcpy(o + k, p, n);
        return k + n;
    }
    for (uint64_t x = v, first = 1; first || x; x >>= 7, first = 0)
        o[k++] = (uint8_t)(x & 0x7F) | (x > 0x7F ? 0x80 : 0);
    return k;
}

static void spm_model_seed(void)
{
    static uint8_t model[8192];
    size_t n = 0;
    for (int i = 0; i < 262; i++) {
        char text[8];
        static const int type_of_special[] = { 2, 3, 3 };
        int type = i < 3 ? type_of_special[i] : i < 259 ? 6 : 1;
        if (i < 3)
            snprintf(text, sizeof text, "%s", (const char *[]){ "<unk>", "<s>", "</s>" }[i]);
        else if (i < 259)
            snprintf(text, sizeof text, "<0x%02X>", i - 3);
        else
            snprintf(text, sizeof text, "%s", (const char *[]){ "\xe2\x96\x81", "a", "\xe2\x96\x81" "a" }[i - 259]);
        float score = i < 259 ? 0.0f : -(float)(i - 259);
        uint8_t piece[32];
        size_t k = pb_field(piece, 1, 2, text, strlen(text), 0);
        k += pb_field(piece + k, 2, 5, &score, 4, 0); /* little-endian hosts only, like the rest */
        k += pb_field(piece + k, 3, 0, NULL, 0, (uint64_t)type);
        n += pb_field(model + n, 1, 2, piece, k, 0);
    }
    uint8_t spec[32], norm[32];
    size_t ks = pb_field(spec, 3, 0, NULL, 0, 2); /* model_type BPE */
    ks += pb_field(spec + ks, 35, 0, NULL, 0, 1); /* byte_fallback */
    size_t kn = pb_field(norm, 1, 2, "identity", 8, 0);
    kn += pb_field(norm + kn, 4, 0, NULL, 0, 0); /* remove_extra_whitespaces false */
    n += pb_field(model + n, 2, 2, spec, ks, 0);
    n += pb_field(model + n, 3, 2, norm, kn, 0);
    put("tok_spm_model", "bpe.model", model, n);
}

/* Texts for the encoders and the P1 stream: words, contractions, numbers, whitespace runs,
 * multi-byte UTF-8, separators (with \r\n) and special tokens inside text. */
static const char *const TEXTS[] = {
    "Once upon a time, there was a little girl named Lily. She loved to play outside.",
    "We've got 3,000 reasons; they'll say it's 12.5% (isn't it?) -- I'd rather not.\n",
    "  leading and trailing spaces  \t\n\n  multiple   spaces\u00a0nbsp\n",
    "caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80 \xce\xb1\xce\xb2\xce\xb3 "
    "\xd8\xb9\xd8\xb1\xd8\xa8\xd9\x8a",
    "first document\n<|endoftext|>\nsecond document\r\n<|endoftext|>\r\n\n<|endoftext|>\nthird",
    "inline <|endoftext|> is a token for GPT-2<|endoftext|>but not a separator",
    "<0x41> <s> </s> <unk>",
};

static void text_seeds(void)
{
    for (size_t i = 0; i < sizeof TEXTS / sizeof TEXTS[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "text%zu.txt", i);
        put_text("tok_encode", name, TEXTS[i]);
        put_text("stream", name, TEXTS[i]);
    }
}

/* Saved reference logits: three windows of a tiny vocabulary, one of them all zeros. */
static void ref_logits_seeds(void)
{
    vf_logits_head h = { .ctx = 5, .vocab = 7, .windows = 3, .tokens = 16, .tokens_checksum = 1, .text_checksum = 2 };
    snprintf(h.ref.path, sizeof h.ref.path, "ref.lmq");
    snprintf(h.ref.scheme, sizeof h.ref.scheme, "fp32");
    float win[4 * 7];
    vf_logits_file *f;
    lmq_err err;
    if (vf_logits_create(seed_path("ref_logits", "three.logits"), &h, &f, &err))
        die("ref_logits", &err);
    for (int w = 0; w < 3; w++) {
        for (int i = 0; i < 4 * 7; i++)
            win[i] = w == 1 ? 0.0f : weight((uint32_t)(w * 28 + i));
        if (vf_logits_save(f, w, win, 4 * 7, &err))
            die("ref_logits", &err);
    }
    if (vf_logits_finish(f, NULL, &err))
        die("ref_logits", &err);
}

/* A verify shard as fuzz_shard reads it: the header text, a NUL, then each carried array (u8 name
 * length, name, u32 size, bytes), taken from a shard vf_shard_write wrote (shard 0 of 1: 3 windows
 * of ctx 5, two rows). */
static void shard_seed(void)
{
    vf_row rows[2] = { { .path = "ref.lmq", .scheme = "fp32", .kv_cache = "fp32" },
                       { .path = "q.lmq", .scheme = "int4 g32", .kv_cache = "fp32", .file_checksum = 7 } };
    vf_report r = { .text = "eval.txt", .ctx = 5, .threads = 1, .isa = "scalar", .device = "cpu", .tokens = 16,
                    .documents = 1, .text_checksum = 2, .tokens_checksum = 3, .rows = rows, .n_rows = 2 };
    double nll[2][12], kl[2][12];
    uint8_t agree[2][12];
    vf_positions p[2];
    for (int m = 0; m < 2; m++) {
        for (int i = 0; i < 12; i++) {
            nll[m][i] = 1.0 + weight((uint32_t)(m * 12 + i));
            kl[m][i] = m ? fabs((double)weight((uint32_t)(100 + i))) : 0.0;
            agree[m][i] = (uint8_t)(!m || i % 3);
        }
        p[m] = (vf_positions){ .nll = nll[m], .kl = kl[m], .agree = agree[m] };
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/lmq-seed-shard-%ld", (long)getpid());
    lmq_err err;
    lmq_container c;
    if (vf_shard_write(path, &r, 0, 1, p, &err) || lmq_container_open(&c, path, &err))
        die("shard", &err);
    char *seed;
    size_t seed_size;
    FILE *f = open_memstream(&seed, &seed_size);
    if (!f)
        die("shard", NULL);
    fwrite(c.manifest, 1, c.manifest_size, f);
    fputc(0, f);
    for (int i = 0; i < c.n_tensors; i++) {
        const lmq_tensor_entry *t = &c.tensors[i];
        const char *name = lmq_entry_file_name(t);
        const uint8_t head[5] = { (uint8_t)strlen(name) }, size[4] = { (uint8_t)t->raw_size,
                                                                       (uint8_t)(t->raw_size >> 8),
                                                                       (uint8_t)(t->raw_size >> 16),
                                                                       (uint8_t)(t->raw_size >> 24) };
        void *raw;
        if (lmq_container_read_alloc(&c, t, &raw, &err))
            die("shard", &err);
        fwrite(head, 1, 1, f);
        fwrite(name, 1, strlen(name), f);
        fwrite(size, 1, 4, f);
        fwrite(raw, 1, t->raw_size, f);
        free(raw);
    }
    lmq_container_close(&c);
    unlink(path);
    if (fclose(f))
        die("shard", NULL);
    put("shard", "two-rows.shard", seed, seed_size);
    free(seed);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds OUTDIR (run from the repository root)\n");
        return 2;
    }
    outdir = argv[1];
    /* Tied and tiny; untied with two heads sharing one kv head and ffn_down rows of 40 (one
     * full and one short group of 32). */
    llama2c_seed("tiny-tied.bin", (const int32_t[7]){ 2, 1, 1, 1, 1, 3, 1 });
    llama2c_seed("d16-untied.bin", (const int32_t[7]){ 16, 40, 1, 2, 1, -8, 4 });
    safetensors_seeds();
    hf_seeds();
    container_seeds(outdir);
    gguf_seeds();
    recipe_seeds();
    policy_seeds();
    static const char *const extra[] = { " ", "a", "e", "h", "t", "o", "n", " t", "th", "he", " the",
                                         "on", "ce", "Once", "\xc3\xa9", "\xe6\x97\xa5", "  " };
    tokenizer_bin("tok-small.bin", extra, (int)(sizeof extra / sizeof extra[0]));
    tokenizer_bin("tok-bytes-only.bin", NULL, 0);
    bytelevel_seeds();
    hf_json_variant_seeds();
    spm_model_seed();
    text_seeds();
    ref_logits_seeds();
    shard_seed();
    return 0;
}
