//! `fragkit scan PATH...`

use anyhow::{bail, Result};

use std::cmp::Ordering;
use std::io::Write;
use std::ops::ControlFlow;

use crate::cli::{ScanArgs, ScanFormat, SortKey};
use crate::layout::walk::{self, Root, ScannedFile, WalkOptions, WalkStats};
use crate::metrics::{FileMetrics, SetMetrics};
use crate::report::filefrag::filefrag_v;
use crate::report::scan as out;
use crate::scan::{
    model_worst_first, worst_first, FileEntry, ModelWorst, TopN, Worst, DEFAULT_REQUEST_SIZE,
    WORST_LISTED,
};
use crate::ssd::layout::FileCost;

/// Exit status: 0 all read, 1 some paths could not be read (reported on stderr and
/// counted; the rest is still scanned and printed), `--format filefrag` included: its
/// stdout and stderr are filefrag's, its status is the project's (filefrag exits with an
/// errno, and 2 would read as a fatal error here).
pub fn run(args: ScanArgs) -> Result<i32> {
    if args.format == ScanFormat::Filefrag {
        return filefrag(&args);
    }
    let mut roots = Vec::new();
    let mut refused = Vec::new();
    let stats = WalkStats::default();
    for p in &args.paths {
        match walk::check_root(p) {
            Ok(r) => roots.push(r),
            Err(e) => refused.push(e.into_path_error()),
        }
    }
    let request_sizes = if args.request_sizes.is_empty() {
        vec![DEFAULT_REQUEST_SIZE]
    } else {
        args.request_sizes.clone()
    };
    if let Some(0) = args.threads {
        bail!("--threads 0: expected at least 1 worker thread");
    }
    // Bad model parameters fail before anything is scanned.
    let model = match &args.model {
        Some(m) => Some(super::ssd::model_params(m, None)?),
        None => None,
    };
    let opts = WalkOptions {
        one_file_system: !args.cross_mounts,
        sync: args.sync,
        extensions: args
            .extensions
            .iter()
            .map(|e| e.trim_start_matches('.').to_ascii_lowercase())
            .filter(|e| !e.is_empty())
            .collect(),
    };

    let bar = crate::report::progress::files_spinner();
    let workers = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));

    let machine = args.format != ScanFormat::Table;
    let sort = args.sort.unwrap_or(if machine {
        SortKey::Path
    } else {
        SortKey::Extra
    });
    let top = match args.top.unwrap_or(if machine { 0 } else { 25 }) {
        0 => usize::MAX,
        n => n,
    };
    // Path order is walk order: such listings are written while the walk goes on.
    let streaming = machine && sort == SortKey::Path && !args.reverse && !args.summary_only;
    if streaming {
        roots.sort_by_key(root_key);
    }
    let format = args.format;
    // Files are rendered on the workers unless the listing is kept whole for sorting
    // (`--top`: a few whole entries).
    let render_on_workers = !args.summary_only && (streaming || top == usize::MAX);
    // Text buffers of batches already written, for the next batches: a batch's ~180 KB
    // of text grown from empty was a realloc and copy every few files (callgrind).
    let text_pool: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());
    let new_batch = || Batch {
        summary: SetMetrics::new(&request_sizes),
        text: text_pool.lock().unwrap().pop().unwrap_or_default(),
        ..Batch::default()
    };
    let min_fragments = args.min_fragments;
    let summary_only = args.summary_only;
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
            .compute_into(&entry.file.layout, &request_sizes);
        // Valid parameters (checked above) cannot fail here.
        entry.model = model.as_ref().and_then(|p| {
            let l = &entry.file.layout;
            crate::ssd::layout::file_cost(p, &l.extents, entry.metrics.size, request_sizes[0]).ok()
        });
        b.summary.add(&entry.metrics);
        b.worst.extend(Worst::of(entry));
        if let Some(c) = &entry.model {
            b.model.add(c);
            b.model_worst.extend(ModelWorst::of(entry));
        }
        if summary_only || entry.metrics.fragments < min_fragments {
        } else if !render_on_workers {
            b.files.push(entry.clone());
        } else {
            let start = b.text.len();
            render(format, &mut b.text, entry);
            b.listed.push(Listed {
                // Sort keys only where the rows are sorted later.
                keys: (!streaming).then(|| Keys::of(entry)),
                text: start..b.text.len(),
            });
        }
        std::mem::swap(&mut entry.file, file);
    };

    let mut summary = SetMetrics::new(&request_sizes);
    let mut worst = TopN::new(WORST_LISTED, worst_first);
    let mut model_total = FileCost::default();
    let mut model_worst = TopN::new(WORST_LISTED, model_worst_first);
    let mut matching = 0usize;
    let mut written = 0usize;
    let mut seen = 0u64;
    let by = order(sort, args.reverse);
    let mut kept_entries: TopN<(Keys, FileEntry)> =
        TopN::new(top, move |a: &(Keys, FileEntry), b: &(Keys, FileEntry)| {
            by(&a.0, &b.0)
        });
    let mut kept_rows: TopN<Compact> =
        TopN::new(top, move |a: &Compact, b: &Compact| by(&a.keys, &b.keys));
    let mut all_read = false;
    crate::report::to_stdout(|w| {
        let mut failed: Option<std::io::Error> = None;
        if streaming {
            match format {
                ScanFormat::Json => out::write_json_head(w, &request_sizes)?,
                ScanFormat::Csv => out::write_csv_header(w, &request_sizes, model.is_some())?,
                _ => {}
            }
        }
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
                bar.set_position(seen);
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
            let mut write = || -> std::io::Result<()> {
                if format != ScanFormat::Json && top - written >= b.listed.len() {
                    // Lines with their newlines, one after another: the batch at once.
                    written += b.listed.len();
                    return w.write_all(&b.text);
                }
                for l in &b.listed {
                    if written == top {
                        break;
                    }
                    if format == ScanFormat::Json && written > 0 {
                        w.write_all(b",")?;
                    }
                    w.write_all(&b.text[l.text.clone()])?;
                    written += 1;
                }
                Ok(())
            };
            let result = write();
            recycle(b.text);
            match result {
                Ok(()) => ControlFlow::Continue(()),
                // Nothing more can be written (a closed pipe: `| head`): stop the walk
                // too; main exits quietly on a broken pipe.
                Err(e) => {
                    failed = Some(e);
                    ControlFlow::Break(())
                }
            }
        };
        let mut errors = std::mem::take(&mut refused);
        // Arguments that could not be scanned come first, in the order they were given.
        errors.extend(walk::walk_ordered(
            &roots, &opts, &stats, workers, &new_batch, &map, &mut sink,
        ));
        bar.finish_and_clear();
        if let Some(e) = failed {
            return Err(e);
        }
        for e in &errors {
            fragkit_sys::stderr_line!("fragkit: {}: {}", e.path.display(), e.message);
        }
        let worst = std::mem::replace(&mut worst, TopN::new(0, worst_first)).into_sorted();
        let model_worst =
            std::mem::replace(&mut model_worst, TopN::new(0, model_worst_first)).into_sorted();
        let totals = out::Totals {
            request_sizes: &request_sizes,
            summary: &summary,
            worst: &worst,
            counts: stats.snapshot(),
            errors: &errors,
            model: model.as_ref().map(|p| out::ModelTotals {
                name: &p.name,
                request_size: request_sizes[0],
                total: model_total,
                worst: &model_worst,
            }),
        };
        let mut rows_buf = Vec::new();
        let mut rows: Vec<&[u8]> = Vec::new();
        if !streaming {
            let kept = std::mem::replace(&mut kept_rows, TopN::new(0, |_, _| Ordering::Equal))
                .into_sorted();
            let entries: Vec<FileEntry> =
                std::mem::replace(&mut kept_entries, TopN::new(0, |_, _| Ordering::Equal))
                    .into_sorted()
                    .into_iter()
                    .map(|(_, e)| e)
                    .collect();
            let mut ends = Vec::new();
            for c in &kept {
                rows_buf.extend_from_slice(&c.text);
                ends.push(rows_buf.len());
            }
            for e in &entries {
                render(format, &mut rows_buf, e);
                ends.push(rows_buf.len());
            }
            let mut start = 0;
            for end in ends {
                rows.push(&rows_buf[start..end]);
                start = end;
            }
        }
        match format {
            ScanFormat::Table => out::write_table(w, &totals, &rows, matching, args.summary_only)?,
            ScanFormat::Json => {
                if !streaming {
                    out::write_json_head(w, &request_sizes)?;
                    for (i, r) in rows.iter().enumerate() {
                        if i > 0 {
                            w.write_all(b",")?;
                        }
                        w.write_all(r)?;
                    }
                }
                out::write_json_tail(w, &totals)?
            }
            ScanFormat::Ndjson => {
                rows.iter().try_for_each(|r| w.write_all(r))?;
                out::write_ndjson_tail(w, &totals)?
            }
            ScanFormat::Csv => {
                if !streaming {
                    out::write_csv_header(w, &request_sizes, model.is_some())?;
                }
                rows.iter().try_for_each(|r| w.write_all(r))?;
            }
            ScanFormat::Filefrag => unreachable!("handled by filefrag() above"),
        }
        all_read = errors.is_empty();
        Ok(())
    })?;
    Ok(if all_read { 0 } else { 1 })
}

