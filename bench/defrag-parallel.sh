#!/usr/bin/env bash
# `defrag -j 1` against `defrag -j 2` on a whole aged file system of many files (issue 15
# item 4). One image is aged once (PAF fills it to 85% and deletes half at random, then
# FILES FragPicker round-robin files of FILE_MIB each grow in the holes), kept, and copied
# back before every run, so every run starts from the same layout. Rounds alternate the
# order (A B, B A, ...). Per run: wall time of `defrag --mode bypass` over the whole mount
# point, the device's read/write requests and bytes (same work proof), bytes moved.
# The physical floor, measured in the same round on the same loop device after the run:
# a plain O_DIRECT copy of as many bytes as -j 2 moved (fio: a sequential 1 MiB read of
# them and a sequential 1 MiB write of as many, at once, io_uring QD 4 each, on the device
# itself, caches dropped first, the write fsynced at its end as the defrag's run ends with a
# sync; the image is restored before the next run). floor = that copy's wall time: the
# issue's floor, "bytes moved / the copy bandwidth of a plain O_DIRECT read+write".
# A second floor, the physical one for moving FRAGMENTED data (extent floor): O_DIRECT reads
# of the very source extents the run moved (FIEMAP of the aged image, cut to the moved
# ranges: one read per extent piece, in file order, as readahead issues them; fio replays
# them from an iolog, bench/extent_floor.py, with the device's nr_requests in flight, the
# most its queue takes) and at once the sequential 1 MiB write of as many bytes (QD 4,
# fsynced at its end), on the same device in the same round.
# Prints the median ratio time(-j 1) / time(-j 2) (goal >= 1.8 on 2 cores) and
# time / floor (goal <= 1.3) and time / extent floor, each as median (min–max, n).
# DEVICE: loop (default; a loop device over a copy of the aged image in $work) or zram
# (/dev/zram0, a RAM block device that serves each request in the submitter's own context,
# so two workers' requests proceed in parallel where a loop device's one worker thread
# serves them one at a time; the aged image is written onto it before every run; zram0
# must be unused (disksize 0) and is reset and given its compression algorithm back at
# the end).
# Usage (root): bench/defrag-parallel.sh [ext4|xfs|btrfs] [PAIRS] [FILES] [FILE_MIB] [FS_MIB] [loop|zram]
# Timing runs should hold the bench lock: flock /work/bench.lock nice -n -15 ionice -c1 ...
set -euo pipefail
# One line naming what failed, instead of a silent exit.
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: \`$BASH_COMMAND\` failed with status $?" >&2' ERR
cd "$(dirname "$0")/.."
fs=${1:-ext4}; pairs=${2:-7}; files=${3:-16}; file_mib=${4:-4}; fs_mib=${5:-512}; device=${6:-loop}
[[ $device == loop || $device == zram ]] || { echo "bench/defrag-parallel.sh: device: expected loop or zram, got '$device'" >&2; exit 2; }
zram=/sys/block/zram0
if [[ $device == zram ]]; then
  [[ -d $zram ]] || { echo "bench/defrag-parallel.sh: no /dev/zram0 (modprobe zram)" >&2; exit 2; }
  [[ $(cat $zram/disksize) == 0 ]] || { echo "bench/defrag-parallel.sh: /dev/zram0 is in use (disksize $(cat $zram/disksize)): not touched" >&2; exit 2; }
  zram_algorithm=$(sed 's/.*\[\(.*\)\].*/\1/' $zram/comp_algorithm)
fi
for v in pairs files file_mib fs_mib; do
  [[ ${!v} =~ ^[0-9]+$ && ${!v} -ge 1 ]] || { echo "bench/defrag-parallel.sh: $v: expected a number >= 1, got '${!v}'" >&2; exit 2; }
done
# shellcheck source=bench/lib.sh
source bench/lib.sh # band, first_of
defrag_bench_begin defrag-parallel.sh
if [[ $device == zram ]]; then
  # zram0 back as it was (unconfigured, its algorithm), then the common clean-up.
  zram_put_back() {
    mountpoint -q "$mnt" && umount "$mnt"
    echo 1 > $zram/reset
    echo "$zram_algorithm" > $zram/comp_algorithm
  }
  trap 'zram_put_back; loopdev=""; defrag_bench_cleanup' EXIT
fi

mkfs_args=""; [[ $fs == ext4 ]] && mkfs_args="-m 0"
spec="PAF:85.50@64K"; [[ $fs == btrfs ]] && spec="PAF:75.50@64K"  # btrfs: room for metadata
aged=$($fk scratch create --fs "$fs" --size "${fs_mib}M" --dir "$work/aged" --mkfs-args "$mkfs_args" 2>/dev/null)
echo "aging: $fs ${fs_mib} MiB, age paf $spec, then $files x $file_mib MiB fragpicker-synthetic ..." >&2
$fk age paf --target "$aged" "$spec" >/dev/null
mkdir "$aged/fp"
$fk age fragpicker-synthetic --files "$files" --size "${file_mib}M" "$aged/fp" >/dev/null
sync
$fk scan --summary-only "$aged" | sed -n 1,4p >&2
# The aged layout, for the extent floor (every run starts from this image).
{ echo "# mount $aged"; find "$aged" -type f -print0 | xargs -0 -s 2000000 filefrag -v; } > "$work/extents"
image=$(ls "$work"/aged/*.img)
umount "$aged"

# reads, read B, writes, written B (%.0f: mawk prints numbers with 6 significant digits and
# clamps %d at 2^31 - 1)
stat_fields() { awk '{ printf "%.0f %.0f %.0f %.0f\n", $1, $3 * 512, $5, $7 * 512 }' "/sys/block/$1/stat"; }
# Where the time goes, to tell a device-bound run from a CPU-bound one: CPU ticks every
# CPU spent busy (user, nice, system, irq, softirq; not idle, iowait or steal: the loop
# device's and the virtio disk's kernel threads count too), and the device's io_ticks (ms
# with at least one request in flight).
cpu_busy_ticks() { awk '$1 == "cpu" { printf "%.0f\n", $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
io_ticks_ms() { awk '{ printf "%.0f\n", $10 }' "/sys/block/$1/stat"; }
attach() {
  if [[ $device == zram ]]; then
    echo 1 > $zram/reset
    stat -c %s "$image" > $zram/disksize
    # Unwritten zram pages read as zeros: the image's zero blocks need no write.
    dd if="$image" of=/dev/zram0 bs=1M conv=sparse,fsync status=none
    loopdev=/dev/zram0
  else
    cp --sparse=always "$image" "$work/copy.img"
    loopdev=$(losetup --find --show "$work/copy.img")
  fi
  mount "$loopdev" "$mnt"
}
# The device after a run: a loop device detached, zram0 emptied.
release() {
  if [[ $device == zram ]]; then echo 1 > $zram/reset; else losetup -d "$loopdev"; fi
  loopdev=""
}
# run JOBS: one defrag on a fresh copy, then the copy floor on the same device; appends
# "jobs time_s reads read_B writes written_B moved_B ranges_moved files_worse exit floor_s
#  extent_floor_s extent_floor_reads extent_floor_read_B cpu_busy_ticks io_ticks_ms"
run() {
  local j=$1 dev s0 s1 t0 t1 code moved rest half c0 c1 i0 i1
  attach; dev=$(basename "$loopdev")
  sync; echo 3 > /proc/sys/vm/drop_caches
  s0=$(stat_fields "$dev"); c0=$(cpu_busy_ticks); i0=$(io_ticks_ms "$dev"); t0=$(date +%s.%N)
  code=0; "$fk" defrag --mode bypass -j "$j" --format json "$mnt" > "$work/report.json" 2>/dev/null || code=$?
  sync; t1=$(date +%s.%N); s1=$(stat_fields "$dev"); c1=$(cpu_busy_ticks); i1=$(io_ticks_ms "$dev")
  [[ $code -le 1 ]] || { echo "bench/defrag-parallel.sh: defrag -j $j exited $code" >&2; exit 1; }
  read -r moved rest < <(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["summary"]; print(s["bytes_moved"], s["ranges_moved"], s["files_worse"])' "$work/report.json")
  umount "$mnt"
  # The floor: O_DIRECT read of `moved` bytes and write of as many, at once, on this device.
  half=$(( $(blockdev --getsize64 "$loopdev") / 2 / 1048576 * 1048576 ))
  local mib=$(( (moved + 1048575) / 1048576 ))
  # From the same cold cache as the defrag, and durable at the end as the defrag's sync.
  sync; echo 3 > /proc/sys/vm/drop_caches
  fio --output-format=json --output="$work/floor.json" --ioengine=io_uring --direct=1 --bs=1M --iodepth=4 \
    --filename="$loopdev" --size="${mib}M" \
    --name=r --rw=read --offset=0 --name=w --rw=write --offset="$half" --end_fsync=1 > /dev/null
  local floor xbytes xreads xfloor
  floor=$(python3 -c 'import json,sys; print(max(j["job_runtime"] for j in json.load(open(sys.argv[1]))["jobs"]) / 1000)' "$work/floor.json")
  # The extent floor: the moved source extents read as the layout forces, and the write.
  read -r xbytes xreads < <(python3 bench/extent_floor.py "$work/extents" "$work/report.json" "$mnt" "$loopdev" "$work/iolog")
  sync; echo 3 > /proc/sys/vm/drop_caches
  fio --output-format=json --output="$work/xfloor.json" --ioengine=io_uring --direct=1 \
    --name=r --read_iolog="$work/iolog" --iodepth="$(cat "/sys/block/$dev/queue/nr_requests" 2>/dev/null || echo 128)" \
    --name=w --filename="$loopdev" --rw=write --bs=1M --iodepth=4 --offset="$half" \
    --size="$(( (xbytes + 1048575) / 1048576 ))M" --end_fsync=1 > /dev/null
  xfloor=$(python3 -c 'import json,sys; print(max(j["job_runtime"] for j in json.load(open(sys.argv[1]))["jobs"]) / 1000)' "$work/xfloor.json")
  release
  paste -d' ' <(echo "$j $(echo "$t1 - $t0" | bc -l)") <(echo "$s0") <(echo "$s1") <(echo "$moved $rest $code $floor $xfloor $xreads $xbytes $((c1 - c0)) $((i1 - i0))") |
    awk '{ printf "%s %s %.0f %.0f %.0f %.0f %.0f %s %s %s %s %s %s %.0f %s %s\n", $1, $2, $7 - $3, $8 - $4, $9 - $5, $10 - $6, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20 }' >> "$work/runs"
}
: > "$work/runs"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < pairs; r++)); do
  if [[ $(first_of "$r" 2) -eq 0 ]]; then run 1; run 2; else run 2; run 1; fi
  tail -2 "$work/runs" >&2
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
col() { awk -v j="$1" -v c="$2" '$1 == j { print $c }' "$work/runs"; }
printf "%-4s %-24s %-22s %-22s %-22s %-22s %-14s %-22s %s\n" jobs time_s "reads" "read_MiB" "writes" "written_MiB" moved_MiB "time/floor" "time/extent_floor"
for j in 1 2; do
  printf "%-4s %-24s %-22s %-22s %-22s %-22s %-14s %-22s %s\n" "$j" "$(col "$j" 2 | band 2)" "$(col "$j" 3 | band 0)" \
    "$(col "$j" 4 | awk '{ print $1 / 1048576 }' | band 1)" "$(col "$j" 5 | band 0)" \
    "$(col "$j" 6 | awk '{ print $1 / 1048576 }' | band 1)" "$(col "$j" 7 | awk '{ print $1 / 1048576 }' | band 1)" \
    "$(paste <(col "$j" 2) <(col "$j" 11) | awk '{ print $1 / $2 }' | band 2)" \
    "$(paste <(col "$j" 2) <(col "$j" 12) | awk '{ print $1 / $2 }' | band 2)"
done
echo "files worse (all runs): $(awk '{ s += $9 } END { print s + 0 }' "$work/runs"); exit statuses (status×runs) -j 1: $(col 1 10 | sort | uniq -c | awk '{ printf "%s×%s ", $2, $1 }')/ -j 2: $(col 2 10 | sort | uniq -c | awk '{ printf "%s×%s ", $2, $1 }')"
echo "floor (O_DIRECT copy of the bytes moved, same device, same round): $(col 2 11 | band 2) s"
echo "extent floor (O_DIRECT reads of the moved source extents, $(col 2 13 | band 0) requests of $(col 2 14 | awk '{ print $1 / 1048576 }' | band 1) MiB, + sequential write, same device, same round): $(col 2 12 | band 3) s"
# Pairs in run order: round r's -j 1 and -j 2 runs are rows 2r+1 and 2r+2 in some order.
echo "speed-up time(-j 1) / time(-j 2), per pair: $(awk '{ t[$1] = $2 } NR % 2 == 0 { print t[1] / t[2] }' "$work/runs" | band 2) (goal >= 1.8)"
echo "time(-j 2) / floor: $(paste <(col 2 2) <(col 2 11) | awk '{ print $1 / $2 }' | band 2) (goal <= 1.3)"
hz=$(getconf CLK_TCK)
for j in 1 2; do
  echo "-j $j: CPUs busy (of $(nproc)) $(paste <(col "$j" 15) <(col "$j" 2) | awk -v hz="$hz" '{ print $1 / hz / $2 }' | band 2), device busy $(paste <(col "$j" 16) <(col "$j" 2) | awk '{ print 100 * $1 / 1000 / $2 }' | band 0) % of the run"
done
echo "time(-j 2) / extent floor: $(paste <(col 2 2) <(col 2 12) | awk '{ print $1 / $2 }' | band 2); time(-j 1) / extent floor: $(paste <(col 1 2) <(col 1 12) | awk '{ print $1 / $2 }' | band 2)"
