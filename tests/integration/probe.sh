#!/usr/bin/env bash
# lmq probe end to end, on a small buffer: the text and --json outputs must carry positive
# rates (no speed is asserted: machines differ), and bad options exit 2.
. "$(dirname "$0")/lib.bash"

run() {
    local want=$1 got=0
    shift
    "$@" >"$tmp/out" 2>"$tmp/err" || got=$?
    [ "$got" = "$want" ] || { cat "$tmp/err" >&2; fail "'$*' exited $got, expected $want"; }
}
positive() { awk -v x="$1" 'BEGIN { exit !(x + 0 > 0) }' || fail "$2: '$1' is not a positive number"; }

run 0 "$LMQ" probe --mib 16 --rounds 2
one=$(sed -n 's/^  1 thread: *\([0-9.]*\) GB\/s$/\1/p' "$tmp/out")
all=$(sed -n 's/^  [0-9]* threads: *\([0-9.]*\) GB\/s$/\1/p' "$tmp/out")
positive "$one" "1 thread"
positive "$all" "all threads"

run 0 "$LMQ" probe --mib 16 --rounds 2 --threads 2 --json
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert set(r) == {"threads", "read_gbps_1", "read_gbps_all"}, r
assert r["threads"] == 2, r
assert r["read_gbps_1"] > 0 and r["read_gbps_all"] > 0, r
' "$tmp/out" || fail "--json: $(cat "$tmp/out")"

run 0 "$LMQ" probe --mib 8 --rounds 1 --threads 1 --json
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["threads"] == 1, r' "$tmp/out" ||
    fail "--threads 1: $(cat "$tmp/out")"

# --device cuda: a positive copy rate where a device is present; otherwise exit 1 saying why
got=0
"$LMQ" probe --device cuda --mib 64 --rounds 2 --json >"$tmp/out" 2>"$tmp/err" || got=$?
if [ "$got" = 0 ]; then
    python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["copy_gbps"] > 0 and r["device"], r' \
        "$tmp/out" || fail "--device cuda --json: $(cat "$tmp/out")"
else
    [ "$got" = 1 ] || fail "--device cuda exited $got"
    grep -qE '^lmq probe: cuda: (no CUDA device|lmq was built without CUDA \(nvcc and cuBLAS not found\))$' "$tmp/err" ||
        fail "--device cuda: $(cat "$tmp/err")"
fi

for bad in "--device tpu" "--mib 0" "--mib x" "--threads -1" "--rounds 0" "--bogus" "--json=1" "extra"; do
    # shellcheck disable=SC2086 # split the option from its value
    run 2 "$LMQ" probe $bad
done
run 0 "$LMQ" probe --help
echo "probe.sh: ok"
