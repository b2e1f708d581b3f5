/* GGUF's block encoders (gguf_quant.h): lmq's own search, written from ggml's block layouts.
 *
 * What is minimised: E = Σ w_i (y_i − x_i)², y_i the value weight i decodes to (computed as the
 * decoder computes it), w_i its importance (1 without one: the squared error itself, which the
 * relative Frobenius error measures, where llama.cpp's search without an importance matrix
 * weighs by |x| or x²). The search has three layers:
 *
 * 1. Sub-block fit (every K-type and IQ4 sub-block; IQ4_NL's block; Q8_0 ... Q5_1's block when
 *    weighted). A sub-block's values are y = d·level(q) + b over a grid of levels: the integers
 *    0..nmax with an offset b (Q2_K, Q4_K, Q5_K: b = −min ≤ 0; Q4_1, Q5_1: b any), the integers
 *    lo..hi with b = 0 (Q3_K −4..3, Q6_K −32..31, Q4_0 −8..7, Q5_0 −16..15, Q8_0 −128..127), or
 *    IQ4's 16 non-linear levels with b = 0. Candidate scales are 21 per end of the grid:
 *      with an offset, d = (max − min) / (nmax + k/10), b = min (min clamped to ≤ 0 for K-types);
 *      without, the signed extreme x_e mapped onto each end level L of the grid (both: the grids
 *      are not symmetric) moved by k/10 of the grid's step there, d = x_e / (L ± k·step/10);
 *    k = −10..10. Each candidate's codes are the levels nearest (x − b) / d; the best d (and b)
 *    for those codes is then the weighted least-squares fit, and the candidate with the least E
 *    is kept; two Lloyd steps follow (codes for the fit, fit for the codes) while E falls.
 * 2. Super-block scales (K-types, IQ4_XS): the sub-block scales s_j (and mins m_j) are stored as
 *    integers times the super-block's fp16 d (and dmin): d = max s_j / 63 and dmin = max m_j / 63
 *    for Q4_K, Q5_K (6 bits), / 15 for Q2_K (4 bits); the largest |s_j| onto −32 for Q3_K and
 *    IQ4_XS (6-bit signed), onto −128 for Q6_K (8-bit signed). Each sub-block then takes, of the
 *    integers next to round(s_j / d) (and round(m_j / dmin)), up to 3 × 3 of them, the pair whose
 *    codes, re-chosen against the quantised scale and min, give the least E.
 * 3. One more round with d and dmin refitted by least squares to those codes and integers over
 *    the whole super-block (layer 2 again under them); the better of the two rounds is stored.
 * IQ4_NL (one 32-block) stores layer 1's d as fp16 and re-chooses the codes against it.
 *
 * Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 without importance follow ggml's reference quantisers
 * (ggml-quants.c: quantize_row_q*_ref, what llama-quantize writes for them), so their bytes are
 * llama-quantize's: Q8_0 d = max|x| / 127, q = round(x / d); Q4_0, Q5_0 d = x_e / −8 (/ −16),
 * q = min(top, trunc(x / d + 8.5 (16.5))); Q4_1, Q5_1 d = (max − min) / 15 (31), m = min,
 * q = min(top, trunc((x − min) / d + 0.5)); the division being a multiplication by 1 / d in
 * fp32 before d is rounded to fp16. With importance they go through layer 1 and store its d
 * (and m) in fp16, the codes re-chosen against those. */
#include "schemes/gguf_quant.h"

#include <math.h>
#include <string.h>

#include "common/fp.h"
#include "schemes/gguf_blocks.h"

enum { STEPS = 10, LLOYD = 2, ROUNDS = 2 };

/* ---- levels, codes and fits -------------------------------------------------------------- */

/* Code c stands for level lo + c (integers lo..hi), or for book[c] (lo 0, hi 15). */
typedef struct {
    int lo, hi;
    const int8_t *book;
} grid;

static float level(const grid *g, int c)
{
    return g->book ? (float)g->book[c] : (float)(g->lo + c);
}

static int top(const grid *g)
{
    return g->hi - g->lo;
}

/* t rounded (halves away from zero) and clamped to lo..hi, clamped first in float so that no
 * conversion is undefined. */
