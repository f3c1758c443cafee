//! Benchmarks built on the I/O engine: statistics over runs, the device probes, and what
//! a file's layout predicts a run will cost.

pub mod dof;
pub mod fast24;
pub mod fragpicker;
pub mod ior;
pub mod paf_matrix;
pub mod probe;
pub mod sqlite;

pub mod sweep;

use serde::Serialize;

use fragkit_core::io::{JobResult, Op};

/// The device requests a file's layout predicts for an O_DIRECT read job.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LayoutPrediction {
    /// The request size the device can see: min(request size, device caps).
    pub request_size: u64,
    /// The first measured iteration's device requests predicted from FIEMAP (for a
    /// whole-file sequential read, S(R)).
    pub split: u64,
    /// The same iteration's requests on an unfragmented file: one per request (per
    /// device-sized piece), none for a read of a hole.
    pub ideal: u64,
    /// `split` for each measured iteration (random patterns differ per iteration).
    pub split_each: Vec<u64>,
}

pub use fragkit_core::device::DeviceModel;

/// A file's extents and the (offset, length) requests of one iteration.
type FileRequests = (Vec<fragkit_sys::fiemap::Extent>, Vec<(u64, u64)>);

/// The job's file's extents and its first measured iteration's requests.
fn job_requests(spec: &fragkit_core::io::JobSpec, job: &JobResult) -> anyhow::Result<FileRequests> {
    use anyhow::Context;
    let shown = job.path.display();
    if job.target.kind != "file" {
        anyhow::bail!("--model {shown}: a block device has no file layout to model; give a file");
    }
    let f = std::fs::File::open(&job.path).with_context(|| format!("{shown}"))?;
    let extents = fragkit_sys::fiemap::read_extents(std::os::fd::AsFd::as_fd(&f), true)
        .map_err(|e| anyhow::anyhow!("{shown}: FIEMAP: {e}"))?;
    let round_to = if spec.direct {
        job.target.limits.map_or(512, |l| l.logical_block_size)
    } else {
        1
    };
    let reads = fragkit_core::io::planned_requests(spec, job.region_size, round_to, spec.warmup);
    Ok((extents, reads))
}

/// The job's first measured iteration replayed on the modeled SSD `p`, the device's
/// mapping built from the file's FIEMAP in physical order (see `ssd::layout`).
pub fn model_reads(
    p: &fragkit_core::ssd::Params,
    spec: &fragkit_core::io::JobSpec,
    job: &JobResult,
) -> anyhow::Result<fragkit_core::ssd::layout::ModeledReads> {
    let (extents, reads) = job_requests(spec, job)?;
    fragkit_core::ssd::layout::model_reads(p, &extents, &reads, job.effective_queue_depth)
        .map_err(|e| anyhow::anyhow!("--model: {e}"))
}

/// The job's first measured iteration on the modeled disk `p`: its requests split at the
/// file's extent ends, at the FIEMAP physical addresses (see `hdd::layout`).
pub fn model_reads_hdd(
    p: &fragkit_core::hdd::Params,
    spec: &fragkit_core::io::JobSpec,
    job: &JobResult,
) -> anyhow::Result<fragkit_core::hdd::ModeledIo> {
    let (extents, reads) = job_requests(spec, job)?;
    fragkit_core::hdd::layout::model_reads(p, &extents, &reads, job.effective_queue_depth)
        .map_err(|e| anyhow::anyhow!("--model: {e}"))
}

/// What the job's file's layout predicts the device saw: its planned requests per
/// measured iteration, each split where the file's data runs end
/// (`metrics::planned_request_count`). Only for O_DIRECT read jobs on a file (buffered
/// reads reach the device as readahead, not as the job's requests); None otherwise.
pub fn predict_requests(
    spec: &fragkit_core::io::JobSpec,
    job: &JobResult,
) -> anyhow::Result<Option<LayoutPrediction>> {
    if job.op != Op::Read || !job.direct || job.target.kind != "file" {
        return Ok(None);
    }
    let Some(limits) = job.target.limits else {
        return Ok(None);
    };
    let cap = limits.request_cap();
    let scanned = fragkit_core::layout::walk::map_path(&job.path, true)
        .map_err(|e| anyhow::anyhow!("{e} (predicting its device requests)"))?;
    let runs = scanned.layout.data_runs();
    let round_to = job.target.limits.map_or(512, |l| l.logical_block_size);
    let iteration = |i: u32| {
        fragkit_core::io::planned_requests(spec, job.region_size, round_to, spec.warmup + i)
    };
    let split_each: Vec<u64> = (0..job.iterations.len() as u32)
        .map(|i| fragkit_core::metrics::planned_request_count(&runs, &iteration(i), cap))
        .collect();
    let whole = [fragkit_core::layout::model::Fragment {
        logical: 0,
        physical: 0,
        length: scanned.layout.size,
        extents: 1,
    }];
    let first = iteration(0);
    // Unfragmented: the same requests over one run covering the file, holes excepted.
    let ideal = first
        .iter()
        .filter(|&&(o, n)| {
            fragkit_core::metrics::range_request_count(&runs, o, o.saturating_add(n), n.max(1))
                .ideal
                > 0
        })
        .map(|&(o, n)| fragkit_core::metrics::planned_request_count(&whole, &[(o, n)], cap))
        .sum();
    Ok(Some(LayoutPrediction {
        request_size: job.target.effective_request_size.unwrap_or(cap),
        split: split_each.first().copied().unwrap_or(0),
        ideal,
        split_each,
    }))
}
