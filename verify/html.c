#include "verify/html.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/artefact.h"
#include "formats/container.h"
#include "formats/manifest.h"
#include "tokenizer/unicode.h"

/* ---- escaping ------------------------------------------------------------------------------- */

static const struct {
    char c;
    const char *ref;
} entities[] = { { '&', "&amp;" }, { '<', "&lt;" }, { '>', "&gt;" }, { '"', "&quot;" }, { '\'', "&#39;" } };

void vf_html_escape(FILE *f, const char *text)
{
    const uint8_t *s = (const uint8_t *)text;
    const size_t n = strlen(text);
    for (size_t i = 0; i < n;) {
        uint32_t cp = 0;
        const int len = tok_utf8_decode(s + i, n - i, &cp);
        if (!len || cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) { /* not text: a control character, or */
            fputc('?', f);                                    /* one byte that is not UTF-8 */
            i += len ? (size_t)len : 1;
            continue;
        }
        const char *ref = NULL;
        for (size_t k = 0; k < sizeof entities / sizeof entities[0] && len == 1; k++)
            if ((uint32_t)entities[k].c == cp)
                ref = entities[k].ref;
        if (ref)
            fputs(ref, f);
        else
            fwrite(s + i, 1, (size_t)len, f);
        i += (size_t)len;
    }
}

/* ---- SVG helpers: a scale per axis, a frame (the plot area), axes, marks, labels ------------- */

typedef struct {
    double lo, hi;
    double base; /* 0: linear; 2 or 10: logarithmic with ticks at powers of the base */
    int whole;   /* linear ticks at whole numbers only (layers) */
} scale;

typedef struct {
    double x, y, w, h; /* the plot area in pixels */
    scale sx, sy;
} frame;

/* A scale over [lo, hi] with a margin; a logarithmic one over positive values (lo <= 0 is
 * raised to one step of the base below hi). */
static scale fit(double lo, double hi, double base, int whole)
{
    if (!(lo <= hi)) /* nothing to show (an empty range, NaN): any axis */
        lo = hi = base ? 1 : 0;
    if (base) {
        if (!(hi > 0))
            hi = 1;
        if (!(lo > 0))
            lo = hi / base;
        if (!(hi > lo)) {
            hi *= base;
            lo /= base;
        }
        const double r = log(hi / lo);
        return (scale){ lo * exp(-0.06 * r), hi * exp(0.06 * r), base, 0 };
    }
    if (!(hi > lo)) {
        const double d = fabs(lo) > 0 ? fabs(lo) * 0.1 : 1;
        lo -= d;
        hi += d;
    }
    const double m = 0.06 * (hi - lo);
    return (scale){ lo - m, hi + m, 0, whole };
}

static double unit(const scale *s, double v)
{
    if (s->base)
        return log((v > s->lo ? v : s->lo) / s->lo) / log(s->hi / s->lo);
    return (v - s->lo) / (s->hi - s->lo);
}

static double px(const frame *p, double v)
{
    return p->x + p->w * unit(&p->sx, v);
}

static double py(const frame *p, double v)
{
    return p->y + p->h * (1 - unit(&p->sy, v));
}

/* Tick values of s (at most cap): powers of the base, or steps of 1, 2 or 5 × 10^k. */
static int ticks(const scale *s, double *t, int cap)
{
    int n = 0;
    if (s->base) {
        for (double k = ceil(log(s->lo) / log(s->base) - 1e-9); n < cap; k++) {
            const double v = pow(s->base, k);
            if (v > s->hi)
                break;
            t[n++] = v;
        }
        if (n >= 3)
            return n;
        /* Less than three powers in range: the linear steps read better (still placed on the log axis). */
        n = 0;
    }
    static const double steps[] = { 1, 2, 5, 10 };
    const double raw = (s->hi - s->lo) / 5, mag = pow(10, floor(log10(raw)));
    double step = 10 * mag;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if (steps[i] * mag >= raw) {
            step = steps[i] * mag;
            break;
        }
    if (s->whole && step < 1)
        step = 1;
    for (double v = ceil(s->lo / step) * step; v <= s->hi && n < cap; v += step)
        t[n++] = fabs(v) < 1e-9 * step ? 0 : v;
    return n;
}

