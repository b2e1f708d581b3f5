#!/usr/bin/env bash
# make bench: speed and memory at real shapes, every figure measured in this one run.
#   1. per shape (synthetic checkpoints written by `lmq synth`: random weights, speed and scale
#      only): convert and quantise, each with its time, fp32 input rate and peak RSS; then
#      `lmq verify --speed-only` of the artefacts: prefill and decode tok/s, their ratios to
#      fp32, the weight bytes a decoded token reads and decode's fraction of the read roofline;
#   2. one output-projection-sized matrix in each encoding at 1 and 512 tokens (bench_linear);
#   3. the fixture models' forward pass at 1 and 2 threads (bench_runtime).
#   Per shape of BENCH_BATCH_SHAPES (default gpt2-124m), the batch sweep on the CPU: fp32, int8
#   and int4-g128 with BENCH_BATCH sequences (1,4,16) of 64 prompt and 16 new tokens.
# BENCH_SHAPES (default "gpt2-124m llama-1b"), BENCH_THREADS (2), BENCH_DIR (/tmp/lmq-bench;
# about 12 GB for both shapes, removed at the end unless BENCH_KEEP=1).
set -euo pipefail
cd "$(dirname "$0")/../.."
LMQ=${LMQ:-build/lmq}
BUILD=${BUILD:-build}
SHAPES=${BENCH_SHAPES:-gpt2-124m llama-1b}
THREADS=${BENCH_THREADS:-2}
BATCH_SHAPES=${BENCH_BATCH_SHAPES:-gpt2-124m}
BATCH=${BENCH_BATCH:-1,4,16}
DIR=${BENCH_DIR:-/tmp/lmq-bench}
mkdir -p "$DIR"
[ "${BENCH_KEEP:-0}" = 1 ] || trap 'rm -rf "$DIR"' EXIT

# name recipe: the artefacts every shape is measured in.
VARIANTS=(
    "fp16 tests/bench/recipes/fp16-all.yaml"
    "int8 tests/bench/recipes/int8-all.yaml"
    "w8a8 tests/bench/recipes/w8a8-all.yaml"
    "int4-g128 recipes/w4a16.yaml"
    "int4-g128-a8b recipes/w4a8-block.yaml"
    "int4-g32 tests/bench/recipes/w4a16-g32.yaml"
)

# Runs a command under GNU time; prints "seconds peak-MiB".
timed() {
    /usr/bin/time -f "%e %M" -o "$DIR/time.txt" "$@" >/dev/null
    awk '{ printf "%.2f %.0f", $1, $2 / 1024 }' "$DIR/time.txt"
}

BW=$("$LMQ" probe --json --threads "$THREADS" | python3 -c 'import json,sys; print(json.load(sys.stdin)["read_gbps_all"])')
echo "read bandwidth: $BW GB/s with $THREADS threads (lmq probe, for scale); every roofline below is taken against"
echo "the rate all threads read the same weights just before (on a shared host the memory's speed changes by the second)"
for shape in $SHAPES; do
    src="$DIR/$shape"
    rm -rf "$src"
    "$LMQ" synth --shape "$shape" -o "$src" >/dev/null
    fp32_bytes=$(stat -c %s "$src/model.safetensors")
    echo
    echo "== $shape: $(awk -v b="$fp32_bytes" 'BEGIN { printf "%.2f GB of fp32 weights", b / 1e9 }')"
    printf "%-22s %8s %9s %10s %11s\n" "offline stage" "seconds" "GB/s in" "peak MiB" "target MiB"
    read -r t rss <<<"$(timed "$LMQ" convert "$src" -o "$DIR/$shape-fp32.lmq")"
    largest=$(python3 - "$src/model.safetensors" <<'EOF'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    h = json.loads(f.read(n))
print(max(v["data_offsets"][1] - v["data_offsets"][0] for k, v in h.items() if k != "__metadata__"))
EOF
)
    # the target: the largest tensor × 3 + 64 MiB
    lim=$(awk -v l="$largest" 'BEGIN { printf "%.0f", 3 * l / 1048576 + 64 }')
    printf "%-22s %8s %9.2f %10s %11s\n" "convert" "$t" "$(awk -v b="$fp32_bytes" -v t="$t" 'BEGIN { print b / 1e9 / t }')" "$rss" "$lim"
    arts=("$DIR/$shape-fp32.lmq")
    for v in "${VARIANTS[@]}"; do
        read -r name recipe <<<"$v"
        read -r t rss <<<"$(timed "$LMQ" quantize "$DIR/$shape-fp32.lmq" --recipe "$recipe" -o "$DIR/$shape-$name.lmq")"
        printf "%-22s %8s %9.2f %10s %11s\n" "quantize $name" "$t" "$(awk -v b="$fp32_bytes" -v t="$t" 'BEGIN { print b / 1e9 / t }')" "$rss" "$lim"
        arts+=("$DIR/$shape-$name.lmq")
    done
    "$LMQ" verify "${arts[@]}" --speed-only --threads "$THREADS" --ctx 512 --json "$DIR/$shape.json" >/dev/null
    python3 - "$DIR/$shape.json" "$shape" "$BW" <<'EOF'
