//! Output of `fragkit scan`: table, JSON (the docs/design.md contract), NDJSON and CSV.

use fragkit_sys::console::Shown;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;

use serde::Serialize;

#[cfg(test)]
use crate::layout::model::Extent;
use crate::layout::walk::{PathError, WalkCounts};
use crate::metrics::{Distribution, RequestCount, SetMetrics};
use crate::scan::{FileEntry, ModelWorst, Worst};
use crate::ssd::layout::FileCost;
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

/// A name's bytes when they are not UTF-8 (so `path`, lossy, cannot give the file back):
/// JSON adds them as `path_bytes`, an array of byte values; CSV as hex in `path_bytes`.
pub(crate) fn path_bytes(p: &std::path::Path) -> Option<&[u8]> {
    let b = p.as_os_str().as_bytes();
    std::str::from_utf8(b).is_err().then_some(b)
}

fn round4(v: f64) -> f64 {
    (v * 10_000.0).round() / 10_000.0
}

#[cfg(test)]
#[derive(Serialize)]
struct FileJson<'a> {
    path: std::borrow::Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path_bytes: Option<&'a [u8]>,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<CostJson>,
}

/// One file's (or the set's) modeled sequential read, as JSON gives it.
#[derive(Serialize)]
struct CostJson {
    read_ns: u64,
    contiguous_ns: u64,
    ratio: f64,
    collisions: u64,
    device_reads: u64,
}

fn cost_json(c: &FileCost) -> CostJson {
    CostJson {
        read_ns: c.read_ns,
        contiguous_ns: c.contiguous_ns,
        ratio: round4(c.ratio()),
        collisions: c.collisions,
        device_reads: c.device_reads,
    }
}

#[cfg(test)]
fn file_json(f: &FileEntry) -> FileJson<'_> {
    let m = &f.metrics;
    FileJson {
        path: f.file.path.to_string_lossy(),
        path_bytes: path_bytes(&f.file.path),
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
        model: f.model.as_ref().map(cost_json),
    }
}

#[derive(Serialize)]
struct WorstJson<'a> {
    path: std::borrow::Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path_bytes: Option<&'a [u8]>,
    fragments: u64,
    extra: u64,
}

#[derive(Serialize)]
struct ErrorJson<'a> {
    path: std::borrow::Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path_bytes: Option<&'a [u8]>,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<ModelSummaryJson<'a>>,
}

#[derive(Serialize)]
struct ModelSummaryJson<'a> {
    name: &'a str,
    /// Each file read sequentially in requests of this size, one at a time.
    request_size: u64,
    mapping: &'static str,
    #[serde(flatten)]
    total: CostJson,
    worst: Vec<ModelWorstJson<'a>>,
}

#[derive(Serialize)]
struct ModelWorstJson<'a> {
    path: std::borrow::Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path_bytes: Option<&'a [u8]>,
    #[serde(flatten)]
    cost: CostJson,
}

/// `scan --model`: the modeled device and the set's modeled reads.
pub struct ModelTotals<'a> {
    pub name: &'a str,
    pub request_size: u64,
    /// Sums over every file scanned.
    pub total: FileCost,
    /// At most 10, most modeled time added by fragmentation first.
    pub worst: &'a [ModelWorst],
}

/// What the summary of a scan is made of: totals, the worst files, walk counters, errors.
pub struct Totals<'a> {
    pub request_sizes: &'a [u64],
    pub summary: &'a SetMetrics,
    /// At most 10, most extra requests first (see [`crate::scan::worst_first`]).
    pub worst: &'a [Worst],
    pub counts: WalkCounts,
    pub errors: &'a [PathError],
    pub model: Option<ModelTotals<'a>>,
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
                path_bytes: path_bytes(&f.path),
                fragments: f.fragments,
                extra: f.extra,
            })
            .collect(),
        walk: t.counts,
        errors: t.errors.len(),
        error_list: t.errors.iter().map(error_json).collect(),
        model: t.model.as_ref().map(|m| ModelSummaryJson {
            name: m.name,
            request_size: m.request_size,
            mapping: crate::ssd::layout::MAPPING,
            total: cost_json(&m.total),
            worst: m
                .worst
                .iter()
                .map(|w| ModelWorstJson {
                    path: w.path.to_string_lossy(),
                    path_bytes: path_bytes(&w.path),
                    cost: cost_json(&w.cost),
                })
                .collect(),
        }),
    }
}

fn error_json(e: &PathError) -> ErrorJson<'_> {
    ErrorJson {
        path: e.path.to_string_lossy(),
        path_bytes: path_bytes(&e.path),
        message: &e.message,
    }
}

