#!/usr/bin/env bash
# What a monitor costs a writer, per operation: bench/write_loop.c does COUNT buffered 4 KiB
# pwrite(2)s over a 64 MiB file on a scratch ext4 ("overwrite"), and COUNT/10 rounds of
# create + 4 KiB write + close + unlink of a journal file ("journal", SQLite's rollback
# journal per transaction), timing itself. Contenders, in rotating order each round:
# - none;
# - floor: an empty fanotify group with fragkit's file-system mark that is never read
#   (bench/fanotify_churn_cost.c --hold): what the kernel itself charges for the events
#   fragkit asks for, whatever fragkit then does with them;
# - fragkit: `fragkit watch --interval 1s` on the files' directory;
# - fragtracer: a FragTracer-style monitor (filefrag -v on every file, one process per
#   file, every second).
# fanotify builds its events inside the writer's own system call, so this is where an
# event-driven monitor shows its cost; throughput benchmarks of whole databases
# (bench/watch-overhead.sh) bury it in their run-to-run noise on a shared machine.
# Each monitor runs in a cgroup of its own (cpuacct: cgroup v1 on the development VM), so
# everything it runs is charged to it: fragkit's threads, the FragTracer-style loop's
# find/xargs/filefrag processes, also those that have exited; when a contender stops, every
# process of its group is killed and waited for. The table shows the writer's CPU per
# operation, the monitor's CPU per operation over the same phase, and the change of their
# sum against no monitor, paired per round: median (min–max, n).
#
#   bench/watch-write-cost.sh [ROUNDS] [COUNT]          (default: 9 1000000)
#
# FRAGKIT=/path/to/fragkit uses that binary instead of building this tree. Needs root.
set -euo pipefail
# One line naming what failed, instead of a silent exit.
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: \`$BASH_COMMAND\` failed with status $?" >&2' ERR
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${1:-9}
COUNT=${2:-1000000}
if [[ $(id -u) -ne 0 ]]; then
  echo "bench/watch-write-cost.sh: needs root (scratch file system on a loop device)" >&2
  exit 1
fi
[[ $ROUNDS =~ ^[1-9][0-9]*$ && $COUNT =~ ^[1-9][0-9]*$ ]] || {
  echo "bench/watch-write-cost.sh: ROUNDS and COUNT must be positive integers, got '$ROUNDS' '$COUNT'" >&2
  exit 2
}
if [[ -z ${FRAGKIT:-} ]]; then
  cargo build --release --quiet
  FRAGKIT=$PWD/target/release/fragkit
fi
WORK=$(mktemp -d /tmp/fragkit-write-cost.XXXXXX)
modes=(none floor fragkit fragtracer)
declare -A CG=()
MNT=
cleanup() {
  local g
  for g in "${CG[@]}"; do cg_stop "$g" || true; rmdir "$g" 2>/dev/null || true; done
  [[ -n $MNT ]] && "$FRAGKIT" scratch destroy "$MNT" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
for mode in "${modes[@]:1}"; do
  CG[$mode]=$(cg_make "fragkit-write-cost-$mode-$$") ||
    { echo "bench/watch-write-cost.sh: cannot make a cgroup to account the monitor's CPU" >&2; exit 1; }
done
cc -O2 -o "$WORK/write_loop" bench/write_loop.c
cc -O2 -o "$WORK/fanotify_churn_cost" bench/fanotify_churn_cost.c
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

echo "load before: $(uptime)" >&2
RESULTS=$WORK/results.tsv
: >"$RESULTS"
for ((r = 0; r < ROUNDS; r++)); do
  first=$(first_of "$r" ${#modes[@]})
  for ((k = 0; k < ${#modes[@]}; k++)); do
    mode=${modes[$(((first + k) % ${#modes[@]}))]}
    g=${CG[$mode]:-}
    case $mode in
      none) ;;
      floor)
        (echo "$BASHPID" >"$g/cgroup.procs"; exec "$WORK/fanotify_churn_cost" --hold "$MNT") &
        disown ;;
      fragkit)
        (echo "$BASHPID" >"$g/cgroup.procs"; exec "$FRAGKIT" watch "$MNT/data" --interval 1s --db "$WORK/watch.db" >/dev/null 2>&1) &
        disown ;;
      fragtracer)
        (echo "$BASHPID" >"$g/cgroup.procs"; fragtracer_style "$MNT/data") &
        disown ;;
    esac
    sleep 1.5 # the monitor is up and has made its first pass
    m0=0 m1=0 m2=0
    [[ -n $g ]] && m0=$(cg_cpu_ns "$g")
    read -r wall cpu < <("$WORK/write_loop" "$MNT/data/hot.log" "$COUNT" 4096 67108864)
    [[ -n $g ]] && m1=$(cg_cpu_ns "$g")
    read -r jwall jcpu < <("$WORK/write_loop" --churn "$MNT/data" $((COUNT / 10)) 4096)
    [[ -n $g ]] && m2=$(cg_cpu_ns "$g")
    # The monitor's CPU per operation of each phase.
    mcpu=$(awk -v a="$m0" -v b="$m1" -v n="$COUNT" 'BEGIN { printf "%.1f", (b - a) / n }')
    mjcpu=$(awk -v a="$m1" -v b="$m2" -v n=$((COUNT / 10)) 'BEGIN { printf "%.1f", (b - a) / n }')
    [[ -z $g ]] || cg_stop "$g" # disowned: the group being empty is the wait
    printf '%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$mode" "$wall" "$cpu" "$jwall" "$jcpu" "$mcpu" "$mjcpu" | tee -a "$RESULTS" >&2
  done
done
echo "load after: $(uptime)" >&2

python3 - "$RESULTS" "$COUNT" <<'PY'
import sys, statistics
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = {}
for r, mode, wall, cpu, jwall, jcpu, mcpu, mjcpu in rows:
    by.setdefault(int(r), {})[mode] = tuple(map(float, (wall, cpu, jwall, jcpu, mcpu, mjcpu)))
med = statistics.median
n = int(sys.argv[2])
def band(v, fmt):
    return f"{fmt.format(med(v))} ({fmt.format(min(v))}–{fmt.format(max(v))}, n={len(v)})"
print(f"{len(by)} rounds, contenders in rotating order (none, floor, fragkit, fragtracer); overwrite: {n:,} buffered 4 KiB pwrite(2)s; journal: {n // 10:,} x (create, write 4 KiB, close, unlink)")
print("CPU ns per operation: the writer's own; the monitor's (its cgroup: every process it ran) over the same phase; the change of their sum against no monitor, paired per round: median (min–max, n)")
print("| monitor | overwrite: writer | monitor | change | journal: writer | monitor | change |")
print("|---|---|---|---|---|---|---|")
for mode in ("none", "floor", "fragkit", "fragtracer"):
    cols = []
    for w, m in ((1, 4), (3, 5)):
        total = lambda x, mo: x[mo][w] + x[mo][m]
        cols.append(band([x[mode][w] for x in by.values()], "{:.0f}"))
        if mode == "none":
            cols += ["-", ""]
            continue
        cols.append(band([x[mode][m] for x in by.values()], "{:.1f}"))
        cols.append(band([(total(x, mode) / total(x, "none") - 1) * 100 for x in by.values()], "{:+.1f}%"))
    print(f"| {mode} | " + " | ".join(cols) + " |")
over = [(x["fragkit"][3] + x["fragkit"][5]) / (x["floor"][3] + x["floor"][5]) * 100 - 100 for x in by.values()]
print(f"\njournal: fragkit (writer + monitor) over the floor (writer + group): {band(over, '{:+.1f}%')}")
PY
