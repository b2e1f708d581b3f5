#!/usr/bin/env bash
# lmq verify --shard K/N and --merge: 1, 2, 3 and 7 shards of the demo's verify (its model, two of
# its recipes, a document of its evaluation text) merge to the JSON the single run writes, timing
# fields aside; a missing, repeated or foreign shard, a damaged one and a malformed K/N are errors
# that name them. The sanitizer build runs the same on stories260K (memory safety, not numbers).
. "$(dirname "$0")/lib.bash"
need_fixtures
[[ $LMQ != */* ]] || LMQ=$(realpath "$LMQ") # the script runs in $tmp

docs() { awk -v a="$2" -v b="$3" 'BEGIN { d = 1 } /^<\|endoftext\|>\r?$/ { if (++d > a && d <= b) print; next } d >= a && d <= b' "$1"; }
if [ -z "${LMQ_SAN:-}" ]; then
    "$LMQ" convert demo/sotu-gpt2 -o "$tmp/fp32.lmq" >/dev/null
    docs demo/sotu-eval.txt 7 7 >"$tmp/doc.txt"
    head -c 5000 "$tmp/doc.txt" >"$tmp/eval.txt"
    ctx=128
else
    "$LMQ" convert "$FIX/stories260K/stories260K.bin" -o "$tmp/fp32.lmq" >/dev/null
    head -c 3000 "$FIX/text/tinystories-valid.txt" >"$tmp/eval.txt"
    ctx=64
fi
for r in int4-g32 int8-channel; do "$LMQ" quantize "$tmp/fp32.lmq" --recipe "recipes/$r.yaml" -o "$tmp/$r.lmq" >/dev/null; done
cd "$tmp"
models=(fp32.lmq int4-g32.lmq int8-channel.lmq)
run 0 "$LMQ" verify "${models[@]}" --text eval.txt --ctx $ctx --json single.json --record
windows=$(jq .windows single.json)
[ "$windows" -ge 7 ] || fail "$windows windows: 7 shards need at least 7"
mv int4-g32.lmq.verify.json single-record.json

# Speed is measured by a run, not by shards: its fields are left out of the comparison.
speed='del(.prefill_tokens_per_s, .decode_tokens_per_s, .decode_roofline, .read_gbps)'
report="del(.read_gbps, .threads) | .rows |= map($speed)"
record="del(.record_checksum) | .metrics |= $speed" # the checksum covers the speed too
same_json() { # FILTER A B MESSAGE
    jq -S "$1" "$2" >"$tmp/a.json" && jq -S "$1" "$3" >"$tmp/b.json" || fail "jq on $2 or $3"
    [ -s "$tmp/a.json" ] || fail "$2: empty"
    cmp -s "$tmp/a.json" "$tmp/b.json" || { diff "$tmp/a.json" "$tmp/b.json" | head -20 >&2; fail "$4"; }
}

for N in 1 2 3 7; do
    shards=()
    for ((k = 0; k < N; k++)); do
        # The thread count changes no value: shards run with other counts than the single run.
        run 0 "$LMQ" verify "${models[@]}" --text eval.txt --ctx $ctx --threads $((k % 2 + 1)) --shard $k/$N -o s$N.$k
        has "s$N.$k: shard $k/$N, $(((windows - k + N - 1) / N)) of $windows windows, 3 rows"
        shards+=(s$N.$k)
    done
    # Any order of the files: the merge puts the windows back in theirs.
    run 0 "$LMQ" verify --merge $(printf '%s\n' "${shards[@]}" | sort -r) --json m$N.json
    same_json "$report" single.json m$N.json "$N shards: the merged JSON differs from the single run's"
done
grep -q '"kl_mean": 0\.0*[1-9]' m7.json || fail "the candidates' KL is not positive: $(jq '.rows[1].kl_mean' m7.json)"

# Gates and records from a merge are the single run's.
run 0 "$LMQ" verify --merge s3.0 s3.1 s3.2 --record
same_json "$record" single-record.json int4-g32.lmq.verify.json "the merged record differs from the single run's"
run 9 "$LMQ" verify --merge s3.0 s3.1 s3.2 --gate 'kl_mean<=0'
has "int4-g32.lmq: gate 'kl_mean<=0' failed"

# The errors on a shorter text (a few windows each): three shards of it, and another N.
head -c $(($(wc -c <eval.txt) / 2)) eval.txt >small.txt
for s in 0/3 1/3 2/3 1/2; do
    run 0 "$LMQ" verify "${models[@]}" --text small.txt --ctx $ctx --threads 2 --shard $s -o "b${s#*/}.${s%/*}"
done

# Missing, repeated, foreign: each names its file or index.
run 1 "$LMQ" verify --merge b3.0 b3.2
has "shard 1/3 is missing: 2 of 3 shards given"
run 1 "$LMQ" verify --merge b3.0 b3.1 b3.1 b3.2
has "b3.1 and b3.1 both hold shard 1/3"
cp b3.1 copy.1
run 1 "$LMQ" verify --merge b3.0 b3.1 copy.1 b3.2
has "b3.1 and copy.1 both hold shard 1/3"
run 1 "$LMQ" verify --merge b3.0 b2.1 b3.2
has "b2.1: a shard of another run than b3.0 (shards: 2, not 3)"
head -c $(($(wc -c <small.txt) * 2 / 3)) small.txt >other.txt
foreign() { # NAME ARGS... : shard 1/3 of another run, refused naming the file and the field
    local name=$1 field=$2
    shift 2
    run 0 "$LMQ" verify "$@" --shard 1/3 -o "$name"
    run 1 "$LMQ" verify --merge b3.0 "$name" b3.2
    has "$name: a shard of another run than b3.0 ($field"
}
foreign text.1 text_checksum "${models[@]}" --text other.txt --ctx $ctx
foreign ctx.1 ctx "${models[@]}" --text small.txt --ctx $((ctx / 2))
cp int8-channel.lmq other.lmq
foreign artefact.1 "row 2 (int8-channel.lmq)'s path: \"other.lmq\", not \"int8-channel.lmq\"" fp32.lmq int4-g32.lmq other.lmq --text small.txt --ctx $ctx
foreign reference.1 "row 0 (fp32.lmq)'s" int8-channel.lmq int4-g32.lmq fp32.lmq --text small.txt --ctx $ctx
foreign kv.1 "rows: 4 artefacts, not 3" "${models[@]}" --text small.txt --ctx $ctx --kv-v int8
# The KV cache's formats: --kv int8 against the same with fp16 keys.
run 0 "$LMQ" verify "${models[@]}" --text small.txt --ctx $ctx --kv int8 --shard 0/2 -o kv8.0
run 0 "$LMQ" verify "${models[@]}" --text small.txt --ctx $ctx --kv int8 --kv-k fp16 --shard 1/2 -o kvk.1
run 1 "$LMQ" verify --merge kv8.0 kvk.1
has "kvk.1: a shard of another run than kv8.0 (row 1 (fp32.lmq)'s kv_bytes_per_token"

# Damaged and hostile files: the container's checks name the file; an artefact is not a shard.
head -c 3000 b3.1 >cut.1
run 1 "$LMQ" verify --merge b3.0 cut.1 b3.2
has "cut.1: truncated or damaged"
cp b3.1 flip.1
printf '\xff' | dd of=flip.1 bs=1 seek=100 conv=notrunc 2>/dev/null
run 1 "$LMQ" verify --merge b3.0 flip.1 b3.2
has "flip.1"
run 1 "$LMQ" verify --merge b3.0 fp32.lmq b3.2
has "fp32.lmq: not a verify shard"

# K/N: malformed, out of range, from the environment (a Slurm array may start at a non-zero id).
for bad in 3/3 1/0 a/2 1/ /2 2 -1/2 env/0 0/257; do
    run 2 "$LMQ" verify fp32.lmq --text small.txt --shard "$bad" -o x
    has "--shard"
done
run 2 env -u SLURM_ARRAY_TASK_ID -u JOB_COMPLETION_INDEX "$LMQ" verify fp32.lmq --text small.txt --shard env -o x
has "neither SLURM_ARRAY_TASK_ID nor JOB_COMPLETION_INDEX is set"
run 0 env SLURM_ARRAY_TASK_ID=6 SLURM_ARRAY_TASK_MIN=5 SLURM_ARRAY_TASK_COUNT=3 \
    "$LMQ" verify "${models[@]}" --text small.txt --ctx $ctx --threads 2 --shard env -o slurm.1
has "slurm.1: shard 1/3"
cmp -s slurm.1 b3.1 || fail "the shard from Slurm's environment differs from --shard 1/3's"
run 2 env SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=4 "$LMQ" verify fp32.lmq --text small.txt --shard env/3 -o x
has "the Slurm array has 4 tasks"
run 2 env -u SLURM_ARRAY_TASK_ID JOB_COMPLETION_INDEX=2 "$LMQ" verify fp32.lmq --text small.txt --shard env -o x
has "JOB_COMPLETION_INDEX gives no count: give --shard env/N"
run 0 env -u SLURM_ARRAY_TASK_ID JOB_COMPLETION_INDEX=2 "$LMQ" verify "${models[@]}" --text small.txt --ctx $ctx --threads 2 --shard env/3 -o k8s.2
cmp -s k8s.2 b3.2 || fail "the shard from JOB_COMPLETION_INDEX differs from --shard 2/3's"

# What belongs to the merge is refused by a shard, and what belongs to a run by a merge.
run 2 "$LMQ" verify fp32.lmq --text small.txt --shard 0/2 -o x --json x.json
has "--shard does not take --json"
run 2 "$LMQ" verify fp32.lmq --text small.txt --shard 0/2
has "--shard K/N and -o SHARD go together"
run 2 "$LMQ" verify --merge b3.0 b3.1 b3.2 --text small.txt
has "--merge does not take --text"
run 1 "$LMQ" verify --merge b3.0 b3.1 b3.2 --json b3.0
has "b3.0: output is the same file as the input"
[ ! -e x ] || fail "a refused shard left a file"