/// One file's JSON object appended to `out` (the buffer a worker reuses for its batch):
/// the schema of [`FileJson`] written by hand, because serde_json escapes every key of
/// every file (5% of a 100k-file scan's samples in perf) and a scan writes ~700 bytes per
/// file. `file_json_matches_serde` holds it to serde's bytes.
pub(crate) fn file_json_into(out: &mut Vec<u8>, f: &FileEntry) {
    let m = &f.metrics;
    // Inlined, so each constant key is copied by a few moves instead of a memcpy call
    // (39 calls per file were 5% of a one-thread scan's instructions, callgrind).
    #[inline(always)]
    fn put(out: &mut Vec<u8>, key: &[u8], v: u64) {
        out.extend_from_slice(key);
        put_u64(out, v);
    }
    macro_rules! num {
        ($out:expr, $key:expr, $v:expr) => {
            put($out, $key, $v)
        };
    }
    // A whole-output reserve once per file: the ~40 small appends below then never grow
    // the buffer one by one.
    out.reserve(1024);
    out.extend_from_slice(b"{\"path\":");
    let path = f.file.path.as_os_str().as_bytes();
    if path.iter().all(|&c| PLAIN_ASCII[c as usize]) {
        // Printable ASCII without '"' or '\\': valid UTF-8 that needs no escape.
        out.push(b'"');
        out.extend_from_slice(path);
        out.push(b'"');
    } else {
        match std::str::from_utf8(path) {
            Ok(p) => json_str(out, p),
            Err(_) => {
                json_str(out, &String::from_utf8_lossy(path));
                out.extend_from_slice(b",\"path_bytes\":");
                serde_json::to_writer(&mut *out, path).expect("bytes serialise");
            }
        }
    }
    let (major, minor) = crate::sys::dev::split(f.file.dev);
    num!(out, b",\"dev\":\"", major.into());
    num!(out, b":", minor.into());
    num!(out, b"\",\"ino\":", f.file.ino);
    out.extend_from_slice(b",\"fs\":");
    match crate::sys::fsinfo::known_fs_name(f.file.fs.magic) {
        // Known names are plain lower-case words: nothing to check or escape.
        Some(name) => {
            out.push(b'"');
            out.extend_from_slice(name.as_bytes());
            out.push(b'"');
        }
        None => json_str(out, &f.file.fs.type_name()),
    }
    num!(out, b",\"block_size\":", f.file.fs.block_size.into());
    num!(out, b",\"size\":", m.size);
    num!(out, b",\"allocated\":", m.allocated);
    out.extend_from_slice(b",\"extents\":[");
    for (i, e) in f.file.layout.extents.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        num!(out, b"{\"logical\":", e.logical);
        num!(out, b",\"physical\":", e.physical);
        num!(out, b",\"length\":", e.length);
        out.extend_from_slice(b",\"flags\":[");
        flags_json(out, e.flags);
        out.extend_from_slice(b"]}");
    }
    num!(out, b"],\"fragments\":", m.fragments);
    num!(out, b",\"holes\":", m.holes);
    num!(out, b",\"hole_bytes\":", m.hole_bytes);
    num!(out, b",\"unwritten_bytes\":", m.unwritten_bytes);
    num!(out, b",\"delalloc_bytes\":", m.delalloc_bytes);
    num!(out, b",\"shared_bytes\":", m.shared_bytes);
    num!(out, b",\"encoded_bytes\":", m.encoded_bytes);
    num!(out, b",\"inline_bytes\":", m.inline_bytes);
    num!(out, b",\"blocks\":", m.blocks);
    out.extend_from_slice(b",\"layout_score\":");
    json_f64(out, round4(m.layout_score()));
    for (key, d) in [
        (&b",\"frag_sizes\":"[..], &m.frag_sizes),
        (b",\"frag_distances\":", &m.frag_distances),
    ] {
        out.extend_from_slice(key);
        num!(out, b"{\"count\":", d.count);
        num!(out, b",\"min\":", d.min);
        num!(out, b",\"max\":", d.max);
        num!(out, b",\"sum\":", d.sum);
        out.extend_from_slice(b",\"buckets\":[");
        for (i, b) in d.buckets.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            num!(out, b"{\"min\":", b.min);
            num!(out, b",\"max\":", b.max);
            num!(out, b",\"count\":", b.count);
            out.push(b'}');
        }
        out.extend_from_slice(b"]}");
    }
    out.extend_from_slice(b",\"requests\":[");
    for (i, (r, mv)) in m.requests.iter().zip(&m.move_bytes).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        num!(out, b"{\"size\":", r.size);
        num!(out, b",\"split\":", r.split);
        num!(out, b",\"ideal\":", r.ideal);
        num!(out, b",\"extra\":", r.extra());
        out.extend_from_slice(b",\"ratio\":");
        json_f64(out, round4(r.ratio()));
        num!(out, b",\"move_bytes\":", *mv);
        out.push(b'}');
    }
    out.push(b']');
    if let Some(c) = &f.model {
        num!(out, b",\"model\":{\"read_ns\":", c.read_ns);
        num!(out, b",\"contiguous_ns\":", c.contiguous_ns);
        out.extend_from_slice(b",\"ratio\":");
        json_f64(out, round4(c.ratio()));
        num!(out, b",\"collisions\":", c.collisions);
        num!(out, b",\"device_reads\":", c.device_reads);
        out.push(b'}');
    }
    out.push(b'}');
}

