#include "verify/shard.h"

#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/le.h"
#include "formats/container.h"
#include "formats/manifest.h"

#define CANONICAL (JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17))
#define MAX_TOKENS ((json_int_t)1 << 32) /* a stream no text gives: a hostile header allocates no more */

/* ---- a row's facts, as the binding holds them ------------------------------------------- */

/* u64 and f64 fields are 16 hex digits (an f64's bits: exact, and any value), ints integers. */
typedef enum { F_STR, F_U64, F_F64, F_INT } field_type;

typedef struct {
    const char *key;
    field_type type;
    size_t off, size;
} row_field;

#define FIELD(f, t) { #f, t, offsetof(vf_row, f), sizeof(((vf_row *)0)->f) }
static const row_field ROW_FIELDS[] = {
    FIELD(path, F_STR),           FIELD(file_checksum, F_U64), FIELD(scheme, F_STR),
    FIELD(linear_bpw, F_F64),     FIELD(model_bpw, F_F64),     FIELD(mib, F_F64),
    FIELD(n_changed, F_INT),      FIELD(calibration_checksum, F_U64), FIELD(imported, F_INT),
    FIELD(err_median, F_F64),     FIELD(err_worst, F_F64),     FIELD(worst, F_STR),
    FIELD(weight_mib, F_F64),     FIELD(kv_cache, F_STR),      FIELD(kv_bytes_per_token, F_U64),
};
#define N_ROW_FIELDS (sizeof ROW_FIELDS / sizeof *ROW_FIELDS)

static json_t *row_json(const vf_row *row)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < N_ROW_FIELDS; i++) {
        const row_field *f = &ROW_FIELDS[i];
        const char *p = (const char *)row + f->off;
        uint64_t u;
        int v;
        json_t *x = NULL;
        if (f->type == F_STR)
            x = json_string(p);
        else if (f->type == F_INT) {
            memcpy(&v, p, sizeof v);
            x = json_integer(v);
        } else {
            memcpy(&u, p, sizeof u); /* a double's bits or a u64 */
            x = vf_hex_json(u);
        }
        if (json_object_set_new(o, f->key, x)) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

static int row_parse(const json_t *o, vf_row *row)
{
    memset(row, 0, sizeof *row);
    if (!json_is_object(o) || json_object_size(o) != N_ROW_FIELDS)
        return 0;
    for (size_t i = 0; i < N_ROW_FIELDS; i++) {
        const row_field *f = &ROW_FIELDS[i];
        const json_t *x = json_object_get(o, f->key);
        char *p = (char *)row + f->off;
        uint64_t u;
        if (f->type == F_STR) {
            if (!json_is_string(x) || json_string_length(x) >= f->size || strlen(json_string_value(x)) != json_string_length(x))
                return 0;
            memcpy(p, json_string_value(x), json_string_length(x) + 1);
        } else if (f->type == F_INT) {
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX)
                return 0;
            const int v = (int)json_integer_value(x);
            memcpy(p, &v, sizeof v);
        } else {
            if (!json_is_string(x) || !vf_hex_parse(json_string_value(x), &u))
                return 0;
            memcpy(p, &u, sizeof u);
        }
    }
    return 1;
}

/* ---- writing ---------------------------------------------------------------------------- */

static json_t *binding_json(const vf_report *r, int shards)
{
    json_t *rows = json_array();
    for (int i = 0; rows && i < r->n_rows; i++)
        if (json_array_append_new(rows, row_json(&r->rows[i]))) {
            json_decref(rows);
            return NULL;
        }
    return json_pack("{s:s, s:s, s:i, s:i, s:I, s:I, s:o, s:s, s:o, s:i, s:s, s:o}", "protocol", "P1",
                     "tool_version", LMQ_TOOL_VERSION, "ctx", r->ctx, "shards", shards, "windows",
                     (json_int_t)(r->tokens / r->ctx), "tokens", (json_int_t)r->tokens, "tokens_checksum",
                     vf_hex_json(r->tokens_checksum), "text", r->text, "text_checksum", vf_hex_json(r->text_checksum),
                     "documents", r->documents, "device", r->device, "rows", rows);
}

