#!/usr/bin/env bash
# What `fragkit trace` adds to each traced call, measured side by side in one run:
#   a 4 KiB pread loop (page-cache hits: the syscall itself is cheap, so the tracer's
#   share is most visible) and a 128 KiB O_DIRECT read loop (device-bound),
# each without the tracer, with the tracer attached but filtering the loop out (--comm
# of another name: the cost every other process on the machine pays), and traced.
# Then a paced run at 500k calls/s checks the ring buffer keeps up (drops must be 0).
# Prints ns per call, the difference to the untraced run, and the drops the tracer counted.
# "cpu" is the loop's own CPU time per call (CLOCK_PROCESS_CPUTIME_ID): the eBPF programs
# run inside its syscalls, so this is what tracing adds to each call, and it is not inflated
# by waiting for a CPU on a busy machine; "wall" is elapsed time per call, for reference.
# Physical floor: "floor" attaches one EMPTY program to the same raw sys_exit tracepoint
# fragkit uses (a 20-line libbpf loader built here): what the kernel charges every syscall
# of every process for having a syscall tracepoint enabled at all, before any of fragkit's
# filtering runs. "filtered" cannot go below it. "floor2" attaches empty programs to both
# sys_enter and sys_exit (fragkit's hooks until it moved everything to sys_exit), for
# comparison.
# Rounds: every round runs base, floor, floor2, filtered and traced once each, in an order
# that rotates from round to round; each configuration's cost is its difference to the same
# round's base. Prints the median difference with min..max over ROUNDS rounds.
# With OTHER=/path/to/fragkit (e.g. a build of an earlier commit), every round also runs
# that binary filtered and traced ("filtered-other", "traced-other"): two tracer versions
# compared in the same rounds.
# Needs root. Usage: [OTHER=FRAGKIT] bench/trace-overhead.sh [PREAD_CALLS] [DIRECT_CALLS] [ROUNDS]
set -euo pipefail
# One line naming what failed, instead of a silent exit.
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: \`$BASH_COMMAND\` failed with status $?" >&2' ERR
cd "$(dirname "$0")/.."
[[ $(id -u) -eq 0 ]] || { echo "bench/trace-overhead.sh: needs root (eBPF, loop devices)" >&2; exit 1; }
PREAD_CALLS=${1:-300000}
DIRECT_CALLS=${2:-10000}
ROUNDS=${3:-9}

cargo build --release --quiet
FRAGKIT=$PWD/target/release/fragkit
work=$(mktemp -d)
mnt=""
cleanup() {
  [[ -n $mnt ]] && "$FRAGKIT" scratch destroy "$mnt" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/ioloop.c" <<'C'
/* ioloop MODE FILE CALLS RATE: MODE pread4k | direct128k; RATE calls/s (0 = flat out).
 * Prints the mean CPU ns and wall ns per call. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double clk(clockid_t c) { struct timespec t; clock_gettime(c, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
static double now(void) { return clk(CLOCK_MONOTONIC); }
int main(int argc, char **argv) {
  if (argc != 5) { fprintf(stderr, "usage: ioloop MODE FILE CALLS RATE\n"); return 2; }
  int direct = strcmp(argv[1], "direct128k") == 0;
  size_t bs = direct ? 131072 : 4096;
  long calls = atol(argv[3]);
  double rate = atof(argv[4]);
  int fd = open(argv[2], O_RDONLY | (direct ? O_DIRECT : 0));
  if (fd < 0) { perror(argv[2]); return 1; }
  off_t size = lseek(fd, 0, SEEK_END);
  long blocks = size / bs;
  void *buf;
  if (posix_memalign(&buf, 4096, bs)) return 1;
  double c0 = clk(CLOCK_PROCESS_CPUTIME_ID), t0 = now();
  for (long i = 0; i < calls; i++) {
    off_t off = (off_t)((i * 7919) % blocks) * bs; /* spread over the file */
    if (pread(fd, buf, bs, off) != (ssize_t)bs) { perror("pread"); return 1; }
    if (rate > 0) { double due = t0 + (i + 1) * 1e9 / rate; while (now() < due) ; }
  }
  double t1 = now(), c1 = clk(CLOCK_PROCESS_CPUTIME_ID);
  printf("%.1f %.1f\n", (c1 - c0) / calls, (t1 - t0) / calls);
  return 0;
}
C
cc -O2 -o "$work/ioloop" "$work/ioloop.c"

# The floors: an empty program on raw_syscalls:sys_exit (floor), and on both sys_enter and
# sys_exit (floor2).
cat >"$work/floor.bpf.c" <<'C'
typedef unsigned long long __u64; typedef unsigned int __u32; typedef unsigned short __u16;
typedef unsigned char __u8; typedef long long __s64; typedef int __s32;
typedef unsigned int __be32; typedef unsigned short __be16; typedef unsigned int __wsum;
#include <bpf/bpf_helpers.h>
char LICENSE[] SEC("license") = "GPL";
#ifdef BOTH
SEC("tp_btf/sys_enter") int floor_enter(__u64 *ctx) { return 0; }
#endif
SEC("tp_btf/sys_exit") int floor_exit(__u64 *ctx) { return 0; }
C
cat >"$work/floor.c" <<'C'
/* floor OBJ: load OBJ, attach every program, print "attached" on stderr, wait for SIGTERM. */
#include <bpf/libbpf.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
static volatile sig_atomic_t stop;
static void on_term(int s) { (void)s; stop = 1; }
int main(int argc, char **argv) {
  struct bpf_object *o = argc == 2 ? bpf_object__open_file(argv[1], NULL) : NULL;
  if (!o || bpf_object__load(o)) { fprintf(stderr, "floor: cannot load %s\n", argv[1]); return 1; }
  struct bpf_program *p;
  bpf_object__for_each_program(p, o) if (!bpf_program__attach(p)) { fprintf(stderr, "floor: attach failed\n"); return 1; }
  signal(SIGTERM, on_term);
  fprintf(stderr, "attached\n");
  while (!stop) pause();
  return 0;
}
C
clang -O2 -g -target bpf -c "$work/floor.bpf.c" -o "$work/floor.bpf.o"
clang -O2 -g -target bpf -DBOTH -c "$work/floor.bpf.c" -o "$work/floor2.bpf.o"
cc -O2 -o "$work/floor" "$work/floor.c" -lbpf

mnt=$("$FRAGKIT" scratch create --fs ext4 --size 512M --dir "$work" 2>/dev/null)
dd if=/dev/urandom of="$mnt/data" bs=1M count=128 status=none
sync
cat "$mnt/data" >/dev/null # 4 KiB preads below are page-cache hits

# beside READY MODE CALLS RATE CMD...: start CMD in the background, wait until its stderr
# says READY (everything attached), run the loop beside it, then stop CMD with SIGTERM.
beside() {
  local ready=$1 mode=$2 calls=$3 rate=$4
  shift 4
  rm -f "$work/beside.err"
  "$@" 2>"$work/beside.err" &
  local pid=$! ns
  until grep -q "$ready" "$work/beside.err" 2>/dev/null; do sleep 0.05; done
  ns=$("$work/ioloop" "$mode" "$mnt/data" "$calls" "$rate")
  kill -TERM $pid
  wait $pid
  echo "$ns"
}

# run MODE CALLS RATE WHICH -> prints "cpu_ns wall_ns dropped events"
run() {
  local mode=$1 calls=$2 rate=$3 which=$4
  case $which in
    base) echo "$("$work/ioloop" "$mode" "$mnt/data" "$calls" "$rate") 0 0" ;;
    traced | traced-other)
      local ns d e bin=$FRAGKIT
      [[ $which == traced-other ]] && bin=$OTHER
      # With -o, fragkit's stdout is the command's: ioloop's ns per call.
      ns=$("$bin" trace --mount "$mnt" -o "$work/profile.json" -- \
        "$work/ioloop" "$mode" "$mnt/data" "$calls" "$rate" 2>/dev/null)
      d=$(grep -m1 '"dropped"' "$work/profile.json" | tr -dc 0-9)
      e=$(grep -m1 '"events"' "$work/profile.json" | tr -dc 0-9)
      echo "$ns $d $e"
      ;;
    floor) echo "$(beside "attached" "$mode" "$calls" "$rate" "$work/floor" "$work/floor.bpf.o") 0 0" ;;
    floor2) echo "$(beside "attached" "$mode" "$calls" "$rate" "$work/floor" "$work/floor2.bpf.o") 0 0" ;;
    filtered) echo "$(beside "tracing" "$mode" "$calls" "$rate" "$FRAGKIT" trace --comm fragkit-nomatch -o /dev/null) 0 0" ;;
    filtered-other) echo "$(beside "tracing" "$mode" "$calls" "$rate" "$OTHER" trace --comm fragkit-nomatch -o /dev/null) 0 0" ;;
  esac
}

configs=(base floor floor2 filtered traced)
[[ -n ${OTHER:-} ]] && configs+=(filtered-other traced-other)
printf '%-26s %9s %22s %9s %22s %9s %8s\n' loop cpu_ns "added: median (min..max)" wall_ns "added: median (min..max)" events dropped
for spec in "pread4k $PREAD_CALLS" "direct128k $DIRECT_CALLS"; do
  set -- $spec
  mode=$1 calls=$2
  : >"$work/results"
  for ((r = 0; r < ROUNDS; r++)); do
    for ((k = 0; k < ${#configs[@]}; k++)); do
      which=${configs[(k + r) % ${#configs[@]}]}
      echo "$r $which $(run "$mode" "$calls" 0 "$which")" >>"$work/results"
    done
  done
  # Per round: each configuration minus that round's base; then median and range.
  awk -v mode="$mode" -v n="$ROUNDS" -v configs="${configs[*]}" '
    { c[$1, $2] = $3; t[$1, $2] = $4; d[$2] += $5; e[$2] = $6 }
    function sortn(a, k,   i, j, x) { for (i = 2; i <= k; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x } }
    function med(a, k) { return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
    END {
      nc = split(configs, order, " ")
      for (i = 1; i <= nc; i++) { w = order[i]
        for (r = 0; r < n; r++) { ca[r + 1] = c[r, w] - c[r, "base"]; ta[r + 1] = t[r, w] - t[r, "base"]; cv[r + 1] = c[r, w]; tv[r + 1] = t[r, w] }
        sortn(ca, n); sortn(ta, n); sortn(cv, n); sortn(tv, n)
        printf "%-26s %9.1f %9.1f (%5.0f..%5.0f) %9.1f %9.1f (%5.0f..%5.0f) %9d %8d\n", mode " " w, med(cv, n), med(ca, n), ca[1], ca[n], med(tv, n), med(ta, n), ta[1], ta[n], e[w], d[w] } }' "$work/results"
done
echo "rounds: $ROUNDS (${configs[*]} once each per round, rotating order); cpu = the loop's own CPU time per call"

# Paced: 500k traced calls per second for 2 s; the tracer must lose nothing. (A loop that
# cannot keep the pace on a busy machine runs flat out instead: the achieved rate is shown.)
read -r c w d e < <(run pread4k 1000000 500000 traced)
rate=$(awk -v ns="$w" 'BEGIN { printf "%.0f", 1e9 / ns }')
printf '%-26s %9.1f %22s %9.1f %22s %9d %8d  (%s calls/s)\n' "pread4k traced 500k/s" "$c" - "$w" - "$e" "$d" "$rate"
[[ $d -eq 0 ]] || echo "WARNING: $d records dropped at $rate calls/s" >&2
