#!/usr/bin/env bash
# Checks that `srun genperf train ...` just works (docs/DISTRIBUTED.md): stands up a one-node Slurm
# cluster on this machine, trains a tiny model as one process and then as 2 ranks under srun
# (--shard full and --shard none), and compares the runs. A manual check, never run in CI: it
# installs packages (scripts/deps.sh slurm), needs root, and starts munged, slurmctld and slurmd.
#   bash scripts/slurm_check.sh     GENPERF=path/to/genperf checks another build; SLURM_CHECK_MPI=TYPE
#                                   picks srun's MPI plugin (default: pmix_v4, else pmix)
# Slurm's state, spool, logs and config (SLURM_CONF) live in a temporary directory that is removed
# at exit, after the daemons it started are stopped. Prints PASS/FAIL a check; exits non-zero on
# any FAIL. Needs the packages of `scripts/deps.sh` (bible-kjv, sentencepiece, python3-numpy).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
GENPERF=${GENPERF:-build/genperf}
[ -x "$GENPERF" ] || { echo "slurm_check: $GENPERF is missing: build genperf first (scripts/build.sh)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "slurm_check: run as root (it starts munged and the Slurm daemons)" >&2; exit 2; }
bash scripts/deps.sh slurm

tmp=$(mktemp -d /tmp/slurm_check.XXXXXX)
pids=()
started_munged=""
cleanup() {
  set +e
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
  done
  if [ -n "$started_munged" ] && [ -f /run/munge/munged.pid ]; then kill "$(cat /run/munge/munged.pid)" 2>/dev/null; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# --- Slurm: one node, this machine -------------------------------------------------------------
host=$(hostname)
cpus=$(nproc)
mem_mb=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)  # as `slurmd -C` reports it
mkdir -p "$tmp/state" "$tmp/spool" "$tmp/log"
cat > "$tmp/slurm.conf" <<EOF
ClusterName=genperf-check
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=check Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$tmp/slurm.conf

# munge: Slurm's authentication. Reuse a running munged; otherwise start one (as Debian's service
# does, as the munge user) with the package's key, created if absent.
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
  fi
  install -d -o munge -g munge -m 0755 /run/munge
  runuser -u munge -- /usr/sbin/munged
  started_munged=1
  munge -n | unmunge >/dev/null || { echo "slurm_check: munged does not answer" >&2; exit 1; }
fi

/usr/sbin/slurmctld -D -i >"$tmp/log/slurmctld.out" 2>&1 &
pids+=($!)
/usr/sbin/slurmd -D >"$tmp/log/slurmd.out" 2>&1 &
pids+=($!)
state=""
for _ in $(seq 60); do
  state=$(sinfo -h -N -n "$host" -o %T 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 1
done
if [ "$state" != idle ]; then
  echo "slurm_check: node $host is '${state:-not reported}' after 60 s, not idle; the daemons' logs:" >&2
  tail -n 20 "$tmp"/log/* >&2
  exit 1
fi
sinfo

# srun's MPI plugin for OpenMPI: PMIx (SLURM_CHECK_MPI=TYPE picks another). Debian's OpenMPI 4.1
# has PMIx only (its ext3x component, on libpmix2): under --mpi=pmi2, or none (this slurm.conf's
# MpiDefault, so a plain `srun`), every rank stops in MPI_Init_thread with OpenMPI's "OMPI was not
# built with SLURM's PMI support".
srun --mpi=list 2>&1 | sed 's/^/  /'
mpi=""
for t in ${SLURM_CHECK_MPI:-pmix_v4 pmix}; do
  if srun --mpi=list 2>&1 | grep -qw "$t"; then mpi=$t; break; fi
done
[ -n "$mpi" ] || { echo "slurm_check: srun has no ${SLURM_CHECK_MPI:-PMIx} plugin (above)" >&2; exit 1; }
echo "srun --mpi=$mpi"

# --- Data: the King James Bible's first 3000 verses and a BPE tokenizer (as tests/comm/test_dist.cpp) --
bash scripts/data/kjv.sh "$tmp/kjv.txt"
head -n 3000 "$tmp/kjv.txt" > "$tmp/train.txt"
spm_train --input="$tmp/train.txt" --model_prefix="$tmp/tokenizer" --vocab_size=400 --model_type=bpe \
  --character_coverage=1.0 --byte_fallback=true --random_seed=1 --minloglevel=2 >/dev/null 2>&1
args=(train --text "$tmp/train.txt" --tokenizer "$tmp/tokenizer.model" --shape tiny --seq 32 --batch 2
      --grad-accum 4 --steps 4 --lr 3e-3 --warmup 1 --eval-every 2 --dtype f32 --threads 1 --seed 3)

fails=0
ok=""
check() {  # check NAME COMMAND...: PASS or FAIL by the command's status, which $ok keeps ("" for FAIL)
  local name=$1; shift
  if "$@"; then echo "PASS $name"; ok=1; else echo "FAIL $name"; fails=$((fails + 1)); ok=""; fi
}
show() {  # show LABEL FILE: a file's first 30 lines, indented
  echo "  $1:"; head -n 30 "$2" | sed 's/^/  | /'
}
rc=0
launch() {  # launch NAME TIMEOUT COMMAND...: stdout to $tmp/NAME.out, stderr to $tmp/NAME.err, status to $rc
  local name=$1 limit=$2; shift 2
  rc=0
  timeout "$limit" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
}

# Losses within 1e-6 relative at every step, and all of the model's weights within 1e-6 of their
# norm (expect_same_run in tests/comm/test_dist.cpp), reading safetensors by hand.
same_run() {
  /usr/bin/python3 - "$1" "$2" <<'EOF'
import json, struct, sys
import numpy as np
a, b = sys.argv[1:3]
def losses(d):
    out = []
    for line in open(d + "/train_log.jsonl"):
        if line.strip():
            r = json.loads(line)
            if "loss" in r:
                out.append(r["loss"])
    return out
def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in head.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", (name, t["dtype"])
        s, e = t["data_offsets"]
        out[name] = np.frombuffer(data[s:e], dtype="<f4").astype(np.float64)
    return out
ok = True
la, lb = losses(a), losses(b)
if len(la) != len(lb) or not la:
    print(f"  {len(la)} loss records vs {len(lb)}"); ok = False
else:
    for i, (x, y) in enumerate(zip(la, lb)):
        if abs(x - y) > 1e-6 * abs(x):
            print(f"  record {i + 1}: loss {y!r} vs {x!r}"); ok = False
ta, tb = tensors(a + "/model.safetensors"), tensors(b + "/model.safetensors")
if ta.keys() != tb.keys():
    print(f"  tensors differ: {sorted(ta.keys() ^ tb.keys())}"); ok = False
else:
    diff = sum(float(np.sum((ta[k] - tb[k]) ** 2)) for k in ta)
    norm = sum(float(np.sum(ta[k] ** 2)) for k in ta)
    rel = (diff / norm) ** 0.5
    print(f"  {len(la)} losses, max relative difference "
          f"{max((abs(x - y) / abs(x) for x, y in zip(la, lb)), default=0):.2e}; "
          f"{len(ta)} tensors, weights differ by {rel:.2e} of their norm")
    ok = ok and rel <= 1e-6
sys.exit(0 if ok else 1)
EOF
}

ranks_recorded() { /usr/bin/python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["ranks"] == 2 else 1)' "$1/train_run.json"; }
# Rank 0 alone prints: every line of its text starts "[rank 0/2]", no line is rank 1's.
only_rank0_prints() { grep -q . "$1" && ! grep -v '^\[rank 0/2\]' "$1" | grep -q . && ! grep -q '\[rank 1/2\]' "$1"; }
# With --json, rank 0 alone prints the run's summary (two ranks' would not parse as one document).
one_summary() {
  ! grep -q '\[rank 1/2\]' "$1" &&
    /usr/bin/python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["ranks"] == 2 else 1)' "$1"
}

echo "== one process: $GENPERF ${args[*]} --out OUT"
launch one 300 "$GENPERF" "${args[@]}" --out "$tmp/one"
check "one-process run exits 0 (rc $rc)" test "$rc" = 0
sed 's/^/  | /' "$tmp/one.out"
[ "$ok" ] || { show stderr "$tmp/one.err"; exit 1; }

for shard in full none; do
  out=$tmp/srun-$shard
  echo "== srun -n 2 --mpi=$mpi $GENPERF ... --shard $shard --json"
  launch "$shard" 300 srun -n 2 --mpi="$mpi" "$GENPERF" "${args[@]}" --shard "$shard" --json --out "$out"
  check "srun --shard $shard: exits 0 (rc $rc)" test "$rc" = 0
  [ ! -s "$tmp/$shard.err" ] || show stderr "$tmp/$shard.err"
  [ "$ok" ] || continue
  check "srun --shard $shard: stdout is one JSON summary, from rank 0 alone" one_summary "$tmp/$shard.out"
  [ "$ok" ] || show stdout "$tmp/$shard.out"
  check "srun --shard $shard: train_run.json records 2 ranks" ranks_recorded "$out"
  check "srun --shard $shard: losses and weights match one process" same_run "$tmp/one" "$out"
done

# Without --json, rank 0's progress lines carry its rank and no other rank prints.
echo "== srun -n 2 --mpi=$mpi $GENPERF ... --shard full (text output)"
launch text 300 srun -n 2 --mpi="$mpi" "$GENPERF" "${args[@]}" --shard full --out "$tmp/srun-text"
check "srun text run: exits 0 (rc $rc)" test "$rc" = 0
[ ! -s "$tmp/text.err" ] || show stderr "$tmp/text.err"
if [ "$ok" ]; then
  check "srun text run: stdout lines begin [rank 0/2], none [rank 1/2]" only_rank0_prints "$tmp/text.out"
  check "srun text run: stderr has no [rank 1/2] line" eval '! grep -q "\[rank 1/2\]" "$tmp/text.err"'
  sed 's/^/  | /' "$tmp/text.out"
fi

# A fault on every rank (a missing --text) ends the job non-zero, at once, naming the rank.
echo "== fault: srun -n 2 --mpi=$mpi $GENPERF ... --text /nonexistent"
fault_args=("${args[@]}")
fault_args[2]=/nonexistent  # the --text
t0=$SECONDS
launch fault 60 srun -n 2 --mpi="$mpi" "$GENPERF" "${fault_args[@]}" --out "$tmp/fault"
echo "  exit $rc after $((SECONDS - t0)) s"
check "fault: srun exits non-zero within 60 s (rc $rc)" test "$rc" != 0 -a "$rc" != 124 -a "$rc" != 137
cat "$tmp/fault.out" "$tmp/fault.err" > "$tmp/fault.all"
check "fault: a message names the rank ([rank N/2] genperf:)" grep -q '\[rank [01]/2\] genperf:' "$tmp/fault.all"
sed 's/^/  | /' "$tmp/fault.all" | head -n 20

if [ "$fails" -gt 0 ]; then echo "slurm_check: $fails check(s) FAILED"; exit 1; fi
echo "slurm_check: all checks passed"
