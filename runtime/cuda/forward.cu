/* The forward pass on the device (runtime/cuda/cuda.h): runtime/pass.h's pass on this backend's
 * ops, over the same rt_model; the linear layers are runtime/cuda/linear.cu's, and each kernel
 * below names the CPU code it matches. Differences from the CPU, all in summation order or
 * rounding, none in the model: reductions (norms in fp64 as the CPU's, attention
 * scores, softmax sums) run in another order, and the linear layers round activations where
 * cuda.h says. The KV cache and every activation between the linear layers are fp32. */
#include "runtime/cuda/internal.h"
#include "runtime/pass.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The norm vectors and biases of a layer, device fp32 (NULL where the CPU's are). */
typedef struct {
    const float *attn_norm_w, *attn_norm_b, *ffn_norm_w, *ffn_norm_b;
    rtc_weight *w[RT_W_BLOCK]; /* NULL where the model has none */
} dev_layer;

struct rtc_model {
    lmq_arch arch;
    int head_dim, kv_dim;
    rtc_weight *tok, *pos, *cls; /* pos: GPT-2 only; cls may be tok (tied) */
    dev_layer *layers;
    const float *out_norm_w, *out_norm_b;
    float *vectors; /* one allocation holding every vector */
};

/* ---- the model ------------------------------------------------------------------------- */

static void model_free(rtc_model *m)
{
    if (!m)
        return;
    for (int l = 0; m->layers && l < m->arch.n_layers; l++) {
        for (int w = 0; w < RT_W_BLOCK; w++)
            rtc_weight_free(m->layers[l].w[w]);
    }
    free(m->layers);
    if (m->cls != m->tok)
        rtc_weight_free(m->cls);
    rtc_weight_free(m->tok);
    rtc_weight_free(m->pos);
    cudaFree(m->vectors);
    free(m);
}

void rtc_model_free(rtc_model *m)
{
    model_free(m);
}

/* Uploads W when the model has it (data set). */
static lmq_code put(rtc_ctx *c, const rt_weight *W, rtc_weight **out, lmq_err *err)
{
    *out = NULL;
    return W->data ? rtc_upload(c, W, out, err) : LMQ_OK;
}

lmq_code rtc_model_upload(rtc_ctx *c, const rt_model *rm, rtc_model **out, lmq_err *err)
{
    *out = NULL;
    rtc_model *m = (rtc_model *)calloc(1, sizeof *m);
    if (!m || !(m->layers = (dev_layer *)calloc((size_t)rm->arch.n_layers, sizeof *m->layers))) {
        free(m);
        return lmq_fail(err, LMQ_E_NOMEM, "cuda: out of memory for the model");
    }
    m->arch = rm->arch;
    m->head_dim = rm->head_dim;
    m->kv_dim = rm->kv_dim;
    const int nl = rm->arch.n_layers, d = rm->arch.dim;
    /* The vectors: 4 per layer and 2 for the output norm, each d floats where present. */
    const float *host[4 * 1024 + 2];
    const float **dev[4 * 1024 + 2];
    if (nl > 1024) {
        model_free(m);
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "cuda: %d layers (at most 1024)", nl);
    }
    int nv = 0;
    for (int l = 0; l < nl; l++) {
        const rt_layer *L = &rm->layers[l];
        dev_layer *D = &m->layers[l];
        const float *h[4] = { L->attn_norm_w, L->attn_norm_b, L->ffn_norm_w, L->ffn_norm_b };
        const float **p[4] = { &D->attn_norm_w, &D->attn_norm_b, &D->ffn_norm_w, &D->ffn_norm_b };
        for (int i = 0; i < 4; i++)
            if (h[i]) {
                host[nv] = h[i];
                dev[nv++] = p[i];
            }
    }
    host[nv] = rm->out_norm_w;
    dev[nv++] = &m->out_norm_w;
    if (rm->out_norm_b) {
        host[nv] = rm->out_norm_b;
        dev[nv++] = &m->out_norm_b;
    }
    const size_t vbytes = (size_t)nv * d * sizeof(float);
    lmq_code code = rtc_check(cudaMalloc((void **)&m->vectors, vbytes), "cudaMalloc (norm vectors)", err);
    for (int i = 0; i < nv && !code; i++) {
        code = rtc_check(cudaMemcpy(m->vectors + (size_t)i * d, host[i], (size_t)d * sizeof(float),
                                    cudaMemcpyHostToDevice),
                         "copy of the norm vectors", err);
        *dev[i] = m->vectors + (size_t)i * d;
    }
    if (!code)
        code = put(c, &rm->tok_embd, &m->tok, err);
    if (!code)
        code = put(c, &rm->pos_embd, &m->pos, err);
    if (!code && rm->classifier.data == rm->tok_embd.data && rm->classifier.q.dtype == rm->tok_embd.q.dtype &&
        rm->classifier.act.scheme == rm->tok_embd.act.scheme)
        m->cls = m->tok; /* tied: one copy serves both */
    else if (!code)
        code = put(c, &rm->classifier, &m->cls, err);
    for (int l = 0; l < nl && !code; l++)
        for (int w = 0; w < RT_W_BLOCK && !code; w++)
            code = put(c, &rm->layers[l].w[w], &m->layers[l].w[w], err);
    if (code) {
        model_free(m);
        return code;
    }
    *out = m;
    return LMQ_OK;
}

