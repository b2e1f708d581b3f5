#!/usr/bin/env bash
# lmq quantize on an already quantised artefact: refused without --requantize (nothing written),
# and with it the manifest's lineage names the input (its file checksum read from the footer, its
# recipe, schemes and bits per weight); an output equal to the input is refused. --explain
# prints the plan (schemes, deciding rule or ignore by file:line, Hugging Face names resolved)
# and writes nothing. Runs on the demo model in the repository (no fixtures needed).
. "$(dirname "$0")/lib.bash"

"$LMQ" convert demo/sotu-gpt2 -o "$tmp/fp32.lmq" >/dev/null
"$LMQ" quantize "$tmp/fp32.lmq" --recipe recipes/int8-channel.yaml -o "$tmp/i8.lmq" >/dev/null

# Already quantised: refused, exit 1, nothing written (not even a temporary file).
run 1 "$LMQ" quantize "$tmp/i8.lmq" --recipe recipes/int4-g32.yaml -o "$tmp/re.lmq"
has "$tmp/i8.lmq: already quantised (tensor blk.0.attn_qkv.weight is int8 per-channel)"
has "--requantize"
[ -z "$(ls "$tmp" | grep '^re\.lmq')" ] || fail "a refused requantize left $(ls "$tmp")"
# The same through the calibrated path (--stats), refused before any calibrated work.
head -c 3000 demo/sotu-eval.txt >"$tmp/calib.txt"
"$LMQ" calibrate "$tmp/i8.lmq" --text "$tmp/calib.txt" --windows 1 --ctx 32 -o "$tmp/stats.lmq" >/dev/null
run 1 "$LMQ" quantize "$tmp/i8.lmq" --recipe recipes/gptq-int4-g128.yaml --stats "$tmp/stats.lmq" -o "$tmp/re.lmq"
has "$tmp/i8.lmq: already quantised (tensor blk.0.attn_qkv.weight is int8 per-channel)"
[ ! -e "$tmp/re.lmq" ] || fail "a refused calibrated requantize wrote its output"
# The output may not be the input, with or without --requantize.
run 1 "$LMQ" quantize "$tmp/i8.lmq" --recipe recipes/int4-g32.yaml -o "$tmp/i8.lmq" --requantize
has "same file as the input"

# With --requantize: lineage recorded, values independent of the writer (inspect's file checksum,
# the recipe file's name line, the input manifest's own totals).
run 0 "$LMQ" quantize "$tmp/i8.lmq" --recipe recipes/int4-g32.yaml -o "$tmp/re.lmq" --requantize
run 0 "$LMQ" manifest "$tmp/i8.lmq"
cp "$tmp/out" "$tmp/i8.yaml"
run 0 "$LMQ" manifest "$tmp/re.lmq"
cp "$tmp/out" "$tmp/re.yaml"
lineage() { awk '/^lineage:/ { on = 1; next } /^[a-z]/ { on = 0 } on' "$tmp/re.yaml"; }
lineage >"$tmp/out"
has "path: \"$tmp/i8.lmq\""
has "recipe: \"$(sed -n 's/^name: *//p' recipes/int8-channel.yaml)\""
has 'schemes: "fp32, int8 per-channel"'
# The footer's file checksum (formats/CONTAINER.md: the u64 at size - 16, little-endian).
has "file_checksum: \"$(tail -c 16 "$tmp/i8.lmq" | head -c 8 | od -An -tx8 | tr -d ' ')\""
want=$(awk '/^recipe:/ { on = 1 } on && /checksum:/ { print $2; exit }' "$tmp/i8.yaml")
has "recipe_checksum: $want"
want=$(awk '/^totals:/ { on = 1 } on && /linear_bpw:/ { print $2; exit }' "$tmp/i8.yaml")
has "linear_bpw: $want"
run 0 "$LMQ" audit "$tmp/re.lmq"
# A plain run from fp32 has no lineage.
grep -q '^lineage:' "$tmp/i8.yaml" && fail "a quantize run from fp32 recorded lineage"

# --explain: patterns with their resolution and match counts, then every tensor; nothing written.
cat >"$tmp/hf.yaml" <<'YAML'
name: hf
rules:
  - match: transformer.h.*.attn.c_attn
    scheme: W4A16
  - match: [lm_head, transformer.h.*.mlp.c_proj]
    scheme: W8A8
