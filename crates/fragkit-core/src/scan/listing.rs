//! The streaming scan behind `fragkit scan`: walk in parallel, compute every file's
//! metrics on the workers, keep the set's totals and worst files, and list files either in
//! walk order while the walk goes on (rows written to the caller's writer as batches come
//! in, so memory stays flat at any file count) or sorted and cut to the top N.
//!
//! The caller chooses the text: rows are rendered on the workers by its `render` function
//! and joined by its `separator`; everything else (headers, totals) is the caller's too.

use std::cmp::Ordering;
use std::io::{self, Write};
use std::ops::ControlFlow;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::Mutex;

use super::{model_worst_first, worst_first, FileEntry, ModelWorst, TopN, Worst, WORST_LISTED};
use crate::layout::walk::{self, PathError, Root, ScannedFile, WalkCounts, WalkOptions, WalkStats};
use crate::metrics::{FileMetrics, SetMetrics};
use crate::ssd::layout::FileCost;
use crate::ssd::Params;

/// What to scan and how.
pub struct ScanPlan {
    pub paths: Vec<PathBuf>,
    /// Request sizes R (non-empty); the first one ranks files and prices the model.
    pub request_sizes: Vec<u64>,
    pub walk: WalkOptions,
    /// Worker threads (at least 1).
    pub threads: usize,
    /// Price each file's sequential read on this modeled device.
    pub model: Option<Params>,
    pub listing: Listing,
}

/// Which files are listed, and in what order.
#[derive(Debug, Clone, Copy)]
pub struct Listing {
    /// None: walk order (path order), rows written while the walk goes on; otherwise sorted
    /// by the key, reversed when the flag is set.
    pub sort: Option<(SortKey, bool)>,
    /// List at most this many files (`usize::MAX`: all).
    pub top: usize,
    /// List only files with at least this many fragments (the totals cover every file).
    pub min_fragments: u64,
    /// List no file at all.
    pub summary_only: bool,
}

/// What a sorted listing is ordered by (most first, then path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Path,
    Fragments,
    Extents,
    /// Extra requests at the first request size.
    Extra,
    /// Split ratio S(R)/I(R) at the first request size.
    Ratio,
    Size,
}

/// What the walk found, for the caller's totals.
pub struct ScanOutcome {
    pub summary: SetMetrics,
    pub worst: Vec<Worst>,
    pub model_total: FileCost,
    pub model_worst: Vec<ModelWorst>,
    pub counts: WalkCounts,
    /// Paths that could not be scanned: unusable arguments first, in the order given.
    pub errors: Vec<PathError>,
    /// Files that matched the listing's filter.
    pub matching: usize,
    /// A sorted listing's rows, rendered, in order (empty when rows were streamed).
    pub rows: Vec<Box<[u8]>>,
}

impl ScanPlan {
    /// Rows are written while the walk goes on (walk order, something to list).
    pub fn streams(&self) -> bool {
        self.listing.sort.is_none() && !self.listing.summary_only
    }
}

