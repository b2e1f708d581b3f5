/* Checkpoint import: turns a source checkpoint into an lmq_model (canonical names, [out, in],
 * arch descriptor, tokenizer files carried) that the container can store, or into a plan of one
 * (formats/source.h) whose tensors are produced one at a time, for models too large to hold.
 *
 * Sources, decided by what src is:
 *   a directory          Hugging Face layout: config.json plus model.safetensors, or
 *                        model.safetensors.index.json and the shards it names
 *   *.safetensors        one Hugging Face weights file, config.json beside it
 *   *.index.json         a sharded checkpoint's index, config.json beside it
 *   *.bin                a llama2.c checkpoint (formats/llama2c.h)
 * Supported Hugging Face architectures: GPT2LMHeadModel (model_type gpt2) and
 * LlamaForCausalLM (model_type llama). */
#ifndef LMQ_CONVERT_H
#define LMQ_CONVERT_H

#include "common/err.h"
#include "formats/model.h"
#include "formats/source.h"

typedef struct {
    /* A tokenizer file (vocab.json with merges.txt beside it, tokenizer.json, or a llama2.c
     * tokenizer .bin) or a directory holding one; NULL: look beside the checkpoint. */
    const char *tokenizer;
    /* GPT-2: store the fused c_attn as blk.i.attn_q / attn_k / attn_v (.weight [dim, dim],
     * .bias [dim]) instead of blk.i.attn_qkv. An error for a model whose q, k, v are separate. */
    int split_qkv;
} lmq_convert_opts;

/* Plans the import into out (initialised here; freed again on failure): everything but the
 * tensors' values, which are checked finite as they are produced. opts may be NULL. */
lmq_code lmq_convert_plan(const char *src, const lmq_convert_opts *opts, lmq_plan *out, lmq_err *err);
/* The plan with every tensor loaded: fills out (initialised here; freed again on failure). */
lmq_code lmq_convert(const char *src, const lmq_convert_opts *opts, lmq_model *out, lmq_err *err);

/* The Hugging Face importer behind lmq_convert_plan, for a directory, a .safetensors file or an
 * index.json. */
lmq_code lmq_convert_hf(const char *src, const lmq_convert_opts *opts, lmq_plan *out, lmq_err *err);

/* Recipes may name tensors as Hugging Face modules: writes to out the canonical name pattern for
 * hf ("lm_head" -> "output.weight", "model.layers.*.mlp.down_proj" -> "blk.*.ffn_down.weight";
 * the family prefix and ".weight" optional, the layer an index or wildcards) from the same
 * tables the import uses. Returns 0 when hf names no module of a supported family. */
int lmq_hf_canonical(const char *hf, char *out, size_t cap);
/* The other way: the Hugging Face name (ending in ".weight" or ".bias"; with the family prefix
 * when prefixed) of canonical tensor name canon in supported family number family (0, 1, ...),
 * into out and returns 1; 0 when that family has no such tensor, -1 past the last family. */
int lmq_hf_name_of(const char *canon, int family, int prefixed, char *out, size_t cap);

#endif
