#!/usr/bin/env bash
# Hostile paths: outputs that are not ours (FIFOs, links, devices, directories, the inputs
# themselves) are refused with every file left as it was; input FIFOs are refused at once;
# --threads above the pool's maximum is a usage error; a stale temporary file of a dead process
# goes at the next run; quantize killed (-9 or TERM) at random moments leaves the old artefact or
# the new one, never a mix, and no temporary file once a run completes; a full disk says why.
. "$(dirname "$0")/lib.bash"
need_fixtures

S="$FIX/stories260K/stories260K.bin"
R=recipes/fp16.yaml
T="$FIX/text/tinystories-valid.txt"
"$LMQ" convert "$S" -o "$tmp/s.lmq" >/dev/null
"$LMQ" quantize "$tmp/s.lmq" --recipe "$R" -o "$tmp/q.lmq" >/dev/null
cp "$R" "$tmp/r.yaml"
cp -r "$FIX/stories260K-hf" "$tmp/hf"
head -c 4000 "$T" >"$tmp/t.txt"

snapshot() { (cd "$tmp" && find . -type f ! -name out ! -name 'sums.*' -exec sha256sum {} + | sort -k2) >"$tmp/sums.$1"; }
# Runs CMD, which must exit STATUS with a message holding TEXT, and change no file in $tmp.
refused() {
    local want=$1 text=$2
    shift 2
    snapshot before
    run "$want" "$@"
    has "$text"
    snapshot after
    cmp -s "$tmp/sums.before" "$tmp/sums.after" || fail "'$*' changed a file"
    ! ls -a "$tmp" | grep -q '\.tmp\.' || fail "'$*' left a temporary file"
}

# Outputs that are not regular files, for each writer.
mkfifo "$tmp/fifo"
ln -s s.lmq "$tmp/link"
ln -s nowhere "$tmp/dangling"
mkdir "$tmp/dir"
for o in fifo dir; do
    refused 1 "$tmp/$o: output exists and is not a regular file" "$LMQ" convert "$S" -o "$tmp/$o"
    refused 1 "$tmp/$o: output exists and is not a regular file" "$LMQ" quantize "$tmp/s.lmq" --recipe "$R" -o "$tmp/$o"
done
for o in link dangling; do
    refused 1 "$tmp/$o: output is a symbolic link" "$LMQ" convert "$S" -o "$tmp/$o"
    refused 1 "$tmp/$o: output is a symbolic link" "$LMQ" quantize "$tmp/s.lmq" --recipe "$R" -o "$tmp/$o"
    refused 1 "$tmp/$o: output is a symbolic link" "$LMQ" verify "$tmp/s.lmq" --text "$tmp/t.txt" --ctx 64 --json "$tmp/$o"
done
[ "$(readlink "$tmp/dangling")" = nowhere ] || fail "dangling link changed"
refused 1 "$tmp/fifo: output exists and is not a regular file" \
    "$LMQ" verify "$tmp/s.lmq" --text "$tmp/t.txt" --ctx 64 --markdown "$tmp/fifo"
# Two reports into one file: one would silently replace the other.
refused 2 "$tmp/o.json is named by two outputs: each needs a file of its own" \
    "$LMQ" verify "$tmp/s.lmq" --text "$tmp/t.txt" --ctx 64 --json "$tmp/o.json" --html "$tmp/o.json"
[ ! -e "$tmp/o.json" ] || fail "verify wrote a report named twice"
if mknod "$tmp/null" c 1 3 2>/dev/null; then
    refused 1 "$tmp/null: output exists and is not a regular file" "$LMQ" quantize "$tmp/s.lmq" --recipe "$R" -o "$tmp/null"
    refused 1 "$tmp/null: output exists and is not a regular file" "$LMQ" convert "$S" -o "$tmp/null"
    rm "$tmp/null"
else
    echo "$SCRIPT: mknod not permitted here: character device output not tested"
fi

# Outputs that are an input of the command.
refused 1 "same file as the input" "$LMQ" convert "$tmp/hf" -o "$tmp/hf/config.json"
refused 1 "same file as the input" "$LMQ" convert "$tmp/hf" -o "$tmp/hf/model.safetensors"
refused 1 "same file as the input" "$LMQ" convert "$tmp/hf/model.safetensors" -o "$tmp/hf/model.safetensors"
ln "$tmp/s.lmq" "$tmp/hard.lmq"
(cd "$tmp" && refused 1 "same file as the input" "$OLDPWD/$LMQ" quantize s.lmq --recipe "$OLDPWD/$R" -o ./s.lmq) ||
    exit 1
for o in s.lmq hard.lmq link; do
    want="same file as the input"
    [ "$o" = link ] && want="output is a symbolic link"
    refused 1 "$want" "$LMQ" quantize "$tmp/s.lmq" --recipe "$R" -o "$tmp/$o"
