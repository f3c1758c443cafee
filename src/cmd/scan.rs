//! `fragkit scan PATH...`

use anyhow::{bail, Result};

use crate::cli::{ScanArgs, ScanFormat, SortKey};
use crate::layout::walk::{self, WalkOptions};
use crate::report::filefrag::filefrag_v;
use crate::report::scan as out;
use crate::scan::{scan_roots, FileEntry, DEFAULT_REQUEST_SIZE};

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
    let progress = |n: u64| {
        if n % 64 == 0 {
            bar.set_position(n)
        }
    };

    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.threads.unwrap_or(0))
        .build()?;
    let mut result = pool.install(|| scan_roots(&roots, &opts, &request_sizes, &progress));
    bar.finish_and_clear();
    // Arguments that could not be scanned come first, in the order they were given.
    refused.append(&mut result.errors);
    result.errors = refused;

    for e in &result.errors {
        eprintln!("fragkit: {}: {}", e.path.display(), e.message);
    }

    let machine = args.format != ScanFormat::Table;
    let sort = args.sort.unwrap_or(if machine {
        SortKey::Path
    } else {
        SortKey::Extra
    });
    let top = args.top.unwrap_or(if machine { 0 } else { 25 });
    let mut listed: Vec<&FileEntry> = result
        .files
        .iter()
        .filter(|f| f.metrics.fragments >= args.min_fragments)
        .collect();
    if !args.summary_only {
        sort_files(&mut listed, sort);
    }
    if args.reverse {
        listed.reverse();
    }
    let matching = listed.len();
    if top > 0 {
        listed.truncate(top);
    }
    if args.summary_only {
        listed.clear();
    }

    crate::report::to_stdout(|w| match args.format {
        ScanFormat::Table => out::write_table(w, &result, &listed, matching, args.summary_only),
        ScanFormat::Json => out::write_json(w, &result, &listed),
        ScanFormat::Ndjson => out::write_ndjson(w, &result, &listed),
        ScanFormat::Csv => out::write_csv(w, &result, &listed),
        ScanFormat::Filefrag => unreachable!("handled by filefrag() above"),
    })?;
    Ok(if result.errors.is_empty() { 0 } else { 1 })
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

/// Paths compare as bytes (like `sort` in the C locale): Path's component-wise Ord is
/// several times slower and dominated large scans.
fn path_bytes(f: &FileEntry) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    f.file.path.as_os_str().as_bytes()
}

fn sort_files(files: &mut [&FileEntry], key: SortKey) {
    let extra = |f: &FileEntry| f.metrics.requests[0].extra();
    let ratio = |f: &FileEntry| f.metrics.requests[0].ratio();
    match key {
        SortKey::Path => files.sort_by(|a, b| path_bytes(a).cmp(path_bytes(b))),
        SortKey::Fragments => files.sort_by(|a, b| {
            b.metrics
                .fragments
                .cmp(&a.metrics.fragments)
                .then(path_bytes(a).cmp(path_bytes(b)))
        }),
        SortKey::Extents => files.sort_by(|a, b| {
            b.metrics
                .extents
                .cmp(&a.metrics.extents)
                .then(path_bytes(a).cmp(path_bytes(b)))
        }),
        SortKey::Extra => files.sort_by(|a, b| {
            extra(b)
                .cmp(&extra(a))
                .then(b.metrics.fragments.cmp(&a.metrics.fragments))
                .then(path_bytes(a).cmp(path_bytes(b)))
        }),
        SortKey::Ratio => files.sort_by(|a, b| {
            ratio(b)
                .total_cmp(&ratio(a))
                .then(path_bytes(a).cmp(path_bytes(b)))
        }),
        SortKey::Size => files.sort_by(|a, b| {
            b.metrics
                .size
                .cmp(&a.metrics.size)
                .then(path_bytes(a).cmp(path_bytes(b)))
        }),
    }
}
