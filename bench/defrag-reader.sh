#!/usr/bin/env bash
# Two fragkit builds defragmenting a file while an application reads it: a 48 MiB file in
# 16 KiB pieces (`age layout`, 16 KiB apart) on a fresh 1 GiB ext4 per run, read whole in a
# loop by buffered reads (`cat`) from 0.5 s before `defrag --mode full` until it ends.
# Builds alternate per round (A B, then B A, ...). Per run: the bytes moved and the
# device's write requests and bytes (/sys/block/DEV/stat, after sync; proof both builds
# moved the same data), written over moved, and the journal commits asked for during the
# defrag (/proc/fs/jbd2/DEV-8/info). Per round the ratio B ÷ A of written over moved; the
# figure is its median (min-max, n). Alone the move writes 1.0x.
# Usage (root): bench/defrag-reader.sh FRAGKIT_A FRAGKIT_B [ROUNDS]   (default 7)
set -euo pipefail
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: \`$BASH_COMMAND\` failed with status $?" >&2' ERR
cd "$(dirname "$0")/.."
[[ $(id -u) -eq 0 ]] || { echo "bench/defrag-reader.sh: needs root (scratch file systems, MOVE_EXT)" >&2; exit 2; }
[[ $# -ge 2 && -x $1 && -x $2 ]] || { echo "bench/defrag-reader.sh: expected two fragkit binaries, got '${1:-}' '${2:-}'" >&2; exit 2; }
rounds=${3:-7}
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 ]] || { echo "bench/defrag-reader.sh: ROUNDS: expected a number >= 1, got '$rounds'" >&2; exit 2; }
work=$(mktemp -d /tmp/defrag-reader.XXXXXX)
cp "$1" "$work/fragkit-A"; cp "$2" "$work/fragkit-B"
mp=""; rp=""
cleanup() {
  [[ -n $rp ]] && kill "$rp" 2>/dev/null || true
  [[ -n $mp ]] && "$work/fragkit-A" scratch destroy "$mp" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
one() { # BUILD -> "moved write_requests written_bytes commits"
  local fk=$work/fragkit-$1
  mp=$($fk scratch create --fs ext4 --size 1G --dir "$work/fs" 2>/dev/null)
  $fk age layout "$mp/db" --size 48M --frag-size 16K --frag-distance 16K >/dev/null 2>&1
  sync; echo 3 > /proc/sys/vm/drop_caches
  local dev; dev=$(basename "$(findmnt -n -o SOURCE "$mp")")
  local info; info=$(ls -d /proc/fs/jbd2/"$dev"-*)/info
  ( while true; do cat "$mp/db" > /dev/null; done ) & rp=$!
  sleep 0.5
  local w0 q0 c0 w1 q1 c1
  w0=$(awk '{print $7}' "/sys/block/$dev/stat"); q0=$(awk '{print $5}' "/sys/block/$dev/stat")
  c0=$(sed -n '1s/.*(\([0-9]*\) requested.*/\1/p' "$info")
  $fk defrag --mode full "$mp/db" --format json > "$work/out.json" 2>/dev/null || true
  sync
  w1=$(awk '{print $7}' "/sys/block/$dev/stat"); q1=$(awk '{print $5}' "/sys/block/$dev/stat")
  c1=$(sed -n '1s/.*(\([0-9]*\) requested.*/\1/p' "$info")
  kill "$rp"; wait "$rp" 2>/dev/null || true; rp=""
  echo "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["bytes_moved"])' "$work/out.json") $((q1 - q0)) $(((w1 - w0) * 512)) $((c1 - c0))"
  $fk scratch destroy "$mp" >/dev/null; mp=""
}
for ((k = 1; k <= rounds; k++)); do
  if ((k % 2)); then order=(A B); else order=(B A); fi
  for b in "${order[@]}"; do echo "$b $(one "$b")"; done
done > "$work/runs.txt"
python3 - "$work/runs.txt" <<'PY'
import statistics, sys
runs = {"A": [], "B": []}
print("build  moved MiB  device write requests  written MiB  written/moved  journal commits")
for line in open(sys.argv[1]):
    b, moved, reqs, written, commits = line.split()
    moved, written = int(moved), int(written)
    runs[b].append(written / moved)
    print(f"{b:5}  {moved/2**20:9.1f}  {int(reqs):21}  {written/2**20:11.1f}  {written/moved:13.3f}  {int(commits):15}")
ratios = [b / a for a, b in zip(runs["A"], runs["B"])]
for b, v in runs.items():
    print(f"{b}: written/moved median {statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f}, n={len(v)})")
print(f"B / A per round: median {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}, n={len(ratios)}); "
      "floor: written/moved 1.0 (the data once)")
PY
