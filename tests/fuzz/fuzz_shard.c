/* Verify shards (verify/shard.h) from arbitrary bytes: the header text (up to the first NUL) and
 * then carried arrays (u8 name length, name, u32 size, bytes; little-endian), written through the
 * container's writer so that mutations reach the shard's own checks rather than stopping at the
 * container's checksums (fuzz_container fuzzes those). Merged as the one shard of its run: a
 * report whose every row has windows × (ctx - 1) positions, finite statistics and top-1 in [0, 1],
 * or a refusal with LMQ_E_FORMAT, LMQ_E_ARG, LMQ_E_UNSUPPORTED or LMQ_E_NOMEM. */
#include <math.h>

#include "formats/container.h"
#include "tests/fuzz/fuzz_util.h"
#include "verify/shard.h"

/* Writes the arrays of p[0..n) to path as a container whose manifest text is head; 0 when the
 * writer refuses them (a name it does not take). */
static int write_shard(const char *path, const char *head, size_t head_len, const uint8_t *p, size_t n)
{
    lmq_writer *w;
    lmq_err err;
    if (lmq_writer_open(&w, path, &err))
        return 0;
    size_t at = 0;
    while (n - at >= 5) {
        const size_t len = p[at];
        if (n - at - 1 < len + 4)
            break;
        char name[256];
        memcpy(name, p + at + 1, len);
        name[len] = 0;
        const size_t size = (size_t)p[at + 1 + len] | (size_t)p[at + 2 + len] << 8 | (size_t)p[at + 3 + len] << 16 |
                            (size_t)p[at + 4 + len] << 24;
        at += 5 + len;
        const size_t take = size < n - at ? size : n - at;
        if (lmq_writer_add_file(w, name, p + at, take, LMQ_CODEC_NONE, &err)) {
            lmq_writer_abort(w);
            return 0;
        }
        at += take;
    }
    return lmq_writer_finish_text(w, head, head_len, &err) == LMQ_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    const size_t head = nul ? (size_t)(nul - data) : size;
    const char *path = fz_scratch(NULL, 0);
    if (!write_shard(path, (const char *)data, head, data + head + (nul != NULL), size - head - (nul != NULL)))
        return 0;
    vf_merged *m = malloc(sizeof *m);
    lmq_err err = { 0 };
    const char *paths[1] = { path };
    lmq_code c = vf_shard_merge(paths, 1, m, &err);
    FZ_CHECK(c == LMQ_OK || c == LMQ_E_FORMAT || c == LMQ_E_ARG || c == LMQ_E_UNSUPPORTED || c == LMQ_E_NOMEM, "%s: %s",
             lmq_code_name(c), err.msg);
    if (!c) {
        const vf_report *r = &m->report;
        FZ_CHECK(r->n_rows >= 1 && r->ctx >= 2, "%d rows, ctx %d", r->n_rows, r->ctx);
        for (int i = 0; i < r->n_rows; i++) {
            const vf_result *x = &r->rows[i].res;
            FZ_CHECK(x->windows == r->tokens / r->ctx && x->positions == x->windows * (r->ctx - 1),
                     "row %d: %lld windows, %lld positions", i, (long long)x->windows, (long long)x->positions);
            FZ_CHECK(isfinite(x->nll) && isfinite(x->kl_mean) && x->top1 >= 0 && x->top1 <= 1, "row %d", i);
        }
        free((void *)r->rows);
    }
    free(m);
    return 0;
}