/// A root's place in path order: a directory sorts as its path followed by '/'.
fn root_key(r: &Root) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
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

/// One file's listing text in `format` (JSON without a separating comma; lines with their
/// newline).
fn render(format: ScanFormat, out: &mut Vec<u8>, f: &FileEntry) {
    match format {
        ScanFormat::Json => out::file_json_into(out, f),
        ScanFormat::Ndjson => {
            out::file_json_into(out, f);
            out.push(b'\n');
        }
        ScanFormat::Csv => out::csv_row_into(out, f),
        ScanFormat::Table => out::table_row_into(out, f),
        ScanFormat::Filefrag => unreachable!("handled by filefrag() above"),
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
    /// Whole entries (filefrag, or candidates for `--top`).
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
        use std::os::unix::ffi::OsStrExt;
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

/// `Keys::cmp` under `key`, reversed with `--reverse`.
fn order(key: SortKey, reverse: bool) -> impl Fn(&Keys, &Keys) -> Ordering + Copy {
    move |a, b| {
        if reverse {
            Keys::cmp(b, a, key)
        } else {
            Keys::cmp(a, b, key)
        }
    }
}

/// `--format filefrag`: a drop-in for `filefrag -v PATH...` (arguments in order, each
/// mapped as filefrag maps it, directories as their own inode), so the options that choose
/// or order files do not apply.
fn filefrag(args: &ScanArgs) -> Result<i32> {
    let not_with = [
        ("--sort", args.sort.is_some()),
        ("--reverse", args.reverse),
        ("--top", args.top.is_some()),
        ("--min-fragments", args.min_fragments > 0),
        ("--ext", !args.extensions.is_empty()),
        ("--summary-only", args.summary_only),
        ("--cross-mounts", args.cross_mounts),
        ("--request-size", !args.request_sizes.is_empty()),
        ("--model", args.model.is_some()),
    ];
    if let Some((flag, _)) = not_with.iter().find(|(_, given)| *given) {
        bail!("{flag} does not apply to --format filefrag, which prints each argument in the order given, as filefrag -v does");
    }
    let mut status = 0;
    crate::report::to_stdout(|w| {
        status = filefrag_v(w, &args.paths, args.sync)?;
        Ok(())
    })?;
    Ok(if status == 0 { 0 } else { 1 })
}
