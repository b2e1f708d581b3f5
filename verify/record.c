#include "verify/record.h"

#include <jansson.h>
#include <math.h>
#include <string.h>
#include <xxhash.h>

#include "common/file.h"
#include "formats/container.h"
#include "formats/manifest.h"

#define CANONICAL (JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17))
#define CHECKSUM_KEY "record_checksum"

lmq_code vr_path(const char *artefact_path, char *out, size_t cap, lmq_err *err)
{
    if ((size_t)snprintf(out, cap, "%s%s", artefact_path, VR_SUFFIX) >= cap)
        return lmq_fail(err, LMQ_E_ARG, "%s: path too long for its verification record", artefact_path);
    return LMQ_OK;
}

static json_t *hex(uint64_t v)
{
    char h[17];
    vf_hex(v, h);
    return json_string(h);
}

/* The XXH3-64 of doc's canonical text without its checksum field (doc is left as it was). */
static int content_checksum(json_t *doc, uint64_t *sum)
{
    json_t *own = json_incref(json_object_get(doc, CHECKSUM_KEY));
    json_object_del(doc, CHECKSUM_KEY);
    char *s = json_dumps(doc, CANONICAL);
    if (own)
        json_object_set_new(doc, CHECKSUM_KEY, own);
    if (!s)
        return 0;
    *sum = XXH3_64bits(s, strlen(s));
    free(s);
    return 1;
}

