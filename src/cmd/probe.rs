//! `fragkit probe alignment|interface TARGET`: FAST'24's device characterisation.

use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::bench::probe::{infer_alignment, AlignmentPoint};
use crate::cli::{BenchFormat, ProbeAction, ProbeAlignmentArgs, ProbeInterfaceArgs};
use crate::cmd::bench::progress;
use crate::io::{run_job, BlockDevice, EngineKind, JobSpec, Op, Pattern};
use crate::report::probe::{
    self as out, AlignmentReport, AlignmentRow, InterfaceReport, InterfaceRow, ProbeTarget,
};
use crate::stats::trimmed_mean;

pub fn run(action: ProbeAction) -> Result<i32> {
    match action {
        ProbeAction::Alignment(a) => alignment(a),
        ProbeAction::Interface(a) => interface(a),
    }
}

/// A raw device must be free (nothing mounted on it or its partitions, no holders); a
/// file is described by where its data starts, since file offsets are not device offsets.
pub(crate) fn check_target(path: &Path, max_alignment: u64) -> Result<ProbeTarget> {
    let shown = path.display();
    let md = std::fs::metadata(path).with_context(|| format!("{shown}: cannot stat"))?;
    let device = BlockDevice::for_path(path)?;
    let mut notes = Vec::new();
    let kind = if md.file_type().is_block_device() {
        let users = device.users();
        if !users.is_empty() {
            bail!(
                "{shown}: in use ({}); probe reads the raw device, which must be unused — unmount or release it first, or probe a file on it",
                users.join(", ")
            );
        }
        if device.name.starts_with("loop") {
            notes.push(format!(
                "{} is a loop device: its reads go to a file on another file system, so it has no dies or stripes of its own",
                device.name
            ));
        }
        "block_device"
    } else if md.is_file() {
        let scanned = crate::layout::walk::map_path(path, false)
            .map_err(|e| anyhow::anyhow!("{shown}: {e}"))?;
        let frags = scanned.layout.fragments();
        let start = frags.first().map(|f| f.physical).unwrap_or(0);
        if frags.len() != 1 || start % max_alignment != 0 {
            notes.push(format!(
                "{shown} has {} fragment(s) starting at physical byte {start}: file offsets equal device alignments only for one fragment starting at a multiple of {}",
                frags.len(),
                crate::units::short_size(max_alignment)
            ));
        }
        "file"
    } else {
        bail!("{shown}: expected a block device or a regular file");
    };
    // Seeking to the end gives the size of a file and of a block device alike.
    let size = std::fs::File::open(path)
        .and_then(|mut f| std::io::Seek::seek(&mut f, std::io::SeekFrom::End(0)))
        .with_context(|| format!("{shown}: cannot find its size"))?;
    Ok(ProbeTarget {
        path: path.to_path_buf(),
        kind,
        size,
        device,
        notes,
    })
}

fn read_spec(target: &Path, bs: u64, qd: u32) -> JobSpec {
    let mut spec = JobSpec::new(target, Op::Read);
    spec.block_size = bs;
    spec.queue_depth = qd;
    spec.direct = true;
    spec.engine = EngineKind::Uring;
    spec.iterations = 1;
    // Direct reads bypass the page cache; dropping it per point would only add noise.
    spec.drop_caches = false;
    spec
}

