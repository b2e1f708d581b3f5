#!/usr/bin/env bash
# Cross-checks lmq's GGUF export and import against ggml's own GGUF code (not part of make check:
# it needs a ggml checkout). Usage: GGML_DIR=/path/to/ggml bash interop/ggml-check.sh
# Builds ggml-base in $GGML_DIR/build-lmq (one job), then interop/ggml_check.c, which
#   1. writes a tiny llama with ggml's gguf writer and ggml's quantisers (Q8_0, Q4_0, Q4_1, Q5_0,
#      Q5_1, Q4_K, Q5_K, Q6_K), converts it with lmq and compares every tensor's values as lmq
#      and ggml's to_float decode them, bit for bit;
#   2. reads GGUF files lmq exported (stories260K int4 g32, sotu-gpt2 int8 g32, the Hugging Face
#      Llama with its rope permutation, GPT-2 with q/k/v fused back) with ggml's reader and
#      compares the same way.
set -euo pipefail
: "${GGML_DIR:?set GGML_DIR to a ggml checkout}"
LMQ=${LMQ:-build/lmq}
FIX=${LMQ_FIXTURES:-../shared/fixtures}
make -j2 build/liblmq.a "$LMQ" >/dev/null
cmake -S "$GGML_DIR" -B "$GGML_DIR/build-lmq" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF >/dev/null
cmake --build "$GGML_DIR/build-lmq" --target ggml-base -j1 >/dev/null
tmp=$(mktemp -d /tmp/lmq-ggml-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -O1 -I. -I"$GGML_DIR/include" -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -o "$tmp/check" \
   interop/ggml_check.c build/liblmq.a -L"$GGML_DIR/build-lmq/src" -lggml-base -Wl,-rpath,"$GGML_DIR/build-lmq/src" \
   -lzstd -lxxhash -lyaml -ljansson -lm -pthread
cat >"$tmp/g32.yaml" <<'YAML'
name: g32
rules:
  - match: ["blk.*.attn_*.weight", "blk.*.ffn_gate.weight", "blk.*.ffn_up.weight"]
    scheme: int4
    granularity: group
    group: 32
YAML
"$LMQ" convert "$FIX/stories260K/stories260K.bin" -o "$tmp/s.lmq" >/dev/null
"$LMQ" quantize "$tmp/s.lmq" --recipe "$tmp/g32.yaml" -o "$tmp/s4.lmq" >/dev/null
"$LMQ" export "$tmp/s4.lmq" --to gguf -o "$tmp/s4.gguf" >/dev/null
"$LMQ" convert "$FIX/sotu-gpt2" -o "$tmp/g.lmq" >/dev/null
"$LMQ" quantize "$tmp/g.lmq" --recipe interop/q8_0.yaml -o "$tmp/g8.lmq" >/dev/null
"$LMQ" export "$tmp/g8.lmq" --to gguf -o "$tmp/g8.gguf" >/dev/null
"$LMQ" convert "$FIX/stories260K-hf" -o "$tmp/h.lmq" >/dev/null
"$LMQ" export "$tmp/h.lmq" --to gguf -o "$tmp/h.gguf" >/dev/null
"$LMQ" convert "$tmp/h.gguf" -o "$tmp/h2.lmq" >/dev/null # q, k rows as GGUF holds them
"$LMQ" convert "$FIX/sotu-gpt2" --split-qkv -o "$tmp/gs.lmq" >/dev/null
"$LMQ" export "$tmp/gs.lmq" --to gguf -o "$tmp/gs.gguf" >/dev/null
"$tmp/check" "$tmp" "$tmp/s4.gguf" "$tmp/s4.lmq" "$tmp/g8.gguf" "$tmp/g8.lmq" "$tmp/h.gguf" "$tmp/h2.lmq" \
    "$tmp/gs.gguf" "$tmp/g.lmq"
