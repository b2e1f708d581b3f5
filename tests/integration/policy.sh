#!/usr/bin/env bash
# lmq audit --policy / --expect and lmq diff end to end, on a synthetic GPT-2-shaped model: each
# failure kind gives its documented exit code and names its cause. README "Audit in CI": 0 pass,
# 2 usage, 5 checksum, 6 format, 7 I/O, 8 policy (a --policy rule, a difference from --expect);
# lmq diff: 0 equal, 1 different, 2 usage, 6 not a manifest, 7 unreadable.
. "$(dirname "$0")/lib.bash"

CI_INT4=manifests/policies/ci-int4.yaml
mkdir -p "$tmp/ck" "$tmp/a" "$tmp/b" "$tmp/exp"
"$LMQ" synth --shape tiny-gpt2 -o "$tmp/ck" >/dev/null
"$LMQ" convert "$tmp/ck" -o "$tmp/a/fp32.lmq" >/dev/null
"$LMQ" quantize "$tmp/a/fp32.lmq" --recipe recipes/int4-g32.yaml -o "$tmp/a/int4.lmq" >/dev/null
"$LMQ" quantize "$tmp/a/fp32.lmq" --recipe recipes/int8-channel.yaml -o "$tmp/b/int8.lmq" >/dev/null

# A policy the artefact meets, and one it breaks: the rule, the tensor and the policy are named.
run 0 "$LMQ" audit "$tmp/a/int4.lmq" --policy "$CI_INT4"
has "$tmp/a/int4.lmq: OK"
run 8 "$LMQ" audit "$tmp/b/int8.lmq" --policy "$CI_INT4"
has "$tmp/b/int8.lmq: policy: tensor blk.0.attn_qkv.weight: $CI_INT4: schemes: is 'int8 per-channel'; tensors 'blk.*.weight' allow int4, int3"
has "$tmp/b/int8.lmq: policy: $CI_INT4: max_linear_bpw: the linear layers store 8.188 bits per weight, above 4.6" # qkv, out, up at 8 + 16/64 bits, down at 8 + 16/256, by elements
has "audit: 1 artefact, 0 passed, 1 failed (io 0, format 0, checksum 0, manifest 0, values 0, verification 0, policy 1)"
# The fp32 conversion has no recipe; --policy repeats, and every policy is applied.
printf 'max_bpw: 8\n' >"$tmp/small.yaml"
run 8 "$LMQ" audit "$tmp/a/fp32.lmq" --policy "$CI_INT4" --policy="$tmp/small.yaml"
has "$tmp/a/fp32.lmq: policy: $CI_INT4: require: the manifest has no recipe section"
has "$tmp/a/fp32.lmq: policy: $tmp/small.yaml: max_bpw: the model stores 32 bits per weight, above 8"
# strict.yaml pins the demo checkpoint: this one is another.
run 8 "$LMQ" audit "$tmp/a/int4.lmq" --policy manifests/policies/strict.yaml
has "strict.yaml: source_checksum: the source checkpoint is "
has "strict.yaml: require: the manifest has no calibration section"

# Machine-readable reports carry policy problems like any other.
run 8 "$LMQ" audit "$tmp/b" --policy "$CI_INT4" --format json
for want in '"kind": "policy",' '"check": "policy",' '"tensor": "blk.1.ffn_down.weight",' '"policy": 1' '"exit": 8'; do
    has "$want"
done
run 8 "$LMQ" audit "$tmp/b" --policy "$CI_INT4" --format junit
has '<failure type="policy" message="policy: tensor blk.0.attn_out.weight: '

# A corrupted byte outranks the policy: the checksum (5) names the tensor.
cp "$tmp/a/int4.lmq" "$tmp/bad.lmq"
printf '\x55' | dd of="$tmp/bad.lmq" bs=1 seek=200 conv=notrunc status=none
run 5 "$LMQ" audit "$tmp/bad.lmq" --policy "$CI_INT4"
has "$tmp/bad.lmq: checksum: tensor "
has "checksum mismatch"

