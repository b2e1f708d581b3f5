/* GGUF: the block decoders against blocks packed here by hand from ggml's published layouts
 * (values known exactly: small power-of-two scales times small integers); a GGUF file written
 * by this test's own minimal writer (not formats/gguf.c's) of a tiny llama in every block type,
 * imported (Q4_0 with negative scales as q4_0, else int4 g32), decoded to the values it was
 * packed from, run by the kernels, audited and scored by verify; exports of the
 * fixture models at int4 / int8 g32, fp16 and fp32 imported back bit for bit with the same
 * logits; hostile files refused with the file and the key or tensor named. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cpu.h"
#include "common/file.h"
#include "common/fp.h"
#include "convert/gguf.h"
#include "export/gguf.h"
#include "formats/container.h"
#include "formats/gguf.h"
#include "quantize/quantize.h"
#include "runtime/artefact.h"
#include "runtime/forward.h"
#include "runtime/linear.h"
#include "tokenizer/tokenizer.h"
#include "schemes/gguf_blocks.h"
#include "schemes/scheme.h"
#include "tests/testutil.h"
#include "verify/run.h"

static void le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* An fp16 value known exactly: k · 2^-e. */
static uint16_t half_of(float v)
{
    uint16_t h = lmq_f32_to_f16(v);
    ck_assert(lmq_f16_to_f32(h) == v);
    return h;
}

/* ---- hand-packed blocks -------------------------------------------------------------------- */

/* Each packer fills one block from parameters drawn from *rng and writes the weights those
 * parameters stand for into want, from the layout's description. */
typedef void (*pack_fn)(uint64_t *rng, uint8_t *b, float *want);

static int rnd(uint64_t *rng, int n)
{
    return (int)(test_uniform(rng) * n);
}

static float small_scale(uint64_t *rng)
{
    return ldexpf((float)(1 + rnd(rng, 15)), -12 - rnd(rng, 4));
}

/* Q8_0: d, then 32 int8. */
static void pack_q8_0(uint64_t *rng, uint8_t *b, float *want)
{
    float d = small_scale(rng);
    le16(b, half_of(d));
    for (int j = 0; j < 32; j++) {
        int q = j == 0 ? -128 : rnd(rng, 255) - 127;
        b[2 + j] = (uint8_t)(int8_t)q;
        want[j] = (float)q * d;
    }
}

/* Q4/Q5 blocks: weight j < 16 in the low nibble of qs[j], weight j + 16 in its high nibble;
 * Q5's fifth bit of weight j is bit j of the little-endian u32 qh. */
static void pack_q4q5(uint64_t *rng, uint8_t *b, float *want, int five, int with_min, int offset)
{
    float d = small_scale(rng), m = with_min ? -small_scale(rng) * 8 : 0;
    int at = 0;
    le16(b + at, half_of(d));
    at += 2;
    if (with_min) {
        le16(b + at, half_of(m));
        at += 2;
    }
    uint32_t qh = 0;
    uint8_t *qs = b + at + (five ? 4 : 0);
    memset(qs, 0, 16);
    for (int j = 0; j < 32; j++) {
        int q = rnd(rng, five ? 32 : 16);
        qs[j % 16] |= (uint8_t)((q & 15) << (j < 16 ? 0 : 4));
        if (q & 16)
            qh |= 1u << j;
        want[j] = with_min ? (float)q * d + m : (float)(q - offset) * d;
    }
    if (five)
        for (int k = 0; k < 4; k++)
            b[at + k] = (uint8_t)(qh >> (8 * k));
}

static void pack_q4_0(uint64_t *rng, uint8_t *b, float *want) { pack_q4q5(rng, b, want, 0, 0, 8); }
static void pack_q4_1(uint64_t *rng, uint8_t *b, float *want) { pack_q4q5(rng, b, want, 0, 1, 0); }
static void pack_q5_0(uint64_t *rng, uint8_t *b, float *want) { pack_q4q5(rng, b, want, 1, 0, 16); }
static void pack_q5_1(uint64_t *rng, uint8_t *b, float *want) { pack_q4q5(rng, b, want, 1, 1, 0); }

/* Q4_K / Q5_K: d, dmin, 12 bytes holding eight 6-bit scales and mins — sub-block j < 4: scale
 * in bits 0-5 of byte j, min in bits 0-5 of byte j + 4; j >= 4: low four bits of the scale in
 * the low nibble of byte j + 4, of the min in its high nibble, the top two bits of each in
 * bits 6-7 of byte j - 4 (scale) and byte j (min). Sub-blocks 2c and 2c + 1 share the 32 bytes
 * qs[32c ..]: low nibbles, then high; Q5_K's qh[l] bit s is weight l of sub-block s's fifth bit. */
static void pack_k4(uint64_t *rng, uint8_t *b, float *want, int five)
{
    float d = small_scale(rng), dmin = small_scale(rng);
    le16(b, half_of(d));
    le16(b + 2, half_of(dmin));
    uint8_t *sc = b + 4, *qh = five ? b + 16 : NULL, *qs = b + (five ? 48 : 16);
    memset(sc, 0, 12);
    if (qh)
        memset(qh, 0, 32);
    memset(qs, 0, 128);
    for (int s = 0; s < 8; s++) {
        int scale = rnd(rng, 64), min = rnd(rng, 64);
        if (s < 4) {
            sc[s] |= (uint8_t)scale;
            sc[s + 4] |= (uint8_t)min;
        } else {
            sc[s + 4] |= (uint8_t)((scale & 15) | (min & 15) << 4);
            sc[s - 4] |= (uint8_t)((scale >> 4) << 6);
            sc[s] |= (uint8_t)((min >> 4) << 6);
        }
        for (int l = 0; l < 32; l++) {
            int q = rnd(rng, five ? 32 : 16);
            qs[32 * (s / 2) + l] |= (uint8_t)((q & 15) << (s % 2 ? 4 : 0));
            if (q & 16)
                qh[l] |= (uint8_t)(1u << s);
            want[32 * s + l] = d * (float)scale * (float)q - dmin * (float)min;
        }
    }
}

