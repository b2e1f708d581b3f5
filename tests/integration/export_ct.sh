#!/usr/bin/env bash
# lmq export --to compressed-tensors end to end: a quantised artefact becomes a checkpoint
# directory (weights, config.json with its quantization_config, the carried tokenizer); a float
# export converts back to the same model (same perplexity to the last digit); what the format
# cannot hold, and bad usage, fail with the documented status and write nothing.
. "$(dirname "$0")/lib.bash"
need_fixtures

"$LMQ" convert "$FIX/stories260K-hf" -o "$tmp/s.lmq" >/dev/null
# int4 in groups of 32, but ffn_down per channel: its 172 columns are not whole groups of 32.
cat >"$tmp/g32.yaml" <<'Y'
name: g32
rules:
  - match: "blk.*.ffn_down.weight"
    scheme: int4
    granularity: channel
  - match: ["blk.*.attn_*.weight", "blk.*.ffn_*.weight"]
    scheme: int4
    granularity: group
    group: 32
Y
"$LMQ" quantize "$tmp/s.lmq" --recipe "$tmp/g32.yaml" -o "$tmp/q.lmq" >/dev/null
run 0 "$LMQ" export "$tmp/q.lmq" --to compressed-tensors -o "$tmp/ct"
has "35 quantised Linear modules (pack-quantized, 2 config groups), 12 float tensors"
for f in model.safetensors config.json tokenizer.bin tokenizer.json tokenizer_config.json special_tokens_map.json; do
    [ -s "$tmp/ct/$f" ] || fail "ct/$f missing"
done
for key in '"quant_method": "compressed-tensors"' '"format": "pack-quantized"' '"group_size": 32' \
    '"LlamaForCausalLM"' '"num_key_value_heads": 4' '"version": "' '"sparsity_config": {}' \
    '"transform_config": {}' '"global_compression_ratio": 3.'; do
    grep -qF -- "$key" "$tmp/ct/config.json" || fail "config.json lacks $key"
done
grep -qF '"model.layers.0.self_attn.q_proj.weight_packed":{"dtype":"I32","shape":[64,8]' "$tmp/ct/model.safetensors" ||
    fail "q_proj.weight_packed is not I32 [64, 8]"

# W8A8 is int-quantized with dynamic per-token activations.
"$LMQ" quantize "$tmp/s.lmq" --recipe recipes/w8a8.yaml -o "$tmp/w8a8.lmq" >/dev/null
run 0 "$LMQ" export "$tmp/w8a8.lmq" --to compressed-tensors -o "$tmp/w8a8"
has "(int-quantized, 1 config group)"
grep -qF '"dynamic": true' "$tmp/w8a8/config.json" || fail "w8a8: activations not dynamic"

# W8A8 attention beside weight-only int3 MLPs: mixed-precision, a format per config group (int3
# is naive-quantized: one int8 a weight).
printf 'name: mix\nrules:\n  - match: "blk.*.attn_*"\n    scheme: W8A8\n  - match: "blk.*.ffn_*"\n    scheme: int3\n    granularity: channel\n' >"$tmp/mix.yaml"
"$LMQ" quantize "$tmp/s.lmq" --recipe "$tmp/mix.yaml" -o "$tmp/mix.lmq" >/dev/null
run 0 "$LMQ" export "$tmp/mix.lmq" --to compressed-tensors -o "$tmp/mix"
has "(mixed-precision, 2 config groups)"
for key in '"format": "mixed-precision"' '"format": "int-quantized"' '"format": "naive-quantized"'; do
    grep -qF -- "$key" "$tmp/mix/config.json" || fail "mix: config.json lacks $key"
done
grep -qF '"model.layers.0.mlp.down_proj.weight":{"dtype":"I8","shape":[64,172]' "$tmp/mix/model.safetensors" ||
    fail "mix: int3 down_proj is not I8 [64, 172]"