fn alignment(a: ProbeAlignmentArgs) -> Result<i32> {
    if !a.step.is_multiple_of(512) || a.max < a.step {
        bail!(
            "--step {} / --max {}: expected a step that is a multiple of 512 and a maximum of at least one step",
            a.step,
            a.max
        );
    }
    if a.count == 0 {
        bail!("--count 0: expected at least 1 read per alignment");
    }
    let target = check_target(&a.target, a.max)?;
    let size = target.size;
    let span = a.span.unwrap_or(size).min(size);
    if span < a.max + a.bs {
        bail!(
            "{}: {} bytes to read from, too few for alignments up to {} (need at least {})",
            a.target.display(),
            span,
            a.max,
            a.max + a.bs
        );
    }
    let alignments: Vec<u64> = (1..=a.max / a.step).map(|k| k * a.step).collect();
    // Measure in a shuffled order so drift in background load becomes noise, not structure.
    let mut order: Vec<usize> = (0..alignments.len()).collect();
    let mut x = a.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..order.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let bar = progress(alignments.len() as u64, "alignments");
    let mut rows: Vec<Option<AlignmentRow>> = vec![None; alignments.len()];
    for &i in &order {
        let al = alignments[i];
        let mut spec = read_spec(&a.target, a.bs, a.qd);
        spec.pattern = Pattern::Random {
            seed: a.seed ^ al,
            align: al,
        };
        spec.size = Some(span);
        spec.count = Some(a.count);
        let r = run_job(&spec)?;
        let it = &r.iterations[0];
        rows[i] = Some(AlignmentRow {
            alignment: al,
            iops: it.iops,
            mb_per_s: it.mb_per_s,
            p50_us: it.latency.p50_us,
            p99_us: it.latency.p99_us,
            device_reads: it.device.map(|d| d.reads),
        });
        bar.inc(1);
    }
    bar.finish_and_clear();
    let rows: Vec<AlignmentRow> = rows.into_iter().flatten().collect();
    let points: Vec<AlignmentPoint> = rows
        .iter()
        .map(|r| AlignmentPoint {
            alignment: r.alignment,
            iops: r.iops,
        })
        .collect();
    let inference = infer_alignment(&points, a.step);
    let report = AlignmentReport {
        version: out::SCHEMA_VERSION,
        target,
        read_size: a.bs,
        queue_depth: a.qd,
        reads_per_alignment: a.count,
        span,
        points: rows,
        inference,
    };
    crate::report::to_stdout(|w| match a.format {
        BenchFormat::Table => out::write_alignment_table(w, &report),
        BenchFormat::Json => out::write_json(w, &report),
        BenchFormat::Csv => out::write_alignment_csv(w, &report),
    })?;
    Ok(0)
}

fn interface(a: ProbeInterfaceArgs) -> Result<i32> {
    if a.max_requests == 0 {
        bail!("--max-requests 0: expected at least 1");
    }
    if a.iterations == 0 {
        bail!("--iterations 0: expected at least 1");
    }
    let target = check_target(&a.target, a.bytes)?;
    let size = target.size;
    if size < a.bytes {
        bail!(
            "{}: {size} bytes, smaller than --bytes {}",
            a.target.display(),
            a.bytes
        );
    }
    let lbs = target.device.limits().logical_block_size;
    let mut counts = Vec::new();
    let mut n = 1u64;
    while n <= a.max_requests {
        if a.bytes.is_multiple_of(n) && (a.bytes / n).is_multiple_of(lbs) {
            counts.push(n);
        }
        n *= 2;
    }
    if counts.is_empty() {
        bail!(
            "--bytes {}: cannot be split into whole {lbs}-byte blocks",
            a.bytes
        );
    }
    let bar = progress((counts.len() * a.qd.len()) as u64, "runs");
    let mut rows = Vec::new();
    for &qd in &a.qd {
        for &n in &counts {
            let mut spec = read_spec(&a.target, a.bytes / n, qd);
            spec.size = Some(a.bytes);
            spec.count = Some(n);
            spec.iterations = a.iterations;
            let r = run_job(&spec)?;
            let secs: Vec<f64> = r.iterations.iter().map(|i| i.seconds).collect();
            let seconds = trimmed_mean(&secs);
            rows.push(InterfaceRow {
                queue_depth: qd,
                requests: n,
                request_size: a.bytes / n,
                seconds,
                mb_per_s: a.bytes as f64 / 1e6 / seconds,
                mean_latency_us: r.iterations.iter().map(|i| i.latency.mean_us).sum::<f64>()
                    / r.iterations.len() as f64,
                device_reads: r.iterations.last().and_then(|i| i.device.map(|d| d.reads)),
            });
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let report = InterfaceReport::new(target, a.bytes, a.iterations, rows);
    crate::report::to_stdout(|w| match a.format {
        BenchFormat::Table => out::write_interface_table(w, &report),
        BenchFormat::Json => out::write_json(w, &report),
        BenchFormat::Csv => out::write_interface_csv(w, &report),
    })?;
    Ok(0)
}
