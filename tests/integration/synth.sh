#!/usr/bin/env bash
# lmq synth end to end: the tiny shapes of both families must convert, generate and audit like
# real checkpoints; a seed must give byte-identical files and another seed other weights; bad
# arguments exit 2, and a directory whose files convert would read instead is refused.
. "$(dirname "$0")/lib.bash"

for shape in tiny-llama tiny-gpt2; do
    d="$tmp/$shape"
    run 0 "$LMQ" synth --shape "$shape" -o "$d" --seed 7
    has "$shape"
    for f in config.json model.safetensors; do [ -s "$d/$f" ] || fail "$shape: no $f"; done
    run 0 "$LMQ" convert "$d" -o "$tmp/$shape.lmq"
    has "vocab 512"
    run 0 "$LMQ" generate "$tmp/$shape.lmq" -p "the rain" -n 5
    has "5 generated"
    run 0 "$LMQ" audit "$tmp/$shape.lmq"
    has "OK"

    # The same seed again, into another directory: the same bytes, file by file.
    run 0 "$LMQ" synth --shape "$shape" -o "$tmp/$shape-again" --seed 7
    for f in "$d"/*; do
        cmp -s "$f" "$tmp/$shape-again/$(basename "$f")" || fail "$shape: seed 7 twice gave another $(basename "$f")"
    done
    # Another seed: other weights, the same tokenizer.
    run 0 "$LMQ" synth --shape "$shape" -o "$tmp/$shape-8" --seed 8
    cmp -s "$d/model.safetensors" "$tmp/$shape-8/model.safetensors" && fail "$shape: seeds 7 and 8 gave the same weights"
    [ "$(stat -c %s "$d/model.safetensors")" = "$(stat -c %s "$tmp/$shape-8/model.safetensors")" ] ||
        fail "$shape: seeds 7 and 8 gave weights of different sizes"
    # Writing over an earlier run replaces its files.
    run 0 "$LMQ" synth --shape "$shape" -o "$d" --seed 8
    cmp -s "$d/model.safetensors" "$tmp/$shape-8/model.safetensors" || fail "$shape: a second run did not replace the weights"
done
ls "$tmp"/tiny-llama/*.tmp.* >/dev/null 2>&1 && fail "temporary files left behind"

# The Llama shape untied (lm_head kept), the GPT-2 shape tied; tokenizers of the model's kind.
[ -s "$tmp/tiny-llama/tokenizer.bin" ] || fail "tiny-llama: no tokenizer.bin"
[ -s "$tmp/tiny-gpt2/vocab.json" ] && [ -s "$tmp/tiny-gpt2/merges.txt" ] || fail "tiny-gpt2: no vocab.json + merges.txt"
# (through files: grep -q may stop reading early, and a writer cut off fails the pipe)
"$LMQ" inspect "$tmp/tiny-llama.lmq" >"$tmp/tl.inspect"
"$LMQ" inspect "$tmp/tiny-gpt2.lmq" >"$tmp/tg.inspect"
grep -q "^output.weight " "$tmp/tl.inspect" || fail "tiny-llama: no output.weight"
grep -q "^output.weight " "$tmp/tg.inspect" && fail "tiny-gpt2: output.weight despite the tied embedding"

# A Llama shape into a directory holding a GPT-2 tokenizer (convert would read that): refused.
run 1 "$LMQ" synth --shape tiny-llama -o "$tmp/tiny-gpt2"
has "vocab.json"
touch "$tmp/file"
run 1 "$LMQ" synth --shape tiny-gpt2 -o "$tmp/file"

# Usage errors exit 2.
run 2 "$LMQ" synth --shape gpt2-7b -o "$tmp/x"
has "unknown shape 'gpt2-7b'"
[ ! -e "$tmp/x" ] || fail "an unknown shape created its directory"
run 2 "$LMQ" synth --shape tiny-gpt2
run 2 "$LMQ" synth -o "$tmp/x"
run 2 "$LMQ" synth --shape tiny-gpt2 -o "$tmp/x" --seed -1
run 2 "$LMQ" synth --shape tiny-gpt2 -o "$tmp/x" extra
run 2 "$LMQ" synth --bogus
run 0 "$LMQ" synth --help
has "usage: lmq synth"
echo "synth.sh: ok"
