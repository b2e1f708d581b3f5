/* lmq generate: continues a prompt with an artefact's model, printing each token as it comes. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pool.h"
#include "runtime/artefact.h"
#include "runtime/backend.h"
#include "runtime/generate.h"
#include "runtime/kv.h"
#include "tools/args.h"
#include "tools/cmd.h"

static const char usage[] =
    "usage: lmq generate MODEL.lmq [--prompt TEXT] [-n N] [--temp T] [--top-p P] [--seed S] [--threads N]\n"
    "                    [--device cpu|cuda] [--kv FMT] [--kv-k FMT] [--kv-v FMT]\n"
    "Prints the prompt and its continuation, token by token, then a summary on stderr.\n"
    "  --prompt, -p TEXT  the text to continue (default empty: from the model's BOS alone;\n"
    "                     for GPT-2, which has none, from <|endoftext|>)\n"
    "  -n N               new tokens at most (default 256); generation also stops at the end of\n"
    "                     text the model emits and when its context is full\n"
    "  --temp T           sampling temperature, 0 to 100 (default 0: greedy, the most likely token)\n"
    "  --top-p P          sample only from the most likely tokens whose probability reaches P,\n"
    "                     0 < P <= 1 (default 1: all)\n"
    "  --seed S           random seed for sampling, 0 to 2^64-1 (default 0)\n"
    "  --threads N        worker threads (default 0: one per CPU)\n"
    "  --device cpu|cuda  where the model runs (default cpu; cuda: the CUDA device 0)\n"
    "  --kv FMT           the KV cache's format: fp32 (default), fp16, bf16, fp8, int8, int4;\n"
    "                     --kv-k, --kv-v the keys' or the values' alone (CPU only)\n";

/* Writes the prompt as given, then each new token's text as it arrives. */
typedef struct {
    const tok_tokenizer *tok;
    int32_t prev;     /* llama2.c drops the leading space of the first piece after BOS */
    const char *echo; /* the prompt, until printed: only once the model has run on it */
} printer;

static lmq_code print_bytes(const void *bytes, size_t len, lmq_err *err)
{
    if (fwrite(bytes, 1, len, stdout) != len || fflush(stdout) != 0)
        return lmq_fail(err, LMQ_E_IO, "cannot write to standard output");
    return LMQ_OK;
}

static lmq_code print_echo(printer *p, lmq_err *err)
{
    const char *e = p->echo;
    p->echo = NULL;
    return e ? print_bytes(e, strlen(e), err) : LMQ_OK;
}

static lmq_code print_token(void *user, int32_t id, lmq_err *err)
{
    printer *p = user;
    const uint8_t *bytes;
    size_t len;
    lmq_code c = print_echo(p, err);
    if (!c)
        c = tok_decode_token(p->tok, p->prev, id, &bytes, &len, err);
    if (c)
        return c;
    p->prev = id;
    return print_bytes(bytes, len, err);
}

static double per_second(int n, double s)
{
    return s > 0.0 ? n / s : 0.0;
}

static void summary(const rt_gen_stats *st, const rt_gen_opts *o)
{
    fprintf(stderr, "lmq generate: %d prompt token%s, %d generated; prefill %.1f tokens/s", st->prompt_tokens,
            st->prompt_tokens == 1 ? "" : "s", st->generated, per_second(st->prompt_tokens, st->prefill_s));
    if (st->decoded > 0)
        fprintf(stderr, ", decode %.1f tokens/s", per_second(st->decoded, st->decode_s));
    if (o->temperature > 0.0f)
        fprintf(stderr, "; seed %llu", (unsigned long long)o->seed);
    switch (st->stop) {
    case RT_STOP_LENGTH:
        fprintf(stderr, "; stopped: -n %d reached\n", o->max_new);
        break;
    case RT_STOP_END:
        fprintf(stderr, "; stopped: the model ended the text (token %d)\n", (int)st->stop_token);
        break;
    case RT_STOP_CONTEXT:
        fprintf(stderr, "; stopped: the model's context of %d tokens is full (note: -n %d not reached)\n",
                st->context, o->max_new);
        break;
    }
}

