#!/usr/bin/env bash
# tools/gpu-check.sh OUTDIR: the device checks of the CUDA backend in one short run, for the
# scarce windows a GPU is lent in. Builds with CUDA, runs the CUDA suite (each kernel against the
# CPU), the copy-bandwidth probe, the GEMV/GEMM benchmark (int4 g128 on 4096 × 14336 against the
# measured copy bandwidth; int8; fp16 and fp32 through cuBLAS) and lmq budget for the device's
# memory, then writes OUTDIR/report.md and OUTDIR/report.json. Every step has its own time
# limit (timeout) inside a total of 7.5 minutes; a step that fails or runs out of time is
# recorded as such and the rest still run, and each step's output stays in OUTDIR/<step>.log.
# Run from anywhere; JOBS sets the build's parallelism (default: every CPU).
set -uo pipefail
[ $# = 1 ] || { echo "usage: tools/gpu-check.sh OUTDIR" >&2; exit 2; }
OUT=$(mkdir -p "$1" && cd "$1" && pwd) || exit 2
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TOTAL=450
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

step device 20 nvidia-smi --query-gpu=name,memory.total,clocks.max.memory,driver_version --format=csv
if step build 200 make -j"${JOBS:-$(nproc)}" BUILD="$BUILD" "$BUILD/lmq" "$BUILD/tests/test_cuda" "$BUILD/bench/bench_cuda"; then
    step test_cuda 90 "$BUILD/tests/test_cuda"
    step probe 40 "$BUILD/lmq" probe --device cuda --mib 1024 --rounds 10 --json
    step bench 150 "$BUILD/bench/bench_cuda" 4096 14336 200
    # the device's memory, from the probe's description "NAME (sm_XY, M GiB)"
    mem=$(sed -n 's/.*sm_[0-9]*, \([0-9.]*\) GiB.*/\1/p' "$OUT/probe.log" | head -1)
    step budget 20 bash -c "for s in llama-7b llama-1b; do for w in fp16 int4; do
        g=; [ \$w = int4 ] && g='--group 128'
        '$BUILD/lmq' budget --shape \$s --weights \$w \$g --memory ${mem:-80}GiB --ctx 4096 --json || exit 1
        done; done"
fi

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
steps = [dict(zip(("step", "status", "seconds"), l.split("\t"))) for l in open(os.path.join(out, "steps.tsv")).read().splitlines()]
bench = jsonl("bench")
report = {
    "steps": steps,
    "device": log("device").strip(),
    "test_cuda": log("test_cuda")[-2000:],
    "probe": (jsonl("probe") or [None])[0],
    "bench": bench,
    "budget": jsonl("budget"),
    "not_measured": ["CUDA forward pass (none exists yet): PPL and top-1 CPU vs CUDA on the fixture models",
                     "decode tok/s of the 1B shape against its roofline", "batch sweep (TTFT, per-token latency)"],
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
md += ["## test_cuda (tail)", "", "```", report["test_cuda"].strip()[-1500:], "```", "",
       "Not measured by this script: " + "; ".join(report["not_measured"]) + "."]
open(os.path.join(out, "report.md"), "w").write("\n".join(md) + "\n")
PY
echo "gpu-check: $OUT/report.md, $OUT/report.json ($(($(date +%s) - START)) s)"