static int round_clamp(float t, int lo, int hi)
{
    t = t > (float)lo ? t : (float)lo;
    t = t < (float)hi ? t : (float)hi;
    return (int)(t + (t < 0 ? -0.5f : 0.5f));
}

/* Codes for y = d·level + b into q: each the level nearest (x − b) / d; with d = 0 the level
 * nearest 0, every y being b. */
static void codes(const grid *g, const float *x, int n, float d, float b, uint8_t *q)
{
    const float id = d != 0 ? 1.0f / d : 0.0f, lo = (float)g->lo, hi = (float)g->hi;
    if (g->book) { /* the midpoints between the 16 levels that t is at or above */
        float mid[15];
        for (int k = 0; k < 15; k++)
            mid[k] = 0.5f * (float)(g->book[k] + g->book[k + 1]);
        for (int i = 0; i < n; i++) {
            const float t = (x[i] - b) * id;
            int c = 0;
            for (int k = 0; k < 15; k++)
                c += t >= mid[k];
            q[i] = (uint8_t)c;
        }
        return;
    }
    for (int i = 0; i < n; i++) { /* halves up, NaN (0 · Inf where 1 / d overflowed) to lo */
        float t = (x[i] - b) * id;
        t = t > lo ? t : lo;
        t = t < hi ? t : hi;
        q[i] = (uint8_t)(int)(t - lo + 0.5f);
    }
}

/* codes, and their E. */
static double choose(const grid *g, const float *x, const float *w, int n, float d, float b, uint8_t *q)
{
    codes(g, x, n, d, b, q);
    double e = 0;
    for (int i = 0; i < n; i++) {
        const double r = (double)(d * level(g, q[i]) + b) - (double)x[i];
        e += (double)w[i] * r * r;
    }
    return e;
}

/* Offsets: none (y = d·level), K-quants' mins (b ≤ 0), Q4_1's and Q5_1's (any b). */
enum { NO_OFFSET, MIN_OFFSET, ANY_OFFSET };

/* The weighted least-squares d (and b) of y = d·level(q) + b to x for fixed codes q; returns E at
 * the fit (the quadratic expanded from the weighted sums). */
static double refit(const grid *g, int offset, const float *x, const float *w, int n, const uint8_t *q, float *d,
                    float *b)
{
    double sw = 0, sx = 0, sl = 0, sll = 0, slx = 0, sxx = 0;
    for (int i = 0; i < n; i++) {
        const double v = level(g, q[i]), wi = w[i], xi = x[i];
        sw += wi;
        sx += wi * xi;
        sl += wi * v;
        sll += wi * v * v;
        slx += wi * v * xi;
        sxx += wi * xi * xi;
    }
    double dd = sll > 0 ? slx / sll : 0, bb = 0;
    if (offset) {
        const double det = sw * sll - sl * sl;
        if (det > 0) {
            dd = (sw * slx - sl * sx) / det;
            bb = (sll * sx - sl * slx) / det;
        } else { /* one level for all: the mean */
            dd = 0;
            bb = sw > 0 ? sx / sw : 0;
        }
        if (offset == MIN_OFFSET && bb > 0) {
            bb = 0;
            dd = sll > 0 ? slx / sll : 0;
        }
    }
    *d = (float)dd;
    *b = (float)bb;
    dd = *d;
    bb = *b;
    return sxx - 2 * dd * slx - 2 * bb * sx + dd * dd * sll + 2 * dd * bb * sl + bb * bb * sw;
}

