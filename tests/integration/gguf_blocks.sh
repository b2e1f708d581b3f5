#!/usr/bin/env bash
# Every GGUF block encoding lmq produces goes out as it is and comes back as it was: sotu-llama256
# (every matrix 256·k wide, so the 256-blocks apply) quantised with a recipe per type is exported
# with `lmq export --to gguf` (nothing re-quantised), each matrix in the file has the type's ggml
# id and general.file_type llama.cpp's LLAMA_FTYPE number for it (read by an independent reader
# below, not lmq's), and `lmq convert` of the file gives every tensor with the same bytes
# (checksums), an artefact audit passes and a second export identical to the first; the same for
# the mixed recipes/gguf/Q4_K_M.yaml, with llama-quantize's per-tensor types. The 32-blocks
# also go through stories260K (64 wide: no 256-blocks). q8_0 and q4_0 come back as those rows, not
# as lmq's int8 / int4 g32 (the file's lmq.block_rows names them).
. "$(dirname "$0")/lib.bash"
need_fixtures

tensors() { "$LMQ" inspect "$1" | grep -E '^(blk|tok_embd|pos_embd|out_norm|output)\.' | awk '{print $1, $2, $3, $NF}'; }

# The GGUF file's general.file_type, then "name type" for each tensor (GGUF v3, little-endian).
cat >"$tmp/gguf_types.py" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
assert d[:4] == b"GGUF" and struct.unpack_from("<I", d, 4)[0] == 3
n_t, n_kv = struct.unpack_from("<QQ", d, 8)
p = 24
SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def string(p):
    n, = struct.unpack_from("<Q", d, p)
    return d[p + 8:p + 8 + n].decode(), p + 8 + n
def value(t, p):
    if t == 8:
        return string(p)
    if t == 9:
        et, n = struct.unpack_from("<IQ", d, p)
        p += 12
        for _ in range(n):
            _, p = value(et, p)
        return None, p
    v = int.from_bytes(d[p:p + SIZES[t]], "little")
    return v, p + SIZES[t]
ftype = None
for _ in range(n_kv):
    k, p = string(p)
    t, = struct.unpack_from("<I", d, p)
    v, p = value(t, p + 4)
    if k == "general.file_type":
        ftype = v
print("file_type", ftype)
for _ in range(n_t):
    name, p = string(p)
    nd, = struct.unpack_from("<I", d, p)
    p += 4 + 8 * nd
    t, = struct.unpack_from("<I", d, p)
    p += 12
    print(name, nd, t)
PY

