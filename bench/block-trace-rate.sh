#!/usr/bin/env bash
# Does `fragkit trace --block` keep up at 200k requests/s (issue 14 item 1)? fio issues
# 4 KiB O_DIRECT random reads (io_uring, JOBS=2 jobs x QD=64) for SECONDS on a fast
# blk-mq device, paced at RATE requests/s with --rate_iops (RATE 0: unpaced, as fast as
# the device goes), while fragkit records every block request on it (issue + complete =
# 2 events per request). Each round runs fio alone (untraced) and under the tracer, in
# alternating order, PAIRS rounds; prints per run fio's rate, the requests in the trace and
# the events the recorder lost (ring buffer full), then the medians and the traced/untraced
# rate ratio. Needs root; run it as `flock /work/bench.lock nice -n -15 ionice -c1 ...`.
#
# DEVICE picks the device under test:
#   zram (default): a loop device with direct I/O over /dev/zram0 (lz4, 1 GiB), set up
#        here. zram itself is bio-based (no block_rq_* events); the loop device on top is
#        blk-mq, so block:block_rq_issue/complete fire for it. zram0 is reset first: it
#        must not be swap, mounted or held. Absent or busy zram: says so, falls back to shm.
#   shm: a loop device over a 1 GiB file in /dev/shm (buffered loop; DIO=1 for direct).
#
# Usage: bench/block-trace-rate.sh [RATE] [SECONDS]
#   env: DEVICE=zram|shm  PAIRS=N (default 1)  JOBS  QD  DIO
set -euo pipefail
# One line naming what failed, instead of a silent exit.
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: \`$BASH_COMMAND\` failed with status $?" >&2' ERR
cd "$(dirname "$0")/.."
source bench/lib.sh
[[ $(id -u) -eq 0 ]] || { echo "bench/block-trace-rate.sh: needs root" >&2; exit 1; }
RATE=${1:-200000}
SECONDS_=${2:-10}
PAIRS=${PAIRS:-1}
JOBS=${JOBS:-2}
QD=${QD:-64}
DEVICE=${DEVICE:-zram}
[[ $RATE =~ ^[0-9]+$ && $SECONDS_ =~ ^[0-9]+$ && $PAIRS =~ ^[1-9][0-9]*$ ]] || {
    echo "bench/block-trace-rate.sh: RATE and SECONDS must be whole numbers, PAIRS >= 1" >&2
    exit 2
}
cargo build --release --quiet
FRAGKIT=$PWD/target/release/fragkit
out=$(mktemp -d)
img=""
dev=""
zram=""
cleanup() {
    [[ -n $dev ]] && losetup -d "$dev" 2>/dev/null || true
    if [[ -n $zram ]]; then
        # Free its memory; leave it configured as it was found (algorithm and size, empty).
        echo 1 > /sys/block/zram0/reset 2>/dev/null || true
        if [[ ${zram_was[1]} != 0 ]]; then
            echo "${zram_was[0]}" > /sys/block/zram0/comp_algorithm 2>/dev/null || true
            echo "${zram_was[1]}" > /sys/block/zram0/disksize 2>/dev/null || true
        fi
    fi
    [[ -n $img ]] && rm -f "$img"
    rm -rf "$out"
}
trap cleanup EXIT

# Why zram0 cannot be used, or nothing when it can.
zram_unusable() {
    if [[ ! -e /sys/block/zram0 ]]; then
        modprobe zram num_devices=1 2>/dev/null || true
        [[ -e /sys/block/zram0 ]] || { echo "no /dev/zram0 (zram not built in, modprobe zram failed)"; return; }
    fi
    if grep -q '^/dev/zram0 ' /proc/swaps; then echo "/dev/zram0 is swap"; return; fi
    if grep -q '^/dev/zram0 ' /proc/mounts; then echo "/dev/zram0 is mounted"; return; fi
    if [[ -n $(ls /sys/block/zram0/holders 2>/dev/null) ]]; then echo "/dev/zram0 is held by $(ls /sys/block/zram0/holders)"; return; fi
    if [[ -n $(losetup -j /dev/zram0) ]]; then echo "/dev/zram0 is backing a loop device already"; return; fi
}

if [[ $DEVICE == zram ]]; then
    why=$(zram_unusable)
    if [[ -n $why ]]; then
        echo "zram unusable: $why; falling back to a loop device over /dev/shm" >&2
        DEVICE=shm
    else
        zram_was=("$(sed 's/.*\[\(.*\)\].*/\1/' /sys/block/zram0/comp_algorithm)" "$(cat /sys/block/zram0/disksize)")
        echo 1 > /sys/block/zram0/reset
        zram=1
        # lz4: the fastest compressor the kernel offers here; the pages fio reads are
        # never written, so they cost no decompression either way.
        echo lz4 > /sys/block/zram0/comp_algorithm
        echo 1G > /sys/block/zram0/disksize
        dev=$(losetup --find --show --direct-io=on /dev/zram0)
    fi
elif [[ $DEVICE != shm ]]; then
    echo "bench/block-trace-rate.sh: DEVICE=$DEVICE: expected zram or shm" >&2
    exit 2
fi
if [[ $DEVICE == shm ]]; then
    img=$(mktemp /dev/shm/fragkit-blkrate.XXXXXX)
    truncate -s 1G "$img"
    dd if=/dev/zero of="$img" bs=1M count=1024 conv=notrunc status=none
    # Buffered by default (the loop worker copies from tmpfs pages: faster than dio here).
    if [[ ${DIO:-0} == 1 ]]; then
        dev=$(losetup --find --show --direct-io=on "$img")
    else
        dev=$(losetup --find --show "$img")
    fi
fi
name=$(basename "$dev")
echo "device $dev over ${zram:+/dev/zram0 (lz4, 1 GiB)}${img:-} ($(cat /sys/block/$name/loop/dio) dio," \
    "scheduler $(sed 's/.*\[\(.*\)\].*/\1/' /sys/block/$name/queue/scheduler))," \
    "fio $JOBS jobs x QD $QD, rate ${RATE/#0/unpaced}, ${SECONDS_} s, $PAIRS pairs"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

fio_cmd() {
    local pace=()
    [[ $RATE -gt 0 ]] && pace=(--rate_iops=$((RATE / JOBS)))
    # fio's cheapest io_uring setup (registered file, fixed buffers, no random map, no
    # per-request timestamps): on 2 cores the load generator's own CPU is what the device
    # and the tracer do not get.
    echo nice -n -15 fio --name=rate --filename="$dev" --rw=randread --bs=4k --direct=1 \
        --ioengine=io_uring --iodepth="$QD" --numjobs="$JOBS" --group_reporting "${pace[@]}" \
        --registerfiles --fixedbufs --norandommap --randrepeat=0 --gtod_reduce=1 \
        --time_based --runtime="$SECONDS_" --output-format=json --output="$out/fio.json"
}
fio_rate() { python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["jobs"][0]["read"]["iops"]))' "$out/fio.json"; }
reads_of() { awk "\$3 == \"$name\" { print \$4 }" /proc/diskstats; }

untraced() {
    local before after
    before=$(reads_of)
    $(fio_cmd)
    after=$(reads_of)
    local r
    r=$(fio_rate)
    echo "$r" >> "$out/untraced"
    printf '  untraced: fio %d requests/s, device reads %d\n' "$r" $((after - before))
}
traced() {
    local before after
    before=$(reads_of)
    # shellcheck disable=SC2046
    nice -n -15 "$FRAGKIT" trace --block "$dev" -o "$out/blk.json" -- $(fio_cmd) 2> "$out/fragkit.err" \
        || { cat "$out/fragkit.err" >&2; exit 1; }
    after=$(reads_of)
    local r
    r=$(fio_rate)
    echo "$r" >> "$out/traced"
    python3 - "$out/blk.json" "$r" $((after - before)) "$out" <<'PY'
import re, sys
# A regular expression over the trace's bytes: json.load of millions of requests takes
# longer than the run (the trace holds one object per request, fields in this order).
raw = open(sys.argv[1], "rb").read()
fio_rate, dev_reads, out = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
dropped = int(re.search(rb'"dropped":(\d+)', raw[:200]).group(1))
first, last, n = None, 0, 0
for m in re.finditer(rb'"issue_ns":(\d+),"complete_ns":(\d+),"sector":\d+,"bytes":\d+,"op":"read"', raw):
    i, c = int(m.group(1)), int(m.group(2))
    first = i if first is None else min(first, i)
    last = max(last, c)
    n += 1
span = (last - first) / 1e9
rate = n / span
open(out + "/trace_rate", "a").write(f"{rate:.0f}\n")
open(out + "/drops", "a").write(f"{dropped}\n")
print(f"  traced:   fio {fio_rate} requests/s, device reads {dev_reads}; trace {n} reads "
      f"over {span:.2f} s = {rate:.0f} requests/s, dropped events {dropped}")
PY
    rm -f "$out/blk.json"
}

for ((i = 0; i < PAIRS; i++)); do
    echo "round $((i + 1)) (load $(cut -d' ' -f1 /proc/loadavg))"
    if [[ $(first_of "$i" 2) == 0 ]]; then untraced; traced; else traced; untraced; fi
done
paste "$out/traced" "$out/untraced" | awk '{ print $1 / $2 }' > "$out/ratio"
echo "untraced fio requests/s:   $(band 0 < "$out/untraced")"
echo "traced fio requests/s:     $(band 0 < "$out/traced")"
echo "requests/s in the trace:   $(band 0 < "$out/trace_rate")"
echo "dropped events per run:    $(band 0 < "$out/drops") (sum $(paste -sd+ "$out/drops" | bc))"
echo "traced/untraced rate:      $(band 3 < "$out/ratio")"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
