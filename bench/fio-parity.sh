#!/usr/bin/env bash
# fragkit's I/O engine against fio on the same jobs, side by side in one run, on a file in a
# scratch ext4 file system (a loop device over an image in RAM). Prints fragkit MB/s / fio MB/s per job; the goal
# is 0.95..1.05. Jobs: sequential and random O_DIRECT reads, 128 KiB and 4 KiB requests,
# queue depth 1 and 32, through io_uring in both tools (and psync at QD1).
#
#   bench/fio-parity.sh            # REPS=5 pairs per job, median ratio
#   REPS=9 SIZE=512M bench/fio-parity.sh   # more pairs on a busy machine
#
# Needs root (scratch file system). Both tools read the same file region in the same run;
# the order alternates per repetition so background drift falls on both alike.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) -ne 0 ]]; then
  echo "bench/fio-parity.sh: needs root (scratch file system on a loop device)" >&2
  exit 1
fi
command -v fio >/dev/null || { echo "bench/fio-parity.sh: fio not installed (run scripts/install-deps)" >&2; exit 1; }
REPS=${REPS:-5}
SIZE=${SIZE:-256M}          # region for 128 KiB jobs
SIZE_4K=${SIZE_4K:-32M}     # region for 4 KiB jobs (same request count scale)

cargo build --release -q
FRAGKIT=target/release/fragkit
# The image lives in RAM (tmpfs): other processes dropping the page cache cannot evict it,
# so both tools time the same thing, the I/O path, not a disk that comes and goes.
dir=$(mktemp -d /dev/shm/fragkit-parity.XXXXXX)
info=$($FRAGKIT scratch create --fs ext4 --size 1G --dir "$dir" --format json)
mp=$(sed -n 's/.*"mountpoint": "\(.*\)".*/\1/p' <<<"$info")
trap '$FRAGKIT scratch destroy "$mp" >/dev/null; rmdir "$dir"' EXIT
file="$mp/parity"
fio --name=fill --filename="$file" --size="$SIZE" --rw=write --bs=1M --direct=1 \
  --ioengine=psync --output-format=terse >/dev/null
sync

fio_mbs() { # rw bs qd engine size -> MB/s (decimal)
  fio --name=parity --filename="$file" --rw="$1" --bs="$2" --iodepth="$3" --ioengine="$4" \
    --direct=1 --size="$5" --randrepeat=1 --output-format=terse |
    awk -F';' 'NR==1 { printf "%.3f\n", $7 * 1024 / 1e6 }'
}
fragkit_mbs() { # pattern bs qd engine size -> MB/s (decimal)
  $FRAGKIT bench read --pattern "$1" --bs "$2" --qd "$3" --engine "$4" --size "$5" \
    --direct --iterations 1 --no-drop-caches --format csv "$file" |
    awk -F',' 'NR==2 { print $12 }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '%-8s %-5s %-4s %-7s %12s %12s %8s\n' pattern bs qd engine "fio MB/s" "fragkit MB/s" ratio
jobs=(
  "seq 128K 1 uring" "seq 128K 32 uring" "random 128K 1 uring" "random 128K 32 uring"
  "seq 4K 1 uring" "seq 4K 32 uring" "random 4K 1 uring" "random 4K 32 uring"
  "seq 128K 1 psync" "random 4K 1 psync"
)
for job in "${jobs[@]}"; do
  read -r pattern bs qd engine <<<"$job"
  rw=read; [[ $pattern == random ]] && rw=randread
  fio_engine=io_uring; [[ $engine == psync ]] && fio_engine=psync
  size=$SIZE; [[ $bs == 4K ]] && size=$SIZE_4K
  f=(); k=(); r=()
  for ((i = 0; i < REPS; i++)); do
    if ((i % 2 == 0)); then
      a=$(fio_mbs "$rw" "$bs" "$qd" "$fio_engine" "$size"); b=$(fragkit_mbs "$pattern" "$bs" "$qd" "$engine" "$size")
    else
      b=$(fragkit_mbs "$pattern" "$bs" "$qd" "$engine" "$size"); a=$(fio_mbs "$rw" "$bs" "$qd" "$fio_engine" "$size")
    fi
    f+=("$a"); k+=("$b"); r+=("$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4f", b / a }')")
  done
  printf '%-8s %-5s %-4s %-7s %12.1f %12.1f %8.3f\n' "$pattern" "$bs" "$qd" "$engine" \
    "$(printf '%s\n' "${f[@]}" | median)" "$(printf '%s\n' "${k[@]}" | median)" \
    "$(printf '%s\n' "${r[@]}" | median)"
done
# The noise floor of this machine: fio against itself on the same jobs, same procedure.
for job in "seq 128K 1" "random 4K 32"; do
  read -r pattern bs qd <<<"$job"
  rw=read; [[ $pattern == random ]] && rw=randread
  size=$SIZE; [[ $bs == 4K ]] && size=$SIZE_4K
  r=()
  for ((i = 0; i < REPS; i++)); do
    a=$(fio_mbs "$rw" "$bs" "$qd" io_uring "$size"); b=$(fio_mbs "$rw" "$bs" "$qd" io_uring "$size")
    r+=("$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4f", b / a }')")
  done
  printf '%-8s %-5s %-4s %-7s %12s %12s %8.3f   (control: fio / fio)\n' "$pattern" "$bs" "$qd" uring - - \
    "$(printf '%s\n' "${r[@]}" | median)"
done
echo "ratio = fragkit / fio, median of $REPS back-to-back pairs; goal 0.95..1.05"
echo "control rows: fio against itself; how far they stray from 1.000 is this machine's noise"
echo "load average during the run: $(cut -d' ' -f1-3 /proc/loadavg)"
