#!/usr/bin/env bash
# lmq's GGUF exports run in llama.cpp, and llama.cpp's own GGUF files run in lmq (not part of
# make check: it needs a llama.cpp build, which nothing in this repository makes or holds).
#
# usage: tools/llamacpp-check.sh LLAMA_CPP_BUILD_DIR OUTDIR
#   LLAMA_CPP_BUILD_DIR  a CMake build of llama.cpp with bin/llama-quantize, bin/llama-perplexity
#                        and the shared libraries (libllama, libggml*) in bin/; its source tree is
#                        found through CMakeCache.txt (headers)
#   OUTDIR               where the artefacts, GGUF files, logs and table.md go (created)
# Environment: LMQ (default build/lmq), LMQ_FIXTURES (../shared/fixtures), WINDOWS (P1 windows
# scored per row, default 16), TYPES (llama-quantize types, default Q8_0 Q4_0 Q4_1 Q5_0 Q5_1
# Q4_K Q5_K Q6_K), LMQ_TYPES (lmq's own block types and recipes/gguf/ mixes exported from
# sotu-llama256, default q4_k q6_k iq4_xs Q4_K_M).
#
# For each fixture model (stories260K from llama2.c, stories260K-hf with Hugging Face's rope order,
# sotu-gpt2) and its text (and sotu-llama256 for LMQ_TYPES, last):
#   lmq rows: the fp32 conversion, fp16, int8 g32 (linear layers and the token embedding; Q8_0)
#     and int4 g32 (linear layers; Q4_0) artefacts exported with `lmq export --to gguf`;
#   llama.cpp rows: llama-quantize of the fp32 export to each of TYPES, imported with
#     `lmq convert`, exported again by lmq and imported again: every tensor must come back with
#     the same bytes (the files may differ in general.file_type: lmq writes the loader's guess).
# Each row's GGUF is run by interop/llamacpp_p1.c (llama.cpp's loader, tokenizer and CPU forward
# through libllama) against lmq's runtime on the matching artefact: the P1 token streams must be
# equal, then PPL of each, top-1 agreement and KL(lmq || llama.cpp) over the first WINDOWS
# windows, with llama.cpp's default attention (F16 cache, flash attention) and with fp32
# attention (an F32 cache, no flash attention: what is left is the weights' path, including the
# Q8_0 / Q8_K rounding of activations llama.cpp's quantised dot products do). The last column is
# stock llama-perplexity on the same text and windows under its own protocol (the text tokenized
# as one, only the second half of each window scored), so it is not P1's number; a second table
# has it where its windows are P1's (sotu-gpt2 on the one-document moby-dick-eval.txt), beside
# both sides' PPL over the positions it scores.
# Exit status 1 when a file does not load, a stream differs, or a round trip changes bytes.
set -euo pipefail
[ $# = 2 ] || { echo "usage: $0 LLAMA_CPP_BUILD_DIR OUTDIR" >&2; exit 2; }
LL=$(cd "$1" && pwd)
OUT=$2
LMQ=${LMQ:-build/lmq}
FIX=${LMQ_FIXTURES:-../shared/fixtures}
WINDOWS=${WINDOWS:-16}
TYPES=${TYPES:-Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K}
LMQ_TYPES=${LMQ_TYPES:-q4_k q6_k iq4_xs Q4_K_M}
SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$LL/CMakeCache.txt" 2>/dev/null || true)
for f in bin/llama-quantize bin/llama-perplexity bin/libllama.so; do
    [ -e "$LL/$f" ] || { echo "$0: $LL/$f is missing (build llama.cpp's llama-quantize and llama-perplexity)" >&2; exit 2; }
done
[ -f "$SRC/include/llama.h" ] || { echo "$0: no llama.h under the source tree '$SRC' named by $LL/CMakeCache.txt" >&2; exit 2; }
mkdir -p "$OUT"
make -j2 build/liblmq.a "$LMQ" >/dev/null
cc -std=c11 -O2 -Wall -Wextra -Werror -I. -I"$SRC/include" -I"$SRC/ggml/include" -D_POSIX_C_SOURCE=200809L \
   -D_DEFAULT_SOURCE -o "$OUT/llamacpp_p1" interop/llamacpp_p1.c build/liblmq.a -L"$LL/bin" -lllama -lggml \
   -lggml-base -Wl,-rpath,"$LL/bin" -lzstd -lxxhash -lyaml -ljansson -lm -pthread
commit=$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)


