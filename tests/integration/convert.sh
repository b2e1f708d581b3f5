#!/usr/bin/env bash
# lmq convert end to end on the three fixture checkpoints: each artefact passes audit, the same
# input gives byte-identical files, bad input gives a clear error and no file, and memory holds
# about one tensor at a time. (Streamed and whole-model writes are compared byte for byte in
# tests/test_convert.c.)
. "$(dirname "$0")/lib.bash"
need_fixtures

for src in stories260K/stories260K.bin stories260K-hf sotu-gpt2; do
    name=$(basename "$src" .bin)
    "$LMQ" convert "$FIX/$src" -o "$tmp/$name.lmq" >/dev/null
    "$LMQ" convert "$FIX/$src" -o "$tmp/$name.again.lmq" >/dev/null
    cmp -s "$tmp/$name.lmq" "$tmp/$name.again.lmq" || fail "$src: two conversions differ"
    "$LMQ" audit "$tmp/$name.lmq" >/dev/null || fail "$src: audit failed"
    "$LMQ" convert "$FIX/$src" -o "$tmp/$name.zstd.lmq" --zstd >/dev/null
    "$LMQ" audit "$tmp/$name.zstd.lmq" >/dev/null || fail "$src: audit of the zstd artefact failed"
done
"$LMQ" inspect "$tmp/sotu-gpt2.lmq" >"$tmp/inspect"
grep -q "^blk.3.attn_qkv.weight  *\[384, 128\]" "$tmp/inspect" || fail "inspect lacks the [out, in] qkv tensor"

# --split-qkv: GPT-2's c_attn as three [dim, dim] tensors; a Llama checkpoint has nothing to split.
"$LMQ" convert "$FIX/sotu-gpt2" --split-qkv -o "$tmp/split.lmq" >/dev/null
"$LMQ" audit "$tmp/split.lmq" >/dev/null || fail "--split-qkv: audit failed"
"$LMQ" inspect "$tmp/split.lmq" >"$tmp/inspect.split"
grep -q "^blk.0.attn_q.weight  *\[128, 128\]" "$tmp/inspect.split" || fail "--split-qkv: no [128, 128] attn_q"
! grep -q "attn_qkv" "$tmp/inspect.split" || fail "--split-qkv: the fused tensor is still there"
st=0; "$LMQ" convert "$FIX/stories260K/stories260K.bin" --split-qkv -o "$tmp/l.lmq" 2>"$tmp/err" || st=$?
[ "$st" = 1 ] && grep -q "nothing to split" "$tmp/err" || fail "--split-qkv on llama2.c: exit $st, $(cat "$tmp/err")"

# The GPT-2 tokenizer named explicitly, from another folder.
mkdir "$tmp/bare"
cp "$FIX/sotu-gpt2/config.json" "$FIX/sotu-gpt2/model.safetensors" "$tmp/bare/"
if "$LMQ" convert "$tmp/bare" -o "$tmp/bare.lmq" 2>"$tmp/err"; then fail "converted without a tokenizer"; fi
grep -q -- "--tokenizer" "$tmp/err" || fail "no hint to pass --tokenizer: $(cat "$tmp/err")"
[ ! -e "$tmp/bare.lmq" ] || fail "a failed conversion left a file"
"$LMQ" convert "$tmp/bare" --tokenizer "$FIX/gpt2-tokenizer" -o "$tmp/bare.lmq" >/dev/null
# Only the source path differs: every tensor and carried file has the same checksum.
"$LMQ" inspect "$tmp/bare.lmq" >"$tmp/inspect.bare"
diff <(grep -E '^(blk|tok_embd|pos_embd|out_norm|file:)' "$tmp/inspect") \
     <(grep -E '^(blk|tok_embd|pos_embd|out_norm|file:)' "$tmp/inspect.bare") >/dev/null ||
    fail "--tokenizer from another folder gave other tensors or files"

# A truncated checkpoint: an error naming the file, exit 1, no artefact.
head -c 500000 "$FIX/stories260K/stories260K.bin" >"$tmp/cut.bin"
cp "$FIX/stories260K/tok512.bin" "$tmp/"
st=0; "$LMQ" convert "$tmp/cut.bin" -o "$tmp/cut.lmq" 2>"$tmp/err" || st=$?
[ "$st" = 1 ] || fail "truncated checkpoint: exit $st"
grep -q "cut.bin" "$tmp/err" || fail "error does not name the file: $(cat "$tmp/err")"
[ ! -e "$tmp/cut.lmq" ] && [ -z "$(ls "$tmp" | grep 'cut.lmq.tmp')" ] || fail "a failed conversion left a file"

# Streaming: converting holds about one tensor, not the model. The bound is three times the
# largest tensor (gpt2-124m's 50257 x 768 fp32 embedding) plus 64 MiB; the whole-model import
# peaked at 985 MB. Not under the sanitizers, whose shadow and quarantined memory count too.
if [ -z "${LMQ_SAN:-}" ]; then
    "$LMQ" synth --shape gpt2-124m -o "$tmp/g124" >/dev/null
    /usr/bin/time -f %M -o "$tmp/rss" "$LMQ" convert "$tmp/g124" -o "$tmp/g124.lmq" >/dev/null
    rss=$(tail -n 1 "$tmp/rss") limit=$(((3 * 50257 * 768 * 4 + 64 * 1048576) / 1024))
    [ "$rss" -le "$limit" ] || fail "gpt2-124m: peak RSS $rss KiB, over $limit KiB"
    "$LMQ" audit "$tmp/g124.lmq" >/dev/null || fail "gpt2-124m: audit failed"
    rm -rf "$tmp/g124" "$tmp/g124.lmq"
fi

# Usage errors exit 2.
st=0; "$LMQ" convert 2>/dev/null || st=$?; [ "$st" = 2 ] || fail "no arguments: exit $st"
st=0; "$LMQ" convert x --bogus 2>/dev/null || st=$?; [ "$st" = 2 ] || fail "unknown option: exit $st"
echo "convert.sh: ok"