static void pack_q4_k(uint64_t *rng, uint8_t *b, float *want) { pack_k4(rng, b, want, 0); }
static void pack_q5_k(uint64_t *rng, uint8_t *b, float *want) { pack_k4(rng, b, want, 1); }

/* Q6_K: ql[128], qh[64], int8 scales[16], d. Weight e = 128h + 32k + l (h half, k quarter):
 * low four bits in ql[64h + l + 32(k mod 2)] (low nibble for k < 2, high for k >= 2), top two
 * in bits 2k, 2k + 1 of qh[32h + l]; scale 8h + 2k + l / 16; value d · scale · (q - 32). */
static void pack_q6_k(uint64_t *rng, uint8_t *b, float *want)
{
    float d = small_scale(rng);
    memset(b, 0, 210);
    int8_t scales[16];
    for (int i = 0; i < 16; i++) {
        scales[i] = (int8_t)(rnd(rng, 256) - 128);
        b[192 + i] = (uint8_t)scales[i];
    }
    le16(b + 208, half_of(d));
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                int q = rnd(rng, 64);
                b[64 * h + l + 32 * (k % 2)] |= (uint8_t)((q & 15) << (k < 2 ? 0 : 4));
                b[128 + 32 * h + l] |= (uint8_t)((q >> 4) << (2 * k));
                want[128 * h + 32 * k + l] = d * (float)scales[8 * h + 2 * k + l / 16] * (float)(q - 32);
            }
}

static const struct {
    const char *name;
    uint32_t ggml;
    unsigned block, bytes;
    pack_fn pack;
    q_block_fn decode;
} blocks[] = {
    { "q8_0", GGML_Q8_0, 32, 34, pack_q8_0, q_gguf_q8_0 }, { "q4_0", GGML_Q4_0, 32, 18, pack_q4_0, q_gguf_q4_0 },
    { "q4_1", GGML_Q4_1, 32, 20, pack_q4_1, q_gguf_q4_1 }, { "q5_0", GGML_Q5_0, 32, 22, pack_q5_0, q_gguf_q5_0 },
    { "q5_1", GGML_Q5_1, 32, 24, pack_q5_1, q_gguf_q5_1 }, { "q4_k", GGML_Q4_K, 256, 144, pack_q4_k, q_gguf_q4_k },
    { "q5_k", GGML_Q5_K, 256, 176, pack_q5_k, q_gguf_q5_k }, { "q6_k", GGML_Q6_K, 256, 210, pack_q6_k, q_gguf_q6_k },
};
enum { N_BLOCKS = sizeof blocks / sizeof blocks[0] };

START_TEST(decoders_match_hand_packed_blocks)
{
    uint64_t rng = 11 + (uint64_t)_i;
    uint8_t b[256];
    float want[256], got[256];
    for (int rep = 0; rep < 50; rep++) {
        blocks[_i].pack(&rng, b, want);
        ck_assert_uint_eq(gf_type_of(blocks[_i].ggml).block_bytes, blocks[_i].bytes);
        blocks[_i].decode(b, got);
        for (unsigned j = 0; j < blocks[_i].block; j++)
            ck_assert_msg(got[j] == want[j], "%s block %d weight %u: %g, want %g", blocks[_i].name, rep, j,
                          (double)got[j], (double)want[j]);
    }
}
END_TEST

/* One fixed Q4_K block worked out by hand: d = 1, dmin = 0.5, sub-block 5's scale 37 = 0b100101
 * (low nibble 5 in byte 9, top bits 0b10 in bits 6-7 of byte 1) and min 20 = 0b010100 (low nibble
 * 4 in byte 9's high nibble, top bits 0b01 in byte 5); its weight 3 is the high nibble of qs[32·2 +
 * 3] = 9: 1·37·9 - 0.5·20 = 323. */
START_TEST(q4_k_by_hand)
{
    uint8_t b[144] = { 0 };
    le16(b, 0x3C00);     /* 1.0 */
    le16(b + 2, 0x3800); /* 0.5 */
    b[4 + 9] = 0x45;
    b[4 + 1] = 0x80;
    b[4 + 5] = 0x40;
    b[16 + 64 + 3] = 0x90;
    float y[256];
    q_gguf_q4_k(b, y);
    ck_assert_float_eq(y[5 * 32 + 3], 323.0f);
    ck_assert_float_eq(y[5 * 32 + 4], -10.0f); /* q = 0: -dmin·min */
    ck_assert_float_eq(y[4 * 32 + 3], 0.0f);  /* sub-block 4: scale and min 0 */
}
END_TEST

/* ---- a GGUF file written here ------------------------------------------------------------- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} bytes;

static void put(bytes *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
        ck_assert_ptr_nonnull(b->p);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void u32(bytes *b, uint32_t v)
{
    uint8_t le[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
    put(b, le, 4);
}

static void u64(bytes *b, uint64_t v)
{
    u32(b, (uint32_t)v);
    u32(b, (uint32_t)(v >> 32));
}

static void str(bytes *b, const char *s)
{
    u64(b, strlen(s));
    put(b, s, strlen(s));
}

static void kv_u32(bytes *b, const char *k, uint32_t v)
{
    str(b, k);
    u32(b, 4);
    u32(b, v);
}

static void kv_f32(bytes *b, const char *k, float v)
{
    str(b, k);
    u32(b, 6);
    uint32_t u;
    memcpy(&u, &v, 4);
    u32(b, u);
}

static void kv_str(bytes *b, const char *k, const char *v)
{
    str(b, k);
    u32(b, 8);
    str(b, v);
}

/* A tiny llama: dim 256 (so K-quant rows are whole 256-weight blocks), 2 heads, one layer,
 * vocabulary <unk> <s> </s>, the 256 byte tokens, and U+2581 (the space). */
