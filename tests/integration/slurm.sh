#!/usr/bin/env bash
# tools/cluster on a real engine: a one-node Slurm cluster on this machine (munged, slurmctld and
# slurmd from Debian's packages, `make deps` installs them; configured, started and stopped here,
# everything under $tmp, on ports of its own), a 4-task job array of verify-array.sbatch over
# stories260K and a dependent merge.sbatch; the merged report must be the single run's (speed
# aside), and tools/cluster/Makefile's (make -j) too. Skipped with the reason where the packages
# are absent or the daemons cannot start here, failed instead under CI=true. The sanitizer build
# leaves it to shard.sh (the same code, without the daemons' minutes).
. "$(dirname "$0")/lib.bash"
need_fixtures
skip() {
    [ "${CI:-}" != true ] || fail "$1 (CI=true: make deps installs slurmd, slurmctld and munge)"
    echo "SKIP $SCRIPT: $1" >&2
    exit 77
}
if [ -n "${LMQ_SAN:-}" ]; then # also under CI=true: a choice, not a missing package
    echo "SKIP $SCRIPT: the sanitizer build runs shard.sh's merge checks, not the cluster" >&2
    exit 77
fi
for c in munged slurmctld slurmd sbatch squeue scontrol; do
    command -v "$c" >/dev/null || [ -x "/usr/sbin/$c" ] || skip "no $c: install slurmd slurmctld munge slurm-client (make deps)"
done
PATH=$PATH:/usr/sbin
user=$(id -un) # the daemons run as whoever runs the test, and the jobs as the same user
LMQ=$(realpath "$LMQ")
FIX=$(realpath "$FIX")
repo=$PWD

# The cluster: munge's key and socket, Slurm's state, spool, logs and ports, all under $tmp.
mkdir -p "$tmp/munge" "$tmp/state" "$tmp/spool" "$tmp/work"
chmod 700 "$tmp/munge"
head -c 1024 /dev/urandom >"$tmp/munge/munge.key"
chmod 400 "$tmp/munge/munge.key"
sock=$tmp/munge/munge.sock
# Two free ports, one for each daemon (another test's cluster may hold the last ones tried).
in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for i in $(seq 20); do
    port=$((20000 + RANDOM % 20000))
    in_use $port || in_use $((port + 1)) || break
done
export SLURM_CONF=$tmp/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=lmqtest
SlurmctldHost=localhost
SlurmUser=$user
SlurmdUser=$user
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=localhost NodeAddr=127.0.0.1 $(slurmd -C | head -1 | sed 's/^NodeName=[^ ]* //')
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
# Stopped on any exit, before lib.bash's trap removes $tmp: each daemon by the pid it wrote.
stop() {
    for p in slurmd slurmctld munge/munged; do
        [ -s "$tmp/$p.pid" ] && kill "$(cat "$tmp/$p.pid")" 2>/dev/null || true
    done
    sleep 0.5
    rm -rf "$tmp"
}
trap stop EXIT
logs() { tail -n 20 "$tmp"/*.log "$tmp/munge/munged.log" 2>/dev/null >&2 || true; }
munged -f --socket="$sock" --key-file="$tmp/munge/munge.key" --log-file="$tmp/munge/munged.log" \
    --pid-file="$tmp/munge/munged.pid" --seed-file="$tmp/munge/seed" || skip "munged does not start here: $(tail -n 1 "$tmp/munge/munged.log" 2>/dev/null)"
slurmctld -i || { logs; skip "slurmctld does not start here"; }
slurmd -N localhost || { logs; skip "slurmd does not start here"; }
for i in $(seq 100); do
    sinfo -h -o %T 2>/dev/null | grep -qx idle && break
    [ "$i" != 100 ] || { logs; skip "the node did not come up within 20 s"; }
    sleep 0.2
done

cd "$tmp/work"
"$LMQ" convert "$FIX/stories260K/stories260K.bin" -o fp32.lmq >/dev/null
"$LMQ" quantize fp32.lmq --recipe "$repo/recipes/int4-g32.yaml" -o int4.lmq >/dev/null
head -c 40000 "$FIX/text/tinystories-valid.txt" >eval.txt
run 0 "$LMQ" verify fp32.lmq int4.lmq --text eval.txt --ctx 64 --json single.json

t0=$(date +%s.%N)
# The array's ids start at 1 (SLURM_ARRAY_TASK_MIN): the shards are still 0..3.
jid=$(LMQ=$LMQ sbatch --parsable --array=1-4 -o "$tmp/work/task-%a.out" "$repo/tools/cluster/verify-array.sbatch" \
    shards fp32.lmq int4.lmq --text eval.txt --ctx 64) || { logs; fail "sbatch of the array"; }
mid=$(LMQ=$LMQ sbatch --parsable --dependency=afterok:"${jid%%;*}" -o "$tmp/work/merge.out" \
    "$repo/tools/cluster/merge.sbatch" shards --json merged.json) || { logs; fail "sbatch of the merge"; }
for i in $(seq 600); do
    [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
    [ "$i" != 600 ] || { squeue >&2; logs; fail "the jobs did not finish within 120 s"; }
    sleep 0.2
done
echo "slurm: array and merge in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
[ -s merged.json ] || { cat task-*.out merge.out >&2; logs; fail "no merged report (job $jid, merge $mid)"; }
ls shards | sort | tr '\n' ' ' | grep -qx "shard.0 shard.1 shard.2 shard.3 " || fail "shards: $(ls shards)"
grep -q "shard.1: shard 1/4" task-2.out || fail "task 2 is not shard 1/4: $(cat task-2.out)"

speed='del(.prefill_tokens_per_s, .decode_tokens_per_s, .decode_roofline, .read_gbps)'
same() {
    jq -S "del(.read_gbps, .threads) | .rows |= map($speed)" "$1" >a.json &&
        jq -S "del(.read_gbps, .threads) | .rows |= map($speed)" "$2" >b.json || fail "jq on $1 or $2"
    [ -s a.json ] && cmp -s a.json b.json || { diff a.json b.json | head -20 >&2; fail "$3"; }
}
same single.json merged.json "the Slurm merge differs from the single run"
[ "$(jq '.rows | length' merged.json)" = 2 ] || fail "rows: $(jq '.rows | length' merged.json)"

# One machine: the same shards by make -j (named with their count) and the same report.
run 0 make -s -j4 -f "$repo/tools/cluster/Makefile" LMQ="$LMQ" SHARDS=4 OUT=local ARTEFACTS="fp32.lmq int4.lmq" \
    TEXT=eval.txt VERIFY="--ctx 64" REPORT="--json local.json"
same single.json local.json "the make -j merge differs from the single run"
for k in 0 1 2 3; do cmp -s "local/shard.$k-of-4" "shards/shard.$k" || fail "shard $k: make's and Slurm's differ"; done
