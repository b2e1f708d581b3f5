#!/usr/bin/env bash
# make bench LLAMA_CPP=DIR: lmq's runtime against llama.cpp's on the same GGUF bytes. Per shape
# (synthetic checkpoints from `lmq synth`) and GGUF type: lmq's own artefacts exported (Q8_0 and
# Q4_0, lmq's q8_0 / q4_0 schemes) and llama-quantize's of the F32 export (Q4_K_M, or the types
# BENCH_LLAMA_QUANTS names); each file is
# imported by `lmq convert` and run by `lmq verify --speed-only --ctx P` (llama.cpp's arithmetic,
# the default for an import: int8 activations per block) and by `llama-bench -p P -n 64` (the
# best of its 3 repetitions, as verify keeps the best of its 3 rounds). Rounds interleave the two
# runtimes; each round's lmq / llama.cpp ratio is printed and the median of the rounds last.
#   tests/bench/llamacpp.sh LLAMA_CPP_BUILD_DIR
# Environment: LMQ (build/lmq), BENCH_LLAMA_SHAPES (gpt2-124m), BENCH_LLAMA_THREADS ("1 2"),
# BENCH_LLAMA_PREFILL ("256 512"), BENCH_LLAMA_ROUNDS (3), BENCH_LLAMA_QUANTS ("Q4_K_M": llama-quantize's
# type names), BENCH_DIR (/tmp/lmq-bench-llama).
set -euo pipefail
cd "$(dirname "$0")/../.."
LL=$(cd "$1" && pwd)
LMQ=${LMQ:-build/lmq}
SHAPES=${BENCH_LLAMA_SHAPES:-gpt2-124m}
THREADS=${BENCH_LLAMA_THREADS:-1 2}
PREFILL=${BENCH_LLAMA_PREFILL:-256 512}
ROUNDS=${BENCH_LLAMA_ROUNDS:-3}
QUANTS=${BENCH_LLAMA_QUANTS:-Q4_K_M}
DIR=${BENCH_DIR:-/tmp/lmq-bench-llama}
for f in llama-bench llama-quantize; do
    [ -x "$LL/bin/$f" ] || { echo "$0: $LL/bin/$f is missing (build llama.cpp's $f; tools/llamacpp-check.sh says how)" >&2; exit 2; }
done
SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$LL/CMakeCache.txt" 2>/dev/null || true)
commit=$(git -C "${SRC:-/nonexistent}" rev-parse --short HEAD 2>/dev/null || echo unknown)
mkdir -p "$DIR"
[ "${BENCH_KEEP:-0}" = 1 ] || trap 'rm -rf "$DIR"' EXIT

cat >"$DIR/q4_0.yaml" <<'Y'
name: q4_0
description: "the linear layers Q4_0, the classifier and embedding Q8_0 (lmq's own q4_0 / q8_0 schemes)"
rules:
  - match: [output.weight, tok_embd.weight]
    scheme: q8_0
  - match: ["blk.*.attn_*.weight", "blk.*.ffn_*.weight"]
    scheme: q4_0
Y

# lmq_speed GGUF THREADS P: "prefill decode" tok/s of lmq on the imported file.
lmq_speed() {
    "$LMQ" verify "$1.lmq" --speed-only --ctx "$3" --threads "$2" --json "$DIR/s.json" >/dev/null
    python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["rows"][0]; print(r["prefill_tokens_per_s"], r["decode_tokens_per_s"])' "$DIR/s.json"
}
# llama_speed GGUF THREADS P: "prefill decode" tok/s of llama-bench, the best of its repetitions.
llama_speed() {
    "$LL/bin/llama-bench" -m "$1" -t "$2" -p "$3" -n 64 -r 3 -o json 2>/dev/null >"$DIR/l.json"
    python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))
best = lambda rows: max(max(r["samples_ts"]) for r in rows)
print(best([r for r in t if r["n_prompt"] > 0]), best([r for r in t if r["n_gen"] > 0]))' "$DIR/l.json"
}

echo "llama.cpp $commit (llama-bench), lmq $(git rev-parse --short HEAD 2>/dev/null || echo '?'); the same GGUF files in both"
for shape in $SHAPES; do
    "$LMQ" synth --shape "$shape" -o "$DIR/$shape" >/dev/null
    "$LMQ" convert "$DIR/$shape" -o "$DIR/fp32.lmq" >/dev/null
    "$LMQ" export "$DIR/fp32.lmq" --to gguf -o "$DIR/F32.gguf" >/dev/null
    for q in $QUANTS; do
        "$LL/bin/llama-quantize" "$DIR/F32.gguf" "$DIR/$q.gguf" "$q" >/dev/null 2>&1 ||
            { echo "$0: llama-quantize $q failed on $shape" >&2; exit 1; }
    done
    for t in Q8_0 q4_0; do
        recipe=recipes/gguf/$t.yaml && [ $t = q4_0 ] && recipe=$DIR/q4_0.yaml
        "$LMQ" quantize "$DIR/fp32.lmq" --recipe "$recipe" -o "$DIR/$t.lmq" >/dev/null
        "$LMQ" export "$DIR/$t.lmq" --to gguf -o "$DIR/${t^^}.gguf" >/dev/null
    done
    types="F32 Q8_0 Q4_0 $QUANTS"
    for t in $types; do
        "$LMQ" convert "$DIR/$t.gguf" -o "$DIR/$t.gguf.lmq" >/dev/null
    done
    echo
    echo "== $shape: tok/s, lmq / llama.cpp per round (prefill P tokens, decode 64), median last"
    printf "%-7s %2s %4s  %-34s %-34s %9s %9s\n" type t P "prefill lmq/llama per round" "decode lmq/llama per round" "prefill" "decode"
    for th in $THREADS; do
        for p in $PREFILL; do
            declare -A pr=() dr=()
            for r in $(seq "$ROUNDS"); do
                for t in $types; do
                    read -r lp ld <<<"$(lmq_speed "$DIR/$t.gguf" "$th" "$p")"
                    read -r cp cd <<<"$(llama_speed "$DIR/$t.gguf" "$th" "$p")"
                    pr[$t]+="$(awk -v a="$lp" -v b="$cp" 'BEGIN { printf "%.0f/%.0f=%.2f ", a, b, a / b }')"
                    dr[$t]+="$(awk -v a="$ld" -v b="$cd" 'BEGIN { printf "%.0f/%.0f=%.2f ", a, b, a / b }')"
                done
            done
            for t in $types; do
                med() { tr ' ' '\n' <<<"$1" | sed -n 's/.*=//p' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
                printf "%-7s %2s %4s  %-34s %-34s %8.2fx %8.2fx\n" "$t" "$th" "$p" "${pr[$t]}" "${dr[$t]}" "$(med "${pr[$t]}")" "$(med "${dr[$t]}")"
            done
            unset pr dr
        done
    done
    rm -rf "$DIR/$shape" "$DIR"/*.lmq "$DIR"/*.gguf
done