/* ---- the state ------------------------------------------------------------------------- */

struct rtc_state {
    rtc_ctx *c;
    const rtc_model *m;
    int T, seqs, rows;       /* positions per cache, caches, rows a call */
    float *x, *xb, *xb2, *q; /* [rows × dim] */
    float *qkv;              /* [rows × (dim + 2 kv_dim)]: the fused product, or k | v */
    float *hb, *hb2;         /* [rows × hidden] */
    float *logits;           /* [rows × vocab] */
    float *kc, *vc;          /* [seqs × layers × T × kv_dim] */
    float *rope_cos, *rope_sin; /* [T × head_dim/2] */
    int32_t *ids;            /* [3 × rows]: tokens | seqs | positions */
    int32_t *host_ids;
    size_t att_shared;       /* the attention kernel's dynamic shared memory */
    /* Decoding launches ~14 kernels a layer, each too short to hide its launch: passes of up to
     * RTC_GEMV_MAX_ROWS rows run as CUDA graphs, one per row count and logits kind (all, last,
     * none), captured on the second call (the first runs eagerly and sizes the scratch). They
     * read tokens, sequences and positions from ids, so one graph serves every position. */
    struct {
        cudaGraphExec_t exec;
        unsigned gen; /* the context's scratch_gen it was captured with */
        int calls;
    } graphs[RTC_GEMV_MAX_ROWS][3];
    int no_graphs; /* a capture failed: eager from then on */
};

#define ATT_THREADS 128

__global__ void attention(const float *__restrict__ q, int d, const float *__restrict__ kc,
                          const float *__restrict__ vc, size_t seq_stride, int kvd, int hd, int group,
                          const int32_t *__restrict__ seqs, const int32_t *__restrict__ pos, float scale,
                          float *__restrict__ out);

void rtc_state_free(rtc_state *s)
{
    if (!s)
        return;
    float *bufs[] = { s->x, s->xb, s->xb2, s->q, s->qkv, s->hb, s->hb2, s->logits, s->kc, s->vc, s->rope_cos, s->rope_sin };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        cudaFree(bufs[i]);
    cudaFree(s->ids);
    free(s->host_ids);
    for (int i = 0; i < RTC_GEMV_MAX_ROWS; i++)
        for (int k = 0; k < 3; k++)
            if (s->graphs[i][k].exec)
                cudaGraphExecDestroy(s->graphs[i][k].exec);
    free(s);
}

