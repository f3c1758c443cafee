# Shared by bench/*.sh (source it): the statistics every benchmark prints.
# Numbers come one per line on stdin.

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
