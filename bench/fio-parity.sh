#!/usr/bin/env bash
# fragkit's I/O engine against fio on the same jobs, on a file in a scratch ext4 file system
# (a loop device over an image in RAM). Goal per job: fragkit MB/s / fio MB/s in 0.95..1.05
# with the device's request and byte counts equal.
#
# Jobs: sequential and random O_DIRECT reads, 128 KiB and 4 KiB requests, queue depth 1
# and 32, through io_uring in both tools (and psync at QD1).
#
# Same work: both tools issue the same number of requests N per run (fragkit --count N,
# fio --io_size=N x bs, looping over the region), N chosen so one run lasts about RUNTIME
# seconds; random patterns are a fresh random permutation of the region per pass in both
# (fio's random map, fragkit's permutation). The device's own counters
# (/sys/block/LOOP/stat: reads completed, merges, sectors) are read around every run and
# printed per tool, so a difference in merging or request sizes shows.
# Each peer's best setup for these jobs: fio's io_uring engine with registered buffers
# (fixedbufs), as fragkit registers its buffers; both submit each request as it is queued
# (fio's default iodepth_batch_submit=1), so neither tool's requests are merged by the
# block layer's plug and the device sees the requested size.
# Pairs: REPS pairs per job, alternating which tool goes first; the figure is the median of
# the per-pair ratios with min..max. A control row runs fio against itself.
# Idle wake-ups: the halts column is the CPUs' entries into a halting idle state (cpuidle
# states other than POLL, summed over CPUs) per request over the tool's whole run, start-up
# included (not measured apart from the I/O). At QD1 on an idle
# VM each halt costs an exit to the hypervisor and an IPI to wake the vCPU again, so a
# tool that halts twice per request is slower for that reason alone (docs/bench.md).
#
#   bench/fio-parity.sh                   # REPS=7, RUNTIME=3, every job
#   REPS=9 RUNTIME=5 bench/fio-parity.sh
#   JOBS=qd1 bench/fio-parity.sh          # only the queue-depth-1 jobs and their control
#   JOBS=qd32 bench/fio-parity.sh         # only the queue-depth-32 jobs and their control
#   PIN=0 JOBS=qd1 bench/fio-parity.sh    # both tools (every thread) on CPU 0 (taskset -c)
#
# Needs root (scratch file system).
set -euo pipefail
# One line naming what failed, instead of a silent exit.
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: \`$BASH_COMMAND\` failed with status $?" >&2' ERR
cd "$(dirname "$0")/.."
if [[ $(id -u) -ne 0 ]]; then
  echo "bench/fio-parity.sh: needs root (scratch file system on a loop device)" >&2
  exit 1
fi
command -v fio >/dev/null || { echo "bench/fio-parity.sh: fio not installed (run scripts/install-deps)" >&2; exit 1; }
REPS=${REPS:-7}
RUNTIME=${RUNTIME:-3}
SIZE=${SIZE:-256M} # region every job reads (loops over it as often as N requires)
# PIN=CPULIST: run both tools under taskset -c CPULIST, the same condition for both (the
# loop device's worker stays unbound: it is the kernel's, not a tool's).
pin=()
if [[ -n ${PIN:-} ]]; then
  command -v taskset >/dev/null || { echo "bench/fio-parity.sh: PIN needs taskset (util-linux)" >&2; exit 2; }
  taskset -c "$PIN" true 2>/dev/null || { echo "bench/fio-parity.sh: PIN=$PIN: expected a CPU list taskset -c accepts" >&2; exit 2; }
  pin=(taskset -c "$PIN")
fi
jobs=(
  "seq 128K 1 uring" "seq 128K 32 uring" "random 128K 1 uring" "random 128K 32 uring"
  "seq 4K 1 uring" "seq 4K 32 uring" "random 4K 1 uring" "random 4K 32 uring"
  "seq 128K 1 psync" "random 4K 1 psync"
)
control=("seq 128K 1 uring" "random 4K 32 uring")
case ${JOBS:-all} in
  all) ;;
  qd1)
    for i in "${!jobs[@]}"; do [[ ${jobs[i]} == *" 1 "* ]] || unset 'jobs[i]'; done
    control=("seq 128K 1 uring")
    ;;
  qd32)
    for i in "${!jobs[@]}"; do [[ ${jobs[i]} == *" 32 "* ]] || unset 'jobs[i]'; done
    control=("random 4K 32 uring")
    ;;
  *)
    echo "bench/fio-parity.sh: JOBS=${JOBS}: expected all, qd1 or qd32" >&2
    exit 2
    ;;
esac

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
loopdev=$(findmnt -n -o SOURCE --target "$mp")
stat_file=/sys/block/$(basename "$loopdev")/stat
devstat() { awk '{ print $1, $2, $3 }' "$stat_file"; } # reads, merges, sectors
# Entries into halting idle states, all CPUs (POLL spins and is not counted).
halts() {
  local d total=0
  for d in /sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*; do
    [[ -r $d/usage && $(<"$d/name") != POLL ]] && total=$((total + $(<"$d/usage")))
  done
  echo "$total"
}

# Each runner prints "MB/s reads merges bytes halts" (MB = 10^6 bytes; device and idle
# deltas over the run).
fio_run() { # rw bs qd engine n
  local rw=$1 bs=$2 qd=$3 engine=$4 n=$5 extra=()
  [[ $engine == io_uring ]] && extra=(--fixedbufs=1)
  local b a mbs h
  b=$(devstat)
  h=$(halts)
  mbs=$("${pin[@]}" fio --name=parity --filename="$file" --rw="$rw" --bs="$bs" --iodepth="$qd" --ioengine="$engine" \
    --direct=1 --size="$SIZE" --io_size=$((n * $(bytes_of "$bs"))) --randrepeat=1 "${extra[@]}" \
    --output-format=terse | awk -F';' 'NR==1 { printf "%.3f\n", $7 * 1024 / 1e6 }')
  a=$(devstat)
  echo "$mbs $(devdelta "$b" "$a") $(($(halts) - h))"
}
fragkit_run() { # pattern bs qd engine n
  local b a mbs h
  b=$(devstat)
  h=$(halts)
  mbs=$("${pin[@]}" $FRAGKIT bench read --pattern "$1" --bs "$2" --qd "$3" --engine "$4" --size "$SIZE" \
    --count "$5" --direct --iterations 1 --no-drop-caches --format csv "$file" |
    awk -F',' 'NR==2 { print $12 }')
  a=$(devstat)
  echo "$mbs $(devdelta "$b" "$a") $(($(halts) - h))"
}
devdelta() { awk -v b="$1" -v a="$2" 'BEGIN { split(b, x, " "); split(a, y, " "); printf "%.0f %.0f %.0f", y[1] - x[1], y[2] - x[2], (y[3] - x[3]) * 512 }'; }
# shellcheck source=bench/lib.sh
source bench/lib.sh # median, minmax
bytes_of() { numfmt --from=iec "$1"; }

printf '%-7s %-5s %-3s %-6s %9s %8s %8s %15s %10s %10s %8s %8s %7s %7s\n' pattern bs qd engine requests "fio MB/s" "fk MB/s" "ratio (min..max)" "fio devreq" "fk devreq" "fio GB" "fk GB" "fio h/r" "fk h/r"
run_job() { # pattern bs qd engine [control]
  local pattern=$1 bs=$2 qd=$3 engine=$4 ctl=${5:-}
  local rw=read fio_engine=io_uring
  [[ $pattern == random ]] && rw=randread
  [[ $engine == psync ]] && fio_engine=psync
  # N: about RUNTIME seconds at the rate a short fio run reaches.
  local probe n
  probe=$(fio_run "$rw" "$bs" "$qd" "$fio_engine" 2000 | cut -d' ' -f1)
  n=$(awk -v mbs="$probe" -v bs="$(bytes_of "$bs")" -v t="$RUNTIME" 'BEGIN { n = mbs * 1e6 / bs * t; if (n < 2000) n = 2000; printf "%d", n }')
  local f=() k=() r=() fr=() kr=() fb=() kb=() fh=() kh=() i x y
  for ((i = 0; i < REPS; i++)); do
    if ((i % 2 == 0)); then
      x=$(fio_run "$rw" "$bs" "$qd" "$fio_engine" "$n")
      if [[ -n $ctl ]]; then y=$(fio_run "$rw" "$bs" "$qd" "$fio_engine" "$n"); else y=$(fragkit_run "$pattern" "$bs" "$qd" "$engine" "$n"); fi
    else
      if [[ -n $ctl ]]; then y=$(fio_run "$rw" "$bs" "$qd" "$fio_engine" "$n"); else y=$(fragkit_run "$pattern" "$bs" "$qd" "$engine" "$n"); fi
      x=$(fio_run "$rw" "$bs" "$qd" "$fio_engine" "$n")
    fi
    read -r a ar am ab ah <<<"$x"
    read -r b br bm bb bh <<<"$y"
    f+=("$a"); k+=("$b"); fr+=("$ar"); kr+=("$br"); fb+=("$ab"); kb+=("$bb")
    fh+=("$(awk -v h="$ah" -v n="$n" 'BEGIN { printf "%.3f", h / n }')")
    kh+=("$(awk -v h="$bh" -v n="$n" 'BEGIN { printf "%.3f", h / n }')")
    r+=("$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4f", b / a }')")
  done
  local label=$engine
  [[ -n $ctl ]] && label="$engine*"
  printf '%-7s %-5s %-3s %-6s %9d %8.1f %8.1f %6.3f (%s) %10s %10s %8.3f %8.3f %7.2f %7.2f\n' "$pattern" "$bs" "$qd" "$label" "$n" \
    "$(printf '%s\n' "${f[@]}" | median)" "$(printf '%s\n' "${k[@]}" | median)" \
    "$(printf '%s\n' "${r[@]}" | median)" "$(printf '%s\n' "${r[@]}" | minmax)" \
    "$(printf '%s\n' "${fr[@]}" | median)" "$(printf '%s\n' "${kr[@]}" | median)" \
    "$(printf '%s\n' "${fb[@]}" | median | awk '{ printf "%.3f", $1 / 1e9 }')" \
    "$(printf '%s\n' "${kb[@]}" | median | awk '{ printf "%.3f", $1 / 1e9 }')" \
    "$(printf '%s\n' "${fh[@]}" | median)" "$(printf '%s\n' "${kh[@]}" | median)"
}
for job in "${jobs[@]}"; do run_job $job; done
for job in "${control[@]}"; do run_job $job control; done
echo "ratio = fragkit MB/s / fio MB/s, median of $REPS alternating pairs (min..max); * = control: fio against itself"
echo "devreq / GB = the loop device's completed read requests and bytes per run (median): equal counts = the same work"
echo "h/r = halting idle entries of all CPUs per request (median): each is a vCPU exit and wake-up; cpuidle driver $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none), guest_halt_poll_ns $(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns 2>/dev/null || echo n/a)"
echo "physical floor: none printed; both read a RAM-backed loop device, so the ceiling is this machine's CPU"
[[ -n ${PIN:-} ]] && echo "both tools ran under taskset -c $PIN"
echo "load average during the run: $(cut -d' ' -f1-3 /proc/loadavg)"
