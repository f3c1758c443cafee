#!/usr/bin/env bash
# What a monitor costs a writer, per operation: bench/write_loop.c does COUNT buffered 4 KiB
# pwrite(2)s over a 64 MiB file on a scratch ext4 ("overwrite"), and COUNT/10 rounds of
# create + 4 KiB write + close + unlink of a journal file ("journal", SQLite's rollback
# journal per transaction), timing itself, with no monitor, with
# `fragkit watch --interval 1s` on the file's directory, and with a FragTracer-style monitor
# (filefrag -v on every file each second), in rotating order, PAIRS times. fanotify builds
# its events inside the writer's own system call, so this is where an event-driven monitor
# shows its cost; throughput benchmarks of whole databases (bench/watch-overhead.sh) bury it
# in their own run-to-run noise on a shared machine.
# Each monitor runs in a cpuacct cgroup of its own, so everything it runs (fragkit's
# threads, the FragTracer-style loop's find/xargs/filefrag processes) is charged to it: the
# table shows the writer's CPU per operation, the monitor's CPU per operation over the same
# phase, and the change of their sum against no monitor, paired per rotation.
#
#   bench/watch-write-cost.sh [PAIRS] [COUNT]          (default: 10 1000000)
#
# FRAGKIT=/path/to/fragkit uses that binary instead of building this tree. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${1:-10}
COUNT=${2:-1000000}
if [[ $(id -u) -ne 0 ]]; then
  echo "bench/watch-write-cost.sh: needs root (scratch file system on a loop device)" >&2
  exit 1
fi
if [[ -z ${FRAGKIT:-} ]]; then
  cargo build --release --quiet
  FRAGKIT=$PWD/target/release/fragkit
fi
WORK=$(mktemp -d /tmp/fragkit-write-cost.XXXXXX)
MONITOR_PID=
CG=
cleanup() {
  [[ -n $MONITOR_PID ]] && kill "$MONITOR_PID" 2>/dev/null || true
  "$FRAGKIT" scratch destroy "$MNT" >/dev/null 2>&1 || true
  [[ -n $CG ]] && rmdir "$CG" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
for base in /sys/fs/cgroup/cpuacct /sys/fs/cgroup/unified /sys/fs/cgroup; do
  if mkdir "$base/fragkit-write-cost-$$" 2>/dev/null; then CG=$base/fragkit-write-cost-$$; break; fi
done
[[ -n $CG ]] || { echo "bench/watch-write-cost.sh: cannot make a cgroup to account the monitor's CPU" >&2; exit 1; }
cg_ns() { # CPU nanoseconds the monitor's cgroup has used
  if [[ -f $CG/cpuacct.usage ]]; then cat "$CG/cpuacct.usage"; else awk '/^usage_usec/ {print $2 * 1000}' "$CG/cpu.stat"; fi
}
cc -O2 -o "$WORK/write_loop" bench/write_loop.c
MNT=$("$FRAGKIT" scratch create --fs ext4 --size 1G --dir "$WORK" --format json |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["mountpoint"])')
mkdir "$MNT/data"
# Other files the monitor watches, as a database directory would hold.
for i in $(seq 100); do head -c 65536 /dev/urandom >"$MNT/data/other-$i.sst"; done
"$WORK/write_loop" "$MNT/data/hot.log" 16384 4096 67108864 >/dev/null
sync

fragtracer_style() {
  while :; do
    find "$1" -type f -print0 | xargs -0 -r -n1 filefrag -v >"$WORK/fragInfo.txt" 2>/dev/null
    sleep 1
  done
}

modes=(none fragkit fragtracer)
RESULTS=$WORK/results.tsv
: >"$RESULTS"
for ((p = 0; p < PAIRS; p++)); do
  for ((k = 0; k < 3; k++)); do
    mode=${modes[$(((p + k) % 3))]}
    case $mode in
      none) MONITOR_PID= ;;
      fragkit)
        (echo "$BASHPID" >"$CG/cgroup.procs"; exec "$FRAGKIT" watch "$MNT/data" --interval 1s --db "$WORK/watch.db" >/dev/null 2>&1) &
        MONITOR_PID=$! ;;
      fragtracer)
        (echo "$BASHPID" >"$CG/cgroup.procs"; fragtracer_style "$MNT/data") &
        MONITOR_PID=$! ;;
    esac
    sleep 1.5 # the monitor is up and has made its first pass
    m0=$(cg_ns)
    read -r wall cpu < <("$WORK/write_loop" "$MNT/data/hot.log" "$COUNT" 4096 67108864)
    m1=$(cg_ns)
    read -r jwall jcpu < <("$WORK/write_loop" --churn "$MNT/data" $((COUNT / 10)) 4096)
    m2=$(cg_ns)
    # The monitor's CPU per operation of each phase.
    mcpu=$(awk -v a="$m0" -v b="$m1" -v n="$COUNT" 'BEGIN { printf "%.1f", (b - a) / n }')
    mjcpu=$(awk -v a="$m1" -v b="$m2" -v n=$((COUNT / 10)) 'BEGIN { printf "%.1f", (b - a) / n }')
    if [[ -n $MONITOR_PID ]]; then
      kill "$MONITOR_PID" 2>/dev/null || true
      wait "$MONITOR_PID" 2>/dev/null || true
      MONITOR_PID=
    fi
    printf '%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$p" "$mode" "$wall" "$cpu" "$jwall" "$jcpu" "$mcpu" "$mjcpu" | tee -a "$RESULTS" >&2
  done
done

python3 - "$RESULTS" "$COUNT" <<'PY'
import sys, statistics
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = {}
for p, mode, wall, cpu, jwall, jcpu, mcpu, mjcpu in rows:
    by.setdefault(int(p), {})[mode] = tuple(map(float, (wall, cpu, jwall, jcpu, mcpu, mjcpu)))
med = statistics.median
n = int(sys.argv[2])
print(f"n = {len(by)} rotations (none, fragkit, fragtracer in rotating order); overwrite: {n:,} buffered 4 KiB pwrite(2)s; journal: {n // 10:,} x (create, write 4 KiB, close, unlink)")
print("CPU ns per operation: the writer's own, the monitor's (its cgroup: every process it ran) over the same phase, and the change of their sum against no monitor, paired per rotation")
print("| monitor | overwrite: writer | monitor | change (median, min..max) | journal: writer | monitor | change (median, min..max) |")
print("|---|---|---|---|---|---|---|")
for mode in ("none", "fragkit", "fragtracer"):
    cols = []
    for w, m in ((1, 4), (3, 5)):
        total = lambda r, mo: r[mo][w] + (r[mo][m] if mo != "none" else 0.0)
        ch = [(total(r, mode) / total(r, "none") - 1) * 100 for r in by.values()]
        cols.append(f"{med([r[mode][w] for r in by.values()]):.0f}")
        cols.append("-" if mode == "none" else f"{med([r[mode][m] for r in by.values()]):.0f}")
        cols.append("" if mode == "none" else f"{med(ch):+.2f}% ({min(ch):+.1f}..{max(ch):+.1f})")
    print(f"| {mode} | " + " | ".join(cols) + " |")
PY