/* Layer 1 (the header): the best d, b and codes q of n <= 32 weights; returns E. */
static double fit(const grid *g, int offset, const float *x, const float *w, int n, float *d, float *b, uint8_t *q)
{
    float mn = x[0], mx = x[0], ext = 0;
    for (int i = 0; i < n; i++) {
        mn = x[i] < mn ? x[i] : mn;
        mx = x[i] > mx ? x[i] : mx;
        ext = fabsf(x[i]) > fabsf(ext) ? x[i] : ext;
    }
    if (offset == MIN_OFFSET && mn > 0)
        mn = 0;
    *d = 0;
    *b = offset ? mn : 0;
    if (offset ? mx == mn : ext == 0) /* one value (0 without an offset): d = 0, y = b */
        return choose(g, x, w, n, 0, *b, q);
    const float b0 = *b;
    uint8_t t[32], last[32];
    double best = INFINITY;
    for (int end = 0, tried = 0; end < (offset ? 1 : 2); end++) {
        /* The level the range (or the extreme) maps to, and the step it moves by. */
        const int c = end ? 0 : top(g);
        const float at = level(g, c), step = fabsf(at - level(g, c ? c - 1 : 1));
        for (int k = -STEPS; k <= STEPS; k++) {
            const float to = at + (float)k * step / STEPS;
            if (offset ? !(to > 0) : !(to * at > 0))
                continue;
            float dd, bb;
            codes(g, x, n, offset ? (mx - mn) / to : ext / to, b0, t);
            if (tried++ && !memcmp(t, last, (size_t)n)) /* the fit of the same codes again */
                continue;
            memcpy(last, t, (size_t)n);
            const double e = refit(g, offset, x, w, n, t, &dd, &bb);
            if (e < best) {
                best = e;
                *d = dd;
                *b = bb;
                memcpy(q, t, (size_t)n);
            }
        }
    }
    for (int it = 0; it < LLOYD; it++) {
        float dd, bb;
        codes(g, x, n, *d, *b, t);
        const double e = refit(g, offset, x, w, n, t, &dd, &bb);
        if (!(e < best))
            break;
        best = e;
        *d = dd;
        *b = bb;
        memcpy(q, t, (size_t)n);
    }
    return best;
}

/* The weights of the fits: imp, but 1 for each run of n whose importance sums to 0 (nothing
 * prefers one weight) and everywhere without imp. */
static void weights(const float *imp, int count, int n, float *w)
{
    for (int j = 0; j < count; j += n) {
        float s = 0;
        for (int i = j; i < j + n && imp; i++)
            s += imp[i];
        for (int i = j; i < j + n; i++)
            w[i] = s > 0 ? imp[i] : 1.0f;
    }
}

/* ---- bytes ------------------------------------------------------------------------------- */

/* Rounds *v to fp16; -1 when it overflows. */
static int round_half(float *v)
{
    *v = lmq_f16_to_f32(lmq_f32_to_f16(*v));
    return isfinite(*v) ? 0 : -1;
}

static void put_f16(uint8_t *p, float v)
{
    const uint16_t h = lmq_f32_to_f16(v);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* 32 codes as nibbles, low ones first (code j in byte j, j + 16 above it), and their fifth bits
 * into the 32-bit qh (bit j for code j) when qh is not NULL: gguf_blocks.c's codes32 reversed. */
static void put_codes32(const uint8_t *c, uint8_t *qs, uint8_t *qh)
{
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((c[j] & 0xF) | (c[j + 16] & 0xF) << 4);
        h |= (uint32_t)(c[j] >> 4) << j | (uint32_t)(c[j + 16] >> 4) << (j + 16);
    }
    for (int k = 0; qh && k < 4; k++)
        qh[k] = (uint8_t)(h >> (8 * k));
}

/* ---- the codecs ------------------------------------------------------------------------- */

/* The grid of a block type and how it chooses and stores its scales: one row per type. */
struct q_block_codec {
    grid g;
    int subs, n; /* sub-blocks and weights in each (32-weight types: one of 32) */
    int super;   /* 1: sub-block scales s_j (and mins m_j) are integers times d (and dmin) */
    int offset;  /* NO_OFFSET, MIN_OFFSET (K-types' mins), ANY_OFFSET (Q4_1, Q5_1) */
    int smax;    /* super: s in 0..smax with mins, else −smax..smax − 1 */
    /* 32-weight types without importance: ggml's reference rule (NULL: the weighted fit always) */
    int (*rule)(const grid *g, const float *x, q_block_state *k);
    void (*pack)(const q_block_codec *c, const q_block_state *k, uint8_t *b);
    int qs, qh; /* 32-weight types: the offsets of the nibbles and of the fifth bits (0: none) */
};

/* Sub-block j's y = d·level + b, computed as the decoder computes it. */
static void sub_grid(const q_block_codec *c, const q_block_state *k, int j, float *d, float *b)
{
    if (c->super) {
        *d = k->d * (float)k->s[j];
        *b = c->offset ? -(k->dmin * (float)k->m[j]) : 0.0f;
    } else {
        *d = k->d;
        *b = c->offset ? k->dmin : 0.0f;
    }
}