/* The carried file's name of row i's `what`. */
static void array_name(char *buf, size_t cap, const char *what, int i)
{
    snprintf(buf, cap, "%s.%d", what, i);
}

/* n doubles as little-endian bytes into the writer. */
static lmq_code add_f64(lmq_writer *w, const char *name, const double *v, int64_t n, lmq_err *err)
{
    uint8_t *b = malloc(n ? (size_t)n * 8 : 1);
    if (!b)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory for %s", name);
    for (int64_t i = 0; i < n; i++) {
        uint64_t u;
        memcpy(&u, &v[i], sizeof u);
        lmq_put_le(b + 8 * i, u, 8);
    }
    lmq_code c = lmq_writer_add_file(w, name, b, (size_t)n * 8, LMQ_CODEC_ZSTD, err);
    free(b);
    return c;
}

lmq_code vf_shard_write(const char *path, const vf_report *r, int shard, int shards, const vf_positions *p,
                        lmq_err *err)
{
    const int64_t positions = vf_shard_windows(r->tokens / r->ctx, shard, shards) * (r->ctx - 1);
    json_t *doc = json_pack("{s:i, s:i, s:i, s:s, s:o}", "lmq_verify_shard", VF_SHARD_VERSION, "shard", shard,
                            "threads", r->threads, "kernels", r->isa, "binding", binding_json(r, shards));
    char *text = doc ? json_dumps(doc, CANONICAL) : NULL;
    json_decref(doc);
    if (!text)
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory for the shard's header", path);
    lmq_writer *w;
    lmq_code c = lmq_writer_open(&w, path, err);
    for (int i = 0; i < r->n_rows && !c; i++) {
        char name[32];
        array_name(name, sizeof name, "nll", i);
        if ((c = add_f64(w, name, p[i].nll, positions, err)))
            break;
        array_name(name, sizeof name, "kl", i);
        if ((c = add_f64(w, name, p[i].kl, positions, err)))
            break;
        array_name(name, sizeof name, "agree", i);
        c = lmq_writer_add_file(w, name, p[i].agree, (size_t)positions, LMQ_CODEC_ZSTD, err);
    }
    if (c)
        lmq_writer_abort(w);
    else
        c = lmq_writer_finish_text(w, text, strlen(text), err);
    free(text);
    return c;
}

/* ---- reading ---------------------------------------------------------------------------- */

typedef struct {
    const char *path;
    lmq_container c;
    int open;
    json_t *doc;
    const json_t *binding;
    int shard, threads;
    const char *kernels;
} shard_in;

static void shard_close(shard_in *s)
{
    if (s->open)
        lmq_container_close(&s->c);
    json_decref(s->doc);
    s->open = 0;
    s->doc = NULL;
}

static lmq_code shard_open(shard_in *s, const char *path, lmq_err *err)
{
    memset(s, 0, sizeof *s);
    s->path = path;
    lmq_code c = lmq_container_open(&s->c, path, err);
    s->open = !c;
    if (!c)
        c = lmq_container_verify(&s->c, NULL, NULL, err);
    if (c)
        return c;
    json_error_t je;
    s->doc = json_loadb(s->c.manifest, s->c.manifest_size, JSON_REJECT_DUPLICATES, &je);
    int version = 0;
    if (!s->doc || json_unpack(s->doc, "{s:i, s:i, s:i, s:s, s:o}", "lmq_verify_shard", &version, "shard", &s->shard,
                               "threads", &s->threads, "kernels", &s->kernels, "binding", &s->binding))
        return lmq_fail(err, LMQ_E_FORMAT, "%s: not a verify shard (lmq verify --shard writes them)", path);
    if (version != VF_SHARD_VERSION)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "%s: verify shard layout %d (this build reads %d)", path, version,
                        VF_SHARD_VERSION);
    return LMQ_OK;
}