import json, os, sys
r = json.load(open(sys.argv[1]))
rows = r["rows"]
f = rows[0]
bw = float(sys.argv[3])
# Weights that fit in the last-level cache get no roofline from verify (they need not come from
# memory); here they are set against the probe's rate from memory all the same, marked *.
def roof(w):
    if w.get('decode_roofline') is not None:
        return f"{w['read_gbps']:10.1f} {100 * w['decode_roofline']:8.0f}%"
    return f"{bw:9.1f}* {100 * w['decode_tokens_per_s'] * w['weight_mib'] * 1048576 / (bw * 1e9):7.0f}%*"
print(f"\n{'artefact':<12} {'scheme':<38} {'W MiB':>8} {'prefill tok/s':>14} {'×fp32':>6} {'decode tok/s':>13} {'×fp32':>6} {'read GB/s':>10} {'roofline':>9}")
for w in rows:
    name = os.path.basename(w["artefact"]).removeprefix(sys.argv[2] + "-").removesuffix(".lmq")
    print(f"{name:<12} {w['scheme'][:38]:<38} {w['weight_mib']:8.1f} {w['prefill_tokens_per_s']:14.1f} "
          f"{w['prefill_tokens_per_s'] / f['prefill_tokens_per_s']:6.2f} {w['decode_tokens_per_s']:13.1f} "
          f"{w['decode_tokens_per_s'] / f['decode_tokens_per_s']:6.2f} {roof(w)}")
print(f"(prefill: one pass over {r['ctx']} tokens; decode: one token at a time; {r['threads']} threads, kernels {r['kernels']})")
if any(not w.get('read_gbps') for w in rows):
    print("(*: weights within the last-level cache's size: decode against the probe's rate from memory)")
EOF
    if [[ " $BATCH_SHAPES " == *" $shape "* ]]; then
        "$LMQ" verify "$DIR/$shape-fp32.lmq" "$DIR/$shape-int8.lmq" "$DIR/$shape-int4-g128.lmq" --speed-only \
            --threads "$THREADS" --ctx 64 --batch "$BATCH" --prompt-len 64 --new-tokens 16 --json "$DIR/$shape-batch.json" >/dev/null
        python3 - "$DIR/$shape-batch.json" "$shape" <<'EOF'
import json, os, sys
print("\nbatch sweep on the CPU (b prompts prefilled in turn, then b sequences a step, one pass over the weights):")
print(f"{'artefact':<12} {'batch':>5} {'TTFT ms':>9} {'ms/step':>8} {'tok/s':>8} {'×b=1':>6}")
for w in json.load(open(sys.argv[1]))["rows"]:
    name = os.path.basename(w["artefact"]).removeprefix(sys.argv[2] + "-").removesuffix(".lmq")
    one = w["batch_sweep"][0]["tokens_per_s"]
    for b in w["batch_sweep"]:
        print(f"{name:<12} {b['batch']:5d} {1e3 * b['ttft_s']:9.1f} {b['token_ms']:8.2f} {b['tokens_per_s']:8.1f} "
              f"{b['tokens_per_s'] / one:6.2f}")
EOF
    fi
    # verify holds only packed artefacts: its peak RSS with the fp32 reference and four int4
    # artefacts (verify's default window of 256 tokens) against the budget: the reference + the
    # four files + 20 %.
    int4s=("$DIR/$shape-int4-g128.lmq" "$DIR/$shape-int4-g32.lmq")
    for r in int4-g64 int4-g32-asym; do
        "$LMQ" quantize "$DIR/$shape-fp32.lmq" --recipe "recipes/$r.yaml" -o "$DIR/$shape-$r.lmq" >/dev/null
        int4s+=("$DIR/$shape-$r.lmq")
    done
    read -r t rss <<<"$(timed "$LMQ" verify "$DIR/$shape-fp32.lmq" "${int4s[@]}" --speed-only --threads "$THREADS")"
    budget=$(stat -c %s "$DIR/$shape-fp32.lmq" "${int4s[@]}" | awk '{ s += $1 } END { printf "%.0f", 1.2 * s / 1048576 }')
    echo "verify fp32 + 4 int4 artefacts: peak RSS $rss MiB (budget: the five files + 20 % = $budget MiB)"
    rm -rf "$src" "$DIR/$shape"-*.lmq
done
echo
"$BUILD/bench/bench_linear" "$THREADS"
echo
"$BUILD/bench/bench_runtime"
