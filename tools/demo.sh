#!/usr/bin/env bash
# The main job: convert the demo model, calibrate it, apply every shipped recipe, verify them side
# by side. The text's first 6 addresses calibrate (GPTQ, AWQ, SmoothQuant); every artefact is
# scored on the other 4, which no method has seen.
# The demo model (demo/sotu-gpt2, ours) and its evaluation text (public domain) are in the repo;
# the GPT-2 tokenizer files come from the fixtures ($LMQ_FIXTURES, default ../shared/fixtures).
set -euo pipefail
cd "$(dirname "$0")/.."
LMQ=${LMQ:-build/lmq}
FIX=${LMQ_FIXTURES:-../shared/fixtures}
OUT=${OUT:-out/demo}
[ -f "$FIX/gpt2-tokenizer/vocab.json" ] || {
    echo "demo: the GPT-2 tokenizer (vocab.json, merges.txt) is not in $FIX/gpt2-tokenizer; set LMQ_FIXTURES" >&2
    exit 1
}
mkdir -p "$OUT"
# Documents FIRST..LAST (1-based) of a P1 text, with the separators between them.
docs() { awk -v a="$2" -v b="$3" 'BEGIN { d = 1 } /^<\|endoftext\|>\r?$/ { if (++d > a && d <= b) print; next } d >= a && d <= b' "$1"; }
docs demo/sotu-eval.txt 1 6 >"$OUT/calib.txt"
docs demo/sotu-eval.txt 7 10 >"$OUT/eval.txt"
"$LMQ" convert demo/sotu-gpt2 --tokenizer "$FIX/gpt2-tokenizer" -o "$OUT/fp32.lmq"
"$LMQ" calibrate "$OUT/fp32.lmq" --text "$OUT/calib.txt" -o "$OUT/stats.lmq"
for r in recipes/*.yaml; do # (recipes that round to nearest leave the statistics unused and unnamed)
    "$LMQ" quantize "$OUT/fp32.lmq" --recipe "$r" --stats "$OUT/stats.lmq" -o "$OUT/$(basename "$r" .yaml).lmq"
done
"$LMQ" audit "$OUT"/*.lmq >"$OUT/audit.txt" || { cat "$OUT/audit.txt" >&2; exit 1; }
echo "audit: $(grep -c ': OK' "$OUT/audit.txt") artefacts pass (checksums, manifest)"
models=$(ls "$OUT"/*.lmq | grep -v '/stats\.lmq$')
"$LMQ" verify $models --reference "$OUT/fp32.lmq" --text "$OUT/eval.txt" \
    --json "$OUT/report.json" --markdown "$OUT/report.md" --html "$OUT/report.html"
echo "demo: report in $OUT/report.md, $OUT/report.json and $OUT/report.html"
