//! Benchmarks built on the I/O engine: statistics over runs, the device probes, and what
//! a file's layout predicts a run will cost.

pub mod dof;
pub mod fast24;
pub mod ior;
pub mod paf_matrix;
pub mod probe;

pub mod sweep;

use serde::Serialize;

use crate::io::{JobResult, Op, Pattern};

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
    let scan = crate::scan::scan_paths(std::slice::from_ref(&job.path), &[r]).ok()?;
    let req = scan.files.first()?.metrics.requests.first().copied()?;
    Some(LayoutPrediction {
        request_size: r,
        split: req.split,
        ideal: req.ideal,
    })
}
