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
 * Supported Hugging Face architectures (model_type; their names and config keys are
 * formats/hf_model.h's table): GPT2LMHeadModel (gpt2), LlamaForCausalLM (llama),
 * MistralForCausalLM (mistral), Qwen2ForCausalLM (qwen2: q/k/v biases) and Phi3ForCausalLM
 * (phi3: fused qkv_proj / gate_up_proj split by rows). */
#ifndef LMQ_CONVERT_H
#define LMQ_CONVERT_H

#include "common/err.h"
#include "formats/model.h"
#include "formats/source.h"

typedef struct {
    /* A tokenizer file (vocab.json with merges.txt beside it, tokenizer.json, tokenizer.model, or
     * a llama2.c tokenizer .bin) or a directory holding one; NULL: look beside the checkpoint. */
    const char *tokenizer;
    /* GPT-2: store the fused c_attn as blk.i.attn_q / attn_k / attn_v (.weight [dim, dim],
     * .bias [dim]) instead of blk.i.attn_qkv. An error for a model whose q, k, v are separate. */
    int split_qkv;
    int zstd; /* lmq_convert_write: zstd-compressed tensor blobs */
    /* lmq_convert_write: called after each tensor is written (may be NULL) */
    void (*progress)(void *ctx, int done, int total, const char *name);
    void *progress_ctx;
} lmq_convert_opts;

/* Plans the import into out (initialised here; freed again on failure): everything but the
 * tensors' values, which are checked finite as they are produced. opts may be NULL. */
lmq_code lmq_convert_plan(const char *src, const lmq_convert_opts *opts, lmq_plan *out, lmq_err *err);
/* The artefact at out_path (written atomically; refused when it names an input, lmq_output_check)
 * from src, tensor by tensor, memory holding about one: what lmq convert does. A GGUF file keeps
 * its encodings (convert/gguf.h; opts' tokenizer and split_qkv do not apply to it). summary
 * (initialised here; lmq_plan_free it after a success) receives the model as written. */
lmq_code lmq_convert_write(const char *src, const char *out_path, const lmq_convert_opts *opts, lmq_plan *summary,
                           lmq_err *err);
/* The plan with every tensor loaded: fills out (initialised here; freed again on failure). */
lmq_code lmq_convert(const char *src, const lmq_convert_opts *opts, lmq_model *out, lmq_err *err);

/* The Hugging Face importer behind lmq_convert_plan, for a directory, a .safetensors file or an
 * index.json. */
lmq_code lmq_convert_hf(const char *src, const lmq_convert_opts *opts, lmq_plan *out, lmq_err *err);

#endif