lmq_code rtc_state_create(rtc_ctx *c, const rtc_model *m, int max_tokens, int seqs, rtc_state **out, lmq_err *err)
{
    *out = NULL;
    const lmq_arch *a = &m->arch;
    if (max_tokens < 1 || max_tokens > a->max_seq || seqs < 1)
        return lmq_fail(err, LMQ_E_ARG, "cuda: state for %d sequences of %d tokens: the model's context is 1..%d",
                        seqs, max_tokens, a->max_seq);
    rtc_state *s = (rtc_state *)calloc(1, sizeof *s);
    if (!s)
        return lmq_fail(err, LMQ_E_NOMEM, "cuda: out of memory for the state");
    s->c = c;
    s->m = m;
    s->T = max_tokens;
    s->seqs = seqs;
    s->rows = max_tokens > seqs ? max_tokens : seqs;
    const size_t R = (size_t)s->rows, T = (size_t)max_tokens, d = (size_t)a->dim, kvd = (size_t)m->kv_dim;
    const size_t hd2 = (size_t)m->head_dim / 2, kv = (size_t)seqs * a->n_layers * T * kvd;
    const int rope = a->rope != LMQ_ROPE_NONE;
    s->att_shared = (T + (size_t)m->head_dim) * sizeof(float);
    lmq_code code = LMQ_OK;
    if (s->att_shared > (size_t)c->prop.sharedMemPerBlockOptin)
        code = lmq_fail(err, LMQ_E_UNSUPPORTED, "cuda: attention over %d positions needs %zu bytes of shared memory; "
                        "the device has %zu a block", max_tokens, s->att_shared, (size_t)c->prop.sharedMemPerBlockOptin);
    if (!code && s->att_shared > 48 * 1024)
        code = rtc_check(cudaFuncSetAttribute(attention, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              (int)s->att_shared), "attention's shared memory", err);
    struct { float **p; size_t n; } need[] = {
        { &s->x, R * d }, { &s->xb, R * d }, { &s->xb2, R * d }, { &s->q, R * d }, { &s->qkv, R * (d + 2 * kvd) },
        { &s->hb, R * (size_t)a->hidden_dim }, { &s->hb2, R * (size_t)a->hidden_dim },
        { &s->logits, R * (size_t)a->vocab_size }, { &s->kc, kv }, { &s->vc, kv },
        { &s->rope_cos, rope ? T * hd2 : 0 }, { &s->rope_sin, rope ? T * hd2 : 0 },
    };
    for (size_t i = 0; i < sizeof need / sizeof need[0] && !code; i++)
        if (need[i].n)
            code = rtc_check(cudaMalloc((void **)need[i].p, need[i].n * sizeof(float)), "cudaMalloc (state)", err);
    if (!code)
        code = rtc_check(cudaMalloc((void **)&s->ids, 3 * R * sizeof(int32_t)), "cudaMalloc (state)", err);
    if (!code && !(s->host_ids = (int32_t *)calloc(3 * R, sizeof(int32_t))))
        code = lmq_fail(err, LMQ_E_NOMEM, "cuda: out of memory for the state");
    /* cpu.c's cpu_state_create: angles pos·theta^(−2i/head_dim) in double, rounded to float */
    float *cs = NULL;
    if (!code && rope && !(cs = (float *)malloc(2 * T * hd2 * sizeof(float))))
        code = lmq_fail(err, LMQ_E_NOMEM, "cuda: out of memory for the state");
    if (!code && rope) {
        for (size_t p = 0; p < T; p++)
            for (size_t i = 0; i < hd2; i++) {
                const double ang = (double)p * pow((double)a->rope_theta, -2.0 * (double)i / m->head_dim);
                cs[p * hd2 + i] = (float)cos(ang);
                cs[T * hd2 + p * hd2 + i] = (float)sin(ang);
            }
        code = rtc_check(cudaMemcpy(s->rope_cos, cs, T * hd2 * sizeof(float), cudaMemcpyHostToDevice), "rope table", err);
        if (!code)
            code = rtc_check(cudaMemcpy(s->rope_sin, cs + T * hd2, T * hd2 * sizeof(float), cudaMemcpyHostToDevice),
                             "rope table", err);
    }
    free(cs);
    if (code) {
        rtc_state_free(s);
        return code;
    }
    *out = s;
    return LMQ_OK;
}

/* ---- the kernels of the other ops ------------------------------------------------------ */

