#!/usr/bin/env bash
# What -j does to the layout: `defrag --mode bypass --io-size 128K` with -j 1 and -j 2,
# alternating (1 2 1 2 ...), on fresh clones of bench/fragpicker-compare.sh's aged ext4
# image (2 GiB, PAF:85.50@64K, 4 x 128 MiB FragPicker files; made by that script, kept as
# IMAGE_DIR/fragpicker-aged.img). Per run: exit status, wall seconds, and the report's
# ranges moved, ranges not improvable (no whole donor found) and split requests at 128K
# before and after.
# Usage (root): bench/defrag-jobs-layout.sh [PAIRS]   (default 2; it is a layout check,
#   device counts and FIEMAP are exact, the seconds are one run each)
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $(id -u) -eq 0 ]] || { echo "bench/defrag-jobs-layout.sh: needs root (loop devices, MOVE_EXT)" >&2; exit 1; }
pairs=${1:-2}
[[ $pairs =~ ^[0-9]+$ && $pairs -ge 1 ]] || { echo "bench/defrag-jobs-layout.sh: PAIRS: expected a number >= 1, got '$pairs'" >&2; exit 2; }
image=${IMAGE_DIR:-/dev/shm}/fragpicker-aged.img
[[ -f $image ]] || { echo "bench/defrag-jobs-layout.sh: $image missing: run bench/fragpicker-compare.sh once (it makes and keeps it)" >&2; exit 1; }
nice -n 15 cargo build --release -q
fk=$PWD/target/release/fragkit
work=$(mktemp -d /tmp/fragkit-jobs-layout.XXXXXX)
clone=$work/clone.img; mnt=$work/mnt; mkdir "$mnt"; dev=""
cleanup() { findmnt -n "$mnt" >/dev/null && umount "$mnt"; [[ -n $dev ]] && losetup -d "$dev" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-4s %4s %8s %8s %15s %8s %8s\n' jobs exit seconds moved not_improvable split_before split_after
for ((i = 0; i < 2 * pairs; i++)); do
  j=$(( i % 2 + 1 ))
  cp --sparse=always "$image" "$clone"
  dev=$(losetup -f --show "$clone"); mount "$dev" "$mnt"
  t0=$(date +%s.%N); rc=0
  "$fk" defrag --mode bypass --io-size 128K -j "$j" --format json "$mnt/work" >"$work/r.json" 2>/dev/null || rc=$?
  t1=$(date +%s.%N)
  python3 - "$work/r.json" "$j" "$rc" "$t0" "$t1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
print("%-4s %4s %8.2f %8d %15d %8d %8d" % (sys.argv[2], sys.argv[3], float(sys.argv[5]) - float(sys.argv[4]),
      s["ranges_moved"], s["ranges_not_improvable"], s["extra_before"], s["extra_after"]))
PY
  umount "$mnt"; losetup -d "$dev"; dev=""
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
