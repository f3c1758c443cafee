//! FragPicker's read/update benchmark suite (SOSP'21; github.com/jonggyup/FragPicker,
//! `evaluation/read_benchmark` and `evaluation/update_benchmark`) on the engine:
//! sequential and stride × read and update, 128 KiB O_DIRECT requests one at a time.
//!
//! What its programs do, carried over as facts:
//! - `read_seq.c`: `read(fd, buf, 128K)` from offset 0 until it returns 0 (the last
//!   request short when the size is not a multiple of 128 KiB).
//! - `read_stride.c`: a 128 KiB read, then `lseek(fd, 288K, SEEK_CUR)`, until a read
//!   returns 0: requests at k × 416 KiB for every k with k × 416 KiB < size.
//! - `write_seq.c`: 128 KiB writes of zeros from 0 until the bytes written reach the size
//!   (ceil(size / 128K) requests).
//! - `write_stride.c`: `while (offset + 128K < size)` a 128 KiB write, then
//!   `lseek(fd, 288K, SEEK_CUR)`: requests at k × 416 KiB while k × 416 KiB + 128 KiB < size.
//! - `run_benchmark.sh`: the page cache dropped, one unmeasured run, then five runs
//!   averaged; the figure is bytes ÷ microseconds (decimal MB/s).
//!
//! Differences: the engine uses pread/pwrite (the same requests as read/write after
//! lseek), writes a fixed pattern instead of zeros, drops the page cache before every
//! run (all I/O is O_DIRECT, so only metadata is affected), and clips a last sequential
//! write to the file's size where write_seq.c would write a whole 128 KiB past it.

use std::path::PathBuf;

use anyhow::Result;
use serde::Serialize;

use fragkit_core::io::{run_job_observed, EngineKind, JobResult, JobSpec, Op, Pattern};

/// FragPicker's request size (`ra_size=128` in its run_benchmark.sh, KiB).
pub(crate) const REQUEST: u64 = 128 << 10;
/// The gap read_stride.c and write_stride.c seek over after each request.
pub(crate) const STRIDE_GAP: u64 = 288 << 10;
/// run_benchmark.sh: `val1` .. `val5` averaged.
pub const RUNS: u32 = 5;
/// run_benchmark.sh runs the program once before the measured five.
pub(crate) const WARMUP: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    SeqRead,
    StrideRead,
    SeqUpdate,
    StrideUpdate,
}

impl Workload {
    pub const ALL: [Workload; 4] = [
        Workload::SeqRead,
        Workload::StrideRead,
        Workload::SeqUpdate,
        Workload::StrideUpdate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::SeqRead => "seq-read",
            Workload::StrideRead => "stride-read",
            Workload::SeqUpdate => "seq-update",
            Workload::StrideUpdate => "stride-update",
        }
    }

    /// FragPicker's program for it.
    pub fn program(self) -> &'static str {
        match self {
            Workload::SeqRead => "read_seq",
            Workload::StrideRead => "read_stride",
            Workload::SeqUpdate => "write_seq",
            Workload::StrideUpdate => "write_stride",
        }
    }

    fn op(self) -> Op {
        match self {
            Workload::SeqRead | Workload::StrideRead => Op::Read,
            Workload::SeqUpdate | Workload::StrideUpdate => Op::Write,
        }
    }

    fn pattern(self) -> Pattern {
        match self {
            Workload::SeqRead | Workload::SeqUpdate => Pattern::Sequential,
            Workload::StrideRead | Workload::StrideUpdate => Pattern::Stride { gap: STRIDE_GAP },
        }
    }

    /// Requests one run of FragPicker's program issues on a file of `size` bytes.
    pub fn requests(self, size: u64) -> u64 {
        let step = REQUEST + STRIDE_GAP;
        match self {
            Workload::SeqRead | Workload::SeqUpdate => size.div_ceil(REQUEST),
            Workload::StrideRead => size.div_ceil(step),
            // k × step + REQUEST < size
            Workload::StrideUpdate if size > REQUEST => (size - REQUEST - 1) / step + 1,
            Workload::StrideUpdate => 0,
        }
    }

    /// The job spec for `path` of `size` bytes.
    pub fn spec(self, path: &std::path::Path, size: u64, runs: u32) -> JobSpec {
        let mut spec = JobSpec::new(path, self.op());
        spec.block_size = REQUEST;
        spec.queue_depth = 1;
        spec.pattern = self.pattern();
        spec.direct = true;
        // read()/write() one at a time: pread/pwrite give the device the same requests.
        spec.engine = EngineKind::Psync;
        spec.size = Some(size);
        spec.count = Some(self.requests(size));
        spec.iterations = runs;
        spec.warmup = WARMUP;
        spec.drop_caches = true;
        spec
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    #[serde(flatten, serialize_with = "fragkit_core::units::path_fields")]
    pub path: PathBuf,
    pub workload: Workload,
    /// FragPicker's program this row reproduces.
    pub program: &'static str,
    pub size: u64,
    pub requests: u64,
    /// The mean over the measured runs, FragPicker's figure.
    pub mb_per_s_mean: f64,
    pub mb_per_s_median: f64,
    pub mb_per_s_min: f64,
    pub mb_per_s_max: f64,
    /// Device requests per run (mean), reads for read rows and writes for update rows:
    /// `requests` when every request reached the device whole, plus the file system's
    /// own (an inode read after the cache drop; for updates the journal's commit).
    pub device_requests: Option<f64>,
    /// The engine's full result (every run's figures and device counters).
    pub job: JobResult,
}