/* ---- the 32-weight blocks ---------------------------------------------------------------- */

/* ggml's truncation of a code the reference quantisers compute in fp32 (from 0.5 up: a
 * positive number), kept to 0..top; 0 where it is not finite (1 / d overflowed), as x86 gives. */
static uint8_t trunc_code(float v, int top)
{
    if (!(v > -128.0f && v < 128.0f))
        return 0;
    const int c = (int)v;
    return (uint8_t)(c > top ? top : c);
}

/* Q8_0: d = max|x| / 127, q = round(x / d); codes are level + 128. */
static int rule_q8_0(const grid *g, const float *x, q_block_state *k)
{
    (void)g;
    float amax = 0;
    for (int j = 0; j < 32; j++)
        amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    k->d = amax / 127.0f;
    const float id = k->d ? 1.0f / k->d : 0.0f;
    for (int j = 0; j < 32; j++) {
        const float v = roundf(x[j] * id);
        k->q[j] = (uint8_t)((v >= -128.0f && v <= 127.0f ? (int)v : 0) + 128);
    }
    return round_half(&k->d);
}

/* Q4_0, Q5_0: d = x_e / lo, codes c = level − lo. */
static int rule_sym(const grid *g, const float *x, q_block_state *k)
{
    float amax = 0, ext = 0;
    for (int j = 0; j < 32; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            ext = x[j];
        }
    k->d = ext / (float)g->lo;
    const float id = k->d ? 1.0f / k->d : 0.0f;
    for (int j = 0; j < 32; j++)
        k->q[j] = trunc_code(x[j] * id + ((float)-g->lo + 0.5f), top(g));
    return round_half(&k->d);
}

/* Q4_1, Q5_1: the min / max rule. */
static int rule_affine(const grid *g, const float *x, q_block_state *k)
{
    float mn = 0x1.fffffep127f, mx = -0x1.fffffep127f;
    for (int j = 0; j < 32; j++) {
        mn = x[j] < mn ? x[j] : mn;
        mx = x[j] > mx ? x[j] : mx;
    }
    k->d = (mx - mn) / (float)top(g);
    k->dmin = mn;
    const float id = k->d ? 1.0f / k->d : 0.0f;
    for (int j = 0; j < 32; j++)
        k->q[j] = trunc_code((x[j] - mn) * id + 0.5f, top(g));
    return round_half(&k->d) | round_half(&k->dmin);
}

/* A 32-block: the reference rule without importance where the type has one, else layer 1 with
 * its d (and offset) rounded to fp16 and the codes re-chosen against them. */
static int fit_block32(const q_block_codec *c, const float *x, const float *imp, q_block_state *k)
{
    if (!imp && c->rule)
        return c->rule(&c->g, x, k);
    float w[32], d, m;
    weights(imp, 32, 32, w);
    fit(&c->g, c->offset, x, w, 32, &d, &m, k->q);
    k->d = d;
    k->dmin = c->offset ? m : 0.0f;
    if (round_half(&k->d) || round_half(&k->dmin))
        return -1;
    codes(&c->g, x, 32, k->d, k->dmin, k->q);
    return 0;
}

static void pack_q8_0(const q_block_codec *c, const q_block_state *k, uint8_t *b)
{
    (void)c;
    put_f16(b, k->d);
    for (int j = 0; j < 32; j++)
        b[2 + j] = (uint8_t)(k->q[j] - 128); /* level as int8 */
}

/* d at b (and the offset m at b + 2), the codes' nibbles at b + qs and their fifth bits at b + qh. */
static void pack_block32(const q_block_codec *c, const q_block_state *k, uint8_t *b)
{
    put_f16(b, k->d);
    if (c->offset)
        put_f16(b + 2, k->dmin);
    put_codes32(k->q, b + c->qs, c->qh ? b + c->qh : NULL);
}

/* ---- super-blocks of 256 ----------------------------------------------------------------- */

/* Layer 2 under the super-block scales in k->d, k->dmin, from the sub-block fits fs, fm (the
 * scale and the min of each); returns E. */
