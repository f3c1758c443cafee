#!/usr/bin/env bash
# What watching costs a database: each workload runs on a fresh directory of a scratch ext4,
# without a monitor, with `fragkit watch --interval 1s`, and with a FragTracer-style monitor
# (filefrag -v on every file, one process per file, every second, as the FragTracer paper
# describes), in rotating order, PAIRS times. Prints per-run throughput, the monitor's own
# CPU time, the workload's CPU time per operation, and the median overhead per workload.
#
# Two overheads are reported, both paired per round (with vs without, same round):
# - throughput: 1 - ops/s with / ops/s without. On a shared VM this swings by ±15% between
#   runs of the same database, far above 1%;
# - CPU per operation: (database CPU + monitor CPU) / ops with, over database CPU / ops
#   without, each read from its own cgroup. Process CPU time leaves out waiting (for the
#   disk, for a vCPU the host gave to someone else), the main source of the swings above,
#   but keeps everything watching adds to the database's own system calls.
#
#   bench/watch-overhead.sh [PAIRS] [WORKLOADS...]     (default: 9 rocksdb redis sqlite)
#
# FRAGKIT=/path/to/fragkit uses that binary instead of building this tree. The load average
# (other jobs on the machine; the benchmark's own processes count too) is sampled every 10 s
# and summarised at the end: the throughput figures mean little on a loaded machine.
#
# Needs root (scratch file system) and rocksdb-tools, redis-server, redis-tools, sqlite3
# (scripts/install-deps). Redis listens on 127.0.0.1 only.
set -euo pipefail
# One line naming what failed, instead of a silent exit.
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: \`$BASH_COMMAND\` failed with status $?" >&2' ERR
cd "$(dirname "$0")/.."
. bench/lib.sh

PAIRS=${1:-9}
shift || true
WORKLOADS=("$@")
((${#WORKLOADS[@]})) || WORKLOADS=(rocksdb redis sqlite)
SECS=${WATCH_BENCH_SECONDS:-20}

if [[ $(id -u) -ne 0 ]]; then
  echo "bench/watch-overhead.sh: needs root (scratch file system on a loop device)" >&2
  exit 1
fi
for tool in db_bench redis-server redis-benchmark sqlite3 filefrag; do
  command -v "$tool" >/dev/null || { echo "bench/watch-overhead.sh: $tool missing; run scripts/install-deps" >&2; exit 1; }
done

if [[ -z ${FRAGKIT:-} ]]; then
  cargo build --release --quiet
  FRAGKIT=$PWD/target/release/fragkit
fi
LOAD_AT_START=$(cut -d' ' -f1-3 /proc/loadavg)
WORK=$(mktemp -d /tmp/fragkit-watch-bench.XXXXXX)
MNT=$("$FRAGKIT" scratch create --fs ext4 --size 6G --dir "$WORK" --format json |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["mountpoint"])')
MONITOR_PID=
LOAD_PID=
CG=
CGW=
cleanup() {
  [[ -n $CG ]] && cg_stop "$CG" || true
  [[ -n $LOAD_PID ]] && kill "$LOAD_PID" 2>/dev/null || true
  redis-cli -p 16399 shutdown nosave >/dev/null 2>&1 || true
  "$FRAGKIT" scratch destroy "$MNT" >/dev/null 2>&1 || true
  [[ -n $CG ]] && rmdir "$CG" 2>/dev/null || true
  [[ -n $CGW ]] && rmdir "$CGW" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# The monitor and the workload each run in a cgroup of their own (cpuacct: v1 here; cgroup2
# if that is all there is), so CPU time includes every short-lived child (filefrag,
# sqlite3, redis-benchmark processes) exactly; stopping the monitor kills every process in
# its group, so no filefrag of one run is charged to the next.
CG=$(cg_make "fragkit-bench-$$") && CGW=$(cg_make "fragkit-bench-work-$$") ||
  { echo "bench/watch-overhead.sh: cannot make a cgroup to account monitor CPU" >&2; exit 1; }
cg_cpu_seconds() { # [CGROUP]
  awk '{print $1 / 1e9}' <<<"$(cg_cpu_ns "${1:-$CG}")"
}

fragtracer_style() { # DIR: filefrag -v per file, every second (FragTracer's design)
  while :; do
    find "$1" -type f -print0 | xargs -0 -r -n1 filefrag -v >"$WORK/fragInfo.txt" 2>/dev/null
    sleep 1
  done
}

start_monitor() { # MODE DIR
  MONITOR_PID=
  CPU0=$(cg_cpu_seconds)
  case $1 in
    none) ;;
    fragkit)
      (
        echo "$BASHPID" >"$CG/cgroup.procs"
        exec "$FRAGKIT" watch "$2" --interval 1s --db "$WORK/watch-$RANDOM.db" --format json \
          >"$WORK/watch.json" 2>"$WORK/watch.err"
      ) &
      MONITOR_PID=$!
      disown
      sleep 0.5 ;;
    fragtracer)
      (
        echo "$BASHPID" >"$CG/cgroup.procs"
        fragtracer_style "$2"
      ) &
      MONITOR_PID=$!
      disown ;;
  esac
}

# Stop the monitor; its CPU seconds go to MONITOR_CPU.
stop_monitor() {
  MONITOR_CPU=0
  if [[ -z $MONITOR_PID ]]; then return; fi
  MONITOR_CPU=$(python3 -c "print(round($(cg_cpu_seconds) - $CPU0, 3))")
  cg_stop "$CG" # the loop and whatever filefrag it is running; the group empty is the wait
  MONITOR_PID=
}

# Each workload prints "THROUGHPUT OPERATIONS" (operations done in the timed part). Its
# helpers use bash arithmetic, not python3, to keep their own CPU out of the workload's.
run_rocksdb() { # DIR
  db_bench --db="$1" --wal_dir="$1" --benchmarks=fillrandom --num=300000 --value_size=1000 \
    --compression_type=none --disable_auto_compactions=false >/dev/null 2>&1
  # YCSB-F analogue: 50:50 reads and (read-modify-)writes on the loaded data.
  db_bench --db="$1" --wal_dir="$1" --use_existing_db=1 --benchmarks=readrandomwriterandom \
    --readwritepercent=50 --num=300000 --value_size=1000 --compression_type=none \
    --duration="$SECS" --threads=2 2>&1 |
    awk -v secs="$SECS" '/^readrandomwriterandom/ {for (i=1;i<NF;i++) if ($(i+1) ~ /^ops\/sec/) printf "%s %d\n", $i, $i * secs}'
}

run_redis() { # DIR: AOF (fsync every second) + RDB snapshots every 5 s, loopback only
  redis-server --bind 127.0.0.1 --port 16399 --dir "$1" --appendonly yes \
    --appendfsync everysec --save "5 1" --daemonize no --protected-mode yes \
    >"$WORK/redis.log" 2>&1 &
  local pid=$!
  for _ in $(seq 50); do redis-cli -p 16399 ping >/dev/null 2>&1 && break; sleep 0.1; done
  local end=$((SECONDS + SECS)) rates=""
  while ((SECONDS < end)); do
    rates+=" $(redis-benchmark -h 127.0.0.1 -p 16399 -t set -n 200000 -d 512 -r 200000 -c 16 -P 8 --csv -q 2>/dev/null |
      awk -F'"' '/^"SET"/ {print $4}')"
  done
  redis-cli -p 16399 shutdown nosave >/dev/null 2>&1 || kill "$pid"
  wait "$pid" 2>/dev/null || true
  # Each redis-benchmark run is 200,000 SETs; throughput is the mean of their rates.
  echo "$rates" | awk '{for (i=1;i<=NF;i++) s+=$i; printf "%.0f %d\n", s/NF, NF*200000}'
}

run_sqlite() { # DIR: FAST'24-style inserts: many small transactions into a growing table
  local db=$1/bench.sqlite txns=0 t0 now
  sqlite3 "$db" "PRAGMA journal_mode=DELETE; CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB);" >/dev/null
  local batch
  batch=$(for _ in $(seq 50); do
    echo "BEGIN; INSERT INTO t(v) SELECT randomblob(4000) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<16) SELECT x FROM c); COMMIT;"
  done)
  t0=${EPOCHREALTIME/./}
  while :; do
    sqlite3 "$db" "$batch"
    txns=$((txns + 50))
    now=${EPOCHREALTIME/./}
    ((now - t0 >= SECS * 1000000)) && break
  done
  echo "$((txns * 10000000 / (now - t0)))e-1 $txns"
}

RESULTS=$WORK/results.tsv
: >"$RESULTS"
(while :; do cut -d' ' -f1 /proc/loadavg; sleep 10; done) >"$WORK/load.txt" &
LOAD_PID=$!
modes=(none fragkit fragtracer)
for w in "${WORKLOADS[@]}"; do
  for ((p = 0; p < PAIRS; p++)); do
    for ((k = 0; k < 3; k++)); do
      mode=${modes[$(((p + k) % 3))]} # rotate the order each pair
      dir=$MNT/$w-$p-$mode
      mkdir -p "$dir"
      sync
      echo 3 >/proc/sys/vm/drop_caches
      start_monitor "$mode" "$dir"
      t0=$(date +%s.%N)
      W0=$(cg_cpu_seconds "$CGW")
      read -r tput ops < <(
        echo "$BASHPID" >"$CGW/cgroup.procs"
        "run_$w" "$dir"
      )
      work_cpu=$(python3 -c "print(round($(cg_cpu_seconds "$CGW") - $W0, 3))")
      t1=$(date +%s.%N)
      stop_monitor
      cpu=$MONITOR_CPU
      wall=$(python3 -c "print(round($t1 - $t0, 2))")
      frags=$("$FRAGKIT" scan "$dir" --format json | python3 -c 'import json,sys; s=json.load(sys.stdin)["summary"]; print(s["files"], s["fragmented_files"], s["fragments"])')
      printf '%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$w" "$p" "$mode" "$tput" "$wall" "$cpu" "$frags" "$ops" "$work_cpu" | tee -a "$RESULTS" >&2
      rm -rf "$dir"
    done
  done
done

python3 - "$RESULTS" <<'EOF'
import sys, statistics
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
by = {}
for w, p, mode, tput, wall, cpu, frags, ops, work_cpu in rows:
    by.setdefault(w, {}).setdefault(int(p), {})[mode] = dict(
        tput=float(tput), wall=float(wall), cpu=float(cpu), frags=frags,
        ops=float(ops), work_cpu=float(work_cpu))
units = {"rocksdb": "ops/s", "redis": "SET/s", "sqlite": "txn/s"}
med = statistics.median
def spread(v):
    return f"{med(v):+.2f}% ({min(v):+.1f}–{max(v):+.1f}, n={len(v)})"
print("Throughput change (1 − with/without, paired per round; positive = slower):\n")
print("| workload | pairs | baseline (median) | fragkit watch | fragkit CPU | FragTracer-style | FragTracer-style CPU | files / fragmented / fragments at end |")
print("|---|---|---|---|---|---|---|---|")
cost = {}
for w, pairs in by.items():
    base, fo, fc, to, tc = [], [], [], [], []
    fcpu, tcpu = [], []
    for p, m in sorted(pairs.items()):
        n = m["none"]
        base.append(n["tput"])
        per_op = n["work_cpu"] / n["ops"]
        for mode, o, c, k in (("fragkit", fo, fc, fcpu), ("fragtracer", to, tc, tcpu)):
            r = m[mode]
            o.append((1 - r["tput"] / n["tput"]) * 100)
            c.append(r["cpu"] / r["wall"] * 100)
            k.append((((r["work_cpu"] + r["cpu"]) / r["ops"]) / per_op - 1) * 100)
    cost[w] = (len(pairs), med([pairs[p]["none"]["work_cpu"] / pairs[p]["none"]["ops"] * 1e6 for p in pairs]), fcpu, tcpu)
    end = pairs[max(pairs)]["none"]["frags"]
    print(f"| {w} | {len(pairs)} | {med(base):.0f} {units.get(w,'')} | {spread(fo)} "
          f"| {med(fc):.2f}% of a core | {spread(to)} | {med(tc):.2f}% of a core | {end} |")
print("\nCPU per operation change ((database + monitor CPU) / ops, with over without, paired per round):\n")
print("| workload | pairs | database CPU per op without (median) | fragkit watch | FragTracer-style |")
print("|---|---|---|---|---|")
for w, (n, per_op, fcpu, tcpu) in cost.items():
    print(f"| {w} | {n} | {per_op:.1f} µs | {spread(fcpu)} | {spread(tcpu)} |")
EOF
python3 - "$WORK/load.txt" "$LOAD_AT_START" <<'EOF'
import sys, statistics
v = [float(x) for x in open(sys.argv[1]) if x.strip()]
print(f"load average at start {sys.argv[2]} (1/5/15 min); 1-min load during the run "
      f"(benchmark included): min {min(v):.2f}, median {statistics.median(v):.2f}, "
      f"max {max(v):.2f} over {len(v)} samples")
EOF
