#!/usr/bin/env bash
# lmq budget end to end: the 7B shape's numbers (worked out in tests/test_budget.c), a fixture
# artefact's, a lengths file, --json, and what it refuses (usage 2, a bad file 1 naming the line).
. "$(dirname "$0")/lib.bash"
need_fixtures

run 0 "$LMQ" budget --shape llama-7b --memory 80GiB --ctx 4096
has "weights (stored)     13477363712 bytes"
has "KV per token              524288 bytes  (fp16)"
has "sequences at ctx              33"
has "contiguous: 33 sequences fit, 49.99% of the reserved KV unused"
has "paged (16): 67 sequences fit, 0.36% of the reserved KV unused"

# int8 KV, a scale per block of 32: 2·32·32·(128 + 4·2) = 278528 bytes a token
run 0 "$LMQ" budget --shape llama-7b --memory 80GiB --kv int8
has "KV per token              278528 bytes  (int8)"

# --json carries the same integers; --mean-len 100 is uniform over 1..199 (mean 100)
run 0 "$LMQ" budget --shape llama-7b --memory 85899345920 --mean-len 100 --page 32 --json
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["memory"] == 80 * 2**30, r
assert r["model"]["source"] == "shape llama-7b, fp16 matrices", r
assert r["kv_bytes_per_token"] == 524288 and r["seqs_at_ctx"] == 33, r
L = r["lengths"]
assert L["n"] == 199 and L["mean"] == 100 and L["used_tokens"] == 199 * 100, r
# pages of 32 over 1..199: sum of ceil(L/32) = 32*(1+...+6) + 7*7 = 672 + 49 = 721 pages
assert L["paged_tokens"] == 721 * 32 and L["contiguous_tokens"] == 199 * 4096, r
# free pages = 72421982208 // (32*524288) = 4316; sequences = 4316*199 // 721 = 1191
assert r["seqs_paged"] == 1191, r
' "$tmp/out" || fail "--json: $(cat "$tmp/out")"

# A fixture artefact: stories260K's 1040128 bytes of fp32 weights, 640 bytes of KV a token;
# 16 MiB at ctx 512: (16777216 - 1040128) // (512 * 640) = 48 sequences.
run 0 "$LMQ" convert "$FIX/stories260K/stories260K.bin" -o "$tmp/s.lmq"
printf '# lengths\n1 16\n17\n\n100  # last\n' >"$tmp/len.txt"
run 0 "$LMQ" budget "$tmp/s.lmq" --memory 16MiB --ctx 512 --lengths "$tmp/len.txt"
has "weights (stored)         1040128 bytes"
has "KV per token                 640 bytes  (fp16)"
has "lengths: 4 lengths from $tmp/len.txt, mean 33.5 tokens"
has "contiguous: 48 sequences fit, 93.46% of the reserved KV unused"
has "paged (16): 558 sequences fit, 23.86% of the reserved KV unused"

# one line longer than any buffer: 3000 lengths of 17 (2 pages of 16 each), ΣL = 51000
python3 -c 'print(" ".join(["17"] * 3000))' >"$tmp/long.txt"
run 0 "$LMQ" budget "$tmp/s.lmq" --memory 16MiB --ctx 512 --lengths "$tmp/long.txt" --json
python3 -c '
import json, sys
L = json.load(open(sys.argv[1]))["lengths"]
assert L["n"] == 3000 and L["used_tokens"] == 51000 and L["paged_tokens"] == 3000 * 32, L
' "$tmp/out" || fail "long line: $(cat "$tmp/out")"

printf '3\n9 600\n' >"$tmp/bad.txt"
run 1 "$LMQ" budget "$tmp/s.lmq" --memory 16MiB --ctx 512 --lengths "$tmp/bad.txt"
has "bad.txt:2: length '600' is not an integer in 1..512"
run 1 "$LMQ" budget "$tmp/s.lmq" --memory 1MB
has "do not fit"
run 1 "$LMQ" budget "$tmp/missing.lmq" --memory 1GiB

for bad in "--shape llama-7b" "--memory 80GiB" "--shape nope --memory 1GiB" "--shape llama-7b --memory 80XB" \
    "--shape llama-7b --memory 80GiB --kv q4_0" "--shape llama-7b --memory 80GiB --page 0" \
    "--shape llama-7b --memory 80GiB --mean-len 3000" "--shape llama-7b --memory 1GiB --weights int9" \
    "--shape llama-7b --memory 1GiB --group 64" "$tmp/s.lmq --shape llama-7b --memory 1GiB" \
    "$tmp/s.lmq --memory 1GiB --weights fp16" "--shape llama-7b --memory 1GiB --lengths x --mean-len 3"; do
    # shellcheck disable=SC2086 # split the options from their values
    run 2 "$LMQ" budget $bad
done
run 0 "$LMQ" budget --help

# A lengths file that is not a regular file is refused at once, as every input: a FIFO no one
# writes (read, it would block forever) and a character device (endless bytes). The timeout
# keeps a regression from hanging the script.
mkfifo "$tmp/lengths.fifo"
for f in "$tmp/lengths.fifo" /dev/zero; do
    run 1 timeout 20 "$LMQ" budget "$tmp/s.lmq" --memory 16MiB --ctx 512 --lengths "$f"
    has "lmq budget: $f: not a regular file"
done
echo "budget.sh: ok"
