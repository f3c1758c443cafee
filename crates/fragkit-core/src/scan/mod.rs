//! Scan: walk paths, map every file, compute its metrics and the set's totals.
//! The engine behind `fragkit scan`, and what watch, age and lab use to check layouts.

use std::cmp::Ordering;
use std::path::PathBuf;

use crate::layout::walk::{self, PathError, Root, ScannedFile, WalkCounts, WalkOptions, WalkStats};
use crate::metrics::{FileMetrics, SetMetrics};
use crate::ssd::layout::FileCost;

mod listing;
pub use listing::{run, Listing, ScanOutcome, ScanPlan, SortKey};

/// The default request size R: FragPicker's and most readahead windows' 128 KiB.
pub const DEFAULT_REQUEST_SIZE: u64 = 128 * 1024;

#[derive(Debug, Clone)]
pub struct FileEntry {
    pub file: ScannedFile,
    pub metrics: FileMetrics,
    /// `scan --model`: the file's sequential read on the modeled SSD.
    pub model: Option<FileCost>,
}

#[derive(Debug)]
pub struct ScanResult {
    pub request_sizes: Vec<u64>,
    pub files: Vec<FileEntry>,
    pub summary: SetMetrics,
    pub counts: WalkCounts,
    pub errors: Vec<PathError>,
}

/// A file in a summary's list of the worst files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worst {
    pub path: PathBuf,
    pub fragments: u64,
    /// Extra requests at the first R.
    pub extra: u64,
}

/// How many files a summary lists as the worst.
pub const WORST_LISTED: usize = 10;

impl Worst {
    /// The entry for a fragmented file; None for one in a single piece.
    pub fn of(f: &FileEntry) -> Option<Worst> {
        f.metrics.is_fragmented().then(|| Worst {
            path: f.file.path.clone(),
            fragments: f.metrics.fragments,
            extra: f.metrics.requests.first().map_or(0, |r| r.extra()),
        })
    }
}

/// Most extra requests at the first R first, then most fragments, then path bytes.
pub fn worst_first(a: &Worst, b: &Worst) -> Ordering {
    use std::os::unix::ffi::OsStrExt;
    b.extra
        .cmp(&a.extra)
        .then(b.fragments.cmp(&a.fragments))
        .then(
            a.path
                .as_os_str()
                .as_bytes()
                .cmp(b.path.as_os_str().as_bytes()),
        )
}

/// A file in a summary's list of the worst files by modeled read time (`scan --model`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelWorst {
    pub path: PathBuf,
    pub cost: FileCost,
}

impl ModelWorst {
    /// The entry for a file whose modeled read is slower than its contiguous self.
    pub fn of(f: &FileEntry) -> Option<ModelWorst> {
        let cost = f.model?;
        (cost.read_ns > cost.contiguous_ns).then(|| ModelWorst {
            path: f.file.path.clone(),
            cost,
        })
    }

    /// Modeled time fragmentation adds to one sequential read of the file.
    pub(crate) fn excess_ns(&self) -> u64 {
        self.cost.read_ns - self.cost.contiguous_ns
    }
}

/// Most modeled time added by fragmentation first, then path bytes.
pub fn model_worst_first(a: &ModelWorst, b: &ModelWorst) -> Ordering {
    use std::os::unix::ffi::OsStrExt;
    b.excess_ns().cmp(&a.excess_ns()).then(
        a.path
            .as_os_str()
            .as_bytes()
            .cmp(b.path.as_os_str().as_bytes()),
    )
}

/// A comparison held by [`TopN`].
type Order<T> = Box<dyn Fn(&T, &T) -> Ordering + Send>;

/// The first `n` of a stream of items under `order`, holding at most 2n at any time
/// (sorted and cut back to n whenever it reaches 2n), so `--top` costs O(n) memory
/// however many files are scanned.
pub struct TopN<T> {
    n: usize,
    order: Order<T>,
    items: Vec<T>,
}

impl<T> TopN<T> {
    /// `n == usize::MAX` keeps everything.
    pub fn new(n: usize, order: impl Fn(&T, &T) -> Ordering + Send + 'static) -> TopN<T> {
        TopN {
            n,
            order: Box::new(order),
            items: Vec::new(),
        }
    }

    pub fn push(&mut self, item: T) {
        self.items.push(item);
        if self.items.len() >= self.n.saturating_mul(2).max(64) {
            self.cut();
        }
    }

    fn cut(&mut self) {
        self.items.sort_by(|a, b| (self.order)(a, b));
        self.items.truncate(self.n);
    }

    /// The kept items, best first.
    pub fn into_sorted(mut self) -> Vec<T> {
        self.cut();
        self.items
    }
}

/// Walk `roots` and compute metrics for every file. `progress` is called with the running
/// file count after each batch of files, on the calling thread (cheap; may be a no-op).
pub fn scan_roots(
    roots: &[Root],
    opts: &WalkOptions,
    request_sizes: &[u64],
    progress: &(dyn Fn(u64) + Sync),
) -> ScanResult {
    let stats = WalkStats::default();
    let mut files = Vec::new();
    // In walk order (roots as given, then path order), whatever the thread count.
    let map = |b: &mut Vec<FileEntry>, f: &mut ScannedFile| {
        let f = std::mem::replace(f, ScannedFile::empty());
        let metrics = FileMetrics::compute(&f.layout, request_sizes);
        b.push(FileEntry {
            file: f,
            metrics,
            model: None,
        });
    };
    let mut sink = |b: Vec<FileEntry>| {
        files.extend(b);
        progress(files.len() as u64);
        std::ops::ControlFlow::Continue(())
    };
    let workers = rayon::current_num_threads();
    let errors = walk::walk_ordered(roots, opts, &stats, workers, &Vec::new, &map, &mut sink);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_n_keeps_the_first_n_in_order() {
        let mut t = TopN::new(5, |a: &u32, b: &u32| b.cmp(a));
        for v in (0..1000u32).map(|i| (i * 7919) % 1000) {
            t.push(v);
            assert!(t.items.len() < 64, "never more than max(2n, 64) held");
        }
        assert_eq!(t.into_sorted(), vec![999, 998, 997, 996, 995]);
        let mut all = TopN::new(usize::MAX, |a: &u32, b: &u32| a.cmp(b));
        (0..100u32).rev().for_each(|v| all.push(v));
        assert_eq!(all.into_sorted(), (0..100).collect::<Vec<_>>());
    }
}