/* The binding's fields that say most about a foreign shard, named first when several differ (a
 * text of its own has its own documents and tokens too). */
static const char *const CAUSES[] = { "protocol", "tool_version", "shards", "text_checksum", "text", "ctx",
                                      "device", "rows" };

/* The first key of object a whose value differs in b (NULL: none), CAUSES first, and both values. */
static const char *differs(const json_t *a, const json_t *b, const json_t **va, const json_t **vb)
{
    const char *key;
    const json_t *v;
    for (size_t i = 0; i < sizeof CAUSES / sizeof *CAUSES; i++)
        if ((v = json_object_get(a, CAUSES[i])) && !json_equal(v, json_object_get(b, CAUSES[i]))) {
            *va = v;
            *vb = json_object_get(b, CAUSES[i]);
            return CAUSES[i];
        }
    json_object_foreach((json_t *)a, key, v) {
        if (!json_equal(v, json_object_get(b, key))) {
            *va = v;
            *vb = json_object_get(b, key);
            return key;
        }
    }
    return NULL;
}

/* "key: B, not A" for the first field of binding b that differs from a's (a row's field:
 * "row i (its path)'s key"). */
static void first_difference(const json_t *a, const json_t *b, char *out, size_t cap)
{
    const json_t *v = NULL, *w = NULL;
    const char *key = differs(a, b, &v, &w);
    char what[700];
    snprintf(what, sizeof what, "%s", key ? key : "its fields");
    if (key && !strcmp(key, "rows") && json_is_array(v) && json_is_array(w)) {
        if (json_array_size(v) != json_array_size(w)) {
            snprintf(out, cap, "rows: %zu artefacts, not %zu", json_array_size(w), json_array_size(v));
            return;
        }
        size_t i = 0;
        while (json_equal(json_array_get(v, i), json_array_get(w, i)))
            i++;
        const json_t *ra = json_array_get(v, i), *rb = json_array_get(w, i);
        const char *rk = json_is_object(rb) ? differs(ra, rb, &v, &w) : NULL;
        snprintf(what, sizeof what, "row %zu (%s)'s %s", i, json_string_value(json_object_get(ra, "path")),
                 rk ? rk : "fields");
    }
    char *x = w ? json_dumps(w, JSON_ENCODE_ANY | JSON_COMPACT) : NULL, *y = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    snprintf(out, cap, "%s: %.120s, not %.120s", what, x ? x : "none", y ? y : "none");
    free(x);
    free(y);
}

/* The binding's report facts and rows into m (rows malloc'd). */
static lmq_code binding_parse(const shard_in *s, vf_merged *m, int *shards, lmq_err *err)
{
    vf_report *r = &m->report;
    const char *tok, *txt, *text, *device;
    json_int_t windows, tokens;
    const json_t *rows;
    int ok = !json_unpack((json_t *)s->binding, "{s:i, s:i, s:I, s:I, s:s, s:s, s:s, s:i, s:s, s:o}", "ctx", &r->ctx,
                          "shards", shards, "windows", &windows, "tokens", &tokens, "tokens_checksum", &tok, "text",
                          &text, "text_checksum", &txt, "documents", &r->documents, "device", &device, "rows", &rows);
    ok = ok && r->ctx >= 2 && *shards >= 1 && tokens >= r->ctx && tokens <= MAX_TOKENS && windows == tokens / r->ctx && json_is_array(rows) &&
         json_array_size(rows) >= 1 && json_array_size(rows) <= 4096 && vf_hex_parse(tok, &r->tokens_checksum) &&
         vf_hex_parse(txt, &r->text_checksum) && strlen(text) < sizeof m->text && strlen(device) < sizeof m->device &&
         strlen(s->kernels) < sizeof m->isa;
    vf_row *out = ok ? calloc(json_array_size(rows), sizeof *out) : NULL;
    for (size_t i = 0; out && i < json_array_size(rows); i++)
        if (!row_parse(json_array_get(rows, i), &out[i])) {
            free(out);
            out = NULL;
        }
    if (!out)
        return lmq_fail(err, ok ? LMQ_E_NOMEM : LMQ_E_FORMAT, "%s: the verify shard's binding is malformed", s->path);
    snprintf(m->text, sizeof m->text, "%s", text);
    snprintf(m->device, sizeof m->device, "%s", device);
    snprintf(m->isa, sizeof m->isa, "%s", s->kernels);
    r->text = m->text;
    r->device = m->device;
    r->isa = m->isa;
    r->threads = s->threads;
    r->tokens = tokens;
    r->rows = out;
    r->n_rows = (int)json_array_size(rows);
    return LMQ_OK;
}

