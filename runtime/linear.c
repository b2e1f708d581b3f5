/* rt_linear's driver (runtime/linear.h): the views, the work split, the loops over tiles and rows,
 * the activations' rounding and the choice of a product; the kernels are the kernel set's
 * (rt_exec.isa, runtime/linear_impl.h). */
#include "runtime/linear_impl.h"

#include <stdlib.h>

#include "common/fp.h"
#include "schemes/fp8.h"

/* Work split: tasks are blocks of W_BLOCK rows of W (× X_BLOCK rows of x when the weight is
 * used as stored), W-block-major so that neighbouring tasks share a block of W while x stays
 * in cache. X_BLOCK is a multiple of every tile height. */
#define W_BLOCK 64
#define X_BLOCK 48
/* Up to this many activation rows the fused kernels decode W in registers for every tile;
 * beyond it a block of W is decoded once into scratch and reused by every row (int4 and int8
 * 3072 × 768: 5 to 8 rows fused take two thirds of the time staged; at 16 they are even). */
#define FUSED_ROWS 8
/* How far ahead of the rows being read the fused kernels ask for memory: about what is in flight
 * between a request and its arrival at one core's share of the bandwidth. */
#define PREFETCH_BYTES 8192
/* Zero codes up to this size times an 11-bit fp16 scale fit fp32's 24 bits exactly. */
#define ZERO_EXACT 8192

/* ---------------------------------------------------------------- activation quantisation */

/* x[0..len) on the int8 grid of its own max|x| (the golden README's W8A8), into out. */
static void act_int8(const float *x, size_t len, float *out)
{
    const float s = act_scale(x, len);
    for (size_t i = 0; i < len; i++)
        out[i] = s > 0.0f ? (float)round_clamp127(x[i] / s) * s : 0.0f;
}

/* x[0..len) on the e4m3 grid scaled by its own max|x| / 448 (vLLM's dynamic fp8), into out. */
static void act_fp8(const float *x, size_t len, float *out)
{
    const float s = act_max(x, len) / q_fp8_e4m3.max;
    for (size_t i = 0; i < len; i++)
        out[i] = s > 0.0f ? q_fp8_decode(&q_fp8_e4m3, q_fp8_encode(&q_fp8_e4m3, x[i] / s)) * s : 0.0f;
}

/* x[0..len) (whole blocks of 32) each block on the int8 grid of its own max|x|, d = max / 127:
 * codes round(x / d) as act_int8's, times d rounded to fp16, the scale the integer product uses
 * (llama.cpp's Q8_0 activations), into out. */
static void act_int8_block(const float *x, size_t len, float *out)
{
    for (size_t k = 0; k < len; k += LMQ_ACT_BLOCK_LEN) {
        const float d = act_scale(x + k, LMQ_ACT_BLOCK_LEN), s = lmq_f16_to_f32(lmq_f32_to_f16(d));
        for (size_t i = k; i < k + LMQ_ACT_BLOCK_LEN; i++)
            out[i] = d > 0.0f ? (float)round_clamp127(x[i] / d) * s : 0.0f;
    }
}

static size_t span_block(size_t n, size_t in)
{
    (void)n, (void)in;
    return LMQ_ACT_BLOCK_LEN;
}

static size_t span_token(size_t n, size_t in)
{
    (void)n;
    return in;
}

static size_t span_tensor(size_t n, size_t in)
{
    return n * in;
}

/* The roundings of x a weight may ask for (W->act, formats/dtype.h), a row each: x [n × in] is
 * rounded span by span, each span on the grid of its own max|x|; span: how many values one scale
 * covers (per token a row of x, per tensor all of it). */
static const struct rounding {
    lmq_act act;
    size_t (*span)(size_t n, size_t in);
    void (*round)(const float *x, size_t len, float *out);
} ROUNDINGS[] = {
    { { LMQ_ACT_INT8, LMQ_ACT_TOKEN }, span_token, act_int8 },
    { { LMQ_ACT_INT8, LMQ_ACT_TENSOR }, span_tensor, act_int8 },
    { { LMQ_ACT_FP8_E4M3, LMQ_ACT_TOKEN }, span_token, act_fp8 },
    { { LMQ_ACT_FP8_E4M3, LMQ_ACT_TENSOR }, span_tensor, act_fp8 },
    { { LMQ_ACT_INT8, LMQ_ACT_BLOCK }, span_block, act_int8_block },
};

static int same_act(lmq_act a, lmq_act b)
{
    return a.scheme == b.scheme && a.gran == b.gran;
}

