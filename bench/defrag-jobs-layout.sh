#!/usr/bin/env bash
# What -j does to the layout (not a timing benchmark: bench/defrag-parallel.sh times -j 1
# against -j 2 in paired rounds). `defrag --mode bypass --io-size 128K` with -j 1 and -j 2,
# alternating (1 2, 2 1, ...), on fresh clones of bench/fragpicker-compare.sh's aged ext4
# (2 GiB, PAF:85.50@64K, 4 x 128 MiB FragPicker files; made here when missing, kept as
# IMAGE_DIR/fragpicker-aged.img). Per run, all exact counts: exit status, the device's read
# and write requests and bytes during the run (the work done), ranges moved and not
# improvable (no whole donor found), split requests at 128K before and after; at the end,
# per -j, the exit statuses and median (min..max, n) of split requests after, windows not
# improvable and device reads.
# Usage (root): bench/defrag-jobs-layout.sh [PAIRS]   (default 7)
set -euo pipefail
# One line naming what failed, instead of a silent exit.
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: \`$BASH_COMMAND\` failed with status $?" >&2' ERR
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh # defrag_bench_begin, fp_aged_image, first_of
pairs=${1:-7}
[[ $pairs =~ ^[0-9]+$ && $pairs -ge 1 ]] || { echo "bench/defrag-jobs-layout.sh: PAIRS: expected a number >= 1, got '$pairs'" >&2; exit 2; }
defrag_bench_begin defrag-jobs-layout.sh # $fk, $work, $mnt, $loopdev, cleanup at exit
image=${IMAGE_DIR:-/dev/shm}/fragpicker-aged.img
fp_aged_image "$image" "$fk"
clone=$work/clone.img
printf '%-4s %4s %9s %9s %9s %9s %8s %15s %12s %11s\n' jobs exit reads read_MiB writes writ_MiB moved not_improvable split_before split_after
for ((r = 0; r < pairs; r++)); do
  for k in 0 1; do
    f=$(first_of "$r" 2)
    j=$(( (f + k) % 2 + 1 ))
    cp --sparse=always "$image" "$clone"
    loopdev=$(losetup --find --show "$clone"); mount "$loopdev" "$mnt"
    stat=/sys/block/$(basename "$loopdev")/stat
    read -r -a s0 < "$stat"
    rc=0
    "$fk" defrag --mode bypass --io-size 128K -j "$j" --format json "$mnt/work" >"$work/r.json" 2>/dev/null || rc=$?
    sync
    read -r -a s1 < "$stat"
    python3 - "$work/r.json" "$j" "$rc" "${s0[*]}" "${s1[*]}" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
a, b = [list(map(int, x.split())) for x in sys.argv[4:6]]
d = [y - x for x, y in zip(a, b)]  # reads, merged, sectors read, ms, writes, merged, sectors written
print("%-4s %4s %9d %9.1f %9d %9.1f %8d %15d %12d %11d" % (sys.argv[2], sys.argv[3], d[0], d[2] / 2048,
      d[4], d[6] / 2048, s["ranges_moved"], s["ranges_not_improvable"], s["extra_before"], s["extra_after"]))
PY
    umount "$mnt"; losetup -d "$loopdev"; loopdev=""
  done
done | tee "$work/rows"
# Per jobs value: runs, exit statuses, and median (min..max, n) of the counts that differ.
python3 - "$work/rows" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    if f and f[0].isdigit():
        rows[f[0]].append(f)
def spread(v):
    return "%g (%g..%g, n=%d)" % (statistics.median(v), min(v), max(v), len(v))
for jobs, rs in sorted(rows.items()):
    exits = collections.Counter(r[1] for r in rs)
    print("-j %s: exit %s; split requests after %s; not improvable %s; device reads %s" % (
        jobs, ", ".join("%s in %d" % (k, n) for k, n in sorted(exits.items())),
        spread([int(r[9]) for r in rs]), spread([int(r[7]) for r in rs]), spread([int(r[2]) for r in rs])))
PY
