//! `fragkit scan PATH...`

use anyhow::{bail, Result};

use std::io::Write;

use crate::cli::{ScanArgs, ScanFormat};
use crate::layout::walk::WalkOptions;
use crate::report::filefrag::filefrag_v;
use crate::report::scan as out;
use crate::scan::{self, FileEntry, Listing, ScanPlan, SortKey, DEFAULT_REQUEST_SIZE};

/// Exit status: 0 all read, 1 some paths could not be read (reported on stderr and
/// counted; the rest is still scanned and printed), `--format filefrag` included: its
/// stdout and stderr are filefrag's, its status is the project's (filefrag exits with an
/// errno, and 2 would read as a fatal error here).
pub fn run(args: ScanArgs) -> Result<i32> {
    if args.format == ScanFormat::Filefrag {
        return filefrag(&args);
    }
    let request_sizes = if args.request_sizes.is_empty() {
        vec![DEFAULT_REQUEST_SIZE]
    } else {
        args.request_sizes.clone()
    };
    if let Some(0) = args.threads {
        bail!("--threads 0: expected at least 1 worker thread");
    }
    if let Some(n) = args.threads {
        fragkit_core::limits::require_threads("--threads", n as u64)?;
    }
    // Bad model parameters fail before anything is scanned.
    let model = match &args.model {
        Some(m) => Some(super::ssd::model_params(m, None)?),
        None => None,
    };
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
    // Path order is walk order: machine listings in path order are written while the walk
    // goes on.
    let walk_order = machine && sort == SortKey::Path && !args.reverse;
    let plan = ScanPlan {
        paths: args.paths.clone(),
        request_sizes,
        walk: WalkOptions {
            one_file_system: !args.cross_mounts,
            sync: args.sync,
            extensions: args
                .extensions
                .iter()
                .map(|e| e.trim_start_matches('.').to_ascii_lowercase())
                .filter(|e| !e.is_empty())
                .collect(),
        },
        threads: args
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        model,
        listing: Listing {
            sort: (!walk_order).then_some((sort, args.reverse)),
            top,
            min_fragments: args.min_fragments,
            summary_only: args.summary_only,
        },
    };
    let format = args.format;
    let render = |out: &mut Vec<u8>, f: &FileEntry| render(format, out, f);
    let separator: &[u8] = if format == ScanFormat::Json {
        b","
    } else {
        b""
    };
    let request_sizes = &plan.request_sizes;
    let streaming = plan.streams();
    let bar = crate::report::progress::files_spinner();
    let mut all_read = false;
    crate::report::to_stdout(|w| {
        if streaming {
            match format {
                ScanFormat::Json => out::write_json_head(w, request_sizes)?,
                ScanFormat::Csv => out::write_csv_header(w, request_sizes, plan.model.is_some())?,
                _ => {}
            }
        }
        let found = scan::run(&plan, &render, separator, w, &mut |n| bar.set_position(n));
        bar.finish_and_clear();
        let found = found?;
        for e in &found.errors {
            fragkit_sys::stderr_line!("fragkit: {}: {}", e.path.display(), e.message);
        }
        let totals = out::Totals {
            request_sizes,
            summary: &found.summary,
            worst: &found.worst,
            counts: found.counts,
            errors: &found.errors,
            model: plan.model.as_ref().map(|p| out::ModelTotals {
                name: &p.name,
                request_size: request_sizes[0],
                total: found.model_total,
                worst: &found.model_worst,
            }),
        };
        let rows = &found.rows;
        match format {
            ScanFormat::Table => {
                out::write_table(w, &totals, rows, found.matching, args.summary_only)?
            }
            ScanFormat::Json => {
                if !streaming {
                    out::write_json_head(w, request_sizes)?;
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
                    out::write_csv_header(w, request_sizes, plan.model.is_some())?;
                }
                rows.iter().try_for_each(|r| w.write_all(r))?;
            }
            ScanFormat::Filefrag => unreachable!("handled by filefrag() above"),
        }
        all_read = found.errors.is_empty();
        Ok(())
    })?;
    Ok(if all_read { 0 } else { 1 })
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
