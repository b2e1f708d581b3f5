#include "calibrate/gptq.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "schemes/scheme.h"

enum {
    MAX_RAISES = 4,     /* damping ×10 at most this often: 0.01 → 100 × mean(diag H) */
    ROWS_PER_TASK = 16, /* rows quantised together, so each row of U is read once for all */
    TILE = 512,         /* columns per tile of a block's trailing update */
};

/* A column count whose cols² fp64 matrix has a size_t size. */
#define MAX_COLS (INT64_C(1) << 28)

/* diag(H) = 2·diag(G), a dead input (0) counted as 1. */
static double h_diag(const double *G, int64_t n, int64_t i)
{
    double h = 2 * G[i * n + i];
    return h == 0 ? 1.0 : h;
}

typedef struct {
    double h;
    int64_t i;
} col_key;

static int by_decreasing_h(const void *a, const void *b)
{
    const col_key *x = a, *y = b;
    if (x->h != y->h)
        return x->h < y->h ? 1 : -1;
    return (x->i > y->i) - (x->i < y->i);
}

/* y -= a·x over n elements (y and x never overlap); unrolled by four, which the compiler turns
 * into vector operations at -O2. */
static void axpy_sub(double *restrict y, double a, const double *restrict x, int64_t n)
{
    int64_t k = 0;
    for (; k + 4 <= n; k += 4) {
        y[k] -= a * x[k];
        y[k + 1] -= a * x[k + 1];
        y[k + 2] -= a * x[k + 2];
        y[k + 3] -= a * x[k + 3];
    }
    for (; k < n; k++)
        y[k] -= a * x[k];
}

/* The factorisation works on blocks of NB columns: a row stays in cache while it meets the NB
 * columns of a block, and a block's rows stay in cache while every row meets them. Products per
 * parallel chunk: enough to pay for the hand-off. */
enum { NB = 64, FACTOR_WORK = 1 << 14 };

typedef struct {
    double *A;
    int64_t n, k0, k1;  /* Cholesky: the block of columns [k0, k1) */
    const double *diag; /* the inverse: L's diagonal */
} factor_job;

/* L_ij = (A_ij - Σ_k<j L_ik L_jk) / L_jj for the columns j of the block. */
static void cholesky_entries(const factor_job *f, double *li, int64_t j1)
{
    for (int64_t j = f->k0; j < j1; j++) {
        const double *lj = f->A + j * f->n;
        li[j] = (li[j] - cal_dot(li, lj, j)) / lj[j];
    }
}

/* Rows k1 + [begin, end), below the block. */
static void cholesky_rows(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const factor_job *f = ctx;
    for (int64_t i = f->k1 + begin; i < f->k1 + end; i++)
        cholesky_entries(f, f->A + i * f->n, f->k1);
}

/* Blocks of columns [begin, end) of X = L⁻¹ by forward substitution (L x_j = e_j), x_j written
 * transposed into row j of the upper triangle, which nothing else reads: X_ij (i >= j) at
 * A[j][i], so x_j is contiguous there. */
static void inverse_cols(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const factor_job *f = ctx;
    const int64_t n = f->n;
    double *A = f->A;
    for (int64_t c0 = begin * NB; c0 < end * NB && c0 < n; c0 += NB) {
        const int64_t c1 = c0 + NB < n ? c0 + NB : n;
        for (int64_t i = c0; i < n; i++)
            for (int64_t j = c0; j < c1 && j <= i; j++)
                A[j * n + i] = i == j ? 1.0 / f->diag[j]
                                      : -cal_dot(A + i * n + j, A + j * n + j, i - j) / f->diag[i];
    }
}

/* U (upper, H⁻¹ = UᵀU) of H permuted (row p of U is input perm[p]) and damped by λ, in A (n × n;
 * only the upper triangle is U). With J the reversal, J H J = L Lᵀ gives H = V Vᵀ with V = J L J
 * upper, so H⁻¹ = (V⁻¹)ᵀ V⁻¹ and U = V⁻¹ = J L⁻¹ J: one Cholesky and one triangular inverse in
 * place, both on pool's threads (each product computed as on one thread). diag: n doubles.
 * Returns -1, or the position whose pivot was not positive. */
