#!/usr/bin/env bash
# lmq generate end to end: convert the fixtures, then greedy continuations must print the
# reference's text (golden/greedy.json), a seed must give the same sampled text again, the
# end of text and a full context must end a run with a note (exit 0), and bad options exit 2.
. "$(dirname "$0")/lib.bash"
need_fixtures

# gen STATUS ARGS...: runs lmq generate, stdout to $tmp/out and stderr to $tmp/err; fails unless
# it exits with STATUS.
gen() {
    local want=$1 got=0
    shift
    "$LMQ" generate "$@" >"$tmp/out" 2>"$tmp/err" || got=$?
    [ "$got" = "$want" ] || { cat "$tmp/err" >&2; fail "'generate $*' exited $got, expected $want"; }
}
err_has() { grep -qF -- "$1" "$tmp/err" || { cat "$tmp/err" >&2; fail "stderr lacks: $1"; }; }

"$LMQ" convert "$FIX/stories260K/stories260K.bin" -o "$tmp/stories.lmq" >/dev/null
"$LMQ" convert "$FIX/sotu-gpt2" -o "$tmp/sotu.lmq" >/dev/null

# stories260K from BOS alone: the story llama2.c's documentation shows.
gen 0 "$tmp/stories.lmq" --prompt "" -n 40
case "$(cat "$tmp/out")" in
"Once upon a time, there was a little girl named Lily."*) ;;
*) fail "stories260K greedy text: $(cat "$tmp/out")" ;;
esac
err_has "1 prompt token, 40 generated"
err_has "stopped: -n 40 reached"
grep -qE "prefill [0-9.]+ tokens/s, decode [0-9.]+ tokens/s" "$tmp/err" || fail "no speeds: $(cat "$tmp/err")"
cp "$tmp/out" "$tmp/greedy"
gen 0 "$tmp/stories.lmq" -n 40 --threads 1 # no --prompt: the same, on one thread
cmp -s "$tmp/out" "$tmp/greedy" || fail "no --prompt or one thread gave another text"

# sotu-gpt2 from the golden prompt: the prompt, then the reference's continuation, exactly.
golden="$FIX/golden/greedy.json"
prompt=$(sed -n 's/^  "prompt": "\(.*\)",$/\1/p' "$golden" | sed -n 2p)
want=$(sed -n 's/^  "text": "\(.*\)"$/\1/p' "$golden" | sed -n 2p)
[ -n "$prompt" ] && [ -n "$want" ] || fail "cannot read the sotu-gpt2 entry of $golden"
gen 0 "$tmp/sotu.lmq" -p "$prompt" -n 40
[ "$(cat "$tmp/out")" = "$want" ] || fail "sotu-gpt2 greedy text: $(cat "$tmp/out")"
err_has "12 prompt tokens, 40 generated"

# The context is full after 256 - 12 new tokens: a note, not an error.
gen 0 "$tmp/sotu.lmq" -p "$prompt" -n 1000
err_has "244 generated"
err_has "context of 256 tokens is full"
# GPT-2 from nothing starts at <|endoftext|>.
gen 0 "$tmp/sotu.lmq" -n 5
err_has "1 prompt token, 5 generated"

# stories260K ends its story with BOS, long before -n 1000.
gen 0 "$tmp/stories.lmq" -n 1000
err_has "stopped: the model ended the text (token 1)"
grep -q "^Once upon a time, there was a little girl named Lily\." "$tmp/out" || fail "story text: $(head -c 200 "$tmp/out")"

# Sampling: a seed gives the same text again; another seed another text.
gen 0 "$tmp/stories.lmq" -n 60 --temp 0.9 --top-p 0.95 --seed 1234
cp "$tmp/out" "$tmp/s1"
err_has "seed 1234"
gen 0 "$tmp/stories.lmq" -n 60 --temp 0.9 --top-p 0.95 --seed 1234 --threads 2
cmp -s "$tmp/out" "$tmp/s1" || fail "the same seed gave another text"
gen 0 "$tmp/stories.lmq" -n 60 --temp 0.9 --top-p 0.95 --seed 1235
cmp -s "$tmp/out" "$tmp/s1" && fail "seeds 1234 and 1235 gave the same text"
gen 0 "$tmp/stories.lmq" -n 3 --temp 1 --seed 18446744073709551615

# A prompt longer than the context: an error naming both lengths.
long=$(for i in $(seq 300); do printf 'big dog '; done)
gen 1 "$tmp/stories.lmq" -p "$long" -n 5
grep -qE "prompt of [0-9]+ tokens does not fit the model's context of 512 tokens" "$tmp/err" ||
    fail "long prompt: $(cat "$tmp/err")"
[ ! -s "$tmp/out" ] || fail "a failed run printed text"
gen 1 "$tmp/nothing.lmq"
err_has "nothing.lmq"

# Usage errors exit 2.
for bad in "-n 0" "-n x" "-n -3" "--temp -1" "--temp nan" "--top-p 0" "--top-p 1.5" "--seed -1" "--seed 1e3" \
           "--seed 18446744073709551616" "--threads -1" "--bogus" "-n"; do
    # shellcheck disable=SC2086 # split the option from its value
    gen 2 "$tmp/stories.lmq" $bad
done
gen 2
gen 2 "$tmp/stories.lmq" "$tmp/sotu.lmq"
gen 0 --help
echo "generate.sh: ok"
