/* lmq against llama.cpp (tools/llamacpp-check.sh builds and runs it; not part of make check):
 * one GGUF file run by llama.cpp's library under protocol P1 (DESIGN.md), its token stream
 * compared with lmq's, its logits with those of lmq's runtime on the matching artefact.
 *
 * Usage: llamacpp_p1 MODEL.gguf ARTEFACT.lmq TEXT CTX [WINDOWS]
 *   The documents are lmq's (tok_docs_split); llama.cpp's tokenizer encodes each as
 *   llama-perplexity would (no special tokens parsed): with BOS when its vocabulary adds one,
 *   else the documents joined by its EOS, which is P1's rule for each family. lmq's stream comes
 *   from ARTEFACT's tokenizer (tok_stream_build). The first WINDOWS (default: all) windows of CTX
 *   tokens of llama.cpp's stream, each from an empty cache, run through llama.cpp and through
 *   lmq's runtime on ARTEFACT; positions 0..CTX-2 scored: each side's PPL (NLL summed in
 *   double), top-1 agreement and KL(P_lmq || P_llama.cpp) per position, in nats; and each
 *   side's PPL over positions CTX/2..CTX-2 alone (half_*), the ones llama-perplexity scores
 *   (its windows are P1's when the text is one document and the vocabulary adds no BOS). llama.cpp's
 *   context is its default (F16 KV cache, flash attention on the CPU, which rounds to F16
 *   inside), or, when LLAMA_F32_ATTENTION is set, an F32 cache without flash attention;
 *   LLAMA_THREADS sets its threads (default 1).
 * Prints one line of key=value pairs; exit status 1 when the token streams differ or a step
 * fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "llama.h"
#include "runtime/artefact.h"
#include "runtime/forward.h"
#include "tokenizer/stream.h"
#include "tokenizer/tokenizer.h"

static void quiet(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *b = NULL;
    long n;
    if (f && !fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) && (b = malloc((size_t)n + 1)) &&
        fread(b, 1, (size_t)n, f) == (size_t)n)
        *len = (size_t)n;
    else {
        free(b);
        b = NULL;
    }
    if (f)
        fclose(f);
    return b;
}

/* lmq's P1 stream and documents of the text, with m's own tokenizer. */
static int lmq_stream(const lmq_model *m, const char *text, size_t len, int32_t **ids, size_t *n, tok_doc **docs,
                      int *n_docs)
{
    lmq_err e;
    tok_tokenizer *t = NULL;
    int docs_built;
    lmq_code c = tok_open_model(m, &t, &e);
    if (!c)
        c = tok_stream_build(t, text, len, ids, n, &docs_built, &e);
    if (!c)
        c = tok_docs_split(text, len, docs, n_docs, &e);
    tok_free(t);
    if (c)
        fprintf(stderr, "llamacpp_p1: %s\n", e.msg);
    return c ? -1 : 0;
}

/* llama.cpp's P1 stream: each document tokenized on its own (BOS first when the vocabulary adds
 * one), or joined by EOS when it adds none. */
static int32_t *llama_stream(const struct llama_vocab *v, const char *text, const tok_doc *docs, int n_docs, size_t *n)
{
    const int bos = llama_vocab_get_add_bos(v);
    size_t cap = 0;
    for (int d = 0; d < n_docs; d++)
        cap += docs[d].len + 2;
    int32_t *ids = malloc(cap * sizeof *ids);
    *n = 0;
    for (int d = 0; ids && d < n_docs; d++) {
        if (!bos && d > 0)
            ids[(*n)++] = llama_vocab_eos(v);
        const int32_t k = llama_tokenize(v, text + docs[d].off, (int32_t)docs[d].len, ids + *n, (int32_t)(cap - *n),
                                         bos, false);
        if (k < 0) {
            fprintf(stderr, "llamacpp_p1: llama_tokenize failed on document %d\n", d);
            free(ids);
            return NULL;
        }
        *n += (size_t)k;
    }
    return ids;
}

/* log Σ exp l[0..n), in double: l[i] minus it is log-softmax. */
static double log_norm(const float *l, int n)
{
    double mx = l[0], s = 0;
    for (int i = 1; i < n; i++)
        mx = l[i] > mx ? l[i] : mx;
    for (int i = 0; i < n; i++)
        s += exp((double)l[i] - mx);
    return mx + log(s);
}

static int argmax(const float *l, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        b = l[i] > l[b] ? i : b;
    return b;
}

/* The file's tensor types as ggml's reader sees them: "Q4_0:35,F32:12" in order of appearance. */
static void print_types(const char *path)
{
    struct gguf_init_params gp = { .no_alloc = true, .ctx = NULL };
    struct gguf_context *g = gguf_init_from_file(path, gp);
    int count[GGML_TYPE_COUNT] = { 0 }, order[GGML_TYPE_COUNT], n_order = 0;
    for (int64_t i = 0; g && i < gguf_get_n_tensors(g); i++) {
        const enum ggml_type t = gguf_get_tensor_type(g, i);
        if (!count[t]++)
            order[n_order++] = t;
    }
    printf(" types=");
    for (int k = 0; k < n_order; k++)
        printf("%s%s:%d", k ? "," : "", ggml_type_name((enum ggml_type)order[k]), count[order[k]]);
    if (g)
        gguf_free(g);
}