/* The row of the rounding W asks for into *r (NULL: none asked for); an error when it has none. */
static lmq_code rounding_of(const rt_weight *W, const struct rounding **r, lmq_err *err)
{
    *r = NULL;
    for (size_t i = 0; W->act.scheme != LMQ_ACT_NONE && i < sizeof ROUNDINGS / sizeof ROUNDINGS[0]; i++)
        if (same_act(ROUNDINGS[i].act, W->act))
            *r = &ROUNDINGS[i];
    if (W->act.gran >= LMQ_ACT_GRAN_COUNT || (W->act.scheme != LMQ_ACT_NONE && !*r))
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: unknown activation quantisation (%u, %u)", W->name,
                        (unsigned)W->act.scheme, (unsigned)W->act.gran);
    const unsigned alen = lmq_act_block_len(W->q.dtype);
    if (W->act.scheme != LMQ_ACT_NONE && W->act.gran == LMQ_ACT_BLOCK && W->in % (int)alen)
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: activations int8 per block need a multiple of %u inputs, not %d",
                        W->name, alen, W->in);
    return LMQ_OK;
}

/* x[n × in] rounded as r says, into out. */
static void act_quantize(const struct rounding *r, const rt_weight *W, const float *x, int n, float *out)
{
    const size_t in = (size_t)W->in, span = r->span((size_t)n, in);
    for (size_t k = 0; k < (size_t)n * in; k += span)
        r->round(x + k, span, out + k);
}

/* ---------------------------------------------------------------- views */

lmq_code rt_weight_of(const lmq_tensor *t, const float *b, rt_weight *W, lmq_err *err)
{
    memset(W, 0, sizeof *W);
    if (t->ndim != 2 || t->shape[0] > INT32_MAX || t->shape[1] > INT32_MAX)
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: a linear layer's weight is a matrix", t->name);
    lmq_code c = lmq_layout_of(&t->q, t->shape[0], t->shape[1], &W->L, err);
    if (c)
        return lmq_err_prefix(err, "tensor %s: ", t->name);
    const q_scheme *s = q_scheme_get(t->q.dtype);
    if (W->L.bytes != t->raw_size || (!s->decode && !s->decode_block)) /* bytes: no numbers */
        return lmq_fail(err, LMQ_E_FORMAT, "tensor %s: %zu bytes do not hold a %s [%lld, %lld]", t->name,
                        t->raw_size, lmq_encoding_of(t->q.dtype)->name, (long long)t->shape[0],
                        (long long)t->shape[1]);
    W->name = t->name;
    W->q = t->q;
    W->data = t->raw;
    W->b = b;
    W->out = (int)t->shape[0];
    W->in = (int)t->shape[1];
    W->act = t->act;
    const lmq_encoding *enc = lmq_encoding_of(t->q.dtype);
    const size_t tile_bytes = 4 * (enc->block ? W->L.bytes / (size_t)W->out : (size_t)W->in * enc->bits / 8);
    W->ahead_tiles = tile_bytes ? (int)((PREFETCH_BYTES + tile_bytes - 1) / tile_bytes) : 0;
    for (size_t i = 0; W->q.asym && i < (size_t)W->L.n_scales && !W->wide_zeros; i++) {
        int16_t z;
        memcpy(&z, W->data + W->L.zero_offset + 2 * i, 2);
        W->wide_zeros = z > ZERO_EXACT || z < -ZERO_EXACT;
    }
    const struct rounding *r;
    return rounding_of(W, &r, err);
}

/* ---------------------------------------------------------------- fused kernels */

/* Rows [j0, j0 + cols) of W against m rows of x: tiles of 4 rows of W (a short last tile repeats
 * its last row) and TILE_X rows of x (fewer at the end); an output's operations depend on neither.
 * sc: the rows' scales when the tiles' sums are to be scaled (sc[i] row j0 + i's), else NULL.
 * With a span tile (m ≤ X_BLOCK), the rows go in stretches of KSPAN columns (4 rows of fp32: 16 KiB,
 * beside a stretch of x and the accumulators in L1; longer stretches or none were slower), the
 * accumulators of tile i of x waiting in acc[i]. */
