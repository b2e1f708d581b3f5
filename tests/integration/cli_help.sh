#!/usr/bin/env bash
# lmq --version (the manifests' tool_version), lmq help (every command's synopsis, taken from
# the command's own --help), lmq help COMMAND, and plain progress lines with an ETA when stderr
# is not a terminal. Runs on the demo model in the repository (no fixtures needed).
. "$(dirname "$0")/lib.bash"

run 0 "$LMQ" --version
version=$(cat "$tmp/out")
[[ "$version" =~ ^lmq\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "--version printed '$version'"
LMQ_PROGRESS_EVERY=1000 "$LMQ" convert demo/sotu-gpt2 -o "$tmp/fp32.lmq" 2>"$tmp/convert.err" >/dev/null
run 0 "$LMQ" manifest "$tmp/fp32.lmq"
grep -qxF "tool_version: \"$version\"" "$tmp/out" || fail "manifest tool_version is not '$version'"

run 0 "$LMQ" help
cp "$tmp/out" "$tmp/help"
commands="convert calibrate quantize verify generate tokenize inspect manifest audit synth outliers probe"
for c in $commands; do
    # Every line of the command's own synopsis, "usage: " replaced by the listing's indent.
    "$LMQ" "$c" --help | awk '/^usage: / { u = 1; sub(/^usage: /, ""); print; next } u && /^ / { sub(/^       /, ""); print; next } { u = 0 }' >"$tmp/syn"
    [ -s "$tmp/syn" ] || fail "lmq $c --help has no usage line"
    while IFS= read -r line; do
        grep -qF -- "  $line" "$tmp/help" || fail "lmq help lacks '$line' (from lmq $c --help)"
    done <"$tmp/syn"
    run 0 "$LMQ" help "$c"
    "$LMQ" "$c" --help | cmp -s - "$tmp/out" || fail "lmq help $c differs from lmq $c --help"
done
grep -qF -- "--requantize" "$tmp/help" && grep -qF -- "--explain" "$tmp/help" || fail "help lacks quantize's new options"
[ "$(grep -c '^  lmq ' "$tmp/help")" -ge 11 ] || fail "help lists fewer than 11 synopses"
run 0 "$LMQ" --help
cmp -s "$tmp/out" "$tmp/help" || fail "lmq --help differs from lmq help"
run 2 "$LMQ" help nosuch
has "unknown command 'nosuch'"
run 2 "$LMQ"
has "lmq help [COMMAND]"

# Progress: nothing for a run shorter than the interval (1000 s above: the default 5 s could pass
# on a loaded machine); with LMQ_PROGRESS_EVERY=0 a line per tensor, counting up to the total,
# with the elapsed time and an ETA.
[ ! -s "$tmp/convert.err" ] || { cat "$tmp/convert.err" >&2; fail "a convert shorter than the interval printed progress"; }
LMQ_PROGRESS_EVERY=0 "$LMQ" quantize "$tmp/fp32.lmq" --recipe recipes/int4-g32.yaml -o "$tmp/q.lmq" \
    2>"$tmp/err" >/dev/null
n=$("$LMQ" inspect "$tmp/fp32.lmq" | grep -c '^\(tok_embd\|pos_embd\|blk\|out_norm\|file:\)')
[ "$(grep -c '^quantize: [0-9]*/'"$n"' .* elapsed, ETA ' "$tmp/err")" = "$n" ] ||
    { cat "$tmp/err" >&2; fail "expected $n progress lines of /$n"; }
tail -1 "$tmp/err" | grep -q "^quantize: $n/$n .*(100%, .* elapsed, ETA 0 s)$" || fail "last progress line: $(tail -1 "$tmp/err")"
LMQ_PROGRESS_EVERY=0 "$LMQ" convert demo/sotu-gpt2 -o "$tmp/fp32b.lmq" 2>"$tmp/err" >/dev/null
grep -q '^convert: 1/52 tok_embd.weight (2%, ' "$tmp/err" || { cat "$tmp/err" >&2; fail "convert progress"; }
# On a terminal (script(1) gives one) the line is redrawn in place, with the same ETA.
if command -v script >/dev/null; then
    script -qec "\"$LMQ\" quantize \"$tmp/fp32.lmq\" --recipe recipes/int4-g32.yaml -o \"$tmp/q2.lmq\" >/dev/null" /dev/null |
        tr '\r' '\n' >"$tmp/tty"
    grep -q "quantize: $n/$n .*(100%, .* elapsed, ETA 0 s)" "$tmp/tty" || { cat "$tmp/tty" >&2; fail "no ETA on a terminal"; }
fi
echo "$SCRIPT: ok"