static void svg_open(FILE *f, double w, double h, const char *title)
{
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
               "role=\"img\"><title>", w, h, w, h);
    vf_html_escape(f, title);
    fputs("</title>\n", f);
}

static void svg_text(FILE *f, double x, double y, const char *anchor, const char *cls, const char *text)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" class=\"%s\">", x, y, anchor, cls);
    vf_html_escape(f, text);
    fputs("</text>\n", f);
}

static void svg_line(FILE *f, double x0, double y0, double x1, double y1, const char *cls)
{
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"%s\"/>\n", x0, y0, x1, y1, cls);
}

/* The frame, grid lines and labelled ticks on both axes, and the axis titles. */
static void svg_axes(FILE *f, const frame *p, const char *xtitle, const char *ytitle)
{
    double t[32];
    char label[32];
    const int nx = ticks(&p->sx, t, 32);
    for (int i = 0; i < nx; i++) {
        const double x = px(p, t[i]);
        svg_line(f, x, p->y, x, p->y + p->h, "grid");
        snprintf(label, sizeof label, "%g", t[i]);
        svg_text(f, x, p->y + p->h + 14, "middle", "tick", label);
    }
    const int ny = ticks(&p->sy, t, 32);
    for (int i = 0; i < ny; i++) {
        const double y = py(p, t[i]);
        svg_line(f, p->x, y, p->x + p->w, y, "grid");
        snprintf(label, sizeof label, "%g", t[i]);
        svg_text(f, p->x - 5, y + 4, "end", "tick", label);
    }
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" class=\"frame\"/>\n", p->x, p->y, p->w, p->h);
    svg_text(f, p->x + p->w / 2, p->y + p->h + 32, "middle", "axis", xtitle);
    fprintf(f, "<text transform=\"translate(%.1f %.1f) rotate(-90)\" text-anchor=\"middle\" class=\"axis\">",
            p->x - 48, p->y + p->h / 2);
    vf_html_escape(f, ytitle);
    fputs("</text>\n", f);
}

/* A mark with a tooltip (the browser shows <title> on hover; no script). */
typedef enum { MARK_DOT, MARK_DIAMOND, MARK_CROSS } mark_shape;

static void svg_mark(FILE *f, double x, double y, mark_shape shape, const char *color, const char *tip)
{
    if (shape == MARK_DOT)
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\">", x, y, color);
    else if (shape == MARK_DIAMOND)
        fprintf(f, "<path d=\"M%.1f %.1fl4.5 4.5l-4.5 4.5l-4.5 -4.5z\" fill=\"%s\">", x, y - 4.5, color);
    else
        fprintf(f, "<path d=\"M%.1f %.1fl7 7m0 -7l-7 7\" stroke=\"%s\" stroke-width=\"1.6\">", x - 3.5, y - 3.5,
                color);
    fputs("<title>", f);
    vf_html_escape(f, tip);
    fputs("</title>", f);
    fputs(shape == MARK_DOT ? "</circle>\n" : "</path>\n", f);
}

/* Point labels placed where they overlap no earlier label and stay inside the frame. */
typedef struct {
    double x0, y0, x1, y1;
} box;

typedef struct {
    box *b;
    int n;
} placed;

/* Offsets of a label's baseline start from its point: right, then left, stepping away. */
static const double label_offs[][2] = { { 7, 4 },   { 7, -8 },  { 7, 16 },   { -7, 4 },  { -7, -8 },
                                        { -7, 16 }, { 7, -20 }, { 7, 28 },   { -7, -20 }, { -7, 28 },
                                        { 7, -32 }, { 7, 40 },  { -7, -32 }, { -7, 40 } };

/* Where a label of width w at offset k of the point (x, y) lies (11px text: 12px tall). */
static box label_box(double x, double y, size_t k, double w)
{
    const double x0 = label_offs[k][0] > 0 ? x + label_offs[k][0] : x + label_offs[k][0] - w;
    const double y1 = y + label_offs[k][1] + 3;
    return (box){ x0, y1 - 12, x0 + w, y1 };
}

