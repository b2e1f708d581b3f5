/* The CPU backend (runtime/backend.h): its state, the forward pass's ops on the host's kernels
 * (runtime/kernels.h, runtime/linear.h), and the pass over a call's rows. */
#include "runtime/backend.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/kv.h"
#include "runtime/pass.h"

/* Query rows per attention task: the scores of a block are one small matrix product. */
#define ATT_ROWS 16
/* Attention runs on the pool from this much work (rows × cached tokens × dim) on: its heads are
 * in cache, so a decoded token's attention pays for a region well before a matrix product would
 * (GPT-2 decode at 64 tokens +6-10 % over RT_PARALLEL_MIN_WORK). */
#define ATT_PARALLEL_MIN_WORK 4096

/* Each sequence's cache, in the state's formats, and the activations of up to `rows` rows
 * (max_tokens of one sequence, or one per sequence when decoding them together). */
typedef struct {
    const rt_model *m;
    rt_exec ex;
    const rt_kv_format *kf, *vf; /* the cache's formats for keys and values */
    int max_tokens, seqs, threads;
    size_t k_row, v_row; /* bytes of one position's keys, values (all kv heads) */
    float *x;          /* [rows × dim] residual stream */
    float *xb, *xb2;   /* [rows × dim] */
    float *q;          /* [rows × dim] */
    float *kb, *vb;    /* [rows × kv_dim] the call's keys and values before the cache */
    float *qkv;        /* [rows × 3·dim] GPT-2 */
    float *hb, *hb2;   /* [rows × hidden] */
    uint8_t *kc, *vc;  /* [seqs × layers × T × k_row, v_row] */
    float *rope_cos, *rope_sin; /* [T × head_dim/2] */
    float *scores;     /* [threads × ATT_ROWS × T] */
    float *tile;       /* [threads × 2 × T × head_dim]: a head's keys and values as fp32 (not fp32 caches) */
    int *blk;          /* [rows + 1]: the first row of each attention block of a call, then n */
} cpu_state;

static void cpu_state_free(void *st)
{
    cpu_state *s = st;
    if (!s)
        return;
    void *bufs[] = { s->x,  s->xb,       s->xb2,      s->q,      s->kb,   s->vb,  s->qkv, s->hb,
                     s->hb2, s->kc,      s->vc,       s->rope_cos, s->rope_sin, s->scores, s->tile, s->blk };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(s);
}

