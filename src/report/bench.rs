//! Output of `fragkit bench`: table, JSON ({"version", "jobs"}) and CSV (one row per
//! iteration).

use fragkit_sys::console::Shown;
use std::io::{self, Write};

use serde::Serialize;

pub use crate::bench::LayoutPrediction;
use crate::io::{BlockDevice, DeviceDelta, JobResult};
use crate::units::{short_size, HumanBytes};

pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize)]
pub struct BenchJob {
    #[serde(flatten)]
    pub result: JobResult,
    pub layout: Option<LayoutPrediction>,
    /// `--model`: the job's reads on a modeled SSD (absent without --model).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<crate::ssd::layout::ModeledReads>,
    /// `--model hdd`: the job's reads on the modeled disk (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_hdd: Option<crate::hdd::ModeledIo>,
}

#[derive(Serialize)]
struct BenchJson<'a> {
    version: u32,
    jobs: &'a [BenchJob],
}

pub(crate) fn write_json(w: &mut dyn Write, jobs: &[BenchJob]) -> io::Result<()> {
    serde_json::to_writer_pretty(
        &mut *w,
        &BenchJson {
            version: SCHEMA_VERSION,
            jobs,
        },
    )?;
    writeln!(w)
}

fn describe(j: &JobResult) -> String {
    let pat = match j.pattern {
        crate::io::Pattern::Stride { gap } => format!("stride(gap {})", short_size(gap)),
        crate::io::Pattern::Random { seed, align } => {
            format!("random(align {}, seed {seed})", short_size(align))
        }
        crate::io::Pattern::Sequential => "seq".into(),
    };
    format!(
        "{} {} {} qd{}{} {}{}",
        j.op.name(),
        pat,
        short_size(j.block_size),
        j.queue_depth,
        if j.effective_queue_depth != j.queue_depth {
            format!(" (runs at {})", j.effective_queue_depth)
        } else {
            String::new()
        },
        j.engine.name(),
        if j.direct { " O_DIRECT" } else { " buffered" },
    )
}

pub(crate) fn write_table(w: &mut dyn Write, jobs: &[BenchJob]) -> io::Result<()> {
    for (n, job) in jobs.iter().enumerate() {
        let j = &job.result;
        if n > 0 {
            writeln!(w)?;
        }
        writeln!(w, "{}: {}", Shown(&j.path), describe(j))?;
        let t = &j.target;
        let mut where_ = format!(
            "  {} of {}{}",
            t.kind.replace('_', " "),
            HumanBytes(t.size),
            t.fs_type
                .as_deref()
                .map(|f| format!(" on {f}"))
                .unwrap_or_default()
        );
        if let (Some(d), Some(l)) = (&t.device, &t.limits) {
            where_ += &format!(
                ", device {}{}: logical block {} B, request cap {} (max_sectors_kb {}, max_segments {})",
                d.name,
                if d.partition {
                    format!(" (partition of {})", d.disk)
                } else {
                    String::new()
                },
                l.logical_block_size,
                HumanBytes(l.request_cap()),
                l.max_request_bytes / 1024,
                l.max_segments
            );
        } else {
            where_ += ", no block device under it (no device counters)";
        }
        writeln!(w, "{where_}")?;
        if let Some(r) = t.effective_request_size {
            if r < j.block_size {
                writeln!(
                    w,
                    "  the device splits each {} request: effective request size {}",
                    short_size(j.block_size),
                    short_size(r)
                )?;
            }
        }
        writeln!(
            w,
            "  {:>4} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>12} {:>12} {:>12} {:>12}",
            "iter",
            "MB/s",
            "IOPS",
            "p50 us",
            "p99 us",
            "p99.9 us",
            "requests",
            "dev reads",
            "dev read B",
            "dev writes",
            "dev write B"
        )?;
        for (i, r) in j.iterations.iter().enumerate() {
            let d = r.device.unwrap_or_default();
            let dash = |v: u64| {
                if r.device.is_some() {
                    v.to_string()
                } else {
                    "-".into()
                }
            };
            writeln!(
                w,
                "  {:>4} {:>10.1} {:>10.0} {:>9.1} {:>9.1} {:>9.1} {:>9} {:>12} {:>12} {:>12} {:>12}",
                i + 1,
                r.mb_per_s,
                r.iops,
                r.latency.p50_us,
                r.latency.p99_us,
                r.latency.p99_9_us,
                r.requests,
                dash(d.reads),
                dash(d.read_bytes),
                dash(d.writes),
                dash(d.write_bytes)
            )?;
        }
        writeln!(
            w,
            "  MB/s mean {:.1}, trimmed mean {:.1}, CoV {:.1}%; IOPS mean {:.0} (over {} iteration{})",
            j.mb_per_s.mean,
            j.mb_per_s.trimmed_mean,
            j.mb_per_s.cov * 100.0,
            j.iops.mean,
            j.iterations.len(),
            if j.iterations.len() == 1 { "" } else { "s" }
        )?;
        if let Some(f) = &j.foreign_io {
            writeln!(
                w,
                "  warning: the device saw I/O this job did not issue in {} of {} iterations ({} read and {} written beyond its own): another process shares {}; the device counts above include its I/O",
                f.iterations,
                j.iterations.len(),
                HumanBytes(f.read_bytes),
                HumanBytes(f.write_bytes),
                t.device.as_ref().map_or("the device", |d| d.name.as_str())
            )?;
        }
        if let Some(l) = &job.layout {
            let seen: Vec<String> = j
                .iterations
                .iter()
                .filter_map(|r| {
                    r.device.map(|d| match d.read_merges {
                        0 => d.reads.to_string(),
                        m => format!("{} ({m} merged)", d.reads),
                    })
                })
                .collect();
            let predicted: Vec<String> = l.split_each.iter().map(u64::to_string).collect();
            writeln!(
                w,
                "  layout: {} device requests predicted from the file's extents at {} (unfragmented: {}); device completed {} reads per iteration",
                predicted.join(", "),
                short_size(l.request_size),
                l.ideal,
                if seen.is_empty() { "-".to_string() } else { seen.join(", ") }
            )?;
        }
        let mapping: Vec<String> = j
            .iterations
            .iter()
            .filter_map(|r| r.mapping.map(|d| d.reads.to_string()))
            .collect();
        if !mapping.is_empty() {
            writeln!(
                w,
                "  mapping: {} device reads per iteration to read the file's mapping back after the cache drop, before the timed pass (not in the figures above)",
                mapping.join(", ")
            )?;
        }
        if let Some(m) = &job.model {
            writeln!(
                w,
                "  modeled on {}: {:.1} MB/s (real: {:.1}), {} die collisions in {} of {} requests, {} device reads (first measured iteration; mapping: the file's FIEMAP in physical order, as if the device saw the blocks written in address order)",
                m.model,
                m.mb_s,
                j.mb_per_s.trimmed_mean,
                m.collisions,
                m.collided_requests,
                j.iterations.first().map_or(0, |i| i.requests),
                m.device_reads
            )?;
        }
        if let Some(m) = &job.model_hdd {
            let ms = |ns: u64| ns as f64 / 1e6;
            writeln!(
                w,
                "  modeled on {}: {:.1} MB/s (real: {:.1}), {} device reads, {} seeks: {:.1} ms seeking, {:.1} ms rotational wait, {:.1} ms transfer, {} reads from look-ahead (first measured iteration; requests at the file's FIEMAP physical addresses on a Constellation ES.3 4 TB, see docs/hdd.md)",
                m.model,
                m.mb_s,
                j.mb_per_s.trimmed_mean,
                m.device_requests,
                m.seeks,
                ms(m.seek_ns),
                ms(m.rotation_ns),
                ms(m.transfer_ns),
                m.lookahead_reads
            )?;
        }
    }
    Ok(())
}

