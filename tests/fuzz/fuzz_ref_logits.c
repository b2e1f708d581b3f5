/* Saved reference logits (verify/ref_logits.h) from arbitrary bytes. The trailing checksum is
 * recomputed first, as the file's writer would, so that mutations reach the header and the
 * windows. An opened file has a head verify can use (ctx >= 2, a vocabulary, windows that fit
 * the tokens); its windows, read in order, each decode to exactly (ctx - 1) × vocab floats or
 * fail with LMQ_E_FORMAT; the same bytes with a wrong checksum are refused. */
#include <xxhash.h>

#include "tests/fuzz/fuzz_util.h"
#include "verify/ref_logits.h"

static void seal(uint8_t *d, size_t size, uint64_t sum)
{
    for (int i = 0; i < 8; i++)
        d[size - 8 + (size_t)i] = (uint8_t)(sum >> (8 * i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    uint8_t *d = malloc(size);
    memcpy(d, data, size);
    const uint64_t sum = XXH3_64bits(d, size - 8);
    seal(d, size, sum);
    vf_logits_head head;
    vf_logits_file *f;
    uint64_t stated;
    lmq_err err = { 0 };
    if (vf_logits_open(fz_scratch(d, size), &head, &stated, &f, &err) == LMQ_OK) {
        FZ_CHECK(stated == sum, "checksum %llx, sealed with %llx", (unsigned long long)stated, (unsigned long long)sum);
        FZ_CHECK(head.ctx >= 2 && head.vocab >= 1 && head.windows >= 1 && head.windows <= head.tokens / head.ctx,
                 "ctx %d, vocab %d, %lld windows of %lld tokens", head.ctx, head.vocab, (long long)head.windows,
                 (long long)head.tokens);
        const size_t n = (size_t)(head.ctx - 1) * (size_t)head.vocab;
        float *buf = malloc(n * sizeof *buf);
        FZ_CHECK(buf != NULL, "%zu floats", n);
        for (int64_t w = 0; w < head.windows; w++) {
            lmq_code c = vf_logits_load(f, w, buf, n, &err);
            FZ_CHECK(c == LMQ_OK || c == LMQ_E_FORMAT, "window %lld: %s: %s", (long long)w, lmq_code_name(c), err.msg);
            if (c)
                break;
        }
        free(buf);
        vf_logits_close(f);
        seal(d, size, ~sum);
        FZ_CHECK(vf_logits_open(fz_scratch(d, size), &head, NULL, &f, &err) == LMQ_E_CHECKSUM, "a wrong checksum opened");
    }
    free(d);
    return 0;
}
