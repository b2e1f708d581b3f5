/* The manifest: lmq_manifest_parse on raw text; whatever parses must emit, and the emitted text
 * must parse back and emit to the very same text (emit and parse walk one table and must not
 * drift apart). */
#include "formats/manifest.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lmq_manifest m, back;
    lmq_err err = { 0 };
    if (lmq_manifest_parse((const char *)data, size, &m, &err))
        return 0;
    char *t1, *t2;
    size_t n1, n2;
    lmq_code c = lmq_manifest_emit(&m, &t1, &n1, &err);
    FZ_CHECK(c == LMQ_OK, "a parsed manifest does not emit: %s", err.msg);
    c = lmq_manifest_parse(t1, n1, &back, &err);
    FZ_CHECK(c == LMQ_OK, "the emitted manifest does not parse: %s\n--- emitted:\n%s", err.msg, t1);
    c = lmq_manifest_emit(&back, &t2, &n2, &err);
    FZ_CHECK(c == LMQ_OK, "the re-parsed manifest does not emit: %s", err.msg);
    FZ_CHECK(n1 == n2 && !memcmp(t1, t2, n1), "emit(parse(emit(m))) differs\n--- first:\n%s\n--- second:\n%s", t1,
             t2);
    free(t1);
    free(t2);
    lmq_manifest_free(&back);
    lmq_manifest_free(&m);
    return 0;
}