#define KSPAN 1024
typedef float span_acc[2 * TILE_X * 4 * 16];
static void tiles_loop(tile_fn tile, span_fn span, span_acc *acc, const rt_weight *W, const float *x, size_t ldx,
                       int m, int j0, int cols, const float *sc, float *y, size_t ldy)
{
    const int64_t K = W->in, stretch = span ? KSPAN : K;
    for (int jb = j0; jb < j0 + cols; jb += 4) {
        const int nr = j0 + cols - jb < 4 ? j0 + cols - jb : 4;
        const int j[4] = { jb, jb + (nr > 1), jb + (nr > 2 ? 2 : nr - 1), jb + (nr > 3 ? 3 : nr - 1) };
        float out[TILE_X][4];
        for (int64_t k0 = 0; k0 < K; k0 += stretch) {
            kspan ks = { k0, K - k0 < stretch ? K : k0 + stretch, NULL };
            for (int i = 0; i < m;) {
                const int rows = m - i >= TILE_X ? TILE_X : m - i;
                if (span) {
                    ks.acc = acc[i / TILE_X];
                    span(rows, W, j, x + (size_t)i * ldx, ldx, &ks, out);
                } else {
                    tile(rows, W, j, x + (size_t)i * ldx, ldx, out);
                }
                for (int r = 0; r < rows && ks.k1 == K; r++)
                    for (int c = 0; c < nr; c++) {
                        const float v = sc ? out[r][c] * sc[jb - j0 + c] : out[r][c];
                        y[(size_t)(i + r) * ldy + jb - j0 + c] = W->b ? v + W->b[jb + c] : v;
                    }
                i += rows;
            }
        }
    }
}

/* The kernel set's fused kernels for W (its first row that applies), or NULL. */
static const fused_kernels *fused_row(const rt_kernels *isa, const rt_weight *W)
{
    const int64_t group = W->q.gran == LMQ_GRAN_GROUP ? W->q.group : 0;
    if (group % 32)
        return NULL;
    const struct rt_linear_kernels *lin = isa->linear;
    for (size_t i = 0; i < lin->n_fused; i++) {
        const rt_fused *f = &lin->fused[i];
        if (f->dtype == W->q.dtype && W->in % f->block == 0 && group % f->block == 0 && !(f->k.scaled && group))
            return W->wide_zeros && f->wide.tile ? &f->wide : &f->k;
    }
    return NULL;
}

/* Rows [j0, j0 + cols) decoded by the kernel set's step into out (cols × in, its order). */
static void decode_rows(const fused_kernels *f, const rt_weight *W, int j0, int cols, float *out)
{
    for (int c = 0; c < cols; c++)
        f->row(W, j0 + c, out + (size_t)c * (size_t)W->in);
}

int rt_linear_fused(const rt_kernels *isa, const rt_weight *W)
{
    return fused_row(isa, W) != NULL;
}

lmq_code rt_weight_rows(const rt_kernels *isa, const rt_weight *W, int r0, int n, float *out, lmq_err *err)
{
    const fused_kernels *f = fused_row(isa, W);
    if (f && !f->reorder && r0 >= 0 && n >= 0 && r0 <= W->out - n) { /* the same values, in order */
        decode_rows(f, W, r0, n, out);
        return LMQ_OK;
    }
    lmq_code c = q_dequantize_rows(&W->q, W->data, W->L.bytes, W->out, W->in, r0, n, out, err);
    return c ? lmq_err_prefix(err, "tensor %s: ", W->name) : LMQ_OK;
}

/* ---------------------------------------------------------------- the linear layer */

typedef struct {
    const rt_kernels *isa;
    const fused_kernels *f; /* NULL: generic */
    const rt_weight *W;
    const float *x; /* reordered when f->reorder */
    float *y;
    int n, x_blocks, staged;
    float *scratch; /* [threads × W_BLOCK × in] when staged */
    int *held;      /* [threads]: the first row of the block a thread's scratch holds, or -1 */
    int failed;
} linear_job;

/* Rows [c0, c0 + cols)'s scales into sc when the kernel set's product is scaled (see tiles_loop),
 * else NULL. */
static const float *row_scales(const linear_job *j, int c0, int cols, float sc[W_BLOCK])
{
    if (!j->f || !j->f->scaled)
        return NULL;
    const size_t step = j->W->q.gran == LMQ_GRAN_TENSOR ? 0 : 2;
    for (int c = 0; c < cols; c++) {
        uint16_t h;
        memcpy(&h, j->W->data + step * (size_t)(c0 + c), 2);
        sc[c] = lmq_f16_to_f32(h);
    }
    return sc;
}

/* The fp32 product of x rows against `cols` decoded rows at w (in the kernel set's own order):
 * the fused fp32 tile over stretches on AVX-512 (the same sums as its tile), the kernel set's
 * gemm_nt otherwise (no kernel set without the fused fp32 tile has scaled kernels). */