static double quantise_subs(const q_block_codec *ks, const float *x, const float *w, const float *fs, const float *fm,
                            q_block_state *k)
{
    const int dm = ks->offset != NO_OFFSET, lo = dm ? 0 : -ks->smax, hi = dm ? ks->smax : ks->smax - 1;
    double total = 0;
    for (int j = 0; j < ks->subs; j++) {
        const int n = ks->n, s0 = k->d != 0 ? round_clamp(fs[j] / k->d, lo, hi) : 0,
                  m0 = k->dmin != 0 ? round_clamp(fm[j] / k->dmin, 0, ks->smax) : 0;
        double best = INFINITY;
        uint8_t t[32];
        for (int s = s0 - 1; s <= s0 + 1; s++)
            for (int m = m0 - dm; m <= m0 + dm; m++) {
                if (s < lo || s > hi || m < 0 || m > ks->smax)
                    continue;
                const double e = choose(&ks->g, x + j * n, w + j * n, n, k->d * (float)s, -(k->dmin * (float)m), t);
                if (e < best) {
                    best = e;
                    k->s[j] = s;
                    k->m[j] = m;
                    memcpy(k->q + j * n, t, (size_t)n);
                }
            }
        total += best;
    }
    return total;
}

/* Layer 3's fit: d (and dmin) by least squares to k's codes and integers, y = d·u − dmin·v with
 * u = s·level, v = m. */
static void refit_super(const q_block_codec *ks, const float *x, const float *w, const q_block_state *k, float *d,
                        float *dmin)
{
    double suu = 0, suv = 0, svv = 0, sux = 0, svx = 0;
    for (int i = 0; i < ks->subs * ks->n; i++) {
        const int j = i / ks->n;
        const double u = k->s[j] * (double)level(&ks->g, k->q[i]), v = -k->m[j], wi = w[i];
        suu += wi * u * u;
        suv += wi * u * v;
        svv += wi * v * v;
        sux += wi * u * x[i];
        svx += wi * v * x[i];
    }
    const double det = suu * svv - suv * suv;
    *d = suu > 0 ? (float)(sux / suu) : 0;
    *dmin = 0;
    if (ks->offset && det > 0) {
        *d = (float)((svv * sux - suv * svx) / det);
        *dmin = (float)((suu * svx - suv * sux) / det);
    }
}

/* Layers 1-3 for a 256-weight super-block into k; -1 when d or dmin overflows fp16. */
static int fit_super(const q_block_codec *ks, const float *x, const float *imp, q_block_state *k)
{
    float w[256], fs[16], fm[16], d = 0, dmin = 0, ext = 0;
    weights(imp, 256, ks->n, w);
    for (int j = 0; j < ks->subs; j++) {
        float b;
        fit(&ks->g, ks->offset, x + j * ks->n, w + j * ks->n, ks->n, &fs[j], &b, k->q);
        fm[j] = -b;
        if (ks->offset) {
            fs[j] = fs[j] > 0 ? fs[j] : 0;
            d = fs[j] > d ? fs[j] : d;
            dmin = fm[j] > dmin ? fm[j] : dmin;
        } else if (fabsf(fs[j]) > fabsf(ext)) {
            ext = fs[j];
        }
    }
    /* The largest scale (and min) onto the top integer, or the extreme onto −smax. */
    d = ks->offset ? d / (float)ks->smax : ext / (float)-ks->smax;
    dmin /= (float)ks->smax;
    double best = INFINITY;
    q_block_state t;
    memset(&t, 0, sizeof t);
    for (int round = 0; round < ROUNDS; round++) {
        if (round)
            refit_super(ks, x, w, &t, &d, &dmin);
        t.d = d;
        t.dmin = dmin;
        if (round_half(&t.d) || round_half(&t.dmin)) {
            if (round == 0)
                return -1;
            break;
        }
        const double e = quantise_subs(ks, x, w, fs, fm, &t);
        if (e < best) {
            best = e;
            *k = t;
        }
    }
    return 0;
}

/* The 2-bit fields of a Q2_K / Q3_K block: code bits 0-1 of weight 128h + 32k + l at bits 2k of
 * qs[32h + l]. */
