#!/usr/bin/env bash
# FAST'24's fileserver as the artifact ran it, with filebench itself (a peer, built by the
# user; Debian has no filebench), recorded on the scratch device and replayed on the
# fast24 model: does the artifact's own workload show the paper's fragmented/contiguous
# 0.784 on this kernel? (fragkit's `bench fast24` runs two appends per file instead.)
# Follows yuhun-Jun/fast24_ae evaluation/fileserver.sh (approach off, then contiguous):
#   setdevice.sh  — ext4 with an external journal, -m 0 -b 4096, mounted nodelalloc,
#                   reserved_clusters 0, mb_stream_req 4200000000
#   disablemeta.sh — dirty_background_ratio 50, dirty_ratio 50,
#                   dirty_writeback_centisecs 0, dirty_expire_centisecs 60000
#   filebench -f filebench/fileserver_append.f (10,000 files of 128 KiB preallocated,
#                   10 threads appending 32 KiB, 30 s); sleep 10; sync; drop caches;
#                   filebench -f filebench/fileserver_read.f (10 threads, whole files,
#                   1 MiB O_DIRECT reads)
#   contiguous    — the files copied (rsync -a) onto a fresh file system, then the same read
# The artifact's 50 GB partition is a sparse 50 GiB image here (on the disk under WORK:
# the appends need about 13 GB); the device carries the fast24 host's queue limits
# (256 KiB requests, 128 KiB readahead) while recorded. The read phase runs READ_S
# seconds (the artifact: 60). Both traces are recorded with --mount (each request's file
# and offset), and replayed as 10 closed-loop readers, as `bench fast24` does.
# Usage (root): FILEBENCH=/path/to/filebench FAST24_AE=/path/to/fast24_ae \
#               bench/fast24-filebench.sh [WORK] [READ_S]   (default /var/tmp, 10)
set -euo pipefail
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: \`$BASH_COMMAND\` failed with status $?" >&2' ERR
cd "$(dirname "$0")/.."
[[ $(id -u) -eq 0 ]] || { echo "bench/fast24-filebench.sh: needs root (scratch file systems, vm knobs)" >&2; exit 2; }
fb=${FILEBENCH:?set FILEBENCH to a filebench binary (github.com/filebench/filebench, built with autotools, bison and flex)}
ae=${FAST24_AE:?set FAST24_AE to a checkout of github.com/yuhun-Jun/fast24_ae}
[[ -x $fb ]] || { echo "bench/fast24-filebench.sh: FILEBENCH=$fb is not an executable" >&2; exit 2; }
for f in fileserver_append.f fileserver_read.f; do
  [[ -f $ae/evaluation/filebench/$f ]] || { echo "bench/fast24-filebench.sh: FAST24_AE=$ae has no evaluation/filebench/$f" >&2; exit 2; }
done
command -v rsync >/dev/null || { echo "bench/fast24-filebench.sh: needs rsync (apt-get install rsync)" >&2; exit 2; }
work=${1:-/var/tmp}; read_s=${2:-10}
cargo build --release --locked -q
fk=target/release/fragkit
out=$(mktemp -d "$work/fast24-filebench.XXXXXX")
knobs="dirty_background_ratio dirty_ratio dirty_writeback_centisecs dirty_expire_centisecs"
declare -A vm_old
for k in $knobs; do vm_old[$k]=$(cat /proc/sys/vm/$k); done
aslr_old=$(cat /proc/sys/kernel/randomize_va_space)
tracer=""; mounts=()
cleanup() {
  [[ -n $tracer ]] && kill -INT "$tracer" 2>/dev/null && wait "$tracer" 2>/dev/null || true
  for k in $knobs; do echo "${vm_old[$k]}" > /proc/sys/vm/$k; done
  echo "$aslr_old" > /proc/sys/kernel/randomize_va_space
  for m in "${mounts[@]}"; do "$fk" scratch destroy "$m" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT
# filebench asks for it ("To fix filebench running problem" in fileserver.sh).
echo 0 > /proc/sys/kernel/randomize_va_space

# A scratch file system as setdevice.sh makes one, the fast24 host's queue limits on it.
make_fs() {
  local name=$1
  "$fk" scratch create --fs ext4 --size 50G --dir "$out/$name" --external-journal 1G \
    --mkfs-args "-m 0 -b 4096" --mount-options nodelalloc --format json > "$out/$name.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['mountpoint'], d['loop_device'])" "$out/$name.json"
}
tune() {
  local dev=${1##*/}
  echo 256 > /sys/block/$dev/queue/max_sectors_kb
  echo 128 > /sys/block/$dev/queue/read_ahead_kb
  echo 0 > /sys/fs/ext4/$dev/reserved_clusters
  echo 4200000000 > /sys/fs/ext4/$dev/mb_stream_req
}
personality() {  # FILE DIR RUNTIME: the artifact's .f with its device dir and runtime set
  sed -e "s|^set \$dir=device|set \$dir=$2|" -e "s|^set \$runtime=[0-9]*|set \$runtime=$3|" \
    "$ae/evaluation/filebench/$1"
}
record_start() { "$fk" trace --block "$1" --mount "$2" -o "$3" 2> "$3.log" & tracer=$!; sleep 1; }
record_stop() { kill -INT "$tracer"; wait "$tracer" || true; tracer=""; }
settle() { sleep 10; sync; echo 3 > /proc/sys/vm/drop_caches; sleep 5; }

echo 50 > /proc/sys/vm/dirty_background_ratio; echo 50 > /proc/sys/vm/dirty_ratio
echo 0 > /proc/sys/vm/dirty_writeback_centisecs; echo 60000 > /proc/sys/vm/dirty_expire_centisecs

read -r frag_mp frag_dev < <(make_fs frag); mounts+=("$frag_mp"); tune "$frag_dev"
mkdir "$frag_mp/device"
personality fileserver_append.f "$frag_mp/device" 30 > "$out/append.f"
personality fileserver_read.f "$frag_mp/device" "$read_s" > "$out/read.f"
record_start "$frag_dev" "$frag_mp" "$out/frag.trace"
"$fb" -f "$out/append.f" > "$out/append.out" 2>&1
settle
"$fb" -f "$out/read.f" > "$out/read.out" 2>&1
record_stop

read -r con_mp con_dev < <(make_fs contig); mounts+=("$con_mp"); tune "$con_dev"
personality fileserver_read.f "$con_mp/device" "$read_s" > "$out/read-contig.f"
record_start "$con_dev" "$con_mp" "$out/contig.trace"
rsync -a "$frag_mp/device" "$con_mp/"
settle
"$fb" -f "$out/read-contig.f" > "$out/read-contig.out" 2>&1
record_stop

appends=$(awk '/appendfilerand1/ {print $2}' "$out/append.out" | tr -d ops)
echo "filebench fileserver_append.f: $appends appends of 32 KiB in 30 s over 10,000 files; $(du -sh "$frag_mp/device" | cut -f1) on the file system"
for t in frag contig; do
  for a in "" --approach; do
    "$fk" ssd "$out/$t.trace" --readers 10 $a --format json > "$out/$t$a.json"
  done
done
python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
r = {k: json.load(open(f"{d}/{k}.json"))["report"] for k in ["frag", "frag--approach", "contig", "contig--approach"]}
mb = {k: v["read_mb_s"] for k, v in r.items()}
col = {k: v["collisions"] for k, v in r.items()}
c = mb["contig"]
print(f"replayed on fast24, 10 closed-loop readers (MB/s; paper MiB/s, ratio to contiguous):")
print(f"  contiguous           {c:8.1f}  (collisions {col['contig']})   paper 2739.8")
print(f"  fragmented           {mb['frag']:8.1f}  ratio {mb['frag']/c:.3f} (collisions {col['frag']})   paper 2149.4, ratio 0.784")
print(f"  fragmented, approach {mb['frag--approach']:8.1f}  ratio {mb['frag--approach']/c:.3f} (collisions {col['frag--approach']})   paper 2611.8, ratio 0.953")
PY
echo "traces and filebench output: $out"
