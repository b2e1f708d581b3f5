#include "runtime/generate.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "runtime/forward.h"
#include "runtime/sample.h"

lmq_code rt_gen_prompt(const lmq_model *m, const tok_tokenizer *tok, const char *text, int32_t **ids, int *n,
                       lmq_err *err)
{
    *ids = NULL;
    *n = 0;
    size_t len;
    lmq_code c = tok_encode(tok, text, strlen(text), ids, &len, err);
    if (c)
        return lmq_err_prefix(err, "prompt: ");
    if (len > INT_MAX) {
        free(*ids);
        *ids = NULL;
        return lmq_fail(err, LMQ_E_ARG, "prompt of %zu tokens is too long", len);
    }
    if (len == 0) {
        if (m->arch.bos_id < 0) {
            free(*ids);
            *ids = NULL;
            return lmq_fail(err, LMQ_E_ARG, "empty prompt, and the model has no BOS token to start from");
        }
        int32_t *one = realloc(*ids, sizeof *one);
        if (!one) {
            free(*ids);
            *ids = NULL;
            return lmq_fail(err, LMQ_E_NOMEM, "out of memory");
        }
        one[0] = (int32_t)m->arch.bos_id;
        *ids = one;
        len = 1;
    }
    *n = (int)len;
    return LMQ_OK;
}

static int ends_text(const lmq_arch *a, int32_t id)
{
    return (a->eos_id >= 0 && id == a->eos_id) || (a->bos_id >= 0 && id == a->bos_id);
}

/* The generation loop proper, on a ready state and sampler; logits holds the prefill's. */
static lmq_code run(rt_state *s, rt_sampler *smp, float *logits, const lmq_arch *a, int n_prompt, int max_new,
                    rt_token_fn on_token, void *user, rt_gen_stats *st, lmq_err *err)
{
    for (int pos = n_prompt;; pos++) { /* pos: where the token chosen now sits */
        for (int i = 0; i < a->vocab_size; i++) /* a sampler would pick some token all the same */
            if (!isfinite(logits[i]))
                return lmq_fail(err, LMQ_E_NUMERIC, "generate: non-finite logit %g for token %d at position %d",
                                (double)logits[i], i, pos);
        const int32_t next = (int32_t)rt_sample(smp, logits);
        if (ends_text(a, next)) {
            st->stop = RT_STOP_END;
            st->stop_token = next;
            return LMQ_OK;
        }
        lmq_code c = on_token ? on_token(user, next, err) : LMQ_OK;
        if (c)
            return c;
        if (++st->generated == max_new) {
            st->stop = RT_STOP_LENGTH;
            return LMQ_OK;
        }
        if (pos + 1 == a->max_seq) {
            st->stop = RT_STOP_CONTEXT;
            return LMQ_OK;
        }
        const double t0 = lmq_now();
        if ((c = rt_decode(s, next, pos, logits, err)))
            return c;
        st->decode_s += lmq_now() - t0;
        st->decoded++;
    }
}

lmq_code rt_generate(const lmq_model *m, const rt_exec *ex, const int32_t *prompt, int n_prompt,
                     const rt_gen_opts *opts, rt_token_fn on_token, void *user, rt_gen_stats *stats,
                     lmq_err *err)
{
    const lmq_arch *a = &m->arch;
    rt_gen_stats st = { .prompt_tokens = n_prompt, .context = a->max_seq, .stop_token = -1 };
    if (stats)
        *stats = st;
    if (opts->max_new < 1)
        return lmq_fail(err, LMQ_E_ARG, "generate: %d new tokens asked for; at least 1", opts->max_new);
    if (n_prompt < 1)
        return lmq_fail(err, LMQ_E_ARG, "generate: empty prompt (start from the model's BOS, rt_gen_prompt)");
    if (n_prompt >= a->max_seq)
        return lmq_fail(err, LMQ_E_ARG,
                        "prompt of %d tokens does not fit the model's context of %d tokens with room for a new one",
                        n_prompt, a->max_seq);
    const rt_exec serial = { .pool = NULL, .isa = rt_isa_best() };
    if (!ex)
        ex = &serial;

    /* The cache holds only what this run can reach: the prompt and max_new tokens. */
    const int64_t reach = (int64_t)n_prompt + opts->max_new;
    const int cap = reach < a->max_seq ? (int)reach : a->max_seq;
    rt_model rm;
    rt_state *s = NULL;
    rt_sampler smp = { 0 };
    float *logits = NULL;
    lmq_code c = rt_model_init(&rm, m, err);
    if (c)
        return c;
    if (!(c = rt_state_create(&rm, ex, cap, &s, err)) &&
        !(c = rt_sampler_init(&smp, a->vocab_size, opts->temperature, opts->top_p, opts->seed, err))) {
        logits = malloc((size_t)a->vocab_size * sizeof *logits);
        if (!logits)
            c = lmq_fail(err, LMQ_E_NOMEM, "out of memory for %d logits", a->vocab_size);
    }

    if (!c) {
        const double t0 = lmq_now();
        if ((c = rt_forward(s, prompt, n_prompt, 0, RT_LOGITS_LAST, logits, err)))
            lmq_err_prefix(err, "prompt: ");
        st.prefill_s = lmq_now() - t0;
    }
    if (!c)
        c = run(s, &smp, logits, a, n_prompt, opts->max_new, on_token, user, &st, err);

    free(logits);
    rt_sampler_free(&smp);
    rt_state_free(s);
    rt_model_free(&rm);
    if (stats)
        *stats = st;
    return c;
}