pub(crate) fn write_csv(w: &mut dyn Write, jobs: &[BenchJob]) -> io::Result<()> {
    let mut c = csv::Writer::from_writer(w);
    c.write_record([
        "path",
        "op",
        "pattern",
        "engine",
        "block_size",
        "queue_depth",
        "direct",
        "iteration",
        "bytes",
        "requests",
        "seconds",
        "mb_per_s",
        "iops",
        "lat_mean_us",
        "lat_p50_us",
        "lat_p99_us",
        "lat_p99_9_us",
        "lat_max_us",
        "device",
        "dev_reads",
        "dev_read_merges",
        "dev_read_bytes",
        "dev_writes",
        "dev_write_merges",
        "dev_write_bytes",
        "layout_split",
        "layout_ideal",
        // Device reads while the file's mapping was read back after the cache drop,
        // before the timed pass (empty when it was not).
        "mapping_reads",
        // `--model`: the job's reads on the modeled SSD (empty without it; the same on
        // every iteration row: the model times the first measured iteration).
        "model",
        "model_mapping",
        "model_mb_s",
        "model_read_time_ns",
        "model_collisions",
        "model_collided_requests",
        "model_device_reads",
        // `--model hdd`: seeks and rotational wait (empty otherwise).
        "model_seeks",
        "model_rotation_ns",
    ])?;
    for job in jobs {
        let j = &job.result;
        for (i, r) in j.iterations.iter().enumerate() {
            let d = r.device;
            let dv = |f: fn(&DeviceDelta) -> u64| {
                d.as_ref().map(f).map_or(String::new(), |v| v.to_string())
            };
            let m = |f: fn(&crate::ssd::layout::ModeledReads) -> String| {
                job.model.as_ref().map_or(String::new(), f)
            };
            let h = |f: fn(&crate::hdd::ModeledIo) -> String| job.model_hdd.as_ref().map(f);
            c.write_record([
                j.path.to_string_lossy().into_owned(),
                j.op.name().into(),
                j.pattern.name().into(),
                j.engine.name().into(),
                j.block_size.to_string(),
                j.queue_depth.to_string(),
                j.direct.to_string(),
                (i + 1).to_string(),
                r.bytes.to_string(),
                r.requests.to_string(),
                format!("{:.6}", r.seconds),
                format!("{:.3}", r.mb_per_s),
                format!("{:.1}", r.iops),
                format!("{:.2}", r.latency.mean_us),
                format!("{:.2}", r.latency.p50_us),
                format!("{:.2}", r.latency.p99_us),
                format!("{:.2}", r.latency.p99_9_us),
                format!("{:.2}", r.latency.max_us),
                j.target
                    .device
                    .as_ref()
                    .map_or(String::new(), |d| d.name.clone()),
                dv(|d| d.reads),
                dv(|d| d.read_merges),
                dv(|d| d.read_bytes),
                dv(|d| d.writes),
                dv(|d| d.write_merges),
                dv(|d| d.write_bytes),
                job.layout.as_ref().map_or(String::new(), |l| {
                    l.split_each.get(i).copied().unwrap_or(l.split).to_string()
                }),
                job.layout
                    .as_ref()
                    .map_or(String::new(), |l| l.ideal.to_string()),
                r.mapping
                    .as_ref()
                    .map_or(String::new(), |d| d.reads.to_string()),
                h(|h| h.model.clone()).unwrap_or_else(|| m(|m| m.model.clone())),
                h(|h| h.mapping.clone()).unwrap_or_else(|| m(|m| m.mapping.clone())),
                h(|h| format!("{:.3}", h.mb_s)).unwrap_or_else(|| m(|m| format!("{:.3}", m.mb_s))),
                h(|h| h.time_ns.to_string()).unwrap_or_else(|| m(|m| m.read_time_ns.to_string())),
                m(|m| m.collisions.to_string()),
                m(|m| m.collided_requests.to_string()),
                h(|h| h.device_requests.to_string())
                    .unwrap_or_else(|| m(|m| m.device_reads.to_string())),
                h(|h| h.seeks.to_string()).unwrap_or_default(),
                h(|h| h.rotation_ns.to_string()).unwrap_or_default(),
            ])?;
        }
    }
    c.flush()
}