/// Scan `plan`. Rows rendered by `render` (with their trailing newline, if any) go to `out`
/// joined by `separator` when the listing streams, else come back in
/// [`ScanOutcome::rows`]. `progress` gets the running file count. An error writing `out`
/// (a closed pipe) stops the walk and is returned.
pub fn run(
    plan: &ScanPlan,
    render: &(dyn Fn(&mut Vec<u8>, &FileEntry) + Sync),
    separator: &[u8],
    out: &mut dyn Write,
    progress: &mut dyn FnMut(u64),
) -> io::Result<ScanOutcome> {
    let request_sizes = &plan.request_sizes;
    let listing = plan.listing;
    let mut roots = Vec::new();
    let mut errors = Vec::new();
    for p in &plan.paths {
        match walk::check_root(p) {
            Ok(r) => roots.push(r),
            Err(e) => errors.push(e.into_path_error()),
        }
    }
    let streaming = plan.streams();
    if streaming {
        roots.sort_by_key(root_key);
    }
    let top = listing.top;
    // Files are rendered on the workers unless the listing is kept whole for sorting
    // (`--top`: a few whole entries).
    let render_on_workers = !listing.summary_only && (streaming || top == usize::MAX);
    // Text buffers of batches already written, for the next batches: a batch's ~180 KB
    // of text grown from empty was a realloc and copy every few files (callgrind).
    let text_pool: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
    let new_batch = || Batch {
        summary: SetMetrics::new(request_sizes),
        text: text_pool.lock().unwrap().pop().unwrap_or_default(),
        ..Batch::default()
    };
    let model = plan.model.as_ref();
    let map = |b: &mut Batch, file: &mut ScannedFile| {
        // The batch's one entry holds each file in turn: its metrics vectors are reused,
        // and the walk's path and extent buffers are swapped in and handed back after.
        let entry = b.entry.get_or_insert_with(|| FileEntry {
            file: ScannedFile::empty(),
            metrics: FileMetrics::empty(),
            model: None,
        });
        std::mem::swap(&mut entry.file, file);
        entry
            .metrics
            .compute_into(&entry.file.layout, request_sizes);
        // Parameters are validated when they are built, so pricing cannot fail here.
        entry.model = model.and_then(|p| {
            let l = &entry.file.layout;
            crate::ssd::layout::file_cost(p, &l.extents, entry.metrics.size, request_sizes[0]).ok()
        });
        b.summary.add(&entry.metrics);
        b.worst.extend(Worst::of(entry));
        if let Some(c) = &entry.model {
            b.model.add(c);
            b.model_worst.extend(ModelWorst::of(entry));
        }
        if listing.summary_only || entry.metrics.fragments < listing.min_fragments {
        } else if !render_on_workers {
            b.files.push(entry.clone());
        } else {
            let start = b.text.len();
            render(&mut b.text, entry);
            b.listed.push(Listed {
                // Sort keys only where the rows are sorted later.
                keys: (!streaming).then(|| Keys::of(entry)),
                text: start..b.text.len(),
            });
        }
        std::mem::swap(&mut entry.file, file);
    };

    let stats = WalkStats::default();
    let mut summary = SetMetrics::new(request_sizes);
    let mut worst = TopN::new(WORST_LISTED, worst_first);
    let mut model_total = FileCost::default();
    let mut model_worst = TopN::new(WORST_LISTED, model_worst_first);
    let mut matching = 0usize;
    let mut written = 0usize;
    let mut seen = 0u64;
    let (key, reverse) = listing.sort.unwrap_or((SortKey::Path, false));
    let by = order(key, reverse);
    let mut kept_entries: TopN<(Keys, FileEntry)> =
        TopN::new(top, move |a: &(Keys, FileEntry), b: &(Keys, FileEntry)| {
            by(&a.0, &b.0)
        });
    let mut kept_rows: TopN<Compact> =
        TopN::new(top, move |a: &Compact, b: &Compact| by(&a.keys, &b.keys));
    let mut failed: Option<io::Error> = None;
    let recycle = |mut text: Vec<u8>| {
        text.clear();
        text_pool.lock().unwrap().push(text);
    };
    let mut sink = |b: Batch| {
        summary.merge(&b.summary);
        b.worst.into_iter().for_each(|x| worst.push(x));
        model_total.add(&b.model);
        b.model_worst.into_iter().for_each(|x| model_worst.push(x));
        seen += b.summary.files;
        if seen % 64 < b.summary.files {
            progress(seen);
        }
        matching += b.listed.len() + b.files.len();
        if !streaming {
            b.files
                .into_iter()
                .for_each(|f| kept_entries.push((Keys::of(&f), f)));
            for l in b.listed {
                kept_rows.push(Compact {
                    keys: l.keys.expect("keys are kept when not streaming"),
                    text: b.text[l.text].into(),
                });
            }
            recycle(b.text);
            return ControlFlow::Continue(());
        }
        let mut write = || -> io::Result<()> {
            if separator.is_empty() && top - written >= b.listed.len() {
                // Rows one after another: the batch at once.
                written += b.listed.len();
                return out.write_all(&b.text);
            }
            for l in &b.listed {
                if written == top {
                    break;
                }
                if written > 0 {
                    out.write_all(separator)?;
                }
                out.write_all(&b.text[l.text.clone()])?;
                written += 1;
            }
            Ok(())
        };
        let result = write();
        recycle(b.text);
        match result {
            Ok(()) => ControlFlow::Continue(()),
            // Nothing more can be written (a closed pipe: `| head`): stop the walk too.
            Err(e) => {
                failed = Some(e);
                ControlFlow::Break(())
            }
        }
    };
    errors.extend(walk::walk_ordered(
        &roots,
        &plan.walk,
        &stats,
        plan.threads,
        &new_batch,
        &map,
        &mut sink,
    ));
    if let Some(e) = failed {
        return Err(e);
    }
    let mut rows: Vec<Box<[u8]>> = kept_rows
        .into_sorted()
        .into_iter()
        .map(|c| c.text)
        .collect();
    for (_, e) in kept_entries.into_sorted() {
        let mut text = Vec::new();
        render(&mut text, &e);
        rows.push(text.into());
    }
    Ok(ScanOutcome {
        summary,
        worst: worst.into_sorted(),
        model_total,
        model_worst: model_worst.into_sorted(),
        counts: stats.snapshot(),
        errors,
        matching,
        rows,
    })
}

