#!/usr/bin/env bash
# lmq calibrate and the calibrated recipes end to end on stories260K: the stats file passes
# audit and is the same bytes for any thread count; a recipe that needs statistics and gets none
# names its rule; statistics of another model, a calibration text that is not the one they name,
# and a text shorter than one window are clear errors that write nothing; GPTQ, AWQ and
# SmoothQuant artefacts pass audit, record what was done, and do not depend on the thread count.
. "$(dirname "$0")/lib.bash"
need_fixtures

T="$FIX/text/tinystories-valid.txt"
"$LMQ" convert "$FIX/stories260K/stories260K.bin" -o "$tmp/s.lmq" >/dev/null
head -c 20000 "$T" >"$tmp/calib.txt"
run 0 "$LMQ" calibrate "$tmp/s.lmq" --text "$tmp/calib.txt" --ctx 128 --windows 16 -o "$tmp/stats.lmq" --threads 1
has "statistics of 20 inputs over"
run 0 "$LMQ" calibrate "$tmp/s.lmq" --text "$tmp/calib.txt" --ctx 128 --windows 16 -o "$tmp/stats2.lmq" --threads 2
cmp -s "$tmp/stats.lmq" "$tmp/stats2.lmq" || fail "calibrate: the thread count changed the statistics"
run 0 "$LMQ" audit "$tmp/stats.lmq"
run 0 "$LMQ" inspect "$tmp/stats.lmq"
has "kind: stats"
run 0 "$LMQ" manifest "$tmp/stats.lmq"
has "kind: stats"
run 0 "$LMQ" manifest "$tmp/stats.lmq" --json
has '"kind": "stats",'
has "stats.blk.4.ffn_down_in.gram"

# Refusals, nothing written.
printf 'Once upon a time.\n' >"$tmp/short.txt"
run 1 "$LMQ" calibrate "$tmp/s.lmq" --text "$tmp/short.txt" -o "$tmp/none.lmq"
has "fewer than one window"
run 1 "$LMQ" quantize "$tmp/s.lmq" --recipe recipes/gptq-int4-g128.yaml -o "$tmp/none.lmq"
has "recipes/gptq-int4-g128.yaml:4: method gptq needs activation statistics"
run 1 "$LMQ" quantize "$tmp/s.lmq" --recipe recipes/w8a8-smoothquant.yaml -o "$tmp/none.lmq"
has "smoothquant needs activation statistics"
"$LMQ" quantize "$tmp/s.lmq" --recipe recipes/fp16.yaml -o "$tmp/other.lmq" >/dev/null
run 1 "$LMQ" quantize "$tmp/other.lmq" --recipe recipes/awq-int4-g128.yaml --stats "$tmp/stats.lmq" -o "$tmp/none.lmq"
has "statistics of another model"
run 1 "$LMQ" quantize "$tmp/s.lmq" --recipe recipes/awq-int4-g128.yaml --stats "$tmp/s.lmq" -o "$tmp/none.lmq"
has "not a stats file"
head -c 20001 "$T" >"$tmp/other.txt"
run 1 "$LMQ" quantize "$tmp/s.lmq" --recipe recipes/gptq-int4-g128.yaml --stats "$tmp/stats.lmq" \
    --calib-text "$tmp/other.txt" -o "$tmp/none.lmq"
has "the statistics were taken on text"
run 2 "$LMQ" quantize "$tmp/s.lmq" --recipe recipes/gptq-int4-g128.yaml --calib-text "$tmp/calib.txt" -o "$tmp/none.lmq"
[ ! -e "$tmp/none.lmq" ] || fail "a refused run wrote its output"
! ls "$tmp" | grep -q '\.tmp\.' || fail "a refused run left a temporary file"

# The calibrated recipes: audit passes, the manifest says what was done, threads change nothing.
for r in gptq-int4-g128 gptq-int4-g128-actorder awq-int4-g128 w8a8-smoothquant; do
    for t in 1 2; do
        "$LMQ" quantize "$tmp/s.lmq" --recipe "recipes/$r.yaml" --stats "$tmp/stats.lmq" --threads $t \
            -o "$tmp/$r-$t.lmq" >/dev/null || fail "$r --threads $t"
    done
    cmp -s "$tmp/$r-1.lmq" "$tmp/$r-2.lmq" || fail "$r: the thread count changed the artefact"
    run 0 "$LMQ" audit "$tmp/$r-1.lmq"
done
run 0 "$LMQ" inspect "$tmp/gptq-int4-g128-actorder-1.lmq"
has "method: gptq"
has "act_order: true"
has "damp_used: 0.01"
has "stats_checksum:"
run 0 "$LMQ" inspect "$tmp/awq-int4-g128-1.lmq"
has "method: awq"
has "clip_mean:"
has "heads share value rows" # stories260K has grouped-query attention: no fold for attn_out's scales
run 0 "$LMQ" inspect "$tmp/w8a8-smoothquant-1.lmq"
has "smoothquant_alpha: 0.5"
has "not smoothed: its input is attention's output"
# A recipe that rounds to nearest leaves the statistics unused and unnamed: the same bytes as without.
"$LMQ" quantize "$tmp/s.lmq" --recipe recipes/int4-g128.yaml --stats "$tmp/stats.lmq" -o "$tmp/rtn-a.lmq" >/dev/null
"$LMQ" quantize "$tmp/s.lmq" --recipe recipes/int4-g128.yaml -o "$tmp/rtn-b.lmq" >/dev/null
cmp -s "$tmp/rtn-a.lmq" "$tmp/rtn-b.lmq" || fail "--stats changed a round-to-nearest artefact"
# The calibrated artefacts run. Scored on the text they were calibrated on, verify warns (the
# table, the JSON); on another text, not.
run 0 "$LMQ" generate "$tmp/gptq-int4-g128-1.lmq" -n 8
run 0 "$LMQ" verify "$tmp/s.lmq" "$tmp/gptq-int4-g128-1.lmq" "$tmp/rtn-a.lmq" --text "$tmp/calib.txt" --ctx 128 --json "$tmp/v.json"
has "warning: gptq-int4-g128-1.lmq was calibrated on this text: its scores are not held-out"
[ "$(grep -c "^warning: " "$tmp/out")" = 1 ] || fail "a warning for an artefact not calibrated on the text"
python3 -c 'import json, sys; print([w["scored_on_calibration_text"] for w in json.load(open(sys.argv[1]))["rows"]])' \
    "$tmp/v.json" | grep -qx "\[False, True, False\]" || fail "scored_on_calibration_text: $(cat "$tmp/v.json")"
head -c 29000 "$T" | tail -c 9000 >"$tmp/held.txt" # after the calibration text
run 0 "$LMQ" verify "$tmp/s.lmq" "$tmp/gptq-int4-g128-1.lmq" --text "$tmp/held.txt" --ctx 128
grep -q "^warning: " "$tmp/out" && fail "a warning on held-out text"
echo "calibrate.sh: ok"