enum { DIM = 256, VOCAB = 260, CTX = 64 };

typedef struct {
    const char *gguf, *lmq; /* names */
    uint32_t type;          /* ggml type */
    int rows, cols;
    int neg;                /* Q8_0 / Q4_0: every other block's d negated (llama.cpp's Q4_0 has such) */
    float *want;            /* the values packed */
    uint8_t *data;
    size_t size;
} tiny_tensor;

static tiny_tensor tiny[] = {
    { "token_embd.weight", "tok_embd.weight", GGML_Q4_0, VOCAB, DIM, 1, NULL, NULL, 0 },
    { "blk.0.attn_norm.weight", "blk.0.attn_norm.weight", GGML_F16, 1, DIM, 0, NULL, NULL, 0 },
    { "blk.0.attn_q.weight", "blk.0.attn_q.weight", GGML_Q4_K, DIM, DIM, 0, NULL, NULL, 0 },
    { "blk.0.attn_k.weight", "blk.0.attn_k.weight", GGML_Q5_K, DIM, DIM, 0, NULL, NULL, 0 },
    { "blk.0.attn_v.weight", "blk.0.attn_v.weight", GGML_Q6_K, DIM, DIM, 0, NULL, NULL, 0 },
    { "blk.0.attn_output.weight", "blk.0.attn_out.weight", GGML_Q8_0, DIM, DIM, 0, NULL, NULL, 0 },
    { "blk.0.ffn_norm.weight", "blk.0.ffn_norm.weight", GGML_F32, 1, DIM, 0, NULL, NULL, 0 },
    { "blk.0.ffn_gate.weight", "blk.0.ffn_gate.weight", GGML_Q4_1, DIM, DIM, 0, NULL, NULL, 0 },
    { "blk.0.ffn_up.weight", "blk.0.ffn_up.weight", GGML_Q5_0, DIM, DIM, 0, NULL, NULL, 0 },
    { "blk.0.ffn_down.weight", "blk.0.ffn_down.weight", GGML_Q5_1, DIM, DIM, 0, NULL, NULL, 0 },
    { "output_norm.weight", "out_norm.weight", GGML_F32, 1, DIM, 0, NULL, NULL, 0 },
    { "output.weight", "output.weight", GGML_Q4_0, VOCAB, DIM, 0, NULL, NULL, 0 },
};
enum { N_TINY = sizeof tiny / sizeof tiny[0] };

static void fill_tiny(uint64_t *rng)
{
    for (int i = 0; i < N_TINY; i++) {
        tiny_tensor *t = &tiny[i];
        const size_t n = (size_t)t->rows * t->cols;
        t->want = realloc(t->want, n * sizeof *t->want);
        if (t->type == GGML_F32 || t->type == GGML_F16) {
            t->size = n * (t->type == GGML_F32 ? 4 : 2);
            t->data = realloc(t->data, t->size);
            for (size_t k = 0; k < n; k++) {
                float v = t->type == GGML_F32 ? 1.0f + (float)(rnd(rng, 64) - 32) / 256 : (float)(rnd(rng, 200) - 100) / 512;
                t->want[k] = v;
                if (t->type == GGML_F32)
                    memcpy(t->data + 4 * k, &v, 4);
                else
                    le16(t->data + 2 * k, half_of(v));
            }
            continue;
        }
        int bi = 0;
        while (blocks[bi].ggml != t->type)
            bi++;
        t->size = n / blocks[bi].block * blocks[bi].bytes;
        t->data = realloc(t->data, t->size);
        for (size_t k = 0; k < n / blocks[bi].block; k++) {
            uint8_t *b = t->data + k * blocks[bi].bytes;
            float *want = t->want + k * blocks[bi].block;
            blocks[bi].pack(rng, b, want);
            if (t->neg && k % 2) { /* d is the first half: flip its sign, and every weight's */
                b[1] ^= 0x80;
                for (unsigned j = 0; j < blocks[bi].block; j++)
                    want[j] = -want[j];
            }
        }
    }
}

static const char *tiny_arch = "llama"; /* general.architecture */
static uint32_t tiny_ctx = CTX;         /* llama.context_length */
static float tiny_eps = 1e-5f;          /* llama.attention.layer_norm_rms_epsilon */
static uint32_t tiny_rope_dims;         /* llama.rope.dimension_count; 0: no such key */

