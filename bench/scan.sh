#!/usr/bin/env bash
# fragkit scan vs filefrag -v vs a bare open+FIEMAP+close loop in C, side by side in one
# run on the same 100k files of a scratch ext4. Prints files/s and the ratios.
# Usage (root): bench/scan.sh [FILES]   (default 100000)
set -euo pipefail
cd "$(dirname "$0")/.."
files=${1:-100000}
[[ $(id -u) -eq 0 ]] || { echo "bench/scan.sh: needs root (scratch file system)" >&2; exit 1; }
cargo build --release -q
fk=$PWD/target/release/fragkit
work=$(mktemp -d)
trap 'cd /; [[ -n ${mp:-} ]] && $fk scratch destroy "$mp"; rm -rf "$work"' EXIT
cc -O2 -o "$work/fiemap_floor" bench/fiemap_floor.c

mp=$($fk scratch create --fs ext4 --size 8G 2>/dev/null)
echo "building $files files on $mp ..." >&2
# Small-to-medium files: 80% 1–16 KiB, 19% 16–128 KiB, 1% 128 KiB–1 MiB, 1000 per directory,
# written in an interleaved order so some of the larger ones fragment.
python3 - "$mp" "$files" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(42)
blob = os.urandom(1 << 20)
open_files = []
for i in range(n):
    d = os.path.join(root, f"d{i // 1000:03d}")
    if i % 1000 == 0:
        os.mkdir(d)
    r = rng.random()
    size = rng.randint(1 << 10, 16 << 10) if r < 0.8 else rng.randint(16 << 10, 128 << 10) if r < 0.99 else rng.randint(128 << 10, 1 << 20)
    fd = os.open(os.path.join(d, f"f{i:06d}"), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, blob[: size // 2])
    open_files.append((fd, size - size // 2))
    if len(open_files) == 64:  # second halves written later: interleaved allocation
        for f, rest in open_files:
            os.write(f, blob[:rest]); os.close(f)
        open_files = []
for f, rest in open_files:
    os.write(f, blob[:rest]); os.close(f)
PY
sync
cd "$mp"
find . -type f | sort > "$work/list"
nfiles=$(wc -l < "$work/list")

timeit() { # prints seconds for "$@" (stdout discarded)
  local t0 t1
  t0=$(date +%s.%N); "$@" > /dev/null; t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}
best() { # best of 3 runs, after one warm-up, so all three see a warm inode cache
  "$@" > /dev/null
  local b=999999 t
  for _ in 1 2 3; do t=$(timeit "$@"); b=$(echo "if ($t < $b) $t else $b" | bc -l); done
  echo "$b"
}
cores=$(nproc)
t_fk=$(best "$fk" scan --format json "$mp")
t_fk1=$(best "$fk" scan --format json -j 1 "$mp")
t_ff=$(best xargs -a "$work/list" -d '\n' -s 2000000 filefrag -v)
t_c=$(best "$work/fiemap_floor" "$work/list")
nargs=$(xargs -a "$work/list" -d '\n' -s 2000000 sh -c 'echo $#' sh | wc -l)

rate() { echo "$nfiles / $1" | bc -l; }
printf "%-44s %10s %12s\n" "tool ($nfiles files, $cores cores)" "seconds" "files/s"
printf "%-44s %10.3f %12.0f\n" "fragkit scan --format json (all cores)" "$t_fk" "$(rate "$t_fk")"
printf "%-44s %10.3f %12.0f\n" "fragkit scan --format json -j 1" "$t_fk1" "$(rate "$t_fk1")"
printf "%-44s %10.3f %12.0f\n" "filefrag -v (${nargs} process(es), all files as args)" "$t_ff" "$(rate "$t_ff")"
printf "%-44s %10.3f %12.0f\n" "C open+FIEMAP+close loop (1 thread)" "$t_c" "$(rate "$t_c")"
echo
printf "fragkit / filefrag (files/s):            %.2fx  (goal >= 2x)\n" "$(echo "$t_ff / $t_fk" | bc -l)"
printf "fragkit per core / C floor (files/s):    %.2fx  (goal >= 0.8x)\n" "$(echo "$t_c / ($t_fk * $cores)" | bc -l)"
printf "fragkit -j 1 / C floor (files/s):        %.2fx\n" "$(echo "$t_c / $t_fk1" | bc -l)"
