# Shared by bench/*.sh (source it): the statistics every benchmark prints (numbers one per
# line on stdin), and the aged ext4 image the FragPicker comparisons share.

# median: the middle value (mean of the two middle ones for an even count).
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# minmax: "lo..hi" with three decimals.
minmax() { sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.3f..%.3f", lo, hi }'; }
# band [DECIMALS]: "median (min–max, n=N)", the form every table uses.
band() {
  sort -g | awk -v d="${1:-2}" '{ v[NR] = $1 } END {
    if (!NR) { print "n=0"; exit }
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%.*f (%.*f–%.*f, n=%d)\n", d, m, d, v[1], d, v[NR], NR }'
}
# first_of ROUND K: which of K contenders goes first in round ROUND (0-based), so that
# with two contenders the order alternates A B, B A, ... and with K each leads in turn.
first_of() { echo $(( $1 % $2 )); }

# CPU accounting for a contender and everything it starts (children included, also those
# that have exited): a cgroup of its own, cgroup v1 cpuacct where the hierarchy is hybrid
# (as on the development VM), else cgroup2.
# cg_make NAME: make the cgroup, print its path (status 1 when none can be made).
cg_make() {
  local base
  for base in /sys/fs/cgroup/cpuacct /sys/fs/cgroup/unified /sys/fs/cgroup; do
    if mkdir "$base/$1" 2>/dev/null; then echo "$base/$1"; return 0; fi
  done
  return 1
}
# cg_cpu_ns CG: CPU nanoseconds every process that ran in CG has used so far.
cg_cpu_ns() {
  if [[ -f $1/cpuacct.usage ]]; then cat "$1/cpuacct.usage"; else awk '/^usage_usec/ {print $2 * 1000}' "$1/cpu.stat"; fi
}
# cg_stop CG: kill every process in CG (a monitor's loop and whatever child it is running)
# and wait until the group is empty, so nothing it started runs on into the next phase.
cg_stop() {
  local pids _
  for _ in $(seq 200); do
    pids=$(cat "$1/cgroup.procs")
    [[ -z $pids ]] && return 0
    # shellcheck disable=SC2086 # one pid per word
    kill -KILL $pids 2>/dev/null || true
    sleep 0.05
  done
  echo "cg_stop: $1 still has processes" >&2
  return 1
}

# fp_aged_image IMAGE FRAGKIT: the aged ext4 of bench/fragpicker-compare.sh and
# bench/defrag-ab.sh, made once when IMAGE is missing: 2 GiB ext4 (-m 0, no reserved
# clusters), `age paf 'PAF:85.50@64K'`, then 4 x 128 MiB FragPicker-synthetic files in work/.
fp_aged_image() {
  local image=$1 fk=$2 m dev loop
  [[ -f $image ]] && return 0
  echo "aging: 2 GiB ext4, PAF:85.50@64K, then 4 x 128 MiB FragPicker-synthetic files ..." >&2
  truncate -s 2G "$image.tmp"
  mkfs.ext4 -q -F -m 0 "$image.tmp"
  m=$(mktemp -d /tmp/fragkit-aging.XXXXXX)
  loop=$(losetup --find --show "$image.tmp")
  mount "$loop" "$m"
  dev=$(basename "$loop")
  echo 0 > "/sys/fs/ext4/$dev/reserved_clusters"
  # age paf refuses a file system it did not create unless --force.
  "$fk" age paf --force --target "$m" 'PAF:85.50@64K' > /dev/null
  mkdir "$m/work"
  "$fk" age fragpicker-synthetic --files 4 --size 128M "$m/work" > /dev/null
  sync
  umount "$m"; losetup -d "$loop"; rmdir "$m"
  mv "$image.tmp" "$image"
}


# defrag_bench_begin NAME: the common start of bench/defrag-*.sh: root and fio checked, a
# fresh release build in $fk, a temporary $work with $mnt in it; at exit $mnt is unmounted,
# $loopdev detached and the scratch file system $aged destroyed (when set) and $work removed.
defrag_bench_begin() {
  [[ $(id -u) -eq 0 ]] || { echo "bench/$1: needs root (scratch file systems)" >&2; exit 1; }
  command -v fio >/dev/null || { echo "bench/$1: fio not installed (scripts/install-deps)" >&2; exit 1; }
  cargo build --release -q
  fk=$PWD/target/release/fragkit
  work=$(mktemp -d "/tmp/fragkit-${1%.sh}.XXXXXX")
  mnt=$work/mnt; mkdir -p "$mnt"
  loopdev=""
  trap defrag_bench_cleanup EXIT
}
defrag_bench_cleanup() {
  mountpoint -q "$mnt" && umount "$mnt"
  [[ -n $loopdev ]] && losetup -d "$loopdev" 2>/dev/null || true
  [[ -n ${aged:-} ]] && $fk scratch destroy "$aged" 2>/dev/null || true
  # The aged scratch is unmounted once its image is taken; its loop device stays.
  local l
  for l in $(losetup -a | awk -F: -v w="$work/" 'index($0, w) { print $1 }'); do
    losetup -d "$l" 2>/dev/null || true
  done
  rm -rf "$work"
}
