#!/usr/bin/env bash
# lmq outliers end to end on stories260K: the outlier model scores like the original in fp32,
# W8A8 with one activation scale per layer call gets clearly worse on it (what the outliers are
# for), inspect shows the activation quantisation, and bad arguments or inputs write nothing.
. "$(dirname "$0")/lib.bash"
need_fixtures

"$LMQ" convert "$FIX/stories260K/stories260K.bin" -o "$tmp/s.lmq" >/dev/null
# Under the sanitizers (memory, not numbers) a shorter text: the outlier model is still clearly worse.
head -c $([ -n "${LMQ_SAN:-}" ] && echo 8000 || echo 60000) "$FIX/text/tinystories-valid.txt" >"$tmp/t.txt"

run 0 "$LMQ" outliers --help
has "usage: lmq outliers IN.lmq -o OUT.lmq"
run 0 "$LMQ" outliers "$tmp/s.lmq" -o "$tmp/o.lmq" --channels 4 --factor 30 --seed 1
"$LMQ" inspect "$tmp/o.lmq" >"$tmp/out"
has "lmq outliers: in every block, 4 channels of each norm-fed input scaled by 30"
for m in s o; do
    "$LMQ" quantize "$tmp/$m.lmq" --recipe recipes/w8a8-tensor.yaml -o "$tmp/$m-a8.lmq" >/dev/null
    "$LMQ" verify "$tmp/$m-a8.lmq" --reference "$tmp/$m.lmq" --text "$tmp/t.txt" --ctx 64 --json "$tmp/$m.json" >/dev/null
done
"$LMQ" inspect "$tmp/o-a8.lmq" >"$tmp/out"
has "int8 per-channel, a8 tensor"
"$LMQ" verify "$tmp/o.lmq" --reference "$tmp/s.lmq" --text "$tmp/t.txt" --ctx 64 --json "$tmp/same.json" >/dev/null
python3 - "$tmp" <<'PY' || fail "scores: see above"
import json, sys
row = lambda f: json.load(open(f"{sys.argv[1]}/{f}.json"))["rows"][1]
same, s, o = row("same"), row("s"), row("o")
print(f"fp32 outlier model vs original: KL {same['kl_mean']:.3g}, top-1 {same['top1']:.4f}")
print(f"W8A8 per-tensor: KL {s['kl_mean']:.4g} on the original, {o['kl_mean']:.4g} on the outlier model")
assert same["kl_mean"] < 1e-8 and same["top1"] == 1, same
assert o["kl_mean"] > 10 * s["kl_mean"], (s, o)
PY

# Bad arguments and inputs: exit status, message, nothing written.
run 1 "$LMQ" outliers "$tmp/s.lmq" -o "$tmp/x.lmq" --factor 0
has "factor 0 is not finite and positive"
run 1 "$LMQ" outliers "$tmp/s.lmq" -o "$tmp/x.lmq" --channels 65
has "65 channels per block and input: the model's width is 64"
run 1 "$LMQ" outliers "$tmp/s-a8.lmq" -o "$tmp/x.lmq"
has "the input must be an fp32 artefact"
run 1 "$LMQ" outliers "$tmp/s.lmq" -o "$tmp/s.lmq"
has "same file as the input"
run 2 "$LMQ" outliers "$tmp/s.lmq" -o "$tmp/x.lmq" --factor inf
run 2 "$LMQ" outliers "$tmp/s.lmq"
[ ! -e "$tmp/x.lmq" ] || fail "a refused run wrote its output"
! ls -a "$tmp" | grep -q '\.tmp\.' || fail "a refused run left a temporary file"
echo "$SCRIPT: ok"
