//! Benchmarks built on the I/O engine: statistics over runs, the device probes, and what
//! a file's layout predicts a run will cost.

pub mod dof;
pub mod fast24;
pub mod fragpicker;
pub mod ior;
pub mod paf_matrix;
pub mod probe;

pub mod sweep;

use serde::Serialize;

use fragkit_core::io::{JobResult, Op, Pattern};

/// The request count a file's layout predicts for a whole-file sequential O_DIRECT read.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LayoutPrediction {
    /// The request size the device can see: min(request size, device caps).
    pub request_size: u64,
    /// S(R) from FIEMAP.
    pub split: u64,
    /// I(R): requests an unfragmented file would need.
    pub ideal: u64,
}

/// The job's first measured iteration replayed on the modeled SSD `p`, the device's
/// mapping built from the file's FIEMAP in physical order (see `ssd::layout`).
pub fn model_reads(
    p: &fragkit_core::ssd::Params,
    spec: &fragkit_core::io::JobSpec,
    job: &JobResult,
) -> anyhow::Result<fragkit_core::ssd::layout::ModeledReads> {
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
    fragkit_core::ssd::layout::model_reads(p, &extents, &reads, job.effective_queue_depth)
        .map_err(|e| anyhow::anyhow!("--model: {e}"))
}

/// S(R) and I(R) of the job's file at the request size the device can see, when the job
/// was a whole-file sequential O_DIRECT read of a file (None otherwise): the number the
/// device's read count is expected to equal, give or take metadata reads.
pub fn predict_requests(job: &JobResult) -> Option<LayoutPrediction> {
    let whole_file = job.region_offset == 0 && job.region_size == job.target.size;
    if job.op != Op::Read
        || job.pattern != Pattern::Sequential
        || !job.direct
        || !whole_file
        || job.target.kind != "file"
    {
        return None;
    }
    let r = job.target.effective_request_size?;
    let scan = fragkit_core::scan::scan_paths(std::slice::from_ref(&job.path), &[r]).ok()?;
    let req = scan.files.first()?.metrics.requests.first().copied()?;
    Some(LayoutPrediction {
        request_size: r,
        split: req.split,
        ideal: req.ideal,
    })
}
