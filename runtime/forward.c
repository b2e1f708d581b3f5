#include "runtime/forward.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/backend.h"
#include "runtime/pass.h"

/* ---------------------------------------------------------------- the model view */

/* Norm weights and biases as fp32: the stored values when fp32, else decoded once into a buffer
 * the model owns (vectors are small; matrices are never copied). */
static lmq_code vector(rt_model *rm, const lmq_model *m, const char *name, const float **out, lmq_err *err)
{
    *out = NULL;
    const lmq_tensor *t = lmq_model_find(m, name);
    if (!t || t->data) {
        *out = t ? t->data : NULL;
        return LMQ_OK;
    }
    const int64_t n = lmq_tensor_numel(t);
    float *v = malloc((size_t)n * sizeof *v);
    void **grown = realloc(rm->owned, (size_t)(rm->n_owned + 1) * sizeof *grown);
    if (!v || !grown) {
        free(v);
        if (grown)
            rm->owned = grown;
        return lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory", name);
    }
    rm->owned = grown;
    rm->owned[rm->n_owned++] = v;
    if (q_dequantize(&t->q, t->raw, t->raw_size, 1, n, v, NULL, err))
        return lmq_err_prefix(err, "tensor %s: ", name);
    *out = v;
    return LMQ_OK;
}

static lmq_code weight(rt_model *rm, const lmq_model *m, const char *name, const char *bias, rt_weight *W,
                       lmq_err *err)
{
    const float *b = NULL;
    lmq_code c = bias ? vector(rm, m, bias, &b, err) : LMQ_OK;
    return c ? c : rt_weight_of(lmq_model_find(m, name), b, W, err);
}

/* A block's matrices by slot: the tensor's name and which models have it and its bias. */
enum { GPT2 = 1, LLAMA = 2, QKV_BIAS = 4 /* Llama's when the model has attn_q.bias (Qwen2) */ };
static const struct {
    const char *name;
    unsigned in, bias;
} BLOCK[RT_W_BLOCK] = {
    [RT_W_QKV] = { "attn_qkv", GPT2, GPT2 },         [RT_W_Q] = { "attn_q", GPT2 | LLAMA, GPT2 | QKV_BIAS },
    [RT_W_K] = { "attn_k", GPT2 | LLAMA, GPT2 | QKV_BIAS }, [RT_W_V] = { "attn_v", GPT2 | LLAMA, GPT2 | QKV_BIAS },
    [RT_W_OUT] = { "attn_out", GPT2 | LLAMA, GPT2 }, [RT_W_GATE] = { "ffn_gate", LLAMA, 0 },
    [RT_W_UP] = { "ffn_up", GPT2 | LLAMA, GPT2 },    [RT_W_DOWN] = { "ffn_down", GPT2 | LLAMA, GPT2 },
};

/* Block l's norms and matrices. lmq_model_validate checked which the model has: GPT-2 q, k, v
 * fused or not, Llama biases on all three or none. */
static lmq_code layer_init(rt_model *rm, const lmq_model *m, int l, lmq_err *err)
{
    const int gpt2 = rm->arch.family == LMQ_FAMILY_GPT2;
    rt_layer *L = &rm->layers[l];
    char n[2][LMQ_NAME_MAX];
#define NAME(i, what, part) (snprintf(n[i], sizeof n[i], "blk.%d.%s%s", l, what, part), n[i])
    const unsigned family = gpt2 ? GPT2 : LLAMA | (lmq_model_find(m, NAME(1, "attn_q", ".bias")) ? QKV_BIAS : 0);
    lmq_code c;
    if ((c = vector(rm, m, NAME(0, "attn_norm", ".weight"), &L->attn_norm_w, err)) ||
        (c = vector(rm, m, NAME(0, "ffn_norm", ".weight"), &L->ffn_norm_w, err)) ||
        (gpt2 && (c = vector(rm, m, NAME(0, "attn_norm", ".bias"), &L->attn_norm_b, err))) ||
        (gpt2 && (c = vector(rm, m, NAME(0, "ffn_norm", ".bias"), &L->ffn_norm_b, err))))
        return c;
    for (int w = 0; w < RT_W_BLOCK; w++)
        if ((BLOCK[w].in & family) && lmq_model_find(m, NAME(0, BLOCK[w].name, ".weight")) &&
            (c = weight(rm, m, n[0], BLOCK[w].bias & family ? NAME(1, BLOCK[w].name, ".bias") : NULL, &L->w[w], err)))
            return c;
    return LMQ_OK;
#undef NAME
}

