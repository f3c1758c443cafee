//! `fragkit bench sqlite DB`: an application reading a SQLite database through the
//! library, as FAST'24's SQLite read does: `select * from DB1` over every row and column
//! (so every overflow page is read). Each scan starts with the database's pages dropped
//! from the page cache (POSIX_FADV_DONTNEED on the file), so every scan reads the device;
//! scans repeat for `--scans N` or `--duration S`, and progress can be reported every N
//! rows, for a caller that samples the application's throughput over time.

use std::fs::File;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rusqlite::{Connection, OpenFlags};
use serde::Serialize;

use crate::age::sqlite::RECORD_BYTES;
use fragkit_sys::fadvise::{fadvise, Advice};

#[derive(Debug, Clone)]
pub struct SqliteReadSpec {
    pub db: PathBuf,
    /// Scans to run (ignored when `duration` is set).
    pub scans: u64,
    /// Scan again until this much time has passed (checked after every row).
    pub duration: Option<Duration>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SqliteReadReport {
    pub version: u32,
    pub db: PathBuf,
    pub db_bytes: u64,
    /// Scans begun (the last may be cut short by `duration`).
    pub scans: u64,
    pub rows: u64,
    /// Text the rows returned.
    pub text_bytes: u64,
    pub seconds: f64,
    pub rows_per_s: f64,
    /// The database's bytes per scan, in proportion to the rows read, over the time
    /// (FAST'24's MB/s), in MiB/s (0 when no scan ended).
    pub mib_per_s: f64,
}

/// Run the scans; `progress(rows so far)` after every row.
pub fn run(spec: &SqliteReadSpec, progress: &mut dyn FnMut(u64)) -> Result<SqliteReadReport> {
    let db = &spec.db;
    let file = File::open(db).with_context(|| format!("{}: cannot open", db.display()))?;
    let db_bytes = file.metadata()?.len();
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .with_context(|| format!("{}: cannot open as a SQLite database", db.display()))?;
    let mut stmt = conn.prepare("select * from DB1;").with_context(|| {
        format!(
            "{}: no table DB1 (expected a database `fragkit age sqlite` made)",
            db.display()
        )
    })?;
    if stmt.column_count() != 5 {
        bail!(
            "{}: table DB1 has {} columns, expected 5 (id and four strings, as `fragkit age sqlite` makes it)",
            db.display(),
            stmt.column_count()
        );
    }
    let t = Instant::now();
    let done = |scans: u64| match spec.duration {
        Some(d) => t.elapsed() >= d,
        None => scans >= spec.scans,
    };
    let (mut scans, mut rows, mut text_bytes) = (0u64, 0u64, 0u64);
    // Rows of one whole scan: the database's size per row read.
    let mut rows_per_scan = None;
    'scans: while !done(scans) {
        // The next scan reads the device, not the pages the last one left cached.
        fadvise(&file, 0, 0, Advice::DontNeed)
            .with_context(|| format!("{}: posix_fadvise", db.display()))?;
        scans += 1;
        let mut q = stmt.query([])?;
        while let Some(row) = q.next()? {
            for i in 1..5 {
                text_bytes += row.get_ref(i)?.as_str().map_or(0, |s| s.len() as u64);
            }
            rows += 1;
            progress(rows);
            if spec.duration.is_some() && done(scans) {
                break 'scans;
            }
        }
        rows_per_scan.get_or_insert(rows);
    }
    let seconds = t.elapsed().as_secs_f64();
    if spec.duration.is_none() && text_bytes != rows * RECORD_BYTES {
        bail!(
            "{}: the scans returned {text_bytes} bytes of text for {rows} rows, expected {} (not a database `fragkit age sqlite` made?)",
            db.display(),
            rows * RECORD_BYTES
        );
    }
    let per_s = |v: f64| if seconds > 0.0 { v / seconds } else { 0.0 };
    Ok(SqliteReadReport {
        version: 1,
        db: db.clone(),
        db_bytes,
        scans,
        rows,
        text_bytes,
        seconds,
        rows_per_s: per_s(rows as f64),
        mib_per_s: match rows_per_scan {
            Some(n) if n > 0 => per_s(rows as f64 * db_bytes as f64 / n as f64 / (1 << 20) as f64),
            _ => 0.0,
        },
    })
}
