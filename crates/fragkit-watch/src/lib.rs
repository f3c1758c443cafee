//! Watch: keep a live picture of the fragmentation under some directories.
//!
//! Kernel events (fanotify as root, inotify otherwise) say which paths changed; each tick
//! re-maps only those with FIEMAP, updates running totals (all, per extension, per
//! directory) and writes what changed to the SQLite history. A slow full rescan catches
//! what events cannot see (writes through mmap, lost events after a queue overflow).
//! Memory per watched file is one 72-byte record plus its name (`index`, ~110 bytes);
//! extents are kept only for a bounded set of recently changed files (the live map).
//!
//! Modules: `engine` (ticks, totals), `fanotify`/`inotify` (change sources), `index` (the
//! per-file records), `store` (the SQLite history), `live` (the page's JSON snapshot),
//! `prometheus` (the /metrics exposition), `serve` (HTTP: page, API, SSE, /metrics),
//! `artefacts` (FragTracer's files, rewritten live with --fragtracer).

// A closed stdout or stderr must never panic a command: print through writers that
// return errors (stdout) or `stderr_line!` (diagnostics).
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod artefacts;
pub mod engine;
pub mod fanotify;
pub mod index;
pub mod inotify;
pub mod live;
pub mod prometheus;
pub mod serve;
mod skipped;
pub mod store;

use std::io;
use std::path::PathBuf;

/// What a change source reports; the engine looks at the path to learn the end state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Written, truncated, fallocated, created or deleted: re-examine this path.
    Changed(PathBuf),
    /// Renamed within the watched file system (files or whole directories).
    Moved { from: PathBuf, to: PathBuf },
    /// Events were lost: only a full rescan is exact again.
    Overflow,
}

/// Which kernel interface reports changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventSource {
    /// fanotify when root, else inotify
    Auto,
    /// fanotify, one mark per file system (needs root)
    Fanotify,
    /// inotify, one watch per directory
    Inotify,
}

/// The default history file: $XDG_STATE_HOME/fragkit/watch.db, else ~/.local/state/...
pub fn default_db() -> anyhow::Result<PathBuf> {
    if let Some(d) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d).join("fragkit/watch.db"));
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(h) => Ok(PathBuf::from(h).join(".local/state/fragkit/watch.db")),
        None => anyhow::bail!("neither XDG_STATE_HOME nor HOME is set; pass --db PATH"),
    }
}

pub enum Source {
    Fanotify(fanotify::Fanotify),
    Inotify(inotify::Inotify),
}

impl Source {
    /// Open the requested source; `Auto` falls back to inotify (with the reason) when
    /// fanotify is refused.
    pub fn open(roots: &[PathBuf], want: EventSource) -> anyhow::Result<(Source, String)> {
        let root = nix::unistd::geteuid().is_root();
        if want == EventSource::Fanotify || (want == EventSource::Auto && root) {
            match fanotify::Fanotify::new(roots) {
                Ok(f) => {
                    return Ok((
                        Source::Fanotify(f),
                        "fanotify (one mark per file system, directory handle + name)".into(),
                    ))
                }
                Err(e) if want == EventSource::Fanotify => {
                    let hint = if root { "" } else { " (fanotify needs root)" };
                    anyhow::bail!("--events fanotify: fanotify refused: {e}{hint}")
                }
                Err(e) => {
                    let i = inotify::Inotify::new(roots)?;
                    let why = format!(
                        "inotify ({} directory watches; fanotify refused: {e})",
                        i.watches()
                    );
                    return Ok((Source::Inotify(i), why));
                }
            }
        }
        let i = inotify::Inotify::new(roots)?;
        let why = if root {
            format!("inotify ({} directory watches; asked for)", i.watches())
        } else {
            format!(
                "inotify ({} directory watches; fanotify needs root)",
                i.watches()
            )
        };
        Ok((Source::Inotify(i), why))
    }

    pub fn drain(&mut self, out: &mut Vec<Change>) -> io::Result<()> {
        match self {
            Source::Fanotify(f) => f.drain(out),
            Source::Inotify(i) => i.drain(out),
        }
    }

    /// Between ticks: wait up to `timeout`, reading events as they come where that
    /// lowers their cost to the writers (fanotify disarms written files); inotify just
    /// sleeps.
    pub fn wait(&mut self, timeout: std::time::Duration) -> io::Result<()> {
        match self {
            Source::Fanotify(f) => f.wait(timeout),
            Source::Inotify(_) => {
                std::thread::sleep(timeout);
                Ok(())
            }
        }
    }

    /// While mapping a whole tree: read events as they come (`pump`) and drop the opens
    /// fragkit itself causes (fanotify only).
    pub(crate) fn mapping_tree(&mut self, on: bool) {
        if let Source::Fanotify(f) = self {
            f.skip_own_opens(on);
        }
    }

    /// Read what is queued now, for the next tick (fanotify; inotify reads at the tick).
    pub(crate) fn pump(&mut self) -> io::Result<()> {
        match self {
            Source::Fanotify(f) => f.pump(),
            Source::Inotify(_) => Ok(()),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Source::Fanotify(_) => "fanotify",
            Source::Inotify(_) => "inotify",
        }
    }
}
