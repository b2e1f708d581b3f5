/* The manifest diff (audit/diff.h): a walk over both documents as JSON trees, so that every key
 * the schema has, now or later, is compared without a list of them here. */
#include "audit/diff.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/file.h"
#include "common/yaml_json.h"

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && !strcmp(s + n - k, suf);
}

/* The parse first, so that its errors read as everywhere else ("manifest: <key>: ..."). */
lmq_code lmq_mdoc_parse(const char *text, size_t len, const char *name, lmq_mdoc *out, lmq_err *err)
{
    memset(out, 0, sizeof *out);
    lmq_code rc = lmq_manifest_parse(text, len, &out->man, err);
    if (rc)
        return rc;
    if ((rc = lmq_yaml_to_json(text, len, name, &out->json, err)))
        lmq_manifest_free(&out->man);
    return rc;
}

lmq_code lmq_mdoc_from_container(const lmq_container *c, lmq_mdoc *out, lmq_err *err)
{
    memset(out, 0, sizeof *out);
    lmq_code rc = lmq_mdoc_parse(c->manifest, c->manifest_size, c->path ? c->path : "artefact", out, err);
    if (rc)
        return rc;
    out->index = malloc((size_t)(c->n_tensors ? c->n_tensors : 1) * sizeof *out->index);
    if (!out->index) {
        lmq_mdoc_free(out);
        return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
    }
    memcpy(out->index, c->tensors, (size_t)c->n_tensors * sizeof *out->index);
    out->n_index = c->n_tensors;
    return LMQ_OK;
}

lmq_code lmq_mdoc_load(const char *path, lmq_mdoc *out, lmq_err *err)
{
    memset(out, 0, sizeof *out);
    lmq_code rc;
    if (has_suffix(path, ".lmq")) {
        lmq_container c;
        if ((rc = lmq_container_open(&c, path, err)))
            return rc;
        rc = lmq_mdoc_from_container(&c, out, err);
        lmq_container_close(&c);
        return rc;
    }
    lmq_blob b;
    if ((rc = lmq_blob_open(path, &b, err)))
        return rc;
    rc = lmq_mdoc_parse((const char *)b.data, b.size, path, out, err);
    lmq_blob_close(&b);
    return rc && strncmp(err->msg, path, strlen(path)) ? lmq_err_prefix(err, "%s: ", path) : rc;
}

void lmq_mdoc_free(lmq_mdoc *d)
{
    if (d->json)
        lmq_manifest_free(&d->man);
    json_decref(d->json);
    free(d->index);
    memset(d, 0, sizeof *d);
}

/* ---- the walk ---- */

/* Descriptions of where the inputs lay, not of what they were (their checksums are compared). */
static const char *const ignored[] = { "source.path", "calibration.source" };
/* Leaf keys compared within the tolerance: relative errors and bits per weight. */
static const char *const toleranced[] = { "rel_error", "bits_per_weight", "linear_bpw", "output_error",
                                          "output_error_rtn" };
/* Sequences whose elements are matched by their "name", not their place. */
static const struct {
    const char *key, *prefix;
} named_lists[] = { { "tensors", "" }, { "files", LMQ_FILE_PREFIX } };

typedef struct {
    double tol;
    lmq_diff_fn fn;
    void *ctx;
    int count;
} walk;

static int in(const char *const *set, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(set[i], s))
            return 1;
    return 0;
}

/* A value as compact JSON in ASCII (so that the cut splits no character), cut at 120 bytes
 * (recipe texts are long). */
static void show(const json_t *v, char *buf, size_t n)
{
    if (!v) {
        snprintf(buf, n, "(absent)");
        return;
    }
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_ENSURE_ASCII);
    if (!s) {
        snprintf(buf, n, "?");
        return;
    }
    if (strlen(s) > 120)
        snprintf(buf, n, "%.117s...", s);
    else
        snprintf(buf, n, "%s", s);
    free(s);
}

static void differ(walk *w, const char *tensor, const char *key, const json_t *a, const json_t *b)
{
    char sa[160], sb[160];
    w->count++;
    if (!w->fn)
        return;
    show(a, sa, sizeof sa);
    show(b, sb, sizeof sb);
    w->fn(w->ctx, tensor, key, sa, sb);
}

static void diff_value(walk *w, const char *tensor, const char *key, const json_t *a, const json_t *b);

