#!/usr/bin/env bash
# What watching costs a database: each workload runs on a fresh directory of a scratch ext4,
# without a monitor, with `fragkit watch --interval 1s`, and with a FragTracer-style monitor
# (filefrag -v on every file, one process per file, every second, as the FragTracer paper
# describes), in rotating order, PAIRS times. Prints per-run throughput, the monitor's own
# CPU time, and the median overhead per workload.
#
#   bench/watch-overhead.sh [PAIRS] [WORKLOADS...]     (default: 3 rocksdb redis sqlite)
#
# FRAGKIT=/path/to/fragkit uses that binary instead of building this tree. The load average
# (other jobs on the machine; the benchmark's own processes count too) is sampled every 10 s
# and summarised at the end: the throughput figures mean little on a loaded machine.
#
# Needs root (scratch file system) and rocksdb-tools, redis-server, redis-tools, sqlite3
# (scripts/install-deps). Redis listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/.."

PAIRS=${1:-3}
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
cleanup() {
  [[ -n $MONITOR_PID ]] && kill "$MONITOR_PID" 2>/dev/null || true
  [[ -n $LOAD_PID ]] && kill "$LOAD_PID" 2>/dev/null || true
  redis-cli -p 16399 shutdown nosave >/dev/null 2>&1 || true
  "$FRAGKIT" scratch destroy "$MNT" >/dev/null 2>&1 || true
  [[ -n ${CG:-} ]] && rmdir "$CG" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# The monitor runs in its own cpuacct cgroup (v1 here; cgroup2 if that is all there is), so
# its CPU time includes every short-lived child (filefrag processes) exactly.
CG=
for base in /sys/fs/cgroup/cpuacct /sys/fs/cgroup/unified /sys/fs/cgroup; do
  if mkdir "$base/fragkit-bench-$$" 2>/dev/null; then CG=$base/fragkit-bench-$$; break; fi
done
[[ -n $CG ]] || { echo "bench/watch-overhead.sh: cannot make a cgroup to account monitor CPU" >&2; exit 1; }
cg_cpu_seconds() {
  if [[ -f $CG/cpuacct.usage ]]; then
    awk '{print $1/1e9}' "$CG/cpuacct.usage"
  else
    awk '/^usage_usec/ {print $2/1e6}' "$CG/cpu.stat"
  fi
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
      sleep 0.5 ;;
    fragtracer)
      (
        echo "$BASHPID" >"$CG/cgroup.procs"
        fragtracer_style "$2"
      ) &
      MONITOR_PID=$! ;;
  esac
}

# Stop the monitor; its CPU seconds go to MONITOR_CPU.
stop_monitor() {
  MONITOR_CPU=0
  if [[ -z $MONITOR_PID ]]; then return; fi
  MONITOR_CPU=$(python3 -c "print(round($(cg_cpu_seconds) - $CPU0, 3))")
  kill "$MONITOR_PID" 2>/dev/null || true
  wait "$MONITOR_PID" 2>/dev/null || true
  MONITOR_PID=
}

# Each workload prints one number: throughput (higher is better).
run_rocksdb() { # DIR
  db_bench --db="$1" --wal_dir="$1" --benchmarks=fillrandom --num=300000 --value_size=1000 \
    --compression_type=none --disable_auto_compactions=false >/dev/null 2>&1
  # YCSB-F analogue: 50:50 reads and (read-modify-)writes on the loaded data.
  db_bench --db="$1" --wal_dir="$1" --use_existing_db=1 --benchmarks=readrandomwriterandom \
    --readwritepercent=50 --num=300000 --value_size=1000 --compression_type=none \
    --duration="$SECS" --threads=2 2>&1 |
    awk '/^readrandomwriterandom/ {for (i=1;i<NF;i++) if ($(i+1) ~ /^ops\/sec/) print $i}'
}

