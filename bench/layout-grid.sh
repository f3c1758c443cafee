#!/usr/bin/env bash
# `fragkit age layout` accuracy over a grid of frag sizes F and distances D, per file system:
# how many fragments have exactly F bytes and how many gaps exactly D bytes (FIEMAP), and
# what the layout report says about the pieces that are off. Needs root.
#
#   bench/layout-grid.sh                       # ext4 xfs btrfs × F {4K,12K,48K,128K,1M} × D {4K,200K,1M}
#   FS="ext4" F="12K" D="1M" bench/layout-grid.sh
#   SIZE=8M (the file, bench sweep's default)  SCRATCH=3G (holds the widest span, 2048 × 1 MiB)
set -euo pipefail
# One line naming what failed, instead of a silent exit.
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: \`$BASH_COMMAND\` failed with status $?" >&2' ERR
cd "$(dirname "$0")/.."
FRAGKIT=${FRAGKIT:-target/release/fragkit}
FS=${FS:-ext4 xfs btrfs}
F=${F:-4K 12K 48K 128K 1M}
D=${D:-4K 200K 1M}
SIZE=${SIZE:-8M}
SCRATCH=${SCRATCH:-3G}
out=$(mktemp -d "${TMPDIR:-/tmp}/layout-grid-XXXXXX")
printf '%-6s %5s %5s %6s %9s %9s %7s %7s %8s  %s\n' fs F D wanted fragments technique "F ok%" "D ok%" seconds "off (why)"
for fs in $FS; do
  mp=$("$FRAGKIT" scratch create --fs "$fs" --size "$SCRATCH")
  for f in $F; do
    for d in $D; do
      json="$out/$fs-$f-$d.json"
      t0=$(date +%s%N)
      if ! "$FRAGKIT" age layout "$mp/layout" --size "$SIZE" --frag-size "$f" --frag-distance "$d" \
          --format json >"$json" 2>"$out/$fs-$f-$d.err"; then
        printf '%-6s %5s %5s  failed: %s\n' "$fs" "$f" "$d" "$(tail -1 "$out/$fs-$f-$d.err")"
        continue
      fi
      t1=$(date +%s%N)
      python3 - "$json" "$fs" "$f" "$d" "$(( (t1 - t0) / 1000000 ))" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
q = r["requested"]
frags = r["fragments"]
f, d, size = q["frag_size"], q["frag_distance"], q["size"]
tail = size % f
ok_f = sum(1 for i, x in enumerate(frags)
           if x["length"] == f or (i == len(frags) - 1 and tail and x["length"] == tail))
gaps = [b["physical"] - (a["physical"] + a["length"]) for a, b in zip(frags, frags[1:])]
ok_d = sum(1 for g in gaps if g == d)
off = r.get("off_pieces", {})
why = ", ".join(f"{k} {v}" for k, v in sorted(off.get("by_reason", {}).items())) if off else ""
print(f"{sys.argv[2]:<6} {sys.argv[3]:>5} {sys.argv[4]:>5} {q['fragments']:>6} {len(frags):>9} "
      f"{r['technique']:>9} {100*ok_f/max(len(frags),1):>7.2f} {100*ok_d/max(len(gaps),1) if gaps else 100:>7.2f} "
      f"{int(sys.argv[5])/1000:>8.1f}  {why}")
PY
      rm -f "$mp/layout"
      sync
    done
  done
  "$FRAGKIT" scratch destroy "$mp" >/dev/null
done
echo "reports: $out" >&2
