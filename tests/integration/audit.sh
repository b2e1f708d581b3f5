#!/usr/bin/env bash
# lmq inspect and lmq audit end to end. A sample artefact (written by the container test
# program's sample mode) must pass; copies of it that are truncated, have one bit flipped
# anywhere, or carry a manifest that misses a tensor must fail with the damage named.
# Exit codes (README "Audit in CI"): 0 all pass, 2 usage, 3 values, 4 manifest, 5 checksum,
# 6 format, 7 I/O; the most severe kind found wins.
. "$(dirname "$0")/lib.bash"
need_fixtures

SAMPLER="$(dirname "$LMQ")/tests/test_container"

# flip FILE OFFSET: inverts the lowest bit of one byte, in place.
flip() {
    local b
    b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    printf "\\$(printf '%03o' $((b ^ 1)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
u64_at() { od -An -tu8 -j "$2" -N8 "$1" | tr -d ' '; } # little-endian host, as the format

good="$tmp/good.lmq"
LMQ_WRITE_SAMPLE="$good" "$SAMPLER"
size=$(stat -c %s "$good")

# The clean artefact.
run 0 "$LMQ" audit "$good"
has "$good: OK (14 entries, checksums, manifest, values, file names and tokenizer verified)"

# A file name with a newline and a tab stays on its line of the text report, escaped.
odd_name="$tmp/new
line	tab.lmq"
cp "$good" "$odd_name"
run 0 "$LMQ" audit "$odd_name"
has "$tmp/new\nline\x09tab.lmq: OK (14 entries"
[ "$(grep -c . "$tmp/out")" = 2 ] || fail "the text report of one artefact is not two lines"
rm "$odd_name"

run 0 "$LMQ" inspect "$good"
has "format_version: 1"
has "reason: \"plain conversion: no recipe applied\""
cp "$tmp/out" "$tmp/inspect"
grep -q '^blk.0.attn_q.weight  *\[8, 8\]  *fp32  *fp32  *none  *256  *256 ' "$tmp/inspect" || fail "tensor table row"
grep -q '^file:notes.txt  *\[400\]  *bytes  *-  *zstd ' "$tmp/inspect" || fail "zstd row"
offset_of() { awk -v n="$1" '$1 == n { print $(NF - 1) }' "$tmp/inspect"; }

# Damaged tensors are named, each on its own line, and the whole-file checksum fails too. Flipped
# bytes in a plain tensor are a checksum mismatch (5); in a zstd blob that no longer decodes, damage
# to the format (6), which wins.
bad="$tmp/bad.lmq"
cp "$good" "$bad"
flip "$bad" $(($(offset_of blk.0.attn_q.weight) + 5))
run 5 "$LMQ" audit "$bad"
has "$bad: checksum: tensor blk.0.attn_q.weight: checksum mismatch"
has "audit: 1 artefact, 0 passed, 1 failed (io 0, format 0, checksum 1, manifest 0, values 0, verification 0, policy 0)"
flip "$bad" $(($(offset_of file:notes.txt) + 9))
run 6 "$LMQ" audit "$bad"
has "$bad: checksum: tensor blk.0.attn_q.weight: checksum mismatch"
has "$bad: checksum: tensor file:notes.txt: "
has "$bad: checksum: whole-file checksum mismatch"
has "$bad: FAILED (3 problems)"

# Several files: each gets its verdict; the file that cannot be opened (I/O, 7) decides the status.
run 7 "$LMQ" audit "$good" "$bad" "$tmp/missing.lmq"
has "$good: OK"
has "$bad: FAILED"
has "$tmp/missing.lmq: FAILED (cannot open)"
has "audit: 3 artefacts, 1 passed, 2 failed (io 1, format 1, checksum 0, manifest 0, values 0, verification 0, policy 0)"

# A damaged manifest is refused when the file is opened.
cp "$good" "$bad"
flip "$bad" $(($(u64_at "$good" $((size - 48))) + 20))
run 5 "$LMQ" audit "$bad"
has "manifest checksum mismatch"
has "$bad: FAILED (cannot open)"
run 1 "$LMQ" inspect "$bad"

# A manifest that leaves out a tensor (checksums intact) fails the schema check.
LMQ_WRITE_SAMPLE="$tmp/unlisted.lmq" LMQ_SAMPLE_KIND=unlisted "$SAMPLER"
run 4 "$LMQ" audit "$tmp/unlisted.lmq"
has "$tmp/unlisted.lmq: manifest: tensor blk.0.ffn_up.weight: has no manifest entry"
has "$tmp/unlisted.lmq: FAILED"

# What a loader refuses, in files whose checksums are right: each is named with its rule.
while IFS='|' read -r kind status want; do
    LMQ_WRITE_SAMPLE="$tmp/$kind.lmq" LMQ_SAMPLE_KIND=$kind "$SAMPLER"
    run "$status" "$LMQ" audit "$tmp/$kind.lmq"
    has "$tmp/$kind.lmq: $want"
    has "$tmp/$kind.lmq: FAILED (1 problem)"
done <<'END'
nan_scale|3|values: tensor blk.0.attn_q.weight: scale 0 is nan: scales are finite and >= 0
nan_weight|3|values: tensor blk.0.attn_v.weight: non-finite value nan at element 3
kurtosis|4|manifest: tensor blk.0.attn_q.weight: stats.excess_kurtosis is -3: the schema wants a finite number >= -2
dotdot|3|files: tensor file:../x: file ../x: a carried file's name has no '/' or '\' (byte 2)
tokenizer|3|tokenizer: tokenizer.bin: 
END
LMQ_WRITE_SAMPLE="$tmp/denormal.lmq" LMQ_SAMPLE_KIND=denormal "$SAMPLER"
run 0 "$LMQ" audit "$tmp/denormal.lmq"

# A tokenizer that generate and verify would refuse is refused by convert already: bytes that do
# not parse (random bytes), and stories260K's 512-token tokenizer for a 50257-token GPT-2.
tail -c 3000 "$FIX/stories260K/stories260K.bin" >"$tmp/junk.bin" # fp32 weights: noise
run 1 "$LMQ" convert "$FIX/stories260K/stories260K.bin" --tokenizer "$tmp/junk.bin" -o "$tmp/c.lmq"
has "$tmp/junk.bin: tokenizer for a 512-token model: tokenizer.bin: "
run 1 "$LMQ" convert "$FIX/sotu-gpt2" --tokenizer "$FIX/stories260K/tok512.bin" -o "$tmp/c.lmq"
has "tokenizer for a 50257-token model: tokenizer.bin: token 512 at byte"
[ ! -e "$tmp/c.lmq" ] || fail "convert wrote an artefact with a bad tokenizer"

# Truncations at the header, index, manifest and footer boundaries and every 61 bytes, and
# single-bit flips in every region (header, blobs, padding, index, manifest, footer): every copy
# is audited in one run, which must name each as FAILED and pass none.
index_offset=$(u64_at "$good" $((size - 64)))
manifest_offset=$(u64_at "$good" $((size - 48)))
cuts="0 1 4 63 64 65 $((index_offset - 1)) $index_offset $((index_offset + 8)) $manifest_offset"
cuts="$cuts $((size - 64)) $((size - 16)) $((size - 8)) $((size - 1)) $(seq 100 61 $((size - 1)))"
flips="0 3 4 8 12 16 63 $(seq 64 37 $((size - 1))) $index_offset $((index_offset + 8)) $manifest_offset"
flips="$flips $((size - 64)) $((size - 40)) $((size - 16)) $((size - 9)) $((size - 8)) $((size - 1))"
damaged="$tmp/damaged"
mkdir "$damaged"
python3 - "$good" "$damaged" "$cuts" "$flips" <<'PY'
import sys
good, out, cuts, flips = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
data = open(good, "rb").read()
for n in cuts:
    open(f"{out}/cut-{int(n):06d}.lmq", "wb").write(data[: int(n)])
for pos in flips:
    b = bytearray(data)
    b[int(pos)] ^= 1
    open(f"{out}/flip-{int(pos):06d}.lmq", "wb").write(b)
PY
n=$(find "$damaged" -name '*.lmq' | wc -l)
[ "$n" = $(($(wc -w <<<"$cuts") + $(wc -w <<<"$flips"))) ] || fail "$n damaged copies written"
got=0
"$LMQ" audit "$damaged" >"$tmp/out" 2>&1 || got=$?
[ "$got" -ge 3 ] && [ "$got" -le 7 ] || { cat "$tmp/out" >&2; fail "audit of the damaged copies exited $got, expected 3..7"; }
for f in "$damaged"/*.lmq; do
    grep -qF -- "$f: FAILED" "$tmp/out" || { cat "$tmp/out" >&2; fail "$f: not refused"; }
done
has "audit: $n artefacts, 0 passed, $n failed ("
kinds=$(sed -n 's/^audit: .* failed (\(.*\))$/\1/p' "$tmp/out")

# A tree of good and bad artefacts, audited as one directory: *.lmq files only, in name order at
# every level; names that XML must escape.
tree="$tmp/tree"
mkdir -p "$tree/a/b" "$tree/c" "$tree/empty"
cp "$good" "$tree/a/b/good.lmq"
cp "$good" "$tree/c/good2.lmq"
cp "$tmp/nan_scale.lmq" "$tree/a/nan_scale.lmq"
cp "$tmp/unlisted.lmq" "$tree/c/unlisted.lmq"
odd="$tree/c/odd &<name>\"'.lmq"
cp "$tmp/dotdot.lmq" "$odd"
echo "not an artefact" >"$tree/c/notes.txt"
run 4 "$LMQ" audit "$tree"
[ "$(grep -E ': (OK|FAILED)' "$tmp/out" | sed 's/: \(OK\|FAILED\).*//')" = "$tree/a/b/good.lmq
$tree/a/nan_scale.lmq
$tree/c/good2.lmq
$odd
$tree/c/unlisted.lmq" ] || fail "directory order or contents"
has "$tree/c/unlisted.lmq: manifest: tensor blk.0.ffn_up.weight: has no manifest entry"
has "audit: 5 artefacts, 2 passed, 3 failed (io 0, format 0, checksum 0, manifest 1, values 2, verification 0, policy 0)"
run 2 "$LMQ" audit "$tree/empty"
has "$tree/empty: no *.lmq file under this directory"
run 2 "$LMQ" audit "$good" --format xml
run 3 "$LMQ" audit "$tree/a/nan_scale.lmq" "$tree/a/b"

# JSON: one object, the summary and every artefact with its problems (jansson's stable layout).
run 4 "$LMQ" audit "$tree" --format json --output "$tmp/audit.json"
has "audit: 5 artefacts, 2 passed, 3 failed (io 0, format 0, checksum 0, manifest 1, values 2, verification 0, policy 0)"
j="$tmp/audit.json"
[ "$(head -c1 "$j")" = "{" ] && [ "$(tail -n1 "$j")" = "}" ] || fail "json: not one object"
[ "$(grep -c '"path": ' "$j")" = 5 ] || fail "json: 5 artefacts"
[ "$(grep -c '"status": "passed"' "$j")" = 2 ] || fail "json: 2 passed"
for want in '"artefacts": 5,' '"failed": 3,' '"manifest": 1,' '"values": 2' '"exit": 4' \
    '"tensor": "blk.0.ffn_up.weight",' '"kind": "manifest",' '"check": "values",' \
    '"message": "scale 0 is nan: scales are finite and >= 0"' "\"path\": \"$tree/c/odd &<name>\\\"'.lmq\""; do
    grep -qF -- "$want" "$j" || { cat "$j" >&2; fail "json lacks $want"; }
done
[ "$(tr -cd '{' <"$j" | wc -c)" = "$(tr -cd '}' <"$j" | wc -c)" ] || fail "json: unbalanced braces"
ls "$tmp" | grep -q 'audit.json.tmp' && fail "a temporary file of --output was left behind"

# JUnit: one testsuite, one testcase per artefact and check (10 checks: open, parse, checksum,
# manifest, values, files, tokenizer, policy, verification, expect), one failure per failed check,
# so failures never exceed tests (they were "tests=5 failures=4", a failure per problem); the
# problems of a failed check one a line inside it; every line one well-formed element or problem
# line whose attribute values hold no raw '<', '>', '"' or stray '&'.
run 4 "$LMQ" audit "$tree" --format junit --output "$tmp/audit.xml"
x="$tmp/audit.xml"
FAILED_CHECKS=3 # the JSON's four problems fall in three (artefact, check) pairs
[ "$(grep -c '<testcase ' "$x")" = 50 ] && [ "$(grep -c "<failure " "$x")" = "$FAILED_CHECKS" ] || fail "junit: counts"
[ "$(grep -c '<testcase .*[^/]>$' "$x")" = "$(grep -c '</testcase>' "$x")" ] || fail "junit: unbalanced"
grep -q '^<testsuite name="lmq audit" tests="50" failures="'"$FAILED_CHECKS"'" errors="0" skipped="0">$' "$x" || fail "junit: suite"
attrs='( [a-z]+="[^"<>]*")*'
bad_lines=$(sed -E 's/&(amp|lt|gt|quot|apos|#[0-9]+);//g' "$x" | grep -vE "^(<\?xml version=\"1.0\" encoding=\"UTF-8\"\?>|<testsuite$attrs>|  <testcase$attrs/?>|    <failure$attrs>|[a-z]+: [^<>\"]*|    </failure>|  </testcase>|</testsuite>)\$" || true)
[ -z "$bad_lines" ] || fail "junit: malformed lines: $bad_lines"
grep -qF 'classname="'"$tree"'/c/odd &amp;&lt;name&gt;&quot;&apos;.lmq" name="files">' "$x" || fail "junit: escaped name"
grep -qF '<testcase classname="'"$tree"'/c/unlisted.lmq" name="manifest">' "$x" || fail "junit: the failed check's case"
grep -qF '<failure type="manifest" message="manifest: tensor blk.0.ffn_up.weight: has no manifest entry' "$x" ||
    fail "junit: failure names the check, tensor and rule"
# An artefact that does not open: open fails, the nine checks after it are skipped.
mkdir "$tmp/cut"
head -c 3000 "$good" >"$tmp/cut/cut.lmq"
run 6 "$LMQ" audit "$tmp/cut" --format junit
has '<testsuite name="lmq audit" tests="10" failures="1" errors="0" skipped="9">'
has '<testcase classname="'"$tmp/cut/cut.lmq"'" name="open">'
[ "$(grep -c '<skipped/>' "$tmp/out")" = 9 ] || fail "junit: skipped checks"

# A file name that is not UTF-8 and holds a control byte is reported with '?' in their place, so
# that both reports stay well-formed.
mkdir "$tmp/odd"
cp "$good" "$tmp/odd/"$'x\xff\x01\xed\xa0\x80y.lmq'
run 0 "$LMQ" audit "$tmp/odd" --format json
has "\"path\": \"$tmp/odd/x?????y.lmq\","
run 0 "$LMQ" audit "$tmp/odd" --format junit
has "classname=\"$tmp/odd/x?????y.lmq\" name=\"open\"/>"

# --output replaces its file whole, and is refused (usage, nothing written) when it names an input.
echo stale >"$tmp/audit.xml"
run 0 "$LMQ" audit "$good" --format junit --output "$tmp/audit.xml"
grep -q stale "$tmp/audit.xml" && fail "--output kept old content"
[ "$(grep -c '<testcase classname="'"$good"'" name="[a-z]*"/>' "$tmp/audit.xml")" = 10 ] || fail "junit: passing cases"
run 2 "$LMQ" audit "$tree" --output "$tree/a/b/good.lmq"
has "good.lmq"
cmp -s "$good" "$tree/a/b/good.lmq" || fail "--output overwrote an audited file"
run 2 "$LMQ" audit "$good" -o "$good" --format json
cmp -s "$good" "$tree/a/b/good.lmq" || fail "--output overwrote the audited file"
run 2 "$LMQ" audit "$good" --output "$tree"

# lmq manifest: the YAML exactly as inspect shows it; --json the same document.
run 0 "$LMQ" inspect "$good"
awk '/^# manifest /{f=1;next} /^# tensors /{f=0} f' "$tmp/out" >"$tmp/inspect.yaml"
run 0 "$LMQ" manifest "$good"
cmp -s "$tmp/out" "$tmp/inspect.yaml" || fail "manifest differs from inspect's"
[ "$(wc -c <"$tmp/out")" = "$(sed -n 's/^# manifest (\([0-9]*\) bytes)$/\1/p' "$tmp/inspect")" ] || fail "manifest size"
run 0 "$LMQ" manifest "$good" --json
n_names=0
for name in $(awk '$1 ~ /\./ && $2 ~ /^\[/ { sub(/^file:/, "", $1); print $1 }' "$tmp/inspect"); do
    has "\"name\": \"$name\","
    n_names=$((n_names + 1))
done
[ "$n_names" = 14 ] || fail "inspect's table: $n_names names"
has '"format_version": 1,'
has '"tied_embedding": true,'
has '"path": "in-memory test model: \"quoted\", colons: yes",'
has '"notes": "random weights\nconstant norms\n"'
run 1 "$LMQ" manifest "$tmp/missing.lmq"
run 2 "$LMQ" manifest
run 2 "$LMQ" manifest "$good" --yaml

# Usage errors.
run 2 "$LMQ" audit
run 2 "$LMQ" audit --policy x.yaml "$good"
run 0 "$LMQ" audit --help
run 2 "$LMQ" inspect
run 2 "$LMQ" inspect "$good" "$good"

echo "audit.sh: ok ($n damaged copies refused: $kinds)"