/* One carried array of shard s into the run's positions: local window j is window shard + j·N. */
static lmq_code scatter(const shard_in *s, const char *what, int row, size_t width, int shards, int ctx,
                        int64_t local, void *dst, lmq_err *err)
{
    char name[64];
    snprintf(name, sizeof name, "%s%s.%d", LMQ_FILE_PREFIX, what, row);
    const lmq_tensor_entry *t = lmq_container_find(&s->c, name); /* there, of its size: sizes_match */
    uint8_t *b = NULL;
    lmq_code c = local ? lmq_container_read_alloc(&s->c, t, (void **)&b, err) : LMQ_OK;
    for (int64_t j = 0; j < local && !c; j++) {
        const int64_t w = s->shard + j * shards;
        for (int q = 0; q < ctx - 1 && !c; q++) {
            const size_t from = (size_t)j * (size_t)(ctx - 1) + (size_t)q, to = (size_t)w * (size_t)(ctx - 1) + (size_t)q;
            if (width == 1) {
                if (b[from] > 1)
                    c = lmq_fail(err, LMQ_E_FORMAT, "%s: agree.%d[%zu] is %u, not 0 or 1", s->path, row, from, b[from]);
                ((uint8_t *)dst)[to] = b[from];
            } else {
                const uint64_t u = lmq_le(b + 8 * from, 8);
                double v;
                memcpy(&v, &u, sizeof v);
                if (!isfinite(v))
                    c = lmq_fail(err, LMQ_E_FORMAT, "%s: %s.%d[%zu] is not finite", s->path, what, row, from);
                ((double *)dst)[to] = v;
            }
        }
    }
    free(b);
    return c;
}

/* Whether shard s holds each row's three arrays at the sizes its windows give. */
static lmq_code sizes_match(const shard_in *s, int rows, int shards, const vf_report *r, lmq_err *err)
{
    static const struct {
        const char *what;
        uint64_t width;
    } ARRAYS[] = { { "nll", 8 }, { "kl", 8 }, { "agree", 1 } };
    const uint64_t local = (uint64_t)vf_shard_windows(r->tokens / r->ctx, s->shard, shards);
    if (s->c.n_tensors != 3 * rows)
        return lmq_fail(err, LMQ_E_FORMAT, "%s: %d arrays for %d rows (3 a row)", s->path, s->c.n_tensors, rows);
    for (int i = 0; i < rows; i++)
        for (size_t a = 0; a < sizeof ARRAYS / sizeof *ARRAYS; a++) {
            char name[64];
            snprintf(name, sizeof name, "%s%s.%d", LMQ_FILE_PREFIX, ARRAYS[a].what, i);
            const lmq_tensor_entry *t = lmq_container_find(&s->c, name);
            if (!t || t->raw_size != local * (uint64_t)(r->ctx - 1) * ARRAYS[a].width)
                return lmq_fail(err, LMQ_E_FORMAT, "%s: %s.%d is missing or does not hold %" PRIu64 " windows' "
                                "positions", s->path, ARRAYS[a].what, i, local);
        }
    return LMQ_OK;
}

