#!/usr/bin/env bash
# lmq export --to compressed-tensors end to end: a quantised artefact becomes a checkpoint
# directory (weights, config.json with its quantization_config, the carried tokenizer); a float
# export converts back to the same model (same perplexity to the last digit); what the format
# cannot hold, and bad usage, fail with the documented status and write nothing.
. "$(dirname "$0")/lib.bash"
need_fixtures

"$LMQ" convert "$FIX/stories260K-hf" -o "$tmp/s.lmq" >/dev/null
"$LMQ" quantize "$tmp/s.lmq" --recipe recipes/int4-g32.yaml -o "$tmp/q.lmq" >/dev/null
run 0 "$LMQ" export "$tmp/q.lmq" --to compressed-tensors -o "$tmp/ct"
has "35 quantised Linear modules (pack-quantized, 1 config group), 12 float tensors"
for f in model.safetensors config.json tokenizer.bin; do [ -s "$tmp/ct/$f" ] || fail "ct/$f missing"; done
for key in '"quant_method": "compressed-tensors"' '"format": "pack-quantized"' '"group_size": 32' \
    '"LlamaForCausalLM"' '"num_key_value_heads": 4'; do
    grep -qF -- "$key" "$tmp/ct/config.json" || fail "config.json lacks $key"
done
grep -qF '"model.layers.0.self_attn.q_proj.weight_packed":{"dtype":"I32","shape":[64,8]' "$tmp/ct/model.safetensors" ||
    fail "q_proj.weight_packed is not I32 [64, 8]"

# W8A8 is int-quantized with dynamic per-token activations.
"$LMQ" quantize "$tmp/s.lmq" --recipe recipes/w8a8.yaml -o "$tmp/w8a8.lmq" >/dev/null
run 0 "$LMQ" export "$tmp/w8a8.lmq" --to compressed-tensors -o "$tmp/w8a8"
has "(int-quantized, 1 config group)"
grep -qF '"dynamic": true' "$tmp/w8a8/config.json" || fail "w8a8: activations not dynamic"

# A float export is a plain HF checkpoint: converting it back gives the same model.
"$LMQ" quantize "$tmp/s.lmq" --recipe recipes/fp16.yaml -o "$tmp/h.lmq" >/dev/null
run 0 "$LMQ" export "$tmp/h.lmq" --to compressed-tensors -o "$tmp/hf"
has "(no quantization_config, 0 config groups)"
grep -qF quantization_config "$tmp/hf/config.json" && fail "float export has a quantization_config"
"$LMQ" convert "$tmp/hf" -o "$tmp/back.lmq" --tokenizer "$tmp/hf/tokenizer.bin" >/dev/null
head -c 30000 "$FIX/text/tinystories-valid.txt" >"$tmp/text.txt" # a part: the comparison needs no more
"$LMQ" verify "$tmp/h.lmq" "$tmp/back.lmq" --text "$tmp/text.txt" --ctx 64 --json "$tmp/v.json" >"$tmp/v"
python3 - "$tmp/v.json" <<'PY' || { cat "$tmp/v" >&2; fail "the round trip changed the model"; }
import json, sys
ref, back = json.load(open(sys.argv[1]))["rows"]
assert back["ppl"] == ref["ppl"] and back["kl_mean"] == 0 and back["top1"] == 1, (ref["ppl"], back["ppl"], back["kl_mean"])
PY

# Refused: a quantised embedding (compressed-tensors quantises Linear modules only).
"$LMQ" quantize "$tmp/s.lmq" --recipe recipes/emb-int4-g32.yaml -o "$tmp/e.lmq" >/dev/null
run 1 "$LMQ" export "$tmp/e.lmq" --to compressed-tensors -o "$tmp/e"
has "tok_embd.weight"
[ -e "$tmp/e/model.safetensors" ] && fail "a refused export left model.safetensors"

# Usage: no target, an unknown one, no output.
run 2 "$LMQ" export "$tmp/q.lmq" -o "$tmp/x"
run 2 "$LMQ" export "$tmp/q.lmq" --to onnx -o "$tmp/x"
has "unknown target 'onnx'"
run 2 "$LMQ" export "$tmp/q.lmq" --to compressed-tensors
run 0 "$LMQ" export --help
has "compressed-tensors"
echo "export_ct.sh: ok"
