#!/usr/bin/env bash
# Benchmark: render a block map of a 1 GiB scratch ext4 holding 50,000 files (target < 5 s).
# Builds the file system (62,500 files of 1-24 KiB, every fifth deleted, then 60 files of
# 2 MiB written into what is left so that some of them are fragmented: 50,060 files), then
# times, with cold caches before every run, ROUNDS rounds of these contenders, the one that
# leads rotating each round (scan first in round 0, map_png first in round 1, ...):
#   scan        fragkit scan (FIEMAP of every file: the floor, a map cannot cost less)
#   map_png     fragkit map --whole-fs -o map.png (scan + GETFSMAP + layout + PNG)
#   map_svg, map_html, fragtracer: the other outputs
# Prints per contender the median seconds (min–max, n) and the median of the per-round
# ratio to scan (min–max, n); then ROUNDS warm map_png runs with fragkit's own split into
# mapping files and drawing. The machine may be shared: the load average is printed.
# Needs root. Usage: bench/map.sh [FILES] [SIZE] [ROUNDS]   (defaults 50000 1G 7)
set -euo pipefail
# One line naming what failed, instead of a silent exit.
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: \`$BASH_COMMAND\` failed with status $?" >&2' ERR
cd "$(dirname "$0")/.."
files=${1:-50000}
size=${2:-1G}
rounds=${3:-7}
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 ]] || { echo "bench/map.sh: ROUNDS: expected a number >= 1, got '$rounds'" >&2; exit 2; }
# shellcheck source=bench/lib.sh
source bench/lib.sh # band, first_of
fk=target/release/fragkit
cargo build --release -q # always: a stale binary would time old code
mp=$($fk scratch create --fs ext4 --size "$size" 2>/dev/null)
out=$(mktemp -d)
trap '$fk scratch destroy "$mp" >/dev/null 2>&1 || true; rm -rf "$out"' EXIT

python3 - "$mp" "$files" <<'PY'
import os, random, sys
mp, n = sys.argv[1], int(sys.argv[2]) * 5 // 4
random.seed(1)
blob = os.urandom(1 << 21)
for d in range(n // 1000 + 1):
    os.makedirs(f"{mp}/d{d:03}", exist_ok=True)
names = []
for i in range(n):
    p = f"{mp}/d{i // 1000:03}/f{i}.{random.choice(['sst', 'log', 'db', 'bin'])}"
    with open(p, "wb") as f:
        f.write(blob[: random.randint(1, 24) * 1024])
    names.append(p)
os.sync()
for p in names[::5]:
    os.remove(p)
for i in range(60):
    with open(f"{mp}/big{i}.sst", "wb") as f:
        f.write(blob)
os.sync()
PY

t() { # t CMD...: wall seconds of CMD with cold caches
  sync; echo 3 >/proc/sys/vm/drop_caches
  local s e
  s=$(date +%s%N); "$@" >/dev/null; e=$(date +%s%N)
  awk -v ns=$((e - s)) 'BEGIN { printf "%.3f\n", ns / 1e9 }'
}
names=(scan map_png map_svg map_html fragtracer)
run() { # run NAME: one cold run of that contender, seconds appended to $out/NAME
  case $1 in
    scan) t $fk scan "$mp" --summary-only ;;
    map_png) t $fk map "$mp" --whole-fs -o "$out/map.png" ;;
    map_svg) t $fk map "$mp" --whole-fs -o "$out/map.svg" ;;
    map_html) t $fk map "$mp" --whole-fs -o "$out/map.html" ;;
    fragtracer) t $fk map "$mp" --fragtracer "$out/ft" ;;
  esac >>"$out/$1.s"
}
echo "$size ext4, $($fk scan "$mp" --format json --summary-only | python3 -c 'import json,sys; s=json.load(sys.stdin)["summary"]; print(s["files"], "files,", s["fragmented_files"], "fragmented")')"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores"
k=${#names[@]}
for ((r = 0; r < rounds; r++)); do
  f=$(first_of "$r" "$k")
  for ((j = 0; j < k; j++)); do run "${names[$(((f + j) % k))]}"; done
done
printf '%-11s %-28s %s\n' contender "cold s: median (min–max, n)" "ratio to scan, per round: median (min–max, n)"
for n in "${names[@]}"; do
  printf '%-11s %-28s %s\n' "$n" "$(band 3 <"$out/$n.s")" "$(paste "$out/$n.s" "$out/scan.s" | awk '{ print $1 / ($2 > 0 ? $2 : 1e-9) }' | band 2)"
done
echo "floor: scan (one FIEMAP per file); a map cannot cost less than mapping every file"
# Warm caches: what is left once the inodes are in memory; and fragkit's own split of the
# time into mapping the files (FIEMAP) and drawing (GETFSMAP, layout, PNG).
for ((i = 0; i < rounds; i++)); do
  $fk map "$mp" --whole-fs -o "$out/map.png" --format json >"$out/warm$i.json"
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, n = sys.argv[1], int(sys.argv[2])
runs = sorted((json.load(open(f"{out}/warm{i}.json")) for i in range(n)), key=lambda r: r["seconds"])
mid = runs[(len(runs) - 1) // 2]
s = [r["seconds"] for r in runs]
print(f"map_png warm: {statistics.median(s):.3f} s ({min(s):.3f}–{max(s):.3f}, n={n}); median run = mapping files {mid['scan_seconds']:.2f} s + drawing {mid['render_seconds']:.2f} s")
PY
cold=$(band 3 <"$out/map_png.s" | cut -d' ' -f1)
echo "target map_png < 5 s (cold median): $cold s $(awk -v c="$cold" 'BEGIN { print (c < 5) ? "met" : "MISSED" }')"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
for f in "$out"/map.png "$out"/map.svg "$out"/map.html "$out"/ft/*; do echo "  $(basename "$f"): $(stat -c %s "$f") bytes"; done