/* Returns 0 (and draws nothing) when every place near the point would overlap. */
static int svg_label(FILE *f, placed *pl, const frame *p, double x, double y, const char *text)
{
    const double w = 6.2 * vf_text_columns(text); /* 11px text */
    size_t k = 0;
    for (; k < sizeof label_offs / sizeof label_offs[0]; k++) {
        const box b = label_box(x, y, k, w);
        int clear = b.x0 >= p->x && b.x1 <= p->x + p->w && b.y0 >= p->y && b.y1 <= p->y + p->h;
        for (int i = 0; i < pl->n && clear; i++)
            clear = b.x1 <= pl->b[i].x0 || b.x0 >= pl->b[i].x1 || b.y1 <= pl->b[i].y0 || b.y0 >= pl->b[i].y1;
        if (clear)
            break;
    }
    if (k == sizeof label_offs / sizeof label_offs[0])
        return 0;
    const box b = label_box(x, y, k, w);
    const int right = label_offs[k][0] > 0;
    if (pl->b)
        pl->b[pl->n++] = b;
    if (fabs(label_offs[k][1]) > 10) /* a label moved off its point's line: a leader shows whose it is */
        svg_line(f, x, y, right ? b.x0 : b.x1, b.y1 - 4, "leader");
    svg_text(f, right ? b.x0 : b.x1, b.y1 - 3, right ? "start" : "end", "label", text);
    return 1;
}

/* ---- page parts ------------------------------------------------------------------------------ */

static const char *const palette[] = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#aec7e8", "#ffbb78",
                                       "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22" };
#define N_PALETTE (sizeof palette / sizeof palette[0])

/* The artefact's file name without ".lmq", for labels. */
static void short_name(const char *path, char *out, size_t cap)
{
    snprintf(out, cap, "%s", vf_file_name(path));
    const size_t n = strlen(out);
    if (n > 4 && !strcmp(out + n - 4, ".lmq"))
        out[n - 4] = 0;
}

