#!/usr/bin/env bash
# fragkit's full and bypass modes against xfs_fsr on one aged xfs, paired. The image (a
# FS_MIB xfs with the exchange-range feature, `age paf PAF:85.50@64K`, then FILES
# FragPicker-synthetic files of FILE_MIB in fp/) is made once and copied back before every
# run; caches are dropped before each. Each round runs xfs_fsr, full and bypass once, in
# an order that rotates (each leads in turn), on the FILES files only (xfs_fsr FILE...,
# fragkit defrag FILE...; verification on, fragkit's default). Per run: wall time from
# start to a sync after it, the device's read/write requests and bytes (same-work proof),
# fragkit's bytes moved. Prints per contender the median (min–max, n) and the per-round
# ratios full / xfs_fsr (goal <= 1.2) and bypass / full (goal <= 1), time and bytes written.
# Usage (root): bench/defrag-xfs-fsr.sh [ROUNDS] [FILES] [FILE_MIB] [FS_MIB]
# Timing runs should hold the bench lock: flock /work/bench.lock nice -n -15 ionice -c1 ...
set -euo pipefail
# One line naming what failed, instead of a silent exit.
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: \`$BASH_COMMAND\` failed with status $?" >&2' ERR
cd "$(dirname "$0")/.."
rounds=${1:-7}; files=${2:-16}; file_mib=${3:-4}; fs_mib=${4:-512}
for v in rounds files file_mib fs_mib; do
  [[ ${!v} =~ ^[0-9]+$ && ${!v} -ge 1 ]] || { echo "bench/defrag-xfs-fsr.sh: $v: expected a number >= 1, got '${!v}'" >&2; exit 2; }
done
command -v xfs_fsr >/dev/null || { echo "bench/defrag-xfs-fsr.sh: xfs_fsr not installed (xfsprogs)" >&2; exit 1; }
# shellcheck source=bench/lib.sh
source bench/lib.sh # band, first_of
defrag_bench_begin defrag-xfs-fsr.sh

aged=$($fk scratch create --fs xfs --size "${fs_mib}M" --dir "$work/aged" 2>/dev/null)
echo "aging: xfs ${fs_mib} MiB, age paf PAF:85.50@64K, then $files x $file_mib MiB fragpicker-synthetic ..." >&2
$fk age paf --target "$aged" PAF:85.50@64K >/dev/null
mkdir "$aged/fp"
$fk age fragpicker-synthetic --files "$files" --size "${file_mib}M" "$aged/fp" >/dev/null
sync
$fk scan --summary-only "$aged/fp" | sed -n 1,3p >&2
image=$(ls "$work"/aged/*.img)
umount "$aged"

# reads, read B, writes, written B
stat_fields() { awk '{ printf "%.0f %.0f %.0f %.0f\n", $1, $3 * 512, $5, $7 * 512 }' "/sys/block/$1/stat"; }
# run NAME: one contender on a fresh copy; appends "name time_s reads read_B writes written_B moved_B"
run() {
  local name=$1 dev s0 s1 t0 t1 moved=0 code=0
  cp --sparse=always "$image" "$work/copy.img"
  loopdev=$(losetup --find --show "$work/copy.img"); dev=$(basename "$loopdev")
  mount "$loopdev" "$mnt"
  local targets=("$mnt"/fp/*)
  sync; echo 3 > /proc/sys/vm/drop_caches
  s0=$(stat_fields "$dev"); t0=$(date +%s.%N)
  case $name in
    xfs_fsr) xfs_fsr "${targets[@]}" </dev/null >/dev/null 2>&1 || code=$? ;;
    *) "$fk" defrag --mode "$name" --format json "${targets[@]}" > "$work/report.json" 2>/dev/null || code=$? ;;
  esac
  sync; t1=$(date +%s.%N); s1=$(stat_fields "$dev")
  [[ $code -le 1 ]] || { echo "bench/defrag-xfs-fsr.sh: $name exited $code" >&2; exit 1; }
  [[ $name == xfs_fsr ]] || moved=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["bytes_moved"])' "$work/report.json")
  umount "$mnt"; losetup -d "$loopdev"; loopdev=""
  paste -d' ' <(echo "$name $(echo "$t1 - $t0" | bc -l)") <(echo "$s0") <(echo "$s1") <(echo "$moved") |
    awk '{ printf "%s %s %.0f %.0f %.0f %.0f %s\n", $1, $2, $7 - $3, $8 - $4, $9 - $5, $10 - $6, $11 }' >> "$work/runs"
}
: > "$work/runs"
names=(xfs_fsr full bypass)
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < rounds; r++)); do
  lead=$(first_of "$r" 3)
  for ((k = 0; k < 3; k++)); do run "${names[(lead + k) % 3]}"; done
  tail -3 "$work/runs" >&2
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
col() { awk -v n="$1" -v c="$2" '$1 == n { print $c }' "$work/runs"; }
printf "%-8s %-24s %-22s %-22s %-22s %-22s %s\n" method time_s reads read_MiB writes written_MiB moved_MiB
for n in "${names[@]}"; do
  printf "%-8s %-24s %-22s %-22s %-22s %-22s %s\n" "$n" "$(col "$n" 2 | band 2)" "$(col "$n" 3 | band 0)" \
    "$(col "$n" 4 | awk '{ print $1 / 1048576 }' | band 1)" "$(col "$n" 5 | band 0)" \
    "$(col "$n" 6 | awk '{ print $1 / 1048576 }' | band 1)" "$(col "$n" 7 | awk '{ print $1 / 1048576 }' | band 1)"
done
# Per round: the three runs of round r are rows 3r+1..3r+3, in some order.
ratio() { awk -v a="$1" -v b="$2" -v c="$3" '{ v[$1] = $c } NR % 3 == 0 { print v[a] / v[b] }' "$work/runs" | band 2; }
echo "full / xfs_fsr, per round: time $(ratio full xfs_fsr 2) (goal <= 1.2); bytes written $(ratio full xfs_fsr 6)"
echo "bypass / full, per round: time $(ratio bypass full 2) (goal <= 1); bytes written $(ratio bypass full 6) (goal <= 1)"