static void diff_object(walk *w, const char *tensor, const char *key, const json_t *a, const json_t *b)
{
    const char *k;
    json_t *v;
    char sub[256];
    json_object_foreach((json_t *)a, k, v) {
        snprintf(sub, sizeof sub, "%s%s%s", key, *key ? "." : "", k);
        diff_value(w, tensor, sub, v, json_object_get(b, k));
    }
    json_object_foreach((json_t *)b, k, v) {
        snprintf(sub, sizeof sub, "%s%s%s", key, *key ? "." : "", k);
        if (!json_object_get(a, k) && !in(ignored, sizeof ignored / sizeof *ignored, sub))
            differ(w, tensor, sub, NULL, v);
    }
}

static const json_t *by_name(const json_t *arr, const char *name)
{
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e) {
        const char *n = json_string_value(json_object_get(e, "name"));
        if (n && !strcmp(n, name))
            return e;
    }
    return NULL;
}

/* Elements matched by name; one only in a side is one difference, keyed "(entry)". */
static void diff_named(walk *w, const char *prefix, const json_t *a, const json_t *b)
{
    const json_t *sides[2] = { a, b };
    for (int s = 0; s < 2; s++) {
        size_t i;
        json_t *e;
        json_array_foreach(sides[s], i, e) {
            const char *n = json_string_value(json_object_get(e, "name"));
            char name[LMQ_NAME_MAX + 8];
            snprintf(name, sizeof name, "%s%s", prefix, n ? n : "?");
            const json_t *o = n ? by_name(sides[!s], n) : NULL;
            if (!o)
                differ(w, name, "(entry)", s ? NULL : e, s ? e : NULL);
            else if (!s)
                diff_object(w, name, "", e, o);
        }
    }
}

static void diff_value(walk *w, const char *tensor, const char *key, const json_t *a, const json_t *b)
{
    if (in(ignored, sizeof ignored / sizeof *ignored, key))
        return;
    const char *leaf = strrchr(key, '.') ? strrchr(key, '.') + 1 : key;
    if (a && b && json_is_object(a) && json_is_object(b)) {
        diff_object(w, tensor, key, a, b);
        return;
    }
    if (!tensor && a && b && json_is_array(a) && json_is_array(b))
        for (size_t i = 0; i < sizeof named_lists / sizeof *named_lists; i++)
            if (!strcmp(key, named_lists[i].key)) {
                diff_named(w, named_lists[i].prefix, a, b);
                return;
            }
    if (a && b && json_is_number(a) && json_is_number(b)) {
        double x = json_number_value(a), y = json_number_value(b);
        double tol = in(toleranced, sizeof toleranced / sizeof *toleranced, leaf) ? w->tol : 0;
        if (fabs(x - y) <= tol)
            return;
    } else if (a && b && json_equal((json_t *)a, (json_t *)b)) {
        return;
    }
    differ(w, tensor, key, a, b);
}

int lmq_mdoc_diff(const lmq_mdoc *a, const lmq_mdoc *b, double tol, lmq_diff_fn fn, void *ctx)
{
    walk w = { tol, fn, ctx, 0 };
    diff_value(&w, NULL, "", a->json, b->json);
    if (tol > 0 || !a->index || !b->index)
        return w.count;
    for (int i = 0; i < a->n_index; i++)
        for (int j = 0; j < b->n_index; j++)
            if (!strcmp(a->index[i].name, b->index[j].name) && a->index[i].checksum != b->index[j].checksum) {
                char sa[24], sb[24];
                snprintf(sa, sizeof sa, "\"%016" PRIx64 "\"", a->index[i].checksum);
                snprintf(sb, sizeof sb, "\"%016" PRIx64 "\"", b->index[j].checksum);
                w.count++;
                if (fn)
                    fn(ctx, a->index[i].name, "checksum", sa, sb);
            }
    return w.count;
}

void lmq_expect_path(const char *expect, const char *artefact, char *out, size_t n)
{
    struct stat st;
    if (stat(expect, &st) || !S_ISDIR(st.st_mode)) {
        snprintf(out, n, "%s", expect);
        return;
    }
    const char *base = strrchr(artefact, '/') ? strrchr(artefact, '/') + 1 : artefact;
    size_t len = strlen(base);
    if (has_suffix(base, ".lmq"))
        len -= 4;
    snprintf(out, n, "%s%s%.*s.yaml", expect, has_suffix(expect, "/") ? "" : "/", (int)len, base);
}