lmq_code vr_write(const vf_report *r, int i, lmq_err *err)
{
    const vf_row *w = &r->rows[i];
    const vf_row *ref = &r->rows[0];
    char path[600];
    lmq_code c = vr_path(w->path, path, sizeof path, err);
    if (c)
        return c;
    json_t *doc = json_pack("{s:i, s:s, s:s, s:o, s:s, s:o, s:s?, s:o, s:{s:s, s:i, s:i, s:I, s:I, s:I, s:i}, s:o}",
                            "lmq_verification_record", VR_VERSION, "tool_version", LMQ_TOOL_VERSION, "artefact",
                            w->path, "artefact_checksum", hex(w->file_checksum), "reference", ref->path,
                            "reference_checksum", hex(ref->file_checksum), "text", r->text, "text_checksum",
                            hex(r->text_checksum), "protocol", "name", "P1", "ctx", r->ctx, "stride", r->ctx,
                            "windows", (json_int_t)w->res.windows, "positions", (json_int_t)w->res.positions,
                            "tokens", (json_int_t)r->tokens, "documents", r->documents, "metrics",
                            vf_row_json(r, i));
    if (doc && r->ref_logits)
        json_object_set_new(doc, "reference_logits_checksum", hex(r->ref_logits_checksum));
    uint64_t sum;
    if (!doc || !content_checksum(doc, &sum)) {
        json_decref(doc);
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", path);
    }
    json_object_set_new(doc, CHECKSUM_KEY, hex(sum));
    char *text = json_dumps(doc, JSON_INDENT(1) | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(doc);
    if (!text)
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", path);
    lmq_atomic a;
    if (!(c = lmq_atomic_open(&a, path, err))) {
        if (!(c = lmq_atomic_write(&a, text, strlen(text), err)) && !(c = lmq_atomic_write(&a, "\n", 1, err)))
            c = lmq_atomic_commit(&a, err);
        else
            lmq_atomic_abort(&a);
    }
    free(text);
    return c;
}

/* ---- checking ------------------------------------------------------------------------------ */

/* The artefact's file checksum, after checking the whole file against it (as audit does). */
static lmq_code current_checksum(const char *rec, const char *artefact, uint64_t *sum, lmq_err *err)
{
    lmq_container c;
    *sum = 0;
    lmq_code rc = lmq_container_open(&c, artefact, err);
    if (!rc) {
        rc = lmq_container_verify(&c, NULL, NULL, err);
        *sum = c.file_checksum;
        lmq_container_close(&c);
    }
    return rc ? lmq_err_prefix(err, "%s: the artefact %s changed since it was verified or is damaged: ", rec,
                               artefact)
              : LMQ_OK;
}

/* One numeric requirement: the record's metric against a bound (NAN: none). */
typedef struct {
    const char *metric, *what;
    int at_least;
} bound;

static const bound bounds[] = { { "kl_mean", "KL mean", 0 }, { "top1", "top-1 agreement", 1 },
                                { "dppl_pct", "dPPL %", 0 } };

static lmq_code check_bound(const char *rec, const json_t *metrics, const bound *b, double limit, lmq_err *err)
{
    if (isnan(limit))
        return LMQ_OK;
    const json_t *v = json_object_get(metrics, b->metric);
    if (!json_is_number(v))
        return lmq_fail(err, LMQ_E_FORMAT, "%s: no %s in the record's metrics", rec, b->metric);
    const double x = json_number_value(v);
    if (b->at_least ? x >= limit : x <= limit)
        return LMQ_OK;
    return lmq_fail(err, LMQ_E_RECIPE, "%s: %s %.6g is %s the required %.6g", rec, b->what, x,
                    b->at_least ? "below" : "above", limit);
}

static lmq_code check_doc(const char *rec, const char *artefact, json_t *doc, const vr_require *req, lmq_err *err)
{
    const char *own = NULL, *art = NULL, *text = NULL;
    json_int_t version = 0;
    json_t *metrics = NULL;
    uint64_t stated, bound_sum, text_sum, sum;
    if (json_unpack(doc, "{s:I, s:s, s:s, s:s, s:o}", "lmq_verification_record", &version, CHECKSUM_KEY, &own,
                    "artefact_checksum", &art, "text_checksum", &text, "metrics", &metrics) ||
        version != VR_VERSION || !json_is_object(metrics) || !vf_hex_parse(own, &stated) ||
        !vf_hex_parse(art, &bound_sum) || !vf_hex_parse(text, &text_sum))
        return lmq_fail(err, LMQ_E_FORMAT, "%s: not a version %d verification record", rec, VR_VERSION);
    if (!content_checksum(doc, &sum))
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", rec);
    if (sum != stated)
        return lmq_fail(err, LMQ_E_CHECKSUM, "%s: corrupt: its content does not match its record_checksum", rec);
    uint64_t now;
    lmq_code c = current_checksum(rec, artefact, &now, err);
    if (c)
        return c;
    char a[17], b[17];
    if (now != bound_sum) {
        vf_hex(now, b);
        return lmq_fail(err, LMQ_E_RECIPE, "%s: stale: it verified file checksum %s, the artefact %s is now %s", rec,
                        art, artefact, b);
    }
    uint64_t want;
    if (req->text_checksum && !vf_hex_parse(req->text_checksum, &want))
        return lmq_fail(err, LMQ_E_ARG, "required text checksum '%s' is not 16 hex digits", req->text_checksum);
    if (req->text_checksum && want != text_sum) {
        vf_hex(want, a);
        return lmq_fail(err, LMQ_E_RECIPE, "%s: verified on another text (checksum %s, required %s)", rec, text, a);
    }
    const double limits[] = { req->kl_mean_max, req->top1_min, req->dppl_pct_max };
    for (size_t i = 0; i < sizeof bounds / sizeof bounds[0] && !c; i++)
        c = check_bound(rec, metrics, &bounds[i], limits[i], err);
    return c;
}

lmq_code vr_require_check(const char *artefact_path, const vr_require *req, lmq_err *err)
{
    char rec[600];
    lmq_code c = vr_path(artefact_path, rec, sizeof rec, err);
    if (c)
        return c;
    lmq_blob b;
    if ((c = lmq_blob_open(rec, &b, err)))
        return lmq_err_prefix(err, "no verification record for %s: ", artefact_path);
    json_error_t je;
    json_t *doc = json_loadb((const char *)b.data, b.size, 0, &je);
    lmq_blob_close(&b);
    if (!doc)
        return lmq_fail(err, LMQ_E_FORMAT, "%s: not a verification record: line %d: %s", rec, je.line, je.text);
    c = check_doc(rec, artefact_path, doc, req, err);
    json_decref(doc);
    return c;
}