lmq_code rt_model_init(rt_model *rm, const lmq_model *m, lmq_err *err)
{
    memset(rm, 0, sizeof *rm);
    lmq_code c = lmq_model_validate(m, err);
    if (c)
        return c;
    const lmq_arch *a = &m->arch;
    const int gpt2 = a->family == LMQ_FAMILY_GPT2;
    if (!(a->norm_eps >= 0.0f) || !isfinite(a->norm_eps))
        return lmq_fail(err, LMQ_E_FORMAT, "norm epsilon %g is not a finite non-negative number", (double)a->norm_eps);
    if (gpt2 && (a->rope != LMQ_ROPE_NONE || a->n_kv_heads != a->n_heads))
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "GPT-2 model with rope layout %d or %d kv heads for %d heads",
                        (int)a->rope, a->n_kv_heads, a->n_heads);
    if (!gpt2 && ((a->rope != LMQ_ROPE_INTERLEAVED && a->rope != LMQ_ROPE_HALF) || (a->dim / a->n_heads) % 2 ||
                  !(a->rope_theta > 0.0f) || !isfinite(a->rope_theta)))
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "Llama model needs an interleaved or half rope layout over an "
                        "even head size and theta > 0 (layout %d, head size %d, theta %g)", (int)a->rope,
                        a->dim / a->n_heads, (double)a->rope_theta);
    rm->arch = *a;
    rm->head_dim = a->dim / a->n_heads;
    rm->kv_dim = rm->head_dim * a->n_kv_heads;
    rm->layers = calloc((size_t)a->n_layers, sizeof *rm->layers);
    if (!rm->layers)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory for %d layers", a->n_layers);
    /* A tied classifier reads tok_embd.weight, unless quantize stored its own copy. */
    const char *cls = lmq_model_find(m, "output.weight") ? "output.weight" : "tok_embd.weight";
    if ((c = weight(rm, m, "tok_embd.weight", NULL, &rm->tok_embd, err)) ||
        (gpt2 && (c = weight(rm, m, "pos_embd.weight", NULL, &rm->pos_embd, err))) ||
        (c = vector(rm, m, "out_norm.weight", &rm->out_norm_w, err)) ||
        (gpt2 && (c = vector(rm, m, "out_norm.bias", &rm->out_norm_b, err))) ||
        (c = weight(rm, m, cls, NULL, &rm->classifier, err)))
        goto fail;
    for (int l = 0; l < a->n_layers; l++)
        if ((c = layer_init(rm, m, l, err)))
            goto fail;
    return LMQ_OK;
fail:
    rt_model_free(rm);
    return c;
}

void rt_model_free(rt_model *rm)
{
    for (int i = 0; i < rm->n_owned; i++)
        free(rm->owned[i]);
    free(rm->owned);
    free(rm->layers);
    memset(rm, 0, sizeof *rm);
}

const rt_weight *rt_model_weight(const rt_model *rm, int layer, rt_wslot w)
{
    return w == RT_W_TOK ? &rm->tok_embd
           : w == RT_W_POS ? &rm->pos_embd
           : w == RT_W_CLS ? &rm->classifier
                           : &rm->layers[layer].w[w];
}

void rt_model_each_streamed(const rt_model *rm, void (*fn)(const rt_weight *W, void *ctx), void *ctx)
{
    for (int l = 0; l < rm->arch.n_layers; l++)
        for (int w = 0; w < RT_W_BLOCK; w++)
            if (rm->layers[l].w[w].data)
                fn(&rm->layers[l].w[w], ctx);
    fn(&rm->classifier, ctx);
}

static void add_bytes(const rt_weight *W, void *bytes)
{
    *(uint64_t *)bytes += W->L.bytes;
}

uint64_t rt_model_weight_bytes(const rt_model *rm)
{
    uint64_t bytes = 0;
    rt_model_each_streamed(rm, add_bytes, &bytes);
    return bytes;
}

/* ---------------------------------------------------------------- the state */

/* Query rows per attention task: the scores of a block are one small matrix product. */
#define ATT_ROWS 16
/* Attention runs on the pool from this much work (rows × cached tokens × dim) on: its heads are
 * in cache, so a decoded token's attention pays for a region well before a matrix product would
 * (GPT-2 decode at 64 tokens +6-10 % over RT_PARALLEL_MIN_WORK). */
#define ATT_PARALLEL_MIN_WORK 4096