/* The sum (or maximum) of v over the block; every thread gets it. red: 32 slots of shared memory. */
template <typename T, bool MAX>
__device__ T block_reduce(T v, T *red)
{
    for (int o = 16; o > 0; o >>= 1) {
        const T w = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? (w > v ? w : v) : v + w;
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    __syncthreads(); /* red may still be read from the last call */
    if (lane == 0)
        red[warp] = v;
    __syncthreads();
    v = red[0];
    for (int w = 1; w < warps; w++)
        v = MAX ? (red[w] > v ? red[w] : v) : v + red[w];
    return v;
}

/* cpu.c's layernorm (b set) and rmsnorm, one block per row, the sums in double. */
__global__ void norm_rows(float *__restrict__ y, const float *__restrict__ x, const float *__restrict__ w,
                          const float *__restrict__ b, int d, float eps)
{
    __shared__ double red[32];
    const float *xr = x + (size_t)blockIdx.x * d;
    float *yr = y + (size_t)blockIdx.x * d;
    if (b) {
        double s = 0;
        for (int i = threadIdx.x; i < d; i += blockDim.x)
            s += xr[i];
        const double mean = block_reduce<double, false>(s, red) / d;
        double v = 0;
        for (int i = threadIdx.x; i < d; i += blockDim.x)
            v += (xr[i] - mean) * (xr[i] - mean);
        const double inv = 1.0 / sqrt(block_reduce<double, false>(v, red) / d + eps);
        for (int i = threadIdx.x; i < d; i += blockDim.x)
            yr[i] = (float)((xr[i] - mean) * inv) * w[i] + b[i];
    } else {
        double ss = 0;
        for (int i = threadIdx.x; i < d; i += blockDim.x)
            ss += (double)xr[i] * xr[i];
        const float inv = (float)(1.0 / sqrt(block_reduce<double, false>(ss, red) / d + eps));
        for (int i = threadIdx.x; i < d; i += blockDim.x)
            yr[i] = w[i] * (inv * xr[i]);
    }
}

/* cpu.c's cpu_rope_store: the q/k/v split (fused) and rope, and the append to the cache, one block per row:
 * q[i] ← rotated q row; the cache of seqs[i] at pos[i] ← rotated k row and v row. rope:
 * LMQ_ROPE_NONE copies; interleaved pairs (2j, 2j+1), half pairs (j, j + head_dim/2). */
__global__ void rope_store(const float *qs, const float *__restrict__ ks, const float *__restrict__ vs, int ldq,
                           int ldkv, float *q /* may be qs: rotated in place */, float *__restrict__ kc,
                           float *__restrict__ vc,
                           size_t seq_stride, int d, int kvd, int hd, int rope,
                           const float *__restrict__ cosv, const float *__restrict__ sinv,
                           const int32_t *__restrict__ seqs, const int32_t *__restrict__ pos)
{
    const int i = blockIdx.x, p = pos[i], half = hd / 2;
    const size_t at = (size_t)seqs[i] * seq_stride + (size_t)p * kvd;
    const float *qi = qs + (size_t)i * ldq, *ki = ks + (size_t)i * ldkv, *vi = vs + (size_t)i * ldkv;
    float *qo = q + (size_t)i * d, *ko = kc + at;
    for (int c = threadIdx.x; c < kvd; c += blockDim.x)
        vc[at + c] = vi[c];
    if (rope == LMQ_ROPE_NONE) {
        for (int c = threadIdx.x; c < d; c += blockDim.x)
            qo[c] = qi[c];
        for (int c = threadIdx.x; c < kvd; c += blockDim.x)
            ko[c] = ki[c];
        return;
    }
    const float *cp = cosv + (size_t)p * half, *sp = sinv + (size_t)p * half;
    /* pairs of q (d/2 of them), then of k (kvd/2): pair t of a head h is (a, b) */
    for (int t = threadIdx.x; t < (d + kvd) / 2; t += blockDim.x) {
        const int isk = t >= d / 2, u = isk ? t - d / 2 : t, h = u / half, j = u % half;
        const int a = h * hd + (rope == LMQ_ROPE_INTERLEAVED ? 2 * j : j);
        const int b = h * hd + (rope == LMQ_ROPE_INTERLEAVED ? 2 * j + 1 : j + half);
        const float *src = isk ? ki : qi;
        float *dst = isk ? ko : qo;
        const float x0 = src[a], x1 = src[b];
        dst[a] = x0 * cp[j] - x1 * sp[j];
        dst[b] = x0 * sp[j] + x1 * cp[j];
    }
}

/* cpu.c's attn_task for one row and head (block (i, h)): scores against the cached keys of
 * positions 0..pos[i] of sequence seqs[i], exp(scale·(s − max)) and their float sum, then the
 * weighted sum of the cached values times 1/sum into out. Shared: the q head, then the scores. */
__global__ void attention(const float *__restrict__ q, int d, const float *__restrict__ kc,
                          const float *__restrict__ vc, size_t seq_stride, int kvd, int hd, int group,
                          const int32_t *__restrict__ seqs, const int32_t *__restrict__ pos, float scale,
                          float *__restrict__ out)
{
    extern __shared__ float sm[];
    __shared__ float red[32];
    const int i = blockIdx.x, h = blockIdx.y, seen = pos[i] + 1;
    float *qh = sm, *p = sm + hd;
    const size_t off = (size_t)seqs[i] * seq_stride + (size_t)(h / group) * hd;
    const float *K = kc + off, *V = vc + off;
    for (int c = threadIdx.x; c < hd; c += blockDim.x)
        qh[c] = q[(size_t)i * d + (size_t)h * hd + c];
    __syncthreads();
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < seen; j += blockDim.x) {
        const float *k = K + (size_t)j * kvd;
        float s = 0;
        for (int c = 0; c < hd; c++)
            s += qh[c] * k[c];
        p[j] = s;
        mx = s > mx ? s : mx;
    }
    mx = block_reduce<float, true>(mx, red);
    float sum = 0;
    for (int j = threadIdx.x; j < seen; j += blockDim.x) {
        p[j] = expf(scale * (p[j] - mx));
        sum += p[j];
    }
    sum = block_reduce<float, false>(sum, red); /* also orders the writes of p before the reads below */
    const float inv = 1.0f / sum;
    for (int c = threadIdx.x; c < hd; c += blockDim.x) {
        float acc = 0;
        for (int j = 0; j < seen; j++)
            acc += p[j] * V[(size_t)j * kvd + c];
        out[(size_t)i * d + (size_t)h * hd + c] = inv * acc;
    }
}

