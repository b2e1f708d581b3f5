/* The KV cache's formats (runtime/kv.h). */
#include "runtime/kv.h"

#include <math.h>
#include <string.h>

#include "common/fp.h"
#include "schemes/fp8.h"

static void f32_store(const float *x, int n, uint8_t *dst) { memcpy(dst, x, (size_t)n * sizeof(float)); }
static void f32_load(const uint8_t *src, int n, float *y) { memcpy(y, src, (size_t)n * sizeof(float)); }

/* Elements as 16-bit codes through memcpy: the cache's bytes carry no alignment. */
static void f16_store(const float *x, int n, uint8_t *dst)
{
    uint16_t h[RT_KV_BLOCK];
    lmq_f32_to_f16_n(x, h, (size_t)n);
    memcpy(dst, h, (size_t)n * 2);
}

static void f16_load(const uint8_t *src, int n, float *y)
{
    uint16_t h[RT_KV_BLOCK];
    memcpy(h, src, (size_t)n * 2);
    lmq_f16_to_f32_n(h, y, (size_t)n);
}

static void bf16_store(const float *x, int n, uint8_t *dst)
{
    for (int i = 0; i < n; i++) {
        const uint16_t h = lmq_f32_to_bf16(x[i]);
        memcpy(dst + 2 * i, &h, 2);
    }
}

static void bf16_load(const uint8_t *src, int n, float *y)
{
    for (int i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, src + 2 * i, 2);
        y[i] = lmq_bf16_to_f32(h);
    }
}

static void fp8_store(const float *x, int n, uint8_t *dst)
{
    for (int i = 0; i < n; i++)
        dst[i] = q_fp8_encode(&q_fp8_e4m3, x[i]);
}

static void fp8_load(const uint8_t *src, int n, float *y)
{
    for (int i = 0; i < n; i++)
        y[i] = q_fp8_decode(&q_fp8_e4m3, src[i]);
}

/* The block's fp16 scale, amax / qmax rounded up to the next fp16 so that |x| / scale ≤ qmax
 * (no code clips); at most the largest finite fp16, so huge blocks clip rather than go Inf.
 * 0 for a block of zeros. */
static uint16_t int_scale(const float *x, int n, int qmax, float *inv)
{
    float amax = 0.0f;
    for (int i = 0; i < n; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    uint16_t h = lmq_f32_to_f16(amax / (float)qmax);
    if (h < 0x7bff && lmq_f16_to_f32(h) * (float)qmax < amax)
        h++; /* positive fp16 codes are ordered as their values */
    if (h > 0x7bff)
        h = 0x7bff;
    const float s = lmq_f16_to_f32(h);
    *inv = s > 0.0f ? 1.0f / s : 0.0f;
    return h;
}

/* x / scale rounded and clipped to ±qmax (NaN to +qmax: fminf returns the number). */
static int int_code(float x, float inv, int qmax)
{
    return (int)lrintf(fmaxf(fminf(x * inv, (float)qmax), (float)-qmax));
}

static float block_scale(const uint8_t *src)
{
    uint16_t h;
    memcpy(&h, src, 2);
    return lmq_f16_to_f32(h);
}

static void int8_store(const float *x, int n, uint8_t *dst)
{
    float inv;
    const uint16_t h = int_scale(x, n, 127, &inv);
    memcpy(dst, &h, 2);
    for (int i = 0; i < n; i++)
        dst[2 + i] = (uint8_t)(int8_t)int_code(x[i], inv, 127);
}

static void int8_load(const uint8_t *src, int n, float *y)
{
    const float s = block_scale(src);
    for (int i = 0; i < n; i++)
        y[i] = (float)(int8_t)src[2 + i] * s;
}

/* Two codes a byte, code + 8 in each nibble, element 2i low. */
static void int4_store(const float *x, int n, uint8_t *dst)
{
    float inv;
    const uint16_t h = int_scale(x, n, 7, &inv);
    memcpy(dst, &h, 2);
    for (int i = 0; i < n; i += 2)
        dst[2 + i / 2] = (uint8_t)((int_code(x[i], inv, 7) + 8) | (int_code(x[i + 1], inv, 7) + 8) << 4);
}

static void int4_load(const uint8_t *src, int n, float *y)
{
    const float s = block_scale(src);
    for (int i = 0; i < n; i += 2) {
        y[i] = (float)((src[2 + i / 2] & 15) - 8) * s;
        y[i + 1] = (float)((src[2 + i / 2] >> 4) - 8) * s;
    }
}

static const rt_kv_format kv_formats[] = {
    { "fp32", 32, 0, f32_store, f32_load },  { "fp16", 16, 0, f16_store, f16_load },
    { "bf16", 16, 0, bf16_store, bf16_load }, { "fp8", 8, 0, fp8_store, fp8_load },
    { "int8", 8, 2, int8_store, int8_load },  { "int4", 4, 2, int4_store, int4_load },
};
#define N_KV_FORMATS (int)(sizeof kv_formats / sizeof kv_formats[0])

const rt_kv_format *rt_kv_find(const char *name)
{
    for (int i = 0; i < N_KV_FORMATS; i++)
        if (!strcmp(kv_formats[i].name, name))
            return &kv_formats[i];
    return NULL;
}

const char *rt_kv_names(void)
{
    return "fp32, fp16, bf16, fp8, int8, int4";
}

static size_t block_bytes(const rt_kv_format *f, int n)
{
    return ((size_t)n * f->bits + 7) / 8 + f->scale_bytes;
}

size_t rt_kv_head_bytes(const rt_kv_format *f, int head_dim)
{
    size_t b = 0;
    for (int e = 0; e < head_dim; e += RT_KV_BLOCK)
        b += block_bytes(f, head_dim - e < RT_KV_BLOCK ? head_dim - e : RT_KV_BLOCK);
    return b;
}

uint64_t rt_kv_token_bytes(const rt_kv_format *k, const rt_kv_format *v, int layers, int kv_heads, int head_dim)
{
    return (uint64_t)layers * (uint64_t)kv_heads * (rt_kv_head_bytes(k, head_dim) + rt_kv_head_bytes(v, head_dim));
}

void rt_kv_store(const rt_kv_format *f, const float *x, int heads, int head_dim, uint8_t *dst)
{
    for (int h = 0; h < heads; h++)
        for (int e = 0; e < head_dim; e += RT_KV_BLOCK) {
            const int n = head_dim - e < RT_KV_BLOCK ? head_dim - e : RT_KV_BLOCK;
            f->store(x + (size_t)h * head_dim + e, n, dst);
            dst += block_bytes(f, n);
        }
}

void rt_kv_load(const rt_kv_format *f, const uint8_t *src, int heads, int head_dim, float *y)
{
    for (int h = 0; h < heads; h++)
        for (int e = 0; e < head_dim; e += RT_KV_BLOCK) {
            const int n = head_dim - e < RT_KV_BLOCK ? head_dim - e : RT_KV_BLOCK;
            f->load(src, n, y + (size_t)h * head_dim + e);
            src += block_bytes(f, n);
        }
}