struct rt_state {
    const rt_model *m;
    rt_exec ex;
    int max_tokens, filled, threads;
    float *x;          /* [T × dim] residual stream */
    float *xb, *xb2;   /* [T × dim] */
    float *q;          /* [T × dim] */
    float *qkv;        /* [T × 3·dim] GPT-2 */
    float *hb, *hb2;   /* [T × hidden] */
    float *kc, *vc;    /* [layers × T × kv_dim] */
    float *rope_cos, *rope_sin; /* [T × head_dim/2] */
    float *scores;     /* [threads × ATT_ROWS × T] */
    /* ex.device = cuda: the plugin's copy of the model and its state run every pass, and none
     * of the buffers above exist. fill[q]: positions sequence q holds; ids: a call's positions. */
    const rtc_api *cu;
    rtc_ctx *dc;
    rtc_model *dm;
    rtc_state *ds;
    int seqs, *fill;
    int32_t *ids;
};

const rt_model *rt_state_model(const rt_state *s) { return s->m; }
int rt_state_max_tokens(const rt_state *s) { return s->max_tokens; }
const rt_exec *rt_state_exec(const rt_state *s) { return &s->ex; }

void rt_state_free(rt_state *s)
{
    if (!s)
        return;
    float *bufs[] = { s->x, s->xb, s->xb2, s->q, s->qkv, s->hb, s->hb2, s->kc, s->vc, s->rope_cos, s->rope_sin, s->scores };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    if (s->cu) {
        s->cu->state_free(s->ds);
        s->cu->model_free(s->dm);
        s->cu->close(s->dc);
    }
    free(s->fill);
    free(s->ids);
    free(s);
}

/* The state on the CUDA device: the model uploaded, the plugin's state for seqs sequences. */
static lmq_code state_on_cuda(rt_state *s, lmq_err *err)
{
    lmq_code c = (s->cu = rt_cuda(err)) ? s->cu->open(0, &s->dc, err) : LMQ_E_UNSUPPORTED;
    if (c) {
        s->cu = NULL;
        return c;
    }
    if (!(c = s->cu->model_upload(s->dc, s->m, &s->dm, err)))
        c = s->cu->state_create(s->dc, s->dm, s->max_tokens, s->seqs, &s->ds, err);
    return c;
}

lmq_code rt_state_create(const rt_model *m, const rt_exec *ex, int max_tokens, rt_state **out, lmq_err *err)
{
    return rt_state_create_seqs(m, ex, max_tokens, 1, out, err);
}

lmq_code rt_state_create_seqs(const rt_model *m, const rt_exec *ex, int max_tokens, int seqs, rt_state **out,
                              lmq_err *err)
{
    *out = NULL;
    const lmq_arch *a = &m->arch;
    if (max_tokens == 0)
        max_tokens = a->max_seq;
    if (max_tokens < 1 || max_tokens > a->max_seq)
        return lmq_fail(err, LMQ_E_ARG, "state for %d tokens: the model's context is 1..%d", max_tokens, a->max_seq);
    if (seqs < 1)
        return lmq_fail(err, LMQ_E_ARG, "a state for %d sequences", seqs);
    if (seqs > 1 && ex->device != RT_DEVICE_CUDA)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "a state for %d sequences: batched decoding runs on the cuda device "
                        "only", seqs);
    rt_state *s = calloc(1, sizeof *s);
    if (!s)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory for the runtime state");
    s->m = m;
    s->ex = *ex;
    s->max_tokens = max_tokens;
    s->seqs = seqs;
    if (ex->device == RT_DEVICE_CUDA) {
        const size_t rows = (size_t)(max_tokens > seqs ? max_tokens : seqs);
        s->fill = calloc((size_t)seqs, sizeof *s->fill);
        s->ids = malloc(2 * rows * sizeof *s->ids); /* a call's positions and sequences */
        lmq_code c = s->fill && s->ids ? state_on_cuda(s, err)
                                       : lmq_fail(err, LMQ_E_NOMEM, "out of memory for the runtime state");
        if (c) {
            rt_state_free(s);
            return c;
        }
        *out = s;
        return LMQ_OK;
    }
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
            rt_state_free(s);
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

/* ---------------------------------------------------------------- the CPU backend's ops */

/* A call on the CPU: its rows (tokens at positions pos0..), the caller's logits. */
typedef struct {
    rt_state *s;
    const int32_t *tokens;
    int n, pos0;
    float *logits;
} cpu_call;

