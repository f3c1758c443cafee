//! Output of `fragkit scan`: table, JSON (the docs/design.md contract), NDJSON and CSV.

use std::io::{self, Write};

use serde::Serialize;

use crate::layout::model::Extent;
use crate::layout::walk::{PathError, WalkCounts};
use crate::metrics::{Distribution, RequestCount, SetMetrics};
use crate::scan::{FileEntry, Worst};
use crate::units::{short_size, HumanBytes};

pub const SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
struct RequestJson {
    size: u64,
    split: u64,
    ideal: u64,
    extra: u64,
    ratio: f64,
    /// Bytes a window-granular defrag would rewrite to remove the extra requests.
    move_bytes: u64,
}

fn requests_json(reqs: &[RequestCount], moves: &[u64]) -> Vec<RequestJson> {
    reqs.iter()
        .zip(moves)
        .map(|(r, &m)| RequestJson {
            size: r.size,
            split: r.split,
            ideal: r.ideal,
            extra: r.extra(),
            ratio: round4(r.ratio()),
            move_bytes: m,
        })
        .collect()
}

fn round4(v: f64) -> f64 {
    (v * 10_000.0).round() / 10_000.0
}

#[derive(Serialize)]
struct FileJson<'a> {
    path: std::borrow::Cow<'a, str>,
    dev: String,
    ino: u64,
    fs: String,
    block_size: u32,
    size: u64,
    allocated: u64,
    extents: &'a [Extent],
    fragments: u64,
    holes: u64,
    hole_bytes: u64,
    unwritten_bytes: u64,
    delalloc_bytes: u64,
    shared_bytes: u64,
    encoded_bytes: u64,
    inline_bytes: u64,
    blocks: u64,
    layout_score: f64,
    frag_sizes: &'a Distribution,
    frag_distances: &'a Distribution,
    requests: Vec<RequestJson>,
}

fn file_json(f: &FileEntry) -> FileJson<'_> {
    let m = &f.metrics;
    FileJson {
        path: f.file.path.to_string_lossy(),
        dev: f.file.dev_string(),
        ino: f.file.ino,
        fs: f.file.fs.type_name(),
        block_size: f.file.fs.block_size,
        size: m.size,
        allocated: m.allocated,
        extents: &f.file.layout.extents,
        fragments: m.fragments,
        holes: m.holes,
        hole_bytes: m.hole_bytes,
        unwritten_bytes: m.unwritten_bytes,
        delalloc_bytes: m.delalloc_bytes,
        shared_bytes: m.shared_bytes,
        encoded_bytes: m.encoded_bytes,
        inline_bytes: m.inline_bytes,
        blocks: m.blocks,
        layout_score: round4(m.layout_score()),
        frag_sizes: &m.frag_sizes,
        frag_distances: &m.frag_distances,
        requests: requests_json(&m.requests, &m.move_bytes),
    }
}

#[derive(Serialize)]
struct WorstJson<'a> {
    path: std::borrow::Cow<'a, str>,
    fragments: u64,
    extra: u64,
}

#[derive(Serialize)]
struct ErrorJson<'a> {
    path: std::borrow::Cow<'a, str>,
    message: &'a str,
}

#[derive(Serialize)]
struct SummaryJson<'a> {
    files: u64,
    fragmented_files: u64,
    bytes: u64,
    allocated: u64,
    extents: u64,
    fragments: u64,
    holes: u64,
    unwritten_bytes: u64,
    shared_bytes: u64,
    encoded_bytes: u64,
    blocks: u64,
    layout_score: f64,
    e4defrag_score: f64,
    requests: Vec<RequestJson>,
    frag_sizes: &'a Distribution,
    frag_distances: &'a Distribution,
    worst: Vec<WorstJson<'a>>,
    walk: WalkCounts,
    errors: usize,
    error_list: Vec<ErrorJson<'a>>,
}

/// What the summary of a scan is made of: totals, the worst files, walk counters, errors.
pub struct Totals<'a> {
    pub request_sizes: &'a [u64],
    pub summary: &'a SetMetrics,
    /// At most 10, most extra requests first (see [`crate::scan::worst_first`]).
    pub worst: &'a [Worst],
    pub counts: WalkCounts,
    pub errors: &'a [PathError],
}

