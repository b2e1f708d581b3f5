#!/usr/bin/env bash
# lmq verify end to end: fp32 perplexity of stories260K with its counts and JSON (top-level
# ppl, checked against the golden value), and bad input refused with a clear message, exit 1.
. "$(dirname "$0")/lib.bash"
need_fixtures

"$LMQ" convert "$FIX/stories260K/stories260K.bin" -o "$tmp/s.lmq" >/dev/null
text="$FIX/text/tinystories-valid.txt"
# The whole text against the golden value in the optimised build; the sanitizer build (make
# check-asan: memory safety, not numbers, as for the golden suites) reads the same paths on its
# first documents.
if [ -z "${LMQ_SAN:-}" ]; then
    "$LMQ" verify "$tmp/s.lmq" --text "$text" --json "$tmp/r.json" --markdown "$tmp/r.md" >"$tmp/out"
    grep -q "379 documents, 151191 tokens, ctx 256: 590 windows, 150450 scored positions" "$tmp/out" ||
        fail "counts: $(cat "$tmp/out")"
    ours=$(sed -n 's/^ "ppl": \([0-9.]*\),*$/\1/p' "$tmp/r.json")
    gold=$(sed -n 's/^ "ppl": \([0-9.]*\),*$/\1/p' "$FIX/golden/stories260K-tinystories-valid.json")
    awk -v a="$ours" -v b="$gold" 'BEGIN { d = a / b - 1; exit !(d < 5e-4 && d > -5e-4) }' ||
        fail "JSON ppl $ours, golden $gold"
else
    head -c 20000 "$text" >"$tmp/first.txt"
    "$LMQ" verify "$tmp/s.lmq" --text "$tmp/first.txt" --json "$tmp/r.json" --markdown "$tmp/r.md" >"$tmp/out"
    grep -q " windows, .* scored positions" "$tmp/out" || fail "counts: $(cat "$tmp/out")"
fi
grep -q "^time: " "$tmp/out" || fail "no time"
grep -q "^| s.lmq | fp32 " "$tmp/r.md" || fail "markdown row"

# Rooflines, on weights beyond the last-level cache (a GPT-2-shape fp32 checkpoint, 471 MiB of
# matrices): against the rate given, or else against the rate the same weights were read just
# before the best decode; either way tok/s × bytes / rate. The cache is given as 32 MiB: a virtual
# machine's CPUID may report its host's whole L3 (508 MiB on one), which holds these weights.
"$LMQ" synth --shape gpt2-124m -o "$tmp/g" >/dev/null
"$LMQ" convert "$tmp/g" -o "$tmp/g.lmq" >/dev/null
rm -rf "$tmp/g"
for bw in 50 probed; do
    arg=()
    [ "$bw" = probed ] || arg=(--bandwidth "$bw")
    LMQ_LLC_BYTES=32M "$LMQ" verify "$tmp/g.lmq" --speed-only --ctx 16 --threads 2 "${arg[@]}" --json "$tmp/g.json" >"$tmp/out" ||
        fail "verify of the GPT-2 shape ($bw)"
    python3 -c '
import json, sys
w = json.load(open(sys.argv[1]))["rows"][0]
rate = w["read_gbps"]
assert rate == 50 if sys.argv[2] == "50" else rate > 0, w
want = w["decode_tokens_per_s"] * w["weight_mib"] * 1048576 / (rate * 1e9)
assert w["decode_roofline"] > 0 and abs(w["decode_roofline"] / want - 1) < 1e-9, (w, want)
' "$tmp/g.json" "$bw" || fail "rooflines ($bw): $(cat "$tmp/g.json")"
    grep -q "% of [0-9]* GB/s$" "$tmp/out" || fail "the table's roofline cell ($bw): $(cat "$tmp/out")"
done
# Weights the cache holds have no roofline: "-" in the table, null in the JSON (unknown, not 0), and
# a gate on it fails as unknown. A cache size that is not one is refused.
LMQ_LLC_BYTES=1G "$LMQ" verify "$tmp/g.lmq" --speed-only --ctx 16 --threads 2 --json "$tmp/g.json" >"$tmp/out" ||
    fail "verify of the GPT-2 shape in a 1 GiB cache"