/* cpu.c's act_task: GELU (tanh form, as x / (1 + exp(−2u)), the AVX2 kernels' form) on g,
 * or g ← silu(g)·u. */
__global__ void activation(float *__restrict__ g, const float *__restrict__ u, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float v = g[i];
        if (u)
            g[i] = v / (1.0f + expf(-v)) * u[i];
        else
            g[i] = v / (1.0f + expf(-2.0f * (0.7978845608028654f * (v + 0.044715f * v * v * v))));
    }
}

/* cpu.c's add_rows. */
__global__ void add_rows(float *__restrict__ x, const float *__restrict__ y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] += y[i];
}

static unsigned grid_for(size_t n)
{
    const size_t b = (n + 255) / 256;
    return (unsigned)(b < 4096 ? (b ? b : 1) : 4096);
}

/* ---- the pass ---------------------------------------------------------------------------- */

#define LAUNCHED(what) rtc_check(cudaGetLastError(), what, err)

static lmq_code check_rows(const rtc_state *s, int n, const int32_t *tokens, const int32_t *seqs, const int32_t *pos,
                           int from, lmq_err *err)
{
    if (n < 1 || n > s->rows || from < 0 || from > n)
        return lmq_fail(err, LMQ_E_ARG, "cuda: forward of %d rows (logits from %d): the state takes 1..%d", n, from,
                        s->rows);
    for (int i = 0; i < n; i++) {
        const int q = seqs ? seqs[i] : 0;
        if (tokens[i] < 0 || tokens[i] >= s->m->arch.vocab_size || q < 0 || q >= s->seqs || pos[i] < 0 ||
            pos[i] >= s->T)
            return lmq_fail(err, LMQ_E_ARG, "cuda: row %d: token %d of sequence %d at position %d (vocabulary %d, "
                            "%d sequences of %d positions)", i, tokens[i], q, pos[i], s->m->arch.vocab_size, s->seqs,
                            s->T);
    }
    return LMQ_OK;
}

static lmq_code run(rtc_state *s, int n, int from, lmq_err *err);

lmq_code rtc_forward(rtc_state *s, int n, const int32_t *tokens, const int32_t *seqs, const int32_t *pos, int from,
                     float *logits, lmq_err *err)
{
    lmq_code code = check_rows(s, n, tokens, seqs, pos, from, err);
    if (code)
        return code;
    rtc_ctx *c = s->c;
    int32_t *ht = s->host_ids;
    memcpy(ht, tokens, (size_t)n * sizeof *ht);
    for (int i = 0; i < n; i++)
        ht[s->rows + i] = seqs ? seqs[i] : 0;
    memcpy(ht + 2 * s->rows, pos, (size_t)n * sizeof *ht);
    code = rtc_check(cudaMemcpyAsync(s->ids, ht, 3 * (size_t)s->rows * sizeof *ht, cudaMemcpyHostToDevice, c->stream),
                     "copy of the tokens", err);
    if (!code)
        code = run(s, n, from, err);
    if (!code && from < n)
        return rtc_to_host(c, logits, s->logits, (size_t)(n - from) * s->m->arch.vocab_size * sizeof(float), err);
    return code ? code : rtc_sync(c, err);
}