fn summary_json<'a>(t: &Totals<'a>) -> SummaryJson<'a> {
    let s: &SetMetrics = t.summary;
    SummaryJson {
        files: s.files,
        fragmented_files: s.fragmented_files,
        bytes: s.bytes,
        allocated: s.allocated,
        extents: s.extents,
        fragments: s.fragments,
        holes: s.holes,
        unwritten_bytes: s.unwritten_bytes,
        shared_bytes: s.shared_bytes,
        encoded_bytes: s.encoded_bytes,
        blocks: s.blocks,
        layout_score: round4(s.layout_score()),
        e4defrag_score: (s.e4defrag_score() * 100.0).round() / 100.0,
        requests: requests_json(&s.requests, &s.move_bytes),
        frag_sizes: &s.frag_sizes,
        frag_distances: &s.frag_distances,
        worst: t
            .worst
            .iter()
            .map(|f| WorstJson {
                path: f.path.to_string_lossy(),
                fragments: f.fragments,
                extra: f.extra,
            })
            .collect(),
        walk: t.counts,
        errors: t.errors.len(),
        error_list: t.errors.iter().map(error_json).collect(),
    }
}

fn error_json(e: &PathError) -> ErrorJson<'_> {
    ErrorJson {
        path: e.path.to_string_lossy(),
        message: &e.message,
    }
}

/// One file's JSON object appended to `out` (the buffer a worker reuses for its batch).
pub fn file_json_into(out: &mut Vec<u8>, f: &FileEntry) {
    serde_json::to_writer(&mut *out, &file_json(f)).expect("file JSON serialises");
}

/// `--format json`, before the first file: {"version", "request_sizes", "files": [
pub fn write_json_head(out: &mut impl Write, request_sizes: &[u64]) -> io::Result<()> {
    write!(out, "{{\"version\":{SCHEMA_VERSION},\"request_sizes\":")?;
    serde_json::to_writer(&mut *out, request_sizes)?;
    out.write_all(b",\"files\":[")
}

/// `--format json`, after the last file: ], "summary": {...}}
pub fn write_json_tail(out: &mut impl Write, t: &Totals) -> io::Result<()> {
    out.write_all(b"],\"summary\":")?;
    serde_json::to_writer(&mut *out, &summary_json(t))?;
    out.write_all(b"}\n")
}

/// `--format ndjson`: one file object per line (see [`file_json_into`]), then
/// {"version":1,"summary":{...}}.
pub fn write_ndjson_tail(out: &mut impl Write, t: &Totals) -> io::Result<()> {
    #[derive(Serialize)]
    struct Tail<'a> {
        version: u32,
        summary: SummaryJson<'a>,
    }
    serde_json::to_writer(
        &mut *out,
        &Tail {
            version: SCHEMA_VERSION,
            summary: summary_json(t),
        },
    )?;
    writeln!(out)
}

