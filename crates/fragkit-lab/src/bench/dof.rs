//! FAST'24's varying degree of fragmentation: one file (8 MiB) laid out in DoF = 1, 2, 4,
//! ..., 256 equal fragments on a scratch file system, read whole with large O_DIRECT
//! requests (1 MiB, the artifact's read size) at queue depth 1 and at a deep queue depth.
//!
//! FAST'24 varied the device's queue depth (nr_requests 1 vs 1023, on a patched kernel
//! whose floor is 1); fragkit varies the requests in flight from the application, which
//! the stock kernel allows, and reports the device's own request counts for each run.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::age::layout::{build, LayoutSpec};
use fragkit_core::io::{run_job, JobSpec, Op};
use fragkit_core::scratch::FsType;
use fragkit_core::scratch::{Scratch, ScratchSpec};
use fragkit_core::stats::{mean, Summary};

#[derive(Debug, Clone)]
pub struct DofSpec {
    pub fs: FsType,
    /// File size (8 MiB in FAST'24).
    pub size: u64,
    /// Degrees of fragmentation (fragments per file).
    pub dofs: Vec<u64>,
    /// Bytes between consecutive fragments.
    pub frag_distance: u64,
    /// Request size of the read.
    pub request_size: u64,
    pub queue_depths: Vec<u32>,
    pub iterations: u32,
    pub scratch_size: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DofPoint {
    pub dof: u64,
    /// Fragments FIEMAP shows (should equal `dof`).
    pub fragments: u64,
    pub frag_size: u64,
    pub queue_depth: u32,
    pub effective_queue_depth: u32,
    pub predicted_split: u64,
    pub device_reads: f64,
    /// Reads the block layer merged into others before they reached the device (deep
    /// queues let requests for adjacent blocks merge: reads + merges is the split count).
    pub device_read_merges: f64,
    pub mb_per_s: Summary,
    pub mean_latency_us: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct DofReport {
    pub version: u32,
    pub fs: String,
    pub size: u64,
    pub frag_distance: u64,
    pub request_size: u64,
    pub effective_request_size: u64,
    pub iterations: u32,
    pub device: String,
    pub points: Vec<DofPoint>,
}

/// Check the DoF list against the file size and block size before any work.
pub fn validate(spec: &DofSpec) -> Result<()> {
    if spec.dofs.is_empty() || spec.queue_depths.is_empty() {
        bail!("bench dof: give at least one --dof and one --qd");
    }
    for &d in &spec.dofs {
        if d == 0 || !spec.size.is_multiple_of(d) || !(spec.size / d).is_multiple_of(4096) {
            bail!(
                "--dof {d}: expected a divisor of --size {} leaving fragments that are multiples of 4 KiB",
                spec.size
            );
        }
    }
    if spec.iterations == 0 {
        bail!("--iterations 0: expected at least 1");
    }
    Ok(())
}

/// Run every DoF at every queue depth; `on_point` after each measurement.
pub fn run(spec: &DofSpec, on_point: &mut dyn FnMut(&DofPoint)) -> Result<DofReport> {
    validate(spec)?;
    let max_dof = spec.dofs.iter().copied().max().unwrap_or(1);
    let span = spec.size + max_dof * spec.frag_distance;
    let scratch_size = spec
        .scratch_size
        .unwrap_or(((span * 2 + (256 << 20)).next_multiple_of(64 << 20)).max(320 << 20));
    let scratch = Scratch::create(&ScratchSpec::new(spec.fs, scratch_size))
        .context("bench dof: making the scratch file system")?;
    let path: PathBuf = scratch.mountpoint().join("dof-target");
    let mut points = Vec::new();
    let mut effective = spec.request_size;
    for &dof in &spec.dofs {
        let _ = std::fs::remove_file(&path);
        nix::unistd::sync();
        let frag_size = spec.size / dof;
        let layout = build(&LayoutSpec {
            path: path.clone(),
            size: spec.size,
            frag_size,
            frag_distance: spec.frag_distance,
            seed: 67005,
            force: false,
            progress: false,
        })
        .with_context(|| format!("bench dof: laying out DoF {dof}"))?;
        for &qd in &spec.queue_depths {
            if fragkit_sys::signals::interrupted() {
                anyhow::bail!(fragkit_sys::signals::INTERRUPTED_MESSAGE);
            }
            let mut job = JobSpec::new(&path, Op::Read);
            job.block_size = spec.request_size;
            job.queue_depth = qd;
            job.iterations = spec.iterations;
            let result = run_job(&job)?;
            let prediction = super::predict_requests(&job, &result)?;
            if let Some(p) = &prediction {
                effective = p.request_size;
            }
            let lat: Vec<f64> = result
                .iterations
                .iter()
                .map(|i| i.latency.mean_us)
                .collect();
            let point = DofPoint {
                dof,
                fragments: layout.achieved.fragments,
                frag_size,
                queue_depth: qd,
                effective_queue_depth: result.effective_queue_depth,
                predicted_split: prediction.as_ref().map_or(0, |p| p.split),
                device_reads: result.device_mean(|d| d.reads),
                device_read_merges: result.device_mean(|d| d.read_merges),
                mb_per_s: result.mb_per_s,
                mean_latency_us: mean(&lat),
            };
            on_point(&point);
            points.push(point);
        }
    }
    let _ = std::fs::remove_file(&path);
    let device = scratch.device_name();
    scratch.destroy()?;
    Ok(DofReport {
        version: 1,
        fs: spec.fs.name().to_string(),
        size: spec.size,
        frag_distance: spec.frag_distance,
        request_size: spec.request_size,
        effective_request_size: effective,
        iterations: spec.iterations,
        device,
        points,
    })
}