static lmq_code cpu_state_create(const rt_model *m, const rt_exec *ex, int max_tokens, int seqs, void **out,
                                 lmq_err *err)
{
    *out = NULL;
    const lmq_arch *a = &m->arch;
    const rt_kv_format *fp32 = rt_kv_find("fp32");
    const rt_kv_format *kf = ex->kv_k ? ex->kv_k : fp32, *vf = ex->kv_v ? ex->kv_v : fp32;
    const int hd = m->head_dim;
    for (int i = 0; i < 2; i++)
        if ((hd % RT_KV_BLOCK) * (i ? vf : kf)->bits % 8)
            return lmq_fail(err, LMQ_E_UNSUPPORTED, "KV cache %s: head_dim %d leaves a block of %d elements, not "
                            "whole bytes", (i ? vf : kf)->name, hd, hd % RT_KV_BLOCK);
    cpu_state *s = calloc(1, sizeof *s);
    if (!s)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory for the runtime state");
    s->m = m;
    s->ex = *ex;
    s->kf = kf;
    s->vf = vf;
    s->max_tokens = max_tokens;
    s->seqs = seqs;
    s->threads = lmq_pool_threads(ex->pool);
    s->k_row = (size_t)a->n_kv_heads * rt_kv_head_bytes(kf, hd);
    s->v_row = (size_t)a->n_kv_heads * rt_kv_head_bytes(vf, hd);
    const size_t T = (size_t)max_tokens, R = (size_t)(max_tokens > seqs ? max_tokens : seqs);
    const size_t d = (size_t)a->dim, hd2 = (size_t)hd / 2, kvd = (size_t)m->kv_dim, F = sizeof(float);
    const size_t positions = (size_t)seqs * (size_t)a->n_layers * T;
    const int gpt2 = a->family == LMQ_FAMILY_GPT2, tiles = kf != fp32 || vf != fp32;
    struct { void **p; size_t bytes; } need[] = {
        { (void **)&s->x, R * d * F }, { (void **)&s->xb, R * d * F }, { (void **)&s->xb2, R * d * F },
        { (void **)&s->q, R * d * F }, { (void **)&s->kb, R * kvd * F }, { (void **)&s->vb, R * kvd * F },
        { (void **)&s->qkv, gpt2 ? 3 * R * d * F : 0 }, { (void **)&s->hb, R * (size_t)a->hidden_dim * F },
        { (void **)&s->hb2, gpt2 ? 0 : R * (size_t)a->hidden_dim * F },
        { (void **)&s->kc, positions * s->k_row }, { (void **)&s->vc, positions * s->v_row },
        { (void **)&s->rope_cos, gpt2 ? 0 : T * hd2 * F }, { (void **)&s->rope_sin, gpt2 ? 0 : T * hd2 * F },
        { (void **)&s->scores, (size_t)s->threads * ATT_ROWS * T * F },
        { (void **)&s->tile, tiles ? (size_t)s->threads * 2 * T * (size_t)hd * F : 0 },
        { (void **)&s->blk, (R + 1) * sizeof(int) },
    };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) /* rows on cache lines, as the kernels load them */
        if (need[i].bytes && !(*need[i].p = aligned_alloc(64, (need[i].bytes + 63) / 64 * 64))) {
            cpu_state_free(s);
            return lmq_fail(err, LMQ_E_NOMEM, "out of memory for the runtime state (%d sequences of %d tokens)",
                            seqs, max_tokens);
        }
    /* Rotation angles pos·theta^(−2i/head_dim), in double before rounding to float. */
    for (size_t p = 0; p < (gpt2 ? 0 : T); p++)
        for (size_t i = 0; i < hd2; i++) {
            double ang = (double)p * pow((double)a->rope_theta, -2.0 * (double)i / hd);
            s->rope_cos[p * hd2 + i] = (float)cos(ang);
            s->rope_sin[p * hd2 + i] = (float)sin(ang);
        }
    *out = s;
    return LMQ_OK;
}

/* Where position pos of sequence seq's layer keeps its keys (v 0) or values (v 1). */
static uint8_t *cache_row(const cpu_state *s, int v, int seq, int layer, int pos)
{
    const size_t at = ((size_t)seq * (size_t)s->m->arch.n_layers + (size_t)layer) * (size_t)s->max_tokens + (size_t)pos;
    return v ? s->vc + at * s->v_row : s->kc + at * s->k_row;
}

/* ---------------------------------------------------------------- the ops */

/* A call on the CPU: its rows (row i token tokens[i] of sequence seqs[i] at position pos[i]),
 * the caller's logits. */
typedef struct {
    cpu_state *s;
    const int32_t *tokens, *seqs, *pos;
    int n;
    float *logits;
} cpu_call;

/* Buffer b of the call. */
static float *cpu_buf(const cpu_call *k, rt_buf b)
{
    cpu_state *s = k->s;
    float *const bufs[RT_BUF_COUNT] = { [RT_BUF_X] = s->x,     [RT_BUF_XB] = s->xb,   [RT_BUF_XB2] = s->xb2,
                                        [RT_BUF_Q] = s->q,     [RT_BUF_K] = s->kb,    [RT_BUF_V] = s->vb,
                                        [RT_BUF_QKV] = s->qkv, [RT_BUF_HB] = s->hb,   [RT_BUF_HB2] = s->hb2,
                                        [RT_BUF_LOGITS] = k->logits };
    return bufs[b];
}

static int cpu_has(void *be, int layer, rt_wslot w)
{
    return rt_model_weight(((cpu_call *)be)->s->m, layer, w)->data != NULL;
}

static void add_rows(float *x, const float *y, size_t count)
{
    for (size_t i = 0; i < count; i++)
        x[i] += y[i];
}

static lmq_code cpu_embed(void *be, rt_wslot w, lmq_err *err)
{
    const cpu_call *k = be;
    cpu_state *s = k->s;
    const size_t d = (size_t)s->m->arch.dim;
    const rt_weight *W = rt_model_weight(s->m, -1, w);
    lmq_code c = LMQ_OK;
    for (int i = 0; i < k->n && !c; i++) {
        if (w == RT_W_TOK)
            c = rt_weight_rows(s->ex.isa, W, k->tokens[i], 1, s->x + i * d, err);
        else if (!(c = rt_weight_rows(s->ex.isa, W, k->pos[i], 1, s->xb, err)))
            add_rows(s->x + i * d, s->xb, d);
    }
    return c;
}

