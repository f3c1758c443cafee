//! A progress log of range moves, for crash trials (scripts/crash-trials): with
//! FRAGKIT_MOVE_LOG=FILE set, every migration appends one line when it begins and one when
//! it returns, so a harness that kills defrag can tell afterwards whether the kill landed
//! inside a move. Lines (one write(2) each, O_APPEND; the path last, it may hold spaces):
//!
//! ```text
//! begin <CLOCK_MONOTONIC ns> <write_bytes> <offset> <length> <path>
//! end <CLOCK_MONOTONIC ns> <write_bytes> <offset> <length> <status> <path>
//! verify <CLOCK_MONOTONIC ns> <write_bytes> <ranges> <path>
//! ```
//!
//! `verify`: the file's moved ranges are on the device and about to be read back. With
//! FRAGKIT_MOVE_LOG_STOP set as well, the process then stops itself (SIGSTOP) until
//! continued, so a test can change the device under the moved data in between and check
//! that verification reports it.
//!
//! write_bytes is /proc/self/io's (bytes this process caused to be written, counted when it
//! dirties pages): a harness reading /proc/PID/io just before its kill sees whether data of
//! the move had started to move. Unset: nothing is opened or written.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

pub const ENV: &str = "FRAGKIT_MOVE_LOG";
pub const STOP_ENV: &str = "FRAGKIT_MOVE_LOG_STOP";

fn log() -> Option<&'static Mutex<File>> {
    static LOG: OnceLock<Option<Mutex<File>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let path = std::env::var_os(ENV)?;
        match OpenOptions::new().create(true).append(true).open(&path) {
            Ok(f) => Some(Mutex::new(f)),
            Err(e) => {
                fragkit_sys::stderr_line!(
                    "fragkit: {ENV}={}: cannot open the move log: {e}",
                    Path::new(&path).display()
                );
                None
            }
        }
    })
    .as_ref()
}

/// The log's clock, which a harness in another process can compare against.
pub use fragkit_sys::clock::monotonic_ns;

/// write_bytes from a /proc/PID/io text (0 when absent).
pub fn write_bytes(proc_io: &str) -> u64 {
    proc_io
        .lines()
        .find_map(|l| l.strip_prefix("write_bytes: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn record(kind: &str, words: std::fmt::Arguments<'_>, path: &Path) {
    let Some(log) = log() else { return };
    let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    let line = format!(
        "{kind} {} {} {words} {}\n",
        monotonic_ns(),
        write_bytes(&io),
        path.display()
    );
    if let Ok(mut f) = log.lock() {
        let _ = f.write_all(line.as_bytes());
    }
}

/// A range's migration starts.
pub fn begin(path: &Path, offset: u64, length: u64) {
    if log().is_some() {
        record("begin", format_args!("{offset} {length}"), path);
    }
}

/// A range's migration returned with `status` (moved | skipped | failed).
pub fn end(path: &Path, offset: u64, length: u64, status: &str) {
    if log().is_some() {
        record("end", format_args!("{offset} {length} {status}"), path);
    }
}

/// A file's `ranges` moved ranges are written back and about to be read back.
pub fn verifying(path: &Path, ranges: usize) {
    if log().is_some() {
        record("verify", format_args!("{ranges}"), path);
        if std::env::var_os(STOP_ENV).is_some() {
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
        }
    }
}