/// What `bench writes` measured around one command.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct WritesReport {
    pub version: u32,
    pub command: Vec<String>,
    /// None when the command was killed by a signal.
    pub exit_status: Option<i32>,
    pub device: BlockDevice,
    /// `sync` ran before and after, so buffered writes the command left are counted.
    pub synced: bool,
    pub command_seconds: f64,
    pub seconds: f64,
    pub counts: DeviceDelta,
}

pub(crate) fn write_writes_json(w: &mut dyn Write, r: &WritesReport) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, r)?;
    writeln!(w)
}

pub(crate) fn write_writes_table(w: &mut dyn Write, r: &WritesReport) -> io::Result<()> {
    let c = &r.counts;
    writeln!(
        w,
        "`{}` on {}: exit {}, {:.2} s{}",
        shell_words(&r.command),
        r.device.name,
        r.exit_status
            .map_or("by signal".to_string(), |s| s.to_string()),
        r.command_seconds,
        if r.synced {
            format!(" ({:.2} s with the final sync)", r.seconds)
        } else {
            String::new()
        }
    )?;
    writeln!(
        w,
        "  written: {} ({} bytes) in {} requests ({} merged)",
        HumanBytes(c.write_bytes),
        c.write_bytes,
        c.writes,
        c.write_merges
    )?;
    writeln!(
        w,
        "  read:    {} ({} bytes) in {} requests ({} merged)",
        HumanBytes(c.read_bytes),
        c.read_bytes,
        c.reads,
        c.read_merges
    )?;
    writeln!(
        w,
        "  flushes {}, discards {} ({} bytes); device counters include anything else using {} meanwhile",
        c.flushes, c.discards, c.discard_bytes, r.device.name
    )
}

/// The command as a shell would need it typed: arguments with spaces or quotes quoted.
fn shell_words(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub(crate) fn write_writes_csv(w: &mut dyn Write, r: &WritesReport) -> io::Result<()> {
    let mut c = csv::Writer::from_writer(w);
    c.write_record([
        "command",
        "exit_status",
        "device",
        "seconds",
        "writes",
        "write_merges",
        "write_bytes",
        "reads",
        "read_merges",
        "read_bytes",
        "flushes",
        "discards",
        "discard_bytes",
    ])?;
    let d = &r.counts;
    c.write_record([
        r.command.join(" "),
        r.exit_status.map_or(String::new(), |s| s.to_string()),
        r.device.name.clone(),
        format!("{:.6}", r.seconds),
        d.writes.to_string(),
        d.write_merges.to_string(),
        d.write_bytes.to_string(),
        d.reads.to_string(),
        d.read_merges.to_string(),
        d.read_bytes.to_string(),
        d.flushes.to_string(),
        d.discards.to_string(),
        d.discard_bytes.to_string(),
    ])?;
    c.flush()
}
