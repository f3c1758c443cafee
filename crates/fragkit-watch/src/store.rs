//! SQLite history of a watch: what changed, when, and the totals over time.
//!
//! Bounded by design (docs/watch.md has the arithmetic):
//! - `files`: one row per file ever seen (path, inode, extension, directory, when first seen,
//!   when first fragmented, when deleted). A rename updates the row, so history follows the
//!   inode, and is logged in `renames`.
//! - `file_samples`: a file's size/extents/fragments/S(R)/I(R), written only when they
//!   changed, at most one row per file per minute (later changes in the same minute replace
//!   it). Rows older than `minute_hours` are thinned to the last one per hour; rows older
//!   than `keep_days` are deleted; and the table never holds more than `max_file_samples`
//!   rows (oldest go first).
//! - `ticks`: the totals per tick, written only when they changed (or once a minute),
//!   kept `tick_hours`; `ticks_minute` (last value and peak per minute) kept `keep_days`;
//!   `ticks_hour` kept forever (8,760 rows a year).
//! - `group_samples`: totals per extension and per directory, per minute when changed,
//!   thinned and expired like `file_samples`, and capped at `max_group_samples` rows.
//! - What churn leaves behind is capped too, so no workload makes the file grow without
//!   bound: `renames` rows expire after `keep_days` and never exceed `max_renames`; rows of
//!   deleted files (kept for their first-fragmented moment) never exceed
//!   `max_deleted_files` (oldest deletions go first, with their samples).

use std::path::Path;

use anyhow::{Context, Result};
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

/// What fragkit keeps per file per sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FileSummary {
    pub size: u64,
    pub allocated: u64,
    pub extents: u64,
    pub fragments: u64,
    /// S(R) and I(R) at the watch's request size.
    pub split: u64,
    pub ideal: u64,
}

impl FileSummary {
    pub fn is_fragmented(&self) -> bool {
        self.fragments > 1
    }
}

/// Totals over a set of files (all, one extension, one directory).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    pub files: u64,
    pub fragmented_files: u64,
    pub bytes: u64,
    pub extents: u64,
    pub fragments: u64,
    pub split: u64,
    pub ideal: u64,
}

impl Totals {
    pub fn add(&mut self, f: &FileSummary) {
        self.files += 1;
        self.fragmented_files += f.is_fragmented() as u64;
        self.bytes += f.size;
        self.extents += f.extents;
        self.fragments += f.fragments;
        self.split += f.split;
        self.ideal += f.ideal;
    }
    pub fn sub(&mut self, f: &FileSummary) {
        self.files -= 1;
        self.fragmented_files -= f.is_fragmented() as u64;
        self.bytes -= f.size;
        self.extents -= f.extents;
        self.fragments -= f.fragments;
        self.split -= f.split;
        self.ideal -= f.ideal;
    }
    pub fn extra_requests(&self) -> u64 {
        self.split - self.ideal.min(self.split)
    }
}

/// How long each resolution is kept.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    pub tick_hours: u64,
    pub minute_hours: u64,
    pub keep_days: u64,
    pub max_file_samples: u64,
    pub max_group_samples: u64,
    pub max_deleted_files: u64,
    pub max_renames: u64,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            tick_hours: 24,
            minute_hours: 6,
            keep_days: 14,
            // Row sizes measured by bench/watch-store-bound.sh; docs/watch.md has the sum.
            max_file_samples: 4_000_000,
            max_group_samples: 1_000_000,
            max_deleted_files: 250_000,
            max_renames: 250_000,
        }
    }
}