static void layernorm(float *y, const float *x, const float *w, const float *b, int d, float eps)
{
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < d; i++)
        mean += x[i];
    mean /= d;
    for (int i = 0; i < d; i++)
        var += (x[i] - mean) * (x[i] - mean);
    const double inv = 1.0 / sqrt(var / d + eps);
    for (int i = 0; i < d; i++)
        y[i] = (float)((x[i] - mean) * inv) * w[i] + b[i];
}

static void rmsnorm(float *y, const float *x, const float *w, int d, float eps)
{
    double ss = 0.0;
    for (int i = 0; i < d; i++)
        ss += (double)x[i] * x[i];
    const float inv = (float)(1.0 / sqrt(ss / d + eps));
    for (int i = 0; i < d; i++)
        y[i] = w[i] * (inv * x[i]);
}

static lmq_code cpu_norm(void *be, int layer, rt_norm which, rt_buf y, rt_buf x, int r0, int rows, lmq_err *err)
{
    (void)err;
    const cpu_call *k = be;
    const rt_model *m = k->s->m;
    const int d = m->arch.dim;
    const rt_layer *L = layer >= 0 ? &m->layers[layer] : NULL;
    const float *w = which == RT_NORM_OUT ? m->out_norm_w : which == RT_NORM_ATTN ? L->attn_norm_w : L->ffn_norm_w;
    const float *b = which == RT_NORM_OUT ? m->out_norm_b : which == RT_NORM_ATTN ? L->attn_norm_b : L->ffn_norm_b;
    float *yb = cpu_buf(k, y), *xb = cpu_buf(k, x);
    for (int i = r0; i < r0 + rows; i++) {
        if (b)
            layernorm(yb + (size_t)i * d, xb + (size_t)i * d, w, b, d, m->arch.norm_eps);
        else
            rmsnorm(yb + (size_t)i * d, xb + (size_t)i * d, w, d, m->arch.norm_eps);
    }
    return LMQ_OK;
}

static lmq_code cpu_linear(void *be, int layer, rt_wslot w, rt_buf x, int r0, int rows, rt_buf y, lmq_err *err)
{
    const cpu_call *k = be;
    const rt_weight *W = rt_model_weight(k->s->m, layer, w);
    return rt_linear(&k->s->ex, cpu_buf(k, x) + (size_t)r0 * (size_t)W->in, rows, W, cpu_buf(k, y), err);
}

/* Rotates each head's pairs of v[n_heads × head_dim] by the angles of position pos. */
static void rope(const cpu_state *s, float *v, int n_heads, int pos)
{
    const int hd = s->m->head_dim, half = hd / 2;
    const int interleaved = s->m->arch.rope == LMQ_ROPE_INTERLEAVED;
    const float *c = s->rope_cos + (size_t)pos * half, *sn = s->rope_sin + (size_t)pos * half;
    for (int h = 0; h < n_heads; h++) {
        float *head = v + (size_t)h * hd;
        for (int i = 0; i < half; i++) {
            float *a = interleaved ? &head[2 * i] : &head[i], *b = interleaved ? &head[2 * i + 1] : &head[i + half];
            float x0 = *a, x1 = *b;
            *a = x0 * c[i] - x1 * sn[i];
            *b = x0 * sn[i] + x1 * c[i];
        }
    }
}

/* The call's k and v rows (K and V, or fused, GPT-2's, the thirds of QKV's rows) into each
 * row's sequence's cache at its position, in the cache's formats, after the rotation. */
