#!/usr/bin/env bash
# advise's predictions against what --apply achieved on the lab's aged file system, per
# workload: `fragkit lab --keep` ages a scratch FS (PaF, then FragPicker's synthetic files
# grown side by side) and traces the workload; then for each device a fresh block-for-block
# clone of the aged base gets `advise --apply` with the lab's traced profile (its paths moved
# to the clone) and the workload's request size. Prints per workload and device: the fix(es)
# chosen, the bytes predicted, moved and written by the device (/sys/block/DEV/stat, metadata
# and journal included), and the modeled read time predicted and achieved. Modeled figures
# are exact (no interval). advise's accuracy goal: bytes and time within 5%.
# Usage (root): bench/advise-lab.sh [FS] [SIZE] [WORKLOAD...]
#               (default: ext4 1G seq stride db; devices fast24 and hdd)
set -euo pipefail
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: \`$BASH_COMMAND\` failed with status $?" >&2' ERR
cd "$(dirname "$0")/.."
fs=${1:-ext4}; size=${2:-1G}; shift 2 || shift $#
workloads=("$@"); [[ ${#workloads[@]} -gt 0 ]] || workloads=(seq stride db)
[[ $(id -u) -eq 0 ]] || { echo "bench/advise-lab.sh: needs root (scratch file systems, lab, defrag)" >&2; exit 2; }
cargo build --release --locked -q
fk=$PWD/target/release/fragkit
work=$(mktemp -d /tmp/advise-lab.XXXXXX)
mps=(); dirs=()
# The kept mounts first, then the (then empty) image directories the labs made.
cleanup() {
  for m in "${mps[@]}"; do $fk scratch destroy "$m" >/dev/null 2>&1 || true; done
  for d in "${dirs[@]}"; do rmdir "$d"/* "$d" 2>/dev/null || true; done
}
trap cleanup EXIT
printf '%-7s %-7s %-12s %10s %10s %10s %8s %12s %12s %8s\n' \
  WORKLOAD DEVICE FIX PREDICTED MOVED DEV_WROTE ERR PRED_MS ACHIEVED_MS ERR
for w in "${workloads[@]}"; do
  lab=$work/lab-$w
  $fk lab --fs "$fs" --size "$size" --workload "$w" --iterations 1 --keep --out "$lab" \
    --format json > "$lab.json" 2> "$lab.err"
  # The lab's kept mounts (base and one clone per state), destroyed on the way out.
  mapfile -t kept < <(python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))["variables"]; [print(v[k]) for k in ("BASE","BEFORE","PICK","FULL","TOOL") if k in v]' "$lab.json")
  mps+=("${kept[@]}")
  dirs+=("$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["variables"]["IMAGES"])' "$lab.json")")
  read -r base pick rs < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["variables"]["BASE"], r["variables"]["PICK"], r["request_size"])' "$lab.json")
  for dev in fast24 hdd; do
    mp=$($fk scratch clone "$base" --dir "$work/$w-$dev" 2>/dev/null); mps+=("$mp")
    args=(--io-size "$rs")
    if [[ -s $lab/data/profile.json ]]; then
      # The profile names the pick clone's files: the same names under this clone.
      python3 -c 'import sys; t=open(sys.argv[1]).read(); open(sys.argv[2],"w").write(t.replace(sys.argv[3]+"/", sys.argv[4]+"/"))' \
        "$lab/data/profile.json" "$work/profile-$w-$dev.json" "$pick" "$mp"
      args+=(--profile "$work/profile-$w-$dev.json")
    fi
    sync; echo 3 > /proc/sys/vm/drop_caches
    $fk advise "$mp/work" "${args[@]}" --device "$dev" --apply --format json > "$work/$w-$dev.json" || true
    python3 - "$work/$w-$dev.json" "$w" "$dev" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["applied"]
w, dev = sys.argv[2], sys.argv[3]
if not a or not a["files"]:
    print(f"{w:<7} {dev:<7} nothing advised"); sys.exit()
err = lambda x, p: 100.0 * (x - p) / p if p else 0.0
M = 1 << 20
fixes = ",".join(sorted({f["fix"] for f in a["files"]}))
print(f'{w:<7} {dev:<7} {fixes:<12} {a["predicted_bytes"]/M:8.1f}Mi {a["moved_bytes"]/M:8.1f}Mi '
      f'{a["device_written_bytes"]/M:8.1f}Mi {err(a["device_written_bytes"], a["predicted_bytes"]):+7.1f}% '
      f'{a["predicted_ns"]/1e6:12.2f} {a["achieved_ns"]/1e6:12.2f} {err(a["achieved_ns"], a["predicted_ns"]):+7.1f}%')
PY
    $fk scratch destroy "$mp" >/dev/null
  done
done
echo "outputs: $work"
