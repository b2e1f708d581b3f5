#!/usr/bin/env bash
# llm-compressor recipes, read as they are, on stories260K: each gives the same artefact as the
# native lmq recipe that says the same (lmq diff finds only the recorded recipe text and its
# checksum); --explain prints what each became.
. "$(dirname "$0")/lib.bash"
need_fixtures

"$LMQ" convert "$FIX/stories260K/stories260K.bin" -o "$tmp/s.lmq" >/dev/null
"$LMQ" calibrate "$tmp/s.lmq" --text "$FIX/text/tinystories-valid.txt" --windows 4 -o "$tmp/stats.lmq" >/dev/null
mkdir "$tmp/llmc" "$tmp/lmq"
L='["blk.*.attn_*.weight", "blk.*.ffn_*.weight"]'

cat >"$tmp/llmc/w4a16-gptq.yaml" <<'Y'
quant_stage:
  quant_modifiers:
    GPTQModifier:
      targets: Linear
      scheme: W4A16
      ignore: [lm_head]
Y
printf 'name: w4a16-gptq\nignore: output.weight\nrules:\n  - match: %s\n    scheme: W4A16\n    method: gptq\n' \
    "$L" >"$tmp/lmq/w4a16-gptq.yaml"

cat >"$tmp/llmc/w8a8-sq.yaml" <<'Y'
quant_stage:
  quant_modifiers:
    SmoothQuantModifier:
      smoothing_strength: 0.8
    GPTQModifier:
      targets: ["Linear"]
      scheme: W8A8
      ignore: ["lm_head"]
Y
printf 'name: w8a8-sq\nsmoothquant: {alpha: 0.8}\nignore: output.weight\nrules:\n  - match: %s\n    scheme: W8A8\n    method: gptq\n' \
    "$L" >"$tmp/lmq/w8a8-sq.yaml"

cat >"$tmp/llmc/awq-asym.yaml" <<'Y'
quant_stage:
  quant_modifiers:
    AWQModifier:
      ignore: [lm_head]
      scheme: W4A16_ASYM
      targets: [Linear]
Y
printf 'name: awq-asym\nignore: output.weight\nrules:\n  - match: %s\n    scheme: W4A16_ASYM\n    method: awq\n' \
    "$L" >"$tmp/lmq/awq-asym.yaml"

cat >"$tmp/llmc/mixed.yaml" <<'Y'
quant_stage:
  quant_modifiers:
    QuantizationModifier:
      ignore: ["lm_head"]
      config_groups:
        group_0:
          targets: ["re:.*self_attn.*"]
          weights: {num_bits: 8, type: int, symmetric: true, strategy: channel}
          input_activations: {num_bits: 8, type: int, symmetric: true, strategy: token, dynamic: true}
        group_1:
          targets: ["re:.*mlp.*"]
          weights: {num_bits: 4, type: int, symmetric: false, strategy: group, group_size: 32}
Y
cat >"$tmp/lmq/mixed.yaml" <<'Y'
name: mixed
ignore: output.weight
rules:
  - match: ["blk.*.attn_q.weight", "blk.*.attn_k.weight", "blk.*.attn_v.weight", "blk.*.attn_out.weight"]
    scheme: W8A8
  - match: ["blk.*.ffn_gate.weight", "blk.*.ffn_up.weight", "blk.*.ffn_down.weight"]
    scheme: int4
    granularity: group
    group: 32
    symmetric: false
Y

cat >"$tmp/llmc/fp8.yaml" <<'Y'
quant_stage:
  quant_modifiers:
    QuantizationModifier:
      targets: Linear
      scheme: FP8
      ignore: ["lm_head"]
Y
printf 'name: fp8\nignore: output.weight\nrules:\n  - match: %s\n    scheme: FP8\n' "$L" >"$tmp/lmq/fp8.yaml"

# llm-compressor's examples/quantization_w8a8_fp8: fp8 weights per channel, fp8 activations per
# token, dynamic; natively the encoding and the activations spelt out.
cat >"$tmp/llmc/fp8-dyn.yaml" <<'Y'
quant_stage:
  quant_modifiers:
    QuantizationModifier:
      targets: Linear
      scheme: FP8_DYNAMIC
      ignore: ["lm_head"]
