#!/usr/bin/env bash
# lmq export --to gguf and lmq convert X.gguf end to end: int4 / int8 g32 artefacts of both
# fixture models go to GGUF (Q4_0 / Q8_0) and come back with the same tensor checksums and the
# same scores; encodings without a GGUF twin are refused naming the tensor, or re-quantised with
# --allow-requantize, which lists them; imports pass audit; damaged files are refused naming the
# file, and leave no output.
. "$(dirname "$0")/lib.bash"
need_fixtures

tensors() { "$LMQ" inspect "$1" | grep -E '^(blk|tok_embd|pos_embd|out_norm|output)\.' | awk '{print $1, $2, $3, $NF}'; }

cat >"$tmp/g32.yaml" <<'YAML'
name: g32
rules:
  - match: ["blk.*.attn_out.weight", "blk.*.ffn_up.weight"]
    scheme: int4
    granularity: group
    group: 32
  - match: "tok_embd.weight"
    scheme: int8
    granularity: group
    group: 32
YAML
head -c 4000 "$FIX/text/tinystories-valid.txt" >"$tmp/text.txt"
for src in stories260K/stories260K.bin sotu-gpt2; do
    name=$(basename "$src" .bin)
    "$LMQ" convert "$FIX/$src" -o "$tmp/$name.lmq" >/dev/null
    "$LMQ" quantize "$tmp/$name.lmq" --recipe "$tmp/g32.yaml" -o "$tmp/$name.q.lmq" >/dev/null
    run 0 "$LMQ" export "$tmp/$name.q.lmq" --to gguf -o "$tmp/$name.gguf"
    has "0 re-quantised"
    run 0 "$LMQ" convert "$tmp/$name.gguf" -o "$tmp/$name.back.lmq"
    "$LMQ" audit "$tmp/$name.back.lmq" >/dev/null || fail "$name: the import fails audit"
    diff <(tensors "$tmp/$name.q.lmq") <(tensors "$tmp/$name.back.lmq") >&2 || fail "$name: tensors differ after the round trip"
    "$LMQ" verify "$tmp/$name.q.lmq" "$tmp/$name.back.lmq" --text "$tmp/text.txt" --ctx 64 --bandwidth 10 \
        --json "$tmp/$name.json" >/dev/null
    grep -q '"kl_mean": 0.0,' "$tmp/$name.json" && [ "$(grep -c '"kl_mean": 0.0,' "$tmp/$name.json")" = 2 ] ||
        fail "$name: the imported artefact scores differently"
    # The import came encoded: its error against fp32 weights is unknown (null, '-'), its scheme says so.
    python3 -c '
import json, sys
q, back = json.load(open(sys.argv[1]))["rows"]
assert q["rel_error_median"] > 0 and back["rel_error_median"] is None and back["rel_error_worst"] is None, back
assert back["scheme"] == "imported " + q["scheme"], (q["scheme"], back["scheme"])
' "$tmp/$name.json" || fail "$name: the import's unknown errors: $(cat "$tmp/$name.json")"
    # Exported again, the same file.
    "$LMQ" export "$tmp/$name.back.lmq" --to gguf -o "$tmp/$name.again.gguf" >/dev/null
    cmp -s "$tmp/$name.gguf" "$tmp/$name.again.gguf" || fail "$name: export of the import differs"
done

# GPT-2 converted with --split-qkv: q, k, v go out fused as llama.cpp wants, the same file as
# from the fused conversion, at fp32 and at int8 g32 (groups lie within rows: the same codes).
"$LMQ" convert "$FIX/sotu-gpt2" --split-qkv -o "$tmp/split.lmq" >/dev/null
cat >"$tmp/attn8.yaml" <<'YAML'
name: attn8
rules:
  - match: "blk.*.attn_*.weight"
    scheme: int8
    granularity: group
    group: 32
YAML
for v in sotu-gpt2 split; do
    "$LMQ" export "$tmp/$v.lmq" --to gguf -o "$tmp/$v.fp32.gguf" >/dev/null
    "$LMQ" quantize "$tmp/$v.lmq" --recipe "$tmp/attn8.yaml" -o "$tmp/$v.attn8.lmq" >/dev/null
    "$LMQ" export "$tmp/$v.attn8.lmq" --to gguf -o "$tmp/$v.attn8.gguf" >/dev/null
done
cmp -s "$tmp/sotu-gpt2.fp32.gguf" "$tmp/split.fp32.gguf" || fail "--split-qkv fp32: another GGUF than the fused conversion"
cmp -s "$tmp/sotu-gpt2.attn8.gguf" "$tmp/split.attn8.gguf" || fail "--split-qkv int8 g32: another GGUF than the fused conversion"

# int4 per channel has no GGUF twin: refused naming the tensor, no file; re-quantised on request.
"$LMQ" quantize "$tmp/stories260K.lmq" --recipe recipes/int4-channel.yaml -o "$tmp/ch.lmq" >/dev/null
run 1 "$LMQ" export "$tmp/ch.lmq" --to gguf -o "$tmp/ch.gguf"
has "tensor blk.0.attn_q.weight: int4 per-channel has no exact GGUF type"
has "--allow-requantize"
[ ! -e "$tmp/ch.gguf" ] || fail "a refused export left a file"
run 0 "$LMQ" export "$tmp/ch.lmq" --to gguf -o "$tmp/ch.gguf" --allow-requantize
has "blk.0.attn_q.weight: int4 per-channel -> q8_0"
has "blk.4.ffn_down.weight: int4 per-channel -> f32 (172 columns: no Q8_0 blocks)"
has "35 re-quantised"
run 0 "$LMQ" convert "$tmp/ch.gguf" -o "$tmp/ch.back.lmq"
"$LMQ" inspect "$tmp/ch.back.lmq" >"$tmp/inspect"
grep -q '^blk.0.attn_q.weight  *\[64, 64\]  *int8 g32' "$tmp/inspect" || fail "re-quantised tensor is not int8 g32"

