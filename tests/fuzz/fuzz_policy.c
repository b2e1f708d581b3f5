/* Audit policies: lmq_policy_parse on raw text, then every key it set checked against a small
 * quantised-looking manifest. Checks what audit/policy.h promises: a failed parse leaves no policy
 * and says where ("<name>:<line>: ..."); the count returned is the problems reported; each names
 * the policy and the key, with code LMQ_E_RECIPE and, where it names a tensor, one the manifest has
 * (or, for tensors_like, the reference). */
#include "audit/policy.h"
#include "tests/fuzz/fuzz_util.h"

#define NAME "tests/fuzz/policy.yaml"

typedef struct {
    const lmq_manifest *m;
    int n;
} seen;

static void on_issue(void *ctx, const char *tensor, lmq_code code, const char *msg)
{
    seen *s = ctx;
    s->n++;
    FZ_CHECK(code == LMQ_E_RECIPE, "code %d", (int)code);
    FZ_CHECK(!strncmp(msg, NAME ": ", strlen(NAME) + 2), "message does not name the policy: %s", msg);
    FZ_CHECK(!tensor || lmq_manifest_find(s->m, tensor) || strstr(msg, ": tensors_like: in "),
             "tensor %s is in neither the manifest nor a reference", tensor);
}

/* tok_embd fp32, one int4 linear layer, one norm. */
static const char MANIFEST[] =
    "format_version: 1\ntool_version: \"lmq 0.1.0\"\narchitecture:\n  family: llama\n  dim: 32\n"
    "  hidden_dim: 64\n  n_layers: 1\n  n_heads: 4\n  n_kv_heads: 4\n  vocab_size: 16\n  max_seq: 64\n"
    "  norm_eps: 1.0e-05\n  rope_theta: 10000\n  tied_embedding: true\n  rope: interleaved\n  tokenizer: none\n"
    "  bos_id: 1\n  eos_id: 2\nsource:\n  path: \"m\"\n  checksum: \"1122334455667788\"\n  notes: \"\"\n"
    "recipe:\n  checksum: \"0000000000000000\"\n  text: \"x\"\n"
    "totals:\n  params: 1568\n  tensor_bytes: 2624\n  linear_params: 1024\n  linear_bpw: 4.5\n"
    "tensors:\n"
    "- {name: \"tok_embd.weight\", scheme: \"fp32\", dtype: fp32, granularity: none, group: 0, asymmetric: false,"
    " linear: false, bits: 16384, bits_per_weight: 32, rel_error: 0, stats: {peak_abs: 1, rms: 0.5,"
    " excess_kurtosis: 0}, reason: \"no rule matches\"}\n"
    "- {name: \"blk.0.attn_q.weight\", scheme: \"int4 g32\", dtype: int4, granularity: group, group: 32,"
    " asymmetric: false, linear: true, bits: 4608, bits_per_weight: 4.5, rel_error: 0.1, stats: {peak_abs: 1,"
    " rms: 0.5, excess_kurtosis: 0}}\n"
    "- {name: \"blk.0.attn_norm.weight\", scheme: \"fp32\", dtype: fp32, granularity: none, group: 0,"
    " asymmetric: false, linear: false, bits: 1024, bits_per_weight: 32, rel_error: 0, stats: {peak_abs: 1,"
    " rms: 1, excess_kurtosis: 0}, reason: \"1-D\"}\n"
    "files: []\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static lmq_mdoc doc;
    static int ready;
    lmq_err err = { 0 };
    if (!ready) {
        FZ_CHECK(lmq_mdoc_parse(MANIFEST, sizeof MANIFEST - 1, "manifest", &doc, &err) == LMQ_OK, "%s", err.msg);
        ready = 1;
    }
    lmq_policy *p = (lmq_policy *)&doc; /* must be cleared on failure */
    if (lmq_policy_parse((const char *)data, size, NAME, &p, &err)) {
        FZ_CHECK(!p, "a failed parse left a policy");
        FZ_CHECK(!strncmp(err.msg, NAME, strlen(NAME)) || strstr(err.msg, "out of memory"),
                 "the error does not name the policy: %s", err.msg);
        return 0;
    }
    seen s = { &doc.man, 0 };
    lmq_audit_subject sub = { "fuzz.lmq", &doc, 1 };
    int n = lmq_policy_check(p, &sub, on_issue, &s);
    FZ_CHECK(n == s.n, "returned %d, reported %d", n, s.n);
    FZ_CHECK(lmq_policy_check(p, &sub, NULL, NULL) == n, "a second run differs");
    lmq_policy_free(p);
    return 0;
}