done
refused 1 "same file as the input" "$LMQ" quantize "$tmp/s.lmq" --recipe "$tmp/r.yaml" -o "$tmp/r.yaml"
refused 1 "same file as the input" "$LMQ" quantize "$tmp/hard.lmq" --recipe "$R" -o "$tmp/s.lmq"
rm "$tmp/hard.lmq"
for o in s.lmq q.lmq t.txt; do
    refused 1 "same file as the input" "$LMQ" verify "$tmp/q.lmq" --reference "$tmp/s.lmq" --text "$tmp/t.txt" \
        --ctx 64 --json "$tmp/$o"
done
refused 1 "same file as the input" "$LMQ" verify "$tmp/s.lmq" --text "$tmp/t.txt" --ctx 64 --markdown "$tmp/s.lmq"
# The reports themselves are written (atomically) where nothing stands in the way.
run 0 "$LMQ" verify "$tmp/s.lmq" --text "$tmp/t.txt" --ctx 64 --json "$tmp/v.json" --markdown "$tmp/v.md"
[ -s "$tmp/v.json" ] && [ -s "$tmp/v.md" ] || fail "verify reports missing"

# Input FIFOs are refused at once, not waited on.
refused 1 "$tmp/fifo: not a regular file" timeout 10 "$LMQ" inspect "$tmp/fifo"
refused 7 "$tmp/fifo: open: not a regular file" timeout 10 "$LMQ" audit "$tmp/fifo" # I/O
refused 1 "$tmp/fifo: not a regular file" timeout 10 "$LMQ" verify "$tmp/fifo" --text "$tmp/t.txt"
refused 1 "$tmp/fifo: not a regular file" timeout 10 "$LMQ" verify "$tmp/s.lmq" --text "$tmp/fifo" --ctx 64
refused 1 "$tmp/fifo: not a regular file" timeout 10 "$LMQ" quantize "$tmp/s.lmq" --recipe "$tmp/fifo" -o "$tmp/x.lmq"
refused 1 "$tmp/fifo: not a regular file" timeout 10 "$LMQ" quantize "$tmp/fifo" --recipe "$R" -o "$tmp/x.lmq"
mkfifo "$tmp/fifo.bin" "$tmp/hf/tokenizer.json"
refused 1 "$tmp/fifo.bin: not a regular file" timeout 10 "$LMQ" convert "$tmp/fifo.bin" -o "$tmp/x.lmq"
refused 1 "$tmp/hf/tokenizer.json: not a regular file" timeout 10 \
    "$LMQ" convert "$tmp/hf" --tokenizer "$tmp/hf/tokenizer.json" -o "$tmp/x.lmq"

# --threads above the pool's maximum is a usage error everywhere.
run 2 "$LMQ" quantize "$tmp/s.lmq" --recipe "$R" -o "$tmp/x.lmq" --threads 257
run 2 "$LMQ" verify "$tmp/s.lmq" --text "$tmp/t.txt" --threads 257
run 2 "$LMQ" generate "$tmp/s.lmq" --threads 257
run 2 "$LMQ" probe --threads 257
run 2 "$LMQ" quantize "$tmp/s.lmq" --recipe "$R" -o "$tmp/x.lmq" --threads 1000
has "lmq quantize: --threads must be an integer from 0 to 256, not '1000'"
run 2 "$LMQ" verify "$tmp/s.lmq" --text "$tmp/t.txt" --threads 1000
# LMQ_THREADS, the count when --threads gives none, is checked as strictly.
for bad in 0 257 x 2x ''; do
    LMQ_THREADS=$bad run 1 "$LMQ" quantize "$tmp/s.lmq" --recipe "$R" -o "$tmp/x.lmq"
    has "LMQ_THREADS must be an integer from 1 to 256, not '$bad'"
done
[ ! -e "$tmp/x.lmq" ] || fail "x.lmq written"
LMQ_THREADS=3 run 0 "$LMQ" verify "$tmp/s.lmq" --text "$tmp/t.txt" --speed-only --json "$tmp/threads.json"
grep -q '"threads": 3' "$tmp/threads.json" || fail "LMQ_THREADS=3: $(grep threads "$tmp/threads.json")"

# A stale temporary file of a process that no longer runs goes at the next write to the output.
sh -c 'exit 0' &
dead=$!
wait "$dead"
! kill -0 "$dead" 2>/dev/null || fail "pid $dead still runs"
echo partial >"$tmp/x.lmq.tmp.$dead.AbC123"
echo partial >"$tmp/y.lmq.tmp.$dead.AbC123" # another output's: not touched
run 0 "$LMQ" quantize "$tmp/s.lmq" --recipe "$R" -o "$tmp/x.lmq"
has "removed 1 stale temporary file of an interrupted run"
[ ! -e "$tmp/x.lmq.tmp.$dead.AbC123" ] || fail "stale temporary file left"
[ -e "$tmp/y.lmq.tmp.$dead.AbC123" ] || fail "another output's temporary file removed"
rm "$tmp/y.lmq.tmp.$dead.AbC123" "$tmp/x.lmq"