/// `--format csv` header; request columns repeat per R.
pub fn write_csv_header(out: &mut impl Write, request_sizes: &[u64]) -> io::Result<()> {
    let mut header: Vec<String> = [
        "path",
        "dev",
        "ino",
        "fs",
        "size",
        "allocated",
        "extents",
        "fragments",
        "holes",
        "unwritten_bytes",
        "shared_bytes",
        "encoded_bytes",
        "layout_score",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for r in request_sizes {
        let l = short_size(*r);
        header.extend([
            format!("split_{l}"),
            format!("ideal_{l}"),
            format!("extra_{l}"),
            format!("move_bytes_{l}"),
        ]);
    }
    writeln!(out, "{}", header.join(","))
}

/// A CSV field as RFC 4180 wants it: quoted (quotes doubled) only when it holds a comma,
/// a quote or a line break.
fn csv_field(out: &mut impl Write, v: &[u8]) -> io::Result<()> {
    if !v.iter().any(|c| matches!(c, b',' | b'"' | b'\n' | b'\r')) {
        return out.write_all(v);
    }
    out.write_all(b"\"")?;
    for part in v.split_inclusive(|&c| c == b'"') {
        out.write_all(part)?;
        if part.last() == Some(&b'"') {
            out.write_all(b"\"")?;
        }
    }
    out.write_all(b"\"")
}

/// One `--format csv` row.
pub fn csv_row_into(out: &mut Vec<u8>, f: &FileEntry) {
    let m = &f.metrics;
    let (major, minor) = crate::sys::dev::split(f.file.dev);
    let _ = csv_field(out, f.file.path.as_os_str().to_string_lossy().as_bytes());
    let _ = write!(
        out,
        ",{major}:{minor},{},{},{},{},{},{},{},{},{},{},{:.4}",
        f.file.ino,
        f.file.fs.type_name(),
        m.size,
        m.allocated,
        m.extents,
        m.fragments,
        m.holes,
        m.unwritten_bytes,
        m.shared_bytes,
        m.encoded_bytes,
        m.layout_score()
    );
    for (r, mv) in m.requests.iter().zip(&m.move_bytes) {
        let _ = write!(out, ",{},{},{},{mv}", r.split, r.ideal, r.extra());
    }
    out.push(b'\n');
}

/// One line of the human table (see [`write_table`]).
pub fn table_row_into(out: &mut Vec<u8>, f: &FileEntry) {
    let m = &f.metrics;
    let req = &m.requests[0];
    let _ = writeln!(
        out,
        "{:>7} {:>7} {:>11} {:>9} {:>7.2} {:>10}  {}",
        m.fragments,
        m.extents,
        HumanBytes(m.size).to_string(),
        req.extra(),
        req.ratio(),
        HumanBytes(m.move_bytes[0]).to_string(),
        f.file.path.display()
    );
}

/// The human table: one line per listed file (rendered by [`table_row_into`]), then the
/// summary.
pub fn write_table(
    out: &mut impl Write,
    t: &Totals,
    rows: &[&[u8]],
    listed_of: usize,
    summary_only: bool,
) -> io::Result<()> {
    let r0 = t.request_sizes[0];
    let label = short_size(r0);
    if !summary_only && !rows.is_empty() {
        writeln!(
            out,
            "{:>7} {:>7} {:>11} {:>9} {:>7} {:>10}  PATH",
            "FRAGS",
            "EXTENTS",
            "SIZE",
            format!("EXTRA@{label}"),
            "SPLIT",
            "MOVE"
        )?;
        for row in rows {
            out.write_all(row)?;
        }
        // What makes the columns actionable: the cost per read, and the price of removing it.
        writeln!(
            out,
            "(EXTRA@{label}: extra device requests one full sequential read of the file needs at {label}, S(R)-I(R); \
             MOVE: bytes a pick-style defrag would rewrite to remove them, the {label} windows spanning more than one fragment)"
        )?;
        if listed_of > rows.len() {
            writeln!(
                out,
                "({} of {} matching files listed; --top 0 lists all)",
                rows.len(),
                listed_of
            )?;
        }
        writeln!(out)?;
    }
    let s = t.summary;
    let pct = |a: u64, b: u64| {
        if b == 0 {
            0.0
        } else {
            100.0 * a as f64 / b as f64
        }
    };
    writeln!(
        out,
        "files      {} scanned, {} fragmented ({:.1}%), {} in {} extents / {} fragments",
        s.files,
        s.fragmented_files,
        pct(s.fragmented_files, s.files),
        HumanBytes(s.bytes),
        s.extents,
        s.fragments
    )?;
    let e4 = s.e4defrag_score();
    let band = if e4 <= 30.0 {
        "no problem"
    } else if e4 <= 55.0 {
        "a little fragmented"
    } else {
        "needs defragmentation"
    };
    writeln!(
        out,
        "layout     score {:.4} (1 = every file in one piece); e4defrag score {:.0} ({band})",
        s.layout_score(),
        e4
    )?;
    for (r, mv) in s.requests.iter().zip(&s.move_bytes) {
        writeln!(
            out,
            "requests   at {}: {} for one sequential read of every file, ideal {}: {} extra ({:.1}%); moving {} would remove them",
            short_size(r.size),
            r.split,
            r.ideal,
            r.extra(),
            pct(r.extra(), r.ideal),
            HumanBytes(*mv)
        )?;
    }
    if s.frag_sizes.count > 0 {
        writeln!(
            out,
            "fragments  size min {} / mean {} / max {}",
            HumanBytes(s.frag_sizes.min),
            HumanBytes(s.frag_sizes.mean() as u64),
            HumanBytes(s.frag_sizes.max)
        )?;
    }
    if s.frag_distances.count > 0 {
        writeln!(
            out,
            "distance   |d| min {} / mean {} / max {} between consecutive fragments",
            HumanBytes(s.frag_distances.min),
            HumanBytes(s.frag_distances.mean() as u64),
            HumanBytes(s.frag_distances.max)
        )?;
    }
    if s.unwritten_bytes + s.shared_bytes + s.encoded_bytes > 0 {
        writeln!(
            out,
            "special    {} unwritten (preallocated), {} shared (reflink/snapshot), {} encoded (compressed)",
            HumanBytes(s.unwritten_bytes),
            HumanBytes(s.shared_bytes),
            HumanBytes(s.encoded_bytes)
        )?;
    }
    let c = &t.counts;
    let mut skipped = Vec::new();
    for (n, what) in [
        (c.skipped_non_regular, "not regular files"),
        (c.skipped_filtered, "filtered by extension"),
        (c.hard_link_duplicates, "extra hard links"),
        (c.other_fs_directories, "directories on other file systems"),
        (c.vanished, "vanished during the scan"),
        (c.changed, "changed during the scan (mapped again)"),
    ] {
        if n > 0 {
            skipped.push(format!("{n} {what}"));
        }
    }
    if !skipped.is_empty() {
        writeln!(out, "skipped    {}", skipped.join(", "))?;
    }
    if !t.errors.is_empty() {
        writeln!(
            out,
            "errors     {} paths could not be read (listed on stderr)",
            t.errors.len()
        )?;
    }
    Ok(())
}