static void f32_product(const linear_job *j, const float *x, int m, const float *w, int c0, int cols, float *y)
{
    const rt_weight *W = j->W;
    const int in = W->in;
    const span_fn span = j->isa->linear->f32_span;
    if (span) {
        rt_weight S = { .q = { .dtype = LMQ_T_F32 }, .data = (const uint8_t *)w, .b = W->b ? W->b + c0 : NULL,
                        .out = cols, .in = in };
        _Alignas(64) span_acc acc[X_BLOCK / TILE_X];
        float sc[W_BLOCK];
        tiles_loop(NULL, span, acc, &S, x, (size_t)in, m, 0, cols, row_scales(j, c0, cols, sc), y, (size_t)W->out);
    } else {
        j->isa->gemm_nt(x, (size_t)in, w, (size_t)in, W->b ? W->b + c0 : NULL, y, (size_t)W->out, m, cols, in);
    }
}

static void linear_task(void *v, int64_t begin, int64_t end, int thread)
{
    linear_job *j = v;
    const rt_weight *W = j->W;
    const size_t in = (size_t)W->in;
    for (int64_t t = begin; t < end; t++) {
        const int c0 = (int)(t / j->x_blocks) * W_BLOCK, cols = W->out - c0 < W_BLOCK ? W->out - c0 : W_BLOCK;
        const int r0 = (int)(t % j->x_blocks) * X_BLOCK, rows = j->n - r0 < X_BLOCK ? j->n - r0 : X_BLOCK;
        const float *x = j->x + (size_t)r0 * in;
        float *y = j->y + (size_t)r0 * W->out + c0;
        if (!j->staged) { /* W as stored: fp32, or fused for a few rows */
            float sc[W_BLOCK];
            if (j->f)
                tiles_loop(j->f->tile, NULL, NULL, W, x, in, rows, c0, cols, row_scales(j, c0, cols, sc), y,
                           (size_t)W->out);
            else
                f32_product(j, x, rows, (const float *)W->data + (size_t)c0 * in, c0, cols, y);
            continue;
        }
        /* Tasks run block-major, so a thread mostly finds its block decoded already. */
        float *s = j->scratch + (size_t)thread * W_BLOCK * in;
        if (j->held[thread] != c0) {
            j->held[thread] = c0;
            if (W->q.dtype == LMQ_T_F32) /* a copy: every kernel set's fp32 order */
                memcpy(s, W->data + (size_t)c0 * in * sizeof *s, (size_t)cols * in * sizeof *s);
            else if (j->f)
                decode_rows(j->f, W, c0, cols, s);
            else if (q_dequantize_rows(&W->q, W->data, W->L.bytes, W->out, W->in, c0, cols, s, NULL))
                j->failed = 1, j->held[thread] = -1;
        }
        if (j->held[thread] == c0)
            f32_product(j, x, rows, s, c0, cols, y);
    }
}

/* ---------------------------------------------------------------- products' types */

struct product;
typedef lmq_code (*product_fn)(const rt_exec *ex, const struct product *p, const float *x, int n, const rt_weight *W,
                               float *y, lmq_err *err);

/* ---------------------------------------------------------------- int8 × int8 (W8A8 per token) */

/* Symmetric int8 weights per channel with int8 activations per token: every output is an exact
 * integer sum Σ q_x·q_w (q_w = code − 128) scaled once, ((float)sum · s_x) · s_w (+ b). Integer
 * sums do not depend on their order, so every kernel set gives the same bits: AVX-512 VNNI where
 * the CPU has it, AVX2's 16-bit pair products, a plain loop otherwise. */
typedef struct {
    const rt_weight *W;
    const int8_t *qx;   /* [n × ldq] codes, zero beyond in */
    const float *sx;    /* [n] */
    const int32_t *sum; /* [n]: Σ q_x, for the −128 of the codes */
    size_t ldq;
    int n;
    dot4_fn dot4;
    float *y;
} int8_job;

/* Up to this many inputs a row's sum of code·q (at most 255·127 each) fits in int32. */
#define INT8_MAX_IN 65536