# kill -9 (30 times) and SIGTERM (10 times) at random moments during quantize of a 30 MB GPT-2
# (the recipes alternate so that the old and the new artefact differ): the target is always the
# old whole artefact or the new one, never a mix; SIGTERM leaves no temporary file; kill -9 leaves
# one, which the next whole run removes. The moments are drawn within the time the shorter of the
# two whole runs took here, so that the signals land however fast quantize is on this machine.
"$LMQ" convert "$FIX/sotu-gpt2" -o "$tmp/g.lmq" >/dev/null
recipe() { [ $(($1 % 2)) = 1 ] && echo recipes/w4a16.yaml || echo recipes/fp16.yaml; }
ms() { date +%s%N | cut -c1-13; }
t0=$(ms)
"$LMQ" quantize "$tmp/g.lmq" --recipe "$(recipe 1)" -o "$tmp/ref1.lmq" --threads 1 >/dev/null
t1=$(ms)
"$LMQ" quantize "$tmp/g.lmq" --recipe "$(recipe 0)" -o "$tmp/ref0.lmq" --threads 1 >/dev/null
t2=$(ms)
span=$((t1 - t0 < t2 - t1 ? t1 - t0 : t2 - t1)) # ms
sum() { sha256sum "$1" | cut -c1-64; }
want1=$(sum "$tmp/ref1.lmq") want0=$(sum "$tmp/ref0.lmq")
[ "$want0" != "$want1" ] || fail "the two recipes give the same artefact: the check below tests nothing"
cp "$tmp/ref0.lmq" "$tmp/g4.lmq"
RANDOM=2026 # the same moments every run
killed=0 termed=0
for i in $(seq 40); do
    sig=KILL
    [ $((i % 4)) = 1 ] && sig=TERM
    "$LMQ" quantize "$tmp/g.lmq" --recipe "$(recipe "$i")" -o "$tmp/g4.lmq" --threads 1 >/dev/null 2>&1 &
    pid=$!
    sleep "$(awk -v r=$((RANDOM % 90)) -v s="$span" 'BEGIN { printf "%.3f", r / 100 * s / 1000 }')"
    kill -"$sig" "$pid" 2>/dev/null || true
    st=0
    { wait "$pid"; } 2>/dev/null || st=$? # (bash's "Killed" line goes too)
    case "$sig:$st" in
    *:0) ! ls -a "$tmp" | grep -q '\.tmp\.' || fail "run $i completed, temporary files are left: $(ls "$tmp")" ;;
    KILL:137) killed=$((killed + 1)) ;;
    TERM:143) termed=$((termed + 1)) ;;
    *) fail "run $i (SIG$sig) exited $st" ;;
    esac
    got=$(sum "$tmp/g4.lmq")
    [ "$got" = "$want0" ] || [ "$got" = "$want1" ] || fail "run $i (SIG$sig): the target is neither artefact"
    if [ "$sig" = TERM ] && ls -a "$tmp" | grep -q "g4.lmq.tmp.$pid\."; then
        fail "SIGTERM run $i left its temporary file"
    fi
done
[ "$killed" -ge 10 ] && [ "$termed" -ge 3 ] ||
    fail "only $killed kill -9 and $termed SIGTERM landed during a run: the loop tested too little"
run 0 "$LMQ" quantize "$tmp/g.lmq" --recipe "$(recipe 1)" -o "$tmp/g4.lmq"
! ls -a "$tmp" | grep -q '\.tmp\.' || fail "temporary files left after a whole run: $(ls "$tmp")"
[ "$(sum "$tmp/g4.lmq")" = "$want1" ] || fail "the last whole run's artefact differs from the reference"
echo "$SCRIPT: $killed kill -9 and $termed SIGTERM interrupted quantize; no temporary file left"

# A full disk (here: a file size limit, so writes fail with EFBIG) says why, and leaves neither
# the output nor a temporary file. The command's messages go through a pipe, which the limit
# does not cover.
limited() {
    local blocks=$1 st=0
    shift
    (trap '' XFSZ && ulimit -f "$blocks" && exec "$@") 2>&1 | cat >"$tmp/out" || st=${PIPESTATUS[0]}
    [ "$st" = 1 ] || { cat "$tmp/out" >&2; fail "'$*' under ulimit -f $blocks exited $st, expected 1"; }
}
limited 64 "$LMQ" quantize "$tmp/s.lmq" --recipe "$R" -o "$tmp/full.lmq"
has "$tmp/full.lmq: write failed: File too large"
limited 64 "$LMQ" convert "$S" -o "$tmp/full.lmq"
has "File too large"
limited 0 "$LMQ" verify "$tmp/s.lmq" --text "$tmp/t.txt" --ctx 64 --json "$tmp/full.json"
has "$tmp/full.json: cannot write: File too large"
! ls -a "$tmp" | grep -q 'full\.' || fail "a failed write left a file: $(ls "$tmp")"

echo "$SCRIPT: ok"
