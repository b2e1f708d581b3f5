/* The CPU backend (runtime/backend.h): its state, the forward pass's ops on the host's kernels
 * (runtime/kernels.h, runtime/linear.h), and the pass over a call's rows. */
#include "runtime/backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/pass.h"

/* Query rows per attention task: the scores of a block are one small matrix product. */
#define ATT_ROWS 16
/* Attention runs on the pool from this much work (rows × cached tokens × dim) on: its heads are
 * in cache, so a decoded token's attention pays for a region well before a matrix product would
 * (GPT-2 decode at 64 tokens +6-10 % over RT_PARALLEL_MIN_WORK). */
#define ATT_PARALLEL_MIN_WORK 4096

/* One sequence's cache and the activations of up to max_tokens rows. */
typedef struct {
    const rt_model *m;
    rt_exec ex;
    int max_tokens, threads;
    float *x;          /* [T × dim] residual stream */
    float *xb, *xb2;   /* [T × dim] */
    float *q;          /* [T × dim] */
    float *qkv;        /* [T × 3·dim] GPT-2 */
    float *hb, *hb2;   /* [T × hidden] */
    float *kc, *vc;    /* [layers × T × kv_dim] */
    float *rope_cos, *rope_sin; /* [T × head_dim/2] */
    float *scores;     /* [threads × ATT_ROWS × T] */
} cpu_state;

static void cpu_state_free(void *st)
{
    cpu_state *s = st;
    if (!s)
        return;
    float *bufs[] = { s->x, s->xb, s->xb2, s->q, s->qkv, s->hb, s->hb2, s->kc, s->vc, s->rope_cos, s->rope_sin, s->scores };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(s);
}

static lmq_code cpu_state_create(const rt_model *m, const rt_exec *ex, int max_tokens, int seqs, void **out,
                                 lmq_err *err)
{
    (void)seqs; /* 1: max_seqs */
    *out = NULL;
    const lmq_arch *a = &m->arch;
    cpu_state *s = calloc(1, sizeof *s);
    if (!s)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory for the runtime state");
    s->m = m;
    s->ex = *ex;
    s->max_tokens = max_tokens;
    s->threads = lmq_pool_threads(ex->pool);
    const size_t T = (size_t)max_tokens, d = (size_t)a->dim, hd2 = (size_t)m->head_dim / 2;
    const size_t kv = (size_t)a->n_layers * T * (size_t)m->kv_dim;
    const int gpt2 = a->family == LMQ_FAMILY_GPT2;
    struct { float **p; size_t n; } need[] = {
        { &s->x, T * d }, { &s->xb, T * d }, { &s->xb2, T * d }, { &s->q, T * d },
        { &s->qkv, gpt2 ? 3 * T * d : 0 }, { &s->hb, T * (size_t)a->hidden_dim },
        { &s->hb2, gpt2 ? 0 : T * (size_t)a->hidden_dim }, { &s->kc, kv }, { &s->vc, kv },
        { &s->rope_cos, gpt2 ? 0 : T * hd2 }, { &s->rope_sin, gpt2 ? 0 : T * hd2 },
        { &s->scores, (size_t)s->threads * ATT_ROWS * T },
    };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) /* rows on cache lines, as the kernels load them */
        if (need[i].n && !(*need[i].p = aligned_alloc(64, (need[i].n * sizeof(float) + 63) / 64 * 64))) {
            cpu_state_free(s);
            return lmq_fail(err, LMQ_E_NOMEM, "out of memory for the runtime state (%d tokens)", max_tokens);
        }
    /* Rotation angles pos·theta^(−2i/head_dim), in double before rounding to float. */
    for (size_t p = 0; p < (gpt2 ? 0 : T); p++)
        for (size_t i = 0; i < hd2; i++) {
            double ang = (double)p * pow((double)a->rope_theta, -2.0 * (double)i / m->head_dim);
            s->rope_cos[p * hd2 + i] = (float)cos(ang);
            s->rope_sin[p * hd2 + i] = (float)sin(ang);
        }
    *out = s;
    return LMQ_OK;
}

/* ---------------------------------------------------------------- the ops */

/* A call on the CPU: its rows (tokens at positions pos0..), the caller's logits. */
typedef struct {
    cpu_state *s;
    const int32_t *tokens;
    int n, pos0;
    float *logits;
} cpu_call;

