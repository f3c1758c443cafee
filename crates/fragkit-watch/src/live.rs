//! What the live page sees after each tick: a JSON snapshot, built once per tick on the
//! watch thread and served as it is (the Prometheus exposition is in `prometheus`).

use serde_json::json;

use super::engine::Engine;
use crate::store::Totals;

/// Files listed by name in the snapshot and in /metrics (the most fragmented ones).
pub(crate) const TOP_FILES: usize = 50;

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