# A policy that does not load is bad input: exit 2, naming file, line and key.
printf 'max_bpw: 4\nmax_rel_eror: 0.1\n' >"$tmp/typo.yaml"
run 2 "$LMQ" audit "$tmp/a/int4.lmq" --policy "$tmp/typo.yaml"
has "$tmp/typo.yaml:2: unknown key 'max_rel_eror'"
printf 'verification:\n  kl_mean_max: 0.1\n  text_checksum: "12345"\n' >"$tmp/short.yaml"
run 2 "$LMQ" audit "$tmp/a/int4.lmq" --policy "$tmp/short.yaml"
has "$tmp/short.yaml:3: verification.text_checksum"
printf 'verification:\n  kl_mean: 0.1\n' >"$tmp/vtypo.yaml"
run 2 "$LMQ" audit "$tmp/a/int4.lmq" --policy "$tmp/vtypo.yaml"
has "$tmp/vtypo.yaml:2: verification: unknown key 'kl_mean'"
# A record the policy requires and the artefact lacks: kind verification, exit 9, the record named.
run 9 "$LMQ" audit "$tmp/a/int4.lmq" --policy manifests/policies/verified.yaml
has "$tmp/a/int4.lmq: verification: no verification record for $tmp/a/int4.lmq: $tmp/a/int4.lmq.verify.json"
run 2 "$LMQ" audit "$tmp/a/int4.lmq" --policy
run 2 "$LMQ" audit "$tmp/a/int4.lmq" --expect "$tmp/nowhere"

# Expected manifests: equal passes; a changed recipe is a difference (8) naming the key; an
# artefact without an expected manifest in the folder fails too.
"$LMQ" manifest "$tmp/a/int4.lmq" >"$tmp/exp/int4.yaml"
"$LMQ" manifest "$tmp/a/fp32.lmq" >"$tmp/exp/fp32.yaml"
run 0 "$LMQ" audit "$tmp/a" --expect "$tmp/exp"
has "audit: 2 artefacts, 2 passed, 0 failed"
sed 's/^description: .*/description: the same rules, said differently/' recipes/int4-g32.yaml >"$tmp/int4-v2.yaml"
"$LMQ" quantize "$tmp/a/fp32.lmq" --recipe "$tmp/int4-v2.yaml" -o "$tmp/b/int4.lmq" >/dev/null
run 8 "$LMQ" audit "$tmp/b/int4.lmq" --expect "$tmp/exp"
has "$tmp/b/int4.lmq: expect: recipe.checksum: expected "
has "$tmp/b/int4.lmq: expect: recipe.text: expected \"name: int4-g32\\ndescription: int4 linear-layer weights"
has "found \"name: int4-g32\\ndescription: the same rules, said differently"
run 8 "$LMQ" audit "$tmp/b/int4.lmq" --expect "$tmp/exp/fp32.yaml"
has "$tmp/b/int4.lmq: expect: tensor blk.0.attn_qkv.weight: scheme: expected \"fp32\", found \"int4 g32\""
run 8 "$LMQ" audit "$tmp/b/int8.lmq" --expect "$tmp/exp"
has "$tmp/b/int8.lmq: expect: $tmp/exp/int8.yaml: "
# An expected manifest that is not one is damaged input (format, 6).
printf 'format_version: 1\n' >"$tmp/exp/int8.yaml"
run 6 "$LMQ" audit "$tmp/b/int8.lmq" --expect "$tmp/exp"
has "manifest: missing key"

# lmq diff: the same engine on its own.
run 0 "$LMQ" diff "$tmp/a/int4.lmq" "$tmp/exp/int4.yaml"
has "are equal"
run 1 "$LMQ" diff "$tmp/a/int4.lmq" "$tmp/b/int4.lmq"
has "recipe.text: "
has "differ: 2 differences"
run 1 "$LMQ" diff "$tmp/a/int4.lmq" "$tmp/b/int8.lmq" --json
has '"equal": false,'
has '"tensor": "blk.0.ffn_up.weight",'
has '"key": "scheme",'
has '"a": "int4 g32",'
has '"key": "checksum",'
# Values, not JSON inside strings: numbers are numbers.
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["differences"]
assert all(not (isinstance(x[s], str) and x[s][:1] in "\"{[") for x in d for s in "ab"), d
assert any(isinstance(x["a"], (int, float)) and x["key"] == "bits_per_weight" for x in d), d
' "$tmp/out" || fail "diff --json: values as JSON values: $(cat "$tmp/out")"
run 1 "$LMQ" diff "$tmp/a/int4.lmq" "$tmp/b/int8.lmq" --tolerance 100
grep -q ': checksum: ' "$tmp/out" && fail "byte checksums compared under a tolerance"
run 2 "$LMQ" diff "$tmp/a/int4.lmq"
run 2 "$LMQ" diff "$tmp/a/int4.lmq" "$tmp/b/int4.lmq" --tolerance -1
run 7 "$LMQ" diff "$tmp/a/int4.lmq" "$tmp/missing.lmq"
head -c 1000 "$tmp/a/int4.lmq" >"$tmp/cut.lmq"
run 6 "$LMQ" diff "$tmp/cut.lmq" "$tmp/a/int4.lmq"
run 6 "$LMQ" diff "$tmp/a/int4.lmq" "$tmp/exp/int8.yaml"
echo "policy.sh: ok"
