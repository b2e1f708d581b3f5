/* Text generation: a prompt's tokens are evaluated in one pass (prefill, matrix-matrix), then
 * new tokens are chosen one at a time (greedy or sampled, runtime/sample.h) and fed back from
 * the KV cache (decode) until one of three things ends the run:
 *   - the requested number of new tokens is reached;
 *   - the model emits its end of text: arch.eos_id, or arch.bos_id where the model has one (a
 *     new document beginning means the current one has ended; llama2.c stops at BOS too, and
 *     stories260K ends each story with BOS, never EOS). That token is not passed on;
 *   - the context is full (arch.max_seq positions): the model cannot see further back.
 * None of these is an error; rt_gen_stats says which one happened. */
#ifndef LMQ_RT_GENERATE_H
#define LMQ_RT_GENERATE_H

#include <stdint.h>

#include "common/err.h"
#include "formats/model.h"
#include "runtime/kernels.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    int max_new;       /* new tokens at most, >= 1 */
    float temperature; /* 0: greedy (argmax, ties to the lowest id) */
    float top_p;       /* in (0, 1]; 1: no nucleus restriction */
    uint64_t seed;     /* for sampling; a seed gives the same tokens on every machine */
} rt_gen_opts;

typedef enum {
    RT_STOP_LENGTH,  /* max_new tokens generated */
    RT_STOP_END,     /* the model emitted end of text (stop_token) */
    RT_STOP_CONTEXT, /* the context is full */
} rt_stop;

typedef struct {
    int prompt_tokens, generated;
    int decoded;      /* tokens fed back one at a time (generated, less the last) */
    double prefill_s; /* seconds in the prompt's forward pass */
    double decode_s;  /* seconds in the one-token forward passes */
    rt_stop stop;
    int32_t stop_token; /* RT_STOP_END: the token that ended the text */
    int context;        /* the model's context, arch.max_seq */
} rt_gen_stats;

/* Receives each new token as it is chosen; a code other than LMQ_OK (with err set) ends the
 * run and is returned by rt_generate. */
typedef lmq_code (*rt_token_fn)(void *user, int32_t id, lmq_err *err);

/* The prompt's token ids for text: tok_encode's (llama2.c: BOS first). When that is empty (an
 * empty prompt without a BOS, as GPT-2's), the run starts from arch.bos_id alone; for GPT-2
 * that is <|endoftext|> 50256, the document separator it was trained with, which is how GPT-2
 * generates unconditionally. *ids is malloc'd; free() it. */
lmq_code rt_gen_prompt(const lmq_model *m, const tok_tokenizer *tok, const char *text, int32_t **ids, int *n,
                       lmq_err *err);

/* Generates after prompt[0..n_prompt) (1 <= n_prompt < arch.max_seq: room for one new token),
 * calling on_token (may be NULL) for each new token. ex may be NULL (the caller's thread, the
 * best kernels). stats (may be NULL) is filled as far as the run got, also on error. */
lmq_code rt_generate(const lmq_model *m, const rt_exec *ex, const int32_t *prompt, int n_prompt,
                     const rt_gen_opts *opts, rt_token_fn on_token, void *user, rt_gen_stats *stats,
                     lmq_err *err);

#endif