/* The whole file, alignment 64 (not the default 32). */
static void write_tiny(const char *path)
{
    bytes b = { 0 };
    put(&b, "GGUF", 4);
    u32(&b, 3);
    u64(&b, N_TINY);
    u64(&b, 17 + (tiny_rope_dims != 0));
    kv_str(&b, "general.architecture", tiny_arch);
    kv_u32(&b, "general.alignment", 64);
    kv_str(&b, "general.name", "tiny");
    kv_u32(&b, "llama.context_length", tiny_ctx);
    if (tiny_rope_dims)
        kv_u32(&b, "llama.rope.dimension_count", tiny_rope_dims);
    kv_u32(&b, "llama.embedding_length", DIM);
    kv_u32(&b, "llama.block_count", 1);
    kv_u32(&b, "llama.feed_forward_length", DIM);
    kv_u32(&b, "llama.attention.head_count", 2);
    kv_u32(&b, "llama.attention.head_count_kv", 2);
    kv_f32(&b, "llama.attention.layer_norm_rms_epsilon", tiny_eps);
    kv_f32(&b, "llama.rope.freq_base", 10000.0f);
    kv_str(&b, "tokenizer.ggml.model", "llama");
    str(&b, "tokenizer.ggml.tokens");
    u32(&b, 9);
    u32(&b, 8);
    u64(&b, VOCAB);
    for (int i = 0; i < VOCAB; i++) {
        char tok[16];
        if (i < 3)
            snprintf(tok, sizeof tok, "%s", i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>");
        else if (i < 259)
            snprintf(tok, sizeof tok, "<0x%02X>", i - 3);
        else
            snprintf(tok, sizeof tok, "\xe2\x96\x81");
        str(&b, tok);
    }
    str(&b, "tokenizer.ggml.scores");
    u32(&b, 9);
    u32(&b, 6);
    u64(&b, VOCAB);
    for (int i = 0; i < VOCAB; i++) {
        float s = i == 259 ? -1.0f : 0.0f;
        uint32_t u;
        memcpy(&u, &s, 4);
        u32(&b, u);
    }
    str(&b, "tokenizer.ggml.token_type");
    u32(&b, 9);
    u32(&b, 5);
    u64(&b, VOCAB);
    for (int i = 0; i < VOCAB; i++)
        u32(&b, i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1);
    kv_u32(&b, "tokenizer.ggml.bos_token_id", 1);
    kv_u32(&b, "tokenizer.ggml.eos_token_id", 2);
    uint64_t off = 0;
    for (int i = 0; i < N_TINY; i++) {
        str(&b, tiny[i].gguf);
        u32(&b, tiny[i].rows > 1 ? 2 : 1);
        u64(&b, (uint64_t)tiny[i].cols);
        if (tiny[i].rows > 1)
            u64(&b, (uint64_t)tiny[i].rows);
        u32(&b, tiny[i].type);
        u64(&b, off);
        off += (tiny[i].size + 63) / 64 * 64;
    }
    static const uint8_t zero[64];
    put(&b, zero, (64 - b.n % 64) % 64);
    for (int i = 0; i < N_TINY; i++) {
        put(&b, tiny[i].data, tiny[i].size);
        put(&b, zero, (64 - tiny[i].size % 64) % 64);
    }
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b.p, 1, b.n, f), b.n);
    fclose(f);
    free(b.p);
}

static void free_tiny(void)
{
    for (int i = 0; i < N_TINY; i++) {
        free(tiny[i].want);
        free(tiny[i].data);
        tiny[i].want = NULL;
        tiny[i].data = NULL;
    }
}

static void convert_gguf(const char *src, const char *dst)
{
    lmq_err e;
    ck_assert_msg(lmq_gguf_convert(src, dst, 0, NULL, &e) == LMQ_OK, "%s: %s", src, e.msg);
}