static lmq_code cpu_rope_store(void *be, int layer, int fused, lmq_err *err)
{
    (void)err;
    const cpu_call *k = be;
    cpu_state *s = k->s;
    const lmq_arch *a = &s->m->arch;
    const size_t d = (size_t)a->dim, kvd = (size_t)s->m->kv_dim;
    for (int i = 0; i < k->n; i++) {
        float *q = s->q + i * d, *kr = s->kb + i * kvd, *vr = s->vb + i * kvd;
        if (fused) {
            const float *r = s->qkv + (size_t)i * 3 * d;
            memcpy(q, r, d * sizeof(float));
            memcpy(kr, r + d, kvd * sizeof(float));
            memcpy(vr, r + 2 * d, kvd * sizeof(float));
        }
        if (a->rope != LMQ_ROPE_NONE) {
            rope(s, q, a->n_heads, k->pos[i]);
            rope(s, kr, a->n_kv_heads, k->pos[i]);
        }
        rt_kv_store(s->kf, kr, a->n_kv_heads, s->m->head_dim, cache_row(s, 0, k->seqs[i], layer, k->pos[i]));
        rt_kv_store(s->vf, vr, a->n_kv_heads, s->m->head_dim, cache_row(s, 1, k->seqs[i], layer, k->pos[i]));
    }
    return LMQ_OK;
}

typedef struct {
    const cpu_call *k;
    int layer;
    int heads_per_task, groups; /* task t = block t / groups, head group t % groups */
} attn_job;

/* Positions 0..span-1 of kv head kvh of one sequence's layer (v: the values) as fp32 rows: the
 * cache itself when it is fp32 (row stride kv_dim), else dequantised into tile (stride head_dim). */
static const float *kv_rows(const cpu_state *s, int v, int seq, int layer, int kvh, int span, float *tile,
                            size_t *ld)
{
    const rt_kv_format *f = v ? s->vf : s->kf;
    const int hd = s->m->head_dim;
    const uint8_t *row = cache_row(s, v, seq, layer, 0);
    const size_t stride = v ? s->v_row : s->k_row, head = rt_kv_head_bytes(f, hd);
    if (f->bits == 32 && !f->scale_bytes) {
        *ld = (size_t)s->m->kv_dim;
        return (const float *)(const void *)row + (size_t)kvh * hd;
    }
    for (int p = 0; p < span; p++)
        rt_kv_load(f, row + (size_t)p * stride + (size_t)kvh * head, 1, hd, tile + (size_t)p * hd);
    *ld = (size_t)hd;
    return tile;
}

/* One task = one block of up to ATT_ROWS query rows of one sequence × a group of heads: scores
 * against the cached keys of positions 0..pos (causal) as one small matrix product per head,
 * then per row the softmax and the weighted sum of the cached values into xb2. */
static void attn_task(void *v, int64_t begin, int64_t end, int thread)
{
    const attn_job *j = v;
    const cpu_call *k = j->k;
    cpu_state *s = k->s;
    const rt_model *m = s->m;
    const int hd = m->head_dim, d = m->arch.dim, T = s->max_tokens;
    const int group = m->arch.n_heads / m->arch.n_kv_heads;
    const float scale = 1.0f / sqrtf((float)hd);
    float *sc = s->scores + (size_t)thread * ATT_ROWS * T;
    float *kt = s->tile ? s->tile + (size_t)thread * 2 * T * hd : NULL, *vt = kt ? kt + (size_t)T * hd : NULL;
    for (int64_t t = begin; t < end; t++) {
        const int b = (int)(t / j->groups), h0 = (int)(t % j->groups) * j->heads_per_task;
        const int i0 = s->blk[b], rows = s->blk[b + 1] - i0, seq = k->seqs[i0], p0 = k->pos[i0];
        const int span = p0 + rows; /* keys the block's last row sees */
        const float *keys = NULL, *vals = NULL;
        size_t ldk = 0, ldv = 0;
        for (int h = h0, kvh = -1; h < h0 + j->heads_per_task; h++) {
            if (h / group != kvh) { /* the heads of a group share their kv head's rows */
                kvh = h / group;
                keys = kv_rows(s, 0, seq, j->layer, kvh, span, kt, &ldk);
                vals = kv_rows(s, 1, seq, j->layer, kvh, span, vt, &ldv);
            }
            s->ex.isa->gemm_nt(s->q + (size_t)i0 * d + (size_t)h * hd, (size_t)d, keys, ldk, NULL, sc, (size_t)span,
                               rows, span, hd);
            for (int r = 0; r < rows; r++) {
                const int seen = p0 + r + 1;
                float *row = sc + (size_t)r * span;
                const float sum = s->ex.isa->softmax_unnorm(row, seen, scale);
                s->ex.isa->wsum_rows(row, seen, vals, ldv, 1.0f / sum, s->xb2 + (size_t)(i0 + r) * d + (size_t)h * hd,
                                     hd);
            }
        }
    }
}