/* Buffer b of the call; K and V are rows of the layer's cache at the call's positions. */
static float *cpu_buf(const cpu_call *k, rt_buf b, int layer)
{
    rt_state *s = k->s;
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
    rt_state *s = k->s;
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
static void rope(const rt_state *s, float *v, int n_heads, int pos)
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
    rt_state *s = k->s;
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
    rt_state *s;
    int layer, n, pos0;
    int blocks, heads_per_task, groups; /* task t = row block t / groups, head group t % groups */
} attn_job;

/* One task = one block of ATT_ROWS query rows × a group of heads: scores against the cached
 * keys of positions 0..pos (causal) as one small matrix product per head, then per row the
 * softmax and the weighted sum of the cached values into xb2. */
static void attn_task(void *v, int64_t begin, int64_t end, int thread)
{
    const attn_job *j = v;
    rt_state *s = j->s;
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
            rt_gemm_nt(s->ex.isa, s->q + (size_t)i0 * d + (size_t)h * hd, (size_t)d, s->kc + kv_off, (size_t)kvd,
                       NULL, sc, (size_t)span, rows, span, hd);
            for (int r = 0; r < rows; r++) {
                const int seen = j->pos0 + i0 + r + 1;
                float *row = sc + (size_t)r * span;
                const float sum = rt_softmax_unnorm(s->ex.isa, row, seen, scale);
                rt_wsum_rows(s->ex.isa, row, seen, s->vc + kv_off, (size_t)kvd, 1.0f / sum,
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
    rt_state *s = k->s;
    const int heads = s->m->arch.n_heads;
    attn_job aj = { .s = s, .layer = layer, .n = k->n, .pos0 = k->pos0, .blocks = (k->n + ATT_ROWS - 1) / ATT_ROWS };
    aj.heads_per_task = aj.blocks >= 2 * s->threads ? heads : 1;
    aj.groups = heads / aj.heads_per_task;
    const int64_t work = (int64_t)k->n * (k->pos0 + k->n) * s->m->arch.dim;
    lmq_pool_for(work < ATT_PARALLEL_MIN_WORK ? NULL : s->ex.pool, (int64_t)aj.blocks * aj.groups, 1, attn_task, &aj);
    return LMQ_OK;
}

typedef struct {
    rt_isa isa;
    float *g;
    const float *u; /* NULL: GELU on g; else g ← silu(g)·u */
} act_job;

static void act_task(void *v, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const act_job *j = v;
    if (j->u)
        rt_silu_mul(j->isa, j->g + begin, j->u + begin, (int)(end - begin));
    else
        rt_gelu_tanh(j->isa, j->g + begin, (int)(end - begin));
}

static lmq_code cpu_activation(void *be, int gated, lmq_err *err)
{
    (void)err;
    const cpu_call *k = be;
    rt_state *s = k->s;
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

/* ---------------------------------------------------------------- the forward pass */

/* The arguments of a pass of n tokens (NULL: the residual stream as it stands) at pos0 over a
 * sequence holding `filled` positions. */
static lmq_code check_call(const rt_state *s, const int32_t *tokens, int n, int pos0, int filled, rt_logits which,
                           const float *logits, lmq_err *err)
{
    const int T = s->max_tokens, vocab = s->m->arch.vocab_size;
    if (n < 1 || pos0 < 0 || pos0 > filled || pos0 > T - n)
        return lmq_fail(err, LMQ_E_ARG, "forward of %d tokens at position %d: the state holds %d of %d positions",
                        n, pos0, filled, T);
    for (int i = 0; tokens && i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= vocab)
            return lmq_fail(err, LMQ_E_ARG, "token %d at position %d is outside the vocabulary (%d)", tokens[i],
                            pos0 + i, vocab);
    if (which != RT_LOGITS_NONE && !logits)
        return lmq_fail(err, LMQ_E_ARG, "forward: no logits buffer");
    return LMQ_OK;
}

/* The first row whose logits a call returns: every row's, the last's, or none (n). */
static int logits_from(rt_logits which, int n)
{
    return which == RT_LOGITS_ALL ? 0 : which == RT_LOGITS_LAST ? n - 1 : n;
}

/* rt_forward on the CPU through blocks [from, blocks) only: from the embeddings of tokens, or
 * (tokens NULL) from the residual stream as the state holds it. */
static lmq_code forward(rt_state *s, const int32_t *tokens, int n, int pos0, int from, int blocks, rt_logits which,
                        float *logits, lmq_err *err)
{
    if (from < 0 || from > blocks || blocks > s->m->arch.n_layers)
        return lmq_fail(err, LMQ_E_ARG, "forward through blocks %d..%d of %d", from, blocks - 1, s->m->arch.n_layers);
    lmq_code c = check_call(s, tokens, n, pos0, s->filled, which, logits, err);
    if (c)
        return c;
    cpu_call k = { .s = s, .tokens = tokens, .n = n, .pos0 = pos0, .logits = logits };
    const rt_pass_rows p = { .n = n, .embed = tokens != NULL, .from = from, .to = blocks,
                             .logits_from = logits_from(which, n) };
    c = rt_pass(&CPU_OPS, &k, &p, err);
    /* a partial pass leaves other blocks' cache stale */
    s->filled = !c && tokens && blocks == s->m->arch.n_layers ? pos0 + n : 0;
    return c;
}

/* The pass on the CUDA device: the plugin runs it (runtime/pass.h on its own ops). */
static lmq_code forward_cuda(rt_state *s, int seq, const int32_t *tokens, int n, int pos0, rt_logits which,
                             float *logits, lmq_err *err)
{
    if (seq < 0 || seq >= s->seqs)
        return lmq_fail(err, LMQ_E_ARG, "forward of sequence %d: the state holds %d", seq, s->seqs);
    lmq_code c = check_call(s, tokens, n, pos0, s->fill[seq], which, logits, err);
    if (c)
        return c;
    int32_t *pos = s->ids, *seqs = s->ids + n;
    for (int i = 0; i < n; i++) {
        pos[i] = pos0 + i;
        seqs[i] = seq;
    }
    c = s->cu->forward(s->ds, n, tokens, seqs, pos, logits_from(which, n), logits, err);
    s->fill[seq] = c ? 0 : pos0 + n;
    return c;
}

lmq_code rt_forward(rt_state *s, const int32_t *tokens, int n, int pos0, rt_logits which, float *logits,
                    lmq_err *err)
{
    return rt_forward_seq(s, 0, tokens, n, pos0, which, logits, err);
}

lmq_code rt_forward_seq(rt_state *s, int seq, const int32_t *tokens, int n, int pos0, rt_logits which, float *logits,
                        lmq_err *err)
{
    if (s->cu)
        return forward_cuda(s, seq, tokens, n, pos0, which, logits, err);
    if (seq != 0)
        return lmq_fail(err, LMQ_E_ARG, "forward of sequence %d: a CPU state holds one", seq);
    return forward(s, tokens, n, pos0, 0, s->m->arch.n_layers, which, logits, err);
}

lmq_code rt_decode_batch(rt_state *s, int n, const int32_t *tokens, float *logits, lmq_err *err)
{
    if (!s->cu)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "batched decoding runs on the cuda device only");
    if (n < 1 || n > s->seqs)
        return lmq_fail(err, LMQ_E_ARG, "decode of %d sequences: the state holds %d", n, s->seqs);
    int32_t *pos = s->ids, *seqs = s->ids + n;
    lmq_code c = LMQ_OK;
    for (int i = 0; i < n && !c; i++) {
        pos[i] = s->fill[i];
        seqs[i] = i;
        c = check_call(s, &tokens[i], 1, s->fill[i], s->fill[i], RT_LOGITS_LAST, logits, err);
    }
    if (!c)
        c = s->cu->forward(s->ds, n, tokens, seqs, pos, 0, logits, err);
    for (int i = 0; i < n; i++)
        s->fill[i] = c ? 0 : s->fill[i] + 1;
    return c;
}

/* Passes through some blocks only: the calibrate stage's, on the CPU. */
static lmq_code blocks_pass(rt_state *s, const int32_t *tokens, int n, int first, int last, lmq_err *err)
{
    if (s->cu)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "a pass through some blocks (calibration) runs on the CPU only");
    return forward(s, tokens, n, 0, first, last, RT_LOGITS_NONE, NULL, err);
}

lmq_code rt_forward_blocks(rt_state *s, const int32_t *tokens, int n, int blocks, lmq_err *err)
{
    return blocks_pass(s, tokens, n, 0, blocks, err);
}

float *rt_state_stream(rt_state *s) { return s->x; }

lmq_code rt_forward_from(rt_state *s, int n, int first, int last, lmq_err *err)
{
    return blocks_pass(s, NULL, n, first, last, err);
}

lmq_code rt_decode(rt_state *s, int32_t token, int pos, float *logits, lmq_err *err)
{
    return rt_forward(s, &token, 1, pos, RT_LOGITS_LAST, logits, err);
}