#[derive(Debug, Clone, Serialize)]
pub struct FragPickerReport {
    pub version: u32,
    pub request_size: u64,
    pub stride_gap: u64,
    pub runs: u32,
    pub warmup: u32,
    pub rows: Vec<Row>,
}

/// Run `workloads` on each of `files` in FragPicker's order (reads, then updates).
pub fn run(
    files: &[PathBuf],
    workloads: &[Workload],
    runs: u32,
    step: &mut dyn FnMut(&str),
) -> Result<FragPickerReport> {
    let mut rows = Vec::new();
    for &w in workloads {
        for path in files {
            let size = std::fs::metadata(path)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
                .len();
            if w.requests(size) == 0 {
                anyhow::bail!(
                    "{}: {} bytes is too small for {} (needs more than {} bytes)",
                    path.display(),
                    size,
                    w.program(),
                    REQUEST
                );
            }
            let spec = w.spec(path, size, runs);
            let job = run_job_observed(&spec, &mut |_, _| {})?;
            let v: Vec<f64> = job.iterations.iter().map(|i| i.mb_per_s).collect();
            let sorted = {
                let mut s = v.clone();
                s.sort_by(f64::total_cmp);
                s
            };
            let device_requests =
                job.iterations
                    .first()
                    .and_then(|i| i.device.as_ref())
                    .map(|_| {
                        job.device_mean(|d| match w.op() {
                            Op::Read => d.reads,
                            Op::Write => d.writes,
                        })
                    });
            rows.push(Row {
                path: path.clone(),
                workload: w,
                program: w.program(),
                size,
                requests: w.requests(size),
                mb_per_s_mean: fragkit_core::stats::mean(&v),
                mb_per_s_median: fragkit_core::stats::median(&sorted),
                mb_per_s_min: sorted.first().copied().unwrap_or(0.0),
                mb_per_s_max: sorted.last().copied().unwrap_or(0.0),
                device_requests,
                job,
            });
            step(w.name());
        }
    }
    Ok(FragPickerReport {
        version: 1,
        request_size: REQUEST,
        stride_gap: STRIDE_GAP,
        runs,
        warmup: WARMUP,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_counts_follow_fragpickers_loops() {
        let mib = 1 << 20;
        // 128 MiB: 1024 sequential requests; reads at k*416K < 128M: 316 (the last one
        // 32 KiB); writes only while k*416K + 128K < 128M: 315.
        assert_eq!(Workload::SeqRead.requests(128 * mib), 1024);
        assert_eq!(Workload::SeqUpdate.requests(128 * mib), 1024);
        assert_eq!(Workload::StrideRead.requests(128 * mib), 316);
        assert_eq!(Workload::StrideUpdate.requests(128 * mib), 315);
        // Exactly one stride period plus a request: the second write would end at EOF,
        // and write_stride.c's `<` leaves it out.
        assert_eq!(Workload::StrideUpdate.requests(416 * 1024 + REQUEST), 1);
        assert_eq!(Workload::StrideUpdate.requests(REQUEST), 0);
        assert_eq!(Workload::StrideRead.requests(1), 1);
    }
}