/// Bytes a JSON string holds as they are and that are ASCII (so valid UTF-8 alone):
/// 0x20..=0x7f except '"' and '\\' (serde_json leaves DEL unescaped too).
static PLAIN_ASCII: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0x20;
    while c < 0x80 {
        t[c] = c != b'"' as usize && c != b'\\' as usize;
        c += 1;
    }
    t
};

/// "00" to "99": two digits per division when writing numbers.
static DIGIT_PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// `v` in decimal, as itoa and serde write it. The digits go into a 20-byte array that
/// is appended whole (a fixed-size copy the compiler turns into two moves) and the
/// buffer is cut back to the digit count: itoa's variable-length copy was one memcpy
/// call per number, 40 per file (callgrind).
#[inline]
fn put_u64(out: &mut Vec<u8>, v: u64) {
    if v < 10 {
        out.push(b'0' + v as u8);
        return;
    }
    let n = v.ilog10() as usize + 1;
    let mut buf = [0u8; 20];
    let (mut i, mut x) = (n, v);
    while x >= 100 {
        let r = (x % 100) as usize * 2;
        x /= 100;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&DIGIT_PAIRS[r..r + 2]);
    }
    if x >= 10 {
        let r = x as usize * 2;
        buf[i - 2..i].copy_from_slice(&DIGIT_PAIRS[r..r + 2]);
    } else {
        buf[i - 1] = b'0' + x as u8;
    }
    let len = out.len();
    out.extend_from_slice(&buf);
    out.truncate(len + n);
}

/// A JSON string: copied as is when nothing in it needs escaping (the usual path).
fn json_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes()
        .all(|c| c >= 0x20 && c != b'"' && c != b'\\' && c != 0x7f)
    {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, s).expect("a string serialises");
    }
}

/// A float as serde_json writes it (shortest round-trip text).
fn json_f64(out: &mut Vec<u8>, v: f64) {
    // Layout score and S/I are 1 for every unfragmented file: serde's text for 1.
    if v == 1.0 {
        out.extend_from_slice(b"1.0");
        return;
    }
    serde_json::to_writer(&mut *out, &v).expect("a float serialises");
}

/// Flag names as [`ExtentFlags`]' Serialize gives them, without its Vec<String>.
fn flags_json(out: &mut Vec<u8>, flags: crate::layout::model::ExtentFlags) {
    use crate::layout::model::ExtentFlags;
    let named = ExtentFlags::NAMED.iter().fold(0, |acc, (f, _)| acc | f.0);
    if flags.0 & !named != 0 {
        // Bits without a name come out as hex: leave those rare maps to serde.
        let names = flags.names();
        let text = serde_json::to_string(&names).expect("names serialise");
        out.extend_from_slice(&text.as_bytes()[1..text.len() - 1]);
        return;
    }
    let mut first = true;
    for (flag, name) in ExtentFlags::NAMED {
        if flags.0 & flag.0 != 0 {
            if !first {
                out.push(b',');
            }
            first = false;
            out.push(b'"');
            out.extend_from_slice(name.as_bytes());
            out.push(b'"');
        }
    }
}

/// `--format json`, before the first file: {"version", "request_sizes", "files": [
pub(crate) fn write_json_head(out: &mut impl Write, request_sizes: &[u64]) -> io::Result<()> {
    write!(out, "{{\"version\":{SCHEMA_VERSION},\"request_sizes\":")?;
    serde_json::to_writer(&mut *out, request_sizes)?;
    out.write_all(b",\"files\":[")
}

/// `--format json`, after the last file: ], "summary": {...}}
pub(crate) fn write_json_tail(out: &mut impl Write, t: &Totals) -> io::Result<()> {
    out.write_all(b"],\"summary\":")?;
    serde_json::to_writer(&mut *out, &summary_json(t))?;
    out.write_all(b"}\n")
}