ignore: transformer.h.0.mlp.c_fc
YAML
run 0 "$LMQ" quantize "$tmp/fp32.lmq" --recipe "$tmp/hf.yaml" --explain
has "$tmp/hf.yaml:3 rules[0].match 'transformer.h.*.attn.c_attn' -> blk.*.attn_qkv.weight (Hugging Face name): 4 tensors"
has "$tmp/hf.yaml:5 rules[1].match 'lm_head' -> output.weight (Hugging Face name): 1 tensor"
has "$tmp/hf.yaml:7 ignore 'transformer.h.0.mlp.c_fc' -> blk.0.ffn_up.weight (Hugging Face name): 1 tensor"
grep -q "^  blk.2.attn_qkv.weight  *int4 g128  *rule at $tmp/hf.yaml:3$" "$tmp/out" || fail "attn_qkv line"
grep -q "^  blk.1.ffn_down.weight  *int8 per-channel, a8 token  *rule at $tmp/hf.yaml:5$" "$tmp/out" || fail "ffn_down"
grep -q "^  blk.0.ffn_up.weight  *fp32  *ignored by recipe ($tmp/hf.yaml:7)$" "$tmp/out" || fail "ignore line"
grep -q "^  output.weight  *int8 per-channel, a8 token .*tied tok_embd.weight" "$tmp/out" || fail "classifier"
[ "$(grep -c '^  blk\.' "$tmp/out")" = 48 ] || fail "explain lists $(grep -c '^  blk\.' "$tmp/out") block tensors, not 48"
# The explained plan is what quantize does.
run 0 "$LMQ" quantize "$tmp/fp32.lmq" --recipe "$tmp/hf.yaml" -o "$tmp/hf.lmq"
run 0 "$LMQ" inspect "$tmp/hf.lmq"
grep -q 'blk.3.attn_qkv.weight.*int4 g128' "$tmp/out" || { cat "$tmp/out" >&2; fail "inspect: attn_qkv not int4 g128"; }
# FP8 (llm-compressor's name) is fp8 weights with fp32 activations here: --explain says so.
printf 'name: f\nrules:\n  - match: "blk.*.attn_qkv.weight"\n    scheme: FP8\n' >"$tmp/fp8.yaml"
run 0 "$LMQ" quantize "$tmp/fp32.lmq" --recipe "$tmp/fp8.yaml" --explain
grep -q "^  blk.0.attn_qkv.weight  *fp8_e4m3 per-channel, weight-only (fp32 activations)  *rule at" "$tmp/out" ||
    fail "explain: fp8 is weight-only"
# A pattern that matches nothing is reported (exit 1) with the canonical name it stood for.
printf 'name: x\nrules:\n  - match: model.layers.*.self_attn.q_proj\n    scheme: fp16\n' >"$tmp/llama.yaml"
run 1 "$LMQ" quantize "$tmp/fp32.lmq" --recipe "$tmp/llama.yaml" --explain
has "$tmp/llama.yaml:3 rules[0].match 'model.layers.*.self_attn.q_proj' -> blk.*.attn_q.weight (Hugging Face name): MATCHES NO TENSOR"
has "1 pattern matches no tensor"
run 1 "$LMQ" quantize "$tmp/fp32.lmq" --recipe "$tmp/llama.yaml" -o "$tmp/x.lmq"
has "pattern 'model.layers.*.self_attn.q_proj' (the Hugging Face name of 'blk.*.attn_q.weight') matches no tensor"
# An HF name with a wildcard beyond the layer index does not resolve: the report names a tensor
# it matches as an HF name, and its canonical name.
printf 'name: x\nrules:\n  - match: transformer.h.*.mlp.*\n    scheme: fp16\n' >"$tmp/wild.yaml"
run 1 "$LMQ" quantize "$tmp/fp32.lmq" --recipe "$tmp/wild.yaml" --explain
has "'transformer.h.*.mlp.*': MATCHES NO TENSOR; it matches the Hugging Face name transformer.h.0.mlp.c_fc.weight, which lmq calls blk.0.ffn_up.weight"
run 2 "$LMQ" quantize "$tmp/fp32.lmq" --recipe "$tmp/hf.yaml" --explain -o "$tmp/x.lmq"
[ ! -e "$tmp/x.lmq" ] || fail "--explain wrote an artefact"
# On a quantised input --explain says so.
run 0 "$LMQ" quantize "$tmp/i8.lmq" --recipe recipes/int4-g32.yaml --explain
has "is already quantised (tensor blk.0.attn_qkv.weight): quantize needs --requantize"
echo "$SCRIPT: ok"
