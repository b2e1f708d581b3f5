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
 * Supported Hugging Face architectures (model_type): GPT2LMHeadModel (gpt2), LlamaForCausalLM
 * (llama), MistralForCausalLM (mistral), Qwen2ForCausalLM (qwen2: q/k/v biases) and
 * Phi3ForCausalLM (phi3: fused qkv_proj / gate_up_proj split by rows). */
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

/* The import's name tables read backwards, for writing Hugging Face checkpoints (export/):
 * family's architecture ("GPT2LMHeadModel"), with its model_type in *model_type when not NULL;
 * NULL for an unknown family. */
const char *lmq_hf_architecture(lmq_family family, const char **model_type);
/* The Hugging Face checkpoint name of canonical tensor canon ("model.layers.0.mlp.up_proj.weight";
 * lm_head unprefixed), with *transpose = 1 when HF stores it [in, out] (GPT-2 Conv1D).
 * LMQ_E_UNSUPPORTED, naming the tensor, when the family has none (GPT-2's split attn_q). */
lmq_code lmq_hf_name(lmq_family family, const char *canon, char *out, size_t cap, int *transpose, lmq_err *err);

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