pub struct Store {
    conn: Connection,
    pub retention: Retention,
    last_tick: Option<(f64, Totals)>,
    last_prune: f64,
    /// The database file, for messages.
    path: std::path::PathBuf,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files(
  id INTEGER PRIMARY KEY, path TEXT NOT NULL, dev INTEGER NOT NULL, ino INTEGER NOT NULL,
  ext TEXT NOT NULL, dir TEXT NOT NULL, first_seen REAL NOT NULL,
  first_fragmented REAL, deleted REAL, path_bytes BLOB);
CREATE INDEX IF NOT EXISTS files_live_inode ON files(dev, ino) WHERE deleted IS NULL;
CREATE TABLE IF NOT EXISTS renames(
  file_id INTEGER NOT NULL, t REAL NOT NULL, old_path TEXT NOT NULL, new_path TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS file_samples(
  file_id INTEGER NOT NULL, minute INTEGER NOT NULL, t REAL NOT NULL,
  size INTEGER, allocated INTEGER, extents INTEGER, fragments INTEGER,
  split INTEGER, ideal INTEGER, PRIMARY KEY(file_id, minute)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS file_samples_minute ON file_samples(minute);
CREATE TABLE IF NOT EXISTS ticks(
  t REAL PRIMARY KEY, files INTEGER, fragmented_files INTEGER, bytes INTEGER,
  extents INTEGER, fragments INTEGER, split INTEGER, ideal INTEGER,
  changed_files INTEGER, tick_ms REAL);
CREATE TABLE IF NOT EXISTS ticks_minute(
  minute INTEGER PRIMARY KEY, t REAL, files INTEGER, fragmented_files INTEGER,
  bytes INTEGER, extents INTEGER, fragments INTEGER, split INTEGER, ideal INTEGER,
  max_fragmented_files INTEGER, max_fragments INTEGER);
CREATE TABLE IF NOT EXISTS ticks_hour(
  hour INTEGER PRIMARY KEY, t REAL, files INTEGER, fragmented_files INTEGER,
  bytes INTEGER, extents INTEGER, fragments INTEGER, split INTEGER, ideal INTEGER,
  max_fragmented_files INTEGER, max_fragments INTEGER);
CREATE TABLE IF NOT EXISTS group_samples(
  kind TEXT NOT NULL, name TEXT NOT NULL, minute INTEGER NOT NULL, t REAL NOT NULL,
  files INTEGER, fragmented_files INTEGER, bytes INTEGER, extents INTEGER,
  fragments INTEGER, split INTEGER, ideal INTEGER,
  PRIMARY KEY(kind, name, minute)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS group_samples_minute ON group_samples(minute);
";

/// A row of the totals series, at whatever resolution it came from.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SeriesPoint {
    pub t: f64,
    #[serde(flatten)]
    pub totals: Totals,
}

/// A file's first fragmented moment.
#[derive(Debug, Clone, Serialize)]
pub struct FirstFragmented {
    pub path: String,
    /// The name's bytes when it is not UTF-8 (`path` has U+FFFD for them), as in scan's
    /// JSON: the file can be found again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_bytes: Option<Vec<u8>>,
    pub t: f64,
    pub fragments_now: u64,
    pub deleted: Option<f64>,
}

fn minute(t: f64) -> i64 {
    (t / 60.0).floor() as i64
}

fn totals_from_row(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<Totals> {
    Ok(Totals {
        files: r.get::<_, i64>(first)? as u64,
        fragmented_files: r.get::<_, i64>(first + 1)? as u64,
        bytes: r.get::<_, i64>(first + 2)? as u64,
        extents: r.get::<_, i64>(first + 3)? as u64,
        fragments: r.get::<_, i64>(first + 4)? as u64,
        split: r.get::<_, i64>(first + 5)? as u64,
        ideal: r.get::<_, i64>(first + 6)? as u64,
    })
}

/// Refuse a history file (or one of SQLite's companions) that is a symbolic link, or
/// that another user owns: either could be planted in a shared directory to make fragkit
/// (maybe root) write where its owner chose, or read history they wrote.
fn check_own_file(path: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("{}: cannot stat", path.display())),
    };
    if m.file_type().is_symlink() {
        let to = std::fs::read_link(path)
            .map(|t| t.display().to_string())
            .unwrap_or_else(|_| "?".into());
        anyhow::bail!(
            "{}: a symbolic link (to {to}); refused: the history database is never opened through a link",
            path.display()
        );
    }
    let me = nix::unistd::geteuid().as_raw();
    if m.uid() != me {
        anyhow::bail!(
            "{}: owned by {}, not by {}; refused: the history database must be the running user's own file",
            path.display(),
            user_name(m.uid()),
            user_name(me)
        );
    }
    Ok(())
}

/// "name (uid N)", or "uid N" for a uid with no name.
fn user_name(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => format!("{} (uid {uid})", u.name),
        _ => format!("uid {uid}"),
    }
}

/// Create the database file if it is missing, readable by its owner only (it lists file
/// names), never through a link.
fn create_private(path: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e).with_context(|| format!("{}: cannot create", path.display())),
    }
}

