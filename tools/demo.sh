#!/usr/bin/env bash
# The main job: convert the demo model, apply every shipped recipe, verify them side by side.
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
"$LMQ" convert demo/sotu-gpt2 --tokenizer "$FIX/gpt2-tokenizer" -o "$OUT/fp32.lmq"
for r in recipes/*.yaml; do
    "$LMQ" quantize "$OUT/fp32.lmq" --recipe "$r" -o "$OUT/$(basename "$r" .yaml).lmq"
done
"$LMQ" audit "$OUT"/*.lmq >"$OUT/audit.txt" || { cat "$OUT/audit.txt" >&2; exit 1; }
echo "audit: $(grep -c ': OK' "$OUT/audit.txt") artefacts pass (checksums, manifest)"
"$LMQ" verify "$OUT"/*.lmq --reference "$OUT/fp32.lmq" --text demo/sotu-eval.txt \
    --json "$OUT/report.json" --markdown "$OUT/report.md"
echo "demo: report in $OUT/report.md and $OUT/report.json"