/* A call: its state and rows (their ids on the device). */
typedef struct {
    rtc_state *s;
    int n;
} dev_call;

/* Buffer b of the call: q in Q, the unfused k and v rows in QKV's space before the cache. */
static_assert(RT_BUF_COUNT == 10, "dev_buf lists every buffer, in rt_buf's order");
static float *dev_buf(const dev_call *k, rt_buf b)
{
    const rtc_state *s = k->s;
    const size_t kv_rows = (size_t)k->n * s->m->kv_dim;
    float *const bufs[RT_BUF_COUNT] = { s->x, s->xb, s->xb2, s->q, s->qkv, s->qkv + kv_rows, s->qkv, s->hb, s->hb2,
                                        s->logits };
    return bufs[b];
}

static rtc_weight *dev_weight(const rtc_model *m, int layer, rt_wslot w)
{
    return w == RT_W_TOK ? m->tok : w == RT_W_POS ? m->pos : w == RT_W_CLS ? m->cls : m->layers[layer].w[w];
}

static int dev_has(void *be, int layer, rt_wslot w)
{
    return dev_weight(((dev_call *)be)->s->m, layer, w) != NULL;
}

/* cpu.c's cpu_embed: rows by the tokens, then added by the positions. */
static lmq_code dev_embed(void *be, rt_wslot w, lmq_err *err)
{
    const dev_call *k = (const dev_call *)be;
    const rtc_state *s = k->s;
    const int32_t *rows = w == RT_W_TOK ? s->ids : s->ids + 2 * s->rows;
    return rtc_weight_rows(s->c, dev_weight(s->m, -1, w), rows, k->n, w == RT_W_POS, s->x, err);
}

static lmq_code dev_norm(void *be, int layer, rt_norm which, rt_buf y, rt_buf x, int r0, int rows, lmq_err *err)
{
    const dev_call *k = (const dev_call *)be;
    const rtc_model *m = k->s->m;
    const size_t d = (size_t)m->arch.dim;
    const dev_layer *L = layer >= 0 ? &m->layers[layer] : NULL;
    const float *w = which == RT_NORM_OUT ? m->out_norm_w : which == RT_NORM_ATTN ? L->attn_norm_w : L->ffn_norm_w;
    const float *b = which == RT_NORM_OUT ? m->out_norm_b : which == RT_NORM_ATTN ? L->attn_norm_b : L->ffn_norm_b;
    norm_rows<<<rows, 256, 0, k->s->c->stream>>>(dev_buf(k, y) + r0 * d, dev_buf(k, x) + r0 * d, w, b, (int)d,
                                                   m->arch.norm_eps);
    return LAUNCHED("norm");
}

static lmq_code dev_linear(void *be, int layer, rt_wslot w, rt_buf x, int r0, int rows, rt_buf y, lmq_err *err)
{
    const dev_call *k = (const dev_call *)be;
    const rtc_weight *W = dev_weight(k->s->m, layer, w);
    return rtc_linear(k->s->c, dev_buf(k, x) + (size_t)r0 * rtc_weight_in(W), rows, W, dev_buf(k, y), err);
}

static lmq_code dev_rope_store(void *be, int layer, int fused, lmq_err *err)
{
    const dev_call *k = (const dev_call *)be;
    rtc_state *s = k->s;
    const rtc_model *m = s->m;
    const lmq_arch *a = &m->arch;
    const int d = a->dim, kvd = m->kv_dim, T = s->T;
    /* unfused: q in Q, k and v rows in QKV's space; fused: q|k|v rows of the one product */
    const float *qs = dev_buf(k, RT_BUF_Q), *ks = dev_buf(k, RT_BUF_K), *vs = dev_buf(k, RT_BUF_V);
    int ldq = d, ldkv = kvd;
    if (fused) {
        qs = s->qkv;
        ks = s->qkv + d;
        vs = s->qkv + d + kvd;
        ldq = ldkv = rtc_weight_out(m->layers[layer].w[RT_W_QKV]);
    }
    const size_t at = (size_t)layer * T * kvd;
    rope_store<<<k->n, 128, 0, s->c->stream>>>(qs, ks, vs, ldq, ldkv, s->q, s->kc + at, s->vc + at,
                                               (size_t)a->n_layers * T * kvd, d, kvd, m->head_dim, (int)a->rope,
                                               s->rope_cos, s->rope_sin, s->ids + s->rows, s->ids + 2 * s->rows);
    return LAUNCHED("rope");
}