# type, its ggml id (ggml.h), llama.h's LLAMA_FTYPE for a file mostly of it (the loader's guess:
# the K-types' _M mixes)
while read -r type ggml ftype; do
    for src in sotu-llama256/model.bin stories260K/stories260K.bin; do
        case $type in q2_k | q3_k | q4_k | q5_k | q6_k | iq4_xs) [ "$src" != sotu-llama256/model.bin ] && continue ;; esac
        name=${src%%/*}
        [ -f "$tmp/$name.lmq" ] || "$LMQ" convert "$FIX/$src" -o "$tmp/$name.lmq" >/dev/null
        # stories260K's ffn_down has 172 columns, not whole 32-blocks
        if [ "$name" = stories260K ]; then m='["blk.*.attn_*.weight", "blk.*.ffn_gate.weight", "blk.*.ffn_up.weight"]'
        else m='["blk.*.attn_*.weight", "blk.*.ffn_*.weight", "tok_embd.weight"]'; fi
        printf 'name: %s\nrules:\n  - match: %s\n    scheme: %s\n' "$type" "$m" "$type" >"$tmp/$type.yaml"
        q=$tmp/$name.$type
        "$LMQ" quantize "$tmp/$name.lmq" --recipe "$tmp/$type.yaml" -o "$q.lmq" >/dev/null
        run 0 "$LMQ" export "$q.lmq" --to gguf -o "$q.gguf"
        has "0 re-quantised"
        python3 "$tmp/gguf_types.py" "$q.gguf" >"$q.types"
        grep -qx "file_type $ftype" "$q.types" || fail "$name $type: general.file_type is not $ftype: $(head -1 "$q.types")"
        # every matrix the recipe names has the type's ggml id; the norms stay F32 (0)
        want=$(grep -cE '^blk\.[0-9]+\.(attn_(q|k|v|output)|ffn_(gate|up|down))\.weight 2 ' "$q.types" || true)
        [ "$name" = stories260K ] && want=$((want - $(grep -c '^blk\.[0-9]*\.ffn_down\.weight ' "$q.types")))
        got=$(grep -cE " 2 $ggml\$" "$q.types" || true)
        [ "$name" = sotu-llama256 ] && want=$((want + 1)) # token_embd
        [ "$got" = "$want" ] || fail "$name $type: $got matrices of ggml type $ggml, expected $want"
        ! grep -E ' 1 [1-9][0-9]*$' "$q.types" >&2 || fail "$name $type: a 1-D tensor is not F32"
        run 0 "$LMQ" convert "$q.gguf" -o "$q.back.lmq"
        "$LMQ" audit "$q.back.lmq" >/dev/null || fail "$name $type: the import fails audit"
        diff <(tensors "$q.lmq") <(tensors "$q.back.lmq") >&2 || fail "$name $type: tensors differ after the round trip"
        "$LMQ" export "$q.back.lmq" --to gguf -o "$q.again.gguf" >/dev/null
        cmp -s "$q.gguf" "$q.again.gguf" || fail "$name $type: export of the import differs"
    done
done <<'TYPES'
q8_0 8 7
q4_0 2 2
q4_1 3 3
q5_0 6 8
q5_1 7 9
iq4_nl 20 25
q2_k 10 10
q3_k 11 12
q4_k 12 15
q5_k 13 17
q6_k 14 18
iq4_xs 23 30
TYPES

# llama-quantize's Q4_K_M mix (recipes/gguf/Q4_K_M.yaml) on sotu-llama256 (4 layers): attn_v and
# ffn_down Q6_K in layers 2 and 3 (llama.cpp's use_more_bits(i, 4)), the tied embedding Q6_K, the
# other matrices Q4_K; the file round-trips like the single types.
q=$tmp/sotu-llama256.q4_k_m
"$LMQ" quantize "$tmp/sotu-llama256.lmq" --recipe recipes/gguf/Q4_K_M.yaml -o "$q.lmq" >/dev/null
run 0 "$LMQ" export "$q.lmq" --to gguf -o "$q.gguf"
has "0 re-quantised"
python3 "$tmp/gguf_types.py" "$q.gguf" | grep -E '^(file_type|token_embd|output\.|blk)' | grep -v ' 1 0$' >"$q.types"
{
    echo "file_type 15"
    echo "token_embd.weight 2 14"
    for i in 0 1 2 3; do
        v=12 && [ $i -ge 2 ] && v=14
        for k in attn_q:12 attn_k:12 attn_v:$v attn_output:12 ffn_gate:12 ffn_down:$v ffn_up:12; do
            echo "blk.$i.${k%%:*}.weight 2 ${k##*:}"
        done
    done
} | sort >"$q.want"
diff <(sort "$q.types") "$q.want" >&2 || fail "Q4_K_M: the GGUF's tensor types are not llama-quantize's mix"
run 0 "$LMQ" convert "$q.gguf" -o "$q.back.lmq"
"$LMQ" audit "$q.back.lmq" >/dev/null || fail "Q4_K_M: the import fails audit"
diff <(tensors "$q.lmq") <(tensors "$q.back.lmq") >&2 || fail "Q4_K_M: tensors differ after the round trip"

# lmq verify --arith: the q4_k import runs as llama.cpp multiplies it by default (--arith llama:
# a8 block, Q8_K activations, integer sums) and shows it; exact keeps fp32 activations. Both
# score, differ, and llama.cpp's arithmetic costs little KL against fp32 (< 2× exact's + 1e-3).
q=$tmp/sotu-llama256.q4_k.back
head -c 1500 "$FIX/text/sotu-eval.txt" >"$tmp/few.txt"
"$LMQ" verify "$tmp/sotu-llama256.lmq" "$q.lmq" --text "$tmp/few.txt" --ctx 64 --json "$tmp/llama.json" >/dev/null ||
    fail "verify of the q4_k import (default arithmetic)"
"$LMQ" verify "$tmp/sotu-llama256.lmq" "$q.lmq" --text "$tmp/few.txt" --ctx 64 --arith exact --json "$tmp/exact.json" \
    >/dev/null || fail "verify --arith exact of the q4_k import"
python3 - "$tmp/llama.json" "$tmp/exact.json" <<'PY' || fail "verify --arith llama against exact"
import json, sys
l, e = (json.load(open(p))["rows"][1] for p in sys.argv[1:])
assert l["scheme"] == "imported q4_k + a8 block" and e["scheme"] == "imported q4_k", (l["scheme"], e["scheme"])
assert l["kl_mean"] != e["kl_mean"], "the same KL"
assert l["kl_mean"] < 2 * e["kl_mean"] + 1e-3, (l["kl_mean"], e["kl_mean"])
PY
