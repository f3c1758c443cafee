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