# GPTQ with act-order (static groups) is what compressed-tensors calls actorder "weight".
"$LMQ" calibrate "$tmp/s.lmq" --text "$FIX/text/tinystories-valid.txt" --windows 2 -o "$tmp/stats.lmq" >/dev/null
printf 'name: ao\nrules:\n  - match: "blk.*"\n    scheme: int8\n    granularity: channel\n    method: {name: gptq, act_order: true}\n' >"$tmp/ao.yaml"
"$LMQ" quantize "$tmp/s.lmq" --recipe "$tmp/ao.yaml" --stats "$tmp/stats.lmq" -o "$tmp/ao.lmq" >/dev/null
run 0 "$LMQ" export "$tmp/ao.lmq" --to compressed-tensors -o "$tmp/ao"
grep -qF '"actorder": "weight"' "$tmp/ao/config.json" || fail "act-order: actorder is not weight"
grep -qF '"actorder": null' "$tmp/ct/config.json" || fail "round to nearest: actorder is not null"

# A group that does not divide its row is refused, the tensor named.
"$LMQ" quantize "$tmp/s.lmq" --recipe recipes/int4-g32.yaml -o "$tmp/g.lmq" >/dev/null
run 1 "$LMQ" export "$tmp/g.lmq" --to compressed-tensors -o "$tmp/g"
has "tensor blk.0.ffn_down.weight is int4 g32: its 172 columns are not a whole number of groups of 32"
[ -e "$tmp/g/model.safetensors" ] && fail "a refused export left model.safetensors"

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

# The llama2.c vocabulary's tokenizer.json (what vLLM reads), read back by lmq, gives the
# tokenizer.bin's ids.
"$LMQ" convert "$tmp/hf" -o "$tmp/back-json.lmq" --tokenizer "$tmp/hf/tokenizer.json" >/dev/null
"$LMQ" tokenize "$tmp/h.lmq" --text "$tmp/text.txt" --json >"$tmp/ids-bin"
"$LMQ" tokenize "$tmp/back-json.lmq" --text "$tmp/text.txt" --json >"$tmp/ids-json"
[ -s "$tmp/ids-bin" ] && cmp -s "$tmp/ids-bin" "$tmp/ids-json" || fail "tokenizer.json's ids differ from tokenizer.bin's"

# The independent reader (tests/ct_reader.py, the format's description alone): each export's
# config.json passes the schema, and every tensor, unpacked and dequantised, equals bit for bit
# lmq's own decoding of the same artefact (decoded to fp32 by --requantize, exported as floats).
printf 'name: f32\nrules:\n  - match: "*"\n    scheme: fp32\n' >"$tmp/f32.yaml"
reader() { # ARTEFACT EXPORT_DIR: the export read against lmq's decoding of ARTEFACT
    "$LMQ" quantize "$1" --recipe "$tmp/f32.yaml" --requantize -o "$tmp/ref.lmq" >/dev/null 2>&1
    rm -rf "$tmp/ref"
    "$LMQ" export "$tmp/ref.lmq" --to compressed-tensors -o "$tmp/ref" >/dev/null
    python3 tests/ct_reader.py "$2" "$tmp/ref" >"$tmp/reader" 2>&1 || { cat "$tmp/reader" >&2; fail "reader: $2"; }
}
sed 's/^name: g32/name: g32a/; s/    group: 32/    group: 32\n    symmetric: false/; s/    granularity: channel/    granularity: channel\n    symmetric: false/' \
    "$tmp/g32.yaml" >"$tmp/g32a.yaml"
printf 'name: fp8d\nrules:\n  - match: "blk.*"\n    scheme: FP8_DYNAMIC\n' >"$tmp/fp8d.yaml"
printf 'name: fp8\nrules:\n  - match: "blk.*"\n    scheme: FP8\n' >"$tmp/fp8.yaml"
printf 'name: h\nrules:\n  - match: "blk.*.attn_*.weight"\n    scheme: int4\n    granularity: group\n    group: 32\n  - match: "*"\n    scheme: fp16\n' >"$tmp/h4.yaml"
for r in g32a fp8 fp8d h4 recipes/int8-channel.yaml recipes/int8-tensor.yaml; do
    y=$r; [ -e "$y" ] || y="$tmp/$r.yaml"; n=$(basename "$r" .yaml)
    "$LMQ" quantize "$tmp/s.lmq" --recipe "$y" -o "$tmp/r-$n.lmq" >/dev/null
    "$LMQ" export "$tmp/r-$n.lmq" --to compressed-tensors -o "$tmp/r-$n" >/dev/null
    reader "$tmp/r-$n.lmq" "$tmp/r-$n"
