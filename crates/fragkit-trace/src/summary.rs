//! `fragkit trace --summary`: the traced ranges, hottest first, with what fragmentation
//! costs each access now (the files are mapped again when the summary is made).

use serde::Serialize;

use super::profile::Profile;
use fragkit_core::layout::walk::map_path;
use fragkit_core::metrics::range_request_count;

#[derive(Debug, Serialize)]
pub struct Summary {
    pub version: u32,
    pub kind: &'static str,
    pub duration_ns: u64,
    pub events: u64,
    pub dropped: u64,
    pub request_size: u64,
    /// I/O paths the tracer does not see (mmap, io_uring, AIO, ...): missing from the counts.
    pub not_traced: &'static str,
    /// `--model`: the modeled SSD the ranges' access times are on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Hottest first.
    pub ranges: Vec<SummaryRange>,
}

#[derive(Debug, Serialize)]
pub struct SummaryRange {
    pub path: String,
    pub offset: u64,
    pub length: u64,
    pub reads: u64,
    pub writes: u64,
    /// Data fragments the range touches now (None if the file could not be mapped).
    pub fragments: Option<u64>,
    /// S(R) − I(R) for reading just this range: device requests each access spends
    /// because of fragmentation.
    pub extra_requests_per_access: Option<u64>,
    /// `--model`: modeled time of one sequential read of the range in R-sized requests
    /// on the layout now, and on a contiguous layout (ns; see `ssd::layout::access_cost`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modeled_ns_per_access: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modeled_contiguous_ns: Option<u64>,
}

pub fn summarize(
    p: &Profile,
    request_size: u64,
    model: Option<&fragkit_core::ssd::Params>,
) -> Summary {
    let mut ranges = Vec::new();
    for f in &p.files {
        let layout = map_path(&f.path, false).ok().map(|s| s.layout);
        let runs = layout.as_ref().map(|l| l.data_runs());
        for r in &f.ranges {
            let modeled = match (model, &layout) {
                (Some(m), Some(l)) => fragkit_core::ssd::layout::access_cost(
                    m,
                    &l.extents,
                    r.offset,
                    r.length,
                    request_size,
                )
                .ok(),
                _ => None,
            };
            let (fragments, extra) = match &runs {
                Some(runs) => {
                    let touched = runs
                        .iter()
                        .filter(|x| x.logical < r.end() && x.logical_end() > r.offset)
                        .count() as u64;
                    let rc = range_request_count(runs, r.offset, r.end(), request_size);
                    (Some(touched), Some(rc.extra()))
                }
                None => (None, None),
            };
            ranges.push(SummaryRange {
                path: f.path.display().to_string(),
                offset: r.offset,
                length: r.length,
                reads: r.reads,
                writes: r.writes,
                fragments,
                extra_requests_per_access: extra,
                modeled_ns_per_access: modeled.map(|m| m.0),
                modeled_contiguous_ns: modeled.map(|m| m.1),
            });
        }
    }
    ranges.sort_by(|a, b| {
        (b.reads + b.writes)
            .cmp(&(a.reads + a.writes))
            .then(
                b.extra_requests_per_access
                    .cmp(&a.extra_requests_per_access),
            )
            .then(a.path.cmp(&b.path))
            .then(a.offset.cmp(&b.offset))
    });
    Summary {
        version: 1,
        kind: "fragkit-trace-summary",
        duration_ns: p.duration_ns,
        events: p.events,
        dropped: p.dropped,
        request_size,
        not_traced: super::NOT_TRACED,
        model: model.map(|m| m.name.clone()),
        ranges,
    }
}