/* Buffer b of the call; K and V are rows of the layer's cache at the call's positions. */
static float *cpu_buf(const cpu_call *k, rt_buf b, int layer)
{
    cpu_state *s = k->s;
    if (b == RT_BUF_K || b == RT_BUF_V)
        return (b == RT_BUF_K ? s->kc : s->vc) +
               ((size_t)layer * (size_t)s->max_tokens + (size_t)k->pos0) * (size_t)s->m->kv_dim;
    float *const bufs[RT_BUF_COUNT] = { [RT_BUF_X] = s->x,     [RT_BUF_XB] = s->xb,   [RT_BUF_XB2] = s->xb2,
                                        [RT_BUF_Q] = s->q,     [RT_BUF_QKV] = s->qkv, [RT_BUF_HB] = s->hb,
                                        [RT_BUF_HB2] = s->hb2, [RT_BUF_LOGITS] = k->logits };
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
        else if (!(c = rt_weight_rows(s->ex.isa, W, k->pos0 + i, 1, s->xb, err)))
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
    float *yb = cpu_buf(k, y, layer), *xb = cpu_buf(k, x, layer);
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
    return rt_linear(&k->s->ex, cpu_buf(k, x, layer) + (size_t)r0 * (size_t)W->in, rows, W, cpu_buf(k, y, layer), err);
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

/* Unfused, the k and v rows are already in the cache (RT_BUF_K, RT_BUF_V); fused (GPT-2, whose
 * kv_dim is dim), the thirds of QKV's rows are copied there. */
static lmq_code cpu_rope_store(void *be, int layer, int fused, lmq_err *err)
{
    (void)err;
    const cpu_call *k = be;
    cpu_state *s = k->s;
    const lmq_arch *a = &s->m->arch;
    const size_t d = (size_t)a->dim, kvd = (size_t)s->m->kv_dim;
    float *q = s->q, *kc = cpu_buf(k, RT_BUF_K, layer), *vc = cpu_buf(k, RT_BUF_V, layer);
    for (int i = 0; fused && i < k->n; i++) {
        const float *r = s->qkv + (size_t)i * 3 * d;
        memcpy(q + i * d, r, d * sizeof(float));
        memcpy(kc + i * kvd, r + d, d * sizeof(float));
        memcpy(vc + i * kvd, r + 2 * d, d * sizeof(float));
    }
    for (int i = 0; i < k->n && a->rope != LMQ_ROPE_NONE; i++) {
        rope(s, q + i * d, a->n_heads, k->pos0 + i);
        rope(s, kc + i * kvd, a->n_kv_heads, k->pos0 + i);
    }
    return LMQ_OK;
}

typedef struct {
    cpu_state *s;
    int layer, n, pos0;
    int blocks, heads_per_task, groups; /* task t = row block t / groups, head group t % groups */
} attn_job;

/* One task = one block of ATT_ROWS query rows × a group of heads: scores against the cached
 * keys of positions 0..pos (causal) as one small matrix product per head, then per row the
 * softmax and the weighted sum of the cached values into xb2. */
static void attn_task(void *v, int64_t begin, int64_t end, int thread)
{
    const attn_job *j = v;
    cpu_state *s = j->s;
    const rt_model *m = s->m;
    const int hd = m->head_dim, kvd = m->kv_dim, d = m->arch.dim, T = s->max_tokens;
    const int group = m->arch.n_heads / m->arch.n_kv_heads;
    const float scale = 1.0f / sqrtf((float)hd);
    float *sc = s->scores + (size_t)thread * ATT_ROWS * T;
    for (int64_t t = begin; t < end; t++) {
        const int i0 = (int)(t / j->groups) * ATT_ROWS, h0 = (int)(t % j->groups) * j->heads_per_task;
        const int rows = j->n - i0 < ATT_ROWS ? j->n - i0 : ATT_ROWS;
        const int span = j->pos0 + i0 + rows; /* keys the block's last row sees */
        for (int h = h0; h < h0 + j->heads_per_task; h++) {
            const size_t kv_off = (size_t)j->layer * T * kvd + (size_t)(h / group) * hd;
            s->ex.isa->gemm_nt(s->q + (size_t)i0 * d + (size_t)h * hd, (size_t)d, s->kc + kv_off, (size_t)kvd, NULL,
                               sc, (size_t)span, rows, span, hd);
            for (int r = 0; r < rows; r++) {
                const int seen = j->pos0 + i0 + r + 1;
                float *row = sc + (size_t)r * span;
                const float sum = s->ex.isa->softmax_unnorm(row, seen, scale);
                s->ex.isa->wsum_rows(row, seen, s->vc + kv_off, (size_t)kvd, 1.0f / sum,
                                     s->xb2 + (size_t)(i0 + r) * d + (size_t)h * hd, hd);
            }
        }
    }
}

/* Whole rows per task when there are enough blocks to share out (no two threads write one row);
 * single heads otherwise (decoding). */
static lmq_code cpu_attention(void *be, int layer, lmq_err *err)
{
    (void)err;
    const cpu_call *k = be;
    cpu_state *s = k->s;
    const int heads = s->m->arch.n_heads;
    attn_job aj = { .s = s, .layer = layer, .n = k->n, .pos0 = k->pos0, .blocks = (k->n + ATT_ROWS - 1) / ATT_ROWS };
    aj.heads_per_task = aj.blocks >= 2 * s->threads ? heads : 1;
    aj.groups = heads / aj.heads_per_task;
    const int64_t work = (int64_t)k->n * (k->pos0 + k->n) * s->m->arch.dim;
    lmq_pool_for(work < ATT_PARALLEL_MIN_WORK ? NULL : s->ex.pool, (int64_t)aj.blocks * aj.groups, 1, attn_task, &aj);
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
    add_rows(cpu_buf(k, x, 0), cpu_buf(k, y, 0), (size_t)k->n * (size_t)k->s->m->arch.dim);
    return LMQ_OK;
}

static const rt_ops CPU_OPS = { cpu_has,       cpu_embed,         cpu_norm,       cpu_linear,
                                cpu_rope_store, cpu_attention, cpu_activation, cpu_add };


/* ---------------------------------------------------------------- the pass */

/* The rows of a call are one sequence's at consecutive positions (max_seqs 1). */
static lmq_code cpu_forward(void *st, const rt_call *call, lmq_err *err)
{
    cpu_call k = { .s = st, .tokens = call->tokens, .n = call->n, .pos0 = call->pos[0], .logits = call->logits };
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

const rt_backend rt_cpu_backend = { .name = "cpu", .label = "CPU", .max_seqs = 1, .devices = cpu_devices,
                                    .supports = cpu_supports, .state_create = cpu_state_create,
                                    .state_free = cpu_state_free, .forward = cpu_forward, .stream = cpu_stream };