static void html_table(FILE *f, const vf_grid *g)
{
    fputs("<table>\n<thead><tr>", f);
    for (int i = 0; i < g->rows; i++) {
        if (i == 1)
            fputs("</tr></thead>\n<tbody>\n<tr>", f);
        else if (i)
            fputs("<tr>", f);
        for (int j = 0; j < g->cols; j++) {
            fputs(i ? (j < g->left ? "<td>" : "<td class=\"num\">") : "<th>", f);
            vf_html_escape(f, g->cell[i][j]);
            fputs(i ? "</td>" : "</th>", f);
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody>\n</table>\n", f);
}

/* What a quality plot puts on an axis: a row's value, the axis' log base (0: linear), its title,
 * and its name in tooltips (the table's heading). */
typedef struct {
    double (*of)(const vf_row *);
    double base;
    const char *title, *name;
} measure;

static double lin_bpw_of(const vf_row *w)
{
    return w->linear_bpw;
}

static double model_bpw_of(const vf_row *w)
{
    return w->model_bpw;
}

static double kl_of(const vf_row *w)
{
    return w->res.kl_mean;
}

static double dppl_of(const vf_row *w)
{
    return w->dppl_pct;
}

static const measure bpw_axes[] = { { lin_bpw_of, 2, "bits per weight, linear layers (log scale)", "bpw lin" },
                                    { model_bpw_of, 2, "bits per weight, whole model (log scale)", "bpw all" } };
static const measure quality_axes[] = { { kl_of, 10, "mean KL per position, nats (log scale)", "KL mean" },
                                        { dppl_of, 0, "PPL change, % of the reference", "dPPL %" } };

/* A row's point on a log axis needs a positive value (the reference's KL 0 has none). */
static int on_axes(const vf_row *w, const measure *mx, const measure *my)
{
    return (!mx->base || mx->of(w) > 0) && (!my->base || my->of(w) > 0);
}

/* Every artefact as a labelled point of one quality measure against one bits per weight; a
 * label that would overlap another is left out (the point's tooltip names it). Returns how many. */
static int quality_plot(FILE *f, const vf_report *r, const measure *mx, const measure *my)
{
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (int i = 0; i < r->n_rows; i++)
        if (on_axes(&r->rows[i], mx, my)) {
            xlo = fmin(xlo, mx->of(&r->rows[i]));
            xhi = fmax(xhi, mx->of(&r->rows[i]));
            ylo = fmin(ylo, my->of(&r->rows[i]));
            yhi = fmax(yhi, my->of(&r->rows[i]));
        }
    const frame p = { 64, 16, 420, 300, fit(xlo, xhi, mx->base, 0), fit(ylo, yhi, my->base, 0) };
    char title[256];
    snprintf(title, sizeof title, "%s against %s", my->title, mx->title);
    svg_open(f, 520, 370, title);
    svg_axes(f, &p, mx->title, my->title);
    /* Labels keep clear of every point, and of the labels placed before them. */
    placed pl = { calloc(2 * (size_t)r->n_rows, sizeof(box)), 0 };
    for (int i = 0; pl.b && i < r->n_rows; i++)
        if (on_axes(&r->rows[i], mx, my)) {
            const double x = px(&p, mx->of(&r->rows[i])), y = py(&p, my->of(&r->rows[i]));
            pl.b[pl.n++] = (box){ x - 4, y - 4, x + 4, y + 4 };
        }
    int left_out = 0;
    for (int i = 0; i < r->n_rows; i++) {
        const vf_row *w = &r->rows[i];
        if (!on_axes(w, mx, my))
            continue;
        char name[160], tip[512];
        short_name(w->path, name, sizeof name);
        const double x = px(&p, mx->of(w)), y = py(&p, my->of(w));
        snprintf(tip, sizeof tip, "%s: %s %.4g, %s %.4g", name, mx->name, mx->of(w), my->name, my->of(w));
        svg_mark(f, x, y, MARK_DOT, i ? palette[0] : palette[1], tip);
        left_out += !svg_label(f, &pl, &p, x, y, name);
    }
    free(pl.b);
    fputs("</svg>\n", f);
    return left_out;
}

/* Each candidate's KL percentiles on one log axis: whisker p1..p99.9, box p10..p90, median bar,
 * ticks at p5, p95, p99, the mean (diamond) and the maximum (cross). */
static void kl_distribution(FILE *f, const vf_report *r)
{
    const int n = r->n_rows - 1, row_h = 26;
    double lo = INFINITY, hi = 0;
    for (int i = 1; i <= n; i++) {
        const vf_result *q = &r->rows[i].res;
        for (int k = 0; k < VF_KL_LEVELS; k++)
            if (q->kl_pct[k] > 0)
                lo = fmin(lo, q->kl_pct[k]);
        hi = fmax(hi, q->kl_max);
    }
    const frame p = { 210, 10, 640, (double)n * row_h, fit(lo, hi, 10, 0), fit(0, n, 0, 0) };
    svg_open(f, 880, p.h + 60, "KL divergence per position: distribution per artefact");
    double t[32];
    char label[32];
    const int nt = ticks(&p.sx, t, 32);
    for (int i = 0; i < nt; i++) {
        svg_line(f, px(&p, t[i]), p.y, px(&p, t[i]), p.y + p.h, "grid");
        snprintf(label, sizeof label, "%g", t[i]);
        svg_text(f, px(&p, t[i]), p.y + p.h + 14, "middle", "tick", label);
    }
    svg_text(f, p.x + p.w / 2, p.y + p.h + 32, "middle", "axis",
             "KL(P_ref || P) per position, nats (log scale; values below the axis drawn at its left end)");
    for (int i = 1; i <= n; i++) {
        const vf_result *q = &r->rows[i].res;
        const double y = p.y + (i - 0.5) * row_h;
        char name[160], tip[256];
        short_name(r->rows[i].path, name, sizeof name);
        svg_text(f, p.x - 8, y + 4, "end", "label", name);
        svg_line(f, px(&p, q->kl_pct[VF_KL_P1]), y, px(&p, q->kl_pct[VF_KL_P999]), y, "whisker");
        const double b0 = px(&p, q->kl_pct[VF_KL_P10]), b1 = px(&p, q->kl_pct[VF_KL_P90]);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"12\" class=\"box\"><title>", b0, y - 6,
                fmax(b1 - b0, 1));
        snprintf(tip, sizeof tip, "%s: p10 %.3g, median %.3g, p90 %.3g, p99 %.3g, p99.9 %.3g", name,
                 q->kl_pct[VF_KL_P10], q->kl_pct[VF_KL_MEDIAN], q->kl_pct[VF_KL_P90], q->kl_pct[VF_KL_P99],
                 q->kl_pct[VF_KL_P999]);
        vf_html_escape(f, tip);
        fputs("</title></rect>\n", f);
        svg_line(f, px(&p, q->kl_pct[VF_KL_MEDIAN]), y - 7, px(&p, q->kl_pct[VF_KL_MEDIAN]), y + 7, "median");
        const int tick_at[] = { VF_KL_P1, VF_KL_P5, VF_KL_P95, VF_KL_P99, VF_KL_P999 };
        for (size_t k = 0; k < sizeof tick_at / sizeof tick_at[0]; k++)
            svg_line(f, px(&p, q->kl_pct[tick_at[k]]), y - 4, px(&p, q->kl_pct[tick_at[k]]), y + 4, "whisker");
        snprintf(tip, sizeof tip, "%s: mean %.4g ± %.2g", name, q->kl_mean, q->kl_se);
        svg_mark(f, px(&p, q->kl_mean), y, MARK_DIAMOND, palette[1], tip);
        snprintf(tip, sizeof tip, "%s: max %.4g", name, q->kl_max);
        svg_mark(f, px(&p, q->kl_max), y, MARK_CROSS, palette[0], tip);
    }
    fputs("</svg>\n", f);
    fputs("<p class=\"note\">Line: 1st to 99.9th percentile, with ticks at the 1st, 5th, 95th, 99th and 99.9th; "
          "box: 10th to 90th; bar: median; diamond: mean; cross: maximum.</p>\n", f);
}

/* ---- per-tensor error by layer, from the manifests ----------------------------------------- */

#define MAX_KINDS 32
#define KIND_LEN 48

typedef struct {
    int layer, kind; /* kind < 0: a tensor outside the blocks */
    double err;
    char name[LMQ_NAME_MAX];
} tensor_err;

typedef struct {
    tensor_err *t;
    int n, n_layers;
    char problem[1100]; /* why the manifest could not be read; "" when it was */
} artefact_errs;

typedef struct {
    char name[MAX_KINDS][KIND_LEN];
    int n;
} kinds;

static int kind_index(kinds *k, const char *name, size_t len)
{
    for (int i = 0; i < k->n; i++)
        if (strlen(k->name[i]) == len && !strncmp(k->name[i], name, len))
            return i;
    if (k->n == MAX_KINDS || len >= KIND_LEN)
        return -1;
    memcpy(k->name[k->n], name, len);
    k->name[k->n][len] = 0;
    return k->n++;
}

/* "blk.<layer>.<kind>.weight" → layer and kind (other suffixes stay in the kind: "attn_norm.bias");
 * names outside the blocks → kind -1. */
static void classify(kinds *k, tensor_err *t)
{
    static const char weight[] = ".weight";
    t->kind = -1;
    t->layer = 0;
    if (strncmp(t->name, "blk.", 4))
        return;
    char *end;
    const long layer = strtol(t->name + 4, &end, 10);
    if (end == t->name + 4 || layer < 0 || layer > 1000000 || *end != '.' || !end[1])
        return;
    const char *kind = end + 1;
    size_t len = strlen(kind);
    if (len > sizeof weight - 1 && !strcmp(kind + len - (sizeof weight - 1), weight))
        len -= sizeof weight - 1;
    t->layer = (int)layer;
    t->kind = kind_index(k, kind, len);
}

static void read_errs(const char *path, kinds *k, artefact_errs *a)
{
    memset(a, 0, sizeof *a);
    lmq_container c;
    lmq_manifest man;
    lmq_err err;
    if (lmq_container_open_manifest(&c, &man, path, &err)) {
        snprintf(a->problem, sizeof a->problem, "%s", err.msg);
        return;
    }
    a->n_layers = man.arch.n_layers;
    if (!(a->t = calloc((size_t)man.n_tensors + 1, sizeof *a->t)))
        snprintf(a->problem, sizeof a->problem, "%s: out of memory", path);
    for (int i = 0; a->t && i < man.n_tensors; i++) {
        const lmq_manifest_tensor *mt = &man.tensors[i];
        if (mt->q.dtype == LMQ_T_F32)
            continue;
        tensor_err *t = &a->t[a->n++];
        snprintf(t->name, sizeof t->name, "%s", mt->name);
        t->err = mt->stats.rel_error;
        classify(k, t);
    }
    lmq_manifest_free(&man);
    lmq_container_close(&c);
}

/* One artefact's plot: a line per kind of tensor over the layers; the tensors outside the
 * blocks (embeddings, classifier) are listed in the caption. */
static void error_plot(FILE *f, const artefact_errs *a, const kinds *k, const scale *sy, const char *name)
{
    const frame p = { 64, 12, 240, 150, fit(0, a->n_layers > 1 ? a->n_layers - 1 : 1, 0, 1), *sy };
    char title[256], tip[LMQ_NAME_MAX + 64];
    int in_blocks = 0;
    for (int i = 0; i < a->n; i++)
        in_blocks += a->t[i].kind >= 0;
    fputs("<figure>", f);
    if (in_blocks) {
        snprintf(title, sizeof title, "%s: relative error per tensor by layer", name);
        svg_open(f, 320, 210, title);
        svg_axes(f, &p, "layer", "relative error (log)");
        for (int kind = 0; kind < k->n; kind++) {
            const char *color = palette[(size_t)kind % N_PALETTE];
            fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.2\" points=\"", color);
            for (int l = 0; l < a->n_layers; l++) /* in layer order, whatever the manifest's order */
                for (int i = 0; i < a->n; i++)
                    if (a->t[i].kind == kind && a->t[i].layer == l && a->t[i].err > 0)
                        fprintf(f, "%.1f,%.1f ", px(&p, l), py(&p, a->t[i].err));
            fputs("\"/>\n", f);
            for (int i = 0; i < a->n; i++)
                if (a->t[i].kind == kind) {
                    snprintf(tip, sizeof tip, "%s: %.4g", a->t[i].name, a->t[i].err);
                    svg_mark(f, px(&p, a->t[i].layer), py(&p, a->t[i].err), MARK_DOT, color, tip);
                }
        }
        fputs("</svg>", f);
    }
    fputs("<figcaption>", f);
    vf_html_escape(f, name);
    if (!in_blocks)
        fputs(": no quantised tensor inside the blocks", f);
    int outside = 0;
    for (int i = 0; i < a->n; i++)
        if (a->t[i].kind < 0) {
            snprintf(tip, sizeof tip, "%s %s %.4g", outside++ ? "," : "; outside the blocks:", a->t[i].name, a->t[i].err);
            vf_html_escape(f, tip);
        }
    fputs("</figcaption></figure>\n", f);
}

