#!/usr/bin/env bash
# --device for lmq verify and lmq generate, and verify's --batch sweep: the CPU by default and by
# name, with the same results; cuda runs where a device is present (the report says so, the
# sweep has its rows) and is refused with the reason elsewhere (exit 1, as other runtime
# errors); bad values are usage errors (exit 2).
. "$(dirname "$0")/lib.bash"
need_fixtures

"$LMQ" convert "$FIX/stories260K/stories260K.bin" -o "$tmp/s.lmq" >/dev/null
# The first documents of the text: the reports are compared with each other, not with a golden value.
text="$tmp/text.txt"
head -c 40000 "$FIX/text/tinystories-valid.txt" >"$text"

# exactly this on stderr and this exit status
refused() {
    local want=$1 msg=$2 got=0
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err" || got=$?
    [ "$got" = "$want" ] || { cat "$tmp/err" >&2; fail "'$*' exited $got, expected $want"; }
    grep -qxF -- "$msg" "$tmp/err" || fail "'$*' said '$(cat "$tmp/err")', expected '$msg'"
}

# The CPU by name is the default: the same report, marked cpu.
run 0 "$LMQ" verify "$tmp/s.lmq" --text "$text" --ctx 64 --bandwidth 10 --json "$tmp/default.json"
run 0 "$LMQ" verify "$tmp/s.lmq" --text "$text" --ctx 64 --bandwidth 10 --device cpu --json "$tmp/cpu.json"
python3 - "$tmp/default.json" "$tmp/cpu.json" <<'PY' || fail "--device cpu differs from the default"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["device"] == b["device"] == "cpu", (a["device"], b["device"])
assert "device_name" not in b and "copy_gbps" not in b
assert a["rows"][0]["ppl"] == b["rows"][0]["ppl"] > 1, (a["rows"][0]["ppl"], b["rows"][0]["ppl"])
assert "batch_sweep" not in b["rows"][0]
PY
run 0 "$LMQ" generate "$tmp/s.lmq" -p "Once upon" -n 12
cp "$tmp/out" "$tmp/gen-default"
run 0 "$LMQ" generate "$tmp/s.lmq" -p "Once upon" -n 12 --device cpu
cmp -s <(head -1 "$tmp/out") <(head -1 "$tmp/gen-default") || fail "generate --device cpu differs from the default"

# The sweep on the CPU: its rows (tests/integration/kv_cache.sh checks their fields).
run 0 "$LMQ" verify "$tmp/s.lmq" --speed-only --ctx 16 --batch 1,3 --prompt-len 8 --new-tokens 2
has "batch sweep: TTFT"

# Usage errors: a device that is no row, sizes that are not 1..4096.
refused 2 "lmq verify: --device 'tpu' is not cpu or cuda" "$LMQ" verify "$tmp/s.lmq" --speed-only --device tpu
refused 2 "lmq generate: --device 'gpu' is not cpu or cuda" "$LMQ" generate "$tmp/s.lmq" --device gpu
refused 2 "lmq verify: --batch: at most 8 sizes" "$LMQ" verify "$tmp/s.lmq" --speed-only --batch 1,2,3,4,5,6,7,8,9
refused 2 "lmq verify: --batch: no sizes in ','" "$LMQ" verify "$tmp/s.lmq" --speed-only --batch ,
for bad in 0 1,x 4097 1,-2; do
    got=0
    "$LMQ" verify "$tmp/s.lmq" --speed-only --batch "$bad" >"$tmp/out" 2>"$tmp/err" || got=$?
    [ "$got" = 2 ] && grep -q -- "--batch" "$tmp/err" || fail "--batch $bad: exit $got, $(cat "$tmp/err")"
done
for opt in --prompt-len --new-tokens; do
    got=0
    "$LMQ" verify "$tmp/s.lmq" --speed-only "$opt" 0 >"$tmp/out" 2>"$tmp/err" || got=$?
    [ "$got" = 2 ] || fail "$opt 0 exited $got"
done

# cuda: where the driver sees a device, the pass runs there; elsewhere the reason, exit 1.
if [ ! -e "$(dirname "$LMQ")/liblmq_cuda.so" ] && [ -z "${LMQ_CUDA_PLUGIN:-}" ]; then
    why="lmq was built without CUDA (nvcc and cuBLAS not found)"
else
    why="no CUDA device"
fi
got=0
"$LMQ" verify "$tmp/s.lmq" --text "$text" --ctx 64 --device cuda --batch 1,3 --prompt-len 32 --new-tokens 4 \
    --json "$tmp/cuda.json" >"$tmp/out" 2>"$tmp/err" || got=$?
if [ "$got" = 0 ]; then
    python3 - "$tmp/cpu.json" "$tmp/cuda.json" <<'PY' || fail "verify --device cuda: $(cat "$tmp/cuda.json")"
import json, sys
cpu, dev = (json.load(open(p)) for p in sys.argv[1:])
assert dev["device"] == "cuda" and "sm_" in dev["device_name"] and dev["copy_gbps"] > 0, dev
assert abs(dev["rows"][0]["ppl"] / cpu["rows"][0]["ppl"] - 1) <= 1e-3, (dev["rows"][0]["ppl"], cpu["rows"][0]["ppl"])
sweep = dev["rows"][0]["batch_sweep"]
assert [b["batch"] for b in sweep] == [1, 3], sweep
assert all(b["prompt_tokens"] == 32 and b["new_tokens"] == 4 and b["tokens_per_s"] > 0 and b["ttft_s"] > 0
           for b in sweep), sweep
PY
    run 0 "$LMQ" generate "$tmp/s.lmq" -p "Once upon" -n 12 --device cuda
    has "decode"
    # the device's cache is fp32 only: another format is refused with why
    run 1 "$LMQ" verify "$tmp/s.lmq" --text "$text" --ctx 64 --device cuda --kv int8
    has "the device's KV cache is fp32 only"
else
    [ "$got" = 1 ] || fail "verify --device cuda exited $got"
    grep -qxF "lmq verify: --device cuda: $why" "$tmp/err" || fail "verify --device cuda: $(cat "$tmp/err")"
    refused 1 "lmq generate: --device cuda: $why" "$LMQ" generate "$tmp/s.lmq" --device cuda -n 2
fi
echo "device.sh: ok"