run_redis() { # DIR: AOF (fsync every second) + RDB snapshots every 5 s, loopback only
  redis-server --bind 127.0.0.1 --port 16399 --dir "$1" --appendonly yes \
    --appendfsync everysec --save "5 1" --daemonize no --protected-mode yes \
    >"$WORK/redis.log" 2>&1 &
  local pid=$!
  for _ in $(seq 50); do redis-cli -p 16399 ping >/dev/null 2>&1 && break; sleep 0.1; done
  local end=$((SECONDS + SECS)) total=0 n=0 rps
  while ((SECONDS < end)); do
    rps=$(redis-benchmark -h 127.0.0.1 -p 16399 -t set -n 200000 -d 512 -r 200000 -c 16 -P 8 --csv -q 2>/dev/null |
      awk -F'"' '/^"SET"/ {print $4}')
    total=$(python3 -c "print($total + ${rps:-0})"); n=$((n + 1))
  done
  redis-cli -p 16399 shutdown nosave >/dev/null 2>&1 || kill "$pid"
  wait "$pid" 2>/dev/null || true
  python3 -c "print(round($total / $n))"
}

run_sqlite() { # DIR: FAST'24-style inserts: many small transactions into a growing table
  local db=$1/bench.sqlite txns=0 t0 now
  sqlite3 "$db" "PRAGMA journal_mode=DELETE; CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB);" >/dev/null
  local batch
  batch=$(for _ in $(seq 50); do
    echo "BEGIN; INSERT INTO t(v) SELECT randomblob(4000) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<16) SELECT x FROM c); COMMIT;"
  done)
  t0=$(date +%s.%N)
  while :; do
    sqlite3 "$db" "$batch"
    txns=$((txns + 50))
    now=$(date +%s.%N)
    python3 -c "import sys; sys.exit(0 if $now - $t0 >= $SECS else 1)" && break
  done
  python3 -c "print(round($txns / ($now - $t0), 1))"
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
      tput=$("run_$w" "$dir")
      t1=$(date +%s.%N)
      stop_monitor
      cpu=$MONITOR_CPU
      wall=$(python3 -c "print(round($t1 - $t0, 2))")
      frags=$("$FRAGKIT" scan "$dir" --format json | python3 -c 'import json,sys; s=json.load(sys.stdin)["summary"]; print(s["files"], s["fragmented_files"], s["fragments"])')
      printf '%s\t%d\t%s\t%s\t%s\t%s\t%s\n' "$w" "$p" "$mode" "$tput" "$wall" "$cpu" "$frags" | tee -a "$RESULTS" >&2
      rm -rf "$dir"
    done
  done
done

python3 - "$RESULTS" <<'EOF'
import sys, statistics
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
by = {}
for w, p, mode, tput, wall, cpu, frags in rows:
    by.setdefault(w, {}).setdefault(int(p), {})[mode] = (float(tput), float(wall), float(cpu), frags)
units = {"rocksdb": "ops/s", "redis": "SET/s", "sqlite": "txn/s"}
print("| workload | pairs | baseline (median) | fragkit watch overhead (median) | fragkit CPU | FragTracer-style overhead (median) | FragTracer-style CPU | files / fragmented / fragments at end |")
print("|---|---|---|---|---|---|---|---|")
for w, pairs in by.items():
    base, fo, fc, to, tc = [], [], [], [], []
    for p, m in sorted(pairs.items()):
        b = m["none"][0]
        base.append(b)
        fo.append((1 - m["fragkit"][0] / b) * 100)
        to.append((1 - m["fragtracer"][0] / b) * 100)
        fc.append(m["fragkit"][2] / m["fragkit"][1] * 100)
        tc.append(m["fragtracer"][2] / m["fragtracer"][1] * 100)
    end = pairs[max(pairs)]["none"][3]
    med = statistics.median
    print(f"| {w} | {len(pairs)} | {med(base):.0f} {units.get(w,'')} | {med(fo):+.2f}% ({', '.join(f'{x:+.1f}' for x in fo)}) "
          f"| {med(fc):.2f}% of a core | {med(to):+.2f}% ({', '.join(f'{x:+.1f}' for x in to)}) | {med(tc):.2f}% of a core | {end} |")
print("\noverhead = 1 - throughput(with monitor)/throughput(without), per pair; positive = slower.")
EOF
python3 - "$WORK/load.txt" "$LOAD_AT_START" <<'EOF'
import sys, statistics
v = [float(x) for x in open(sys.argv[1]) if x.strip()]
print(f"load average at start {sys.argv[2]} (1/5/15 min); 1-min load during the run "
      f"(benchmark included): min {min(v):.2f}, median {statistics.median(v):.2f}, "
      f"max {max(v):.2f} over {len(v)} samples")
EOF
