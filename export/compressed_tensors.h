/* compressed-tensors export: an lmq artefact written as a Hugging Face checkpoint directory in
 * the layout of neuralmagic/compressed-tensors (what llm-compressor writes and vLLM loads):
 *
 *   DIR/model.safetensors  HF tensor names; float tensors in their stored dtype (F32, F16, BF16;
 *                          GPT-2 Conv1D weights back in HF's [in, out]); per quantised Linear
 *                          module M (a weight in [out, in]):
 *     pack-quantized (weight-only int8/int4/int3/int2):
 *       M.weight_packed      I32 [out, ceil(in / p)], p = 32 / bits codes per word, code i of a
 *                            word in bits [bits·i, bits·(i+1)), stored unsigned: q + 2^(bits-1)
 *                            for the signed code q (exactly lmq's stored code), zero padding
 *       M.weight_scale       F16 [out, groups] (group), [out, 1] (channel), [1] (tensor)
 *       M.weight_zero_point  I32 [ceil(out / p), groups] (asymmetric only): zero points packed
 *                            the same way along the rows, stored z + 2^(bits-1) for the signed z
 *       M.weight_shape       I64 [2] = [out, in]
 *     int-quantized (W8A8: int8 weights, dynamic int8 activations) and naive-quantized
 *     (weight-only int3/int2; upstream packs 4 and 8 bits only):
 *       M.weight             I8 [out, in] (two's complement q), M.weight_scale as above
 *       M.weight_zero_point  I8 [out, groups] (asymmetric only): the signed z
 *   DIR/config.json        the HF architecture and hyper-parameters, and quantization_config:
 *                          quant_method "compressed-tensors", format (the groups' one, or
 *                          "mixed-precision"), config_groups (one per distinct scheme, each with
 *                          its format and actorder "weight" after GPTQ's act-order: targets
 *                          ["Linear"] when one scheme covers every quantised module, else the
 *                          module names), ignore (Linear modules kept float, lm_head when tied
 *                          to the embedding), global_compression_ratio (the quantised weights at
 *                          16 bits over the bits stored for them), sparsity_config and
 *                          transform_config ({}: none) and version (CT_VERSION)
 *   DIR/<carried files>    the tokenizer files the artefact carries, as carried
 *
 * Dequantisation in that format is w = (q - z)·s with signed q and z (z = 0 when symmetric):
 * lmq's (code - z)·s with both offset by 2^(bits-1), so every weight is exactly lmq's.
 * Sources (read, not copied): compressed_tensors/compressors/quantized_compressors/
 * pack_quantized.py (pack_to_int32, compression_param_info, compress_weight: weight_shape is
 * torch.tensor(shape), int64), naive_quantized.py (int-quantized stores "weight" in the
 * quantised dtype), llm-compressor's infer_quantization_format (W4A16 / W8A16 int →
 * pack-quantized, W8A8 int → int-quantized).
 *
 * Refused (LMQ_E_UNSUPPORTED, naming the tensor) where the format cannot hold lmq's grid
 * exactly: a quantised tensor that is not a Linear weight (embeddings), fp8, asymmetric
 * tensor-granularity or W8A8, an asymmetric zero point outside 0 .. 2^bits - 1 (lmq stores
 * int16), activation quantisation on a float weight, groups that do not divide their row (the
 * format defines no short last group; vLLM's kernels need whole ones), and GPT-2 artefacts with split q/k/v (HF's GPT-2 has one c_attn). Llama artefacts in llama2.c's
 * interleaved rope order have their q/k rows permuted back to HF's rotate_half order (whole rows,
 * with their scales: lossless). */
#ifndef LMQ_EXPORT_CT_H
#define LMQ_EXPORT_CT_H

#include "common/err.h"

/* What an export wrote. */
typedef struct {
    int quantized;      /* Linear modules written quantised */
    int plain;          /* tensors written as floats */
    int groups;         /* config groups */
    const char *format; /* "pack-quantized", "int-quantized", or NULL when nothing is quantised */
} ct_summary;

/* Writes the artefact at in_path as directory out_dir, whole: into a new directory beside it,
 * renamed into place when everything is written (a failed export leaves nothing). out_dir may be
 * absent or an empty directory; a directory with files in it (an earlier export) only with force,
 * which replaces it whole (and is refused when it holds in_path); never a link. sum may be NULL. */
lmq_code ct_export(const char *in_path, const char *out_dir, int force, ct_summary *sum, lmq_err *err);

#endif
