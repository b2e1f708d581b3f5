#!/usr/bin/env bash
# lmq verify in CI: gates (exit 9 naming the failed gate and artefact, PASS/FAIL in the table and
# pass/failed_gates in the JSON, bad gates exit 2), --record (a checksummed record beside each
# artefact but the reference), and saved reference logits reused with identical metrics and
# refused for another text. (Records are checked against requirements in tests/test_record.c;
# the CLI that reads them is lmq audit's policy.)
. "$(dirname "$0")/lib.bash"
need_fixtures

"$LMQ" convert "$FIX/stories260K/stories260K.bin" -o "$tmp/s.lmq" >/dev/null
"$LMQ" quantize "$tmp/s.lmq" --recipe recipes/int8-channel.yaml -o "$tmp/q8.lmq" >/dev/null
"$LMQ" quantize "$tmp/s.lmq" --recipe recipes/int4-g32.yaml -o "$tmp/q4.lmq" >/dev/null
head -c 12000 "$FIX/text/tinystories-valid.txt" >"$tmp/t.txt"
sed 's/Once/Twice/' "$tmp/t.txt" >"$tmp/t2.txt"
v() { "$LMQ" verify "$tmp/s.lmq" "$tmp/q8.lmq" "$tmp/q4.lmq" --text "$tmp/t.txt" --ctx 64 --bandwidth 10 "$@"; }

# int8 passes both gates, int4 fails KL: exit 9, the failed gate named on stderr and in the table.
run 9 v --gate 'kl_mean<=0.01' --gate 'top1 >= 0.75' --json "$tmp/r.json" --markdown "$tmp/r.md" --record
has "q4.lmq: gate 'kl_mean<=0.01' failed (kl_mean = "
grep -q '^q8\.lmq .*  PASS$' "$tmp/out" || fail "q8 row is not PASS: $(cat "$tmp/out")"
grep -q '^q4\.lmq .*  FAIL kl_mean<=0.01' "$tmp/out" || fail "q4 row is not FAIL: $(cat "$tmp/out")"
grep -q '^s\.lmq .*  ref$' "$tmp/out" || fail "reference row: $(cat "$tmp/out")"
grep -q '| q4.lmq | .* | FAIL kl_mean<=0.01' "$tmp/r.md" || fail "markdown: $(cat "$tmp/r.md")"
python3 - "$tmp/r.json" <<'EOF' || fail "JSON report: $(cat "$tmp/r.json")"
import json, re, sys
r = json.load(open(sys.argv[1]))
assert r["tool_version"].startswith("lmq "), r["tool_version"]
assert re.fullmatch("[0-9a-f]{16}", r["text_checksum"]), r["text_checksum"]
assert r["gates"] == ["kl_mean<=0.01", "top1 >= 0.75"] and r["pass"] is False
rows = {w["artefact"]: w for w in r["rows"]}  # the table's names
assert list(rows) == ["s.lmq", "q8.lmq", "q4.lmq"] and r["reference"] == "s.lmq"
assert rows["s.lmq"]["is_reference"] and "pass" not in rows["s.lmq"]
assert not rows["q8.lmq"]["is_reference"] and rows["q8.lmq"]["pass"] and rows["q8.lmq"]["failed_gates"] == []
assert rows["q4.lmq"]["pass"] is False and rows["q4.lmq"]["failed_gates"] == ["kl_mean<=0.01"]
assert len({w["file_checksum"] for w in r["rows"]}) == 3
EOF

# Records beside the candidates, bound to the checksums in the report; none for the reference.
[ ! -e "$tmp/s.lmq.verify.json" ] || fail "a record for the reference"
python3 - "$tmp/r.json" "$tmp/q8.lmq.verify.json" "$tmp/q4.lmq.verify.json" <<'EOF' || fail "records"
import json, sys
r = json.load(open(sys.argv[1]))
rows = {w["path"]: w for w in r["rows"]}
for p in sys.argv[2:]:
    d = json.load(open(p))
    row = rows[d["artefact"]]
    assert d["artefact_checksum"] == row["file_checksum"], p
    assert d["reference_checksum"] == r["rows"][0]["file_checksum"] and d["text_checksum"] == r["text_checksum"], p
    assert d["protocol"] == {"name": "P1", "ctx": 64, "stride": 64, "windows": r["windows"],
                             "positions": r["positions"], "tokens": r["tokens"], "documents": r["documents"]}, p
    assert d["metrics"]["kl_mean"] == row["kl_mean"] and d["metrics"]["pass"] == row["pass"], p
    assert len(d["record_checksum"]) == 16, p
EOF

# Gates that hold: exit 0. Bad gates and impossible combinations: usage errors naming them.
run 0 v --gate 'kl_mean<=10' --gate 'dppl_pct<50'
has "  PASS"
run 2 v --gate 'kl<=0.01'
has "gate 'kl<=0.01': unknown metric 'kl'"
run 2 v --gate 'top1=>0.9'
has "gate 'top1=>0.9': the operator must be one of"
run 2 v --gate
has "--gate needs a value"
run 2 "$LMQ" verify "$tmp/s.lmq" "$tmp/q8.lmq" --speed-only --record
run 2 "$LMQ" verify "$tmp/s.lmq" --text "$tmp/t.txt" --record
run 1 v --save-reference-logits "$tmp/t.txt"
has "t.txt"

# Saved reference logits: the same metrics to the last bit, without running the reference.
run 0 v --save-reference-logits "$tmp/ref.logits" --json "$tmp/a.json"
run 0 "$LMQ" verify "$tmp/q4.lmq" "$tmp/q8.lmq" --reference-logits "$tmp/ref.logits" --text "$tmp/t.txt" --ctx 64 \
    --bandwidth 10 --json "$tmp/b.json"
python3 - "$tmp/a.json" "$tmp/b.json" <<'EOF' || fail "metrics differ with saved logits"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
rows = {w["artefact"]: w for w in b["rows"]}
for w in a["rows"]:
    for k in ("ppl", "nll", "top1", "kl_mean", "kl_p99", "dppl_pct"):
        assert w[k] == rows[w["artefact"]][k], (w["artefact"], k, w[k], rows[w["artefact"]][k])
assert b["reference"] == "s.lmq" and b["reference_logits"]["path"].endswith("ref.logits")
EOF
run 1 "$LMQ" verify "$tmp/q8.lmq" --reference-logits "$tmp/ref.logits" --text "$tmp/t2.txt" --ctx 64 --bandwidth 10
has "ref.logits: saved for another text"
run 1 "$LMQ" verify "$tmp/q8.lmq" --reference-logits "$tmp/ref.logits" --text "$tmp/t.txt" --ctx 32 --bandwidth 10
has "saved with ctx 64; this run uses ctx 32"
run 1 "$LMQ" verify "$tmp/q8.lmq" --reference "$tmp/q4.lmq" --reference-logits "$tmp/ref.logits" --text "$tmp/t.txt" \
    --ctx 64 --bandwidth 10
has "ref.logits: saved for reference"

# A record is an output like any other: never written through a link, refused before the run.
rm "$tmp/q8.lmq.verify.json"
ln -s "$tmp/t2.txt" "$tmp/q8.lmq.verify.json"
run 1 v --record
has "q8.lmq.verify.json: output is a symbolic link"
cmp -s "$tmp/t2.txt" <(sed 's/Once/Twice/' "$tmp/t.txt") || fail "the link's target changed"
echo "gates.sh: ok"
