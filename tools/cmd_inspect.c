/* lmq inspect: an artefact's manifest as stored, then its tensors in file order. Reads only
 * the header, index and manifest: no tensor data is touched or verified (that is audit). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "formats/container.h"
#include "formats/manifest.h"
#include "schemes/scheme.h"
#include "tools/cmd.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: lmq inspect A.lmq\n"
               "Prints the manifest (YAML) and a table of the tensors: name, shape, encoding,\n"
               "scheme, codec, stored and raw bytes, offset and XXH3-64 checksum.\n");
}

static void shape_str(const lmq_tensor_entry *t, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%" PRId64, d ? ", " : "", t->shape[d]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

/* A tensor's encoding; a carried file is its bytes as they are. */
static void encoding_str(const lmq_tensor_entry *t, char *buf, size_t n)
{
    if (lmq_entry_is_file(t))
        snprintf(buf, n, "bytes");
    else
        q_describe(&t->q, buf, n);
}

/* The manifest's scheme, and the activation quantisation of its layer when it has one. */
static void scheme_str(const lmq_manifest_tensor *mt, char *buf, size_t n)
{
    char act[32];
    if (!mt) {
        snprintf(buf, n, "-");
        return;
    }
    lmq_act_describe(mt->act, mt->q.dtype, act, sizeof act);
    snprintf(buf, n, "%s%s%s", mt->scheme, *act ? ", " : "", act);
}

static void print_table(const lmq_container *c, const lmq_manifest *man)
{
    int wn = 4, ws = 5, we = 8, wc = 6;
    char shape[96], enc[160], scheme[LMQ_SCHEME_MAX + 40];
    for (int i = 0; i < c->n_tensors; i++) {
        const lmq_tensor_entry *t = &c->tensors[i];
        const lmq_manifest_tensor *mt = man ? lmq_manifest_find(man, t->name) : NULL;
        shape_str(t, shape, sizeof shape);
        encoding_str(t, enc, sizeof enc);
        int l;
        if ((l = (int)strlen(t->name)) > wn)
            wn = l;
        if ((l = (int)strlen(shape)) > ws)
            ws = l;
        if ((l = (int)strlen(enc)) > we)
            we = l;
        scheme_str(mt, scheme, sizeof scheme);
        if ((l = (int)strlen(scheme)) > wc)
            wc = l;
    }
    printf("%-*s  %-*s  %-*s  %-*s  %-5s  %12s  %12s  %12s  %-16s\n", wn, "name", ws, "shape", we, "encoding", wc,
           "scheme", "codec", "stored", "raw", "offset", "checksum");
    uint64_t stored = 0, raw = 0;
    for (int k = 0; k < c->n_tensors; k++) {
        const lmq_tensor_entry *t = &c->tensors[c->by_offset[k]];
        const lmq_manifest_tensor *mt = man ? lmq_manifest_find(man, t->name) : NULL;
        shape_str(t, shape, sizeof shape);
        encoding_str(t, enc, sizeof enc);
        scheme_str(mt, scheme, sizeof scheme);
        printf("%-*s  %-*s  %-*s  %-*s  %-5s  %12" PRIu64 "  %12" PRIu64 "  %12" PRIu64 "  %016" PRIx64 "\n", wn,
               t->name, ws, shape, we, enc, wc, scheme, lmq_codec_names[t->codec], t->stored_size,
               t->raw_size, t->offset, t->checksum);
        stored += t->stored_size;
        raw += t->raw_size;
    }
    printf("%d tensors, %" PRIu64 " bytes stored, %" PRIu64 " bytes raw\n", c->n_tensors, stored, raw);
}

int cmd_inspect(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc != 2 || argv[1][0] == '-') {
        usage(stderr);
        return 2;
    }
    lmq_container c;
    lmq_err err = { 0 };
    if (lmq_container_open(&c, argv[1], &err)) {
        fprintf(stderr, "lmq inspect: %s\n", err.msg);
        return 1;
    }
    lmq_manifest man;
    int parsed = lmq_manifest_parse(c.manifest, c.manifest_size, &man, &err) == LMQ_OK;
    printf("# %s: lmq container version %u, %zu bytes, %d entries\n", argv[1], c.version, c.size, c.n_tensors);
    printf("# manifest (%zu bytes)\n", c.manifest_size);
    fwrite(c.manifest, 1, c.manifest_size, stdout);
    if (c.manifest_size && c.manifest[c.manifest_size - 1] != '\n')
        putchar('\n');
    printf("# tensors (file order)\n");
    print_table(&c, parsed ? &man : NULL);
    if (parsed)
        lmq_manifest_free(&man);
    else
        fprintf(stderr, "lmq inspect: %s: %s\n", argv[1], err.msg);
    lmq_container_close(&c);
    return parsed ? 0 : 1;
}