static int64_t factor(const double *G, const int64_t *perm, int64_t n, double lambda, double *A,
                      double *diag, lmq_pool *pool)
{
    for (int64_t p = 0; p < n; p++)
        for (int64_t q = 0; q < n; q++)
            A[(n - 1 - p) * n + (n - 1 - q)] = p == q ? h_diag(G, n, perm[p]) + lambda
                                                      : 2 * G[perm[p] * n + perm[q]];
    factor_job f = { .A = A, .n = n, .diag = diag };
    for (f.k0 = 0; f.k0 < n; f.k0 = f.k1) {
        f.k1 = f.k0 + NB < n ? f.k0 + NB : n;
        for (int64_t i = f.k0; i < f.k1; i++) { /* the block's own rows, in order */
            double *li = A + i * n;
            cholesky_entries(&f, li, i);
            const double s = li[i] - cal_dot(li, li, i);
            if (!(s > 0) || !isfinite(s))
                return n - 1 - i;
            li[i] = diag[i] = sqrt(s);
        }
        lmq_pool_for(pool, n - f.k1, 1 + FACTOR_WORK / (NB * f.k1), cholesky_rows, &f);
    }
    lmq_pool_for(pool, (n + NB - 1) / NB, 1, inverse_cols, &f);
    /* U_pq = X_{n-1-p, n-1-q}, held at A[n-1-q][n-1-p]: a reflection of the upper triangle
     * across its anti-diagonal. */
    for (int64_t p = 0; p < n; p++)
        for (int64_t q = p; q < n; q++) {
            const int64_t a = p * n + q, b = (n - 1 - q) * n + (n - 1 - p);
            if (a < b) {
                double v = A[a];
                A[a] = A[b];
                A[b] = v;
            }
        }
    return -1;
}

typedef struct {
    const q_scheme *s;
    const lmq_qparams *qp;
    const lmq_layout *L;
    const float *W;
    const unsigned char *dead;
    const int64_t *perm;
    const double *U;
    int64_t block;
    int dynamic; /* group scales fitted when the group's first column is reached */
    q_group *groups;
    uint32_t *codes;
    /* block encodings: the row's codec, each column's importance in the blocks' fits, and the
     * stored tensor, each block packed into it as its lazy block of columns ends */
    const q_block_codec *codec;
    const float *imp;
    uint8_t *out;
} gptq_job;

/* Rows [r0, r0 + nr) at once; w: nr × cols working weights in processing order, e: nr × block
 * errors, f: cols floats, bst: block encodings' nr × (block / group) states of a lazy block. Every
 * weight's arithmetic is the same whichever rows share the call. */
static lmq_code gptq_rows(const gptq_job *j, int64_t r0, int64_t nr, double *w, double *e, float *f,
                          q_block_state *bst, lmq_err *err)
{
    const q_scheme *s = j->s;
    const lmq_qparams *qp = j->qp;
    const int64_t n = j->L->cols, gl = j->L->group, gpr = j->L->groups_per_row, B = j->block;
    const int per_row = qp->gran == LMQ_GRAN_CHANNEL || qp->gran == LMQ_GRAN_GROUP;
    const double *U = j->U;
    lmq_code rc;
    for (int64_t r = 0; r < nr; r++) {
        const int64_t row = r0 + r;
        for (int64_t c = 0; c < n; c++)
            f[c] = j->dead[c] ? 0.0f : j->W[row * n + c];
        for (int64_t p = 0; p < n; p++)
            w[r * n + p] = f[j->perm[p]];
        for (int64_t gi = 0; per_row && !j->dynamic && gi < gpr; gi++) {
            const int64_t c0 = gi * gl, len = n - c0 < gl ? n - c0 : gl;
            if ((rc = q_fit(qp, f + c0, (size_t)len, (size_t)(row * n + c0), &j->groups[row * gpr + gi], err)))
                return rc;
        }
    }
    for (int64_t b0 = 0; b0 < n; b0 += B) {
        const int64_t b1 = b0 + B < n ? b0 + B : n;
        for (int64_t p = b0; p < b1; p++) {
            const int64_t c = j->perm[p], gi = c / gl;
            const double *u = U + p * n;
            for (int64_t r = 0; r < nr; r++) {
                const int64_t row = r0 + r;
                const size_t at = (size_t)(row * n + c);
                double *wr = w + r * n;
                q_group *g = per_row && !j->codec ? &j->groups[row * gpr + gi] : &j->groups[0];
                q_block_state *bs = j->codec ? &bst[r * (B / gl) + gi - b0 / gl] : NULL;
                if (j->dynamic && c % gl == 0) {
                    const int64_t len = n - c < gl ? n - c : gl;
                    for (int64_t k = 0; k < len; k++)
                        f[k] = (float)wr[p + k];
                    if (bs && q_block_fit(j->codec, f, j->imp + c, bs))
                        return lmq_fail(err, LMQ_E_NUMERIC, "GPTQ: row %" PRId64 ", %s block %" PRId64 " (weights "
                                        "%zu..%zu as updated) needs a scale beyond the fp16 range", row,
                                        s->enc->name, gi, at, at + (size_t)len - 1);
                    if (!bs && (rc = q_fit(qp, f, (size_t)len, at, g, err)))
                        return rc;
                }
                float x = (float)wr[p], dq;
                if (bs)
                    bs->q[c % gl] = q_block_round(j->codec, bs, (int)(c % gl), x, &dq);
                else if ((rc = s->encode(s, g, &x, 1, at, &j->codes[at], err)))
                    return rc;
                else
                    s->decode(s, g, &j->codes[at], 1, &dq);
                const double ej = (wr[p] - dq) / u[p];
                e[r * B + (p - b0)] = ej;
                if (ej != 0) /* also keeps the sign of a zero weight */
                    axpy_sub(wr + p + 1, ej, u + p + 1, b1 - p - 1);
            }
        }
        for (int64_t r = 0; j->codec && r < nr; r++) /* the lazy block's blocks are complete */
            for (int64_t gi = b0 / gl; gi < b1 / gl; gi++)
                q_block_pack(j->codec, &bst[r * (B / gl) + gi - b0 / gl],
                             j->out + (size_t)((r0 + r) * gpr + gi) * j->s->enc->block_bytes);
        /* The block's errors into every later column: E · U[block, b1..], tile by tile; each
         * weight still takes its updates in column order. */
        for (int64_t t0 = b1; t0 < n; t0 += TILE) {
            const int64_t t1 = t0 + TILE < n ? t0 + TILE : n;
            for (int64_t p = b0; p < b1; p++) {
                const double *u = U + p * n;
                for (int64_t r = 0; r < nr; r++) {
                    const double ej = e[r * B + (p - b0)];
                    double *wr = w + r * n;
                    if (ej != 0)
                        axpy_sub(wr + t0, ej, u + t0, t1 - t0);
                }
            }
        }
    }
    return LMQ_OK;
}