/// A root's place in path order: a directory sorts as its path followed by '/'.
fn root_key(r: &Root) -> Vec<u8> {
    match r {
        Root::File(p) => p.as_os_str().as_bytes().to_vec(),
        Root::Dir(p) => {
            let mut k = p.as_os_str().as_bytes().to_vec();
            if k.last() != Some(&b'/') {
                k.push(b'/');
            }
            k
        }
    }
}

/// What one worker hands the sink for a batch of consecutive files.
#[derive(Default)]
struct Batch {
    summary: SetMetrics,
    worst: Vec<Worst>,
    /// `--model`: the batch's summed modeled reads and its candidates for the worst list.
    model: FileCost,
    model_worst: Vec<ModelWorst>,
    /// Whole entries (candidates for a sorted `--top`).
    files: Vec<FileEntry>,
    /// The entry each file of the batch is mapped into in turn.
    entry: Option<FileEntry>,
    /// Rendered files: their text in `text`, one after another.
    listed: Vec<Listed>,
    text: Vec<u8>,
}

struct Listed {
    /// None while streaming (written in walk order, never sorted).
    keys: Option<Keys>,
    text: std::ops::Range<usize>,
}

/// A listed file reduced to what sorting needs and its rendered text: no extents kept.
struct Compact {
    keys: Keys,
    text: Box<[u8]>,
}

/// The sort keys of one file.
struct Keys {
    path: Box<[u8]>,
    fragments: u64,
    extents: u64,
    extra: u64,
    ratio: f64,
    size: u64,
}

impl Keys {
    fn of(f: &FileEntry) -> Keys {
        let r = &f.metrics.requests[0];
        Keys {
            path: f.file.path.as_os_str().as_bytes().into(),
            fragments: f.metrics.fragments,
            extents: f.metrics.extents,
            extra: r.extra(),
            ratio: r.ratio(),
            size: f.metrics.size,
        }
    }

    fn cmp(a: &Keys, b: &Keys, key: SortKey) -> Ordering {
        let path = || a.path.cmp(&b.path);
        match key {
            SortKey::Path => path(),
            SortKey::Fragments => b.fragments.cmp(&a.fragments).then_with(path),
            SortKey::Extents => b.extents.cmp(&a.extents).then_with(path),
            SortKey::Extra => b
                .extra
                .cmp(&a.extra)
                .then(b.fragments.cmp(&a.fragments))
                .then_with(path),
            SortKey::Ratio => b.ratio.total_cmp(&a.ratio).then_with(path),
            SortKey::Size => b.size.cmp(&a.size).then_with(path),
        }
    }
}

/// `Keys::cmp` under `key`, reversed when `reverse`.
fn order(key: SortKey, reverse: bool) -> impl Fn(&Keys, &Keys) -> Ordering + Copy {
    move |a, b| {
        if reverse {
            Keys::cmp(b, a, key)
        } else {
            Keys::cmp(a, b, key)
        }
    }
}
