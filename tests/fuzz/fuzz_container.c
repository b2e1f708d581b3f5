/* The lmq container: lmq_container_open_mem, verify, the manifest parsed and checked against the
 * index, every tensor decoded through the scheme table as the runtime does, and the runtime's
 * own loader (rt_load_artefact) on the same bytes.
 *
 * Each input runs twice: as given (so the checksum checks themselves are exercised) and with
 * every checksum recomputed (so mutations get past them to the index, layout and decoders). */
#include <xxhash.h>
#include <zstd.h>

#include "formats/container.h"
#include "formats/manifest.h"
#include "tests/fuzz/fuzz_util.h"
#include "runtime/artefact.h"
#include "schemes/scheme.h"

/* Decoding a quantised tensor may expand it 16-fold (int2) behind a zstd ratio of up to 32768:
 * fine for the format, too much for a fuzzer's memory limit. */
#define MAX_DECODED ((uint64_t)64 << 20)

static uint64_t get_le(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void put_le(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8)
        p[i] = (uint8_t)v;
}

/* Recomputes the checksums wherever the footer and index can be read (CONTAINER.md): each
 * entry's (over its blob, or its zstd-decoded bytes), then index, manifest and file. */
static void fix_checksums(uint8_t *d, size_t size)
{
    if (size < 64 + 8 + 64)
        return;
    uint8_t *f = d + size - 64;
    const uint64_t end = size - 64, io = get_le(f), is = get_le(f + 8), mo = get_le(f + 16), ms = get_le(f + 24);
    if (io <= end && is >= 8 && is <= end - io) {
        uint64_t count = get_le(d + io);
        for (uint64_t i = 0; count <= (is - 8) / 80 && i < count; i++) {
            uint8_t *e = d + io + 8 + 80 * i;
            uint64_t off = get_le(e + 48), stored = get_le(e + 56), raw = get_le(e + 64);
            if (off > size || stored > size - off)
                continue;
            if (e[13] == LMQ_CODEC_NONE) {
                put_le(e + 72, XXH3_64bits(d + off, stored));
            } else if (raw <= MAX_DECODED) {
                void *buf = malloc(raw ? raw : 1);
                size_t r = buf ? ZSTD_decompress(buf, raw, d + off, stored) : 0;
                if (buf && !ZSTD_isError(r))
                    put_le(e + 72, XXH3_64bits(buf, r));
                free(buf);
            }
        }
        put_le(f + 32, XXH3_64bits(d + io, is));
    }
    if (mo <= end && ms <= end - mo)
        put_le(f + 40, XXH3_64bits(d + mo, ms));
    put_le(f + 48, XXH3_64bits(d, size - 16));
}

/* What runtime/artefact.c does for one tensor: the scheme's layout must match the stored size
 * before a byte is decoded. */
static void decode(const lmq_container *c, const lmq_tensor_entry *t)
{
    lmq_err err = { 0 };
    void *raw;
    if (lmq_entry_is_file(t) || t->raw_size > MAX_DECODED) {
        if (t->raw_size <= MAX_DECODED && !lmq_container_read_alloc(c, t, &raw, &err))
            free(raw);
        return;
    }
    int64_t rows = t->ndim > 1 ? t->shape[0] : 1, cols = lmq_entry_numel(t) / rows;
    lmq_layout L;
    if (lmq_layout_of(&t->q, rows, cols, &L, &err) || L.bytes != t->raw_size ||
        (uint64_t)(rows * cols) > MAX_DECODED / sizeof(float))
        return;
    if (lmq_container_read_alloc(c, t, &raw, &err))
        return;
    float *out = malloc((size_t)(rows * cols) * sizeof *out);
    if (!out)
        abort();
    lmq_code rc = q_dequantize(&t->q, raw, t->raw_size, rows, cols, out, NULL, &err);
    FZ_CHECK(rc == LMQ_OK || rc == LMQ_E_FORMAT, "tensor %s: %s", t->name, err.msg);
    free(out);
    free(raw);
}

static void run(const uint8_t *data, size_t size)
{
    lmq_container c;
    lmq_err err = { 0 };
    if (lmq_container_open_mem(&c, data, size, "fuzz.lmq", &err))
        return;
    lmq_container_verify(&c, NULL, NULL, &err);
    for (int i = 0; i < c.n_tensors; i++)
        FZ_CHECK(lmq_container_find(&c, c.tensors[i].name) == &c.tensors[i], "%s", c.tensors[i].name);
    lmq_manifest man;
    if (!lmq_manifest_parse(c.manifest, c.manifest_size, &man, &err)) {
        lmq_manifest_check(&man, c.tensors, c.n_tensors, c.version, NULL, NULL);
        lmq_manifest_free(&man);
    }
    uint64_t raw = 0;
    for (int k = 0; k < c.n_tensors; k++) {
        decode(&c, &c.tensors[c.by_offset[k]]);
        raw += c.tensors[k].raw_size;
    }
    lmq_container_close(&c);

    /* A consistent artefact decodes to at most 16 times its raw bytes (int2); the loader may
     * allocate what the index promises, but no more. */
    lmq_model m;
    if (raw <= MAX_DECODED / 16 && !rt_load_artefact(fz_scratch(data, size), &m, &err))
        lmq_model_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run(data, size);
    uint8_t *fixed = malloc(size ? size : 1);
    if (!fixed)
        abort();
    memcpy(fixed, data, size);
    fix_checksums(fixed, size);
    if (size && memcmp(fixed, data, size))
        run(fixed, size);
    free(fixed);
    return 0;
}
