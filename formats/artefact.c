/* Whole artefacts (formats/artefact.h): a model or a statistics file written with its manifest,
 * and read back. The layer above the container (bytes) and the manifest (schema and YAML), so
 * that neither of those calls the other's way up. */
#include "formats/artefact.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void first_issue(void *ctx, const char *tensor, lmq_code code, const char *msg)
{
    lmq_err *e = ctx;
    (void)code;
    if (!e->code)
        lmq_fail(e, LMQ_E_ARG, "%s%s%s", tensor ? tensor : "", tensor ? ": " : "", msg);
}

lmq_code lmq_writer_finish(lmq_writer *w, const lmq_manifest *man, lmq_err *err)
{
    if (lmq_writer_failed(w))
        return lmq_writer_finish_text(w, "", 0, err);
    int n;
    const lmq_tensor_entry *index = lmq_writer_index(w, &n);
    lmq_manifest m = *man; /* shallow: only the totals change */
    m.totals = lmq_manifest_totals_of(&m, index, n);
    lmq_err first = { 0 };
    int bad = lmq_manifest_check(&m, index, n, LMQ_CONTAINER_VERSION, first_issue, &first);
    if (bad) {
        lmq_writer_abort(w);
        return lmq_fail(err, LMQ_E_ARG, "manifest does not describe the tensors written (%d problems); first: %s", bad,
                        first.msg);
    }
    char *text;
    size_t len;
    lmq_code rc = lmq_manifest_emit(&m, &text, &len, err);
    if (rc) {
        lmq_writer_abort(w);
        return rc;
    }
    rc = lmq_writer_finish_text(w, text, len, err);
    free(text);
    return rc;
}

/* ---- whole models ---- */

/* The whole-model writer. With produce, tensor i's fp32 values come into one reused buffer just
 * before it is written; without man, the manifest entries are computed as the tensors go by. */
static lmq_code write_model(const char *path, const lmq_model *m, const lmq_manifest *man, lmq_produce_fn produce,
                            void *ctx, lmq_codec codec, lmq_err *err)
{
    lmq_manifest own;
    lmq_manifest_init(&own);
    size_t largest = 0;
    for (int i = 0; i < m->n_tensors && produce; i++)
        largest = m->tensors[i].raw_size > largest ? m->tensors[i].raw_size : largest;
    float *buf = largest ? malloc(largest) : NULL;
    lmq_writer *w = NULL;
    lmq_code rc = largest && !buf ? lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", path)
                                  : lmq_writer_open(&w, path, err);
    for (int i = 0; i < m->n_tensors && !rc; i++) {
        const lmq_tensor *t = &m->tensors[i];
        const float *values = produce ? buf : t->data;
        if ((!produce || !(rc = produce(ctx, i, buf, err))) && (man || !(rc = lmq_manifest_add_plain(&own, t, values, err))))
            rc = lmq_writer_add(w, t->name, t->q, t->ndim, t->shape, produce ? (const void *)buf : t->raw, t->raw_size,
                                codec, err);
    }
    free(buf);
    for (int i = 0; i < m->n_files && !rc; i++)
        rc = lmq_writer_add_file(w, m->files[i].name, m->files[i].data, m->files[i].size, codec, err);
    if (!rc && !man)
        rc = lmq_manifest_describe(&own, m, err);
    if (rc)
        lmq_writer_abort(w);
    else
        rc = lmq_writer_finish(w, man ? man : &own, err);
    lmq_manifest_free(&own);
    return rc;
}

lmq_code lmq_container_write_model_codec(const char *path, const lmq_model *m, const lmq_manifest *man,
                                         lmq_codec codec, lmq_err *err)
{
    return write_model(path, m, man, NULL, NULL, codec, err);
}

lmq_code lmq_container_write_stream(const char *path, const lmq_model *m, lmq_produce_fn produce, void *ctx,
                                    lmq_codec codec, lmq_err *err)
{
    return write_model(path, m, NULL, produce, ctx, codec, err);
}

lmq_code lmq_container_write_model(const char *path, const lmq_model *m, const lmq_manifest *man, lmq_err *err)
{
    return lmq_container_write_model_codec(path, m, man, LMQ_CODEC_NONE, err);
}

