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
cleanup() {
  [[ -n $MONITOR_PID ]] && kill "$MONITOR_PID" 2>/dev/null || true
  "$FRAGKIT" scratch destroy "$MNT" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
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
        "$FRAGKIT" watch "$MNT/data" --interval 1s --db "$WORK/watch.db" >/dev/null 2>&1 &
        MONITOR_PID=$! ;;
      fragtracer)
        fragtracer_style "$MNT/data" &
        MONITOR_PID=$! ;;
    esac
    sleep 1.5 # the monitor is up and has made its first pass
    read -r wall cpu < <("$WORK/write_loop" "$MNT/data/hot.log" "$COUNT" 4096 67108864)
    read -r jwall jcpu < <("$WORK/write_loop" --churn "$MNT/data" $((COUNT / 10)) 4096)
    if [[ -n $MONITOR_PID ]]; then
      kill "$MONITOR_PID" 2>/dev/null || true
      wait "$MONITOR_PID" 2>/dev/null || true
      MONITOR_PID=
    fi
    printf '%d\t%s\t%s\t%s\t%s\t%s\n' "$p" "$mode" "$wall" "$cpu" "$jwall" "$jcpu" | tee -a "$RESULTS" >&2
  done
done

python3 - "$RESULTS" "$COUNT" <<'PY'
import sys, statistics
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = {}
for p, mode, wall, cpu, jwall, jcpu in rows:
    by.setdefault(int(p), {})[mode] = (float(wall), float(cpu), float(jwall), float(jcpu))
med = statistics.median
n = int(sys.argv[2])
print(f"{len(by)} rotations; overwrite: {n:,} buffered 4 KiB pwrite(2)s; journal: {n // 10:,} x (create, write 4 KiB, close, unlink)")
print("| monitor | overwrite: CPU ns/write (median) | change vs none, paired (median, min..max) | journal: CPU ns/cycle (median) | change vs none, paired (median, min..max) |")
print("|---|---|---|---|---|")
for mode in ("none", "fragkit", "fragtracer"):
    cols = []
    for k in (1, 3):
        v = [r[mode][k] for r in by.values()]
        ch = [(r[mode][k] / r["none"][k] - 1) * 100 for r in by.values()]
        cols.append(f"{med(v):.0f}")
        cols.append("" if mode == "none" else f"{med(ch):+.2f}% ({min(ch):+.1f}..{max(ch):+.1f})")
    print(f"| {mode} | " + " | ".join(cols) + " |")
PY