done
grep -qF '"format": "float-quantized"' "$tmp/r-fp8d/config.json" || fail "fp8: not float-quantized"
python3 - "$tmp" <<'PY2' || fail "fp8 / torch_dtype config"
import json, sys
d = sys.argv[1]
g = json.load(open(d + "/r-fp8d/config.json"))["quantization_config"]["config_groups"]["group_0"]
assert g["weights"]["type"] == "float" and g["weights"]["strategy"] == "channel" and not g["weights"]["dynamic"], g
a = g["input_activations"]
assert (a["type"], a["strategy"], a["dynamic"], a["num_bits"]) == ("float", "token", True, 8), a
assert json.load(open(d + "/r-fp8/config.json"))["quantization_config"]["config_groups"]["group_0"]["input_activations"] is None
assert json.load(open(d + "/r-h4/config.json"))["torch_dtype"] == "float16"  # every float tensor fp16
assert json.load(open(d + "/r-fp8/config.json"))["torch_dtype"] == "float32"
PY2
grep -qF '"model.layers.0.self_attn.q_proj.weight_scale":{"dtype":"F16"' "$tmp/r-h4/model.safetensors" ||
    fail "float16 model: scales not F16"
grep -qF '"model.norm.weight":{"dtype":"F16"' "$tmp/r-h4/model.safetensors" || fail "float16 model: norm not F16"
reader "$tmp/q.lmq" "$tmp/ct"
reader "$tmp/w8a8.lmq" "$tmp/w8a8"
reader "$tmp/ao.lmq" "$tmp/ao"
reader "$tmp/mix.lmq" "$tmp/mix"
grep -q "35 quantised modules .* format mixed-precision" "$tmp/reader" || fail "mix: $(cat "$tmp/reader")"
# GPT-2: int4 in groups of 128 (Conv1D modules written [out, in]), symmetric and not.
"$LMQ" convert "$FIX/sotu-gpt2" -o "$tmp/g.lmq" >/dev/null
for sym in true false; do
    printf 'name: g128\nrules:\n  - match: "blk.*"\n    scheme: int4\n    granularity: group\n    group: 128\n    symmetric: %s\n' $sym >"$tmp/g128.yaml"
    "$LMQ" quantize "$tmp/g.lmq" --recipe "$tmp/g128.yaml" -o "$tmp/g128-$sym.lmq" >/dev/null
    "$LMQ" export "$tmp/g128-$sym.lmq" --to compressed-tensors -o "$tmp/g128-$sym" >/dev/null
    reader "$tmp/g128-$sym.lmq" "$tmp/g128-$sym"
done
# A llama2.c checkpoint (interleaved rope: q/k rows permuted back to HF's order on both sides).
"$LMQ" convert "$FIX/stories260K/stories260K.bin" --tokenizer "$FIX/stories260K/tok512.bin" -o "$tmp/l.lmq" >/dev/null
"$LMQ" quantize "$tmp/l.lmq" --recipe "$tmp/fp8d.yaml" -o "$tmp/l8.lmq" >/dev/null
"$LMQ" export "$tmp/l8.lmq" --to compressed-tensors -o "$tmp/l8" >/dev/null
reader "$tmp/l8.lmq" "$tmp/l8"
# The reader can fail: an export read against another artefact's decoding.
"$LMQ" quantize "$tmp/r-fp8d.lmq" --recipe "$tmp/f32.yaml" --requantize -o "$tmp/x.lmq" >/dev/null 2>&1
rm -rf "$tmp/ref"; "$LMQ" export "$tmp/x.lmq" --to compressed-tensors -o "$tmp/ref" >/dev/null
python3 tests/ct_reader.py "$tmp/r-int8-channel" "$tmp/ref" >/dev/null 2>"$tmp/reader" && fail "the reader passed the wrong weights"
grep -q "lmq " "$tmp/reader" || fail "the reader's mismatch names no value: $(cat "$tmp/reader")"

