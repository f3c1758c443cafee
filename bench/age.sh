#!/usr/bin/env bash
# Populate throughput: `fragkit age paf` (threaded creator, buffered 1 MiB writes, syncfs at
# the end) against fio sequential buffered writes of the same files (same count, size and
# threads, end_fsync) on the same scratch file system, in one run. Prints the ratio.
# Goal: age paf >= 80% of fio. Needs root (scratch file systems) and fio (scripts/install-deps).
set -euo pipefail
# One line naming what failed, instead of a silent exit.
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: \`$BASH_COMMAND\` failed with status $?" >&2' ERR
cd "$(dirname "$0")/.."
# Pairs: ROUNDS rounds (default 7), alternating which tool goes first; the figure is the
# median of the per-round ratios with min..max. Each run's bytes written to the device
# (/sys/block/LOOP/stat, sectors written, after syncfs) are printed per tool: equal bytes =
# the same work. Physical floor: none printed (a loop device over a file; the ceiling is the
# page cache and the host disk).
# Usage (root): [FS=ext4 SIZE=1G FILE=8M FILL=50 THREADS=2 ROUNDS=7] bench/age.sh
FS=${FS:-ext4}
SIZE=${SIZE:-1G}
FILE=${FILE:-8M}
FILL=${FILL:-50}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-7}
cargo build --release -q
B=target/release/fragkit
command -v fio >/dev/null || { echo "bench/age.sh: fio not installed (run scripts/install-deps)" >&2; exit 1; }
MP=$($B scratch create --fs "$FS" --size "$SIZE" 2>/dev/null)
trap '$B scratch destroy "$MP" >/dev/null 2>&1 || true' EXIT

loopdev=$(findmnt -n -o SOURCE --target "$MP")
wstat=/sys/block/$(basename "$loopdev")/stat
written() { awk '{ printf "%.0f\n", $7 * 512 }' "$wstat"; } # sectors written

run_paf() { # -> "bytes_per_s device_bytes files"
  sync; echo 3 > /proc/sys/vm/drop_caches
  local w0 j
  w0=$(written)
  j=$($B age paf "PAF:${FILL}.0:1@${FILE}" --target "$MP" --threads "$THREADS" --format json)
  sync
  python3 -c 'import json,sys; g=json.loads(sys.argv[1])["generations"][0]; print(g["populate_bytes_per_second"], int(sys.argv[3]) - int(sys.argv[2]), g["files_written"])' "$j" "$w0" "$(written)"
  rm -rf "$MP/paf"; sync; fstrim "$MP" 2>/dev/null || true
}
run_fio() { # FILES -> "bytes_per_s device_bytes"
  local per_job=$(( ($1 + THREADS - 1) / THREADS )) file_bytes w0 j
  file_bytes=$(numfmt --from=iec "$FILE")
  mkdir -p "$MP/fio"
  sync; echo 3 > /proc/sys/vm/drop_caches
  w0=$(written)
  j=$(fio --name=populate --directory="$MP/fio" --rw=write --bs=1M --ioengine=psync \
    --direct=0 --numjobs="$THREADS" --nrfiles="$per_job" --filesize="$file_bytes" \
    --size=$(( per_job * file_bytes )) --file_service_type=sequential --create_serialize=0 \
    --end_fsync=1 --group_reporting --output-format=json)
  sync
  python3 -c 'import json,sys; j=json.loads(sys.argv[1])["jobs"][0]["write"]; print(j["io_bytes"]/(j["runtime"]/1000.0), int(sys.argv[3]) - int(sys.argv[2]))' "$j" "$w0" "$(written)"
  rm -rf "$MP/fio"; sync; fstrim "$MP" 2>/dev/null || true
}

# The file count comes from the first fragkit run (PaF plans it from the capacity).
read -r _ _ files < <(run_paf)
RES=$(mktemp)
for ((r = 0; r < ROUNDS; r++)); do
  if ((r % 2 == 0)); then
    read -r pb pd _ < <(run_paf); read -r fb fd < <(run_fio "$files")
  else
    read -r fb fd < <(run_fio "$files"); read -r pb pd _ < <(run_paf)
  fi
  echo "$pb $pd $fb $fd" >>"$RES"
done
python3 - "$FS" "$files" "$FILE" "$THREADS" "$RES" <<'PY'
import sys, statistics
fs, files, size, threads, path = sys.argv[1:]
rows = [list(map(float, l.split())) for l in open(path) if l.strip()]
med = statistics.median
ratios = [p / f for p, _, f, _ in rows]
print(f"{fs}: {files} files of {size}, {threads} threads, n = {len(rows)} alternating pairs")
print(f"  fragkit age paf populate: {med([r[0] for r in rows]) / 2**20:8.1f} MiB/s   device wrote {med([r[1] for r in rows]) / 2**20:8.1f} MiB per run (median)")
print(f"  fio sequential buffered : {med([r[2] for r in rows]) / 2**20:8.1f} MiB/s   device wrote {med([r[3] for r in rows]) / 2**20:8.1f} MiB per run (median)")
print(f"  ratio age paf / fio     : {med(ratios):8.2f}  ({min(ratios):.2f}..{max(ratios):.2f}, median of per-pair ratios; goal >= 0.80)")
PY
rm -f "$RES"