static void put_codes2(const uint8_t *q, uint8_t *qs)
{
    memset(qs, 0, 64);
    for (int i = 0; i < 256; i++)
        qs[32 * (i / 128) + i % 32] |= (uint8_t)((q[i] & 3) << (2 * (i % 128 / 32)));
}

static void pack_q2_k(const q_block_codec *c, const q_block_state *k, uint8_t *b)
{
    (void)c;
    for (int j = 0; j < 16; j++)
        b[j] = (uint8_t)(k->s[j] | k->m[j] << 4);
    put_codes2(k->q, b + 16);
    put_f16(b + 80, k->d);
    put_f16(b + 82, k->dmin);
}

static void pack_q3_k(const q_block_codec *c, const q_block_state *k, uint8_t *b)
{
    (void)c;
    memset(b, 0, 32);
    for (int i = 0; i < 256; i++) /* the third bit: bit i / 32 of hmask[i % 32] */
        b[i % 32] |= (uint8_t)((k->q[i] >> 2) << (i / 32));
    put_codes2(k->q, b + 32);
    memset(b + 96, 0, 12);
    for (int j = 0; j < 16; j++) { /* s + 32: low nibble in byte j % 8 (high half for j >= 8) */
        const int u = k->s[j] + 32;
        b[96 + j % 8] |= (uint8_t)((u & 0xF) << (j < 8 ? 0 : 4));
        b[104 + j % 4] |= (uint8_t)((u >> 4) << (2 * (j / 4)));
    }
    put_f16(b + 108, k->d);
}

/* Q4_K and Q5_K: d, dmin, then the 6-bit s, m of sub-block j < 4 in scale bytes j, j + 4; of
 * j + 4 as the nibbles of byte j + 8 with their top two bits over bytes j, j + 4. Weight
 * 64c + 32h + l's low four bits in nibble h of qs[32c + l], Q5_K's fifth at bit 2c + h of qh[l]
 * (c->qh 0: none). */
static void pack_k4(const q_block_codec *c, const q_block_state *k, uint8_t *b)
{
    put_f16(b, k->d);
    put_f16(b + 2, k->dmin);
    uint8_t *p = b + 4, *qs = b + c->qs, *qh = c->qh ? b + c->qh : NULL;
    for (int j = 0; j < 4; j++) {
        p[j] = (uint8_t)(k->s[j] | (k->s[j + 4] >> 4) << 6);
        p[j + 4] = (uint8_t)(k->m[j] | (k->m[j + 4] >> 4) << 6);
        p[j + 8] = (uint8_t)((k->s[j + 4] & 0xF) | (k->m[j + 4] & 0xF) << 4);
    }
    memset(qs, 0, 128);
    if (qh)
        memset(qh, 0, 32);
    for (int i = 0; i < 256; i++) {
        const int cc = i / 64, h = i / 32 % 2, l = i % 32;
        qs[32 * cc + l] |= (uint8_t)((k->q[i] & 0xF) << (4 * h));
        if (qh)
            qh[l] |= (uint8_t)((k->q[i] >> 4) << (2 * cc + h));
    }
}

/* Q6_K: weight 128n + 32k + l's low four bits in ql[64n + l + 32(k & 1)] (low nibble for k < 2),
 * its top two at bits 2k of qh[32n + l]. */
static void pack_q6_k(const q_block_codec *c, const q_block_state *k, uint8_t *b)
{
    (void)c;
    memset(b, 0, 192);
    for (int i = 0; i < 256; i++) {
        const int n = i / 128, kk = i % 128 / 32, l = i % 32;
        b[64 * n + l + 32 * (kk & 1)] |= (uint8_t)((k->q[i] & 0xF) << (kk < 2 ? 0 : 4));
        b[128 + 32 * n + l] |= (uint8_t)((k->q[i] >> 4) << (2 * kk));
    }
    for (int j = 0; j < 16; j++)
        b[192 + j] = (uint8_t)(int8_t)k->s[j];
    put_f16(b + 208, k->d);
}

/* IQ4_XS: s + 32 of sub-block j as nibble j % 2 of scales_l[j / 2], its top two bits at 2j of
 * scales_h; each sub-block's codes as IQ4_NL's. */