python3 -c 'import json, sys; w = json.load(open(sys.argv[1]))["rows"][0]; assert w["decode_roofline"] is None, w' \
    "$tmp/g.json" || fail "unknown roofline in the JSON: $(cat "$tmp/g.json")"
grep -q "^g.lmq .* -$" "$tmp/out" || fail "unknown roofline in the table: $(cat "$tmp/out")"
head -c 6000 "$text" >"$tmp/few.txt"
cp "$tmp/s.lmq" "$tmp/s2.lmq"
st=0
LMQ_LLC_BYTES=1G "$LMQ" verify "$tmp/s.lmq" "$tmp/s2.lmq" --text "$tmp/few.txt" --ctx 64 --gate 'decode_roofline>=0.5' \
    --json "$tmp/s2.json" >"$tmp/out" 2>"$tmp/err" || st=$?
[ "$st" = 9 ] || fail "a gate on an unknown roofline: exit $st $(cat "$tmp/err")"
python3 -c 'import json, sys; w = json.load(open(sys.argv[1]))["rows"][1]; assert w["failed_gates"] == ["decode_roofline>=0.5 (unknown)"], w' \
    "$tmp/s2.json" || fail "a gate on an unknown roofline in the JSON: $(cat "$tmp/s2.json")"
grep -q "FAIL decode_roofline>=0.5 (unknown)" "$tmp/out" || fail "a gate on an unknown roofline in the table: $(cat "$tmp/out")"
grep -q "(decode_roofline = unknown)" "$tmp/err" || fail "a gate on an unknown roofline on stderr: $(cat "$tmp/err")"
st=0; LMQ_LLC_BYTES=lots "$LMQ" verify "$tmp/g.lmq" --speed-only --ctx 16 2>"$tmp/err" >/dev/null || st=$?
[ "$st" = 1 ] && grep -q "LMQ_LLC_BYTES='lots': expected a cache size" "$tmp/err" || fail "bad LMQ_LLC_BYTES: exit $st, $(cat "$tmp/err")"
rm -f "$tmp/g.lmq"

# refuse NAME SUBSTRING ARGS...: exit 1 with SUBSTRING in the message.
refuse() {
    local name=$1 want=$2 st=0
    shift 2
    "$LMQ" verify "$@" >/dev/null 2>"$tmp/err" || st=$?
    [ "$st" = 1 ] || fail "$name: exit $st"
    grep -qF -- "$want" "$tmp/err" || fail "$name: message lacks '$want': $(cat "$tmp/err")"
}
printf 'Once upon a time \xff\xfe there was\n' >"$tmp/bad.txt"
: >"$tmp/empty.txt"
echo "Once upon a time." >"$tmp/short.txt"
refuse "invalid UTF-8" "bad.txt: text is not valid UTF-8 at byte offset 17" "$tmp/s.lmq" --text "$tmp/bad.txt"
refuse "empty text" "empty.txt: text holds no document" "$tmp/s.lmq" --text "$tmp/empty.txt"
refuse "short text" "short.txt: 6 tokens, shorter than one window of 256" "$tmp/s.lmq" --text "$tmp/short.txt"
refuse "ctx too large" "ctx 1024 exceeds the model's context of 512" "$tmp/s.lmq" --text "$text" --ctx 1024
refuse "missing text" "cannot open" "$tmp/s.lmq" --text "$tmp/none.txt"
head -c 100000 "$tmp/s.lmq" >"$tmp/cut.lmq"
refuse "truncated artefact" "cut.lmq" "$tmp/cut.lmq" --text "$text"
st=0; "$LMQ" verify "$tmp/s.lmq" 2>/dev/null || st=$?; [ "$st" = 2 ] || fail "no --text: exit $st"
st=0; "$LMQ" verify "$tmp/s.lmq" --text "$text" --ctx 1 2>/dev/null || st=$?; [ "$st" = 2 ] || fail "ctx 1: exit $st"
echo "verify.sh: ok"