/// `--format ndjson`: one file object per line (see [`file_json_into`]), then
/// {"version":1,"summary":{...}}.
pub(crate) fn write_ndjson_tail(out: &mut impl Write, t: &Totals) -> io::Result<()> {
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

/// `--format csv` header; request columns repeat per R; model columns with `--model`.
pub(crate) fn write_csv_header(
    out: &mut impl Write,
    request_sizes: &[u64],
    model: bool,
) -> io::Result<()> {
    let mut header: Vec<String> = [
        "path",
        "path_bytes",
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
    if model {
        header.extend(
            [
                "model_read_ns",
                "model_contiguous_ns",
                "model_ratio",
                "model_collisions",
                "model_device_reads",
            ]
            .map(String::from),
        );
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
pub(crate) fn csv_row_into(out: &mut Vec<u8>, f: &FileEntry) {
    let m = &f.metrics;
    let (major, minor) = crate::sys::dev::split(f.file.dev);
    let _ = csv_field(out, f.file.path.as_os_str().to_string_lossy().as_bytes());
    out.push(b',');
    if let Some(b) = path_bytes(&f.file.path) {
        for x in b {
            let _ = write!(out, "{x:02x}");
        }
    }
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
    if let Some(c) = &f.model {
        let _ = write!(
            out,
            ",{},{},{:.4},{},{}",
            c.read_ns,
            c.contiguous_ns,
            c.ratio(),
            c.collisions,
            c.device_reads
        );
    }
    out.push(b'\n');
}

/// One line of the human table (see [`write_table`]).
pub(crate) fn table_row_into(out: &mut Vec<u8>, f: &FileEntry) {
    let m = &f.metrics;
    let req = &m.requests[0];
    let _ = write!(
        out,
        "{:>7} {:>7} {:>11} {:>9} {:>7.2} {:>10}",
        m.fragments,
        m.extents,
        HumanBytes(m.size).to_string(),
        req.extra(),
        req.ratio(),
        HumanBytes(m.move_bytes[0]).to_string(),
    );
    if let Some(c) = &f.model {
        let _ = write!(
            out,
            " {:>10} {:>7} {:>6}",
            ms(c.read_ns),
            format!("x{:.2}", c.ratio()),
            c.collisions
        );
    }
    let _ = write!(out, "  {}", Shown(&f.file.path));
    if m.shared_bytes > 0 {
        // Reflinked or snapshot-shared data: defrag leaves it unless --unshare.
        let _ = write!(out, "  [shared {}]", HumanBytes(m.shared_bytes));
    }
    let _ = writeln!(out);
}

/// Nanoseconds as milliseconds with 3 decimals.
fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// The human table: one line per listed file (rendered by [`table_row_into`]), then the
/// summary.
pub(crate) fn write_table(
    out: &mut impl Write,
    t: &Totals,
    rows: &[Box<[u8]>],
    listed_of: usize,
    summary_only: bool,
) -> io::Result<()> {
    let r0 = t.request_sizes[0];
    let label = short_size(r0);
    if !summary_only && !rows.is_empty() {
        write!(
            out,
            "{:>7} {:>7} {:>11} {:>9} {:>7} {:>10}",
            "FRAGS",
            "EXTENTS",
            "SIZE",
            format!("EXTRA@{label}"),
            "SPLIT",
            "MOVE"
        )?;
        if t.model.is_some() {
            write!(out, " {:>10} {:>7} {:>6}", "MODELED", "VS-CONT", "COLL")?;
        }
        writeln!(out, "  PATH")?;
        for row in rows {
            out.write_all(row)?;
        }
        // What makes the columns actionable: the cost per read, and the price of removing it.
        writeln!(
            out,
            "(EXTRA@{label}: extra device requests one full sequential read of the file needs at {label}, S(R)-I(R); \
             MOVE: bytes a pick-style defrag would rewrite to remove them, the {label} windows spanning more than one fragment)"
        )?;
        if let Some(m) = &t.model {
            writeln!(
                out,
                "(MODELED: one sequential read of the file at {label}, one request at a time, on the modeled {} SSD; \
                 VS-CONT: that time over the same file in one piece; COLL: flash pages its requests put on a die beyond an even spread)",
                m.name
            )?;
        }
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
    if let Some(m) = &t.model {
        writeln!(
            out,
            "modeled    on {} (each file read once sequentially at {}, mapping from FIEMAP in physical order): {} now, {} if every file were contiguous (x{:.2}); {} die collisions",
            m.name,
            short_size(m.request_size),
            ms(m.total.read_ns),
            ms(m.total.contiguous_ns),
            m.total.ratio(),
            m.total.collisions
        )?;
        for w in m.worst {
            writeln!(
                out,
                "           {} now vs {} contiguous (x{:.2}, {} collisions)  {}",
                ms(w.cost.read_ns),
                ms(w.cost.contiguous_ns),
                w.cost.ratio(),
                w.cost.collisions,
                Shown(&w.path)
            )?;
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::model::{ExtentFlags, FileLayout};
    use crate::layout::walk::ScannedFile;
    use crate::metrics::FileMetrics;
    use crate::sys::fsinfo::FsInfo;
    use std::os::unix::ffi::OsStrExt;
    use std::path::PathBuf;

    fn entry(path: PathBuf, extents: Vec<Extent>) -> FileEntry {
        let layout = FileLayout {
            size: extents.iter().map(|e| e.logical_end()).max().unwrap_or(0) + 100,
            allocated: 8192,
            block_size: 4096,
            extents,
        };
        FileEntry {
            model: None,
            metrics: FileMetrics::compute(&layout, &[4096, 131072, 1 << 20]),
            file: ScannedFile {
                path,
                dev: (259 << 8) | 3,
                ino: u64::MAX,
                nlink: 1,
                fs: FsInfo {
                    magic: 0xEF53,
                    block_size: 4096,
                    blocks: 0,
                    blocks_available: 0,
                    blocks_free: 0,
                    fragment_size: 4096,
                    fsid: [0, 0],
                },
                layout,
            },
        }
    }

    fn ext(logical: u64, physical: u64, length: u64, flags: u32) -> Extent {
        Extent {
            logical,
            physical,
            length,
            flags: ExtentFlags(flags),
        }
    }

    #[test]
    fn numbers_are_written_as_itoa_writes_them() {
        let mut n = itoa::Buffer::new();
        let mut values = vec![0, 1, 9, 10, 99, 100, 101, 999, 1000, u64::MAX, u64::MAX - 1];
        values.extend(
            (0..64).flat_map(|k| [1u64 << k, (1u64 << k) - 1, 10u64.saturating_pow(k / 3)]),
        );
        for v in values {
            let mut out = b"x".to_vec();
            put_u64(&mut out, v);
            assert_eq!(&out[1..], n.format(v).as_bytes(), "{v}");
        }
        let mut out = Vec::new();
        for v in [1.0, 0.5, 0.0, 1.0001, 2.0] {
            out.clear();
            json_f64(&mut out, v);
            assert_eq!(out, serde_json::to_vec(&v).unwrap(), "{v}");
        }
    }

    #[test]
    fn file_json_matches_serde() {
        let odd = PathBuf::from(std::ffi::OsStr::from_bytes(
            b"/a \"q\"\\b\n\x7f\xff\xfe\x01/\xc3\xa9",
        ));
        let os = |b: &[u8]| PathBuf::from(std::ffi::OsStr::from_bytes(b));
        for e in [
            entry(PathBuf::from("/plain/file"), vec![]),
            entry(os(b"/del\x7f/tab\t/utf8-\xc3\xa9"), vec![]),
            entry(os(b"/only\\backslash"), vec![]),
            entry(os(b"/bad-\x80"), vec![]),
            entry(odd, vec![ext(0, 4096, 4096, 0)]),
            entry(
                PathBuf::from("/x"),
                vec![
                    ext(0, 1 << 30, 3 << 12, 0x800),
                    ext(3 << 12, 5 << 20, 1 << 12, 0x2000 | 0x8),
                    ext(9 << 12, 7 << 20, 5 << 12, 0x40000 | 0x1),
                    ext(20 << 12, 0, 1 << 12, 0x200 | 0x100 | 0x1),
                ],
            ),
        ] {
            let mut ours = Vec::new();
            file_json_into(&mut ours, &e);
            let theirs = serde_json::to_vec(&file_json(&e)).unwrap();
            assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&theirs)
            );
            // `scan --model` adds one object at the end, and nothing else changes.
            let modeled = FileEntry {
                model: Some(FileCost {
                    read_ns: 21_968_576,
                    contiguous_ns: 8_126_144,
                    collisions: 192,
                    device_reads: 256,
                }),
                ..e
            };
            let mut with = Vec::new();
            file_json_into(&mut with, &modeled);
            let theirs = serde_json::to_vec(&file_json(&modeled)).unwrap();
            assert_eq!(
                String::from_utf8_lossy(&with),
                String::from_utf8_lossy(&theirs)
            );
            assert_eq!(with[..ours.len() - 1], ours[..ours.len() - 1]);
        }
    }
}
