//! Scan: walk paths, map every file, compute its metrics and the set's totals.
//! The engine behind `fragkit scan`, and what watch, age and lab use to check layouts.

use std::path::PathBuf;
use std::sync::Mutex;

use crate::layout::walk::{self, PathError, Root, ScannedFile, WalkCounts, WalkOptions, WalkStats};
use crate::metrics::{FileMetrics, SetMetrics};

/// The default request size R: FragPicker's and most readahead windows' 128 KiB.
pub const DEFAULT_REQUEST_SIZE: u64 = 128 * 1024;

#[derive(Debug, Clone)]
pub struct FileEntry {
    pub file: ScannedFile,
    pub metrics: FileMetrics,
}

#[derive(Debug)]
pub struct ScanResult {
    pub request_sizes: Vec<u64>,
    pub files: Vec<FileEntry>,
    pub summary: SetMetrics,
    pub counts: WalkCounts,
    pub errors: Vec<PathError>,
}

/// Walk `roots` and compute metrics for every file. `progress` is called with the running
/// file count from worker threads (cheap; may be a no-op).
pub fn scan_roots(
    roots: &[Root],
    opts: &WalkOptions,
    request_sizes: &[u64],
    progress: &(dyn Fn(u64) + Sync),
) -> ScanResult {
    let stats = WalkStats::default();
    let files = Mutex::new(Vec::new());
    let visit = |f: ScannedFile| {
        let metrics = FileMetrics::compute(&f.layout, request_sizes);
        let mut v = files.lock().unwrap();
        v.push(FileEntry { file: f, metrics });
        progress(v.len() as u64);
    };
    let errors = walk::walk(roots, opts, &stats, &visit);
    let files = files.into_inner().unwrap();
    let mut summary = SetMetrics::new(request_sizes);
    for f in &files {
        summary.add(&f.metrics);
    }
    ScanResult {
        request_sizes: request_sizes.to_vec(),
        files,
        summary,
        counts: stats.snapshot(),
        errors,
    }
}

/// Check and scan paths in one call (library convenience for tests and other commands).
pub fn scan_paths(paths: &[PathBuf], request_sizes: &[u64]) -> Result<ScanResult, walk::RootError> {
    let roots = paths
        .iter()
        .map(|p| walk::check_root(p))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(scan_roots(
        &roots,
        &WalkOptions::default(),
        request_sizes,
        &|_| {},
    ))
}
