//! What the live page and Prometheus see after each tick: a JSON snapshot and the text
//! exposition, both built once per tick on the watch thread and served as they are.

use std::fmt::Write as _;

use serde_json::json;

use super::engine::Engine;
use crate::store::Totals;

/// Files listed by name in the snapshot and in /metrics (the most fragmented ones).
pub const TOP_FILES: usize = 50;

fn totals_json(t: &Totals) -> serde_json::Value {
    json!({
        "files": t.files,
        "fragmented_files": t.fragmented_files,
        "bytes": t.bytes,
        "extents": t.extents,
        "fragments": t.fragments,
        "split": t.split,
        "ideal": t.ideal,
        "extra_requests": t.extra_requests(),
    })
}

/// The snapshot the page draws: totals, the recent series, the most fragmented files and
/// the block runs of recently changed files.
pub fn snapshot(e: &Engine) -> String {
    let files: Vec<serde_json::Value> = {
        // Recently changed files first (the map), then the most fragmented others.
        let mut seen = std::collections::HashSet::new();
        let mut v = Vec::new();
        for m in e.maps.iter().rev() {
            let p = std::path::Path::new(&m.path);
            if let Some(s) = e.summary_of(p) {
                seen.insert(m.path.clone());
                v.push(json!({
                    "path": m.path,
                    "size": s.size,
                    "extents": s.extents,
                    "fragments": s.fragments,
                    "extra_requests": s.split - s.ideal.min(s.split),
                    "fragmented": s.is_fragmented(),
                    "runs": m.runs,
                }));
            }
        }
        for (p, s) in e.worst(TOP_FILES) {
            let key = p.to_string_lossy().into_owned();
            if seen.contains(&key) {
                continue;
            }
            v.push(json!({
                "path": key,
                "size": s.size,
                "extents": s.extents,
                "fragments": s.fragments,
                "extra_requests": s.split - s.ideal.min(s.split),
                "fragmented": true,
                "runs": [],
            }));
        }
        v
    };
    let series: Vec<serde_json::Value> = e
        .series
        .iter()
        .map(|(t, s)| {
            json!([
                t,
                s.files,
                s.fragmented_files,
                s.fragments,
                s.extra_requests()
            ])
        })
        .collect();
    json!({
        "version": 1,
        "tick": e.tick,
        "t": e.last.t,
        "source": e.source_name(),
        "roots": e.cfg.roots,
        "request_size": e.cfg.request_size,
        "fs_bytes": e.fs_bytes,
        "last_tick": e.last,
        "totals": totals_json(&e.totals),
        "series_columns": ["t", "files", "fragmented_files", "fragments", "extra_requests"],
        "series": series,
        "files": files,
    })
    .to_string()
}

/// Prometheus label value escaping (text format 0.0.4): backslash, quote, newline.
fn label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// Prometheus text exposition: per-extension gauges, the worst files, tick counters.
pub fn prometheus(e: &Engine) -> String {
    let mut o = String::new();
    let mut exts: Vec<(&String, &Totals)> = e.by_ext.iter().filter(|(_, t)| t.files > 0).collect();
    exts.sort_by(|a, b| a.0.cmp(b.0));
    let r = e.cfg.request_size;
    type Get = fn(&Totals) -> u64;
    let gauges: [(&str, &str, Get); 6] = [
        ("files", "Regular files watched", |t| t.files),
        (
            "fragmented_files",
            "Files with more than one fragment",
            |t| t.fragmented_files,
        ),
        ("extents", "FIEMAP extents", |t| t.extents),
        ("fragments", "Fragments (physically contiguous runs)", |t| {
            t.fragments
        }),
        ("bytes", "Bytes in watched files (st_size)", |t| t.bytes),
        (
            "extra_requests",
            "Extra device requests a sequential read needs at the request size: S(R) - I(R)",
            |t| t.extra_requests(),
        ),
    ];
    for (name, help, get) in gauges {
        let _ = writeln!(o, "# HELP fragkit_watch_{name} {help}, per file extension.");
        let _ = writeln!(o, "# TYPE fragkit_watch_{name} gauge");
        for (ext, t) in &exts {
            let ext = if ext.is_empty() { "none" } else { ext.as_str() };
            let _ = writeln!(
                o,
                "fragkit_watch_{name}{{ext=\"{}\",request_size=\"{r}\"}} {}",
                label(ext),
                get(t)
            );
        }
    }
    let _ = writeln!(
        o,
        "# HELP fragkit_watch_file_fragments Fragments of the {TOP_FILES} most fragmented files."
    );
    let _ = writeln!(o, "# TYPE fragkit_watch_file_fragments gauge");
    for (p, s) in e.worst(TOP_FILES) {
        let _ = writeln!(
            o,
            "fragkit_watch_file_fragments{{path=\"{}\"}} {}",
            label(&p.to_string_lossy()),
            s.fragments
        );
    }
    let counters: [(&str, &str, u64); 2] = [
        ("ticks_total", "Ticks completed", e.tick),
        (
            "full_rescans_total",
            "Full rescans (start, safety net, lost events)",
            e.full_rescans,
        ),
    ];
    for (name, help, v) in counters {
        let _ = writeln!(o, "# HELP fragkit_watch_{name} {help}.");
        let _ = writeln!(o, "# TYPE fragkit_watch_{name} counter");
        let _ = writeln!(o, "fragkit_watch_{name} {v}");
    }
    let _ = writeln!(
        o,
        "# HELP fragkit_watch_last_tick_seconds Time the last tick took."
    );
    let _ = writeln!(o, "# TYPE fragkit_watch_last_tick_seconds gauge");
    let _ = writeln!(
        o,
        "fragkit_watch_last_tick_seconds {}",
        e.last.tick_ms / 1e3
    );
    let _ = writeln!(
        o,
        "# HELP fragkit_watch_last_tick_changed_files Files re-mapped with a changed record in the last tick."
    );
    let _ = writeln!(o, "# TYPE fragkit_watch_last_tick_changed_files gauge");
    let _ = writeln!(
        o,
        "fragkit_watch_last_tick_changed_files {}",
        e.last.changed_files
    );
    o
}