/* Blocks of up to ATT_ROWS consecutive rows of one sequence. Whole rows per task when there are
 * enough blocks to share out (no two threads write one row); single heads otherwise. */
static lmq_code cpu_attention(void *be, int layer, lmq_err *err)
{
    (void)err;
    const cpu_call *k = be;
    cpu_state *s = k->s;
    const int heads = s->m->arch.n_heads;
    int blocks = 0;
    int64_t work = 0;
    for (int i = 0; i < k->n; i++)
        if (!i || k->seqs[i] != k->seqs[i - 1] || i - s->blk[blocks - 1] == ATT_ROWS)
            s->blk[blocks++] = i;
    s->blk[blocks] = k->n;
    for (int b = 0; b < blocks; b++)
        work += (int64_t)(s->blk[b + 1] - s->blk[b]) * (k->pos[s->blk[b + 1] - 1] + 1) * s->m->arch.dim;
    attn_job aj = { .k = k, .layer = layer, .heads_per_task = blocks >= 2 * s->threads ? heads : 1 };
    aj.groups = heads / aj.heads_per_task;
    lmq_pool_for(work < ATT_PARALLEL_MIN_WORK ? NULL : s->ex.pool, (int64_t)blocks * aj.groups, 1, attn_task, &aj);
    return LMQ_OK;
}

typedef struct {
    const rt_kernels *isa;
    float *g;
    const float *u; /* NULL: GELU on g; else g ← silu(g)·u */
} act_job;

static void act_task(void *v, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const act_job *j = v;
    if (j->u)
        j->isa->silu_mul(j->g + begin, j->u + begin, (int)(end - begin));
    else
        j->isa->gelu_tanh(j->g + begin, (int)(end - begin));
}

static lmq_code cpu_activation(void *be, int gated, lmq_err *err)
{
    (void)err;
    const cpu_call *k = be;
    cpu_state *s = k->s;
    act_job act = { .isa = s->ex.isa, .g = s->hb, .u = gated ? s->hb2 : NULL };
    lmq_pool_for(s->ex.pool, (int64_t)k->n * s->m->arch.hidden_dim, 4096, act_task, &act);
    return LMQ_OK;
}

static lmq_code cpu_add(void *be, rt_buf x, rt_buf y, lmq_err *err)
{
    (void)err;
    const cpu_call *k = be;
    add_rows(cpu_buf(k, x), cpu_buf(k, y), (size_t)k->n * (size_t)k->s->m->arch.dim);
    return LMQ_OK;
}

static const rt_ops CPU_OPS = { cpu_has,       cpu_embed,         cpu_norm,       cpu_linear,
                                cpu_rope_store, cpu_attention, cpu_activation, cpu_add };


/* ---------------------------------------------------------------- the pass */

static lmq_code cpu_forward(void *st, const rt_call *call, lmq_err *err)
{
    cpu_call k = { .s = st, .tokens = call->tokens, .seqs = call->seqs, .pos = call->pos, .n = call->n,
                   .logits = call->logits };
    const rt_pass_rows p = { .n = call->n, .embed = call->tokens != NULL, .from = call->from, .to = call->to,
                             .logits_from = call->logits_from };
    return rt_pass(&CPU_OPS, &k, &p, err);
}

static float *cpu_stream(void *st)
{
    return ((cpu_state *)st)->x;
}

static int cpu_devices(void)
{
    return 1;
}

/* rt_linear's generic path decodes any numeric encoding of the scheme table. */
static int cpu_supports(const rt_weight *W, char *why, size_t size)
{
    const q_scheme *s = q_scheme_get(W->q.dtype);
    if (s && s->decode)
        return 1;
    snprintf(why, size, "%s: not a numeric encoding", W->name ? W->name : "weight");
    return 0;
}

const rt_backend rt_cpu_backend = { .name = "cpu", .label = "CPU", .max_seqs = INT_MAX, .devices = cpu_devices,
                                    .supports = cpu_supports, .state_create = cpu_state_create,
                                    .state_free = cpu_state_free, .forward = cpu_forward, .stream = cpu_stream };
