/* lmq budget: the KV-cache arithmetic of serving a model (runtime/budget.h), from its manifest or
 * a named shape: nothing but the shape and the stored size is read. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "convert/synth.h"
#include "formats/artefact.h"
#include "formats/container.h"
#include "formats/manifest.h"
#include "runtime/budget.h"
#include "schemes/scheme.h"
#include "tools/args.h"
#include "tools/cmd.h"

static const char usage[] =
    "usage: lmq budget (MODEL.lmq | --shape SHAPE [--weights ENC [--group N]]) --memory SIZE\n"
    "                  [--ctx 4096] [--kv FMT] [--page 16] [--lengths FILE | --mean-len N] [--json]\n"
    "How many sequences fit in SIZE of accelerator memory beside the weights, and what contiguous\n"
    "preallocation (every sequence reserves ctx) wastes against pages of --page tokens. Reads the\n"
    "manifest only (no weights); the formulas are in the README.\n"
    "  --memory SIZE  bytes, or with a unit: 80GiB, 512MiB, 40GB (KiB MiB GiB TiB, KB MB GB TB)\n"
    "  --shape SHAPE  a model shape instead of a file (lmq synth's table: gpt2-124m, llama-1b,\n"
    "                 llama-7b, tiny-gpt2, tiny-llama)\n"
    "  --weights ENC  with --shape: the encoding of every matrix (default fp16; vectors stay fp32)\n"
    "  --group N      with --weights: integer scales per group of N (default: per channel)\n"
    "  --ctx N        the context each sequence may reach (default 4096)\n"
    "  --kv FMT       KV cache format: fp16 (default), fp32, bf16, fp8, int8, int4 (int8/int4: + one fp16\n"
    "                 scale per block of 32 elements of a head, as llama.cpp's q8_0/q4_0 cache)\n"
    "  --page N       tokens per page (default 16)\n"
    "  --lengths FILE sequence lengths, whitespace-separated integers 1..ctx ('#' starts a comment)\n"
    "  --mean-len N   lengths uniform over 1..2N-1 (mean N); default: uniform over 1..ctx\n"
    "  --json         one JSON object instead of the text\n";

/* Units --memory takes, by suffix. */
static const struct {
    const char *suffix;
    double bytes;
} units[] = {
    { "KiB", 1024.0 }, { "MiB", 1048576.0 }, { "GiB", 1073741824.0 }, { "TiB", 1099511627776.0 },
    { "KB", 1e3 },     { "MB", 1e6 },        { "GB", 1e9 },           { "TB", 1e12 },
    { "B", 1 },        { "", 1 },
};

static int parse_size(const char *s, uint64_t *out)
{
    errno = 0;
    char *end;
    const double x = strtod(s, &end);
    if (end == s || errno || !isfinite(x) || x <= 0 || !isdigit((unsigned char)*s))
        return 0;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(end, units[i].suffix)) {
            const double b = x * units[i].bytes;
            if (b >= 18446744073709549568.0) /* the largest double below 2^64 */
                return 0;
            *out = (uint64_t)llround(b);
            return *out > 0;
        }
    return 0;
}

/* Reads the lengths in path (a regular file, as every input: lmq_blob_open refuses a FIFO or a
 * device); messages name the file and line. */
static int read_lengths(const char *path, int ctx, int32_t **out, size_t *n)
{
    lmq_blob b;
    lmq_err err;
    if (lmq_blob_open(path, &b, &err)) {
        fprintf(stderr, "lmq budget: %s\n", err.msg);
        return 0;
    }
    char *text = malloc(b.size + 1);
    if (text) {
        memcpy(text, b.data, b.size);
        text[b.size] = 0;
    }
    lmq_blob_close(&b);
    if (!text) {
        fprintf(stderr, "lmq budget: %s: out of memory\n", path);
        return 0;
    }
    size_t cap = 0;
    int32_t *v = NULL;
    int ok = 1;
    *n = 0;
    char *next = text;
    for (long no = 1; ok && next; no++) {
        char *line = next, *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        next = nl ? nl + 1 : NULL;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        for (char *tok = strtok(line, " \t\r\n"); ok && tok; tok = strtok(NULL, " \t\r\n")) {
            char *end;
            errno = 0;
            const long L = strtol(tok, &end, 10);
            if (*end || errno || L < 1 || L > ctx) {
                fprintf(stderr, "lmq budget: %s:%ld: length '%s' is not an integer in 1..%d (ctx)\n", path, no,
                        tok, ctx);
                ok = 0;
            } else if (*n == cap) {
                int32_t *g = realloc(v, (cap = cap ? 2 * cap : 1024) * sizeof *v);
                if (!g) {
                    fprintf(stderr, "lmq budget: %s: out of memory\n", path);
                    ok = 0;
                } else
                    v = g;
            }
            if (ok)
                v[(*n)++] = (int32_t)L;
        }
    }
    free(text);
    if (ok && !*n) {
        fprintf(stderr, "lmq budget: %s: no lengths\n", path);
        ok = 0;
    }
    if (!ok)
        free(v);
    else
        *out = v;
    return ok;
}