static lmq_code gptq_task(void *ctx, int64_t begin, int64_t end, int thread, lmq_err *err)
{
    (void)thread;
    const gptq_job *j = ctx;
    const int64_t n = j->L->cols, rows = j->L->rows;
    double *w = malloc((size_t)(ROWS_PER_TASK * n) * sizeof *w);
    double *e = malloc((size_t)(ROWS_PER_TASK * j->block) * sizeof *e);
    float *f = malloc((size_t)n * sizeof *f);
    q_block_state *bst = j->codec ? malloc((size_t)(ROWS_PER_TASK * (j->block / j->L->group)) * sizeof *bst) : NULL;
    lmq_code rc = w && e && f && (bst || !j->codec) ? LMQ_OK
                              : lmq_fail(err, LMQ_E_NOMEM, "GPTQ: no memory for %d rows of %" PRId64
                                         " weights", ROWS_PER_TASK, n);
    for (int64_t c = begin; !rc && c < end; c++) {
        const int64_t r0 = c * ROWS_PER_TASK;
        rc = gptq_rows(j, r0, rows - r0 < ROWS_PER_TASK ? rows - r0 : ROWS_PER_TASK, w, e, f, bst, err);
    }
    free(bst);
    free(w);
    free(e);
    free(f);
    return rc;
}

