#!/usr/bin/env bash
# Does `fragkit trace --block` keep up at 200k requests/s (issue 14 item 1)? A RAM-backed
# loop device (image in /dev/shm) gets fio 4 KiB O_DIRECT random
# reads (io_uring, 2 jobs x QD 64; JOBS, QD, DIO=1 change it) for SECONDS, paced at RATE requests/s with --rate_iops, while
# fragkit records every block request on it (issue + complete = 2 events per request).
# Prints the achieved request rate fio reports, the requests in the trace, and the events
# the recorder lost (ring buffer full). Run with the tracer and fio at nice -n -15 so a busy
# machine does not starve them. Needs root.
# Usage: bench/block-trace-rate.sh [RATE] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $(id -u) -eq 0 ]] || { echo "bench/block-trace-rate.sh: needs root" >&2; exit 1; }
RATE=${1:-200000}
SECONDS_=${2:-10}
cargo build --release --quiet
FRAGKIT=$PWD/target/release/fragkit
img=$(mktemp /dev/shm/fragkit-blkrate.XXXXXX)
out=$(mktemp -d)
dev=""
cleanup() {
    [[ -n $dev ]] && losetup -d "$dev" 2>/dev/null || true
    rm -rf "$img" "$out"
}
trap cleanup EXIT
truncate -s 1G "$img"
dd if=/dev/zero of="$img" bs=1M count=1024 conv=notrunc status=none
# Buffered by default (the loop worker copies from tmpfs pages: faster than dio here).
if [[ ${DIO:-0} == 1 ]]; then
    dev=$(losetup --find --show --direct-io=on "$img")
else
    dev=$(losetup --find --show "$img")
fi
echo "device $dev ($(cat /sys/block/$(basename "$dev")/loop/dio 2>/dev/null || echo ?) dio), load $(cut -d' ' -f1-3 /proc/loadavg)"
nice -n -15 "$FRAGKIT" trace --block "$dev" -o "$out/blk.json" -- \
    nice -n -15 fio --name=rate --filename="$dev" --rw=randread --bs=4k --direct=1 \
        --ioengine=io_uring --iodepth=${QD:-64} --numjobs=${JOBS:-2} --group_reporting --rate_iops=$((RATE / ${JOBS:-2})) --time_based \
        --runtime="$SECONDS_" --output-format=json --output="$out/fio.json" \
    2> "$out/fragkit.err"
cat "$out/fragkit.err"
python3 - "$out/fio.json" "$out/blk.json" <<'PY'
import json, sys
fio = json.load(open(sys.argv[1]))["jobs"][0]["read"]
t = json.load(open(sys.argv[2]))
reqs = [r for r in t["requests"] if r["op"] == "read"]
span = (max(r["complete_ns"] for r in reqs) - min(r["issue_ns"] for r in reqs)) / 1e9
print(f"fio: {fio['total_ios']} reads, {fio['iops']:.0f} requests/s")
print(f"trace: {len(reqs)} reads over {span:.2f} s = {len(reqs)/span:.0f} requests/s; dropped events: {t['dropped']}")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