static void tensor_errors(FILE *f, const vf_report *r)
{
    kinds k = { .n = 0 };
    artefact_errs *a = calloc((size_t)r->n_rows, sizeof *a);
    if (!a) {
        fputs("<p class=\"note\">Out of memory reading the manifests.</p>\n", f);
        return;
    }
    double lo = INFINITY, hi = 0;
    for (int i = 0; i < r->n_rows; i++) {
        read_errs(r->rows[i].path, &k, &a[i]);
        for (int j = 0; j < a[i].n; j++)
            if (a[i].t[j].err > 0) {
                lo = fmin(lo, a[i].t[j].err);
                hi = fmax(hi, a[i].t[j].err);
            }
    }
    const scale sy = fit(lo, hi, 10, 0); /* shared, so the plots compare */
    fputs("<p class=\"legend\">", f);
    for (int j = 0; j < k.n; j++) {
        fprintf(f, "<span><i style=\"background:%s\"></i>", palette[(size_t)j % N_PALETTE]);
        vf_html_escape(f, k.name[j]);
        fputs("</span> ", f);
    }
    fputs("</p>\n<div class=\"grid\">\n", f);
    for (int i = 0; i < r->n_rows; i++) {
        char name[160];
        short_name(r->rows[i].path, name, sizeof name);
        if (*a[i].problem) {
            fputs("<p class=\"note\">", f);
            vf_html_escape(f, a[i].problem);
            fputs("</p>\n", f);
        } else if (a[i].n)
            error_plot(f, &a[i], &k, &sy, name);
        free(a[i].t);
    }
    fputs("</div>\n", f);
    free(a);
}