static lmq_code copy_str(char *dst, size_t n, const char *s, const char *what, const char *path, lmq_err *err)
{
    s = s ? s : "";
    if (strlen(s) >= n)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "%s: manifest %s longer than %zu bytes", path, what, n - 1);
    memcpy(dst, s, strlen(s) + 1);
    return LMQ_OK;
}

lmq_code lmq_artefact_check(const lmq_container *c, const lmq_manifest *man, lmq_err *err)
{
    lmq_err first = { 0 };
    int bad = lmq_manifest_check(man, c->tensors, c->n_tensors, c->version, first_issue, &first);
    if (bad)
        return lmq_fail(err, LMQ_E_FORMAT, "manifest: %s%s", first.msg,
                        bad > 1 ? " (the first of several problems: lmq audit lists them)" : "");
    return lmq_manifest_check_tensors(man, c->tensors, c->n_tensors, err);
}

lmq_code lmq_container_open_manifest(lmq_container *c, lmq_manifest *man, const char *path, lmq_err *err)
{
    lmq_code rc = lmq_container_open(c, path, err);
    if (rc)
        return rc;
    /* A manifest that fails to parse is freed by the parser; one that parses but fails the checks, here. */
    if (!(rc = lmq_manifest_parse(c->manifest, c->manifest_size, man, err)) &&
        (rc = lmq_artefact_check(c, man, err)))
        lmq_manifest_free(man);
    if (rc) {
        lmq_container_close(c);
        lmq_err_prefix(err, "%s: ", path);
    }
    return rc;
}

lmq_code lmq_container_read_model(const char *path, lmq_check_fn check, lmq_model *out, lmq_err *err)
{
    lmq_model_init(out);
    lmq_container c;
    lmq_manifest man;
    lmq_code rc = lmq_container_open_manifest(&c, &man, path, err);
    if (rc)
        return rc;
    out->arch = man.arch;
    out->source_checksum = man.source_checksum;
    if ((rc = copy_str(out->source, sizeof out->source, man.source, "source", path, err)) ||
        (rc = copy_str(out->notes, sizeof out->notes, man.source_notes, "notes", path, err)))
        goto done;
    for (int k = 0; k < c.n_tensors && !rc; k++) {
        const lmq_tensor_entry *t = &c.tensors[c.by_offset[k]];
        const void *raw;
        void *owned;
        lmq_tensor *added = NULL;
        if (lmq_entry_is_file(t)) {
            if (!(rc = lmq_container_read_alloc(&c, t, &owned, err)) &&
                (rc = lmq_model_add_file(out, lmq_entry_file_name(t), owned, t->raw_size, err)))
                lmq_err_prefix(err, "%s: ", path);
        } else if (t->q.dtype != LMQ_T_F32 && !check) {
            rc = lmq_fail(err, LMQ_E_UNSUPPORTED, "%s: tensor %s is %s (granularity %s), not fp32, and no checker "
                          "was given", path, t->name, lmq_encoding_of(t->q.dtype)->name, lmq_gran_names[t->q.gran]);
        } else if (!(rc = lmq_container_view(&c, t, &raw, &owned, err)) &&
                   !(rc = lmq_model_add_view(out, t->name, t->ndim, t->shape, t->q, raw, t->raw_size, owned, &added,
                                             err)) &&
                   check && (rc = check(t, raw, err))) {
            lmq_err_prefix(err, "%s: tensor %s: ", path, t->name);
        }
        const lmq_manifest_tensor *mt = rc || !added ? NULL : lmq_manifest_find(&man, t->name);
        if (mt && mt->act.scheme != LMQ_ACT_NONE && t->ndim != 2)
            rc = lmq_fail(err, LMQ_E_FORMAT, "%s: tensor %s: activations are quantised only at a matrix's input; "
                          "this is %d-D", path, t->name, t->ndim);
        else if (mt)
            added->act = mt->act;
    }
done:
    lmq_manifest_free(&man);
    if (!rc) { /* the views point into the mapping: the model keeps it */
        out->mapping = c.blob;
        c.blob = (lmq_blob){ 0 };
    }
    lmq_container_close(&c);
    if (rc)
        lmq_model_free(out);
    return rc;
}
