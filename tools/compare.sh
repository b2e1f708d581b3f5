#!/usr/bin/env bash
# lmq's GGUF files against llama-quantize's, scored by llama.cpp itself (not part of make check: it
# needs a llama.cpp build, which nothing in this repository makes or holds).
#
# usage: tools/compare.sh LLAMA_CPP_BUILD_DIR OUTDIR        (make compare LLAMA_CPP=DIR)
# Environment: LMQ (default build/lmq), LMQ_FIXTURES (../shared/fixtures), PRESETS (recipes/gguf/
# names, default every one), METHODS (lmq's rounding of the blocks' matrices, default rtn imatrix
# gptq awq), MODELS (default sotu-llama256 sotu-gpt2 stories260K-hf), CALIB (256-token windows
# calibrated on, by both tools, default 128), CHUNKS (llama-perplexity's 256-token chunks scored per
# file, default 64), THREADS (llama.cpp's, default 1: the scores do not depend on it).
#
# For each fixture model the first 60 % of its text's documents calibrate and the rest are scored,
# so neither tool has seen the scored text. llama.cpp's side: llama-imatrix on the calibration text
# (256-token chunks, P1's window) and `llama-quantize --imatrix` of lmq's fp32 GGUF to each preset.
# lmq's side: `lmq calibrate` on the same text, each recipes/gguf/ preset with each METHOD on the
# blocks' matrices (the embedding and the classifier round to nearest, as llama.cpp's do when its
# imatrix has no data for them), exported with `lmq export --to gguf`. Every file is scored by
# llama-perplexity --kl-divergence against the fp32 GGUF's logits: llama.cpp's loader, arithmetic
# and protocol (the second half of each chunk), so the KL is what a llama.cpp user gets. Bits per
# weight are counted as llama.cpp counts them (tools/gguf_bpw.py: every tensor's bytes over its elements).
# The table (OUTDIR/compare.md) has a row per model and preset: llama-quantize's file, lmq's best
# METHOD and the ratio of their mean KL. Exit status 1 when a file does not load or score.
set -euo pipefail
[ $# = 2 ] || { echo "usage: $0 LLAMA_CPP_BUILD_DIR OUTDIR" >&2; exit 2; }
LL=$(cd "$1" && pwd)/bin
mkdir -p "$2"
OUT=$(cd "$2" && pwd)
LMQ=$(realpath "${LMQ:-build/lmq}")
FIX=$(realpath "${LMQ_FIXTURES:-../shared/fixtures}")
ROOT=$PWD
PRESETS=${PRESETS:-Q8_0 Q6_K Q5_K_M Q4_K_M Q4_K_S Q3_K_M Q2_K}
METHODS=${METHODS:-rtn imatrix gptq awq}
MODELS=${MODELS:-sotu-llama256 sotu-gpt2 stories260K-hf}
CALIB=${CALIB:-128}
CHUNKS=${CHUNKS:-64}
THREADS=${THREADS:-1}
for f in llama-quantize llama-imatrix llama-perplexity; do
    [ -x "$LL/$f" ] || { echo "$0: $LL/$f is missing (build llama.cpp's $f)" >&2; exit 2; }
done
SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$LL/../CMakeCache.txt" 2>/dev/null || true)
commit=$(git -C "${SRC:-/nonexistent}" rev-parse HEAD 2>/dev/null || echo unknown)

# Documents FIRST..LAST (1-based) of a P1 text, with the separators between them.
docs() { awk -v a="$2" -v b="$3" 'BEGIN { d = 1 } /^<\|endoftext\|>\r?$/ { if (++d > a && d <= b) print; next } d >= a && d <= b' "$1"; }
# "bpw ppl kl top1" of one GGUF, scored against the fp32 logits in $base_kld (llama-perplexity's
# summary: KL to its 6 decimals).
# On a loaded host llama-perplexity now and then exits 0 after its last chunk without the summary
# (its log is written by a thread of its own): such a run is made again, up to three times.
score() {
    local bpw try
    bpw=$(python3 "$ROOT/tools/gguf_bpw.py" "$1") || return 1
    for try in 1 2 3; do
        "$LL/llama-perplexity" -m "$1" -t "$THREADS" -c 256 -b 256 --kl-divergence-base "$base_kld" --kl-divergence \
            >"$1.kld.log" 2>&1 || { echo "$0: llama-perplexity failed on $1 (see $1.kld.log)" >&2; return 1; }
        awk -v bpw="$bpw" '/^Mean PPL\(Q\) / { ppl = $4 } /^Mean    KLD:/ { kl = $3 } /^Same top p:/ { top = $4 }
             END { if (ppl == "" || kl == "" || top == "") exit 1; print bpw, ppl, kl, top }' "$1.kld.log" && return 0
    done
    echo "$0: no KL statistics in $1.kld.log (three runs)" >&2
    return 1
}

bad=0
table=$OUT/compare.md
{
    echo "llama.cpp $commit; llama-perplexity --kl-divergence, ctx 256, $CHUNKS chunks of held-out text; KL in nats"
    echo "(mean per scored position); top-1 = llama.cpp's \"same top p\" (%); ratio = lmq's best KL / llama-quantize's"
    echo
    echo "| model | preset | llama-quantize --imatrix: bpw | PPL | KL | top-1 | lmq: best method | bpw | PPL | KL | top-1 | KL ratio | lmq, every method: KL |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
} >"$table"
for model in $MODELS; do
    case $model in
        sotu-llama256) src=sotu-llama256/model.bin text=sotu-eval.txt ;;
        sotu-gpt2) src=sotu-gpt2 text=sotu-eval.txt ;;
        stories260K-hf) src=stories260K-hf text=tinystories-valid.txt ;;
        *) echo "$0: unknown model $model" >&2; exit 2 ;;
    esac
    o=$OUT/$model
    mkdir -p "$o"
    n=$(($(grep -c '^<|endoftext|>' "$FIX/text/$text") + 1))
    docs "$FIX/text/$text" 1 $((n * 6 / 10)) >"$o/calib.txt"
    docs "$FIX/text/$text" $((n * 6 / 10 + 1)) "$n" >"$o/eval.txt"
    "$LMQ" convert "$FIX/$src" -o "$o/fp32.lmq" >/dev/null
    "$LMQ" export "$o/fp32.lmq" --to gguf -o "$o/fp32.gguf" >/dev/null
    # (inside $o, so that GPTQ finds the calibration text by the name the statistics record)
    (cd "$o" && "$LMQ" calibrate fp32.lmq --text calib.txt --windows "$CALIB" -o stats.lmq >calibrate.log 2>&1) ||
        { echo "$0: lmq calibrate failed (see $o/calibrate.log)" >&2; exit 1; }
    "$LL/llama-imatrix" -m "$o/fp32.gguf" -t "$THREADS" -f "$o/calib.txt" -c 256 --chunks "$CALIB" -o "$o/imatrix.gguf" >"$o/imatrix.log" 2>&1 ||
        { echo "$0: llama-imatrix failed (see $o/imatrix.log)" >&2; exit 1; }
    base_kld=$o/fp32.kld
    "$LL/llama-perplexity" -m "$o/fp32.gguf" -t "$THREADS" -f "$o/eval.txt" -c 256 -b 256 --chunks "$CHUNKS" \
        --kl-divergence-base "$base_kld" >"$o/fp32.kld.log" 2>&1 ||
        { echo "$0: llama-perplexity failed on the fp32 file (see $o/fp32.kld.log)" >&2; exit 1; }
    for p in $PRESETS; do
        g=$o/llama-$p.gguf
        if "$LL/llama-quantize" --imatrix "$o/imatrix.gguf" "$o/fp32.gguf" "$g" "$p" >"$g.log" 2>&1 &&
           ll=$(score "$g"); then :; else ll="- - - -"; bad=1; fi
        best="" all=""
        for m in $METHODS; do
            "$ROOT/tools/with_method.sh" "$ROOT/recipes/gguf/$p.yaml" "$m" >"$o/$p.$m.yaml"
            q=$o/lmq-$p.$m
            if (cd "$o" && "$LMQ" quantize fp32.lmq --recipe "$p.$m.yaml" --stats stats.lmq -o "$q.lmq" >"$q.log" 2>&1) &&
               "$LMQ" export "$q.lmq" --to gguf -o "$q.gguf" >>"$q.log" 2>&1 && s=$(score "$q.gguf"); then
                all="$all $m $(cut -d' ' -f3 <<<"$s")"
                if [ -z "$best" ] || awk -v a="$(cut -d' ' -f3 <<<"$s")" -v b="$(cut -d' ' -f4 <<<"$best")" 'BEGIN { exit !(a < b) }'; then
                    best="$m $s"
                fi
            else
                all="$all $m failed"
                echo "$0: $model $p $m: $(tail -1 "$q.log")" >&2
                bad=1
            fi
        done
        read -r lbpw lppl lkl ltop <<<"$ll"
        read -r bm bbpw bppl bkl btop <<<"${best:-- - - - -}"
        ratio=$(awk -v a="$bkl" -v b="$lkl" 'BEGIN { print (a + 0 > 0 && b + 0 > 0) ? sprintf("%.2f", a / b) : "-" }')
        echo "| $model | $p | $lbpw | $lppl | $lkl | $ltop | $bm | $bbpw | $bppl | $bkl | $btop | $ratio |$all |" | tee -a "$table"
    done
done
echo "table: $table"
exit $bad