bad=0
table="$OUT/table.md"
: >"$OUT/tokenize.txt"
{
    echo "llama.cpp $commit; P1, ctx 256, first $WINDOWS windows; KL = KL(P_lmq || P_llama.cpp), nats per position"
    echo
    echo "| model | artefact | GGUF tensor types | tokens | PPL lmq | PPL llama.cpp | top-1 | KL mean | KL max | fp32 attn: PPL llama.cpp | fp32 attn: KL mean | llama-perplexity (own protocol) | lmq re-export |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
} >"$table"

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }
tensors() { "$LMQ" inspect "$1" | grep -E '^(blk|tok_embd|pos_embd|out_norm|output)\.' | awk '{print $1, $2, $3, $NF}'; }

# row MODEL LABEL GGUF LMQ_ARTEFACT TEXT NOTE
row() {
    local model=$1 label=$2 gguf=$3 art=$4 text=$5 note=$6 d f ppl
    d=$("$OUT/llamacpp_p1" "$gguf" "$art" "$text" 256 "$WINDOWS" 2>"$gguf.log") || { bad=1; cat "$gguf.log" >&2; }
    f=$(LLAMA_F32_ATTENTION=1 "$OUT/llamacpp_p1" "$gguf" "$art" "$text" 256 "$WINDOWS" 2>>"$gguf.log") || bad=1
    ppl=$("$LL/bin/llama-perplexity" -m "$gguf" -f "$text" -c 256 -b 256 --chunks "$WINDOWS" -t 1 2>&1 |
          sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p')
    [ -n "$d" ] && [ -n "$ppl" ] || { echo "$0: $gguf: llama.cpp did not run it (see $gguf.log)" >&2; bad=1; }
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$model" "$label" \
        "$(field types "$d")" "$(field same_tokens "$d") ($(field tokens "$d"))" "$(field ppl_lmq "$d")" \
        "$(field ppl_llama "$d")" "$(field top1 "$d")" "$(field kl_mean "$d")" "$(field kl_max "$d")" \
        "$(field ppl_llama "$f")" "$(field kl_mean "$f")" "${ppl:-failed}" "$note" | tee -a "$table"
}

for spec in "stories260K stories260K/stories260K.bin tinystories-valid.txt" \
            "stories260K-hf stories260K-hf tinystories-valid.txt" \
            "sotu-gpt2 sotu-gpt2 sotu-eval.txt"; do
    read -r name src text <<<"$spec"
    text="$FIX/text/$text"
    o="$OUT/$name"
    "$LMQ" convert "$FIX/$src" -o "$o.f32.lmq" >/dev/null
    "$LMQ" quantize "$o.f32.lmq" --recipe recipes/fp16.yaml -o "$o.f16.lmq" >/dev/null
    "$LMQ" quantize "$o.f32.lmq" --recipe interop/q8_0.yaml -o "$o.int8-g32.lmq" >/dev/null
    "$LMQ" quantize "$o.f32.lmq" --recipe recipes/int4-g32.yaml -o "$o.int4-g32.lmq" >/dev/null
    for v in f32 f16 int8-g32 int4-g32; do
        # --allow-requantize: stories' ffn_down (172 columns, no whole 32-blocks) goes as F32, exact
        "$LMQ" export "$o.$v.lmq" --to gguf -o "$o.$v.gguf" --allow-requantize >"$o.$v.export.log"
        row "$name" "lmq $v" "$o.$v.gguf" "$o.$v.lmq" "$text" "$(sed -n 's/.*, \([0-9]* re-quantised\).*/\1/p' "$o.$v.export.log")"
    done
    # the llama-tokenize command on the text's first document against golden/tokens.json
    awk '/^<\|endoftext\|>\r?$/ { exit } { print }' "$text" >"$o.doc0.txt"
    got=$("$LL/bin/llama-tokenize" -m "$o.f32.gguf" -f "$o.doc0.txt" --ids --log-disable 2>/dev/null |
          tr -d '[] ' | cut -d, -f1-64)
    want=$(jq -r --arg t "shared/fixtures/text/${text##*/}" --arg k "$([ "$name" = sotu-gpt2 ] && echo gpt2 || echo llama2c-tok512)" \
           '.[$t][$k].first64 | map(tostring) | join(",")' "$FIX/golden/tokens.json")
    if [ -n "$got" ] && [ "$got" = "$want" ]; then
        echo "$name: llama-tokenize: the first 64 ids of ${text##*/} are golden/tokens.json's" | tee -a "$OUT/tokenize.txt"
    else
        echo "$name: llama-tokenize: ${text##*/} starts [$got], golden/tokens.json [$want]" | tee -a "$OUT/tokenize.txt" >&2
        bad=1
    fi
    for t in $TYPES; do
        g="$o.llama-$t.gguf"
        "$LL/bin/llama-quantize" "$o.f32.gguf" "$g" "$t" 1 >"$g.quantize.log" 2>&1 ||
            { echo "$0: llama-quantize $t failed (see $g.quantize.log)" >&2; bad=1; continue; }
        if ! "$LMQ" convert "$g" -o "$o.llama-$t.lmq" >"$g.convert.log" 2>&1; then
            echo "$0: lmq convert refuses llama.cpp's $t file: $(tail -1 "$g.convert.log")" >&2
            bad=1
            continue
        fi
        "$LMQ" export "$o.llama-$t.lmq" --to gguf -o "$o.llama-$t.again.gguf" >/dev/null
        "$LMQ" convert "$o.llama-$t.again.gguf" -o "$o.llama-$t.again.lmq" >/dev/null
        note="same tensors"
        diff <(tensors "$o.llama-$t.lmq") <(tensors "$o.llama-$t.again.lmq") >"$g.again.diff" ||
            { note="tensors differ"; echo "$0: $g: lmq's export of its import holds other tensors ($g.again.diff)" >&2; bad=1; }
        row "$name" "llama-quantize $t" "$g" "$o.llama-$t.lmq" "$text" "$note"
    done
done
# lmq's own block encodings, exported as they are: sotu-llama256 (every matrix 256·k wide) with
# each of LMQ_TYPES on its matrices (a type: every matrix; a recipes/gguf/ name: that mix).
o="$OUT/sotu-llama256"
"$LMQ" convert "$FIX/sotu-llama256/model.bin" -o "$o.f32.lmq" >/dev/null
for t in $LMQ_TYPES; do
    r="recipes/gguf/$t.yaml"
    if [ ! -f "$r" ]; then
        r="$o.$t.yaml"
        printf 'name: %s\nrules:\n  - match: ["blk.*.attn_*.weight", "blk.*.ffn_*.weight", "tok_embd.weight", "output.weight"]\n    scheme: %s\n' \
            "$t" "$t" >"$r"
    fi
    "$LMQ" quantize "$o.f32.lmq" --recipe "$r" -o "$o.$t.lmq" >/dev/null
    "$LMQ" export "$o.$t.lmq" --to gguf -o "$o.$t.gguf" >"$o.$t.export.log"
    row sotu-llama256 "lmq $t" "$o.$t.gguf" "$o.$t.lmq" "$FIX/text/sotu-eval.txt" "$(sed -n 's/.*, \([0-9]* re-quantised\).*/\1/p' "$o.$t.export.log")"
done
# Stock llama-perplexity on P1's own windows: with a one-document text and a vocabulary that adds
# no BOS (GPT-2) its windows are P1's, of which it scores positions 128..254; llamacpp_p1 reports
# each side's PPL over those positions (half_*), and llama-perplexity must print llama.cpp's.
moby="$FIX/text/moby-dick-eval.txt"
{
    echo
    echo "| sotu-gpt2 on ${moby##*/} | llama-perplexity | llamacpp_p1, positions 128..254: llama.cpp | lmq |"
    echo "| --- | --- | --- | --- |"
} >>"$table"
for v in f32 f16 int8-g32 int4-g32; do
    g="$OUT/sotu-gpt2.$v.gguf"
    d=$("$OUT/llamacpp_p1" "$g" "$OUT/sotu-gpt2.$v.lmq" "$moby" 256 "$WINDOWS" 2>>"$g.log") || bad=1
    ppl=$("$LL/bin/llama-perplexity" -m "$g" -f "$moby" -c 256 -b 256 --chunks "$WINDOWS" -t 1 2>&1 |
          sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p')
    # it prints 4 decimals of its own double sums: equal to those, within its rounding
    awk -v a="$ppl" -v b="$(field half_llama "$d")" 'BEGIN { e = a - b; exit !(a != "" && b != "" && e * e <= (1e-4 + 1e-7 * b) ^ 2) }' ||
        { echo "$0: $g: llama-perplexity gives '$ppl' on ${moby##*/}, llamacpp_p1 $(field half_llama "$d")" >&2; bad=1; }
    echo "| lmq $v | ${ppl:-failed} | $(field half_llama "$d") | $(field half_lmq "$d") |" | tee -a "$table"
done
echo >>"$table"
cat "$OUT/tokenize.txt" >>"$table"
echo "table: $table"
exit $bad
