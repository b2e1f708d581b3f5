#!/usr/bin/env bash
# The CI story of README "Use in CI", end to end on the demo: build the demo's artefacts afresh,
# audit them as a folder against a policy and the committed expected manifests (JSON and JUnit
# reports, the JUnit parsed), gate a verify on KL and top-1 with records, require those records
# by policy, and check that each failure kind gives its documented exit code and names its cause:
# a corrupted byte 5, a policy violation 8, a changed recipe 8, a failed gate 9, a missing or
# failing record 9.
#
# The artefacts must match manifests/expected/ (written by make expected) exactly: every manifest
# value is a property of the bytes, so this shows the build is byte-deterministic across clean
# builds and machines, and whatever the output folder (a path that leaked into the statistics
# would change their file checksum, which every calibrated artefact's manifest holds).
. "$(dirname "$0")/lib.bash"

# Bytes, not memory safety: the sanitizer build runs the same stages in the other scripts. Exit 77:
# make check-asan lists it as skipped.
if [ -n "${LMQ_SAN:-}" ]; then
    echo "ci_story.sh: not under the sanitizers (make check runs it)"
    exit 77
fi
A="$tmp/a"
OUT="$A" DEMO_STEPS=artefacts LMQ="$LMQ" bash tools/demo.sh >/dev/null
n=$(ls manifests/expected/*.yaml | wc -l)
[ "$(ls "$A"/*.lmq | wc -l)" = "$n" ] || fail "the demo builds $(ls "$A"/*.lmq | wc -l) artefacts, manifests/expected has $n"

# 1. The whole folder against the expected manifests, with JSON and JUnit reports.
run 0 "$LMQ" audit "$A" --expect manifests/expected --format junit --output "$tmp/audit.xml"
has "audit: $n artefacts, $n passed, 0 failed"
python3 - "$tmp/audit.xml" "$n" <<'PY' || fail "the JUnit report does not parse as expected"
import sys, xml.etree.ElementTree as ET
suite = ET.parse(sys.argv[1]).getroot()
assert suite.tag == "testsuite" and suite.get("name") == "lmq audit", suite.attrib
cases = suite.findall("testcase")
# a testcase per artefact and check (open, parse, checksum, manifest, values, files, tokenizer, policy,
# verification, expect), named by the check, the artefact its classname
assert len(cases) == 10 * int(sys.argv[2]) and int(suite.get("tests")) == len(cases), (len(cases), suite.attrib)
assert len({c.get("classname") for c in cases}) == int(sys.argv[2]) and cases[-1].get("name") == "expect", cases[-1].attrib
assert not suite.findall(".//failure") and suite.get("failures") == "0", suite.attrib
PY
run 0 "$LMQ" audit "$A" --expect manifests/expected --format json --output "$tmp/audit.json"
python3 - "$tmp/audit.json" "$n" <<'PY' || fail "the JSON report does not say every artefact passed"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["summary"]["artefacts"] == int(sys.argv[2]) and r["summary"]["passed"] == int(sys.argv[2]), r["summary"]
assert r["summary"]["exit"] == 0 and all(a["status"] == "passed" for a in r["artefacts"]), r["summary"]
PY

# 2. The 4-bit artefacts a deployment would take, against the shipped 4-bit policy.
mkdir -p "$tmp/ship"
cp "$A"/int4-g128.lmq "$A"/gptq-int4-g128.lmq "$A"/awq-int4-g128.lmq "$tmp/ship/"
run 0 "$LMQ" audit "$tmp/ship" --policy manifests/policies/ci-int4.yaml --expect manifests/expected
has "audit: 3 artefacts, 3 passed, 0 failed"

# 3. Verify with gates and records: the reference is the fp32 conversion; a short held-out text.
head -c 24000 "$A/eval.txt" >"$tmp/eval.txt"
run 0 "$LMQ" verify "$A/fp32.lmq" "$tmp/ship"/*.lmq --text "$tmp/eval.txt" --threads 2 \
    --gate 'kl_mean<=0.5' --gate 'top1>=0.5' --record --json "$tmp/verify.json"
has "PASS"
for f in "$tmp/ship"/*.lmq; do [ -f "$f.verify.json" ] || fail "no record beside $f"; done
text_sum=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["text_checksum"])' "$tmp/verify.json")
# A gate that fails: exit 9, the gate and the artefact named.
run 9 "$LMQ" verify "$A/fp32.lmq" "$tmp/ship/int4-g128.lmq" --text "$tmp/eval.txt" --threads 2 --gate 'kl_mean<=1e-9'
has "kl_mean<=1e-9"
has "int4-g128.lmq"

# 4. A policy that requires the records: met, then not met, then missing.
cat >"$tmp/verified.yaml" <<YAML
verification:
  kl_mean_max: 0.5
  top1_min: 0.5
  text_checksum: "$text_sum"
YAML
run 0 "$LMQ" audit "$tmp/ship" --policy "$tmp/verified.yaml"
has "audit: 3 artefacts, 3 passed, 0 failed"
sed 's/kl_mean_max: 0.5/kl_mean_max: 0.0000001/' "$tmp/verified.yaml" >"$tmp/tight.yaml"
run 9 "$LMQ" audit "$tmp/ship/int4-g128.lmq" --policy "$tmp/tight.yaml"
has "int4-g128.lmq.verify.json"
has "KL mean"
has "verification 1"
cp "$A/int4-g32.lmq" "$tmp/ship/"
run 9 "$LMQ" audit "$tmp/ship/int4-g32.lmq" --policy "$tmp/verified.yaml"
has "int4-g32.lmq.verify.json"

# 5. The other failure kinds, each with its code and its cause named.
cp "$A/int4-g128.lmq" "$tmp/bad.lmq"
printf '\x55' | dd of="$tmp/bad.lmq" bs=1 seek=$(( $(stat -c %s "$tmp/bad.lmq") / 2 )) conv=notrunc status=none
run 5 "$LMQ" audit "$tmp/bad.lmq"
has "checksum"
has "tensor "
run 8 "$LMQ" audit "$A/int8-channel.lmq" --policy manifests/policies/ci-int4.yaml
has "ci-int4.yaml: schemes: is 'int8 per-channel'"
# A changed recipe (group 64 where the committed one says 128) under the committed name.
mkdir -p "$tmp/changed"
sed 's/group: 128/group: 64/' recipes/int4-g128.yaml >"$tmp/int4-g128.yaml"
"$LMQ" quantize "$A/fp32.lmq" --recipe "$tmp/int4-g128.yaml" -o "$tmp/changed/int4-g128.lmq" >/dev/null
run 8 "$LMQ" audit "$tmp/changed" --expect manifests/expected
has "expected"
has "recipe"
echo "ci_story.sh: ok ($n artefacts as expected; policy, gates, records and every failure kind)"
