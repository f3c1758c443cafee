#!/usr/bin/env bash
# How big can the watch history get? Fills a database with `fragkit watch`'s own schema up
# to the row bound of every table (retention caps and windows at their defaults, 1 s ticks,
# F files in D directories with E extensions), inserting in time order as the watch does,
# and prints rows, bytes and bytes per row per table (dbstat, indexes included), the file
# size as written (the high-water mark: pruning frees pages for reuse, it never grows the
# file) and after VACUUM.
#
#   bench/watch-store-bound.sh [F] [D] [E]      (default: 100000 1000 10)
set -euo pipefail
# One line naming what failed, instead of a silent exit.
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: \`$BASH_COMMAND\` failed with status $?" >&2' ERR
cd "$(dirname "$0")/.."
F=${1:-100000}
D=${2:-1000}
E=${3:-10}
command -v sqlite3 >/dev/null || { echo "bench/watch-store-bound.sh: sqlite3 missing; run scripts/install-deps" >&2; exit 1; }
if [[ -z ${FRAGKIT:-} ]]; then
  cargo build --release --quiet
  FRAGKIT=$PWD/target/release/fragkit
fi
WORK=$(mktemp -d /tmp/fragkit-store-bound.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir "$WORK/empty"
DB=$WORK/watch.db
# The real schema: let fragkit create it.
"$FRAGKIT" watch "$WORK/empty" --events inotify --interval 1s --duration 1s --db "$DB" \
  --format json >/dev/null

# Row bounds (docs/watch.md): caps from store::Retention::default(), windows for 1 s ticks.
SAMPLES=4000000 GROUP_CAP=1000000 DELETED=250000 RENAMES=250000
TICKS=86400 MINUTES=20160 HOURS=336
G=$((D + E))
GROUP_ROWS=$((696 * G < GROUP_CAP ? 696 * G : GROUP_CAP))
M0=29000000 # a minute number of 2025

sqlite3 "$DB" <<EOF
PRAGMA journal_mode=WAL;
PRAGMA synchronous=OFF;
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < $F + $DELETED)
INSERT INTO files(id, path, dev, ino, ext, dir, first_seen, first_fragmented, deleted)
SELECT i, printf('/srv/db/shard-%04d/object-%08d.e%d', i % $D, i, i % $E), 2049, 1000000 + i,
       printf('e%d', i % $E), printf('/srv/db/shard-%04d', i % $D), 1740000000.25 + i,
       CASE WHEN i % 3 = 0 THEN 1740000100.5 + i END,
       CASE WHEN i > $F THEN 1740100000.75 + i END
FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < $RENAMES)
INSERT INTO renames SELECT 1 + i % $F, 1740000000.5 + i,
       printf('/srv/db/shard-%04d/object-%08d.tmp', i % $D, i),
       printf('/srv/db/shard-%04d/object-%08d.e1', i % $D, i) FROM n;
COMMIT;
-- Samples in time order: minute outer, file inner, as ticks write them.
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM n WHERE i < $SAMPLES - 1)
INSERT INTO file_samples
SELECT 1 + i % $F, $M0 + i / $F, ($M0 + i / $F) * 60.0 + 0.123,
       67108864 + i % 4096 * 4096, 67112960 + i % 4096 * 4096, 8 + i % 50, 4 + i % 40,
       600 + i % 100, 512
FROM n;
COMMIT;
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM n WHERE i < $GROUP_ROWS - 1)
INSERT INTO group_samples
SELECT CASE WHEN i % $G < $D THEN 'dir' ELSE 'ext' END,
       CASE WHEN i % $G < $D THEN printf('/srv/db/shard-%04d', i % $G) ELSE printf('e%d', i % $G - $D) END,
       $M0 + i / $G, ($M0 + i / $G) * 60.0 + 0.5,
       $F / $D, $F / $D / 3, 6710886400, 5000, 2500, 60000, 51200
FROM n;
COMMIT;
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM n WHERE i < $TICKS - 1)
INSERT INTO ticks SELECT 1740000000.123 + i, $F, $F / 3, 6710886400000, 800000 + i % 1000,
       400000 + i % 1000, 52000000, 51200000, i % 20, 1.25 + (i % 10) / 10.0 FROM n;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM n WHERE i < $MINUTES - 1)
INSERT INTO ticks_minute SELECT $M0 + i, ($M0 + i) * 60.0 + 59.5, $F, $F / 3, 6710886400000,
       800000 + i % 1000, 400000 + i % 1000, 52000000, 51200000, $F / 3 + 5, 400100 FROM n;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM n WHERE i < $HOURS - 1)
INSERT INTO ticks_hour SELECT 483000 + i, (483000 + i) * 3600.0 + 3599.5, $F, $F / 3,
       6710886400000, 800000 + i % 1000, 400000 + i % 1000, 52000000, 51200000, $F / 3 + 5,
       400100 FROM n;
COMMIT;
PRAGMA wal_checkpoint(TRUNCATE);
EOF

report() { # LABEL
  local size
  size=$(stat -c %s "$DB")
  echo "$1: $(python3 -c "print(f'{$size/1e6:.1f} MB')")"
  sqlite3 -separator $'\t' "$DB" "
    SELECT CASE WHEN m.type = 'index' THEN m.tbl_name ELSE s.name END AS t, sum(s.pgsize)
    FROM dbstat s JOIN sqlite_master m ON m.name = s.name GROUP BY t ORDER BY t;" |
  while IFS=$'\t' read -r table bytes; do
    rows=$(sqlite3 "$DB" "SELECT count(*) FROM $table")
    python3 -c "print(f'  {\"$table\":14s} {$rows:>10,d} rows {$bytes/1e6:8.1f} MB  {$bytes/max($rows,1):6.1f} bytes/row')"
  done
}
echo "history bound for $F files in $D directories, $E extensions, 1 s ticks, default retention"
report "as written"
sqlite3 "$DB" "VACUUM;"
report "after VACUUM"
