#!/usr/bin/env bash
# tools/gpu-check.sh OUTDIR: the device checks of the CUDA backend in one short run, for the
# scarce windows a GPU is lent in. Builds with CUDA, runs the CUDA suite (each kernel and the
# forward pass against the CPU), the copy-bandwidth probe, the GEMV/GEMM benchmark (int4 g128
# on 4096 × 14336 against the measured copy bandwidth; int8; fp16 and fp32 through cuBLAS),
# lmq verify on both devices (the fixture models as fp32, int8, int4 and W8A8 artefacts and the tiny
# synthetic shapes: PPL and top-1 per device), decode tok/s at batch 1 on the synthetic 1B
# Llama shape as fp16, int8 and int4 with its roofline fraction, the batch sweep (1, 4, 16, 64
# sequences, prompt 512, 128 new tokens) on its int4 artefact, and lmq budget for the device's
# memory, then writes OUTDIR/report.md and OUTDIR/report.json. Every step has its own time
# limit (timeout) inside a total of 7.5 minutes; a step that fails or runs out of time is
# recorded as such and the rest still run, and each step's output stays in OUTDIR/<step>.log.
# Run from anywhere; JOBS sets the build's parallelism (default: every CPU); LMQ_FIXTURES the
# fixtures folder (default ../shared/fixtures); WORK where the 1B artefacts go (default
# OUTDIR/work, about 10 GB, removed at the end unless KEEP=1).
set -uo pipefail
[ $# = 1 ] || { echo "usage: tools/gpu-check.sh OUTDIR" >&2; exit 2; }
OUT=$(mkdir -p "$1" && cd "$1" && pwd) || exit 2
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TOTAL=${TOTAL:-450}
START=$(date +%s)
: >"$OUT/steps.tsv"

# step NAME LIMIT CMD...: runs CMD with its output in OUT/NAME.log, under LIMIT seconds or what
# is left of the total, and records "name status seconds" (status: the exit code, 124 for a
# timeout, "skipped" when no time is left).
step() {
    local name=$1 limit=$2 left rc t0
    shift 2
    left=$((TOTAL - ($(date +%s) - START)))
    [ "$left" -lt "$limit" ] && limit=$left
    if [ "$limit" -le 5 ]; then
        printf '%s\tskipped\t0\n' "$name" >>"$OUT/steps.tsv"
        return 1
    fi
    t0=$(date +%s)
    timeout -k 5 "$limit" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    printf '%s\t%s\t%s\n' "$name" "$rc" "$(($(date +%s) - t0))" >>"$OUT/steps.tsv"
    echo "gpu-check: $name: exit $rc ($(($(date +%s) - t0)) s)"
    return $rc
}

FIX=$(cd "${LMQ_FIXTURES:-../shared/fixtures}" 2>/dev/null && pwd) || FIX=
WORK=${WORK:-$OUT/work}
mkdir -p "$WORK"
export LMQ="$PWD/$BUILD/lmq" FIX WORK OUT

step device 10 nvidia-smi --query-gpu=name,memory.total,clocks.max.memory,driver_version --format=csv
if step build 150 make -j"${JOBS:-$(nproc)}" BUILD="$BUILD" "$BUILD/lmq" "$BUILD/liblmq_cuda.so" "$BUILD/tests/test_cuda" "$BUILD/bench/bench_cuda"; then
    built=1
    [ -n "$FIX" ] && export LMQ_FIXTURES=$FIX
    step test_cuda 100 "$BUILD/tests/test_cuda"
    # without a device (the probe fails) the steps that need one are recorded as skipped
    step probe 20 "$LMQ" probe --device cuda --mib 1024 --rounds 10 --json || no_device=1
fi
if [ -n "${no_device:-}" ]; then
    for s in bench forward synth_1b decode sweep; do printf '%s\tskipped (no device)\t0\n' "$s" >>"$OUT/steps.tsv"; done
elif [ -n "${built:-}" ]; then
    step bench 60 "$BUILD/bench/bench_cuda" 4096 14336 100
    # verify on each device: the fixture models (fp32, int8 per channel, w4a16, w8a8) on their texts,
    # and the tiny synthetic shapes (noise, scored on a fixture text: only the devices' agreement
    # counts); one JSON per model and device
    # (windows of 128 tokens, the tiny GPT-2 shape's context; the first 60 kB of each text)
    step forward 80 bash -c '
        rc=0
        for s in tiny-llama tiny-gpt2; do "$LMQ" synth --shape $s -o "$WORK/$s" >/dev/null || rc=1; done
        models="stories:$FIX/stories260K/stories260K.bin:$FIX/text/tinystories-valid.txt sotu:$FIX/sotu-gpt2:$FIX/text/sotu-eval.txt
                tiny-llama:$WORK/tiny-llama:$FIX/text/tinystories-valid.txt tiny-gpt2:$WORK/tiny-gpt2:$FIX/text/tinystories-valid.txt"
        for m in $models; do
            IFS=: read -r name src text <<<"$m"
            head -c 60000 "$text" >"$WORK/$name.txt" && "$LMQ" convert "$src" -o "$WORK/$name-fp32.lmq" >/dev/null &&
                "$LMQ" quantize "$WORK/$name-fp32.lmq" --recipe recipes/int8-channel.yaml -o "$WORK/$name-int8.lmq" >/dev/null &&
                "$LMQ" quantize "$WORK/$name-fp32.lmq" --recipe recipes/w4a16.yaml -o "$WORK/$name-w4a16.lmq" >/dev/null &&
                "$LMQ" quantize "$WORK/$name-fp32.lmq" --recipe recipes/w8a8.yaml -o "$WORK/$name-w8a8.lmq" >/dev/null || { rc=1; continue; }
            for dev in cuda cpu; do
                echo "== $name on $dev"
                "$LMQ" verify "$WORK/$name-fp32.lmq" "$WORK/$name-int8.lmq" "$WORK/$name-w4a16.lmq" "$WORK/$name-w8a8.lmq" \
                    --text "$WORK/$name.txt" --ctx 128 --device $dev --json "$OUT/forward-$name-$dev.json" || rc=1
            done
        done
        exit $rc'
    # the 1B Llama shape as int4, fp16 and int8 (noise weights; speed only); what was made in
    # time is measured
    step synth_1b 120 bash -c '
        set -e
        "$LMQ" synth --shape llama-1b -o "$WORK/llama-1b" >/dev/null
        "$LMQ" convert "$WORK/llama-1b" -o "$WORK/1b-fp32.lmq" >/dev/null
        rm -rf "$WORK/llama-1b"
        for r in int4-g128 fp16 int8-channel; do
            "$LMQ" quantize "$WORK/1b-fp32.lmq" --recipe recipes/$r.yaml -o "$WORK/1b-$r.lmq" >/dev/null
        done
        rm -f "$WORK/1b-fp32.lmq"'
    made=$(for r in fp16 int8-channel int4-g128; do [ -s "$WORK/1b-$r.lmq" ] && echo "$WORK/1b-$r.lmq"; done)
    # shellcheck disable=SC2086 # one argument per artefact
    [ -n "$made" ] && step decode 60 "$LMQ" verify $made --speed-only --ctx 512 --device cuda --json "$OUT/decode.json"
    [ -s "$WORK/1b-int4-g128.lmq" ] && step sweep 90 "$LMQ" verify "$WORK/1b-int4-g128.lmq" --speed-only --ctx 512 \
        --device cuda --batch 1,4,16,64 --prompt-len 512 --new-tokens 128 --json "$OUT/sweep.json"
fi
if [ -n "${built:-}" ]; then
    # the device's memory, from the probe's description "NAME (sm_XY, M GiB)"
    mem=$(sed -n 's/.*sm_[0-9]*, \([0-9.]*\) GiB.*/\1/p' "$OUT/probe.log" | head -1)
    step budget 10 bash -c "for s in llama-7b llama-1b; do for w in fp16 int4; do
        g=; [ \$w = int4 ] && g='--group 128'
        '$LMQ' budget --shape \$s --weights \$w \$g --memory ${mem:-80}GiB --ctx 4096 --json || exit 1
        done; done"
fi
[ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"

command -v python3 >/dev/null || {
    { echo "# lmq gpu-check (no python3: raw steps and logs)"; cat "$OUT/steps.tsv"; } >"$OUT/report.md"
    echo '{"error":"no python3 on this machine: see steps.tsv and the logs"}' >"$OUT/report.json"
    exit 1
}
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
def log(name):
    p = os.path.join(out, name + ".log")
    return open(p, errors="replace").read() if os.path.exists(p) else ""
def jsonl(name):
    rows = []
    for line in log(name).splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            pass
    return rows
def jfile(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except (OSError, ValueError):
        return None
steps = [dict(zip(("step", "status", "seconds"), l.split("\t"))) for l in open(os.path.join(out, "steps.tsv")).read().splitlines()]
# CPU against CUDA per model and artefact: PPL, and top-1 / KL against each device's own reference
forward = []
for name in ("sotu", "stories", "tiny-llama", "tiny-gpt2"):
    cpu, dev = jfile("forward-%s-cpu.json" % name), jfile("forward-%s-cuda.json" % name)
    if not cpu or not dev:
        continue
    for a, b in zip(cpu["rows"], dev["rows"]):
        forward.append({"model": name, "artefact": a["artefact"], "ppl_cpu": a["ppl"], "ppl_cuda": b["ppl"],
                        "dppl_pct": 100 * (b["ppl"] / a["ppl"] - 1), "top1_cpu": a["top1"], "top1_cuda": b["top1"],
                        "kl_cpu": a["kl_mean"], "kl_cuda": b["kl_mean"],
                        "decode_cpu": a["decode_tokens_per_s"], "decode_cuda": b["decode_tokens_per_s"]})
decode, sweep = jfile("decode.json"), jfile("sweep.json")
bench = jsonl("bench")
report = {
    "steps": steps,
    "device": log("device").strip(),
    "test_cuda": log("test_cuda")[-2000:],
    "probe": (jsonl("probe") or [None])[0],
    "bench": bench,
    "budget": jsonl("budget"),
    "forward": forward,
    "decode": decode,
    "sweep": sweep,
    "not_measured": [s for s, have in (("PPL CPU vs CUDA on the fixture models (forward)", forward),
                                       ("decode tok/s of the 1B shape against its roofline (decode)", decode),
                                       ("batch sweep on the 1B shape (sweep)", sweep)) if not have],
}
json.dump(report, open(os.path.join(out, "report.json"), "w"), indent=1)
md = ["# lmq gpu-check", "", "| step | exit | seconds |", "| --- | --- | --- |"]
md += ["| %s | %s | %s |" % (s["step"], s["status"], s["seconds"]) for s in steps]
md += ["", "Device: " + (report["device"].replace("\n", "; ") or "unknown"), ""]
if report["probe"]:
    md += ["Copy bandwidth (lmq probe --device cuda): %.1f GB/s" % report["probe"]["copy_gbps"], ""]
if bench:
    head = bench[0]
    md += ["## Kernels on [%s × %s] (bench_cuda; copy bandwidth %.1f GB/s in the same run)" % (head.get("out"), head.get("in"), head.get("copy_gbps", 0)), "",
           "| encoding | MB | 1 row µs | GB/s | of copy bw | 512 rows ms | TFLOP/s |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in bench[1:]:
        md.append("| %s | %.1f | %.2f | %.1f | %.0f %% | %.3f | %.2f |" % (r["encoding"], r["bytes"] / 1e6, r["decode_us"], r["decode_gbps"],
                  100 * r["fraction_of_copy"], r["prefill512_ms"], r["prefill512_tflops"]))
    md.append("")
    g128 = [r for r in bench[1:] if r["encoding"] == "int4 g128"]
    if g128:
        md += ["int4 g128 GEMV: %.0f %% of the copy bandwidth (target >= 80 %%)" % (100 * g128[0]["fraction_of_copy"]), ""]
if report["budget"]:
    md += ["## lmq budget (ctx 4096, fp16 KV, pages of 16)", "", "| model | weights bytes | KV/token | seqs at ctx | seqs paged |", "| --- | ---: | ---: | ---: | ---: |"]
    md += ["| %s | %d | %d | %d | %d |" % (b["model"]["source"], b["model"]["weight_bytes"], b["kv_bytes_per_token"], b["seqs_at_ctx"], b["seqs_paged"]) for b in report["budget"]]
    md.append("")
if forward:
    md += ["## verify on both devices (PPL; top-1 and KL against each device's own reference, the first artefact)", "",
           "| model | artefact | PPL cpu | PPL cuda | dPPL % | top-1 cpu | top-1 cuda | KL cpu | KL cuda | decode tok/s cpu | cuda |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    md += ["| %s | %s | %.4f | %.4f | %+.4f | %.4f | %.4f | %.3g | %.3g | %.0f | %.0f |" % (f["model"], f["artefact"], f["ppl_cpu"], f["ppl_cuda"], f["dppl_pct"],
           f["top1_cpu"], f["top1_cuda"], f["kl_cpu"], f["kl_cuda"], f["decode_cpu"], f["decode_cuda"]) for f in forward]
    md += ["", "PPL within 0.1 %% on every row: %s" % all(abs(f["dppl_pct"]) <= 0.1 for f in forward), ""]
if decode:
    md += ["## Decode at batch 1 on the 1B shape (%s; copy bandwidth %.1f GB/s)" % (decode.get("device_name", "?"), decode["read_gbps"]), "",
           "| artefact | W MiB | prefill tok/s | decode tok/s | roofline | target |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    md += ["| %s | %.0f | %.0f | %.1f | %s | >= 60 %% |" % (r["artefact"], r["weight_mib"], r["prefill_tokens_per_s"], r["decode_tokens_per_s"],
           "-" if r["decode_roofline"] is None else "%.0f %%" % (100 * r["decode_roofline"])) for r in decode["rows"]]
    md.append("")
if sweep:
    md += ["## Batch sweep on the 1B shape, int4 g128", "", "| batch | prompt | new | TTFT ms | ms/token | tok/s |", "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    md += ["| %d | %d | %d | %.1f | %.3f | %.1f |" % (b["batch"], b["prompt_tokens"], b["new_tokens"], 1e3 * b["ttft_s"], b["token_ms"], b["tokens_per_s"])
           for b in sweep["rows"][0].get("batch_sweep", [])]
    md.append("")
md += ["## test_cuda (tail)", "", "```", report["test_cuda"].strip()[-1500:], "```", "",
       "Not measured by this run: " + ("; ".join(report["not_measured"]) or "nothing of the above") + "."]
open(os.path.join(out, "report.md"), "w").write("\n".join(md) + "\n")
PY
echo "gpu-check: $OUT/report.md, $OUT/report.json ($(($(date +%s) - START)) s)"