/* The shape of a model: from its manifest, or from the shape table. Returns -1 when done, else
 * the exit status (the problem printed). */
static int model_of(const char *path, const char *shape_s, const char *weights_s, const char *group_s,
                    rt_budget_model *m, char *what, size_t what_size)
{
    lmq_err err;
    if (path) {
        lmq_container c;
        lmq_manifest man;
        if (lmq_container_open_manifest(&c, &man, path, &err)) {
            fprintf(stderr, "lmq budget: %s\n", err.msg);
            return 1;
        }
        rt_budget_model_of(&man, m);
        snprintf(what, what_size, "%s", path);
        lmq_manifest_free(&man);
        lmq_container_close(&c);
        return -1;
    }
    const cv_synth_shape *s = cv_synth_find(shape_s);
    if (!s) {
        char names[256];
        fprintf(stderr, "lmq budget: unknown shape '%s' (%s)\n", shape_s, cv_synth_names(names, sizeof names));
        return 2;
    }
    const lmq_encoding *e = lmq_encoding_find(weights_s);
    lmq_qparams q = { .dtype = e ? e->dtype : 0 };
    if (e && e->integer)
        q.gran = LMQ_GRAN_CHANNEL;
    if (e && group_s) {
        long g;
        if (!args_int("budget", "--group", group_s, 16, 1L << 30, &g))
            return 2;
        q.gran = LMQ_GRAN_GROUP;
        q.group = (uint32_t)g;
    }
    char desc[64];
    if (!e || lmq_qparams_check(&q, &err)) {
        fprintf(stderr, "lmq budget: --weights %s%s%s: %s\n", weights_s, group_s ? " --group " : "",
                group_s ? group_s : "", e ? err.msg : "not an encoding");
        return 2;
    }
    if (cv_synth_stored_bytes(s, &q, &m->weight_bytes, &err)) {
        fprintf(stderr, "lmq budget: %s\n", err.msg);
        return 1;
    }
    m->n_layers = s->n_layers;
    m->n_kv_heads = s->n_kv_heads;
    m->head_dim = s->dim / s->n_heads;
    snprintf(what, what_size, "shape %s, %s matrices", s->name, q_describe(&q, desc, sizeof desc));
    return -1;
}

static double gib(uint64_t b)
{
    return (double)b / 1073741824.0;
}

