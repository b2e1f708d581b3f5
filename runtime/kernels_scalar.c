/* The scalar kernel set (runtime/kernels.h): portable C, the readable reference the other sets'
 * results are held to. Its fused linear kernels are GGUF's blocks' alone (the reference decoders,
 * block by block); for the rest rt_linear dequantises blocks of rows with the scheme table and runs
 * gemm_nt over them. */
#include "runtime/linear_impl.h"

static void gemm_nt_scalar(const float *x, size_t ldx, const float *w, size_t ldw, const float *b, float *y,
                           size_t ldy, int m, int cols, int k)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < cols; j++) {
            float s = 0.0f;
            for (int kk = 0; kk < k; kk++)
                s += x[i * ldx + kk] * w[j * ldw + kk];
            y[i * ldy + j] = b ? s + b[j] : s;
        }
}

static void wsum_rows_scalar(const float *w, int n, const float *x, size_t ldx, float scale, float *y, int d)
{
    for (int c = 0; c < d; c++) {
        float s = 0.0f;
        for (int j = 0; j < n; j++)
            s += w[j] * x[j * ldx + c];
        y[c] = s * scale;
    }
}

static void gram_row_scalar(double *g, const float *x, size_t ldx, int n, int i, int d)
{
    rt_gram_cols(g, x, ldx, n, i, i, d);
}

static float softmax_unnorm_scalar(float *x, int n, float scale)
{
    float mx = x[0], sum = 0.0f;
    for (int i = 1; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < n; i++) {
        x[i] = expf(scale * (x[i] - mx));
        sum += x[i];
    }
    return sum;
}

static void gelu_scalar(float *x, int n)
{
    for (int i = 0; i < n; i++) {
        float v = x[i];
        x[i] = 0.5f * v * (1.0f + tanhf(GELU_C * (v + 0.044715f * v * v * v)));
    }
}

static void silu_mul_scalar(float *g, const float *u, int n)
{
    for (int i = 0; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static int row_stats_scalar(const float *l, int n, rt_rowstat *st)
{
    float mx = l[0];
    int arg = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(l[i]))
            return -1;
        if (l[i] > mx)
            mx = l[i], arg = i;
    }
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += exp((double)l[i] - mx);
    *st = (rt_rowstat){ .max = mx, .argmax = arg, .sumexp = s };
    return 0;
}

static double kl_row_scalar(const float *lr, const rt_rowstat *sr, const float *lq, int n)
{
    const float c = lr[sr->argmax] - lq[sr->argmax];
    double x = 0.0, R = 0.0;
    for (int i = 0; i < n; i++) {
        const double a = (double)lr[i] - sr->max, e = exp(a), d = (double)(lr[i] - lq[i]) - c;
        x += e * d;
        R += fabs(d) <= KL_SMALL ? e * (expm1(-d) + d) : exp(a - d) - e + e * d;
    }
    x /= sr->sumexp;
    return kl_finish(x, R / sr->sumexp, sr->sumexp);
}

/* Four independent accumulators: the additions do not wait on each other. */
static uint64_t sum_words_scalar(const uint8_t *p, size_t n, int prefetch)
{
    uint64_t acc[4] = { 0 };
    for (size_t i = 0; i < n; i += 256) {
        sum_ask_ahead(p + i, prefetch);
        for (int j = 0; j < 32; j++) {
            uint64_t w;
            memcpy(&w, p + i + 8 * j, 8);
            acc[j % 4] += w;
        }
    }
    return acc[0] + acc[1] + acc[2] + acc[3];
}

static void dot4_u8s8_scalar(const uint8_t *const c[4], const int8_t *q, size_t ldq, int mr, size_t in, size_t ahead,
                             int32_t out[TILE_X][4])
{
    (void)ahead;
    for (int i = 0; i < mr; i++)
        for (int r = 0; r < 4; r++) {
            int32_t acc = 0;
            for (size_t k = 0; k < in; k++)
                acc += (int32_t)c[r][k] * q[(size_t)i * ldq + k];
            out[i][r] = acc;
        }
}

static int32_t act_codes_scalar(const float *x, size_t in, float *scale, int8_t *q)
{
    const float s = *scale = act_scale(x, in);
    int32_t sum = 0;
    for (size_t k = 0; k < in && s > 0.0f; k++)
        sum += q[k] = (int8_t)round_clamp127(x[k] / s);
    return sum;
}

/* The a8 block product's reference: each sub-block sum exact in int32 (at most 32·128·127), then
 * its fp32 term, the scales' product first, added to the lane's running sum, then the min's term
 * likewise (-ffp-contract=off keeps the multiplies and the adds apart). */
