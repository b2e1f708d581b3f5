#!/usr/bin/env bash
# lmq quantize end to end on stories260K: every shipped recipe gives an artefact that passes
# audit, twice the same bytes; the thread count changes no byte; the tied embedding is split
# when its uses differ; a recipe with an error names file, line and key, and leaves no artefact;
# quantised artefacts run.
. "$(dirname "$0")/lib.bash"
need_fixtures

"$LMQ" convert "$FIX/stories260K/stories260K.bin" -o "$tmp/s.lmq" >/dev/null
"$LMQ" calibrate "$tmp/s.lmq" --text "$FIX/text/tinystories-valid.txt" --windows 8 -o "$tmp/stats.lmq" >/dev/null
for r in recipes/*.yaml; do # calibrated recipes need the statistics; the others leave them unused
    name=$(basename "$r" .yaml)
    if [ "$name" = w4a8-block ]; then # stories260K's FFN is 172 wide: no whole blocks of 32 (GPT-2's below)
        st=0; "$LMQ" quantize "$tmp/s.lmq" --recipe "$r" -o "$tmp/$name.lmq" 2>"$tmp/err" || st=$?
        [ "$st" = 1 ] && grep -qF "tensor 'blk.0.ffn_down.weight': activations int8 per block need a multiple of 32" \
            "$tmp/err" || fail "$r on stories260K: exit $st, $(cat "$tmp/err")"
        continue
    fi
    "$LMQ" quantize "$tmp/s.lmq" --recipe "$r" --stats "$tmp/stats.lmq" -o "$tmp/$name.lmq" >/dev/null || fail "$r"
    "$LMQ" quantize "$tmp/s.lmq" --recipe "$r" --stats "$tmp/stats.lmq" -o "$tmp/$name.again.lmq" >/dev/null
    cmp -s "$tmp/$name.lmq" "$tmp/$name.again.lmq" || fail "$r: two runs differ"
    rm "$tmp/$name.again.lmq"
done
"$LMQ" audit "$tmp"/*.lmq >"$tmp/audit" || { cat "$tmp/audit" >&2; fail "audit"; }

# The thread count changes nothing: GPT-2 (fused qkv, a 50257-row tied embedding, so many chunks
# per tensor) at 1, 2 and 3 threads gives the same bytes.
"$LMQ" convert "$FIX/sotu-gpt2" -o "$tmp/g.lmq" >/dev/null
for name in int4-g32-asym int3-g32 int8-channel fp16 w4a16; do
    for t in 1 2 3; do
        "$LMQ" quantize "$tmp/g.lmq" --recipe "recipes/$name.yaml" -o "$tmp/g-$t.lmq" --threads $t >/dev/null ||
            fail "$name --threads $t"
    done
    cmp -s "$tmp/g-1.lmq" "$tmp/g-2.lmq" && cmp -s "$tmp/g-1.lmq" "$tmp/g-3.lmq" || fail "$name: threads differ"
done
# a8 block (int8 activations per block of 32, integer products) runs and scores close to the same
# weights with float activations (w4a16: int4 g128 the same way), and says so in inspect and verify.
# Under the sanitizers a tenth of the text: a GPT-2 verify there costs 30 s a pass over 20000 bytes.
head -c $([ -n "${LMQ_SAN:-}" ] && echo 2000 || echo 20000) "$FIX/text/sotu-eval.txt" >"$tmp/g.txt"
for name in w4a16 w4a8-block; do
    "$LMQ" quantize "$tmp/g.lmq" --recipe "recipes/$name.yaml" -o "$tmp/g-$name.lmq" >/dev/null || fail "$name on GPT-2"
    "$LMQ" verify "$tmp/g-$name.lmq" --reference "$tmp/g.lmq" --text "$tmp/g.txt" --ctx 64 --json "$tmp/g-$name.json" \
        >"$tmp/g-$name.out" || fail "verify $name"
done
"$LMQ" inspect "$tmp/g-w4a8-block.lmq" >"$tmp/g-inspect"
grep -q '^blk.0.attn_qkv.weight .*int4 g128, a8 block' "$tmp/g-inspect" || fail "w4a8-block: inspect does not show a8 block"
grep -q 'int4 g128 + a8 block' "$tmp/g-w4a8-block.out" || fail "w4a8-block: verify's scheme column lacks a8 block"
"$LMQ" quantize "$tmp/g.lmq" --recipe recipes/w4a8-block.yaml --explain >"$tmp/g-explain" 2>&1
grep -q 'blk.0.attn_qkv.weight  *int4 g128, a8 block' "$tmp/g-explain" || fail "w4a8-block: --explain does not show a8 block"
"$LMQ" audit "$tmp/g-w4a8-block.lmq" >/dev/null || fail "w4a8-block: audit"
python3 - "$tmp" <<'PY' || fail "a8 block scores: see above"
import json, math, sys
kl = lambda n: json.load(open(f"{sys.argv[1]}/g-{n}.json"))["rows"][1]["kl_mean"]
f, b = kl("w4a16"), kl("w4a8-block")
print(f"GPT-2 int4 g128: KL {f:.4g} with float activations, {b:.4g} with a8 block")
assert math.isfinite(b) and 0 < b < 0.5 and b < 2 * f, (f, b)
PY
rm "$tmp"/g*.lmq
st=0; "$LMQ" quantize "$tmp/s.lmq" --recipe recipes/fp16.yaml -o "$tmp/x.lmq" --threads -1 2>/dev/null || st=$?
[ "$st" = 2 ] || fail "--threads -1: exit $st"

# w4a16: the classifier at int8 per channel and the lookup at fp16 are two tensors now.
"$LMQ" inspect "$tmp/w4a16.lmq" >"$tmp/inspect"
grep -q '^output.weight  *\[512, 64\]  *int8 per-channel' "$tmp/inspect" || fail "w4a16: no int8 output.weight"
grep -q '^tok_embd.weight  *\[512, 64\]  *fp16' "$tmp/inspect" || fail "w4a16: no fp16 tok_embd.weight"
grep -q 'tied_embedding: false' "$tmp/inspect" || fail "w4a16: still marked tied"
grep -q 'blk.0.attn_q.weight  *\[64, 64\]  *int4 g128' "$tmp/inspect" || fail "w4a16: linear layers not int4 g128"
# int8-channel keeps the tie: one embedding tensor, the reason for fp32 stated.
"$LMQ" inspect "$tmp/int8-channel.lmq" >"$tmp/inspect"
grep -q '^output.weight' "$tmp/inspect" && fail "int8-channel: the tied embedding was split"
grep -q 'reason: "no rule matches"' "$tmp/inspect" || fail "int8-channel: no reason for fp32 tensors"

# A quantised artefact runs: greedy text from BOS is still a story.
"$LMQ" generate "$tmp/int8-channel.lmq" -n 12 >"$tmp/gen" 2>/dev/null
grep -q '^Once upon a time' "$tmp/gen" || fail "int8-channel generates: $(cat "$tmp/gen")"

# Recipe errors: file, line and key named; exit 1; no artefact and no temporary file.
bad() { # bad NAME EXPECTED-SUBSTRING <<< recipe
    cat >"$tmp/$1.yaml"
    st=0; "$LMQ" quantize "$tmp/s.lmq" --recipe "$tmp/$1.yaml" -o "$tmp/$1.lmq" 2>"$tmp/err" || st=$?
    [ "$st" = 1 ] || fail "$1: exit $st"
    grep -qF -- "$2" "$tmp/err" || fail "$1: message lacks '$2': $(cat "$tmp/err")"
    ! ls "$tmp" | grep -q "^$1.lmq" || fail "$1: an artefact was left"
}
bad unknown-key "unknown-key.yaml:5: rules[0].bits" <<'Y'
name: x
rules:
  - match: "blk.*.ffn_up.weight"
    scheme: int8
    bits: 8
Y
bad bad-group "bad-group.yaml:6: rules[0].group" <<'Y'
name: x
rules:
  - match: "blk.*.ffn_up.weight"
    scheme: int4
    granularity: group
    group: 100
Y
bad no-match "no-match.yaml:3: pattern 'blk.*.attn_qq.weight' matches no tensor" <<'Y'
name: x
rules:
  - match: "blk.*.attn_qq.weight"
    scheme: int8
    granularity: channel
Y
bad malformed "malformed.yaml:3:" <<'Y'
name: x
rules:
  - match: a: b
Y
st=0; "$LMQ" quantize "$tmp/s.lmq" --recipe "$tmp/none.yaml" -o "$tmp/none.lmq" 2>"$tmp/err" || st=$?
[ "$st" = 1 ] && grep -q "none.yaml" "$tmp/err" || fail "missing recipe: exit $st, $(cat "$tmp/err")"
st=0; "$LMQ" quantize "$tmp/s.lmq" -o "$tmp/x.lmq" 2>/dev/null || st=$?; [ "$st" = 2 ] || fail "no --recipe: exit $st"

# A tensor whose weights are all subnormal dequantises to zeros: written, with a warning naming
# it; the same model with ordinary weights gives none (both from the container tests' sample
# writer).
SAMPLER="$(dirname "$LMQ")/tests/test_container"
LMQ_WRITE_SAMPLE="$tmp/denormal.lmq" LMQ_SAMPLE_KIND=denormal "$SAMPLER"
LMQ_WRITE_SAMPLE="$tmp/plain.lmq" "$SAMPLER"
for r in int8-channel fp16 int4-g32-asym; do
    run 0 "$LMQ" quantize "$tmp/denormal.lmq" --recipe "recipes/$r.yaml" -o "$tmp/dq.lmq"
    has "lmq quantize: warning: tensor blk.0.attn_q.weight: every weight dequantises to 0"
    has "the tensor is lost (rel_error 1)"
    [ "$(grep -c warning "$tmp/out")" = 1 ] || fail "$r: one warning expected"
    run 0 "$LMQ" audit "$tmp/dq.lmq"
    run 0 "$LMQ" quantize "$tmp/plain.lmq" --recipe "recipes/$r.yaml" -o "$tmp/dq.lmq"
    ! grep -q warning "$tmp/out" || fail "$r: a warning for ordinary weights"
done
echo "quantize.sh: ok"