int cmd_budget(int argc, char **argv)
{
    const char *memory_s = NULL, *ctx_s = "4096", *kv_s = "fp16", *page_s = "16", *lengths_s = NULL,
               *mean_s = NULL, *shape_s = NULL, *weights_s = NULL, *group_s = NULL, *pos[1];
    int json = 0, n_pos;
    const arg_opt opts[] = { { "--memory", NULL, &memory_s, NULL },   { "--ctx", NULL, &ctx_s, NULL },
                             { "--kv", NULL, &kv_s, NULL },           { "--page", NULL, &page_s, NULL },
                             { "--lengths", NULL, &lengths_s, NULL }, { "--mean-len", NULL, &mean_s, NULL },
                             { "--shape", NULL, &shape_s, NULL },     { "--weights", NULL, &weights_s, NULL },
                             { "--group", NULL, &group_s, NULL },     { "--json", NULL, NULL, &json },
                             { 0 } };
    int rc = args_parse(argc, argv, opts, pos, 1, &n_pos, usage);
    if (rc >= 0)
        return rc;
    const char *bad = !memory_s                   ? "need --memory"
                      : (n_pos == 1) == !!shape_s ? "need a model file or --shape, not both"
                      : lengths_s && mean_s       ? "--lengths and --mean-len exclude each other"
                      : (weights_s || group_s) && !shape_s ? "--weights and --group go with --shape"
                      : group_s && !weights_s     ? "--group needs --weights"
                                                  : NULL;
    if (bad) {
        fprintf(stderr, "lmq budget: %s\n%s", bad, usage);
        return 2;
    }
    rt_budget_opts o = { .kv = rt_kv_find(kv_s) };
    long ctx, page, mean = 0;
    if (!parse_size(memory_s, &o.memory)) {
        fprintf(stderr, "lmq budget: --memory '%s' is not a size (80GiB, 40GB, 1073741824)\n", memory_s);
        return 2;
    }
    if (!o.kv) {
        fprintf(stderr, "lmq budget: --kv '%s' is not one of %s\n", kv_s, rt_kv_names());
        return 2;
    }
    if (!args_int("budget", "--ctx", ctx_s, 1, 1L << 24, &ctx) ||
        !args_int("budget", "--page", page_s, 1, ctx, &page) ||
        (mean_s && !args_int("budget", "--mean-len", mean_s, 1, (ctx + 1) / 2, &mean)))
        return 2;
    o.ctx = (int)ctx;
    o.page = (int)page;

    rt_budget_model m;
    char what[600];
    rc = model_of(n_pos ? pos[0] : NULL, shape_s, weights_s ? weights_s : "fp16", group_s, &m, what, sizeof what);
    if (rc >= 0)
        return rc;
    int32_t *lengths = NULL;
    char dist[600];
    if (lengths_s) {
        if (!read_lengths(lengths_s, o.ctx, &lengths, &o.n_lengths))
            return 1;
        snprintf(dist, sizeof dist, "%zu lengths from %s", o.n_lengths, lengths_s);
    } else {
        /* uniform over 1..hi, one sequence of each length */
        const long hi = mean ? 2 * mean - 1 : ctx;
        o.n_lengths = (size_t)hi;
        lengths = malloc(o.n_lengths * sizeof *lengths);
        if (!lengths) {
            fprintf(stderr, "lmq budget: out of memory\n");
            return 1;
        }
        for (long L = 1; L <= hi; L++)
            lengths[L - 1] = (int32_t)L;
        snprintf(dist, sizeof dist, "uniform over 1..%ld", hi);
    }
    o.lengths = lengths;
    rt_budget b;
    lmq_err err;
    lmq_code c = rt_budget_plan(&m, &o, &b, &err);
    free(lengths);
    if (c) {
        fprintf(stderr, "lmq budget: %s: %s\n", what, err.msg);
        return 1;
    }
    const double mean_len = (double)b.used_tokens / (double)o.n_lengths;
    if (json) {
        json_t *src = json_string(what); /* NULL when what is not UTF-8: then null */
        char *src_s = src ? json_dumps(src, JSON_ENCODE_ANY) : NULL;
        json_decref(src);
        printf("{\"model\":{\"source\":%s,\"layers\":%d,\"kv_heads\":%d,\"head_dim\":%d,\"weight_bytes\":%llu},"
               "\"memory\":%llu,\"ctx\":%d,\"kv\":\"%s\",\"page\":%d,"
               "\"kv_bytes_per_token\":%llu,\"kv_bytes_per_seq\":%llu,\"free_bytes\":%llu,\"seqs_at_ctx\":%llu,"
               "\"lengths\":{\"n\":%zu,\"mean\":%.6g,\"used_tokens\":%llu,\"contiguous_tokens\":%llu,"
               "\"paged_tokens\":%llu},\"contiguous_waste\":%.6f,\"paged_waste\":%.6f,\"seqs_paged\":%llu}\n",
               src_s ? src_s : "null", m.n_layers, m.n_kv_heads, m.head_dim, (unsigned long long)m.weight_bytes,
               (unsigned long long)o.memory, o.ctx, o.kv->name, o.page, (unsigned long long)b.kv_token_bytes,
               (unsigned long long)b.kv_seq_bytes, (unsigned long long)b.free_bytes,
               (unsigned long long)b.seqs_at_ctx, o.n_lengths, mean_len, (unsigned long long)b.used_tokens,
               (unsigned long long)b.contiguous_tokens, (unsigned long long)b.paged_tokens, b.contiguous_waste,
               b.paged_waste, (unsigned long long)b.seqs_paged);
        free(src_s);
        return 0;
    }
    printf("budget: %s (%d layers, %d kv heads, head dim %d)\n", what, m.n_layers, m.n_kv_heads, m.head_dim);
    printf("  memory            %14llu bytes  %10.3f GiB\n", (unsigned long long)o.memory, gib(o.memory));
    printf("  weights (stored)  %14llu bytes  %10.3f GiB\n", (unsigned long long)m.weight_bytes,
           gib(m.weight_bytes));
    printf("  free for KV       %14llu bytes  %10.3f GiB\n", (unsigned long long)b.free_bytes, gib(b.free_bytes));
    printf("  KV per token      %14llu bytes  (%s)\n", (unsigned long long)b.kv_token_bytes, o.kv->name);
    printf("  KV per sequence   %14llu bytes  %10.3f GiB at ctx %d\n", (unsigned long long)b.kv_seq_bytes,
           gib(b.kv_seq_bytes), o.ctx);
    printf("  sequences at ctx  %14llu\n", (unsigned long long)b.seqs_at_ctx);
    printf("lengths: %s, mean %.1f tokens\n", dist, mean_len);
    printf("  contiguous: %llu sequences fit, %.2f%% of the reserved KV unused\n",
           (unsigned long long)b.seqs_at_ctx, 100 * b.contiguous_waste);
    printf("  paged (%d): %llu sequences fit, %.2f%% of the reserved KV unused\n", o.page,
           (unsigned long long)b.seqs_paged, 100 * b.paged_waste);
    return 0;
}
