//! FAST'24's SQLite workload (yuhun-Jun/fast24_ae `evaluation/sqlite/sqlite_append.c`): a
//! real SQLite database (the bundled library) grown one 16 KiB record at a time while a
//! dummy file gets 100 KiB + fdatasync after every insert, so the database's pages land
//! between the dummy's; then read back by a full table scan after the page cache is dropped.
//!
//! As the artifact: table `DB1(id INT PRIMARY KEY, str1 VARCHAR(4096), str2 VARCHAR(4096),
//! str3 VARCHAR(4096), str4 VARCHAR(4094))`, records of four random lower-case strings of
//! 4096, 4096, 4096 and 4094 bytes, ids from N−1 down to 0, `journal_mode = off`,
//! `synchronous = on` while inserting (`off` while scanning), one autocommit INSERT per
//! record. `contiguous` leaves out the dummy (the artifact's `sqlite_contiguous.c`). The
//! strings come from a seeded generator: same seed, same database.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use rand::RngExt;
use rusqlite::Connection;
use serde::Serialize;

use super::{check_file, seeded_buf, seeded_rng, FileCheck, ReadBack};

/// The artifact's record count and dummy append.
pub const RECORDS: u64 = 10_000;
pub(crate) const DUMMY_BYTES: u64 = 100 << 10;
/// Bytes of text per record (4096 × 3 + 4094).
pub(crate) const RECORD_BYTES: u64 = 3 * 4096 + 4094;

#[derive(Debug, Clone)]
pub struct SqliteSpec {
    /// Directory to create `testdb.db` and the dummy file in.
    pub dir: PathBuf,
    pub records: u64,
    /// Bytes appended to the dummy file (then fdatasync) after each insert.
    pub dummy_bytes: u64,
    /// No dummy file: the database grows alone (the artifact's contiguous case).
    pub contiguous: bool,
    pub read_back: bool,
    pub seed: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SqliteReport {
    pub version: u32,
    pub records: u64,
    pub record_bytes: u64,
    pub contiguous: bool,
    pub dummy_bytes: u64,
    pub seed: u64,
    /// The database file as written.
    pub achieved: FileCheck,
    pub extent_sizes: Vec<(u64, u64)>,
    pub gaps: Vec<(i64, u64)>,
    /// The full table scan: database bytes over scan time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read: Option<ReadBack>,
    /// Rows the scan returned (= records).
    pub rows_scanned: u64,
    pub elapsed_seconds: f64,
}

const CREATE: &str = "CREATE TABLE DB1(id INT PRIMARY KEY, str1 VARCHAR(4096), \
    str2 VARCHAR(4096), str3 VARCHAR(4096), str4 VARCHAR(4094));";

pub fn run(spec: &SqliteSpec) -> Result<SqliteReport> {
    let start = Instant::now();
    if spec.records == 0 {
        bail!("--records 0: expected at least one record");
    }
    if !spec.dir.is_dir() {
        bail!(
            "{}: not a directory (expected the directory to create testdb.db in)",
            spec.dir.display()
        );
    }
    fragkit_core::limits::require_memory(
        &format!("--dummy {}", spec.dummy_bytes),
        spec.dummy_bytes as u128,
    )?;
    let db = spec.dir.join("testdb.db");
    let dummy = spec.dir.join("dummy.data");
    for p in [&db, &dummy] {
        if p.exists() {
            std::fs::remove_file(p).with_context(|| format!("{}: cannot remove", p.display()))?;
        }
    }
    let conn = Connection::open(&db).with_context(|| format!("{}: cannot open", db.display()))?;
    let mode: String = conn.query_row("PRAGMA journal_mode = off;", [], |r| r.get(0))?;
    if mode != "off" {
        bail!(
            "{}: SQLite refused journal_mode = off ({mode})",
            db.display()
        );
    }
    conn.execute_batch("PRAGMA synchronous = on;")?;
    conn.execute_batch(CREATE)?;
    let mut dummy_file = if spec.contiguous {
        None
    } else {
        Some(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&dummy)
                .with_context(|| format!("{}: cannot open", dummy.display()))?,
        )
    };
    fragkit_core::io::job::drop_caches()?;
    let buf = seeded_buf(spec.dummy_bytes.max(4096) as usize, spec.seed ^ 0xd0d0);
    let mut rng = seeded_rng(spec.seed);
    let mut text = |n: usize| -> String {
        (0..n)
            .map(|_| (b'a' + rng.random_range(0..26u8)) as char)
            .collect()
    };
    let mut stmt = conn.prepare("INSERT INTO DB1 VALUES(?1, ?2, ?3, ?4, ?5);")?;
    let pb = super::progress_bar(spec.records, "age sqlite");
    let mut dummy_total = 0;
    for id in (0..spec.records).rev() {
        let (a, b, c, d) = (text(4096), text(4096), text(4096), text(4094));
        stmt.execute(rusqlite::params![id as i64, a, b, c, d])
            .with_context(|| format!("{}: insert {id}", db.display()))?;
        if let Some(f) = dummy_file.as_mut() {
            f.write_all(&buf.as_slice()[..spec.dummy_bytes as usize])
                .with_context(|| format!("{}: append", dummy.display()))?;
            f.sync_data()?;
            dummy_total += spec.dummy_bytes;
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    drop(stmt);
    conn.close().map_err(|(_, e)| e)?;
    drop(dummy_file);
    let achieved = check_file(&db)?;
    let (read, rows_scanned) = if spec.read_back {
        let (r, n) = scan(&db)?;
        (Some(r), n)
    } else {
        (None, 0)
    };
    Ok(SqliteReport {
        version: 1,
        records: spec.records,
        record_bytes: RECORD_BYTES,
        contiguous: spec.contiguous,
        dummy_bytes: dummy_total,
        seed: spec.seed,
        extent_sizes: super::size_histogram(&achieved.runs),
        gaps: super::gap_histogram(&achieved.runs),
        achieved,
        read,
        rows_scanned,
        elapsed_seconds: start.elapsed().as_secs_f64(),
    })
}

/// The artifact's read: drop the page cache, open, `select * from DB1` over every row and
/// column (so every overflow page is read), timed; MB/s over the database's size.
pub fn scan(db: &Path) -> Result<(ReadBack, u64)> {
    fragkit_core::io::job::drop_caches()?;
    let conn = Connection::open(db).with_context(|| format!("{}: cannot open", db.display()))?;
    conn.query_row("PRAGMA journal_mode = off;", [], |_| Ok(()))?;
    conn.execute_batch("PRAGMA synchronous = off;")?;
    let size = std::fs::metadata(db)?.len();
    let started = super::monotonic_ns();
    let t = Instant::now();
    let mut stmt = conn.prepare("select * from DB1;")?;
    let mut rows = stmt.query([])?;
    let mut n = 0u64;
    let mut text_bytes = 0u64;
    while let Some(row) = rows.next()? {
        for i in 1..5 {
            text_bytes += row.get_ref(i)?.as_str().map_or(0, |s| s.len() as u64);
        }
        n += 1;
    }
    let secs = t.elapsed().as_secs_f64();
    if text_bytes != n * RECORD_BYTES {
        bail!(
            "{}: the scan returned {text_bytes} bytes of text for {n} rows, expected {}",
            db.display(),
            n * RECORD_BYTES
        );
    }
    Ok((ReadBack::new(started, size, secs), n))
}