/* Which shards are there: each index once, none missing. */
static lmq_code check_indices(const shard_in *in, int n, int shards, lmq_err *err)
{
    for (int i = 0; i < n; i++) {
        if (in[i].shard < 0 || in[i].shard >= shards)
            return lmq_fail(err, LMQ_E_FORMAT, "%s: shard %d of %d is out of range", in[i].path, in[i].shard, shards);
        for (int j = 0; j < i; j++)
            if (in[j].shard == in[i].shard)
                return lmq_fail(err, LMQ_E_ARG, "%s and %s both hold shard %d/%d: each shard once", in[j].path,
                                in[i].path, in[i].shard, shards);
    }
    for (int k = 0; k < shards; k++) {
        int found = 0;
        for (int i = 0; i < n && !found; i++)
            found = in[i].shard == k;
        if (!found)
            return lmq_fail(err, LMQ_E_ARG, "shard %d/%d is missing: %d of %d shards given", k, shards, n, shards);
    }
    return LMQ_OK;
}

lmq_code vf_shard_merge(const char *const *paths, int n, vf_merged *m, lmq_err *err)
{
    memset(m, 0, sizeof *m);
    if (n < 1)
        return lmq_fail(err, LMQ_E_ARG, "no shard files to merge");
    shard_in *in = calloc((size_t)n, sizeof *in);
    if (!in)
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    lmq_code c = LMQ_OK;
    for (int i = 0; i < n && !c; i++)
        c = shard_open(&in[i], paths[i], err);
    for (int i = 1; i < n && !c; i++)
        if (!json_equal(in[i].binding, in[0].binding)) {
            char what[1024];
            first_difference(in[0].binding, in[i].binding, what, sizeof what);
            c = lmq_fail(err, LMQ_E_ARG, "%s: a shard of another run than %s (%s)", paths[i], paths[0], what);
        }
    int shards = 0;
    if (!c)
        c = binding_parse(&in[0], m, &shards, err);
    if (!c)
        c = check_indices(in, n, shards, err);
    vf_report *r = &m->report;
    const int rows = r->n_rows;
    for (int s = 0; s < n && !c; s++) /* every array the size the binding says, before any is allocated */
        c = sizes_match(&in[s], rows, shards, r, err);
    const int64_t windows = r->tokens / (r->ctx ? r->ctx : 1), positions = windows * (r->ctx - 1);
    vf_positions *p = c ? NULL : calloc((size_t)rows, sizeof *p);
    vf_result *res = c ? NULL : calloc((size_t)rows, sizeof *res);
    if (!c && (!p || !res))
        c = lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    for (int i = 0; i < rows && !c; i++)
        if (!(p[i].nll = malloc((size_t)positions * sizeof *p[i].nll)) ||
            !(p[i].kl = malloc((size_t)positions * sizeof *p[i].kl)) || !(p[i].agree = malloc((size_t)positions)))
            c = lmq_fail(err, LMQ_E_NOMEM, "out of memory for %lld positions", (long long)positions);
    for (int s = 0; s < n && !c; s++) {
        const int64_t local = vf_shard_windows(windows, in[s].shard, shards);
        for (int i = 0; i < rows && !c; i++)
            if (!(c = scatter(&in[s], "nll", i, 8, shards, r->ctx, local, p[i].nll, err)) &&
                !(c = scatter(&in[s], "kl", i, 8, shards, r->ctx, local, p[i].kl, err)))
                c = scatter(&in[s], "agree", i, 1, shards, r->ctx, local, p[i].agree, err);
    }
    if (!c)
        c = vf_results(p, rows, windows, r->ctx, res, err);
    if (!c)
        vf_rows_score((vf_row *)r->rows, rows, res, r->text_checksum);
    for (int i = 0; p && i < rows; i++)
        vf_positions_free(&p[i]);
    free(p);
    free(res);
    for (int i = 0; i < n; i++)
        shard_close(&in[i]);
    free(in);
    if (c) {
        free((void *)r->rows);
        memset(m, 0, sizeof *m);
    }
    return c;
}