Y
printf 'name: fp8-dyn\nignore: output.weight\nrules:\n  - match: %s\n    scheme: fp8_e4m3\n    granularity: channel\n    activations: {scheme: fp8_e4m3, granularity: token}\n' "$L" >"$tmp/lmq/fp8-dyn.yaml"

for r in w4a16-gptq w8a8-sq awq-asym mixed fp8 fp8-dyn; do
    for side in llmc lmq; do
        "$LMQ" quantize "$tmp/s.lmq" --recipe "$tmp/$side/$r.yaml" --stats "$tmp/stats.lmq" -o "$tmp/$side-$r.lmq" \
            >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; fail "$side/$r"; }
    done
    st=0; "$LMQ" diff "$tmp/llmc-$r.lmq" "$tmp/lmq-$r.lmq" >"$tmp/diff" || st=$?
    [ "$st" = 1 ] || fail "$r: diff exit $st"
    grep -v '^recipe\.text: \|^recipe\.checksum: \|^diff: .* differ: 2 differences$' "$tmp/diff" >"$tmp/rest" || true
    [ ! -s "$tmp/rest" ] || { cat "$tmp/diff" >&2; fail "$r: the artefacts differ beyond the recipe text"; }
done

run 0 "$LMQ" quantize "$tmp/s.lmq" --recipe "$tmp/llmc/mixed.yaml" --explain
has "translated from llm-compressor:"
has "llm-compressor QuantizationModifier config_groups.group_1 -> rule: match re:.*mlp.*, scheme int4 g32 asym, method rtn"
has "llm-compressor QuantizationModifier ignore -> ignore: lm_head (output.weight)"
has "rules[0].match 're:.*self_attn.*': 20 tensors"

# What lmq cannot honour: named at its line, with what lmq would do instead.
run 0 "$LMQ" quantize "$tmp/s.lmq" --recipe "$tmp/llmc/fp8.yaml" --explain
has "scheme fp8_e4m3 per-channel, weight-only, method rtn"
has "fp8_e4m3 per-channel, weight-only (fp32 activations)"
run 0 "$LMQ" quantize "$tmp/s.lmq" --recipe "$tmp/llmc/fp8-dyn.yaml" --explain
has "scheme fp8_e4m3 per-channel, activations fp8_e4m3 per token, dynamic, method rtn"
has "fp8_e4m3 per-channel, a fp8_e4m3 token"
"$LMQ" manifest "$tmp/llmc-fp8-dyn.lmq" >"$tmp/man"
grep -q "scheme: fp8_e4m3" "$tmp/man" && grep -q "granularity: token" "$tmp/man" || fail "fp8-dyn: the manifest lacks the activations"
"$LMQ" audit "$tmp/llmc-fp8-dyn.lmq" >"$tmp/audit" || { cat "$tmp/audit" >&2; fail "fp8-dyn: audit"; }
# inspect and verify's scheme column say it too, from the same description.
run 0 "$LMQ" inspect "$tmp/llmc-fp8.lmq"
has "fp8_e4m3 per-channel, weight-only (fp32 activations)"
head -c 3000 "$FIX/text/tinystories-valid.txt" >"$tmp/few.txt"
run 0 "$LMQ" verify "$tmp/s.lmq" "$tmp/llmc-fp8.lmq" "$tmp/llmc-fp8-dyn.lmq" --text "$tmp/few.txt" --ctx 64
has "fp8_e4m3 per-channel + weight-only (fp32 activations)"
has "fp8_e4m3 per-channel + a fp8_e4m3 token"

# What lmq cannot honour: named at its line, with what lmq would do instead.
printf 'quant_stage:\n  quant_modifiers:\n    QuantizationModifier:\n      scheme: FP8_BLOCK\n' >"$tmp/blk.yaml"
run 1 "$LMQ" quantize "$tmp/s.lmq" --recipe "$tmp/blk.yaml" -o "$tmp/blk.lmq"
has "blk.yaml:4: quant_stage.quant_modifiers.QuantizationModifier.scheme: preset FP8_BLOCK: lmq's fp8 has one scale per output row, not 128x128 blocks: FP8_DYNAMIC gives"
[ ! -e "$tmp/blk.lmq" ] || fail "FP8_BLOCK: an artefact was left"
echo "$SCRIPT: ok"
