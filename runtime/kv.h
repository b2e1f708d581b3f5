/* The KV cache's formats: one table, read by the CPU runtime's cache (runtime/cpu.c) and by the
 * serving budget (runtime/budget.h). A cached k or v row is n_kv_heads heads of head_dim
 * elements; each head is stored as blocks of RT_KV_BLOCK elements (the last one shorter where
 * head_dim is not a multiple; a head_dim below RT_KV_BLOCK is one block), each block
 * bits · len / 8 bytes of elements plus scale_bytes:
 *   fp32, fp16, bf16   the element as that float (round to nearest even);
 *   fp8                OCP E4M3, unscaled, saturating at ±448 (vLLM's fp8 cache, scale 1);
 *   int8, int4         symmetric codes (±127, ±7) and one fp16 scale per block, amax / qmax
 *                      rounded up to an fp16 (so no code clips), as llama.cpp's q8_0 / q4_0
 *                      cache types (-ctk q8_0): x ≈ code · scale, error ≤ scale / 2. */
#ifndef LMQ_RT_KV_H
#define LMQ_RT_KV_H

#include <stddef.h>
#include <stdint.h>

#define RT_KV_BLOCK 32

typedef struct rt_kv_format {
    const char *name;     /* what --kv takes */
    unsigned bits;        /* per element */
    unsigned scale_bytes; /* per block */
    /* One block of n (1..RT_KV_BLOCK; even for int4) elements: x → dst, src → y. */
    void (*store)(const float *x, int n, uint8_t *dst);
    void (*load)(const uint8_t *src, int n, float *y);
} rt_kv_format;

/* The row called name, or NULL. */
const rt_kv_format *rt_kv_find(const char *name);
/* The names, "fp32, fp16, ..., int4", for messages. */
const char *rt_kv_names(void);
/* Bytes of one head of head_dim elements. */
size_t rt_kv_head_bytes(const rt_kv_format *f, int head_dim);
/* heads × head_dim elements of x into dst (heads × rt_kv_head_bytes), and back. */
void rt_kv_store(const rt_kv_format *f, const float *x, int heads, int head_dim, uint8_t *dst);
void rt_kv_load(const rt_kv_format *f, const uint8_t *src, int heads, int head_dim, float *y);
/* Bytes a cached token takes: layers · kv_heads · (a head of keys in k + a head of values in v). */
uint64_t rt_kv_token_bytes(const rt_kv_format *k, const rt_kv_format *v, int layers, int kv_heads, int head_dim);

#endif
