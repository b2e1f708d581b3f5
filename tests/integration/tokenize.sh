#!/usr/bin/env bash
# lmq tokenize against the golden token ids (golden/tokens.json: per text and tokenizer the
# document count, the P1 stream's length and its first 64 ids; gpt2-tokenizer-known.json: short
# strings) for both fixture models: --documents --json is the P1 stream, its documents cut where
# P1 puts a boundary; the plain lines are the same ids; without --documents a string is encoded
# whole. Bad arguments exit 2 with the usage; a missing file is named.
. "$(dirname "$0")/lib.bash"
need_fixtures

"$LMQ" convert "$FIX/stories260K/stories260K.bin" -o "$tmp/llama2c-tok512.lmq" >/dev/null
"$LMQ" convert "$FIX/sotu-gpt2" -o "$tmp/gpt2.lmq" >/dev/null

# check.py KIND TEXT_KEY JSON LINES [FIRST_DOC_IDS]: the golden counts and ids of one text.
cat >"$tmp/check.py" <<'PY'
import json, sys
kind, key, out, lines = sys.argv[1:5]
gold_all = json.load(open(sys.argv[5]))[key]
gold = gold_all[kind]
r = json.load(open(out))
toks, docs = r["tokens"], r["documents"]
def need(ok, what):
    if not ok:
        sys.exit(f"{kind} {key}: {what}")
need(r["count"] == len(toks) == gold["p1_stream_tokens"], f"count {r['count']}, {len(toks)} ids, golden {gold['p1_stream_tokens']}")
need(toks[:64] == gold["first64"], f"first ids {toks[:64]}")
need(len(docs) == gold_all["documents"], f"{len(docs)} documents, golden {gold_all['documents']}")
need(sum(docs, []) == toks, "the documents are not the stream cut in pieces")
# P1's boundaries: llama2c starts every document with BOS (1), GPT-2 joins them with <|endoftext|>.
first = [d[0] for d in docs[1:]]
need(all(t == (1 if kind.startswith("llama2c") else 50256) for t in first), f"documents start with {set(first)}")
need(kind != "gpt2" or 50256 not in docs[0], "the first document holds <|endoftext|>")
plain = [[int(t) for t in l.split()] for l in open(lines).read().splitlines()]
need(plain == docs, "the plain lines are not the JSON documents")
if len(sys.argv) > 6:
    whole = [int(t) for t in open(sys.argv[6]).read().split()]
    need(whole == docs[0], "the first document encoded whole is not P1's first document")
PY
# The first document of a text, stripped (P1's split, written independently of lmq's).
first_doc() { python3 -c 'import sys; print(open(sys.argv[1]).read().split("\n<|endoftext|>\n")[0].strip(), end="")' "$1"; }

gold="$FIX/golden/tokens.json"
for key in $(python3 -c 'import json, sys; print(" ".join(json.load(open(sys.argv[1]))))' "$gold"); do
    text="$FIX/${key#shared/fixtures/}"
    [ -f "$text" ] || fail "$key: no such text"
    for kind in llama2c-tok512 gpt2; do
        m="$tmp/$kind.lmq"
        "$LMQ" tokenize "$m" --text "$text" --documents --json >"$tmp/r.json" || fail "tokenize $kind $key --json"
        "$LMQ" tokenize "$m" --text "$text" --documents >"$tmp/lines" || fail "tokenize $kind $key"
        first_doc "$text" >"$tmp/doc1.txt"
        "$LMQ" tokenize "$m" --text "$tmp/doc1.txt" >"$tmp/whole" || fail "tokenize $kind $key's first document"
        python3 "$tmp/check.py" "$kind" "$key" "$tmp/r.json" "$tmp/lines" "$gold" "$tmp/whole" || fail "$kind $key"
    done
done

# Known answers for short strings, encoded whole (no BOS for GPT-2), as text and as JSON.
known="$FIX/golden/gpt2-tokenizer-known.json"
python3 -c 'import json, sys
for s, ids in json.load(open(sys.argv[1])).items(): print(s + "\t" + " ".join(map(str, ids)))' "$known" >"$tmp/known"
[ -s "$tmp/known" ] || fail "no known answers in $known"
while IFS=$'\t' read -r s ids; do
    run 0 "$LMQ" tokenize "$tmp/gpt2.lmq" --string "$s"
    [ "$(cat "$tmp/out")" = "$ids" ] || fail "'$s': $(cat "$tmp/out"), expected $ids"
    printf '%s' "$s" >"$tmp/s.txt"
    run 0 "$LMQ" tokenize "$tmp/gpt2.lmq" --text "$tmp/s.txt" --json
    python3 -c 'import json, sys
r = json.load(open(sys.argv[1])); want = [int(t) for t in sys.argv[2].split()]
sys.exit(0 if r == {"tokens": want, "count": len(want)} else f"{r} is not {want}")' "$tmp/out" "$ids" ||
        fail "'$s' --json"
done <"$tmp/known"

# Bad arguments: exit 2 and the usage; missing or unreadable files: exit 1, naming them.
for args in "" "$tmp/gpt2.lmq" "$tmp/gpt2.lmq --text a --string b" "--string x" "$tmp/gpt2.lmq --string" \
    "$tmp/gpt2.lmq --string x --nosuch"; do
    # shellcheck disable=SC2086 # the arguments are split on purpose
    run 2 "$LMQ" tokenize $args
    has "usage: lmq tokenize A.lmq (--text FILE | --string S)"
done
run 1 "$LMQ" tokenize "$tmp/none.lmq" --string x
has "$tmp/none.lmq"
run 1 "$LMQ" tokenize "$tmp/gpt2.lmq" --text "$tmp/none.txt"
has "$tmp/none.txt"
printf '<|endoftext|>\n  \n' >"$tmp/empty.txt"
run 1 "$LMQ" tokenize "$tmp/gpt2.lmq" --text "$tmp/empty.txt" --documents
has "$tmp/empty.txt: text holds no document"
printf 'a\377b' >"$tmp/bad.txt"
run 1 "$LMQ" tokenize "$tmp/gpt2.lmq" --text "$tmp/bad.txt"
has "$tmp/bad.txt: "
has "byte offset 1"
echo "$SCRIPT: ok"
