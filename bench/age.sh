#!/usr/bin/env bash
# Populate throughput: `fragkit age paf` (threaded creator, buffered 1 MiB writes, syncfs at
# the end) against fio sequential buffered writes of the same files (same count, size and
# threads, end_fsync) on the same scratch file system, in one run. Prints the ratio.
# Goal: age paf >= 80% of fio. Needs root (scratch file systems) and fio (scripts/install-deps).
set -euo pipefail
cd "$(dirname "$0")/.."
FS=${FS:-ext4}
SIZE=${SIZE:-1G}
FILE=${FILE:-8M}
FILL=${FILL:-50}
THREADS=${THREADS:-2}
cargo build --release -q
B=target/release/fragkit
command -v fio >/dev/null || { echo "bench/age.sh: fio not installed (run scripts/install-deps)" >&2; exit 1; }
MP=$($B scratch create --fs "$FS" --size "$SIZE" 2>/dev/null)
trap '$B scratch destroy "$MP" >/dev/null 2>&1 || true' EXIT

# fragkit: one generation, nothing deleted.
sync; echo 3 > /proc/sys/vm/drop_caches
paf_json=$($B age paf "PAF:${FILL}.0:1@${FILE}" --target "$MP" --threads "$THREADS" --format json)
read -r files paf_bps < <(python3 -c 'import json,sys; g=json.loads(sys.argv[1])["generations"][0]; print(g["files_written"], g["populate_bytes_per_second"])' "$paf_json")
rm -rf "$MP/paf"; sync; fstrim "$MP" 2>/dev/null || true

# fio: the same files, split over the same number of threads.
per_job=$(( (files + THREADS - 1) / THREADS ))
file_bytes=$(numfmt --from=iec "$FILE")
mkdir -p "$MP/fio"
sync; echo 3 > /proc/sys/vm/drop_caches
fio_json=$(fio --name=populate --directory="$MP/fio" --rw=write --bs=1M --ioengine=psync \
  --direct=0 --numjobs="$THREADS" --nrfiles="$per_job" --filesize="$file_bytes" \
  --size=$(( per_job * file_bytes )) --file_service_type=sequential --create_serialize=0 \
  --end_fsync=1 --group_reporting --output-format=json)
fio_bps=$(python3 -c 'import json,sys; j=json.loads(sys.argv[1])["jobs"][0]["write"]; print(j["io_bytes"]/(j["runtime"]/1000.0))' "$fio_json")

python3 - "$FS" "$files" "$FILE" "$THREADS" "$paf_bps" "$fio_bps" <<'PY'
import sys
fs, files, size, threads, paf, fio = sys.argv[1:]
paf, fio = float(paf), float(fio)
print(f"{fs}: {files} files of {size}, {threads} threads")
print(f"  fragkit age paf populate: {paf/2**20:8.1f} MiB/s")
print(f"  fio sequential buffered : {fio/2**20:8.1f} MiB/s")
print(f"  ratio age paf / fio     : {paf/fio:8.2f}  (goal >= 0.80)")
PY