START_TEST(hand_written_gguf_imports_and_verifies)
{
    const char *dir = test_tmpdir();
    char src[256], art[256], back[256], again[256], text[256];
    snprintf(src, sizeof src, "%s/tiny.gguf", dir);
    snprintf(art, sizeof art, "%s/tiny.lmq", dir);
    snprintf(back, sizeof back, "%s/back.gguf", dir);
    snprintf(again, sizeof again, "%s/again.lmq", dir);
    snprintf(text, sizeof text, "%s/text.txt", dir);
    uint64_t rng = 7;
    fill_tiny(&rng);
    write_tiny(src);
    convert_gguf(src, art);

    /* Every tensor decodes to what was packed, in its kept encoding. */
    lmq_model m;
    lmq_err e;
    ck_assert_msg(rt_load_artefact(art, &m, &e) == LMQ_OK, "%s", e.msg);
    static const struct {
        uint32_t ggml;
        lmq_qparams q;
    } kept[] = {
        { GGML_F32, { .dtype = LMQ_T_F32 } },
        { GGML_F16, { .dtype = LMQ_T_F16 } },
        { GGML_Q8_0, { .dtype = LMQ_T_INT8, .gran = LMQ_GRAN_GROUP, .group = 32 } },
        { GGML_Q4_0, { .dtype = LMQ_T_INT4, .gran = LMQ_GRAN_GROUP, .group = 32 } },
        { GGML_Q4_1, { .dtype = LMQ_T_Q4_1 } }, { GGML_Q5_0, { .dtype = LMQ_T_Q5_0 } },
        { GGML_Q5_1, { .dtype = LMQ_T_Q5_1 } }, { GGML_Q4_K, { .dtype = LMQ_T_Q4_K } },
        { GGML_Q5_K, { .dtype = LMQ_T_Q5_K } }, { GGML_Q6_K, { .dtype = LMQ_T_Q6_K } },
    };
    ck_assert_int_eq(m.n_tensors, N_TINY);
    ck_assert_int_eq(m.arch.rope, LMQ_ROPE_INTERLEAVED);
    ck_assert_int_eq(m.arch.vocab_size, VOCAB);
    ck_assert_int_eq(m.arch.tied_embedding, 0);
    for (int i = 0; i < N_TINY; i++) {
        const lmq_tensor *t = lmq_model_find(&m, tiny[i].lmq);
        ck_assert_msg(t != NULL, "%s missing", tiny[i].lmq);
        size_t k = 0;
        while (kept[k].ggml != tiny[i].type)
            k++;
        /* a negative d is off lmq's int4 grid: the blocks are kept as they are */
        const lmq_qparams q4_0 = { .dtype = LMQ_T_Q4_0 }, *want_q = tiny[i].neg ? &q4_0 : &kept[k].q;
        ck_assert_msg(!memcmp(&t->q, want_q, sizeof t->q), "%s: encoding %u", t->name, t->q.dtype);
        const size_t n = (size_t)tiny[i].rows * tiny[i].cols;
        ck_assert_int_eq(lmq_tensor_numel(t), (int64_t)n);
        float *v = malloc(n * sizeof *v);
        ck_assert_msg(q_dequantize(&t->q, t->raw, t->raw_size, tiny[i].rows, tiny[i].cols, v, NULL, &e) == LMQ_OK,
                      "%s", e.msg);
        for (size_t j = 0; j < n; j++)
            ck_assert_msg(v[j] == tiny[i].want[j], "%s[%zu]: %g, want %g", t->name, j, (double)v[j],
                          (double)tiny[i].want[j]);
        free(v);
    }
    /* The kernels read GGUF's extreme codes (Q4_0's nibble 0 = -8·d, Q8_0's -128), which lmq's
     * quantiser never writes, as the decoder does: each linear layer against a double-precision
     * product of the packed values. */
    static const int probe[] = { 2, 5, 9, 11 }; /* q4_k, q8_0 (int8 g32), q5_1, q4_0 (int4 g32) */
    for (size_t p = 0; p < sizeof probe / sizeof probe[0]; p++) {
        const tiny_tensor *tt = &tiny[probe[p]];
        rt_weight W;
        ck_assert_msg(rt_weight_of(lmq_model_find(&m, tt->lmq), NULL, &W, &e) == LMQ_OK, "%s", e.msg);
        float x[DIM], *y = malloc((size_t)tt->rows * sizeof *y);
        for (int k = 0; k < DIM; k++)
            x[k] = (float)(k % 7) - 3.0f;
        rt_exec ex = { .isa = rt_isa_best() };
        /* on AVX-512 int8 and int4 g32 run the fused kernels, and GGUF's blocks on every kernel
         * set: those are the ones tried here */
        ck_assert(!(ex.isa->needs & LMQ_CPU_AVX512) || rt_linear_fused(ex.isa, &W));
        ck_assert_msg(rt_linear(&ex, x, 1, &W, y, &e) == LMQ_OK, "%s", e.msg);
        for (int r = 0; r < tt->rows; r++) {
            double want = 0, mag = 0;
            for (int k = 0; k < DIM; k++) {
                want += (double)tt->want[(size_t)r * DIM + k] * x[k];
                mag += fabs((double)tt->want[(size_t)r * DIM + k] * x[k]);
            }
            ck_assert_msg(fabs(y[r] - want) <= 1e-5 * mag + 1e-30, "%s row %d: %g, want %g", tt->lmq, r, (double)y[r],
                          want);
        }
        free(y);
    }
    lmq_model_free(&m);
    /* audit's value checks pass */
    lmq_container c;
    ck_assert_msg(lmq_container_open(&c, art, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(rt_audit_values(&c, NULL, NULL), 0);
    lmq_container_close(&c);

    /* verify scores it, against itself through an export and import: the same logits. */
    lmq_gguf_report rep;
    ck_assert_msg(lmq_gguf_export(art, back, 0, &rep, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(rep.tensors, N_TINY);
    ck_assert_int_eq(rep.requantized, 0);
    convert_gguf(back, again);
    FILE *f = fopen(text, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 40; i++)
        fprintf(f, "the cat sat on the mat %d times.\n", i);
    fclose(f);
    const char *cands[] = { again };
    vf_run_opts o = { .ctx = 32, .threads = 1, .bandwidth_gbps = 10 };
    vf_report r;
    ck_assert_msg(vf_run(art, cands, 1, text, &o, &r, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(r.n_rows, 2);
    ck_assert(isfinite(r.rows[0].res.ppl) && r.rows[0].res.ppl > 1);
    ck_assert(r.rows[1].res.ppl == r.rows[0].res.ppl);
    ck_assert(r.rows[1].res.kl_mean == 0);
    free((void *)r.rows);
    free_tiny();
    test_rmtree(dir);
}
END_TEST

/* ---- round trips of the fixture models ------------------------------------------------------ */

static void write_text(const char *path, const char *s)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(s, f);
    fclose(f);
}

/* A and B hold the same tensors (names, shapes, encodings, bytes), the same architecture and
 * give the same logits. */
static void assert_same_model(const char *a_path, const char *b_path, int same_files)
{
    lmq_model a, b;
    lmq_err e;
    ck_assert_msg(rt_load_artefact(a_path, &a, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(rt_load_artefact(b_path, &b, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(a.n_tensors, b.n_tensors);
    for (int i = 0; i < a.n_tensors; i++) {
        const lmq_tensor *x = &a.tensors[i], *y = lmq_model_find(&b, x->name);
        ck_assert_msg(y != NULL, "%s missing after the round trip", x->name);
        ck_assert_msg(!memcmp(&x->q, &y->q, sizeof x->q) && x->ndim == y->ndim &&
                          !memcmp(x->shape, y->shape, sizeof x->shape) && x->raw_size == y->raw_size &&
                          !memcmp(x->raw, y->raw, x->raw_size),
                      "%s differs after the round trip", x->name);
    }
    ck_assert(!memcmp(&a.arch, &b.arch, sizeof a.arch));
    for (int i = 0; i < a.n_files && same_files; i++) {
        const lmq_file *f = lmq_model_find_file(&b, a.files[i].name);
        ck_assert_msg(f && f->size == a.files[i].size && !memcmp(f->data, a.files[i].data, f->size), "file %s differs",
                      a.files[i].name);
    }
    /* The carried tokenizers encode a text alike (GPT-2's vocab.json is rebuilt, not copied). */
    static const char text[] = "Once upon a time, the President said: \"We will rebuild.\"\n  Tom's dog ran, 42 km!";
    tok_tokenizer *ta, *tb;
    int32_t *ia, *ib;
    size_t na, nb;
    ck_assert_msg(tok_open_model(&a, &ta, &e) == LMQ_OK && tok_open_model(&b, &tb, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(tok_encode(ta, text, sizeof text - 1, &ia, &na, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(tok_encode(tb, text, sizeof text - 1, &ib, &nb, &e) == LMQ_OK, "%s", e.msg);
    ck_assert(na == nb && na > 10 && !memcmp(ia, ib, na * sizeof *ia));
    free(ia);
    free(ib);
    tok_free(ta);
    tok_free(tb);
    int32_t toks[16];
    for (int i = 0; i < 16; i++)
        toks[i] = (int32_t)((i * 37 + 5) % a.arch.vocab_size);
    float *la = malloc(16 * (size_t)a.arch.vocab_size * sizeof *la), *lb = malloc(16 * (size_t)a.arch.vocab_size * sizeof *lb);
    const lmq_model *ms[2] = { &a, &b };
    float *ls[2] = { la, lb };
    for (int k = 0; k < 2; k++) {
        rt_model rm;
        rt_state *s;
        rt_exec ex = { .isa = rt_isa_best() };
        ck_assert_msg(rt_model_init(&rm, ms[k], &e) == LMQ_OK, "%s", e.msg);
        ck_assert_msg(rt_state_create(&rm, &ex, 16, &s, &e) == LMQ_OK, "%s", e.msg);
        ck_assert_msg(rt_forward(s, toks, 16, 0, RT_LOGITS_ALL, ls[k], &e) == LMQ_OK, "%s", e.msg);
        rt_state_free(s);
        rt_model_free(&rm);
    }
    ck_assert(!memcmp(la, lb, 16 * (size_t)a.arch.vocab_size * sizeof *la));
    free(la);
    free(lb);
    lmq_model_free(&a);
    lmq_model_free(&b);
}

static const struct {
    const char *fixture, *name;
    int same_files; /* the tokenizer file rebuilt byte for byte (tokenizer.bin; vocab.json is re-serialised) */
} models[] = {
    { STORIES, "stories", 1 },
    { SOTU, "gpt2", 0 },
};

/* int4 and int8 symmetric g32, fp16, bf16 on matrices of both families whose width is a whole
 * number of blocks (stories260K's ffn_down has 172 columns), and fp32. 1-D tensors stay fp32
 * (GGUF's norms are F32). */
#define MATRICES "[\"blk.*.attn_out.weight\", \"blk.*.ffn_up.weight\", \"tok_embd.weight\"]"
static const char *const recipes[] = {
    "name: q4\nrules:\n  - match: " MATRICES "\n    scheme: int4\n    granularity: group\n    group: 32\n",
    "name: q8\nrules:\n  - match: " MATRICES "\n    scheme: int8\n    granularity: group\n    group: 32\n",
    "name: f16\nrules:\n  - match: " MATRICES "\n    scheme: fp16\n",
    "name: bf16\nrules:\n  - match: " MATRICES "\n    scheme: bf16\n",
    NULL,
};

/* GGUF's spec (docs/gguf.md): general.quantization_version, a u32, must be present when any
 * tensor is quantised; llama.cpp's own writers put 2, the version of the block layouts. Files
 * of float tensors only need none, and lmq writes none there. */
static void assert_quantization_version(const char *path)
{
    gf_file f;
    lmq_err e;
    ck_assert_msg(gf_open(path, &f, &e) == LMQ_OK, "%s", e.msg);
    int quantized = 0;
    for (int64_t i = 0; i < f.n_tensors; i++)
        quantized |= f.tensors[i].type != GGML_F32 && f.tensors[i].type != GGML_F16 && f.tensors[i].type != GGML_BF16;
    const gf_kv *kv = gf_find(&f, "general.quantization_version");
    if (quantized) {
        ck_assert_msg(kv && kv->type == GGUF_U32, "%s: a quantised file without a u32 general.quantization_version",
                      path);
        uint32_t v;
        memcpy(&v, kv->val, 4);
        ck_assert_uint_eq(v, 2);
    } else {
        ck_assert_ptr_null(kv);
    }
    gf_close(&f);
}

START_TEST(fixture_round_trips_bit_identical)
{
    const char *dir = test_tmpdir();
    char fp32[256], rec[256], q[256], g[256], back[256];
    snprintf(fp32, sizeof fp32, "%s/fp32.lmq", dir);
    snprintf(rec, sizeof rec, "%s/r.yaml", dir);
    snprintf(q, sizeof q, "%s/q.lmq", dir);
    snprintf(g, sizeof g, "%s/q.gguf", dir);
    snprintf(back, sizeof back, "%s/back.lmq", dir);
    test_fp32_artefact(models[_i].fixture, fp32);
    for (size_t r = 0; r < sizeof recipes / sizeof recipes[0]; r++) {
        const char *src = fp32;
        lmq_err e;
        if (recipes[r]) {
            write_text(rec, recipes[r]);
            ck_assert_msg(q_quantize_file(fp32, rec, q, NULL, &e) == LMQ_OK, "%s", e.msg);
            src = q;
        }
        lmq_gguf_report rep;
        ck_assert_msg(lmq_gguf_export(src, g, 0, &rep, &e) == LMQ_OK, "%s: %s", models[_i].name, e.msg);
        ck_assert_int_eq(rep.requantized, 0);
        assert_quantization_version(g);
        convert_gguf(g, back);
        assert_same_model(src, back, models[_i].same_files);
    }
    test_rmtree(dir);
}
END_TEST

/* Encodings with no GGUF twin are refused naming the tensor; --allow-requantize records them. */
START_TEST(export_refuses_or_requantizes)
{
    const char *dir = test_tmpdir();
    char fp32[256], rec[256], q[256], g[256], back[256];
    snprintf(fp32, sizeof fp32, "%s/fp32.lmq", dir);
    snprintf(rec, sizeof rec, "%s/r.yaml", dir);
    snprintf(q, sizeof q, "%s/q.lmq", dir);
    snprintf(g, sizeof g, "%s/q.gguf", dir);
    snprintf(back, sizeof back, "%s/back.lmq", dir);
    test_fp32_artefact(STORIES, fp32);
    write_text(rec, "name: c\nrules:\n  - match: \"blk.*.ffn_*.weight\"\n    scheme: int4\n    granularity: channel\n");
    lmq_err e;
    ck_assert_msg(q_quantize_file(fp32, rec, q, NULL, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(lmq_gguf_export(q, g, 0, NULL, &e), LMQ_E_UNSUPPORTED);
    ck_assert_msg(strstr(e.msg, "blk.0.ffn_gate.weight") && strstr(e.msg, "int4 per-channel"), "%s", e.msg);
    ck_assert_int_ne(access(g, F_OK), 0);
    lmq_gguf_report rep;
    ck_assert_msg(lmq_gguf_export(q, g, 1, &rep, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_int_eq(rep.requantized, 15);
    ck_assert_msg(strstr(rep.log, "blk.0.ffn_gate.weight: int4 per-channel -> q8_0\n") &&
                      strstr(rep.log, "blk.4.ffn_down.weight: int4 per-channel -> f32 (172 columns"),
                  "%s", rep.log);
    free(rep.log);
    /* The input as the output: refused before anything is read or written, the input intact. */
    lmq_container c;
    ck_assert_msg(lmq_container_open(&c, q, &e) == LMQ_OK, "%s", e.msg);
    const uint64_t sum = c.file_checksum;
    lmq_container_close(&c);
    ck_assert_int_eq(lmq_gguf_export(q, q, 1, &rep, &e), LMQ_E_ARG);
    ck_assert_msg(strstr(e.msg, q) && strstr(e.msg, "same file as the input"), "%s", e.msg);
    ck_assert_int_eq(rep.tensors, 0);
    ck_assert_ptr_null(rep.log);
    ck_assert_msg(lmq_container_open(&c, q, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_uint_eq(c.file_checksum, sum);
    lmq_container_close(&c);
    gf_file f;
    ck_assert_msg(gf_open(g, &f, &e) == LMQ_OK, "%s", e.msg);
    const gf_kv *kv = gf_get_array(&f, "lmq.requantized", GGUF_STRING, &e);
    ck_assert_msg(kv && kv->n == 15, "%s", e.msg);
    ck_assert_uint_eq(gf_find_tensor(&f, "blk.2.ffn_up.weight")->type, GGML_Q8_0);
    ck_assert_uint_eq(gf_find_tensor(&f, "blk.2.ffn_down.weight")->type, GGML_F32);
    ck_assert_uint_eq(gf_find_tensor(&f, "blk.2.attn_output.weight")->type, GGML_F32);
    gf_close(&f);
    test_rmtree(dir);
}
END_TEST

/* ---- hostile files -------------------------------------------------------------------------- */

static lmq_code open_bytes(const bytes *b, lmq_err *e)
{
    gf_file f;
    lmq_code rc = gf_open_mem(b->p, b->n, "bad.gguf", &f, e);
    if (!rc)
        gf_close(&f);
    return rc;
}

static void header(bytes *b, uint64_t nt, uint64_t nkv)
{
    b->n = 0;
    put(b, "GGUF", 4);
    u32(b, 3);
    u64(b, nt);
    u64(b, nkv);
}

static void tensor_info(bytes *b, const char *name, uint64_t cols, uint32_t type, uint64_t off)
{
    str(b, name);
    u32(b, 1);
    u64(b, cols);
    u32(b, type);
    u64(b, off);
}

/* b, followed by 64 zero bytes (room for the counts the header promises), is refused with a
 * message naming the file, a and c. */
static void expect(bytes *b, lmq_code code, const char *a, const char *c)
{
    static const uint8_t pad[64];
    put(b, pad, sizeof pad);
    lmq_err e;
    ck_assert_int_eq(open_bytes(b, &e), code);
    ck_assert_msg(strstr(e.msg, "bad.gguf") && strstr(e.msg, a) && (!c || strstr(e.msg, c)), "%s", e.msg);
}

START_TEST(hostile_files_refused)
{
    bytes b = { 0 };
    static const uint8_t zero[256];
    header(&b, 0, 0);
    b.p[4] = 1;
    expect(&b, LMQ_E_UNSUPPORTED, "version 1", NULL);
    header(&b, 0, UINT64_MAX);
    expect(&b, LMQ_E_FORMAT, "cannot fit", NULL);
    header(&b, 0, 1);
    u64(&b, UINT64_MAX - 3); /* key length */
    expect(&b, LMQ_E_FORMAT, "runs past the end", NULL);
    header(&b, 0, 1);
    str(&b, "k");
    u32(&b, 13);
    expect(&b, LMQ_E_FORMAT, "key k", "unknown value type 13");
    header(&b, 0, 1);
    str(&b, "k");
    u32(&b, 9);
    u32(&b, 4);
    u64(&b, UINT64_MAX / 2);
    expect(&b, LMQ_E_FORMAT, "key k", "run past the end");
    header(&b, 0, 2);
    kv_u32(&b, "k", 1);
    kv_u32(&b, "k", 2);
    expect(&b, LMQ_E_FORMAT, "key k appears twice", NULL);
    header(&b, 0, 1);
    kv_u32(&b, "general.alignment", 48);
    expect(&b, LMQ_E_FORMAT, "general.alignment", "power of two");
    header(&b, 1, 0);
    tensor_info(&b, "w", 32, 77, 0);
    put(&b, zero, 64);
    expect(&b, LMQ_E_UNSUPPORTED, "tensor w", "unknown ggml type 77");
    header(&b, 1, 0);
    tensor_info(&b, "w", 33, GGML_Q4_0, 0);
    put(&b, zero, 64);
    expect(&b, LMQ_E_FORMAT, "tensor w", "blocks");
    header(&b, 1, 0);
    tensor_info(&b, "w", 64, GGML_F32, 0);
    put(&b, zero, (32 - b.n % 32) % 32 + 100);
    expect(&b, LMQ_E_FORMAT, "tensor w", "run past the data section");
    header(&b, 1, 0);
    tensor_info(&b, "w", 8, GGML_F32, 4);
    put(&b, zero, 64);
    expect(&b, LMQ_E_FORMAT, "tensor w", "not a multiple of the alignment");
    header(&b, 2, 0);
    tensor_info(&b, "a", 16, GGML_F32, 0);
    tensor_info(&b, "b", 8, GGML_F32, 32);
    put(&b, zero, 160);
    expect(&b, LMQ_E_FORMAT, "tensor a", "overlaps tensor b");
    header(&b, 2, 0);
    tensor_info(&b, "a", 8, GGML_F32, 0);
    tensor_info(&b, "a", 8, GGML_F32, 32);
    put(&b, zero, 160);
    expect(&b, LMQ_E_FORMAT, "tensor a appears twice", NULL);
    /* Every prefix of a good file is refused cleanly. */
    header(&b, 1, 1);
    kv_str(&b, "general.architecture", "llama");
    tensor_info(&b, "w", 8, GGML_F32, 0);
    put(&b, zero, (32 - b.n % 32) % 32 + 32);
    lmq_err e;
    ck_assert_msg(open_bytes(&b, &e) == LMQ_OK, "%s", e.msg);
    const size_t whole = b.n;
    for (b.n = 0; b.n < whole - 32; b.n++)
        ck_assert_int_ne(open_bytes(&b, &e), LMQ_OK);
    free(b.p);
}
END_TEST

/* An imported tensor whose fp16 scale is Inf, or of a type lmq does not import, is refused
 * naming it; a GGUF of another architecture is refused naming it. Nothing is written. */
START_TEST(import_refuses_bad_values_and_architectures)
{
    const char *dir = test_tmpdir();
    char src[256], art[256];
    snprintf(src, sizeof src, "%s/tiny.gguf", dir);
    snprintf(art, sizeof art, "%s/tiny.lmq", dir);
    uint64_t rng = 3;
    fill_tiny(&rng);
    le16(tiny[4].data + 210 * 7 + 208, 0x7C00); /* attn_v (Q6_K), block 7: d = +Inf */
    write_tiny(src);
    lmq_err e;
    ck_assert_int_eq(lmq_gguf_convert(src, art, 0, NULL, &e), LMQ_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "blk.0.attn_v.weight") && strstr(e.msg, "row 7, q6_k block 0"), "%s", e.msg);
    /* A type lmq does not import (Q8_1, ggml's activation blocks: 36 bytes per 32), named with its tensor. */
    fill_tiny(&rng);
    tiny[2].type = GGML_Q8_1;
    tiny[2].size = (size_t)DIM * DIM / 32 * 36;
    tiny[2].data = realloc(tiny[2].data, tiny[2].size); /* more bytes than the Q4_K it was */
    ck_assert_ptr_nonnull(tiny[2].data);
    memset(tiny[2].data, 0, tiny[2].size);
    write_tiny(src);
    ck_assert_int_eq(lmq_gguf_convert(src, art, 0, NULL, &e), LMQ_E_UNSUPPORTED);
    ck_assert_msg(strstr(e.msg, "tensor blk.0.attn_q.weight: ggml type q8_1 is not one lmq imports"), "%s", e.msg);
    tiny[2].type = GGML_Q4_K;
    /* Another architecture, named. */
    fill_tiny(&rng);
    tiny_arch = "falcon";
    write_tiny(src);
    tiny_arch = "llama";
    ck_assert_int_eq(lmq_gguf_convert(src, art, 0, NULL, &e), LMQ_E_UNSUPPORTED);
    ck_assert_msg(strstr(e.msg, "tiny.gguf: general.architecture 'falcon'"), "%s", e.msg);
    /* Counts of 0, a bad epsilon and a rope over part of a head: each named with its file and key. */
    tiny_ctx = 0;
    write_tiny(src);
    tiny_ctx = CTX;
    ck_assert_int_eq(lmq_gguf_convert(src, art, 0, NULL, &e), LMQ_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "tiny.gguf: key llama.context_length: 0 is out of range 1..2^30"), "%s", e.msg);
    tiny_eps = -1.0f;
    write_tiny(src);
    tiny_eps = 1e-5f;
    ck_assert_int_eq(lmq_gguf_convert(src, art, 0, NULL, &e), LMQ_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "tiny.gguf: key llama.attention.layer_norm_rms_epsilon: -1 is not a finite number > 0"),
                  "%s", e.msg);
    tiny_rope_dims = DIM / 4; /* the head size is DIM / 2 */
    write_tiny(src);
    tiny_rope_dims = 0;
    ck_assert_int_eq(lmq_gguf_convert(src, art, 0, NULL, &e), LMQ_E_UNSUPPORTED);
    ck_assert_msg(strstr(e.msg, "tiny.gguf: key llama.rope.dimension_count: ") &&
                  strstr(e.msg, "but the head size (embedding_length / head_count) is"), "%s", e.msg);
    ck_assert_int_ne(access(art, F_OK), 0);
    free_tiny();
    test_rmtree(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gguf");
    TCase *tc = tcase_create("gguf");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, decoders_match_hand_packed_blocks, 0, N_BLOCKS);
    tcase_add_test(tc, q4_k_by_hand);
    tcase_add_test(tc, hand_written_gguf_imports_and_verifies);
    tcase_add_loop_test(tc, fixture_round_trips_bit_identical, 0, 2);
    tcase_add_test(tc, export_refuses_or_requantizes);
    tcase_add_test(tc, hostile_files_refused);
    tcase_add_test(tc, import_refuses_bad_values_and_architectures);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
