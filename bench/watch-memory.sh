#!/usr/bin/env bash
# Peak memory of `fragkit watch` on a tree of N files (default 1,000,000) in 1,000
# directories on a scratch ext4: the first full scan plus a few ticks with fanotify, and
# the same with inotify (one watch per directory). Prints the peak RSS and bytes per file.
#
#   bench/watch-memory.sh [N]
set -euo pipefail
# One line naming what failed, instead of a silent exit.
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: \`$BASH_COMMAND\` failed with status $?" >&2' ERR
cd "$(dirname "$0")/.."
N=${1:-1000000}
if [[ $(id -u) -ne 0 ]]; then
  echo "bench/watch-memory.sh: needs root (scratch file system on a loop device)" >&2
  exit 1
fi
cargo build --release --quiet
FRAGKIT=$PWD/target/release/fragkit
WORK=$(mktemp -d /tmp/fragkit-watch-mem.XXXXXX)
MNT=$("$FRAGKIT" scratch create --fs ext4 --size 2G --dir "$WORK" \
  --mkfs-args "-N $((N + N / 10 + 10000)) -I 128" --format json |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["mountpoint"])')
trap '"$FRAGKIT" scratch destroy "$MNT" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

# N empty files (what a file costs fragkit does not depend on its size) with realistic
# name lengths, in 1,000 directories.
python3 - "$MNT/tree" "$N" <<'EOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
dirs = 1000
for d in range(dirs):
    os.makedirs(f"{root}/shard-{d:04d}", exist_ok=True)
for i in range(n):
    os.close(os.open(f"{root}/shard-{i % dirs:04d}/object-{i:08d}.dat", os.O_CREAT | os.O_WRONLY, 0o644))
EOF
sync

for events in fanotify inotify; do
  out=$( { /usr/bin/time -f 'peak_kib=%M' "$FRAGKIT" watch "$MNT/tree" --events "$events" \
    --interval 1s --duration 5s --db "$WORK/mem-$events.db" --format json >"$WORK/sum.json"; } 2>&1 | grep peak_kib)
  kib=${out#peak_kib=}
  python3 - "$events" "$N" "$kib" "$WORK/sum.json" <<'EOF'
import json, sys
events, n, kib, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
s = json.load(open(path))
print(f"{events}: {s['totals']['files']} files, first scan {s['first_scan_ms']/1e3:.1f} s, "
      f"mean tick {s['mean_tick_ms']:.2f} ms, peak RSS {kib/1024:.0f} MiB = {kib*1024/n:.0f} bytes per file")
EOF
done
