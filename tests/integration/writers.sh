#!/usr/bin/env bash
# Writers pass on nothing audit refuses: from an input whose values or carried tokenizer audit
# fails (checksums all right), quantize, quantize --requantize, export to both targets and
# verify --record refuse, naming the tensor or file, and write no output or record.
. "$(dirname "$0")/lib.bash"
need_fixtures

SAMPLER="$(dirname "$LMQ")/tests/test_container"
R=recipes/fp16.yaml

# no_output PATH...: fails if any of them exists.
no_output() {
    for p in "$@"; do
        [ ! -e "$p" ] || fail "$p written from an input audit refuses"
    done
}

# A NaN in a norm weight (fp32, which quantize copies as it is).
LMQ_WRITE_SAMPLE="$tmp/nan_norm.lmq" LMQ_SAMPLE_KIND=nan_norm "$SAMPLER"
want="tensor blk.0.ffn_norm.weight: non-finite value nan at element 2"
run 3 "$LMQ" audit "$tmp/nan_norm.lmq"
has "$want"
run 1 "$LMQ" quantize "$tmp/nan_norm.lmq" --recipe recipes/int8-channel.yaml -o "$tmp/q.lmq" # norms copied
has "$want"
run 1 "$LMQ" export "$tmp/nan_norm.lmq" --to gguf -o "$tmp/n.gguf"
has "$want"
run 1 "$LMQ" export "$tmp/nan_norm.lmq" --to compressed-tensors -o "$tmp/n.ct"
has "$want"
no_output "$tmp/q.lmq" "$tmp/n.gguf" "$tmp/n.ct"

# A negative scale: requantizing must not launder it into an artefact that audits clean.
LMQ_WRITE_SAMPLE="$tmp/neg.lmq" LMQ_SAMPLE_KIND=neg_scale "$SAMPLER"
want="blk.0.attn_q.weight: scale 0 is -"
run 3 "$LMQ" audit "$tmp/neg.lmq"
has "$want"
run 1 "$LMQ" quantize "$tmp/neg.lmq" --recipe "$R" --requantize -o "$tmp/q.lmq"
has "$want"
has "scales are finite and >= 0"
no_output "$tmp/q.lmq"

# A zeroed carried tokenizer (same size, checksums recomputed): verify --record refuses the
# candidate and writes no record for it; quantize refuses it too.
"$LMQ" convert "$FIX/stories260K/stories260K.bin" -o "$tmp/s.lmq" >/dev/null
"$LMQ" manifest "$tmp/s.lmq" >"$tmp/s.yaml"
LMQ_RESIGN_FROM="$tmp/s.lmq" LMQ_RESIGN_MANIFEST="$tmp/s.yaml" LMQ_RESIGN_ZERO=file:tokenizer.bin \
    LMQ_WRITE_SAMPLE="$tmp/z.lmq" "$SAMPLER"
head -c 3000 "$FIX/text/tinystories-valid.txt" >"$tmp/t.txt"
run 3 "$LMQ" audit "$tmp/z.lmq"
has "$tmp/z.lmq: tokenizer: tokenizer.bin: "
run 1 "$LMQ" verify "$tmp/z.lmq" --reference "$tmp/s.lmq" --text "$tmp/t.txt" --ctx 32 --record
has "$tmp/z.lmq: tokenizer.bin: "
run 1 "$LMQ" quantize "$tmp/z.lmq" --recipe "$R" -o "$tmp/q.lmq"
has "$tmp/z.lmq: tokenizer.bin: "
no_output "$tmp/z.lmq.verify.json" "$tmp/q.lmq"
echo "$SCRIPT: ok"
