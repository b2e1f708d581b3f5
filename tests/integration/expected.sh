#!/usr/bin/env bash
# The demo's artefacts, built afresh in a temporary folder, match the committed expected manifests
# (manifests/expected/, written by make expected) exactly: lmq audit --expect at tolerance 0. Every
# manifest value is a property of the bytes, so this shows the build is byte-deterministic across
# clean builds and machines, and (make expected builds in out/expected) whatever the output folder:
# a path that leaked into the statistics would change their file checksum, which every calibrated
# artefact's manifest holds.
. "$(dirname "$0")/lib.bash"

# Bytes, not memory safety: the sanitizer build runs the same stages in quantize.sh and calibrate.sh.
if [ -n "${LMQ_SAN:-}" ]; then
    echo "expected.sh: not under the sanitizers (make check runs it)"
    exit 0
fi
if [ ! -f "$FIX/gpt2-tokenizer/vocab.json" ]; then # what tools/demo.sh needs
    [ "${CI:-}" != true ] || fail "no GPT-2 tokenizer in $FIX/gpt2-tokenizer (set LMQ_FIXTURES)"
    echo "expected.sh: skipped: the demo's GPT-2 tokenizer is not in $FIX/gpt2-tokenizer (fixtures: ../shared/fixtures or LMQ_FIXTURES)"
    exit 0
fi
OUT="$tmp/a" DEMO_STEPS=artefacts LMQ="$LMQ" bash tools/demo.sh >/dev/null
n=$(ls manifests/expected/*.yaml | wc -l)
[ "$(ls "$tmp/a"/*.lmq | wc -l)" = "$n" ] || fail "the demo builds $(ls "$tmp/a"/*.lmq | wc -l) artefacts, manifests/expected has $n"
run 0 "$LMQ" audit "$tmp/a" --expect manifests/expected
has "audit: $n artefacts, $n passed, 0 failed"
echo "expected.sh: ok ($n artefacts as expected)"