static void pack_iq4_xs(const q_block_codec *c, const q_block_state *k, uint8_t *b)
{
    (void)c;
    put_f16(b, k->d);
    unsigned sh = 0;
    memset(b + 4, 0, 4);
    for (int j = 0; j < 8; j++) {
        const int u = k->s[j] + 32;
        b[4 + j / 2] |= (uint8_t)((u & 0xF) << (4 * (j % 2)));
        sh |= (unsigned)(u >> 4) << (2 * j);
        put_codes32(k->q + 32 * j, b + 8 + 16 * j, NULL);
    }
    b[2] = (uint8_t)sh;
    b[3] = (uint8_t)(sh >> 8);
}

/* ---- the table --------------------------------------------------------------------------- */

#define B32(lo_, hi_, book_, off_, rule_, pack_, qs_, qh_)                                                      \
    { .g = { lo_, hi_, book_ }, .subs = 1, .n = 32, .offset = off_, .rule = rule_, .pack = pack_, .qs = qs_, \
      .qh = qh_ }
#define SUPER(lo_, hi_, book_, subs_, n_, off_, smax_, pack_, qs_, qh_)                                 \
    { .g = { lo_, hi_, book_ }, .subs = subs_, .n = n_, .super = 1, .offset = off_, .smax = smax_, \
      .pack = pack_, .qs = qs_, .qh = qh_ }

const q_block_codec q_gguf_q8_0_codec = B32(-128, 127, NULL, NO_OFFSET, rule_q8_0, pack_q8_0, 0, 0),
                    q_gguf_q4_0_codec = B32(-8, 7, NULL, NO_OFFSET, rule_sym, pack_block32, 2, 0),
                    q_gguf_q4_1_codec = B32(0, 15, NULL, ANY_OFFSET, rule_affine, pack_block32, 4, 0),
                    q_gguf_q5_0_codec = B32(-16, 15, NULL, NO_OFFSET, rule_sym, pack_block32, 6, 2),
                    q_gguf_q5_1_codec = B32(0, 31, NULL, ANY_OFFSET, rule_affine, pack_block32, 8, 4),
                    q_gguf_iq4_nl_codec = B32(0, 15, q_iq4nl_values, NO_OFFSET, NULL, pack_block32, 2, 0),
                    q_gguf_q2_k_codec = SUPER(0, 3, NULL, 16, 16, MIN_OFFSET, 15, pack_q2_k, 0, 0),
                    q_gguf_q3_k_codec = SUPER(-4, 3, NULL, 16, 16, NO_OFFSET, 32, pack_q3_k, 0, 0),
                    q_gguf_q4_k_codec = SUPER(0, 15, NULL, 8, 32, MIN_OFFSET, 63, pack_k4, 16, 0),
                    q_gguf_q5_k_codec = SUPER(0, 31, NULL, 8, 32, MIN_OFFSET, 63, pack_k4, 48, 16),
                    q_gguf_q6_k_codec = SUPER(-32, 31, NULL, 16, 16, NO_OFFSET, 128, pack_q6_k, 0, 0),
                    q_gguf_iq4_xs_codec = SUPER(0, 15, q_iq4nl_values, 8, 32, NO_OFFSET, 32, pack_iq4_xs, 0, 0);

/* ---- the primitives ---------------------------------------------------------------------- */

int q_block_fit(const q_block_codec *c, const float *x, const float *imp, q_block_state *k)
{
    memset(k, 0, sizeof *k);
    return c->super ? fit_super(c, x, imp, k) : fit_block32(c, x, imp, k);
}

uint8_t q_block_round(const q_block_codec *c, const q_block_state *k, int i, float x, float *y)
{
    float d, b;
    uint8_t q;
    sub_grid(c, k, i / c->n, &d, &b);
    codes(&c->g, &x, 1, d, b, &q);
    *y = c->offset ? d * level(&c->g, q) + b : d * level(&c->g, q); /* no + 0: a −0 stays −0 */
    return q;
}

void q_block_pack(const q_block_codec *c, const q_block_state *k, uint8_t *b)
{
    c->pack(c, k, b);
}

int q_block_encode(const q_block_codec *c, const float *x, const float *imp, uint8_t *b)
{
    q_block_state k;
    if (q_block_fit(c, x, imp, &k))
        return -1;
    q_block_pack(c, &k, b);
    return 0;
}