impl Store {
    /// Open (creating if needed) a history database: never through a symbolic link,
    /// never another user's file; a new file is made with mode 0600.
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("{}: cannot create directory", dir.display()))?;
        }
        check_own_file(path)?;
        for s in ["-wal", "-shm", "-journal"] {
            let mut p = path.as_os_str().to_os_string();
            p.push(s);
            check_own_file(Path::new(&p))?;
        }
        create_private(path)?;
        // NOFOLLOW: SQLite itself refuses a link at the path (it would otherwise resolve
        // it), closing the gap between the check above and the open.
        let flags = rusqlite::OpenFlags::default() | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let conn = Connection::open_with_flags(path, flags)
            .with_context(|| format!("{}: cannot open SQLite database", path.display()))?;
        // WAL + NORMAL: one fsync per checkpoint, not per tick; a crash loses at most
        // the last ticks, never the database.
        // The WAL is cut back to 64 MiB after a checkpoint (it keeps its high-water size
        // otherwise, e.g. that of the first scan's transaction).
        conn.pragma_update(None, "journal_mode", "WAL")
            .and_then(|_| conn.pragma_update(None, "synchronous", "NORMAL"))
            .and_then(|_| conn.pragma_update(None, "journal_size_limit", 64i64 << 20))
            .and_then(|_| conn.execute_batch(SCHEMA))
            .with_context(|| {
                format!(
                    "{}: not a fragkit watch database (or not writable)",
                    path.display()
                )
            })?;
        let st = Store {
            conn,
            retention: Retention::default(),
            last_tick: None,
            last_prune: 0.0,
            path: path.to_path_buf(),
        };
        // A history from before names' bytes were kept: add the column (NULL: UTF-8).
        if !st.has_path_bytes()? {
            st.conn
                .execute_batch("ALTER TABLE files ADD COLUMN path_bytes BLOB")
                .with_context(|| format!("{}: cannot add path_bytes", path.display()))?;
        }
        Ok(st)
    }

    /// Open an existing database for reading (report): a missing file is an error.
    pub fn open_existing(path: &Path) -> Result<Store> {
        if !path.is_file() {
            anyhow::bail!(
                "{}: no such database; expected the --db file a `fragkit watch` wrote",
                path.display()
            );
        }
        let ticks = |conn: &Connection| -> rusqlite::Result<Option<String>> {
            conn.query_row(
                "SELECT name FROM sqlite_master WHERE type='table' AND name='ticks'",
                [],
                |r| r.get(0),
            )
            .optional()
        };
        let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .with_context(|| format!("{}: cannot open SQLite database", path.display()))?;
        let (conn, ok) = match ticks(&conn) {
            Ok(ok) => (conn, ok),
            // A WAL database on a read-only mount (or in a directory we cannot write) cannot
            // get its shared-memory file: read it as immutable, which needs none.
            Err(first) => {
                let uri = format!("file:{}?immutable=1", uri_path(path));
                let conn = Connection::open_with_flags(
                    &uri,
                    rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
                        | rusqlite::OpenFlags::SQLITE_OPEN_URI,
                )
                .with_context(|| format!("{}: cannot open SQLite database", path.display()))?;
                let ok = ticks(&conn).with_context(|| {
                    format!("{}: cannot read the database ({first})", path.display())
                })?;
                (conn, ok)
            }
        };
        if ok.is_none() {
            anyhow::bail!(
                "{}: not a fragkit watch database (no ticks table)",
                path.display()
            );
        }
        Ok(Store {
            conn,
            retention: Retention::default(),
            last_tick: None,
            last_prune: 0.0,
            path: path.to_path_buf(),
        })
    }

    pub fn begin(&self) -> Result<()> {
        self.conn.execute_batch("BEGIN")?;
        Ok(())
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Undo the open transaction after a failed write (none open is fine: SQLite rolls
    /// back by itself after some errors), and forget what the store remembers of writes
    /// that were undone.
    pub fn rollback(&mut self) {
        let _ = self.conn.execute_batch("ROLLBACK");
        self.last_tick = None;
    }

    /// Whether the database takes a write now (after it failed): one small row.
    pub fn probe(&self) -> Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES('last_write_probe', ?1)",
            params![crate::engine::now().to_string()],
        )?;
        Ok(())
    }

    pub fn commit(&self) -> Result<()> {
        self.conn.execute_batch("COMMIT")?;
        Ok(())
    }

    /// The live (not deleted) file with this inode, if any: (id, path).
    pub(crate) fn file_by_inode(&self, dev: u64, ino: u64) -> Result<Option<(i64, String)>> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT id, path FROM files WHERE dev=?1 AND ino=?2 AND deleted IS NULL",
            )?
            .query_row(params![dev as i64, ino as i64], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?)
    }

    /// Ids of all files not marked deleted.
    pub(crate) fn live_ids(&self) -> Result<Vec<i64>> {
        let mut st = self
            .conn
            .prepare_cached("SELECT id FROM files WHERE deleted IS NULL")?;
        let ids = st
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<Vec<i64>>>()?;
        Ok(ids)
    }

    pub(crate) fn new_file(
        &self,
        path: impl AsRef<Path>,
        dev: u64,
        ino: u64,
        ext: &str,
        dir: &str,
        t: f64,
    ) -> Result<i64> {
        let (text, bytes) = path_columns(path.as_ref());
        self.conn
            .prepare_cached(
                "INSERT INTO files(path, dev, ino, ext, dir, first_seen, path_bytes) VALUES(?1,?2,?3,?4,?5,?6,?7)",
            )?
            .execute(params![text, dev as i64, ino as i64, ext, dir, t, bytes])?;
        Ok(self.conn.last_insert_rowid())
    }

    pub fn rename(
        &self,
        id: i64,
        old: &str,
        new: impl AsRef<Path>,
        ext: &str,
        dir: &str,
        t: f64,
    ) -> Result<()> {
        let (new, bytes) = path_columns(new.as_ref());
        self.conn
            .prepare_cached("UPDATE files SET path=?2, ext=?3, dir=?4, path_bytes=?5 WHERE id=?1")?
            .execute(params![id, new, ext, dir, bytes])?;
        self.conn
            .prepare_cached(
                "INSERT INTO renames(file_id, t, old_path, new_path) VALUES(?1,?2,?3,?4)",
            )?
            .execute(params![id, t, old, new])?;
        Ok(())
    }

    pub fn delete(&self, id: i64, t: f64) -> Result<()> {
        self.conn
            .prepare_cached("UPDATE files SET deleted=?2 WHERE id=?1 AND deleted IS NULL")?
            .execute(params![id, t])?;
        Ok(())
    }

    /// Record a file's new state (called only when it changed).
    pub fn sample(&self, id: i64, t: f64, s: &FileSummary) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO file_samples
                 (file_id, minute, t, size, allocated, extents, fragments, split, ideal)
                 VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9)",
            )?
            .execute(params![
                id,
                minute(t),
                t,
                s.size as i64,
                s.allocated as i64,
                s.extents as i64,
                s.fragments as i64,
                s.split as i64,
                s.ideal as i64
            ])?;
        if s.is_fragmented() {
            self.conn
                .prepare_cached(
                    "UPDATE files SET first_fragmented=?2 WHERE id=?1 AND first_fragmented IS NULL",
                )?
                .execute(params![id, t])?;
        }
        Ok(())
    }

    /// Totals of one extension ("ext") or directory ("dir"), when they changed.
    pub fn group(&self, kind: &str, name: &str, t: f64, g: &Totals) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO group_samples
                 (kind, name, minute, t, files, fragmented_files, bytes, extents, fragments, split, ideal)
                 VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11)",
            )?
            .execute(params![
                kind,
                name,
                minute(t),
                t,
                g.files as i64,
                g.fragmented_files as i64,
                g.bytes as i64,
                g.extents as i64,
                g.fragments as i64,
                g.split as i64,
                g.ideal as i64
            ])?;
        Ok(())
    }

    /// Totals at the end of a tick; stored only when they changed or a minute has passed.
    pub fn tick(&mut self, t: f64, s: &Totals, changed_files: u64, tick_ms: f64) -> Result<()> {
        let due = match self.last_tick {
            None => true,
            Some((lt, last)) => last != *s || t - lt >= 60.0,
        };
        if !due {
            return Ok(());
        }
        self.last_tick = Some((t, *s));
        let v = [
            s.files,
            s.fragmented_files,
            s.bytes,
            s.extents,
            s.fragments,
            s.split,
            s.ideal,
        ]
        .map(|x| x as i64);
        self.conn
            .prepare_cached("INSERT OR REPLACE INTO ticks VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)")?
            .execute(params![
                t,
                v[0],
                v[1],
                v[2],
                v[3],
                v[4],
                v[5],
                v[6],
                changed_files as i64,
                tick_ms
            ])?;
        for (table, key, bucket) in [
            ("ticks_minute", "minute", minute(t)),
            ("ticks_hour", "hour", (t / 3600.0).floor() as i64),
        ] {
            let sql = format!(
                "INSERT INTO {table} VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?4,?7)
                 ON CONFLICT({key}) DO UPDATE SET t=?2, files=?3, fragmented_files=?4,
                 bytes=?5, extents=?6, fragments=?7, split=?8, ideal=?9,
                 max_fragmented_files=max(max_fragmented_files, ?4),
                 max_fragments=max(max_fragments, ?7)"
            );
            self.conn
                .prepare_cached(&sql)?
                .execute(params![bucket, t, v[0], v[1], v[2], v[3], v[4], v[5], v[6]])?;
        }
        Ok(())
    }

    /// Apply retention (cheap when run often: each step touches only the rows that aged
    /// out since the last run). Runs at most every ten minutes unless `force`.
    pub fn prune(&mut self, now: f64, force: bool) -> Result<()> {
        if !force && now - self.last_prune < 600.0 {
            return Ok(());
        }
        self.last_prune = now;
        let r = self.retention;
        let thin_before = minute(now - r.minute_hours as f64 * 3600.0);
        let keep_after = minute(now - r.keep_days as f64 * 86400.0);
        let thinned_upto: i64 = self
            .conn
            .query_row("SELECT value FROM meta WHERE key='thinned_upto'", [], |r| {
                r.get::<_, String>(0)
            })
            .optional()?
            .and_then(|v| v.parse().ok())
            .unwrap_or(i64::MIN / 2);
        // Thin whole hours only, so the survivor of an hour is final.
        let thin_to = thin_before.div_euclid(60) * 60;
        if thin_to > thinned_upto {
            let from = thinned_upto.max(keep_after.div_euclid(60) * 60 - 60);
            self.conn.execute(
                "DELETE FROM file_samples WHERE minute >= ?1 AND minute < ?2 AND EXISTS
                 (SELECT 1 FROM file_samples s WHERE s.file_id = file_samples.file_id
                  AND s.minute > file_samples.minute AND s.minute < (file_samples.minute / 60 + 1) * 60)",
                params![from, thin_to],
            )?;
            self.conn.execute(
                "DELETE FROM group_samples WHERE minute >= ?1 AND minute < ?2 AND EXISTS
                 (SELECT 1 FROM group_samples s WHERE s.kind = group_samples.kind
                  AND s.name = group_samples.name AND s.minute > group_samples.minute
                  AND s.minute < (group_samples.minute / 60 + 1) * 60)",
                params![from, thin_to],
            )?;
            self.conn.execute(
                "INSERT OR REPLACE INTO meta VALUES('thinned_upto', ?1)",
                params![thin_to.to_string()],
            )?;
        }
        self.conn.execute(
            "DELETE FROM file_samples WHERE minute < ?1",
            params![keep_after],
        )?;
        self.conn.execute(
            "DELETE FROM group_samples WHERE minute < ?1",
            params![keep_after],
        )?;
        self.conn.execute(
            "DELETE FROM ticks_minute WHERE minute < ?1",
            params![keep_after],
        )?;
        self.conn.execute(
            "DELETE FROM ticks WHERE t < ?1",
            params![now - r.tick_hours as f64 * 3600.0],
        )?;
        self.conn.execute(
            "DELETE FROM renames WHERE t < ?1",
            params![keep_after as f64 * 60.0],
        )?;
        // Caps, oldest rows first.
        let excess = |sql: &str, max: u64| -> Result<i64> {
            let n: i64 = self.conn.query_row(sql, [], |r| r.get(0))?;
            Ok(n - max as i64)
        };
        let e = excess("SELECT count(*) FROM file_samples", r.max_file_samples)?;
        if e > 0 {
            self.conn.execute(
                "DELETE FROM file_samples WHERE (file_id, minute) IN
                 (SELECT file_id, minute FROM file_samples ORDER BY minute LIMIT ?1)",
                params![e],
            )?;
        }
        let e = excess("SELECT count(*) FROM group_samples", r.max_group_samples)?;
        if e > 0 {
            self.conn.execute(
                "DELETE FROM group_samples WHERE (kind, name, minute) IN
                 (SELECT kind, name, minute FROM group_samples ORDER BY minute LIMIT ?1)",
                params![e],
            )?;
        }
        let e = excess("SELECT count(*) FROM renames", r.max_renames)?;
        if e > 0 {
            self.conn.execute(
                "DELETE FROM renames WHERE rowid IN
                 (SELECT rowid FROM renames ORDER BY t LIMIT ?1)",
                params![e],
            )?;
        }
        let e = excess(
            "SELECT count(*) FROM files WHERE deleted IS NOT NULL",
            r.max_deleted_files,
        )?;
        if e > 0 {
            self.conn.execute_batch(&format!(
                "CREATE TEMP TABLE IF NOT EXISTS doomed(id INTEGER PRIMARY KEY);
                 DELETE FROM doomed;
                 INSERT INTO doomed SELECT id FROM files WHERE deleted IS NOT NULL
                   ORDER BY deleted LIMIT {e};
                 DELETE FROM file_samples WHERE file_id IN (SELECT id FROM doomed);
                 DELETE FROM renames WHERE file_id IN (SELECT id FROM doomed);
                 DELETE FROM files WHERE id IN (SELECT id FROM doomed);
                 DELETE FROM doomed;"
            ))?;
        }
        // Deleted files whose samples have all expired leave nothing worth a row.
        self.conn.execute(
            "DELETE FROM files WHERE deleted IS NOT NULL AND deleted < ?1
             AND NOT EXISTS (SELECT 1 FROM file_samples s WHERE s.file_id = files.id)",
            params![keep_after as f64 * 60.0],
        )?;
        Ok(())
    }

    /// Row counts per table, for reports and the bound check.
    pub fn row_counts(&self) -> Result<Vec<(String, u64)>> {
        let mut out = Vec::new();
        for t in [
            "files",
            "renames",
            "file_samples",
            "ticks",
            "ticks_minute",
            "ticks_hour",
            "group_samples",
        ] {
            let n: i64 = self
                .conn
                .query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get(0))?;
            out.push((t.to_string(), n as u64));
        }
        Ok(out)
    }

    /// The totals over time, finest resolution available for each period: tick rows where
    /// kept, then minutes, then hours.
    pub fn series(&self) -> Result<Vec<SeriesPoint>> {
        let cols = "files, fragmented_files, bytes, extents, fragments, split, ideal";
        let mut out: Vec<SeriesPoint> = Vec::new();
        let read = |sql: String, out: &mut Vec<SeriesPoint>| -> Result<()> {
            let mut st = self.conn.prepare(&sql)?;
            let rows = st.query_map([], |r| {
                Ok(SeriesPoint {
                    t: r.get(0)?,
                    totals: totals_from_row(r, 1)?,
                })
            })?;
            for p in rows {
                out.push(p?);
            }
            Ok(())
        };
        let first_tick: Option<f64> = self
            .conn
            .query_row("SELECT min(t) FROM ticks", [], |r| r.get(0))?;
        let first_minute: Option<f64> =
            self.conn
                .query_row("SELECT min(t) FROM ticks_minute", [], |r| r.get(0))?;
        let m_end = first_minute.or(first_tick).unwrap_or(f64::MAX);
        let t_end = first_tick.unwrap_or(f64::MAX);
        read(
            format!("SELECT t, {cols} FROM ticks_hour WHERE t < {m_end} ORDER BY t"),
            &mut out,
        )?;
        read(
            format!("SELECT t, {cols} FROM ticks_minute WHERE t < {t_end} ORDER BY t"),
            &mut out,
        )?;
        read(format!("SELECT t, {cols} FROM ticks ORDER BY t"), &mut out)?;
        Ok(out)
    }

    /// Files in order of the moment they first became fragmented.
    pub fn first_fragmented(&self) -> Result<Vec<FirstFragmented>> {
        // A history written before names' bytes were kept has no path_bytes column.
        let bytes = if self.has_path_bytes()? {
            "f.path_bytes"
        } else {
            "NULL"
        };
        let mut st = self.conn.prepare(&format!(
            "SELECT f.path, f.first_fragmented, f.deleted,
                    (SELECT fragments FROM file_samples s WHERE s.file_id = f.id
                     ORDER BY minute DESC LIMIT 1), {bytes}
             FROM files f WHERE f.first_fragmented IS NOT NULL ORDER BY f.first_fragmented, f.path"
        ))?;
        let rows = st.query_map([], |r| {
            Ok(FirstFragmented {
                path: r.get(0)?,
                path_bytes: r.get(4)?,
                t: r.get(1)?,
                deleted: r.get(2)?,
                fragments_now: r.get::<_, Option<i64>>(3)?.unwrap_or(0) as u64,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    fn has_path_bytes(&self) -> Result<bool> {
        let n: i64 = self.conn.query_row(
            "SELECT count(*) FROM pragma_table_info('files') WHERE name='path_bytes'",
            [],
            |r| r.get(0),
        )?;
        Ok(n > 0)
    }

    /// A file's samples by its current or any former path: (t, summary).
    pub fn file_history(&self, path: &str) -> Result<Vec<(f64, FileSummary)>> {
        let id: Option<i64> = self
            .conn
            .query_row(
                "SELECT id FROM files WHERE path=?1 ORDER BY deleted IS NOT NULL, id DESC LIMIT 1",
                params![path],
                |r| r.get(0),
            )
            .optional()?;
        let Some(id) = id else { return Ok(Vec::new()) };
        let mut st = self.conn.prepare(
            "SELECT t, size, allocated, extents, fragments, split, ideal FROM file_samples
             WHERE file_id=?1 ORDER BY minute",
        )?;
        let rows = st.query_map(params![id], |r| {
            Ok((
                r.get::<_, f64>(0)?,
                FileSummary {
                    size: r.get::<_, i64>(1)? as u64,
                    allocated: r.get::<_, i64>(2)? as u64,
                    extents: r.get::<_, i64>(3)? as u64,
                    fragments: r.get::<_, i64>(4)? as u64,
                    split: r.get::<_, i64>(5)? as u64,
                    ideal: r.get::<_, i64>(6)? as u64,
                },
            ))
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}

/// A file's `path` (UTF-8, U+FFFD for bytes that are not) and `path_bytes` (its bytes,
/// only when they are not UTF-8) columns.
fn path_columns(p: &Path) -> (std::borrow::Cow<'_, str>, Option<&[u8]>) {
    use std::os::unix::ffi::OsStrExt;
    let b = p.as_os_str().as_bytes();
    (
        String::from_utf8_lossy(b),
        std::str::from_utf8(b).is_err().then_some(b),
    )
}

/// A path as the path of an SQLite `file:` URI: the characters the URI syntax gives a
/// meaning ('%', '?', '#') and any byte outside printable ASCII percent-encoded.
fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_graphic() && !matches!(b, b'%' | b'?' | b'#') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(st: &Store, table: &str) -> u64 {
        st.row_counts()
            .unwrap()
            .into_iter()
            .find(|(t, _)| t == table)
            .unwrap()
            .1
    }

    /// Two days of 30 s ticks where every file changes every tick, with retention shrunk
    /// (1 h of minutes, 1 day in all): rows stay within the documented bound.
    #[test]
    fn retention_keeps_rows_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let mut st = Store::open(&dir.path().join("h.db")).unwrap();
        st.retention = Retention {
            tick_hours: 2,
            minute_hours: 1,
            keep_days: 1,
            max_file_samples: 1_000_000,
            ..Retention::default()
        };
        let files = 20u64;
        let t0 = 1_700_000_000.0;
        let ids: Vec<i64> = (0..files)
            .map(|i| {
                st.new_file(format!("/x/f{i}.db"), 1, i, "db", "/x", t0)
                    .unwrap()
            })
            .collect();
        let mut t = t0;
        let mut k = 0u64;
        st.begin().unwrap();
        while t < t0 + 2.0 * 86400.0 {
            for &id in &ids {
                let s = FileSummary {
                    size: k,
                    extents: 1 + k % 7,
                    fragments: 1 + k % 5,
                    ..FileSummary::default()
                };
                st.sample(id, t, &s).unwrap();
            }
            let totals = Totals {
                files,
                fragments: k,
                ..Totals::default()
            };
            st.tick(t, &totals, files, 0.1).unwrap();
            k += 1;
            t += 30.0;
            if k.is_multiple_of(120) {
                st.commit().unwrap();
                st.prune(t, true).unwrap();
                st.begin().unwrap();
            }
        }
        st.commit().unwrap();
        st.prune(t, true).unwrap();
        // Minute rows for the last 1-2 h (thinning works in whole hours), then one per hour.
        let samples = count(&st, "file_samples");
        assert!(samples <= files * (120 + 25), "{samples} file samples");
        assert!(samples >= files * 24, "{samples}: thinned too much");
        assert!(count(&st, "ticks") <= 2 * 120 + 1);
        assert!(count(&st, "ticks_minute") <= 24 * 60 + 1);
        // Two days touch 48 or 49 clock hours, depending on where t0 falls in its hour.
        assert!((48..=49).contains(&count(&st, "ticks_hour")));
        // The first fragmented moment outlives the samples that recorded it.
        let first = st.first_fragmented().unwrap();
        assert_eq!(first.len(), files as usize);
        assert!(first.iter().all(|f| f.t == t0 + 30.0), "{first:?}");
    }

    /// Churn (files created, renamed and deleted all the time) cannot grow the database
    /// past the caps: the oldest deletions and renames go first, samples with them.
    #[test]
    fn churn_is_capped() {
        let dir = tempfile::tempdir().unwrap();
        let mut st = Store::open(&dir.path().join("h.db")).unwrap();
        st.retention.max_deleted_files = 30;
        st.retention.max_renames = 40;
        st.retention.max_group_samples = 50;
        let t0 = 1_700_000_000.0;
        st.begin().unwrap();
        let live = st.new_file("/x/live", 1, 0, "", "/x", t0).unwrap();
        for i in 0..100u64 {
            let t = t0 + i as f64 * 60.0;
            let id = st
                .new_file(format!("/x/tmp-{i}"), 1, i + 1, "", "/x", t)
                .unwrap();
            let s = FileSummary {
                fragments: 2,
                ..FileSummary::default()
            };
            st.sample(id, t, &s).unwrap();
            st.rename(id, &format!("/x/tmp-{i}"), format!("/x/f-{i}"), "", "/x", t)
                .unwrap();
            st.delete(id, t + 1.0).unwrap();
            st.group("dir", &format!("/x/d{i}"), t, &Totals::default())
                .unwrap();
        }
        st.sample(live, t0, &FileSummary::default()).unwrap();
        st.commit().unwrap();
        st.prune(t0 + 100.0 * 60.0, true).unwrap();
        assert_eq!(count(&st, "files"), 31, "30 deleted + the live one");
        assert_eq!(
            count(&st, "renames"),
            30,
            "renames of dropped files go with them"
        );
        assert_eq!(count(&st, "group_samples"), 50);
        assert_eq!(count(&st, "file_samples"), 31);
        // The newest deletions are the ones kept, with their first-fragmented moments.
        let first = st.first_fragmented().unwrap();
        assert_eq!(first.len(), 30);
        assert_eq!(first[0].path, "/x/f-70");
        assert_eq!(st.file_history("/x/live").unwrap().len(), 1);
    }

    #[test]
    fn file_sample_cap_drops_oldest() {
        let dir = tempfile::tempdir().unwrap();
        let mut st = Store::open(&dir.path().join("h.db")).unwrap();
        st.retention.max_file_samples = 100;
        let id = st.new_file("/x/a", 1, 1, "", "/x", 0.0).unwrap();
        let t0 = 1_700_000_000.0;
        st.begin().unwrap();
        for m in 0..300 {
            let s = FileSummary {
                size: m,
                ..FileSummary::default()
            };
            st.sample(id, t0 + m as f64 * 60.0, &s).unwrap();
        }
        st.commit().unwrap();
        st.prune(t0 + 300.0 * 60.0, true).unwrap();
        let h = st.file_history("/x/a").unwrap();
        assert_eq!(h.len(), 100);
        assert_eq!(h[0].1.size, 200, "the oldest rows go first");
    }
}
