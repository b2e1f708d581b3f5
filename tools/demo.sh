#!/usr/bin/env bash
# The main job: convert the demo model, calibrate it, apply every shipped recipe, verify them side
# by side. The text's first 6 addresses calibrate (GPTQ, AWQ, SmoothQuant); every artefact is
# scored on the other 4, which no method has seen.
# The demo model (demo/sotu-gpt2, ours, with the GPT-2 tokenizer files beside it, which convert
# finds there) and its evaluation text (public domain) are in the repository: no fixtures needed
# (demo/PROVENANCE.md).
set -euo pipefail
cd "$(dirname "$0")/.."
LMQ=${LMQ:-build/lmq}
LMQ_ABS=$LMQ
[[ $LMQ != */* ]] || LMQ_ABS=$(realpath "$LMQ")
OUT=${OUT:-out/demo}
mkdir -p "$OUT"
# Documents FIRST..LAST (1-based) of a P1 text, with the separators between them.
docs() { awk -v a="$2" -v b="$3" 'BEGIN { d = 1 } /^<\|endoftext\|>\r?$/ { if (++d > a && d <= b) print; next } d >= a && d <= b' "$1"; }
docs demo/sotu-eval.txt 1 6 >"$OUT/calib.txt"
docs demo/sotu-eval.txt 7 10 >"$OUT/eval.txt"
"$LMQ" convert demo/sotu-gpt2 -o "$OUT/fp32.lmq"
# Inside $OUT the statistics name their model and text "fp32.lmq" and "calib.txt" (GPTQ reads the
# text again by that name), so that no artefact's bytes depend on where OUT is (manifests/expected/).
ROOT=$PWD
(
    cd "$OUT"
    "$LMQ_ABS" calibrate fp32.lmq --text calib.txt -o stats.lmq
    for r in "$ROOT"/recipes/*.yaml; do # (recipes that round to nearest leave the statistics unused and unnamed)
        "$LMQ_ABS" quantize fp32.lmq --recipe "$r" --stats stats.lmq -o "$(basename "$r" .yaml).lmq"
    done
)
[ "${DEMO_STEPS:-all}" != artefacts ] || exit 0 # make expected and tests/integration/ci_story.sh stop here
"$LMQ" audit "$OUT"/*.lmq >"$OUT/audit.txt" || { cat "$OUT/audit.txt" >&2; exit 1; }
echo "audit: $(grep -c ': OK' "$OUT/audit.txt") artefacts pass (checksums, manifest)"
models=$(ls "$OUT"/*.lmq | grep -v '/stats\.lmq$')
"$LMQ" verify $models --reference "$OUT/fp32.lmq" --text "$OUT/eval.txt" \
    --json "$OUT/report.json" --markdown "$OUT/report.md" --html "$OUT/report.html"
echo "demo: report in $OUT/report.md, $OUT/report.json and $OUT/report.html"
