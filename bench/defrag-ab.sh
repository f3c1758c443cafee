#!/usr/bin/env bash
# Two fragkit builds on the same defrag work: clones of bench/fragpicker-compare.sh's aged
# ext4 (2 GiB, PAF:85.50@64K, 4 x 128 MiB FragPicker-synthetic files; made here when
# missing), `fragkit defrag --mode MODE --io-size 128K` under `fragkit bench writes`,
# builds alternating per round (A B, then B A, ...). Per run: exit status, wall seconds,
# device bytes/requests written and read, extents after (scan), device read requests of
# a sequential 128 KiB O_DIRECT read of the 4 files (FragPicker's read_seq, done with dd)
# with caches dropped, and sha256 against the aged image.
# Usage (root): bench/defrag-ab.sh FRAGKIT_A FRAGKIT_B [ROUNDS] [MODE]
#   ROUNDS (default 7) pairs; MODE (default bypass): pick needs a profile, use
#   bench/fragpicker-compare.sh for it. IMAGE_DIR (default /dev/shm) holds the image.
# Timing: run it as `flock /work/bench.lock nice -n -15 ionice -c1 bench/defrag-ab.sh ...`.
set -euo pipefail
# One line naming what failed, instead of a silent exit.
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: \`$BASH_COMMAND\` failed with status $?" >&2' ERR
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh # band, fp_aged_image
[[ $(id -u) -eq 0 ]] || { echo "bench/defrag-ab.sh: needs root (loop devices, MOVE_EXT)" >&2; exit 1; }
[[ $# -ge 2 && -x $1 && -x $2 ]] || { echo "bench/defrag-ab.sh: expected two fragkit binaries, got '${1:-}' '${2:-}'" >&2; exit 2; }
rounds=${3:-7}; mode=${4:-bypass}
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 ]] || { echo "bench/defrag-ab.sh: ROUNDS: expected a number >= 1, got '$rounds'" >&2; exit 2; }
[[ $mode == bypass || $mode == full ]] || { echo "bench/defrag-ab.sh: MODE: expected bypass or full, got '$mode'" >&2; exit 2; }
work=$(mktemp -d /tmp/fragkit-defrag-ab.XXXXXX)
# Copies: a build during the run must not change the binaries being measured.
cp "$1" "$work/fragkit-A"; cp "$2" "$work/fragkit-B"
image_dir=${IMAGE_DIR:-/dev/shm}
image=$image_dir/fragpicker-aged.img
clone=$image_dir/defrag-ab-clone.img
mnt=$work/mnt; mkdir "$mnt"
loopdev=""
cleanup() {
  mountpoint -q "$mnt" && umount "$mnt"
  [[ -n $loopdev ]] && losetup -d "$loopdev" 2>/dev/null || true
  rm -rf "$work" "$clone"
}
trap cleanup EXIT
attach() { loopdev=$(losetup --find --show "$1"); mount ${2:+-o "$2"} "$loopdev" "$mnt"; dev=$(basename "$loopdev"); }
detach() { umount "$mnt"; losetup -d "$loopdev"; loopdev=""; }

# The aged image, as bench/fragpicker-compare.sh makes it (and shares it).
fp_aged_image "$image" "$work/fragkit-A"
attach "$image" ro,noload
(cd "$mnt/work" && sha256sum -- *) > "$work/sums"
detach

run() { # run A|B: one clone, one timed defrag, the figures after.
  local fk=$work/fragkit-$1 files ext r0 r1 ok line
  cp --sparse=always "$image" "$clone"
  attach "$clone"
  files=$(find "$mnt/work" -type f | sort | tr '\n' ' ')
  "$fk" bench writes --device "$dev" -f csv -- "$fk" defrag --mode "$mode" --io-size 128K --format json "$mnt/work" > "$work/w.csv" 2> "$work/out.$1" || true
  [[ -s $work/w.csv ]] || { tail -5 "$work/out.$1" >&2; exit 1; }
  line=$(python3 -c 'import csv, sys; r = next(csv.DictReader(open(sys.argv[1]))); print(r["exit_status"], r["seconds"], r["write_bytes"], r["writes"], r["read_bytes"], r["reads"])' "$work/w.csv")
  sync; echo 3 > /proc/sys/vm/drop_caches
  # shellcheck disable=SC2086 # $files: one word per file
  ext=$("$fk" scan --format csv $files | awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "fragments") c = i; next } { s += $c } END { print s }')
  r0=$(awk '{print $1}' "/sys/block/$dev/stat")
  for f in $files; do dd if="$f" of=/dev/null bs=128K iflag=direct status=none; done
  r1=$(awk '{print $1}' "/sys/block/$dev/stat")
  ok=$(cd "$mnt/work" && sha256sum --quiet -c "$work/sums" > /dev/null 2>&1 && echo intact || echo CHANGED)
  echo "$1 $line $ext $((r1 - r0)) $ok" | tee -a "$work/rows"
  detach
}
: > "$work/rows"
echo "start $(date -u +%FT%TZ), $(uptime)"
echo "build exit seconds write_bytes writes read_bytes reads extents reads_after data"
for ((r = 0; r < rounds; r++)); do
  if (( r % 2 == 0 )); then run A; run B; else run B; run A; fi
done
echo "end $(date -u +%FT%TZ), $(uptime)"
for b in A B; do
  echo "$b wall seconds: $(awk -v b=$b '$1 == b { print $3 }' "$work/rows" | band 2)"
done
# Per round, B / A (rounds are paired in order).
paste <(awk '$1 == "A" { print $3 }' "$work/rows") <(awk '$1 == "B" { print $3 }' "$work/rows") |
  awk '{ print $2 / $1 }' | { echo "wall time B / A: $(band 2)"; }
