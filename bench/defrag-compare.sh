#!/usr/bin/env bash
# FragPicker's comparison on one aged image, copied per method: the 4 workloads
# {seq read, stride read, seq update, stride update} x {none, bypass, pick, full, conv}
# where conv is the file system's own tool (ext4: e4defrag; xfs: xfs_fsr; btrfs:
# `btrfs filesystem defragment`, also with -t 128K). Per cell: bytes the defrag wrote as
# counted by the device, its runtime, the workload's device read requests and MB/s after,
# and the workload's MB/s while the defrag runs (interference).
# ROUNDS rounds per workload (default 5), each on fresh copies, the method that leads
# rotating each round (none first in round 0, bypass first in round 1, ...). The MB/s and
# time columns are medians with min–max and n; defrag_MB and reads_after are the exact
# figures of round 0 (the device counts them; they do not vary with load).
# Usage (root): bench/defrag-compare.sh [ext4|xfs|btrfs] [FILE_MIB] [FRAG_KIB] [ROUNDS]
set -euo pipefail
# One line naming what failed, instead of a silent exit.
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: \`$BASH_COMMAND\` failed with status $?" >&2' ERR
cd "$(dirname "$0")/.."
fs=${1:-ext4}; file_mib=${2:-128}; frag_kib=${3:-16}; rounds=${4:-5}
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 ]] || { echo "bench/defrag-compare.sh: ROUNDS: expected a number >= 1, got '$rounds'" >&2; exit 2; }
# shellcheck source=bench/lib.sh
source bench/lib.sh # band, first_of
defrag_bench_begin defrag-compare.sh

# 1. The aged image: one file of FILE_MIB in FRAG_KIB fragments, made once.
mkfs_args=""; [[ $fs == ext4 ]] && mkfs_args="-m 0"
aged=$($fk scratch create --fs "$fs" --size $((file_mib * 4 + 512))M --dir "$work/aged" --mkfs-args "$mkfs_args" 2>/dev/null)
agedloop=$(findmnt -n -o SOURCE "$aged")
[[ $fs == ext4 ]] && echo 0 > "/sys/fs/ext4/$(basename "$agedloop")/reserved_clusters"
echo "aging: $file_mib MiB in $frag_kib KiB fragments on $fs ..." >&2
if [[ $fs == btrfs ]]; then  # CoW: interleaved direct appends fragment it
  python3 - "$aged" $((file_mib << 20)) $((frag_kib << 10)) <<'PY'
import mmap, os, sys
mp, size, frag = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
buf = mmap.mmap(-1, frag); buf.write(os.urandom(frag))
fds = [os.open(os.path.join(mp, n), os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644) for n in ("data", "spacer")]
for off in range(0, size, frag):
    for fd in fds: os.pwrite(fd, buf, off)
for fd in fds: os.fsync(fd); os.close(fd)
os.unlink(os.path.join(mp, "spacer"))
PY
else
  python3 bench/fragment.py "$aged" "$aged/data" $((file_mib << 20)) $((frag_kib << 10))
fi
sync
$fk scan --summary-only "$aged/data" | sed -n 1,3p >&2
image=$(ls "$work"/aged/*.img)
umount "$aged"

stat_field() { awk -v f="$2" '{print $f}' "/sys/block/$1/stat"; }  # 1 reads, 5 writes, 7 sectors written
fio_args() { # workload file -> fio arguments for FragPicker's four workloads
  local pattern
  case $1 in
    seqread) pattern=read ;;
    strideread) pattern=read:128k ;;   # 128 KiB read, 128 KiB skipped
    sequpdate) pattern=write ;;        # overwrite in place
    strideupdate) pattern=write:128k ;;
  esac
  # Strided jobs move half the bytes once over the file (fio would otherwise wrap around
  # and read the skipped half too).
  local io=$file_mib
  [[ $1 == stride* ]] && io=$((file_mib / 2))
  echo --name=w --filename="$2" --bs=128k --direct=1 --ioengine=psync --iodepth=1 \
    --size="${file_mib}M" --io_size="${io}M" --overwrite=1 --rw="$pattern"
}
# fio prefixes "fio: terminating on signal 2" to its JSON when interrupted: skip to the '{'.
mbps() { python3 -c 'import json,sys; t=open(sys.argv[1]).read(); j=json.loads(t[t.index("{"):])["jobs"][0]; b=j["read"]["bw_bytes"]+j["write"]["bw_bytes"]; print(f"{b/1e6:.1f}")' "$1"; }
profile_for() { # synthetic FragPicker-style profile of the workload's accesses (what trace sees)
  python3 - "$1" "$2" $((file_mib << 20)) <<'PY'
import json, os, sys
wl, path, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
st = os.stat(path)
step = 256 << 10 if wl.startswith("stride") else 128 << 10
key = "writes" if wl.endswith("update") else "reads"
ranges = [{"offset": o, "length": 128 << 10, "reads": 0, "writes": 0, key: 1} for o in range(0, size, step)]
print(json.dumps({"version": 1, "kind": "fragkit-trace-profile", "files": [{"path": path,
  "dev": f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}", "ino": st.st_ino, "block_size": 4096, "ranges": ranges}]}))
PY
}
conv_cmd() {
  case $fs in
    ext4) echo "e4defrag $1" ;;
    xfs) echo "xfs_fsr $1" ;;
    btrfs) echo "btrfs filesystem defragment -f $1" ;;
  esac
}

methods=(none bypass pick full conv)
[[ $fs == btrfs ]] && methods+=(conv-t128k)
cell() { # cell WORKLOAD METHOD: one round of one cell, a line appended to $work/cells
  local wl=$1 m=$2 f dev cmd fiopid during w0 w1 t0 t1 written r0 r1 bw
  cp --sparse=always "$image" "$work/copy.img"
  loopdev=$(losetup --find --show "$work/copy.img")
  mount "$loopdev" "$mnt"
  dev=$(basename "$loopdev")
  f=$mnt/data
  case $m in
    none) cmd=(true) ;;
    bypass) cmd=("$fk" defrag --mode bypass --io-size 128K "$f") ;;
    pick) profile_for "$wl" "$f" > "$work/profile.json"; cmd=("$fk" defrag --mode pick --profile "$work/profile.json" --io-size 128K "$f") ;;
    full) cmd=("$fk" defrag --mode full "$f") ;;
    conv) read -r -a cmd <<< "$(conv_cmd "$f")" ;;
    conv-t128k) cmd=(btrfs filesystem defragment -f -t 128K "$f") ;;
  esac
  # Interference: the workload runs (time-based) for as long as the defrag does.
  sync; echo 3 > /proc/sys/vm/drop_caches
  # shellcheck disable=SC2046
  fio $(fio_args "$wl" "$f") --time_based --runtime=600 --output-format=json --output="$work/during.json" > /dev/null 2>&1 &
  fiopid=$!
  sleep 0.5
  "${cmd[@]}" > /dev/null 2>&1 || true
  sleep 0.5
  kill -INT $fiopid; wait $fiopid || true
  during=$(mbps "$work/during.json")
  umount "$mnt"; losetup -d "$loopdev"; loopdev=""
  # The defrag alone on a fresh copy: bytes the device wrote for it, and its runtime.
  cp --sparse=always "$image" "$work/copy.img"
  loopdev=$(losetup --find --show "$work/copy.img"); mount "$loopdev" "$mnt"; dev=$(basename "$loopdev")
  if [[ $m == pick ]]; then profile_for "$wl" "$f" > "$work/profile.json"; fi
  sync; w0=$(stat_field "$dev" 7); t0=$(date +%s.%N)
  "${cmd[@]}" > /dev/null
  sync; t1=$(date +%s.%N); w1=$(stat_field "$dev" 7)
  written=$(( (w1 - w0) * 512 ))
  # The workload after: device read requests and MB/s (extent map warm, so the device
  # counts data requests only).
  sync; echo 3 > /proc/sys/vm/drop_caches
  $fk scan --format json "$f" > /dev/null
  r0=$(stat_field "$dev" 1)
  # shellcheck disable=SC2046
  fio $(fio_args "$wl" "$f") --output-format=json --output="$work/after.json" > /dev/null 2>&1
  r1=$(stat_field "$dev" 1)
  bw=$(mbps "$work/after.json")
  echo "$wl $m $written $(echo "$t1 - $t0" | bc -l) $((r1 - r0)) $bw $during" >>"$work/cells"
  umount "$mnt"; losetup -d "$loopdev"; loopdev=""
}
: >"$work/cells"
k=${#methods[@]}
printf "%-13s %-10s %10s %-26s %11s %-26s %s\n" workload method "defrag_MB" "time_s" "reads_after" "MB/s_after" "MB/s_during"
echo "(time_s and MB/s: median (min–max, n) over $rounds rounds; defrag_MB, reads_after: round 0, exact device counts)"
for wl in seqread strideread sequpdate strideupdate; do
  for ((r = 0; r < rounds; r++)); do
    lead=$(first_of "$r" "$k")
    for ((j = 0; j < k; j++)); do cell "$wl" "${methods[$(((lead + j) % k))]}"; done
  done
  for m in "${methods[@]}"; do
    col() { awk -v w="$wl" -v m="$m" -v c="$1" '$1 == w && $2 == m { print $c }' "$work/cells"; }
    printf "%-13s %-10s %10.1f %-26s %11d %-26s %s\n" "$wl" "$m" "$(col 3 | sed -n 1p | awk '{ print $1 / 1e6 }')" \
      "$(col 4 | band 2)" "$(col 5 | sed -n 1p)" "$(col 6 | band 1)" "$(col 7 | band 1)"
  done
done
echo "floor: full and conv rewrite the whole file, so their defrag_MB cannot go below $((file_mib * 1048576 / 1000000)) MB; the MB/s ceiling (a contiguous read of the device) is not measured here"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