static void int8_task(void *v, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const int8_job *j = v;
    const rt_weight *W = j->W;
    const size_t in = (size_t)W->in, ahead = prefetch_ahead(ENC_I8, W);
    for (int64_t t = begin; t < end; t++) {
        const int r1 = (int)(t + 1) * W_BLOCK < W->out ? (int)(t + 1) * W_BLOCK : W->out;
        for (int r0 = (int)t * W_BLOCK; r0 < r1; r0 += 4) {
            const int nr = r1 - r0 < 4 ? r1 - r0 : 4;
            const uint8_t *c[4];
            float sw[4];
            for (int r = 0; r < 4; r++) {
                const int row = r0 + (r < nr ? r : nr - 1);
                uint16_t h;
                memcpy(&h, W->data + 2 * (size_t)row, 2);
                sw[r] = lmq_f16_to_f32(h);
                c[r] = W->data + W->L.code_offset + (size_t)row * in;
            }
            for (int i0 = 0; i0 < j->n; i0 += TILE_X) {
                const int mr = j->n - i0 < TILE_X ? j->n - i0 : TILE_X;
                int32_t dot[TILE_X][4];
                /* the first tile of tokens streams the rows; the rest find them in cache (+7 %) */
                j->dot4(c, j->qx + (size_t)i0 * j->ldq, j->ldq, mr, in, i0 ? 0 : ahead, dot);
                for (int i = i0; i < i0 + mr; i++)
                    for (int r = 0; r < nr; r++) {
                        const float out = (float)(dot[i - i0][r] - 128 * j->sum[i]) * j->sx[i] * sw[r];
                        j->y[(size_t)i * W->out + r0 + r] = W->b ? out + W->b[r0 + r] : out;
                    }
            }
        }
    }
}

static lmq_code int8_linear(const rt_exec *ex, const struct product *p, const float *x, int n, const rt_weight *W,
                            float *y, lmq_err *err)
{
    (void)p;
    const size_t in = (size_t)W->in, ldq = (in + 63) / 64 * 64;
    int8_job j = { .W = W, .ldq = ldq, .n = n, .y = y, .dot4 = ex->isa->linear->dot4 };
    const codes_fn codes = ex->isa->linear->act_codes;
    int8_t *qx = calloc((size_t)n * ldq, 1);
    float *sx = malloc((size_t)n * sizeof *sx);
    int32_t *sum = malloc((size_t)n * sizeof *sum);
    if (!qx || !sx || !sum) {
        free(qx), free(sx), free(sum);
        return lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory for the activations", W->name);
    }
    for (int i = 0; i < n; i++)
        sum[i] = codes(x + (size_t)i * in, in, &sx[i], qx + (size_t)i * ldq);
    j.qx = qx, j.sx = sx, j.sum = sum;
    const int64_t tasks = (W->out + W_BLOCK - 1) / W_BLOCK, macs = (int64_t)n * W->out * W->in;
    lmq_pool_for(macs < RT_PARALLEL_MIN_WORK ? NULL : ex->pool, tasks, 1, int8_task, &j);
    free(qx), free(sx), free(sum);
    return LMQ_OK;
}

/* ---------------------------------------------------------------- int8 per block × blocks (a8 block) */

/* Activations int8 per block as llama.cpp's vec_dot pairs round them (Q8_0 / Q8_1 against the
 * 32-blocks and lmq's groups, Q8_K against the 256-blocks: lmq_act_block_len) against weights
 * whose codes come in sub-blocks of 16 or 32 with a scale (and min) each: every output is
 * Σ_b (float)(Σ_k qx·qw) · (dx_b · dw_b) [+ (float)Σ_k qx · (dx_b · mw_b)], the sub-block sums
 * exact integers, their fp32 terms added in sub-block order with no fused multiply-add, so every
 * kernel set gives the same bits at any thread count and batch. The driver rounds x (the kernel
 * set's act_codes for Q8_0, a portable Q8_K: the same codes everywhere), packs 16 rows of W at a
 * time into scratch with the kind's reading (rt_a8b_readings: portable C, the same bytes
 * everywhere) and runs the set's a8b_dot over tiles of A8B_MR rows of x; one row of x (decode) goes
 * to the set's a8b_row instead where it has one for the kind, which reads the rows as stored. */

typedef struct {
    const rt_weight *W;
    const a8b_reading *read;
    a8b_pack_fn pack; /* the kernel set's, or NULL (the driver's, or none: row) */
    a8b_dot_fn dot;
    a8b_row_fn row;   /* the kernel set's where x is one row, or NULL */
    const int8_t *qx;   /* [n × in] */
    const float *dx;    /* [n × nb] */
    const int32_t *cx;  /* [n × nb]: 128·Σ codes of a sub-block */
    int n, nb;          /* nb: sub-blocks a row */
    uint8_t *scratch;   /* [threads × scratch_each] */
    size_t scratch_each;
    float *y;
} a8b_job;

/* Rows j0.. of W (a short tile repeats its last row) packed as a8b_dot_fn wants them, a weight
 * block of the 16 rows at a time: its packed bytes stay in L1 while the rows fill them (row by
 * row, a long row's stores missed it: q6_k decode 2.4 → 1.8 ms on 1024 × 4096). */
