//! Output of `fragkit probe`: the measured points and the inference, explained.

use fragkit_sys::console::Shown;
use std::io::{self, Write};
use std::path::PathBuf;

use serde::Serialize;

use crate::bench::probe::{per_request_overhead, slowdown, AlignmentInference, InterfacePoint};
use crate::io::BlockDevice;
use crate::units::{short_size, HumanBytes};

pub use super::bench::SCHEMA_VERSION;

#[derive(Debug, Clone, Serialize)]
pub(crate) struct ProbeTarget {
    #[serde(flatten, serialize_with = "fragkit_core::units::path_fields")]
    pub path: PathBuf,
    /// "block_device" or "file".
    pub kind: &'static str,
    pub size: u64,
    pub device: BlockDevice,
    /// Caveats about what the numbers can mean for this target.
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct AlignmentRow {
    pub alignment: u64,
    pub iops: f64,
    pub mb_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub device_reads: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct AlignmentReport {
    pub version: u32,
    pub target: ProbeTarget,
    pub read_size: u64,
    pub queue_depth: u32,
    pub reads_per_alignment: u64,
    pub span: u64,
    pub points: Vec<AlignmentRow>,
    pub inference: AlignmentInference,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct InterfaceRow {
    pub queue_depth: u32,
    pub requests: u64,
    pub request_size: u64,
    /// Trimmed mean over the iterations.
    pub seconds: f64,
    pub mb_per_s: f64,
    pub mean_latency_us: f64,
    pub device_reads: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct InterfaceSummary {
    pub queue_depth: u32,
    /// Least-squares slope of time over request count.
    pub per_request_overhead_us: f64,
    /// Time with the most requests over time with one.
    pub slowdown: f64,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct InterfaceReport {
    pub version: u32,
    pub target: ProbeTarget,
    pub bytes: u64,
    pub iterations: u32,
    pub points: Vec<InterfaceRow>,
    pub summary: Vec<InterfaceSummary>,
}

impl InterfaceReport {
    pub fn new(
        target: ProbeTarget,
        bytes: u64,
        iterations: u32,
        points: Vec<InterfaceRow>,
    ) -> InterfaceReport {
        let mut qds: Vec<u32> = points.iter().map(|p| p.queue_depth).collect();
        qds.dedup();
        let summary = qds
            .iter()
            .map(|&qd| {
                let pts: Vec<InterfacePoint> = points
                    .iter()
                    .filter(|p| p.queue_depth == qd)
                    .map(|p| InterfacePoint {
                        requests: p.requests,
                        seconds: p.seconds,
                    })
                    .collect();
                InterfaceSummary {
                    queue_depth: qd,
                    per_request_overhead_us: per_request_overhead(&pts) * 1e6,
                    slowdown: slowdown(&pts),
                }
            })
            .collect();
        InterfaceReport {
            version: SCHEMA_VERSION,
            target,
            bytes,
            iterations,
            points,
            summary,
        }
    }
}

pub(crate) fn write_json<T: Serialize>(w: &mut dyn Write, report: &T) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, report)?;
    writeln!(w)
}

fn write_target(w: &mut dyn Write, t: &ProbeTarget) -> io::Result<()> {
    writeln!(
        w,
        "{} ({} of {}, device {})",
        Shown(&t.path),
        t.kind.replace('_', " "),
        HumanBytes(t.size),
        t.device.name
    )?;
    for n in &t.notes {
        writeln!(w, "  note: {n}")?;
    }
    Ok(())
}

pub(crate) fn write_alignment_table(w: &mut dyn Write, r: &AlignmentReport) -> io::Result<()> {
    write_target(w, &r.target)?;
    writeln!(
        w,
        "{} random O_DIRECT reads at QD{}, {} per alignment, over the first {}; alignments {}..{} in steps of {}",
        short_size(r.read_size),
        r.queue_depth,
        r.reads_per_alignment,
        HumanBytes(r.span),
        short_size(r.points.first().map_or(0, |p| p.alignment)),
        short_size(r.points.last().map_or(0, |p| p.alignment)),
        short_size(r.points.first().map_or(0, |p| p.alignment)),
    )?;
    writeln!(
        w,
        "  {:>10} {:>10} {:>9} {:>9}",
        "alignment", "IOPS", "p50 us", "p99 us"
    )?;
    // Powers of two only in the table; --format csv/json has every point.
    for p in r.points.iter().filter(|p| p.alignment.is_power_of_two()) {
        writeln!(
            w,
            "  {:>10} {:>10.0} {:>9.1} {:>9.1}",
            short_size(p.alignment),
            p.iops,
            p.p50_us,
            p.p99_us
        )?;
    }
    writeln!(w, "inference:")?;
    for line in &r.inference.explanation {
        writeln!(w, "  {line}")?;
    }
    match (r.inference.granularity, r.inference.stripe) {
        (Some(g), Some(s)) => writeln!(
            w,
            "result: die allocation granularity g = {}, stripe S = {}{}",
            short_size(g),
            short_size(s),
            if r.inference.stripe_lower_bound {
                " (or more)"
            } else {
                ""
            }
        ),
        _ => writeln!(
            w,
            "result: no periodic structure found (g and S not inferred)"
        ),
    }
}

pub(crate) fn write_alignment_csv(w: &mut dyn Write, r: &AlignmentReport) -> io::Result<()> {
    let mut c = csv::Writer::from_writer(w);
    c.write_record([
        "alignment",
        "iops",
        "mb_per_s",
        "p50_us",
        "p99_us",
        "device_reads",
    ])?;
    for p in &r.points {
        c.write_record([
            p.alignment.to_string(),
            format!("{:.1}", p.iops),
            format!("{:.3}", p.mb_per_s),
            format!("{:.2}", p.p50_us),
            format!("{:.2}", p.p99_us),
            p.device_reads.map_or(String::new(), |v| v.to_string()),
        ])?;
    }
    c.flush()
}

pub(crate) fn write_interface_table(w: &mut dyn Write, r: &InterfaceReport) -> io::Result<()> {
    write_target(w, &r.target)?;
    writeln!(
        w,
        "the same {} read with O_DIRECT as 1..N sequential requests; seconds are trimmed means of {} runs",
        HumanBytes(r.bytes),
        r.iterations
    )?;
    writeln!(
        w,
        "  {:>4} {:>9} {:>9} {:>11} {:>9} {:>11} {:>10}",
        "QD", "requests", "size", "ms", "MB/s", "latency us", "dev reads"
    )?;
    for p in &r.points {
        writeln!(
            w,
            "  {:>4} {:>9} {:>9} {:>11.3} {:>9.1} {:>11.1} {:>10}",
            p.queue_depth,
            p.requests,
            short_size(p.request_size),
            p.seconds * 1e3,
            p.mb_per_s,
            p.mean_latency_us,
            p.device_reads.map_or("-".into(), |v| v.to_string())
        )?;
    }
    for s in &r.summary {
        writeln!(
            w,
            "QD{}: each extra request costs {:.1} us (slope of time over requests); the most requests take {:.2}x the time of one",
            s.queue_depth, s.per_request_overhead_us, s.slowdown
        )?;
    }
    Ok(())
}

pub(crate) fn write_interface_csv(w: &mut dyn Write, r: &InterfaceReport) -> io::Result<()> {
    let mut c = csv::Writer::from_writer(w);
    c.write_record([
        "queue_depth",
        "requests",
        "request_size",
        "seconds",
        "mb_per_s",
        "mean_latency_us",
        "device_reads",
    ])?;
    for p in &r.points {
        c.write_record([
            p.queue_depth.to_string(),
            p.requests.to_string(),
            p.request_size.to_string(),
            format!("{:.6}", p.seconds),
            format!("{:.3}", p.mb_per_s),
            format!("{:.2}", p.mean_latency_us),
            p.device_reads.map_or(String::new(), |v| v.to_string()),
        ])?;
    }
    c.flush()
}