# Every shipped recipe on sotu-llama256 (every row a whole number of groups of 32 or 128): its
# artefact exports and reads back through the reader, or, for a quantised embedding (not a Linear
# module), the export is refused naming it. The optimised build only: the cases above take the
# same paths under the sanitizers.
if [ -z "${LMQ_SAN:-}" ]; then
    "$LMQ" convert "$FIX/sotu-llama256/model.bin" -o "$tmp/l256.lmq" >/dev/null
    "$LMQ" calibrate "$tmp/l256.lmq" --text "$FIX/text/sotu-eval.txt" --windows 2 -o "$tmp/l256-stats.lmq" >/dev/null
    for y in recipes/*.yaml; do
        n=$(basename "$y" .yaml) stats=()
        grep -qE "gptq|awq|smoothquant" "$y" && stats=(--stats "$tmp/l256-stats.lmq")
        "$LMQ" quantize "$tmp/l256.lmq" --recipe "$y" "${stats[@]}" -o "$tmp/all-$n.lmq" >/dev/null 2>"$tmp/err" ||
            fail "$y: $(cat "$tmp/err")"
        if "$LMQ" export "$tmp/all-$n.lmq" --to compressed-tensors -o "$tmp/all-$n" >/dev/null 2>"$tmp/err"; then
            reader "$tmp/all-$n.lmq" "$tmp/all-$n"
        else
            grep -qE "tensor tok_embd.weight is .*: compressed-tensors quantises Linear modules only|with int8 activations per block: compressed-tensors has no such strategy" "$tmp/err" ||
                fail "$y: $(cat "$tmp/err")"
        fi
        rm -rf "$tmp/all-$n" "$tmp/all-$n.lmq"
    done
fi

# Refused: a quantised embedding (compressed-tensors quantises Linear modules only).
"$LMQ" quantize "$tmp/s.lmq" --recipe recipes/emb-int4-g32.yaml -o "$tmp/e.lmq" >/dev/null
run 1 "$LMQ" export "$tmp/e.lmq" --to compressed-tensors -o "$tmp/e"
has "tok_embd.weight"
[ -e "$tmp/e" ] && fail "a refused export left its directory"
ls "$tmp" | grep -q '\.tmp\.' && fail "a refused export left a temporary directory"

# The directory is written whole, then renamed into place: a full directory (an earlier export)
# is refused without --force, untouched; --force replaces it whole (an old export's other files
# do not stay); a link, or a directory that holds the artefact, is refused.
echo stale >"$tmp/ct/vocab.json"
sum_before=$(cat "$tmp/ct/"* | sha256sum)
run 1 "$LMQ" export "$tmp/q.lmq" --to compressed-tensors -o "$tmp/ct"
has "not empty (a previous export?): --force replaces the directory whole"
[ "$(cat "$tmp/ct/"* | sha256sum)" = "$sum_before" ] || fail "a refused export changed the directory"
run 0 "$LMQ" export "$tmp/q.lmq" --to compressed-tensors -o "$tmp/ct" --force
[ -e "$tmp/ct/vocab.json" ] && fail "--force kept the old export's vocab.json"
[ "$(ls "$tmp/ct" | sort | tr '\n' ' ')" = "config.json model.safetensors special_tokens_map.json tokenizer.bin tokenizer.json tokenizer_config.json " ] ||
    fail "after --force: $(ls "$tmp/ct")"
ls "$tmp" | grep -q '\.\(tmp\|old\)\.' && fail "--force left a temporary directory"
ln -s "$tmp/ct" "$tmp/link"
run 1 "$LMQ" export "$tmp/q.lmq" --to compressed-tensors -o "$tmp/link" --force
has "is a symbolic link"
run 1 "$LMQ" export "$tmp/q.lmq" --to compressed-tensors -o "$tmp" --force
has "holds $tmp/q.lmq, the artefact being exported"
mkdir "$tmp/empty"
run 0 "$LMQ" export "$tmp/q.lmq" --to compressed-tensors -o "$tmp/empty"
run 2 "$LMQ" export "$tmp/q.lmq" --to gguf -o "$tmp/x.gguf" --force
has "--force does not apply to gguf"

# Usage: no target, an unknown one, no output.
run 2 "$LMQ" export "$tmp/q.lmq" -o "$tmp/x"
run 2 "$LMQ" export "$tmp/q.lmq" --to onnx -o "$tmp/x"
has "unknown target 'onnx'"
run 2 "$LMQ" export "$tmp/q.lmq" --to compressed-tensors
run 0 "$LMQ" export --help
has "compressed-tensors"
echo "export_ct.sh: ok"