static void a8b_pack(const a8b_job *j, int j0, int rows, uint8_t *wq, float *wd, float *wm)
{
    const a8b_reading *r = j->read;
    const int sub = r->sub, per = r->block / sub;
    uint8_t u[BLK_MAX];
    float d[BLK_MAX / 16], m[BLK_MAX / 16] = { 0 };
    for (int bb = 0; bb < j->W->in / r->block; bb++)
        for (int l = 0; l < A8B_ROWS; l++) {
            r->read(j->W, j0 + (l < rows ? l : rows - 1), bb, u, d, m);
            for (int t = 0; t < per; t++) {
                const size_t b = (size_t)bb * (size_t)per + (size_t)t;
                wd[b * A8B_ROWS + l] = d[t];
                wm[b * A8B_ROWS + l] = m[t];
                uint8_t *o = wq + b * A8B_ROWS * (size_t)sub + 4 * l;
                for (int v = 0; v < sub / 4; v++)
                    memcpy(o + 64 * v, u + t * sub + 4 * v, 4);
            }
        }
}

static void a8b_task(void *v, int64_t begin, int64_t end, int thread)
{
    const a8b_job *j = v;
    const rt_weight *W = j->W;
    const int sub = j->read->sub;
    uint8_t *wq = j->scratch + (size_t)thread * j->scratch_each;
    float *wd = (float *)(wq + (size_t)j->nb * A8B_ROWS * (size_t)sub), *wm = wd + (size_t)j->nb * A8B_ROWS;
    for (int64_t t = begin; t < end; t++) {
        const int j0 = (int)t * A8B_ROWS, rows = W->out - j0 < A8B_ROWS ? W->out - j0 : A8B_ROWS;
        int jr[A8B_ROWS];
        for (int l = 0; l < A8B_ROWS; l++)
            jr[l] = j0 + (l < rows ? l : rows - 1);
        if (j->pack)
            j->pack(W, jr, wq, wd, wm);
        else if (!j->row)
            a8b_pack(j, j0, rows, wq, wd, wm);
        for (int i0 = 0; i0 < j->n; i0 += A8B_MR) {
            const int mr = j->n - i0 < A8B_MR ? j->n - i0 : A8B_MR;
            float out[A8B_MR][A8B_ROWS];
            if (j->row)
                j->row(W, jr, j->qx, j->dx, j->cx, wq, out[0]);
            else
                j->dot(wq, wd, j->read->mins ? wm : NULL, j->nb, sub, j->qx + (size_t)i0 * (size_t)W->in,
                       (size_t)W->in, j->dx + (size_t)i0 * j->nb, j->cx + (size_t)i0 * j->nb, (size_t)j->nb, mr,
                       out);
            for (int i = 0; i < mr; i++)
                for (int l = 0; l < rows; l++) {
                    const float o = out[i][l];
                    j->y[(size_t)(i0 + i) * W->out + j0 + l] = W->b ? o + W->b[j0 + l] : o;
                }
        }
    }
}

