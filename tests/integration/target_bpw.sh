#!/usr/bin/env bash
# target_bpw end to end on each fixture model: a recipe asking for the bits per weight that
# lmq's own Q4_K_M preset reaches on the model (whole model, as llama.cpp counts them: the
# exported GGUF read by tools/gguf_bpw.py) lands within 0.02 of it, and its KL against the fp32
# model (lmq verify, on text it was not calibrated on) is lower than the preset's with the same
# method, for rtn and imatrix (a planner that chose badly would not: on sotu-gpt2 and
# sotu-llama256 the target's KL is about half the preset's). On stories260K (64- and 172-wide
# rows: only the 32-blocks q4_0, q5_0 and q8_0 apply) the choice does not beat the preset's
# q5_0 throughout (rtn 1.3, imatrix 1.56 times its KL): there the KL is only held within 1.7
# times the preset's. --explain prints each tensor's choice, its estimate and the bpw reached; a
# target the model cannot reach is refused, naming the recipe's line.
. "$(dirname "$0")/lib.bash"
need_fixtures

# Short texts: the calibration and the evaluation are different parts of the same text. Under the
# sanitizers (memory, not numbers) shorter still, imatrix alone (the calibrated path; --explain's
# refusal below plans without statistics) on sotu-llama256 alone (every K-type a candidate; the
# fallbacks and 32-blocks of the others are the same code).
bytes=24000 windows=24 methods="rtn imatrix"
[ -n "${LMQ_SAN:-}" ] && bytes=4000 windows=4 methods=imatrix

kl() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["rows"][int(sys.argv[2])]["kl_mean"])' "$@"; }
gguf_bpw() { "$LMQ" export "$1" --to gguf -o "$1.gguf" >/dev/null && python3 tools/gguf_bpw.py "$1.gguf"; }

while read -r name src text factor; do
    [ -n "${LMQ_SAN:-}" ] && [ "$name" != sotu-llama256 ] && continue
    m=$tmp/$name
    "$LMQ" convert "$FIX/$src" -o "$m.lmq" >/dev/null
    head -c $bytes "$FIX/text/$text" >"$tmp/calib.txt"
    tail -c $bytes "$FIX/text/$text" >"$tmp/eval.txt"
    run 0 "$LMQ" calibrate "$m.lmq" --text "$tmp/calib.txt" --ctx 64 --windows $windows -o "$m.stats.lmq"
    for method in $methods; do
        tools/with_method.sh recipes/gguf/Q4_K_M.yaml $method >"$m.preset.yaml"
        stats=() && [ $method = imatrix ] && stats=(--stats "$m.stats.lmq")
        "$LMQ" quantize "$m.lmq" --recipe "$m.preset.yaml" "${stats[@]}" -o "$m.preset.lmq" >/dev/null
        want=$(gguf_bpw "$m.preset.lmq")
        tools/with_method.sh recipes/gguf/target-4.5.yaml $method | sed "s/^target_bpw: .*/target_bpw: $want/" >"$m.target.yaml"
        run 0 "$LMQ" quantize "$m.lmq" --recipe "$m.target.yaml" --stats "$m.stats.lmq" -o "$m.target.lmq"
        has "bits per weight reached"
        got=$(gguf_bpw "$m.target.lmq")
        awk -v a="$got" -v b="$want" 'BEGIN { d = a - b; exit !(d <= 0.0005 && d > -0.02) }' ||
            fail "$name $method: target_bpw $want reached $got bpw"
        [ -n "${LMQ_SAN:-}" ] && continue # the KL comparison is numbers (gguf_blocks.sh verifies K-types there)
        run 0 "$LMQ" verify "$m.lmq" "$m.preset.lmq" "$m.target.lmq" --text "$tmp/eval.txt" --ctx 64 --json "$m.json"
        kp=$(kl "$m.json" 1) kt=$(kl "$m.json" 2)
        echo "$name $method: Q4_K_M $want bpw KL $kp; target_bpw $got bpw KL $kt"
        awk -v t="$kt" -v p="$kp" -v f="$factor" 'BEGIN { exit !(t < p * f) }' ||
            fail "$name $method: target_bpw's KL $kt is not below $factor times Q4_K_M's $kp"
    done
done <<'MODELS'
sotu-llama256 sotu-llama256/model.bin sotu-eval.txt 1
sotu-gpt2 sotu-gpt2 sotu-eval.txt 1
stories260K-hf stories260K-hf tinystories-valid.txt 1.7
MODELS

# --explain: each chosen tensor with its estimate, then the bpw reached; a target below what the
# rules and candidates reach on the model is refused at its line.
m=$tmp/sotu-llama256
sed "s/^target_bpw: .*/target_bpw: 4.6/" recipes/gguf/target-4.5.yaml >"$tmp/t.yaml"
stats=(--stats "$m.stats.lmq") # the sanitizer build plans on the weights alone: the statistics' estimates ran above
[ -z "${LMQ_SAN:-}" ] || stats=()
run 0 "$LMQ" quantize "$m.lmq" --recipe "$tmp/t.yaml" "${stats[@]}" --explain
has "target_bpw's choice for the linear layers of blocks:"
[ "$(grep -cE '^  blk\.[0-9]+\.[a-z_]+\.weight +q[0-9]_[0k] +estimated error ' "$tmp/out")" = 28 ] ||
    fail "--explain does not show a choice for each of the 28 matrices"
grep -qE '^target_bpw 4\.6 .*: 4\.(59[0-9]|600)[0-9] bits per weight reached' "$tmp/out" || { cat "$tmp/out" >&2; fail "--explain: bpw reached"; }
sed "s/^target_bpw: .*/target_bpw: 2/" recipes/gguf/target-4.5.yaml >"$tmp/low.yaml"
run 1 "$LMQ" quantize "$m.lmq" --recipe "$tmp/low.yaml" -o "$tmp/low.lmq"
has "$tmp/low.yaml:3: target_bpw: 2 is below the cheapest mix"
[ ! -e "$tmp/low.lmq" ] || fail "a refused target_bpw wrote an artefact"

echo "target_bpw.sh: ok"
