#!/usr/bin/env bash
# xfstests' defragmentation tests (generic/018, generic/324) with `fragkit defrag --mode
# full` in the defragmenter's place, beside each file system's own tool (xfs_fsr, e4defrag,
# `btrfs filesystem defragment`). xfstests' `_defrag` checks extent counts, md5sum and
# `stat -c "a: %x m: %y c: %z"` before and after each defrag, with a remount between.
#
# xfstests is not part of fragkit: build it beside the project (git clone of
# https://git.kernel.org/pub/scm/fs/xfs/xfstests-dev.git or its GitHub mirror
# kdave/xfstests; `make`; the users its README names) and pass its directory. This script
# adds one line to that checkout's common/defrag (after `_require_defrag`'s `esac`:
# `DEFRAG_PROG` from `$FRAGKIT_DEFRAG` when set) unless it is there.
#
# fragkit's xfs migrator needs the exchange-range feature, which Debian 12's mkfs.xfs
# (xfsprogs 6.1) cannot set: a mkfs.xfs wrapper first in PATH sets the incompat bit (0x40)
# with xfs_db after the real mkfs, as `fragkit scratch` does; xfs_repair 6.1 refuses that
# bit, so an xfs_repair wrapper clears it for the check and sets it back after (it only
# guards log recovery of exchange intents; xfstests checks the log is clean separately).
#
# Devices: two RAM-backed loop devices (3 GiB each, in /dev/shm), detached at the end.
#
# Usage (root): bench/xfstests-defrag.sh XFSTESTS_DIR [FRAGKIT_BIN] [FS...]
#   FS: xfs ext4 btrfs (default all three); each runs native then fragkit.
#   XFS_MOUNT_OPTIONS: extra xfs mount options (e.g. "-o allocsize=4096": without it xfs's
#   speculative preallocation leaves generic/018's last file in 22 extents, not 16, and
#   the test is "not run" for every defragmenter).
#   XFSTESTS_RESULTS: a directory to keep xfstests' results in (each test's .full holds
#   the defragmenter's output).
set -euo pipefail
# One line naming what failed, instead of a silent exit.
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: \`$BASH_COMMAND\` failed with status $?" >&2' ERR
here=$(cd "$(dirname "$0")/.." && pwd)
if [[ $(id -u) -ne 0 ]]; then
  echo "bench/xfstests-defrag.sh: needs root (loop devices, mkfs, mount)" >&2
  exit 2
fi
xt=${1:?usage: bench/xfstests-defrag.sh XFSTESTS_DIR [FRAGKIT_BIN] [FS...]}
xt=$(cd "$xt" && pwd)
[[ -x $xt/check && -f $xt/common/defrag ]] || {
  echo "bench/xfstests-defrag.sh: $xt is not a built xfstests checkout (no ./check or common/defrag)" >&2
  exit 2
}
bin=${2:-$here/target/release/fragkit}
[[ -x $bin ]] || { echo "bench/xfstests-defrag.sh: $bin: no fragkit binary" >&2; exit 2; }
bin=$(realpath "$bin")
shift $(($# >= 2 ? 2 : $#))
fss=("$@")
((${#fss[@]})) || fss=(xfs ext4 btrfs)

work=$(mktemp -d /dev/shm/fragkit-xfstests.XXXXXX)
wrap=$work/bin
mkdir -p "$wrap" /mnt/fragkit-xt-test /mnt/fragkit-xt-scratch
loops=()
cleanup() {
  umount /mnt/fragkit-xt-test /mnt/fragkit-xt-scratch 2>/dev/null || true
  for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

cat >"$wrap/fragkit-defrag" <<EOF
#!/bin/sh
# xfstests runs "\$DEFRAG_PROG -v FILE".
[ "\$1" = -v ] && shift
exec "$bin" defrag --mode full "\$@"
EOF
cat >"$wrap/mkfs.xfs" <<'EOF'
#!/bin/sh
/usr/sbin/mkfs.xfs "$@" || exit $?
for a in "$@"; do [ "$a" = -N ] && exit 0; done
for dev in "$@"; do :; done
cur=$(/usr/sbin/xfs_db -r -c 'sb 0' -c 'p features_incompat' "$dev" | sed -n 's/^features_incompat = //p')
[ -n "$cur" ] || { echo "mkfs.xfs wrapper: cannot read features_incompat on $dev" >&2; exit 1; }
/usr/sbin/xfs_db -x -c 'sb 0' -c "write -d features_incompat $(printf '0x%x' $((cur | 0x40)))" "$dev" >/dev/null
EOF
cat >"$wrap/xfs_repair" <<'EOF'
#!/bin/sh
for dev in "$@"; do :; done
cur=$(/usr/sbin/xfs_db -r -c 'sb 0' -c 'p features_incompat' "$dev" 2>/dev/null | sed -n 's/^features_incompat = //p')
if [ -n "$cur" ] && [ $((cur & 0x40)) -ne 0 ]; then
  /usr/sbin/xfs_db -x -c 'sb 0' -c "write -d features_incompat $(printf '0x%x' $((cur & ~0x40)))" "$dev" >/dev/null || exit 1
  /usr/sbin/xfs_repair "$@"; rc=$?
  /usr/sbin/xfs_db -x -c 'sb 0' -c "write -d features_incompat $cur" "$dev" >/dev/null || exit 1
  exit $rc
fi
exec /usr/sbin/xfs_repair "$@"
EOF
chmod +x "$wrap"/*

hook='[ -n "$FRAGKIT_DEFRAG" ] && DEFRAG_PROG="$FRAGKIT_DEFRAG"'
if ! grep -qF "$hook" "$xt/common/defrag"; then
  # After the esac that ends _require_defrag's case (its first esac).
  awk -v hook="    $hook" '{print} /^    esac$/ && !done {print hook; done=1}' \
    "$xt/common/defrag" >"$work/defrag" && cat "$work/defrag" >"$xt/common/defrag"
  grep -qF "$hook" "$xt/common/defrag" || {
    echo "bench/xfstests-defrag.sh: could not add the DEFRAG_PROG hook to $xt/common/defrag" >&2
    exit 2
  }
fi

for name in test scratch; do
  truncate -s 3G "$work/$name.img"
  loops+=("$(losetup -f --show "$work/$name.img")")
done
test_dev=${loops[0]} scratch_dev=${loops[1]}
commit=$(git -C "$xt" rev-parse HEAD 2>/dev/null || echo unknown)
echo "xfstests $commit; fragkit $("$bin" --version); kernel $(uname -r)"
printf '%-6s %-8s %-12s %s\n' FS TOOL TEST RESULT
# XFSTESTS_RESULTS: where each test's .full/.out.bad stay (default: removed at the end).
results=${XFSTESTS_RESULTS:-$work/results}
for fs in "${fss[@]}"; do
  for kind in native fragkit; do
    (
      cd "$xt"
      # The devices in a config file of this run's own (HOST_OPTIONS), not the checkout's
      # local.config, which xfstests would read over the environment.
      cat >"$work/local.config" <<CONFIG
export FSTYP=$fs
export TEST_DEV=$test_dev
export TEST_DIR=/mnt/fragkit-xt-test
export SCRATCH_DEV=$scratch_dev
export SCRATCH_MNT=/mnt/fragkit-xt-scratch
export RESULT_BASE=$results/$fs-$kind
CONFIG
      [[ $fs == xfs ]] && echo "export MOUNT_OPTIONS=\"${XFS_MOUNT_OPTIONS:-}\"" >>"$work/local.config"
      export PATH=$wrap:$PATH HOST_OPTIONS=$work/local.config
      # shellcheck source=/dev/null
      source "$work/local.config"
      unset FRAGKIT_DEFRAG
      [[ $kind == fragkit ]] && export FRAGKIT_DEFRAG=$wrap/fragkit-defrag
      umount "$TEST_DIR" "$SCRATCH_MNT" 2>/dev/null || true
      case $fs in
        xfs) mkfs.xfs -f -q "$TEST_DEV" ;;
        ext4) mkfs.ext4 -F -q "$TEST_DEV" ;;
        btrfs) mkfs.btrfs -f -q "$TEST_DEV" >/dev/null ;;
      esac
      ./check generic/018 generic/324 >"$work/$fs-$kind.log" 2>&1 || true
    )
    for t in generic/018 generic/324; do
      d=$results/$fs-$kind/$t
      if [[ -f $d.notrun ]]; then r="not run: $(head -1 "$d.notrun")"
      elif [[ -f $d.out.bad ]]; then r="FAILED: $(grep -h -m1 -E 'changed|Failed|increased' "$d.out.bad" 2>/dev/null || true)"
      elif grep -q "^$t" "$work/$fs-$kind.log"; then r=passed
      else r="did not run: $(tail -3 "$work/$fs-$kind.log" | tr '\n' ' ')"; fi
      # What fragkit moved, from its own reports in the test's log.
      if [[ $kind == fragkit && -f $d.full ]]; then
        moved=$(grep -c '^ranges: .* [1-9][0-9]* moved' "$d.full" || true)
        said=$(grep -c 'atime, mtime and ctime as before' "$d.full" || true)
        r+=" (fragkit moved data in $moved runs, times kept said in $said)"
      fi
      printf '%-6s %-8s %-12s %s\n' "$fs" "$kind" "$t" "$r"
    done
  done
done
