#!/usr/bin/env bash
# lmq inspect and lmq audit end to end. A sample artefact (written by the container test
# program's sample mode) must pass; copies of it that are truncated, have one bit flipped
# anywhere, or carry a manifest that misses a tensor must fail with the damage named.
# Exit codes: 0 all pass, 1 a check failed, 2 usage error.
. "$(dirname "$0")/lib.bash"

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
has "$good: OK (10 entries, checksums, manifest, values, file names and tokenizer verified)"
run 0 "$LMQ" inspect "$good"
has "format_version: 1"
has "reason: \"plain conversion: no recipe applied\""
cp "$tmp/out" "$tmp/inspect"
grep -q '^blk.0.attn_q.weight  *\[8, 8\]  *fp32  *fp32  *none  *256  *256 ' "$tmp/inspect" || fail "tensor table row"
grep -q '^file:notes.txt  *\[400\]  *bytes  *-  *zstd ' "$tmp/inspect" || fail "zstd row"
offset_of() { awk -v n="$1" '$1 == n { print $(NF - 1) }' "$tmp/inspect"; }

# Damaged tensors are named, each on its own line, and the whole-file checksum fails too.
bad="$tmp/bad.lmq"
cp "$good" "$bad"
flip "$bad" $(($(offset_of blk.0.attn_q.weight) + 5))
flip "$bad" $(($(offset_of file:notes.txt) + 9))
run 1 "$LMQ" audit "$bad"
has "$bad: checksum: tensor blk.0.attn_q.weight: checksum mismatch"
has "$bad: checksum: tensor file:notes.txt: "
has "$bad: checksum: whole-file checksum mismatch"
has "$bad: FAILED (3 problems)"

# Several files: each gets its verdict; one failure makes the exit status 1.
run 1 "$LMQ" audit "$good" "$bad" "$tmp/missing.lmq"
has "$good: OK"
has "$bad: FAILED"
has "$tmp/missing.lmq: FAILED (cannot open)"

# A damaged manifest is refused when the file is opened.
cp "$good" "$bad"
flip "$bad" $(($(u64_at "$good" $((size - 48))) + 20))
run 1 "$LMQ" audit "$bad"
has "manifest checksum mismatch"
has "$bad: FAILED (cannot open)"
run 1 "$LMQ" inspect "$bad"

# A manifest that leaves out a tensor (checksums intact) fails the schema check.
LMQ_WRITE_SAMPLE="$tmp/unlisted.lmq" LMQ_SAMPLE_KIND=unlisted "$SAMPLER"
run 1 "$LMQ" audit "$tmp/unlisted.lmq"
has "$tmp/unlisted.lmq: manifest: tensor out_norm.weight: has no manifest entry"
has "$tmp/unlisted.lmq: FAILED"

# What a loader refuses, in files whose checksums are right: each is named with its rule.
while IFS='|' read -r kind want; do
    LMQ_WRITE_SAMPLE="$tmp/$kind.lmq" LMQ_SAMPLE_KIND=$kind "$SAMPLER"
    run 1 "$LMQ" audit "$tmp/$kind.lmq"
    has "$tmp/$kind.lmq: $want"
    has "$tmp/$kind.lmq: FAILED (1 problem)"
done <<'END'
nan_scale|values: tensor blk.0.attn_q.weight: scale 0 is nan: scales are finite and >= 0
nan_weight|values: tensor blk.0.attn_v.weight: non-finite value nan at element 3
kurtosis|manifest: tensor blk.0.attn_q.weight: stats.excess_kurtosis is -3: the schema wants a finite number >= -2
dotdot|files: tensor file:../x: file ../x: a carried file's name has no '/' or '\' (byte 2)
tokenizer|tokenizer: tokenizer.bin: 
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

# Truncations: at the header, index, manifest and footer boundaries and every 61 bytes.
index_offset=$(u64_at "$good" $((size - 64)))
manifest_offset=$(u64_at "$good" $((size - 48)))
points="0 1 4 63 64 65 $((index_offset - 1)) $index_offset $((index_offset + 8)) $manifest_offset"
points="$points $((size - 64)) $((size - 16)) $((size - 8)) $((size - 1)) $(seq 100 61 $((size - 1)))"
n=0
for len in $points; do
    head -c "$len" "$good" >"$bad"
    run 1 "$LMQ" audit "$bad"
    has "$bad: FAILED"
    n=$((n + 1))
done

# Single-bit flips in every region: header, blobs, padding, index, manifest, footer.
points="0 3 4 8 12 16 63 $(seq 64 37 $((size - 1))) $index_offset $((index_offset + 8)) $manifest_offset"
points="$points $((size - 64)) $((size - 40)) $((size - 16)) $((size - 9)) $((size - 8)) $((size - 1))"
for pos in $points; do
    cp "$good" "$bad"
    flip "$bad" "$pos"
    run 1 "$LMQ" audit "$bad"
    has "$bad: FAILED"
    n=$((n + 1))
done

# Usage errors.
run 2 "$LMQ" audit
run 2 "$LMQ" audit --policy x.yaml "$good"
run 0 "$LMQ" audit --help
run 2 "$LMQ" inspect
run 2 "$LMQ" inspect "$good" "$good"

echo "audit.sh: ok ($n damaged copies refused)"
