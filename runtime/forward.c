#include "runtime/forward.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/backend.h"

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

static lmq_code layer_init(rt_model *rm, const lmq_model *m, int l, lmq_err *err)
{
    const int gpt2 = rm->arch.family == LMQ_FAMILY_GPT2;
    rt_layer *L = &rm->layers[l];
    char n[2][LMQ_NAME_MAX];
#define NAME(i, what) (snprintf(n[i], sizeof n[i], "blk.%d.%s", l, what), n[i])
#define BIAS(what) (gpt2 ? NAME(1, what) : NULL)
    lmq_code c;
    /* Llama q/k/v biases (Qwen2): all three or none, as lmq_model_validate checked */
    const int qkv_bias = gpt2 || lmq_model_find(m, NAME(1, "attn_q.bias"));
#define QKV_BIAS(what) (qkv_bias ? NAME(1, what) : NULL)
    L->fused_qkv = gpt2 && lmq_model_find(m, NAME(0, "attn_qkv.weight"));
    if ((c = vector(rm, m, NAME(0, "attn_norm.weight"), &L->attn_norm_w, err)) ||
        (c = vector(rm, m, NAME(0, "ffn_norm.weight"), &L->ffn_norm_w, err)) ||
        (gpt2 && (c = vector(rm, m, NAME(0, "attn_norm.bias"), &L->attn_norm_b, err))) ||
        (gpt2 && (c = vector(rm, m, NAME(0, "ffn_norm.bias"), &L->ffn_norm_b, err))) ||
        (c = weight(rm, m, NAME(0, "attn_out.weight"), BIAS("attn_out.bias"), &L->attn_out, err)) ||
        (c = weight(rm, m, NAME(0, "ffn_up.weight"), BIAS("ffn_up.bias"), &L->ffn_up, err)) ||
        (c = weight(rm, m, NAME(0, "ffn_down.weight"), BIAS("ffn_down.bias"), &L->ffn_down, err)) ||
        (!gpt2 && (c = weight(rm, m, NAME(0, "ffn_gate.weight"), NULL, &L->ffn_gate, err))))
        return c;
    if (L->fused_qkv)
        return weight(rm, m, NAME(0, "attn_qkv.weight"), NAME(1, "attn_qkv.bias"), &L->attn_qkv, err);
    if ((c = weight(rm, m, NAME(0, "attn_q.weight"), QKV_BIAS("attn_q.bias"), &L->attn_q, err)) ||
        (c = weight(rm, m, NAME(0, "attn_k.weight"), QKV_BIAS("attn_k.bias"), &L->attn_k, err)))
        return c;
    return weight(rm, m, NAME(0, "attn_v.weight"), QKV_BIAS("attn_v.bias"), &L->attn_v, err);
#undef QKV_BIAS
#undef BIAS
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

void rt_model_each_streamed(const rt_model *rm, void (*fn)(const rt_weight *W, void *ctx), void *ctx)
{
    for (int l = 0; l < rm->arch.n_layers; l++) {
        const rt_layer *L = &rm->layers[l];
        const rt_weight *lw[] = { &L->attn_qkv, &L->attn_q, &L->attn_k, &L->attn_v, &L->attn_out,
                                  &L->ffn_gate, &L->ffn_up, &L->ffn_down };
        for (size_t i = 0; i < sizeof lw / sizeof lw[0]; i++)
            if (lw[i]->data)
                fn(lw[i], ctx);
    }
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

/* ---------------------------------------------------------------- the pieces of a layer */

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

/* y[i] = norm(x[i]) for rows [0, n): LayerNorm with bias for GPT-2, RMSNorm for Llama. */
static void norm_rows(const rt_model *m, float *y, const float *x, const float *w, const float *b, int n)
{
    const int d = m->arch.dim;
    for (int i = 0; i < n; i++) {
        if (b)
            layernorm(y + (size_t)i * d, x + (size_t)i * d, w, b, d, m->arch.norm_eps);
        else
            rmsnorm(y + (size_t)i * d, x + (size_t)i * d, w, d, m->arch.norm_eps);
    }
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

static void add_rows(float *x, const float *y, size_t count)
{
    for (size_t i = 0; i < count; i++)
        x[i] += y[i];
}

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

/* rt_forward through blocks [from, blocks) only: from the embeddings of tokens, or (tokens NULL)
 * from the residual stream as the state holds it. runtime/cuda/forward.cu mirrors this pass step
 * by step for the cuda device: a change here is to be made there too. */
static lmq_code forward(rt_state *s, const int32_t *tokens, int n, int pos0, int from, int blocks, rt_logits which,
                        float *logits, lmq_err *err)
{
    const rt_model *m = s->m;
    const lmq_arch *a = &m->arch;
    const int d = a->dim, kvd = m->kv_dim, hid = a->hidden_dim, T = s->max_tokens;
    const int gpt2 = a->family == LMQ_FAMILY_GPT2;
    const rt_exec *ex = &s->ex;
    if (from < 0 || from > blocks || blocks > a->n_layers)
        return lmq_fail(err, LMQ_E_ARG, "forward through blocks %d..%d of %d", from, blocks - 1, a->n_layers);
    lmq_code c = check_call(s, tokens, n, pos0, s->filled, which, logits, err);
    if (c)
        return c;

    /* Token (and, for GPT-2, learned position) embeddings. */
    for (int i = 0; tokens && i < n && !c; i++) {
        float *x = s->x + (size_t)i * d;
        c = rt_weight_rows(ex->isa, &m->tok_embd, tokens[i], 1, x, err);
        if (!c && gpt2 && !(c = rt_weight_rows(ex->isa, &m->pos_embd, pos0 + i, 1, s->xb, err)))
            add_rows(x, s->xb, (size_t)d);
    }
    if (c)
        return c;

    for (int l = from; l < blocks; l++) {
        const rt_layer *L = &m->layers[l];
        float *kc = s->kc + ((size_t)l * T + pos0) * kvd, *vc = s->vc + ((size_t)l * T + pos0) * kvd;

        /* Attention: q for the new rows; k and v appended to the cache. */
        norm_rows(m, s->xb, s->x, L->attn_norm_w, L->attn_norm_b, n);
        if (L->fused_qkv) {
            if ((c = rt_linear(ex, s->xb, n, &L->attn_qkv, s->qkv, err)))
                return c;
            for (int i = 0; i < n; i++) {
                const float *r = s->qkv + (size_t)i * 3 * d;
                memcpy(s->q + (size_t)i * d, r, (size_t)d * sizeof(float));
                memcpy(kc + (size_t)i * kvd, r + d, (size_t)d * sizeof(float));
                memcpy(vc + (size_t)i * kvd, r + 2 * d, (size_t)d * sizeof(float));
            }
        } else {
            if ((c = rt_linear(ex, s->xb, n, &L->attn_q, s->q, err)))
                return c;
            if ((c = rt_linear(ex, s->xb, n, &L->attn_k, kc, err)))
                return c;
            if ((c = rt_linear(ex, s->xb, n, &L->attn_v, vc, err)))
                return c;
        }
        for (int i = 0; i < n && a->rope != LMQ_ROPE_NONE; i++) {
            rope(s, s->q + (size_t)i * d, a->n_heads, pos0 + i);
            rope(s, kc + (size_t)i * kvd, a->n_kv_heads, pos0 + i);
        }
        /* Whole rows per task when there are enough blocks to share out (no two threads write
         * one row); single heads otherwise (decoding). */
        attn_job aj = { .s = s, .layer = l, .n = n, .pos0 = pos0, .blocks = (n + ATT_ROWS - 1) / ATT_ROWS };
        aj.heads_per_task = aj.blocks >= 2 * s->threads ? a->n_heads : 1;
        aj.groups = a->n_heads / aj.heads_per_task;
        const int64_t work = (int64_t)n * (pos0 + n) * d;
        lmq_pool_for(work < ATT_PARALLEL_MIN_WORK ? NULL : ex->pool, (int64_t)aj.blocks * aj.groups, 1, attn_task, &aj);
        if ((c = rt_linear(ex, s->xb2, n, &L->attn_out, s->xb, err)))
            return c;
        add_rows(s->x, s->xb, (size_t)n * d);

        /* Feed-forward: GELU(x·up)·down for GPT-2, (silu(x·gate) ⊙ x·up)·down for Llama. */
        norm_rows(m, s->xb, s->x, L->ffn_norm_w, L->ffn_norm_b, n);
        if ((c = rt_linear(ex, s->xb, n, gpt2 ? &L->ffn_up : &L->ffn_gate, s->hb, err)))
            return c;
        if (!gpt2)
            if ((c = rt_linear(ex, s->xb, n, &L->ffn_up, s->hb2, err)))
                return c;
        act_job act = { .isa = ex->isa, .g = s->hb, .u = gpt2 ? NULL : s->hb2 };
        lmq_pool_for(ex->pool, (int64_t)n * hid, 4096, act_task, &act);
        if ((c = rt_linear(ex, s->hb, n, &L->ffn_down, s->xb, err)))
            return c;
        add_rows(s->x, s->xb, (size_t)n * d);
    }
    /* a partial pass leaves other blocks' cache stale */
    s->filled = tokens && blocks == a->n_layers ? pos0 + n : 0;
    if (which == RT_LOGITS_NONE)
        return LMQ_OK;

    /* Final norm and classifier, for every row or only the last. */
    const int first = which == RT_LOGITS_ALL ? 0 : n - 1;
    norm_rows(m, s->xb + (size_t)first * d, s->x + (size_t)first * d, m->out_norm_w, m->out_norm_b, n - first);
    if ((c = rt_linear(ex, s->xb + (size_t)first * d, n - first, &m->classifier, logits, err)))
        return c;
    return LMQ_OK;
}

/* The pass on the CUDA device: runtime/cuda/forward.cu mirrors forward() above. */
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
    const int from = which == RT_LOGITS_ALL ? 0 : which == RT_LOGITS_LAST ? n - 1 : n;
    c = s->cu->forward(s->ds, n, tokens, seqs, pos, from, logits, err);
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