run 2 "$LMQ" export "$tmp/ch.lmq" --to onnx -o "$tmp/x.onnx"
has "unknown target 'onnx'"
run 1 "$LMQ" export "$tmp/ch.lmq" --to gguf -o "$tmp/ch.lmq" --allow-requantize
has "ch.lmq: output is the same file as the input"

# Damaged files: truncated, wrong magic; each names the file, none leaves an artefact.
head -c 1000 "$tmp/stories260K.gguf" >"$tmp/cut.gguf"
run 1 "$LMQ" convert "$tmp/cut.gguf" -o "$tmp/cut.lmq"
has "cut.gguf"
[ ! -e "$tmp/cut.lmq" ] || fail "a failed import left a file"
printf 'GGUX\3\0\0\0' >"$tmp/magic.gguf"
run 1 "$LMQ" convert "$tmp/magic.gguf" -o "$tmp/magic.lmq"
has "magic.gguf: not a GGUF file"
run 1 "$LMQ" convert "$tmp/stories260K.gguf" --split-qkv -o "$tmp/s.lmq"
has "do not apply to a GGUF file"

# A tokenizer.json model: sotu-gpt2 with its vocab.json + merges.txt re-saved as one byte-level
# BPE tokenizer.json (as transformers writes GPT-2's) exports to the same GGUF as the vocab.json
# conversion (tokenizer.ggml.model gpt2, pre gpt-2, the same tokens, types and merges), and the
# import tokenizes the fixture texts to the same ids.
mkdir "$tmp/tj"
cp "$FIX/sotu-gpt2/config.json" "$tmp/tj/"
ln -s "$(cd "$FIX/sotu-gpt2" && pwd)/model.safetensors" "$tmp/tj/model.safetensors"
python3 - "$FIX/sotu-gpt2" "$tmp/tj/tokenizer.json" <<'PY'
import json, sys
vocab = json.load(open(sys.argv[1] + "/vocab.json", encoding="utf-8"))
merges = [l.rstrip("\n") for l in open(sys.argv[1] + "/merges.txt", encoding="utf-8")
          if l.strip() and not l.startswith("#version")]
bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
json.dump({"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [{"id": vocab["<|endoftext|>"], "content": "<|endoftext|>", "single_word": False,
                             "lstrip": False, "rstrip": False, "normalized": True, "special": True}],
           "normalizer": None, "pre_tokenizer": bl, "post_processor": bl, "decoder": bl,
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                     "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                     "merges": merges}},
          open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
PY
"$LMQ" convert "$tmp/tj" -o "$tmp/tj.lmq" >/dev/null
"$LMQ" inspect "$tmp/tj.lmq" >"$tmp/tj.inspect"
grep -q 'tokenizer: hf_json' "$tmp/tj.inspect" || fail "the re-saved model does not carry its tokenizer.json"
run 0 "$LMQ" export "$tmp/tj.lmq" --to gguf -o "$tmp/tj.gguf"
cmp -s "$tmp/tj.gguf" "$tmp/sotu-gpt2.fp32.gguf" || fail "tokenizer.json: another GGUF than from vocab.json + merges.txt"
run 0 "$LMQ" convert "$tmp/tj.gguf" -o "$tmp/tj.back.lmq"
for text in tinystories-valid.txt sotu-eval.txt; do
    for a in sotu-gpt2 tj tj.back; do "$LMQ" tokenize "$tmp/$a.lmq" --text "$FIX/text/$text" >"$tmp/$a.ids"; done
    cmp -s "$tmp/sotu-gpt2.ids" "$tmp/tj.ids" && cmp -s "$tmp/tj.ids" "$tmp/tj.back.ids" ||
        fail "tokenizer.json: $text tokenizes differently after the GGUF round trip"
done
# A GPT-2 tokenizer whose merges.txt is only its header (every word a single token): the GGUF
# holds an empty tokenizer.ggml.merges, and comes back through convert, auditing clean.
mkdir "$tmp/nomerges"
cp "$FIX/sotu-gpt2/config.json" "$FIX/sotu-gpt2/vocab.json" "$FIX/sotu-gpt2/model.safetensors" "$tmp/nomerges/"
head -n 1 "$FIX/sotu-gpt2/merges.txt" >"$tmp/nomerges/merges.txt"
"$LMQ" convert "$tmp/nomerges" -o "$tmp/nomerges.lmq" >/dev/null
run 0 "$LMQ" export "$tmp/nomerges.lmq" --to gguf -o "$tmp/nomerges.gguf"
run 0 "$LMQ" convert "$tmp/nomerges.gguf" -o "$tmp/nomerges.back.lmq"
run 0 "$LMQ" audit "$tmp/nomerges.back.lmq"