static lmq_code dev_attention(void *be, int layer, lmq_err *err)
{
    const dev_call *k = (const dev_call *)be;
    const rtc_state *s = k->s;
    const rtc_model *m = s->m;
    const lmq_arch *a = &m->arch;
    const int kvd = m->kv_dim, hd = m->head_dim;
    const size_t at = (size_t)layer * s->T * kvd;
    const dim3 grid((unsigned)k->n, (unsigned)a->n_heads);
    attention<<<grid, ATT_THREADS, s->att_shared, s->c->stream>>>(
        s->q, a->dim, s->kc + at, s->vc + at, (size_t)a->n_layers * s->T * kvd, kvd, hd, a->n_heads / a->n_kv_heads,
        s->ids + s->rows, s->ids + 2 * s->rows, 1.0f / sqrtf((float)hd), s->xb2);
    return LAUNCHED("attention");
}

static lmq_code dev_activation(void *be, int gated, lmq_err *err)
{
    const dev_call *k = (const dev_call *)be;
    const size_t nh = (size_t)k->n * k->s->m->arch.hidden_dim;
    activation<<<grid_for(nh), 256, 0, k->s->c->stream>>>(k->s->hb, gated ? k->s->hb2 : NULL, nh);
    return LAUNCHED("activation");
}

static lmq_code dev_add(void *be, rt_buf x, rt_buf y, lmq_err *err)
{
    const dev_call *k = (const dev_call *)be;
    const size_t nd = (size_t)k->n * k->s->m->arch.dim;
    add_rows<<<grid_for(nd), 256, 0, k->s->c->stream>>>(dev_buf(k, x), dev_buf(k, y), nd);
    return LAUNCHED("residual add");
}

static const rt_ops DEV_OPS = { dev_has,       dev_embed,         dev_norm,       dev_linear,
                                dev_rope_store, dev_attention, dev_activation, dev_add };

/* The pass over rows [0, n) whose ids are on the device, queued on the stream; the logits of
 * rows [from, n) into s->logits. */
static lmq_code enqueue(rtc_state *s, int n, int from, lmq_err *err)
{
    dev_call k = { s, n };
    const rt_pass_rows p = { n, 1, 0, s->m->arch.n_layers, from };
    return rt_pass(&DEV_OPS, &k, &p, err);
}

/* enqueue, as a graph where it can be (see rtc_state.graphs). */
static lmq_code run(rtc_state *s, int n, int from, lmq_err *err)
{
    if (n > RTC_GEMV_MAX_ROWS || s->no_graphs)
        return enqueue(s, n, from, err);
    const cudaStream_t st = s->c->stream;
    auto *g = &s->graphs[n - 1][from == 0 ? 0 : from < n ? 1 : 2];
    if (g->exec && g->gen != s->c->scratch_gen) { /* the scratch moved: capture again */
        cudaGraphExecDestroy(g->exec);
        g->exec = NULL;
        g->calls = 0;
    }
    if (!g->exec && g->calls++ == 0)
        return enqueue(s, n, from, err);
    if (!g->exec) {
        cudaGraph_t graph = NULL;
        const unsigned gen = s->c->scratch_gen;
        int ok = cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
        if (ok) {
            lmq_err ignored;
            ok = enqueue(s, n, from, &ignored) == LMQ_OK;
            ok = cudaStreamEndCapture(st, &graph) == cudaSuccess && ok && gen == s->c->scratch_gen;
        }
        ok = ok && cudaGraphInstantiate(&g->exec, graph, 0) == cudaSuccess;
        if (graph)
            cudaGraphDestroy(graph);
        if (!ok) { /* eager from now on; nothing was queued */
            cudaGetLastError();
            g->exec = NULL;
            s->no_graphs = 1;
            return enqueue(s, n, from, err);
        }
        g->gen = gen;
    }
    return rtc_check(cudaGraphLaunch(g->exec, st), "cudaGraphLaunch", err);
}