/* ggml's nearest_int: round to nearest, ties to even, through the float's bits (|v| < 2^22). */
static int nearest_int(float v)
{
    const float f = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &f, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* x[0..len) as llama.cpp's Q8_K (quantize_row_q8_K_ref) into q: the value of largest magnitude
 * max (the first such), iscale = −127 / max, codes nearest_int(iscale·x) capped at 127; returns
 * its one fp32 scale 1 / iscale (0, and codes 0, for a zero block). */
static float act_q8_k(const float *x, size_t len, int8_t *q)
{
    float amax = 0.0f, max = 0.0f;
    for (size_t k = 0; k < len; k++)
        if (fabsf(x[k]) > amax)
            amax = fabsf(x[k]), max = x[k];
    if (amax == 0.0f) {
        memset(q, 0, len);
        return 0.0f;
    }
    const float iscale = -127.0f / max;
    for (size_t k = 0; k < len; k++) {
        const int c = nearest_int(iscale * x[k]);
        q[k] = (int8_t)(c < 127 ? c : 127);
    }
    return 1.0f / iscale;
}

/* x[0..len) as llama.cpp's Q8_0 (and Q8_1: the same codes and scale) into q: the kernel set's
 * codes on the grid of d = max|x| / 127, which the integer product takes rounded to fp16; returns
 * that scale. */
static float act_q8_0(const codes_fn codes, const float *x, size_t len, int8_t *q)
{
    float d;
    memset(q, 0, len); /* a zero max leaves the codes as they are */
    codes(x, len, &d, q);
    return lmq_f16_to_f32(lmq_f32_to_f16(d));
}


static lmq_code a8b_linear(const rt_exec *ex, const struct product *p, const float *x, int n, const rt_weight *W,
                           float *y, lmq_err *err)
{
    if (n <= 0) /* nothing to round or multiply (and malloc(0) may say NULL) */
        return LMQ_OK;
    (void)p;
    const size_t in = (size_t)W->in, alen = lmq_act_block_len(W->q.dtype);
    const a8b_reading *read = &rt_a8b_readings[W->q.dtype];
    const int sub = read->sub, nb = W->in / sub;
    const int threads = lmq_pool_threads(ex->pool);
    const a8b_pack_fn *packs = ex->isa->linear->a8b_pack;
    const a8b_row_fn *rows = ex->isa->linear->a8b_row;
    const int own = W->L.bytes < INT32_MAX; /* the set's kernels take W (a8b_pack_fn) */
    const a8b_row_fn row = rows && own && n == 1 ? rows[W->q.dtype] : NULL;
    a8b_job j = { .W = W, .read = read, .pack = packs && own && !row ? packs[W->q.dtype] : NULL, .row = row,
                  .dot = ex->isa->linear->a8b_dot, .n = n, .nb = nb, .y = y,
                  .scratch_each = ((size_t)nb * A8B_ROWS * ((size_t)sub + 2 * sizeof(float)) + 63) / 64 * 64 };
    int8_t *qx = malloc((size_t)n * in);
    float *dx = malloc((size_t)n * (size_t)nb * sizeof *dx);
    int32_t *cx = malloc((size_t)n * (size_t)nb * sizeof *cx);
    j.scratch = aligned_alloc(64, (size_t)threads * j.scratch_each);
    if (!qx || !dx || !cx || !j.scratch) {
        free(qx), free(dx), free(cx), free(j.scratch);
        return lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory for the activations", W->name);
    }
    /* each activation block's codes and scale, then its sub-blocks' scale and 128·Σ codes */
    for (size_t a = 0; a < (size_t)n * in; a += alen) {
        const float d = alen == LMQ_ACT_BLOCK_LEN ? act_q8_0(ex->isa->linear->act_codes, x + a, alen, qx + a)
                                                  : act_q8_k(x + a, alen, qx + a);
        for (size_t k = a; k < a + alen; k += (size_t)sub) {
            int32_t sum = 0;
            for (int t = 0; t < sub; t++)
                sum += qx[k + (size_t)t];
            dx[k / (size_t)sub] = d;
            cx[k / (size_t)sub] = 128 * sum;
        }
    }
    j.qx = qx, j.dx = dx, j.cx = cx;
    const int64_t tasks = (W->out + A8B_ROWS - 1) / A8B_ROWS, macs = (int64_t)n * W->out * W->in;
    lmq_pool_for(macs < RT_PARALLEL_MIN_WORK ? NULL : ex->pool, tasks, 1, a8b_task, &j);
    free(qx), free(dx), free(cx), free(j.scratch);
    return LMQ_OK;
}

/* ---------------------------------------------------------------- products */

/* The products of their own, a row each, keyed by the weights (encoding, the granularities and
 * symmetry it takes, the most inputs) and the rounding of x; the first row that applies is taken.
 * Any other weight and rounding runs the float product: x rounded as its row in ROUNDINGS says
 * (none: as given), then the kernel set's fused kernels or the staged fp32 product. */
static const struct product {
    lmq_dtype dtype;
    unsigned grans; /* bit (1u << lmq_gran) each */
    int sym;        /* 1: symmetric weights only */
    int max_in;
    lmq_act act;
    product_fn run;
} PRODUCTS[] = {
    { LMQ_T_INT8, 1u << LMQ_GRAN_CHANNEL, 1, INT8_MAX_IN, { LMQ_ACT_INT8, LMQ_ACT_TOKEN }, int8_linear },
#define A8B_ROW(T, grans, sym) { T, grans, sym, INT32_MAX, { LMQ_ACT_INT8, LMQ_ACT_BLOCK }, a8b_linear },
    A8B_ROW(LMQ_T_INT8, 1u << LMQ_GRAN_GROUP, 1) A8B_ROW(LMQ_T_INT4, 1u << LMQ_GRAN_GROUP, 1)
#define A8B_BLOCK_ROW(name, T) A8B_ROW(T, 1u << LMQ_GRAN_NONE, 0)
    RT_BLOCK_TYPES(A8B_BLOCK_ROW)
};

static const struct product *product_of(const rt_weight *W)
{
    for (size_t i = 0; i < sizeof PRODUCTS / sizeof PRODUCTS[0]; i++) {
        const struct product *p = &PRODUCTS[i];
        if (p->dtype == W->q.dtype && (p->grans >> W->q.gran & 1) && !(p->sym && W->q.asym) && W->in <= p->max_in &&
            same_act(p->act, W->act) && !lmq_act_check(W->act, &W->q, W->in, NULL))
            return p;
    }
    return NULL;
}

/* x reordered for a kernel set, rows shared out (prefill's x is megabytes). */
typedef struct {
    const fused_kernels *f;
    const float *x;
    float *out;
    int in;
} reorder_job;

static void reorder_task(void *v, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const reorder_job *r = v;
    r->f->reorder(r->x + begin * r->in, (int)(end - begin), r->in, r->out + begin * r->in);
}

/* Room for len activations: local when they fit (cap floats), else aligned heap memory (NULL when
 * there is none). */
static float *activations(float *local, size_t cap, size_t len)
{
    return len <= cap ? local : aligned_alloc(64, (len * sizeof(float) + 63) / 64 * 64);
}

lmq_code rt_linear(const rt_exec *ex, const float *x, int n, const rt_weight *W, float *y, lmq_err *err)
{
    lmq_code c = ex->observe ? ex->observe(ex->observe_ctx, W, x, n, err) : LMQ_OK;
    if (c)
        return c;
    const struct product *p = product_of(W);
    if (p)
        return p->run(ex, p, x, n, W, y, err);
    const struct rounding *r;
    if ((c = rounding_of(W, &r, err)))
        return c;
    linear_job j = { .isa = ex->isa, .f = fused_row(ex->isa, W), .W = W, .x = x, .y = y, .n = n };
    /* W as stored for a few rows (fp32: up to a block of x, W streamed once); else staged: blocks
     * of W copied or decoded once and reused from cache by many rows. */
    const int direct = (n <= FUSED_ROWS && j.f) || (W->q.dtype == LMQ_T_F32 && n <= X_BLOCK);
    j.staged = !direct;
    j.x_blocks = (n + X_BLOCK - 1) / X_BLOCK;
    const int threads = lmq_pool_threads(ex->pool);
    int held[LMQ_POOL_MAX_THREADS];
    /* A decoded token's quantised and reordered activations fit on the stack. */
    _Alignas(64) float local[2][4096];
    float *xq = NULL, *xp = NULL;
    const size_t len = (size_t)n * (size_t)W->in, cap = sizeof local[0] / sizeof local[0][0];
    /* Aligned like the mapping's blobs: a vector load of a row never straddles two lines. */
    const size_t scratch = ((size_t)threads * W_BLOCK * (size_t)W->in * sizeof *j.scratch + 63) / 64 * 64;
    if (r) {
        if (!(xq = activations(local[0], cap, len))) {
            c = lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory for the activations", W->name);
            goto done;
        }
        act_quantize(r, W, x, n, xq);
        j.x = xq;
    }
    if (j.f && j.f->reorder) {
        if (!(xp = activations(local[1], cap, len))) {
            c = lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory for the activations", W->name);
            goto done;
        }
        reorder_job r = { j.f, j.x, xp, W->in };
        lmq_pool_for(n > FUSED_ROWS ? ex->pool : NULL, n, X_BLOCK, reorder_task, &r);
        j.x = xp;
    }
    if (j.staged && !(j.scratch = aligned_alloc(64, scratch))) {
        c = lmq_fail(err, LMQ_E_NOMEM, "tensor %s: out of memory for a block of rows", W->name);
        goto done;
    }
    for (int t = 0; t < threads; t++)
        held[t] = -1;
    j.held = held;
    const int64_t w_blocks = (W->out + W_BLOCK - 1) / W_BLOCK, tasks = (int64_t)j.x_blocks * w_blocks;
    const int64_t macs = (int64_t)n * W->out * W->in;
    /* Staged, a thread takes a block of W with all its tasks where there are blocks enough to
     * share out, so that each block is decoded once, not by every thread. */
    const int64_t grain = j.staged && w_blocks >= 4 * threads ? j.x_blocks : 1;
    lmq_pool_for(macs < RT_PARALLEL_MIN_WORK ? NULL : ex->pool, tasks, grain, linear_task, &j);
    if (j.failed)
        c = lmq_fail(err, LMQ_E_FORMAT, "tensor %s: stored rows do not decode", W->name);
done:
    free(j.scratch);
    if (xq != local[0])
        free(xq);
    if (xp != local[1])
        free(xp);
    return c;
}
