//! Prometheus text exposition (format 0.0.4) of a watch, built once per tick on the watch
//! thread and served by `serve` at /metrics as it is.

use std::fmt::Write as _;

use super::engine::Engine;
use super::live::TOP_FILES;
use super::store::Totals;

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

/// Prometheus text exposition: per-extension gauges, the worst files (their paths only
/// `with_files`: what a client without the watch's token is not shown), tick counters.
pub fn prometheus(e: &Engine, with_files: bool) -> String {
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
    let worst = if with_files {
        e.worst(TOP_FILES)
    } else {
        Vec::new()
    };
    for (p, s) in worst {
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