static int fail(const char *what, const lmq_err *e)
{
    fprintf(stderr, "llamacpp_p1: %s%s%s\n", what, e ? ": " : "", e ? e->msg : "");
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: llamacpp_p1 MODEL.gguf ARTEFACT.lmq TEXT CTX [WINDOWS]\n");
        return 2;
    }
    const int ctx = atoi(argv[4]);
    size_t len = 0, n_lmq = 0, n_ll = 0;
    char *text = slurp(argv[3], &len);
    int32_t *lmq_ids = NULL;
    tok_doc *docs = NULL;
    int n_docs = 0;
    lmq_model m;
    lmq_err e;
    if (!text || ctx < 2)
        return fail("cannot read the text, or CTX < 2", NULL);
    if (rt_load_artefact(argv[2], &m, &e))
        return fail(argv[2], &e);
    if (lmq_stream(&m, text, len, &lmq_ids, &n_lmq, &docs, &n_docs))
        return 1;

    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model)
        return fail("llama.cpp cannot load the GGUF file", NULL);
    const struct llama_vocab *v = llama_model_get_vocab(model);
    const int vocab = llama_vocab_n_tokens(v);
    int32_t *ids = llama_stream(v, text, docs, n_docs, &n_ll);
    if (!ids)
        return 1;
    size_t first_diff = 0;
    while (first_diff < n_ll && first_diff < n_lmq && ids[first_diff] == lmq_ids[first_diff])
        first_diff++;
    const int same = n_ll == n_lmq && first_diff == n_ll;
    if (vocab != m.arch.vocab_size)
        return fail("llama.cpp's vocabulary is not the artefact's size", NULL);

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = (uint32_t)ctx;
    /* one thread: two spin at ggml's barriers on a busy machine */
    cp.n_threads = cp.n_threads_batch = getenv("LLAMA_THREADS") ? atoi(getenv("LLAMA_THREADS")) : 1;
    if (getenv("LLAMA_F32_ATTENTION")) { /* lmq's attention is fp32 through */
        cp.type_k = cp.type_v = GGML_TYPE_F32;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    }
    struct llama_context *lc = llama_init_from_model(model, cp);
    if (!lc)
        return fail("llama.cpp cannot make a context of CTX tokens", NULL);
    rt_model rm;
    rt_state *st = NULL;
    const rt_exec ex = { .pool = NULL, .isa = rt_isa_best() };
    if (rt_model_init(&rm, &m, &e) || rt_state_create(&rm, &ex, ctx, &st, &e))
        return fail(argv[2], &e);
    float *ref = malloc((size_t)ctx * (size_t)vocab * sizeof *ref);

    int64_t windows = (int64_t)(n_ll / (size_t)ctx);
    if (argc == 6 && atoll(argv[5]) > 0 && atoll(argv[5]) < windows)
        windows = atoll(argv[5]);
    struct llama_batch b = llama_batch_init(ctx, 0, 1);
    double nll = 0, nll_ref = 0, kl = 0, kl_max = 0, half = 0, half_ref = 0; /* half: positions >= ctx/2 */
    int64_t top1 = 0, scored = 0;
    for (int64_t w = 0; w < windows; w++) {
        const int32_t *win = ids + w * ctx;
        llama_memory_clear(llama_get_memory(lc), true);
        b.n_tokens = ctx;
        for (int t = 0; t < ctx; t++) {
            b.token[t] = win[t];
            b.pos[t] = t;
            b.n_seq_id[t] = 1;
            b.seq_id[t][0] = 0;
            b.logits[t] = t < ctx - 1;
        }
        if (llama_decode(lc, b))
            return fail("llama_decode failed", NULL);
        if (rt_forward(st, win, ctx, 0, RT_LOGITS_ALL, ref, &e))
            return fail(argv[2], &e);
        for (int t = 0; t < ctx - 1; t++, scored++) {
            const float *l = llama_get_logits_ith(lc, t), *r = ref + (size_t)t * (size_t)vocab;
            const double z = log_norm(l, vocab), zr = log_norm(r, vocab);
            double k = 0;
            for (int i = 0; i < vocab; i++) {
                const double lr = r[i] - zr;
                k += exp(lr) * (lr - (l[i] - z));
            }
            nll += z - l[win[t + 1]];
            nll_ref += zr - r[win[t + 1]];
            half += t >= ctx / 2 ? z - l[win[t + 1]] : 0;
            half_ref += t >= ctx / 2 ? zr - r[win[t + 1]] : 0;
            kl += k;
            kl_max = k > kl_max ? k : kl_max;
            top1 += argmax(l, vocab) == argmax(r, vocab);
        }
    }
    printf("tokens=%zu lmq_tokens=%zu same_tokens=%s", n_ll, n_lmq, same ? "yes" : "no");
    print_types(argv[1]);
    if (!same)
        printf(" first_difference=%zu", first_diff);
    const double n_half = (double)windows * (ctx - 1 - ctx / 2);
    printf(" windows=%lld ppl_llama=%.6f ppl_lmq=%.6f top1=%.6f kl_mean=%.3e kl_max=%.3e half_llama=%.6f half_lmq=%.6f\n",
           (long long)windows, exp(nll / (double)scored), exp(nll_ref / (double)scored),
           (double)top1 / (double)scored, kl / (double)scored, kl_max, exp(half / n_half), exp(half_ref / n_half));
    llama_batch_free(b);
    free(ref);
    rt_state_free(st);
    rt_model_free(&rm);
    llama_free(lc);
    llama_model_free(model);
    llama_backend_free();
    lmq_model_free(&m);
    free(ids);
    free(lmq_ids);
    free(docs);
    free(text);
    return same ? 0 : 1;
}
