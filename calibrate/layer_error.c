#include "calibrate/layer_error.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "common/san.h"
#include "common/vec.h"
#include "schemes/scheme.h"

/* The four partial sums are the lanes of one vector (lane l holds k ≡ l mod 4), in the same order
 * as four scalars: the same bits, in one register where the CPU has AVX2. */
SAN_UNCHECKED VEC_CLONES static double dot4(const double *a, const double *b, int64_t n)
{
    v4d s = { 0 };
    int64_t k = 0;
    for (; k + 4 <= n; k += 4) {
        v4d x, y;
        memcpy(&x, a + k, sizeof x);
        memcpy(&y, b + k, sizeof y);
        s += x * y;
    }
    double s0 = s[0];
    for (; k < n; k++)
        s0 += a[k] * b[k];
    return (s0 + s[1]) + (s[2] + s[3]);
}

/* The sanitizer build checks a and b whole: per-load checks had been 62 % of target_bpw's planner
 * there (22.4 -> 11.3 s; the optimised build 6.0 -> 5.5 s, the same bytes). */
double cal_dot(const double *a, const double *b, int64_t n)
{
    if (n <= 0)
        return 0;
    san_check_range(a, (size_t)n * sizeof *a);
    san_check_range(b, (size_t)n * sizeof *b);
    return dot4(a, b, n);
}

/* Tiles of G: a QB × QB block (128 KiB) stays in cache while every row passes over it, and each
 * row's differences are converted to fp64 once per tile. */
enum { QB = 128 };

/* d[k] = a[k] - b[k] (b NULL: a[k]) for k in [k0, k1), in fp64. */
static void diff_tile(double *d, const float *a, const float *b, int64_t k0, int64_t k1)
{
    for (int64_t k = k0; k < k1; k++)
        d[k - k0] = (double)a[k] - (b ? (double)b[k] : 0.0);
}

double cal_quad(const double *G, int64_t ldg, const float *a, const float *b, int64_t lda,
                int64_t nrows, int64_t n)
{
    /* G symmetric: dᵀGd = Σ_i d_i (G_ii d_i + 2 Σ_j>i G_ij d_j), over tiles I <= J. */
    double sum = 0, di[QB], dj[QB];
    for (int64_t i0 = 0; i0 < n; i0 += QB) {
        const int64_t i1 = i0 + QB < n ? i0 + QB : n;
        for (int64_t j0 = i0; j0 < n; j0 += QB) {
            const int64_t j1 = j0 + QB < n ? j0 + QB : n;
            for (int64_t r = 0; r < nrows; r++) {
                const float *ar = a + r * lda, *br = b ? b + r * lda : NULL;
                diff_tile(di, ar, br, i0, i1);
                diff_tile(dj, ar, br, j0, j1);
                for (int64_t i = i0; i < i1; i++) {
                    const double x = di[i - i0], *g = G + i * ldg;
                    if (x == 0)
                        continue;
                    if (j0 == i0)
                        sum += x * (g[i] * x + 2 * cal_dot(g + i + 1, dj + (i + 1 - j0), j1 - i - 1));
                    else
                        sum += x * 2 * cal_dot(g + j0, dj, j1 - j0);
                }
            }
        }
    }
    return sum;
}

/* The rows are cut into a fixed number of runs (shape alone decides them), each summed on its
 * own, then the runs in order: the same value on any number of threads. */
enum { RUNS = 64 };

typedef struct {
    const float *W, *Wq;
    int64_t rows, cols, per;
    const double *G;
    int want_den;
    double num[RUNS], den[RUNS];
} error_job;

static void error_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    error_job *j = ctx;
    for (int64_t c = begin; c < end; c++) {
        int64_t r0 = c * j->per, n = r0 + j->per < j->rows ? j->per : j->rows - r0;
        const size_t off = (size_t)(r0 * j->cols);
        j->num[c] = cal_quad(j->G, j->cols, j->Wq + off, j->W + off, j->cols, n, j->cols);
        j->den[c] = j->want_den ? cal_quad(j->G, j->cols, j->W + off, NULL, j->cols, n, j->cols) : 0;
    }
}

void cal_error_terms(const float *W, const float *Wq, int64_t rows, int64_t cols, const double *G,
                     lmq_pool *pool, double *num, double *den)
{
    error_job j = { .W = W, .Wq = Wq, .rows = rows, .cols = cols, .G = G, .want_den = den != NULL,
                    .per = (rows + RUNS - 1) / RUNS };
    const int64_t runs = (rows + j.per - 1) / j.per;
    lmq_pool_for(pool, runs, 1, error_task, &j);
    double sn = 0, sd = 0;
    for (int64_t c = 0; c < runs; c++) {
        sn += j.num[c];
        sd += j.den[c];
    }
    *num = sn;
    if (den)
        *den = sd;
}

double cal_relative_error(double num, double den)
{
    if (den == 0)
        return num == 0 ? 0.0 : INFINITY;
    return num / den;
}

lmq_code cal_rtn(const lmq_qparams *qp, const float *W, int64_t rows, int64_t cols, uint8_t *out,
                 size_t out_size, float *Wq, lmq_pool *pool, lmq_err *err)
{
    lmq_code rc = q_quantize(qp, W, rows, cols, out, out_size, pool, err);
    return rc ? rc : q_dequantize(qp, out, out_size, rows, cols, Wq, pool, err);
}

lmq_code cal_check_gram(const double *G, int64_t n, lmq_err *err)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            if (!isfinite(G[i * n + j]))
                return lmq_fail(err, LMQ_E_NUMERIC, "Gram matrix element [%" PRId64 ", %" PRId64 "] is %g",
                                i, j, G[i * n + j]);
    for (int64_t i = 0; i < n; i++)
        if (G[i * n + i] < 0)
            return lmq_fail(err, LMQ_E_NUMERIC, "Gram matrix diagonal [%" PRId64 "] is %g < 0: not XᵀX",
                            i, G[i * n + i]);
    return LMQ_OK;
}
