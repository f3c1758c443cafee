//! Output of `fragkit ssd`: what the modeled device made of a recorded trace.

use std::io::{self, Write};

use serde::Serialize;

use crate::ssd::{BlockTrace, Params, Report};
use crate::units::HumanBytes;

pub(crate) fn write_table(
    w: &mut impl Write,
    p: &Params,
    t: &BlockTrace,
    r: &Report,
) -> io::Result<()> {
    writeln!(w, "model      {p}")?;
    writeln!(w, "placement  {:?}", r.placement)?;
    writeln!(
        w,
        "trace      {} requests on {} ({} reads, {} writes, {} discards, {} flushes){}",
        t.requests.len(),
        if t.device.is_empty() { "?" } else { &t.device },
        r.reads,
        r.writes,
        r.discards,
        r.flushes,
        if t.dropped > 0 {
            format!("; {} events were DROPPED while recording", t.dropped)
        } else {
            String::new()
        }
    )?;
    writeln!(
        w,
        "reads      {} in {:.3} ms modeled: {:.1} MB/s (recorded device: {:.1} MB/s)",
        HumanBytes(r.read_bytes),
        r.read_time_ns as f64 / 1e6,
        r.read_mb_s,
        r.recorded_read_mb_s
    )?;
    writeln!(
        w,
        "collisions {} page reads beyond an even spread over the dies ({} requests hit); \
         {} waited within their request, {} behind other work; {} page reads",
        r.collisions, r.collided_reads, r.waited_same_request, r.queued, r.page_reads
    )?;
    let util: Vec<String> = r
        .die_utilisation
        .iter()
        .map(|u| format!("{:.0}%", u * 100.0))
        .collect();
    writeln!(w, "dies busy  {}", util.join(" "))?;
    if r.unmapped_read_bytes > 0 {
        writeln!(
            w,
            "note       {} of the reads hit never-written pages (written before the trace started?)",
            HumanBytes(r.unmapped_read_bytes)
        )?;
    }
    Ok(())
}

#[derive(Serialize)]
struct Json<'a> {
    version: u32,
    kind: &'static str,
    params: &'a Params,
    device: &'a str,
    dropped: u64,
    report: &'a Report,
}

pub(crate) fn write_json(
    w: &mut impl Write,
    p: &Params,
    t: &BlockTrace,
    r: &Report,
) -> io::Result<()> {
    let j = Json {
        version: 1,
        kind: "fragkit-ssd",
        params: p,
        device: &t.device,
        dropped: t.dropped,
        report: r,
    };
    writeln!(
        w,
        "{}",
        serde_json::to_string(&j).map_err(io::Error::other)?
    )
}
