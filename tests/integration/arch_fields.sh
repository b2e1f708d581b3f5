#!/usr/bin/env bash
# Architecture fields that disagree with one another or with the tensors, in artefacts whose
# checksums were recomputed after the edit (the container test program's re-sign mode): every
# reader (audit, export to both targets, generate, verify, budget, quantize) refuses each with
# the field or tensor named, none crashes, and none writes an output.
. "$(dirname "$0")/lib.bash"
need_fixtures

SIGNER="$(dirname "$LMQ")/tests/test_container"
"$LMQ" convert "$FIX/stories260K/stories260K.bin" -o "$tmp/s.lmq" >/dev/null
head -c 3000 "$FIX/text/tinystories-valid.txt" >"$tmp/t.txt"
"$LMQ" manifest "$tmp/s.lmq" >"$tmp/s.yaml"

# edit SED: s.lmq with the sed expression applied to its manifest, checksums right, as $tmp/e.lmq.
edit() {
    sed "$1" "$tmp/s.yaml" >"$tmp/e.yaml"
    ! cmp -s "$tmp/s.yaml" "$tmp/e.yaml" || [ "$1" = "" ] || fail "edit '$1' changed nothing"
    rm -f "$tmp/e.lmq"
    LMQ_RESIGN_FROM="$tmp/s.lmq" LMQ_RESIGN_MANIFEST="$tmp/e.yaml" LMQ_WRITE_SAMPLE="$tmp/e.lmq" "$SIGNER"
}

# Every reader of $tmp/e.lmq: status 1 (audit: 4, a manifest problem) with TEXT in the message,
# and no output left.
readers_refuse() {
    local text=$1
    run 4 "$LMQ" audit "$tmp/e.lmq"
    has "$text"
    run 1 "$LMQ" export "$tmp/e.lmq" --to gguf -o "$tmp/e.gguf"
    has "$text"
    run 1 "$LMQ" export "$tmp/e.lmq" --to compressed-tensors -o "$tmp/e.ct"
    has "$text"
    run 1 "$LMQ" generate "$tmp/e.lmq" -n 2
    has "$text"
    run 1 "$LMQ" verify "$tmp/e.lmq" --text "$tmp/t.txt" --ctx 32
    has "$text"
    run 1 "$LMQ" budget "$tmp/e.lmq" --memory 1GiB
    has "$text"
    run 1 "$LMQ" quantize "$tmp/e.lmq" --recipe recipes/fp16.yaml -o "$tmp/e.q.lmq"
    has "$text"
    for o in e.gguf e.ct e.q.lmq; do
        [ ! -e "$tmp/$o" ] || fail "an output $o was written from an artefact audit refuses"
    done
}

# The re-signed copy of the unedited manifest passes everything.
edit ""
run 0 "$LMQ" audit "$tmp/e.lmq"
run 0 "$LMQ" budget "$tmp/e.lmq" --memory 1GiB
run 0 "$LMQ" generate "$tmp/e.lmq" -n 2

n=0
while IFS='|' read -r expr text; do
    edit "$expr"
    readers_refuse "$text"
    n=$((n + 1))
done <<'END'
s/^  n_heads: 8$/  n_heads: 0/|architecture.n_heads is 0: must be positive
s/^  n_heads: 8$/  n_heads: 3/|architecture.dim 64 is not a multiple of architecture.n_heads 3
s/^  dim: 64$/  dim: 65/|architecture.dim 65 is not a multiple of architecture.n_heads 8
s/^  n_kv_heads: 4$/  n_kv_heads: 0/|architecture.n_kv_heads is 0: must be positive
s/^  n_kv_heads: 4$/  n_kv_heads: 3/|architecture.n_kv_heads 3 does not divide architecture.n_heads 8
s/^  n_layers: 5$/  n_layers: 4/|: block 4, but architecture.n_layers is 4
s/^  n_layers: 5$/  n_layers: 6/|tensor blk.5.attn_norm.weight: missing (architecture.family llama, n_layers 6
s/^  n_layers: 5$/  n_layers: 0/|architecture.n_layers is 0: must be positive
s/^  hidden_dim: 172$/  hidden_dim: 171/|tensor blk.0.ffn_up.weight: shape [172, 64] expected [171, 64]
s/^  vocab_size: 512$/  vocab_size: 511/|tensor tok_embd.weight: shape [512, 64] expected [511, 64]
s/^  tied_embedding: true$/  tied_embedding: false/|tensor output.weight: missing (architecture.family llama, n_layers 5, tied_embedding false)
s/^  rope_theta: 10000$/  rope_theta: 0/|architecture.rope_theta is 0: a llama model needs a finite number > 0
s/^  norm_eps: 1.0e-05$/  norm_eps: -1/|architecture.norm_eps is -1: must be a finite number > 0
s/^  norm_eps: 1.0e-05$/  norm_eps: 0/|architecture.norm_eps is 0: must be a finite number > 0
s/^  max_seq: 512$/  max_seq: 0/|architecture.max_seq is 0: must be positive
s/^  family: llama$/  family: gpt2/|but architecture.family gpt2 has no rope
s/^  bos_id: 1$/  bos_id: 512/|architecture.bos_id 512 / eos_id 2: outside the 512-token vocabulary
END
echo "$SCRIPT: ok ($n edited architectures refused by 7 readers each)"
