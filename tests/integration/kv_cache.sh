#!/usr/bin/env bash
# The quantised KV cache end to end: verify --kv every format on stories260K and sotu-gpt2
# against the fp32 cache (fp16's KL below int8's below int4's, rows in the JSON with the cache's
# bytes per token, which lmq budget --kv gives the same), generate with each, a bad format
# refused naming the valid ones; the batch sweep on the CPU. (Batched logits bit for bit those
# of each sequence alone: tests/test_runtime.c, batch_decode_equals_alone.)
. "$(dirname "$0")/lib.bash"
need_fixtures

"$LMQ" convert "$FIX/stories260K/stories260K.bin" -o "$tmp/s.lmq" >/dev/null || fail "convert stories260K"
"$LMQ" convert "$FIX/sotu-gpt2" -o "$tmp/g.lmq" >/dev/null || fail "convert sotu-gpt2"
head -c 6000 "$FIX/text/tinystories-valid.txt" >"$tmp/s.txt"
# GPT-2's 50257-way rows dominate: a third of the text in the sanitizer build (memory, not numbers)
head -c $([ -n "${LMQ_SAN:-}" ] && echo 2000 || echo 6000) "$FIX/text/sotu-eval.txt" >"$tmp/g.txt"

for m in s g; do
    run 0 "$LMQ" verify "$tmp/$m.lmq" --kv fp32,fp16,bf16,fp8,int8,int4 --text "$tmp/$m.txt" --ctx 64 --threads 1 \
        --json "$tmp/$m.json"
    has "fp32 kv int4"
    for f in fp32 fp16 bf16 fp8 int8 int4; do
        "$LMQ" budget "$tmp/$m.lmq" --memory 1GiB --kv $f --json >"$tmp/b-$f.json" || fail "budget --kv $f"
    done
    python3 - "$tmp/$m.json" "$tmp" <<'PY' || fail "$m: verify --kv rows"
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
by = {r["kv_cache"]: r for r in rows[1:]}
assert rows[0]["kv_cache"] == "fp32" and rows[0]["is_reference"], rows[0]
assert sorted(by) == sorted(["fp32", "fp16", "bf16", "fp8", "int8", "int4"]), sorted(by)
assert by["fp32"]["kl_mean"] == 0 and by["fp32"]["top1"] == 1, by["fp32"]   # the same cache: the same bits
kl = {f: r["kl_mean"] for f, r in by.items()}
assert 0 < kl["fp16"] < kl["int8"] < kl["int4"], kl
assert kl["fp16"] < 1e-5 and kl["bf16"] < kl["fp8"], kl
for f, r in by.items():
    budget = json.load(open(f"{sys.argv[2]}/b-{f}.json"))["kv_bytes_per_token"]
    assert r["kv_bytes_per_token"] == budget, (f, r["kv_bytes_per_token"], budget)
b = {f: r["kv_bytes_per_token"] for f, r in by.items()}
assert b["fp32"] == 2 * b["fp16"] == 2 * b["bf16"] == 4 * b["fp8"] and b["fp8"] < b["int8"], b
assert b["int4"] < b["int8"], b
PY
done

# per-block scales: stories260K's heads of 8 are one block each (8 codes + a 2-byte scale):
# 2·5 layers·4 kv heads·(8 + 2) = 400 bytes a token in int8, (4 + 2) · 40 = 240 in int4
run 0 "$LMQ" budget "$tmp/s.lmq" --memory 1GiB --kv int8
has "KV per token                 400 bytes  (int8)"
run 0 "$LMQ" budget "$tmp/s.lmq" --memory 1GiB --kv int4
has "KV per token                 240 bytes  (int4)"

# keys and values apart: the row names both
run 0 "$LMQ" verify "$tmp/s.lmq" --kv-k int8 --kv-v fp16 --text "$tmp/s.txt" --ctx 64 --threads 1
has "fp32 kv int8/fp16"

for f in fp16 bf16 fp8 int8 int4; do
    run 0 "$LMQ" generate "$tmp/s.lmq" -p "Once upon a time" -n 12 --kv $f --threads 1
    [ "$(head -c 20 "$tmp/out" | wc -c)" -eq 20 ] && has "Once upon a time" || fail "generate --kv $f"
done

for cmd in "verify $tmp/s.lmq --text $tmp/s.txt --kv q8_0" "verify $tmp/s.lmq --text $tmp/s.txt --kv-v int3" \
    "generate $tmp/s.lmq --kv f16" "budget $tmp/s.lmq --memory 1GiB --kv q4_0"; do
    # shellcheck disable=SC2086 # split the options from their values
    run 2 "$LMQ" $cmd
    has "fp32, fp16, bf16, fp8, int8, int4"
done
run 2 "$LMQ" verify "$tmp/s.lmq" --text "$tmp/s.txt" --kv int8 --record
has "not with --kv"

# the batch sweep on the CPU: a row per size with its TTFT, step time and aggregate rate
run 0 "$LMQ" verify "$tmp/g.lmq" --speed-only --ctx 32 --batch 1,4 --prompt-len 16 --new-tokens 4 --threads 1 \
    --json "$tmp/batch.json"
python3 - "$tmp/batch.json" <<'PY' || fail "batch sweep JSON"
import json, sys
sweep = json.load(open(sys.argv[1]))["rows"][0]["batch_sweep"]
assert [s["batch"] for s in sweep] == [1, 4], sweep
for s in sweep:
    assert s["prompt_tokens"] == 16 and s["new_tokens"] == 4, s
    assert s["ttft_s"] > 0 and s["token_ms"] > 0 and s["tokens_per_s"] > 0, s
PY
echo "$SCRIPT: PASS"