/* Parses the options into o; returns -1, or the exit status for a usage error. */
static int parse_opts(int argc, char **argv, const char **model, const char **prompt, rt_gen_opts *o,
                      long *threads, const rt_backend **dev, const rt_kv_format **kv_k, const rt_kv_format **kv_v)
{
    const char *kv_s = NULL, *kv_k_s = NULL, *kv_v_s = NULL;
    const char *n_s = "256", *temp_s = "0", *top_p_s = "1", *seed_s = "0", *threads_s = "0", *device = "cpu";
    const char *pos[1];
    int n_pos;
    const arg_opt opts[] = { { "--prompt", "-p", prompt, NULL }, { "-n", NULL, &n_s, NULL },
                             { "--temp", NULL, &temp_s, NULL },  { "--top-p", NULL, &top_p_s, NULL },
                             { "--seed", NULL, &seed_s, NULL },  { "--threads", NULL, &threads_s, NULL },
                             { "--device", NULL, &device, NULL }, { "--kv", NULL, &kv_s, NULL },
                             { "--kv-k", NULL, &kv_k_s, NULL },   { "--kv-v", NULL, &kv_v_s, NULL }, { 0 } };
    int rc = args_parse(argc, argv, opts, pos, 1, &n_pos, usage);
    if (rc >= 0)
        return rc;
    if (n_pos != 1) {
        fprintf(stderr, "lmq generate: need one model artefact\n%s", usage);
        return 2;
    }
    *model = pos[0];
    long n;
    double temp, top_p;
    if (!args_int("generate", "-n", n_s, 1, INT_MAX, &n) || !args_double("generate", "--temp", temp_s, 0, 100, &temp) ||
        !args_double("generate", "--top-p", top_p_s, 0, 1, &top_p) || !args_u64("generate", "--seed", seed_s, &o->seed) ||
        !args_int("generate", "--threads", threads_s, 0, LMQ_POOL_MAX_THREADS, threads) ||
        !args_kv("generate", "--kv", kv_s, kv_k))
        return 2;
    *kv_v = *kv_k; /* --kv sets both, --kv-k and --kv-v one each */
    if (!args_kv("generate", "--kv-k", kv_k_s, kv_k) || !args_kv("generate", "--kv-v", kv_v_s, kv_v))
        return 2;
    if (!((float)top_p > 0.0f)) { /* (0, 1]: args_double checked [0, 1] */
        fprintf(stderr, "lmq generate: --top-p must be greater than 0 and at most 1, not '%s'\n", top_p_s);
        return 2;
    }
    lmq_err err;
    lmq_code c = rt_backend_ready(device, dev, &err);
    if (c) {
        fprintf(stderr, "lmq generate: %s\n", err.msg);
        return c == LMQ_E_ARG ? 2 : 1;
    }
    o->max_new = (int)n;
    o->temperature = (float)temp;
    o->top_p = (float)top_p;
    return -1;
}

int cmd_generate(int argc, char **argv)
{
    const char *path, *prompt = "";
    rt_gen_opts o;
    long threads;
    const rt_backend *dev;
    const rt_kv_format *kv_k = NULL, *kv_v = NULL;
    int rc = parse_opts(argc, argv, &path, &prompt, &o, &threads, &dev, &kv_k, &kv_v);
    if (rc >= 0)
        return rc;

    lmq_model m;
    tok_tokenizer *tok = NULL;
    lmq_pool *pool = NULL;
    int32_t *ids = NULL;
    int n_ids = 0;
    rt_gen_stats st;
    lmq_err err;
    lmq_code c = rt_load_artefact(path, &m, &err);
    if (c) {
        fprintf(stderr, "lmq generate: %s\n", err.msg);
        return 1;
    }
    if (!(c = tok_open_model(&m, &tok, &err)) && !(c = rt_gen_prompt(&m, tok, prompt, &ids, &n_ids, &err)) &&
        !(c = lmq_pool_create((int)threads, &pool, &err))) {
        rt_exec ex = { .pool = pool, .isa = rt_isa_best(), .backend = dev, .kv_k = kv_k, .kv_v = kv_v };
        printer pr = { .tok = tok, .prev = ids[n_ids - 1], .echo = prompt };
        c = rt_generate(&m, &ex, ids, n_ids, &o, print_token, &pr, &st, &err);
        if (!c && !(c = print_echo(&pr, &err))) /* the prompt, when nothing followed it */
            c = print_bytes("\n", 1, &err);
    }
    if (c)
        fprintf(stderr, "lmq generate: %s: %s\n", path, err.msg);
    else
        summary(&st, &o);
    lmq_pool_free(pool);
    free(ids);
    tok_free(tok);
    lmq_model_free(&m);
    return c ? 1 : 0;
}