static const char style[] =
    "body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px}"
    "table{border-collapse:collapse;font-size:12px;margin:8px 0}"
    "th,td{border:1px solid #ccc;padding:3px 7px;white-space:nowrap}th{background:#f0f0f0}"
    "td.num{text-align:right;font-variant-numeric:tabular-nums}"
    "p.meta,p.note{font-size:12px;color:#555;margin:3px 0}"
    "svg{background:#fff;margin:4px 8px 4px 0}svg text{font-size:11px;fill:#222}"
    "svg text.tick{fill:#555;font-size:10px}svg text.axis{font-size:11px;fill:#333}"
    ".grid line,line.grid{stroke:#e4e4e4}rect.frame{fill:none;stroke:#888}"
    "line.leader{stroke:#aaa;stroke-width:.7}line.whisker{stroke:#444;stroke-width:1.2}"
    "line.median{stroke:#000;stroke-width:2.5}rect.box{fill:#9ecae1;stroke:#3182bd}"
    "div.grid{display:flex;flex-wrap:wrap}figure{margin:0 8px 8px 0;font-size:11px;max-width:320px}"
    "p.legend span{margin-right:12px;font-size:12px}"
    "p.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}";

void vf_report_html(FILE *f, const vf_report *r)
{
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>lmq verify report</title>\n"
               "<style>%s</style>\n</head>\n<body>\n<h1>lmq verify report</h1>\n",
            style);
    char line[2048];
    for (int i = 0; vf_report_header(r, i, line, sizeof line); i++) {
        fputs("<p class=\"meta\">", f);
        vf_html_escape(f, line);
        fputs("</p>\n", f);
    }
    for (int t = 0; t < VF_TABLES; t++) {
        vf_grid g;
        lmq_err err;
        if (vf_report_grid(r, t, &g, &err)) {
            fputs("<p class=\"note\">", f);
            vf_html_escape(f, err.msg);
            fputs("</p>\n", f);
            continue;
        }
        if (!g.rows)
            continue;
        fputs("<h2>", f);
        vf_html_escape(f, g.title);
        fputs("</h2>\n<p class=\"note\">", f);
        vf_html_escape(f, g.caption);
        fputs(":</p>\n", f);
        html_table(f, &g);
        vf_grid_free(&g);
    }
    if (r->text) {
        fputs("<h2>Quality against bits per weight</h2>\n", f);
        int left_out = 0;
        for (size_t y = 0; y < sizeof quality_axes / sizeof quality_axes[0]; y++) {
            for (size_t x = 0; x < sizeof bpw_axes / sizeof bpw_axes[0]; x++)
                left_out += quality_plot(f, r, &bpw_axes[x], &quality_axes[y]);
            fputs("<br>\n", f);
        }
        fprintf(f, "<p class=\"note\">Each point is an artefact (red: the reference, whose KL is 0 and so is not on "
                   "the log axis); %d labels that would overlap others are left out: hover over a point for its "
                   "name and values.</p>\n", left_out);
        if (r->n_rows > 1) {
            fputs("<h2>KL distribution per artefact</h2>\n", f);
            kl_distribution(f, r);
        }
    }
    fputs("<h2>Relative error per tensor by layer</h2>\n<p class=\"note\">Relative Frobenius error of each "
          "quantised tensor (from its artefact's manifest), one line per kind of tensor; the same log axis in "
          "every plot.</p>\n", f);
    tensor_errors(f, r);
    fputs("</body>\n</html>\n", f);
}