lmq_code cal_gptq(const lmq_qparams *qp, const float *W, int64_t rows, int64_t cols, const double *G,
                  const cal_gptq_params *p, uint8_t *out, size_t out_size, lmq_pool *pool,
                  cal_result *res, lmq_err *err)
{
    if (!(p->damp > 0) || !isfinite(p->damp) || p->block < 1)
        return lmq_fail(err, LMQ_E_ARG, "GPTQ damp %g, block %d: damp is > 0 and finite, block >= 1",
                        p->damp, p->block);
    lmq_layout L;
    lmq_code rc = lmq_layout_of(qp, rows, cols, &L, err);
    if (rc)
        return rc;
    if (cols > MAX_COLS)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "GPTQ: %" PRId64 " inputs need a %" PRId64 "² Hessian",
                        cols, cols);
    if ((rc = cal_check_gram(G, cols, err)))
        return rc;
    const size_t nw = (size_t)(rows * cols);
    float *Wq = malloc(nw * sizeof *Wq);
    const q_scheme *s = q_scheme_get(qp->dtype);
    uint32_t *codes = s->codec ? NULL : malloc(nw * sizeof *codes);
    double *A = malloc((size_t)(cols * cols) * sizeof *A), *diag = malloc((size_t)cols * sizeof *diag);
    unsigned char *dead = malloc((size_t)cols);
    int64_t *perm = malloc((size_t)cols * sizeof *perm);
    col_key *keys = malloc((size_t)cols * sizeof *keys);
    q_group *groups = calloc((size_t)(L.n_scales ? L.n_scales : 1), sizeof *groups);
    float *imp = NULL;
    if (s->codec && p->act_order) {
        rc = lmq_fail(err, LMQ_E_UNSUPPORTED, "GPTQ: act_order with %s: a block's codes lie along the row in "
                      "input order, so columns taken in another order would straddle blocks fitted before "
                      "their weights are updated", s->enc->name);
        goto done;
    }
    if (s->codec)
        imp = malloc((size_t)cols * sizeof *imp);
    if (!Wq || (!codes && !s->codec) || !A || !diag || !dead || !perm || !keys || !groups || (s->codec && !imp)) {
        rc = lmq_fail(err, LMQ_E_NOMEM, "GPTQ: no memory for a [%" PRId64 ", %" PRId64 "] layer "
                      "(%zu MiB)", rows, cols, ((size_t)(cols * cols) * 8 + nw * 8) >> 20);
        goto done;
    }
    /* Round to nearest first: its error, and the weights checked finite by q_quantize. */
    if ((rc = cal_rtn(qp, W, rows, cols, out, out_size, Wq, pool, err)))
        goto done;
    double num, den;
    cal_error_terms(W, Wq, rows, cols, G, pool, &num, &den);
    res->err_rtn = cal_relative_error(num, den);

    double mean = 0;
    for (int64_t i = 0; i < cols; i++) {
        dead[i] = G[i * cols + i] == 0;
        keys[i] = (col_key){ h_diag(G, cols, i), i };
        mean += keys[i].h;
    }
    mean /= (double)cols;
    if (p->act_order)
        qsort(keys, (size_t)cols, sizeof *keys, by_decreasing_h);
    for (int64_t i = 0; i < cols; i++)
        perm[i] = keys[i].i;

    res->damp_used = p->damp;
    res->damp_raises = 0;
    for (int64_t bad; (bad = factor(G, perm, cols, res->damp_used * mean, A, diag, pool)) >= 0;) {
        if (res->damp_raises == MAX_RAISES) {
            rc = lmq_fail(err, LMQ_E_NUMERIC, "GPTQ: the Hessian 2·XᵀX is not positive definite "
                          "(input %" PRId64 ") even damped by %g × its mean diagonal: the Gram "
                          "matrix is not XᵀX", perm[bad], res->damp_used);
            goto done;
        }
        res->damp_used *= 10;
        res->damp_raises++;
    }

    /* The scales fitted before the loop: per tensor on the whole matrix (dead inputs zeroed). */
    const int dynamic = (qp->gran == LMQ_GRAN_GROUP || s->codec) && !p->act_order;
    /* A block's fit weighs each column by what an error there costs once GPTQ has spread it:
     * e² / U_jj² (the quantity each column's step adds to the objective); dead inputs weigh 0. */
    for (int64_t c = 0; imp && c < cols; c++)
        imp[c] = dead[c] ? 0.0f : (float)(1.0 / (A[c * cols + c] * A[c * cols + c]));
    if (!s->codec && (qp->gran == LMQ_GRAN_TENSOR || qp->gran == LMQ_GRAN_NONE)) {
        float *Wz = Wq; /* free until the error pass */
        for (size_t i = 0; i < nw; i++)
            Wz[i] = dead[i % (size_t)cols] ? 0.0f : W[i];
        if ((rc = q_fit(qp, Wz, nw, 0, &groups[0], err)))
            goto done;
    }
    int64_t block = p->block;
    if (dynamic) /* groups never straddle blocks: a group's fit sees all earlier updates */
        block = (block + L.group - 1) / L.group * L.group;
    gptq_job j = { .s = s, .qp = qp, .L = &L, .W = W, .dead = dead, .perm = perm, .U = A, .block = block,
                   .dynamic = dynamic, .groups = groups, .codes = codes, .codec = s->codec, .imp = imp,
                   .out = out };
    if ((rc = lmq_pool_try(pool, (rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK, 1, gptq_task, &j, err)))
        goto done;
    if ((!s->codec && (rc = q_store(qp, rows, cols, groups, codes, out, out_size, err))) ||
        (rc = q_dequantize(qp, out, out_size, rows, cols, Wq, pool, err)))
        goto done;
    cal_error_terms(W, Wq, rows, cols, G, pool, &num, NULL);
    res->err = cal_relative_error(num, den);
done:
    free(Wq);
    free(codes);
    free(A);
    free(diag);
    free(dead);
    free(perm);
    free(keys);
    free(groups);
    free(imp);
    return rc;
}
