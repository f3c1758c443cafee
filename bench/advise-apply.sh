#!/usr/bin/env bash
# advise's predictions against what --apply achieved, on fixed layouts per file system:
# a scratch FS of each kind holds files made by `age layout` (32 KiB pieces a stripe apart,
# 64 KiB pieces 64 KiB apart, 256 KiB pieces 4 MiB apart, 1 MiB pieces 1 MiB apart) and
# one written in one piece; caches are dropped, then `advise --apply --format json` runs.
# Prints per file system: the bytes predicted, moved and written by the device (the
# device's own counter, /sys/block/DEV/stat), and the modeled read time predicted and
# achieved, with the worst per-file error. Modeled figures are exact (no interval); the
# device's write count includes the file system's own metadata and journal writes.
# Usage (root): bench/advise-apply.sh [DEVICE] [FS...]   (default: fast24 ext4 xfs)
set -euo pipefail
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: \`$BASH_COMMAND\` failed with status $?" >&2' ERR
cd "$(dirname "$0")/.."
device=${1:-fast24}; shift || true
systems=("$@"); [[ ${#systems[@]} -gt 0 ]] || systems=(ext4 xfs)
[[ $(id -u) -eq 0 ]] || { echo "bench/advise-apply.sh: needs root (scratch file systems, defrag)" >&2; exit 2; }
cargo build --release --locked -q
fk=$PWD/target/release/fragkit
work=$(mktemp -d /tmp/advise-apply.XXXXXX)
mps=()
cleanup() { for m in "${mps[@]}"; do $fk scratch destroy "$m" >/dev/null 2>&1 || true; done; rm -rf "$work"; }
trap cleanup EXIT
printf '%-5s %-7s %12s %12s %12s %8s %14s %14s %8s %10s\n' FS DEVICE PREDICTED MOVED DEV_WROTE ERR PRED_MS ACHIEVED_MS ERR WORST_FILE
for fs in "${systems[@]}"; do
  mp=$($fk scratch create --fs "$fs" --size 1G --dir "$work/$fs" 2>/dev/null); mps+=("$mp")
  $fk age layout "$mp/worst" --size 32M --frag-size 32K --frag-distance 224K >/dev/null 2>&1
  $fk age layout "$mp/mid" --size 16M --frag-size 64K --frag-distance 64K >/dev/null 2>&1
  $fk age layout "$mp/spread" --size 16M --frag-size 256K --frag-distance 4M >/dev/null 2>&1
  $fk age layout "$mp/big" --size 32M --frag-size 1M --frag-distance 1M >/dev/null 2>&1
  dd if=/dev/urandom of="$mp/flat" bs=1M count=16 status=none conv=fsync
  sync; echo 3 > /proc/sys/vm/drop_caches
  $fk advise "$mp" --device "$device" --apply --format json > "$work/$fs.json" || true
  python3 - "$work/$fs.json" "$fs" "$device" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["applied"]
if not a or not a["files"]:
    print(f"{sys.argv[2]:<5} {sys.argv[3]:<7} nothing advised"); sys.exit()
err = lambda x, p: 100.0 * (x - p) / p if p else 0.0
worst = max(abs(err(f["achieved_ns"], f["predicted_ns"])) for f in a["files"])
M = 1 << 20
print(f'{sys.argv[2]:<5} {sys.argv[3]:<7} {a["predicted_bytes"]/M:10.1f}Mi {a["moved_bytes"]/M:10.1f}Mi '
      f'{a["device_written_bytes"]/M:10.1f}Mi {err(a["device_written_bytes"], a["predicted_bytes"]):+7.1f}% '
      f'{a["predicted_ns"]/1e6:14.2f} {a["achieved_ns"]/1e6:14.2f} {err(a["achieved_ns"], a["predicted_ns"]):+7.1f}% {worst:9.1f}%')
PY
done