static void a8b_dot_scalar(const uint8_t *wq, const float *wd, const float *wm, int nb, int sub, const int8_t *qx,
                           size_t ldq, const float *dx, const int32_t *cx, size_t lds, int mr,
                           float out[A8B_MR][A8B_ROWS])
{
    for (int i = 0; i < mr; i++)
        for (int l = 0; l < A8B_ROWS; l++) {
            float acc = 0.0f;
            for (int b = 0; b < nb; b++) {
                const uint8_t *w = wq + (size_t)b * A8B_ROWS * (size_t)sub + 4 * l;
                const int8_t *q = qx + (size_t)i * ldq + (size_t)b * (size_t)sub;
                int32_t s = 0;
                for (int v = 0; v < sub / 4; v++)
                    for (int t = 0; t < 4; t++)
                        s += ((int32_t)w[64 * v + t] - 128) * q[4 * v + t];
                const float d = dx[(size_t)i * lds + b], p = d * wd[(size_t)b * A8B_ROWS + l];
                const float term = (float)s * p;
                acc = acc + term;
                if (wm) {
                    const float pm = d * wm[(size_t)b * A8B_ROWS + l], tm = (float)(cx[(size_t)i * lds + b] / 128) * pm;
                    acc = acc + tm;
                }
            }
            out[i][l] = acc;
        }
}

/* GGUF blocks: schemes/gguf_blocks.c's decoders, a block of each of the tile's rows at a time, then
 * gemm_nt_scalar's sums (one running sum an output, in column order). */
static const block_fn BLOCKS[LMQ_T_COUNT] = {
    [LMQ_T_Q8_0] = q_gguf_q8_0, [LMQ_T_Q4_0] = q_gguf_q4_0, [LMQ_T_Q4_1] = q_gguf_q4_1,     [LMQ_T_Q5_0] = q_gguf_q5_0,
    [LMQ_T_Q5_1] = q_gguf_q5_1, [LMQ_T_Q2_K] = q_gguf_q2_k, [LMQ_T_Q3_K] = q_gguf_q3_k,     [LMQ_T_Q4_K] = q_gguf_q4_k,
    [LMQ_T_Q5_K] = q_gguf_q5_k, [LMQ_T_Q6_K] = q_gguf_q6_k, [LMQ_T_IQ4_NL] = q_gguf_iq4_nl, [LMQ_T_IQ4_XS] = q_gguf_iq4_xs,
};

static inline void tileblk1(int dt, int MR, const rt_weight *W, const int j[4], const float *x, size_t ldx,
                            float out[TILE_X][4])
{
    blkrow r[4];
    for (int c = 0; c < 4; c++)
        blk_row(W, j[c], &r[c]);
    float w[4][BLK_MAX];
    for (int i = 0; i < MR; i++)
        for (int c = 0; c < 4; c++)
            out[i][c] = 0.0f;
    for (int64_t b = 0; b < W->in / r[0].n; b++) {
        for (int c = 0; c < 4; c++)
            BLOCKS[dt](r[c].p + (size_t)b * r[c].bytes, w[c]);
        for (int i = 0; i < MR; i++)
            for (int c = 0; c < 4; c++) {
                const float *xb = x + (size_t)i * ldx + b * r[0].n;
                float s = out[i][c];
                for (int t = 0; t < r[0].n; t++)
                    s += xb[t] * w[c][t];
                out[i][c] = s;
            }
    }
}

static inline void rowblk1(int dt, const rt_weight *W, int j, float *o)
{
    blkrow r;
    blk_row(W, j, &r);
    for (int64_t b = 0; b < W->in / r.n; b++)
        BLOCKS[dt](r.p + (size_t)b * r.bytes, o + b * r.n);
}

#define BLK_KERNELS(name, T) RT_FUSED(, blk1, name, T)
RT_BLOCK_TYPES(BLK_KERNELS)

static const rt_fused FUSED[] = { RT_BLOCK_TYPES(RT_BLOCK_ROW) };

static const struct rt_linear_kernels LINEAR = { .fused = FUSED, .n_fused = sizeof FUSED / sizeof FUSED[0],
                                                 .act_codes = act_codes_scalar, .dot4 = dot4_u8s8_scalar,
                                                 .a8b_dot = a8b_dot_scalar };

const rt_kernels rt_kernels_scalar = {
    .name = "scalar",
    .gemm_nt = gemm_nt_scalar,
    .wsum_rows = wsum_rows_scalar,
    .softmax_unnorm = softmax_unnorm_scalar,
    .gelu_tanh = gelu_scalar,
    .silu_mul = silu_mul_scalar,
    .row_stats = row_stats_scalar,
    .kl_row = kl_row_scalar,
    .gram_row = gram_row_scalar,
    .sum_words = sum_words_scalar,
    .linear = &LINEAR,
};
