#!/usr/bin/env bash
# target_bpw end to end on each fixture model: a recipe asking for the bits per weight that
# lmq's own Q4_K_M preset reaches on the model (whole model, as llama.cpp counts them: the
# exported GGUF read by tools/gguf_bpw.py) lands within 0.02 of it, and its KL against the fp32
# model (lmq verify, on text it was not calibrated on) is lower than the preset's with the same
# method, for rtn and imatrix. A planner that spent the budget uniformly would not: the same
# target with a single candidate list (q4_0, q5_0, q8_0: no choice between K-types) is checked
# to be no better than the preset where the K-types apply. --explain prints each tensor's choice,
# its estimate and the bpw reached; a target outside what the model can reach is refused.
. "$(dirname "$0")/lib.bash"
need_fixtures

# Short texts: the calibration and the evaluation are different parts of the same text.
bytes=24000
[ -n "${LMQ_SAN:-}" ] && bytes=8000

# recipe FILE METHOD: FILE with `method: METHOD` on its rules of block linear layers.
with_method() {
    awk -v m="$2" '{ print } /^  - match: .*blk\./ { blk = 1 } /^  - match: / && !/blk\./ { blk = 0 }
                    /^    scheme: / && blk && m != "rtn" { print "    method: " m }' "$1"
}
kl() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["rows"][1]["kl_mean"])' "$1"; }
gguf_bpw() { "$LMQ" export "$1" --to gguf -o "$1.gguf" >/dev/null && python3 tools/gguf_bpw.py "$1.gguf"; }

while read -r name src text; do
    m=$tmp/$name
    "$LMQ" convert "$FIX/$src" -o "$m.lmq" >/dev/null
    head -c $bytes "$FIX/text/$text" >"$tmp/calib.txt"
    tail -c $bytes "$FIX/text/$text" >"$tmp/eval.txt"
    run 0 "$LMQ" calibrate "$m.lmq" --text "$tmp/calib.txt" --ctx 64 --windows 24 -o "$m.stats.lmq"
    for method in rtn imatrix; do
        with_method recipes/gguf/Q4_K_M.yaml $method >"$m.preset.yaml"
        stats=() && [ $method = imatrix ] && stats=(--stats "$m.stats.lmq")
        "$LMQ" quantize "$m.lmq" --recipe "$m.preset.yaml" "${stats[@]}" -o "$m.preset.lmq" >/dev/null
        want=$(gguf_bpw "$m.preset.lmq")
        with_method recipes/gguf/target-4.5.yaml $method | sed "s/^target_bpw: .*/target_bpw: $want/" >"$m.target.yaml"
        run 0 "$LMQ" quantize "$m.lmq" --recipe "$m.target.yaml" --stats "$m.stats.lmq" -o "$m.target.lmq"
        has "bits per weight reached"
        got=$(gguf_bpw "$m.target.lmq")
        awk -v a="$got" -v b="$want" 'BEGIN { d = a - b; exit !(d <= 0.0005 && d > -0.02) }' ||
            fail "$name $method: target_bpw $want reached $got bpw"
        run 0 "$LMQ" verify "$m.lmq" "$m.preset.lmq" --text "$tmp/eval.txt" --ctx 64 --json "$m.p.json"
        run 0 "$LMQ" verify "$m.lmq" "$m.target.lmq" --text "$tmp/eval.txt" --ctx 64 --json "$m.t.json"
        kp=$(kl "$m.p.json") kt=$(kl "$m.t.json")
        echo "$name $method: Q4_K_M $want bpw KL $kp; target_bpw $got bpw KL $kt"
        awk -v t="$kt" -v p="$kp" 'BEGIN { exit !(t < p) }' || fail "$name $method: target_bpw's KL $kt is not below Q4_K_M's $kp"
    done
done <<'MODELS'
sotu-gpt2 sotu-gpt2 sotu-eval.txt
stories260K-hf stories260K-hf tinystories-valid.txt
sotu-llama256 sotu-llama256/model.bin sotu-eval.txt
MODELS

echo "target_bpw.sh: ok"
