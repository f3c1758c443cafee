#!/usr/bin/env bash
# fragkit against FragPicker's own code (SOSP'21, github.com/jonggyup/FragPicker) on one
# aged ext4, issue 15 item 5. The image is aged once (`age paf 'PAF:85.50@64K'`, then `age
# fragpicker-synthetic --files 4 --size 128M`: about 17k extents per file) and cloned
# block for block before every run. Runs alternate per round (A B, then B A, ...):
#   bypass: fragkit defrag --mode bypass --io-size 128K   vs  FragPicker_bypass_IP.py F 128
#   pick:   fragkit defrag --mode pick (profile: fragkit trace of FragPicker's read_stride)
#           vs FragPicker_IP.py after its own parse/processing/merge/hotness(100%) steps on
#           a trace of the same read_stride runs
#   rewrite: fragkit defrag --mode bypass --method rewrite --unsafe, judged against
#           FragPicker-B's bytes and extents (one run: no timing claim)
# Per run, from the device counters (fragkit bench writes: sync before and after): wall
# seconds, bytes and write requests, read requests during the defrag; afterwards extents
# (FIEMAP), device read requests of FragPicker's read_seq (bypass) / read_stride (pick)
# over the 4 files with caches dropped, file sizes and sha256 against the aged image.
#
# FragPicker's pick traces vfs_read with a bcc kprobe; this kernel has no kprobe PMU
# (/sys/bus/event_source/devices has no "kprobe") and no kprobe_events, so that one step
# cannot run here. Its trace is rebuilt from an strace of the very read_stride runs in
# bcc trace's output format ("ino = I | size = N | pos = P | direct = D | type = 0": each
# read's requested size and its file position before the read), and FragPicker's own
# parse.sh, processing.py, merge.py, hotness.sh and FragPicker_IP.py do the rest.
# FragPicker's scripts find files with `find /mnt -inum`, so each clone is mounted on
# /mnt inside a private mount namespace (unshare -m): nothing outside sees it.
# FragPicker.sh picks IP vs OP with `findmnt | grep /mnt`, which matches other mounts
# under /mnt on this machine, so the ext4 (IP) scripts are called directly, as
# FragPicker.sh does for ext4.
#
# Usage (root): FRAGPICKER=/path/to/FragPicker bench/fragpicker-compare.sh [ROUNDS] [MODES]
#   ROUNDS (default 7) pairs per mode; MODES (default "bypass pick rewrite").
#   FRAGPICKER: a checkout of FragPicker (not part of this project; python3 module
#   "fallocate" from PyPI, as its install_dep.sh says). IMAGE_DIR (default /dev/shm)
#   holds the aged image (kept as fragpicker-aged.img and reused when present).
# Timing: run it as `flock /work/bench.lock nice -n -15 ionice -c1 bench/fragpicker-compare.sh`.
set -euo pipefail
# One line naming what failed, instead of a silent exit.
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: \`$BASH_COMMAND\` failed with status $?" >&2' ERR
cd "$(dirname "$0")/.."
if [[ -z ${FRAGKIT_FP_NS:-} ]]; then
  [[ $(id -u) -eq 0 ]] || { echo "bench/fragpicker-compare.sh: needs root (loop devices, MOVE_EXT)" >&2; exit 1; }
  FRAGKIT_FP_NS=1 exec unshare -m --propagation private "$0" "$@"
fi
rounds=${1:-7}; modes=${2:-bypass pick rewrite}
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 ]] || { echo "bench/fragpicker-compare.sh: ROUNDS: expected a number >= 1, got '$rounds'" >&2; exit 2; }
fp=${FRAGPICKER:-}
[[ -f $fp/src/migration/FragPicker_bypass_IP.py ]] || { echo "bench/fragpicker-compare.sh: FRAGPICKER: expected a FragPicker checkout (src/migration/FragPicker_bypass_IP.py), got '$fp'" >&2; exit 2; }
python3 -c 'import fallocate' 2>/dev/null || { echo "bench/fragpicker-compare.sh: FragPicker needs the python3 module fallocate (pip install fallocate)" >&2; exit 1; }
# The interpreter itself, not a wrapper such as a pyenv shim (FragPicker's best setup).
py=$(python3 -c 'import sys; print(sys.executable)')
# shellcheck source=bench/lib.sh
source bench/lib.sh # band, first_of, fp_aged_image
cargo build --release -q
image_dir=${IMAGE_DIR:-/dev/shm}
image=$image_dir/fragpicker-aged.img
work=$(mktemp -d /tmp/fragkit-fp-compare.XXXXXX)
# A copy: a build during the run must not change the binary being measured.
cp target/release/fragkit "$work/fragkit"
fk=$work/fragkit
mnt=/mnt
loopdev=""
cleanup() {
  mountpoint -q "$mnt" && umount "$mnt"
  [[ -n $loopdev ]] && losetup -d "$loopdev" 2>/dev/null || true
  rm -rf "$work" "$image_dir/fragpicker-clone.img"
}
trap cleanup EXIT
# FragPicker's workload programs, built from its checkout (its read_benchmark sources).
gcc -O2 -o "$work/read_seq" "$fp/evaluation/read_benchmark/read_seq.c"
gcc -O2 -o "$work/read_stride" "$fp/evaluation/read_benchmark/read_stride.c"

attach() { # attach IMG [MOUNT_OPTIONS]: loop device mounted on /mnt
  loopdev=$(losetup --find --show "$1")
  mount ${2:+-o "$2"} "$loopdev" "$mnt"
  dev=$(basename "$loopdev")
}
detach() { umount "$mnt"; losetup -d "$loopdev"; loopdev=""; }

# 1. The aged image, made once.
fp_aged_image "$image" "$fk"
# Read-only, journal not replayed: the aged image stays byte for byte what clones copy.
attach "$image" ro,noload
files=$(find "$mnt/work" -type f | sort | tr '\n' ' ')
(cd "$mnt/work" && sha256sum -- *) > "$work/sums"
size_each=$(stat -c %s $files | sed -n 1p)
extents_before=$($fk scan --format csv $files | awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "fragments") c = i; next } { s += $c } END { print s }')
detach
echo "aged image: $image; 4 files of $size_each bytes, $extents_before fragments in all" >&2

clone() { cp --sparse=always "$image" "$image_dir/fragpicker-clone.img"; attach "$image_dir/fragpicker-clone.img"; }
# measure NAME CMD...: the command under fragkit bench writes; one CSV row into $work/rows.
measure() {
  local name=$1; shift
  # The command's own output (fragkit's JSON report) is kept per run in $work/out.
  mkdir -p "$work/out"
  local out=$work/out/$(echo "$name" | tr ' ' _).$(wc -l < "$work/rows")
  $fk bench writes --device "$dev" -f csv -- "$@" > "$work/w.csv" 2> "$out" || true
  [[ -s $work/w.csv ]] || { tail -5 "$out" >&2; return 1; }
  python3 - "$work/w.csv" "$name" >> "$work/rows" <<'PY'
import csv, sys
r = next(csv.DictReader(open(sys.argv[1])))
# fragkit defrag exits 1 when it skipped ranges it could not improve (listed in its report).
if r["exit_status"] not in ("0", "1"):
    sys.exit(f"{sys.argv[2]}: exit status {r['exit_status']!r}")
print(sys.argv[2], r["seconds"], r["write_bytes"], r["writes"], r["reads"], r["read_bytes"], r["flushes"], end=" ")
PY
}
# after WORKLOAD: extents, device reads of the workload over the 4 files, integrity.
after() {
  local wl=$1 r0 r1 ext ok sizes
  sync; echo 3 > /proc/sys/vm/drop_caches
  ext=$($fk scan --format csv $files | awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "fragments") c = i; next } { s += $c } END { print s }')
  r0=$(awk '{print $1}' "/sys/block/$dev/stat")
  for f in $files; do "$work/$wl" "$f" 128 > /dev/null; done
  r1=$(awk '{print $1}' "/sys/block/$dev/stat")
  sizes=$(stat -c %s $files | awk -v s="$size_each" '$1 != s { d += $1 - s } END { print d + 0 }')
  ok=$(cd "$mnt/work" && sha256sum --quiet -c "$work/sums" > /dev/null 2>&1 && echo intact || echo CHANGED)
  echo "$ext $((r1 - r0)) $sizes $ok" >> "$work/rows"
}
# The pick profile: FragPicker's read_stride over each file, traced by fragkit trace
# (fragkit's input) and by strace (rebuilt as bcc trace lines: FragPicker's input).
trace_stride() {
  sync; echo 3 > /proc/sys/vm/drop_caches
  $fk trace --mount "$mnt" -o "$work/profile.json" -- \
    strace -f -qq -s 0 -e trace=openat,read,lseek -e signal=none -o "$work/strace.txt" \
    sh -c "for f in $files; do $work/read_stride \$f 128; done" > /dev/null
  python3 - "$work/strace.txt" > "$work/trace.result" <<'PY'
import os, re, sys
# strace -f lines: PID openat(AT_FDCWD, "PATH", ...) = FD | PID read(FD, ..., COUNT) = RET
# | PID lseek(FD, OFF, SEEK_CUR) = POS. bcc's vfs_read probe saw each read's requested
# COUNT and the file position before it.
fd_ino, pos = {}, {}
print("PID     TID     COMM            FUNC             -")
for line in open(sys.argv[1]):
    m = re.match(r'(\d+)\s+openat\(AT_FDCWD, "(/mnt/[^"]+)", [^)]*O_DIRECT[^)]*\)\s+= (\d+)', line)
    if m:
        key = (m.group(1), m.group(3))
        fd_ino[key], pos[key] = os.stat(m.group(2)).st_ino, 0
        continue
    m = re.match(r"(\d+)\s+read\((\d+), .*, (\d+)\)\s+= (-?\d+)", line)
    if m and (m.group(1), m.group(2)) in fd_ino:
        key = (m.group(1), m.group(2))
        print(f"{key[0]} {key[0]} read_stride vfs_read ino = {fd_ino[key]} | size = {m.group(3)} | pos = {pos[key]} | direct = 16384 | type = 0")
        pos[key] += max(int(m.group(4)), 0)
        continue
    m = re.match(r"(\d+)\s+lseek\((\d+), -?\d+, SEEK_CUR\)\s+= (\d+)", line)
    if m and (m.group(1), m.group(2)) in pos:
        pos[(m.group(1), m.group(2))] = int(m.group(3))
PY
  # FragPicker's analysis phase on that trace, in a private copy of its src/.
  rm -rf "$work/fp"; cp -r "$fp/src" "$work/fp"
  cp "$work/trace.result" "$work/fp/analysis/trace.result"
  (cd "$work/fp/analysis" && ./parse.sh && $py ./processing.py && $py ./merge.py && ./hotness.sh 100) > /dev/null 2>&1
}
run() { # run MODE TOOL: one clone, one timed defrag, the figures after.
  local mode=$1 tool=$2
  clone
  case $mode/$tool in
    bypass/fragkit) measure "$mode $tool" "$fk" defrag --mode bypass --io-size 128K --format json "$mnt/work" ;;
    rewrite/fragkit) measure "$mode $tool" "$fk" defrag --mode bypass --method rewrite --unsafe --io-size 128K --format json "$mnt/work" ;;
    bypass/fragpicker|rewrite/fragpicker)
      rm -rf "$work/fp"; cp -r "$fp/src" "$work/fp"
      # FragPicker_bypass_dir.sh's loop: one python3 per file, cwd src/migration.
      measure "$mode $tool" sh -c "cd $work/fp/migration && for f in $files; do $py ./FragPicker_bypass_IP.py \$f 128 || exit 1; done" ;;
    pick/fragkit)
      trace_stride
      measure "$mode $tool" "$fk" defrag --mode pick --profile "$work/profile.json" --io-size 128K --format json "$mnt/work" ;;
    pick/fragpicker)
      trace_stride
      measure "$mode $tool" sh -c "cd $work/fp/migration && $py ./FragPicker_IP.py" ;;
  esac
  case $mode in pick) after read_stride ;; *) after read_seq ;; esac
  detach
}

: > "$work/rows"
echo "start $(date -u +%FT%TZ), $(uptime)" >&2
for mode in $modes; do
  n=$rounds; [[ $mode == rewrite ]] && n=1
  for ((r = 0; r < n; r++)); do
    if (( $(first_of "$r" 2) == 0 )); then order=(fragkit fragpicker); else order=(fragpicker fragkit); fi
    for t in "${order[@]}"; do run "$mode" "$t"; tail -1 "$work/rows" >&2; done
  done
done
echo "end $(date -u +%FT%TZ), $(uptime)" >&2

# Columns of $work/rows: mode tool seconds write_bytes writes reads read_bytes flushes
#                        extents reads_after size_growth integrity
echo "FragPicker ($(git -C "$fp" log -1 --format=%h 2>/dev/null || echo '?')) vs fragkit ($(git log -1 --format=%h)), 4 x $((size_each >> 20)) MiB on aged ext4, $extents_before fragments before; $rounds rounds"
printf "%-8s %-10s %-24s %10s %8s %10s %8s %9s %11s %10s %s\n" mode tool seconds MB_written writes MB_read reads extents reads_after grew_bytes data
for mode in $modes; do
  for t in fragkit fragpicker; do
    col() { awk -v m="$mode" -v t="$t" -v c="$1" '$1 == m && $2 == t { print $c }' "$work/rows"; }
    [[ -n $(col 3) ]] || continue
    # Device counts must agree across rounds; print round 0 and flag any spread.
    spread() { local a b; a=$(col "$1" | sort -g | sed -n 1p); b=$(col "$1" | sort -g | tail -1); [[ $a == "$b" ]] && echo "$a" || echo "$a..$b"; }
    printf "%-8s %-10s %-24s %10.1f %8s %10.1f %8s %9s %11s %10s %s\n" "$mode" "$t" "$(col 3 | band 2)" \
      "$(col 4 | sed -n 1p | awk '{print $1 / 1e6}')" "$(spread 5)" "$(col 7 | sed -n 1p | awk '{print $1 / 1e6}')" "$(spread 6)" \
      "$(spread 9)" "$(spread 10)" "$(spread 11)" "$(col 12 | sort -u | tr '\n' ' ')"
  done
  # Per-round ratio fragkit / FragPicker (rounds are paired in order).
  paste <(awk -v m="$mode" '$1 == m && $2 == "fragkit" { print $3 }' "$work/rows") \
        <(awk -v m="$mode" '$1 == m && $2 == "fragpicker" { print $3 }' "$work/rows") |
    awk '{ print $1 / $2 }' > "$work/ratios"
  [[ -s $work/ratios ]] && echo "$mode: wall time fragkit / FragPicker = $(band 2 < "$work/ratios")"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
keep=${KEEP:-/tmp/fragpicker-compare}
mkdir -p "$keep"; cp -r "$work/rows" "$work/out" "$keep/"
echo "rows and each run's output kept in $keep"
