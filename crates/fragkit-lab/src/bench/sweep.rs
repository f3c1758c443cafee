//! FragPicker's motivation experiment end to end: for every frag size F × frag distance
//! D, lay out a file with `age layout` on a scratch file system fragkit makes itself, drop
//! the caches, read it with sequential O_DIRECT requests of R bytes (128 KiB) through the
//! I/O engine, and record what the device saw next to what the layout predicts (S(R)).
//! CC and NLRS (docs/design.md) say how strongly throughput and request count follow each
//! parameter.

use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::age::layout::{build, LayoutSpec, Technique};
use fragkit_core::io::{run_job, JobSpec, Op};
use fragkit_core::scratch::FsType;
use fragkit_core::scratch::{Scratch, ScratchSpec};
use fragkit_core::stats::{nlrs, pearson, Summary};

#[derive(Debug, Clone)]
pub struct SweepSpec {
    pub fs: FsType,
    /// File size per layout.
    pub size: u64,
    pub frag_sizes: Vec<u64>,
    pub frag_distances: Vec<u64>,
    /// Request size R of the read.
    pub request_size: u64,
    pub iterations: u32,
    /// Scratch image size [default: the largest layout's span plus room].
    pub scratch_size: Option<u64>,
    /// Keep the scratch file system mounted afterwards (its mount point is reported).
    pub keep: bool,
}

/// One (F, D) cell.
#[derive(Debug, Clone, Serialize)]
pub struct SweepPoint {
    pub frag_size: u64,
    pub frag_distance: u64,
    pub technique: Technique,
    /// Fragments the file really has (FIEMAP, docs/design.md definition).
    pub fragments: u64,
    pub size_fidelity: f64,
    pub distance_fidelity: f64,
    /// S(R') and I(R') at R' = the request size the device can see.
    pub predicted_split: u64,
    pub predicted_ideal: u64,
    /// Read requests the device completed per iteration (mean over iterations).
    pub device_reads: f64,
    pub device_read_bytes: f64,
    pub mb_per_s: Summary,
}

/// CC and NLRS of one response against one parameter, over every point of the sweep.
#[derive(Debug, Clone, Serialize)]
pub struct Correlation {
    /// "frag_size" or "frag_distance".
    pub parameter: &'static str,
    /// "mb_per_s" (FragPicker's CC/NLRS) or "device_reads".
    pub response: &'static str,
    pub cc: f64,
    pub nlrs: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SweepReport {
    pub version: u32,
    pub fs: String,
    pub size: u64,
    pub request_size: u64,
    /// min(R, device caps): what one request can be at the device.
    pub effective_request_size: u64,
    pub iterations: u32,
    pub device: String,
    pub scratch_size: u64,
    /// Mount point, when the scratch file system was kept.
    pub kept: Option<PathBuf>,
    pub points: Vec<SweepPoint>,
    pub correlations: Vec<Correlation>,
}

/// Bytes the layout of a `size`-byte file with F, D spans on disk.
/// Saturates rather than overflowing; F = 0 (refused by `validate`) spans nothing.
pub fn span(size: u64, f: u64, d: u64) -> u64 {
    if f == 0 {
        return 0;
    }
    size.div_ceil(f).saturating_mul(f.saturating_add(d))
}

/// Scratch size that holds the largest layout's span with room for metadata and the
/// allocator's reserves.
pub fn scratch_size_for(spec: &SweepSpec) -> u64 {
    let mut max = 0;
    for &f in &spec.frag_sizes {
        for &d in &spec.frag_distances {
            max = max.max(span(spec.size, f, d));
        }
    }
    let want = max.saturating_add(max / 4).saturating_add(256 << 20);
    want.checked_next_multiple_of(64 << 20)
        .unwrap_or(want)
        .max(spec.fs_min())
}

impl SweepSpec {
    fn fs_min(&self) -> u64 {
        match self.fs {
            FsType::Xfs => 320 << 20,
            _ => 256 << 20,
        }
    }
}

/// CC and NLRS of throughput and of device reads against F and against D.
pub fn correlations(points: &[SweepPoint]) -> Vec<Correlation> {
    let f: Vec<f64> = points.iter().map(|p| p.frag_size as f64).collect();
    let d: Vec<f64> = points.iter().map(|p| p.frag_distance as f64).collect();
    let mbs: Vec<f64> = points.iter().map(|p| p.mb_per_s.mean).collect();
    let reads: Vec<f64> = points.iter().map(|p| p.device_reads).collect();
    let mut out = Vec::new();
    for (parameter, x) in [("frag_size", &f), ("frag_distance", &d)] {
        for (response, y) in [("mb_per_s", &mbs), ("device_reads", &reads)] {
            out.push(Correlation {
                parameter,
                response,
                cc: pearson(x, y),
                nlrs: nlrs(x, y),
            });
        }
    }
    out
}

/// The scratch file systems have 4 KiB blocks: every size must be a positive multiple.
pub fn validate(spec: &SweepSpec) -> Result<()> {
    let lists = [
        ("--frag-size", &spec.frag_sizes),
        ("--frag-distance", &spec.frag_distances),
    ];
    for (name, list) in lists {
        if let Some(v) = list.iter().find(|&&v| v == 0 || v % 4096 != 0) {
            anyhow::bail!(
                "{name} {v}: expected positive multiples of the scratch file system's 4 KiB block"
            );
        }
    }
    if spec.size == 0 || !spec.size.is_multiple_of(4096) {
        anyhow::bail!(
            "--size {}: expected a positive multiple of 4 KiB",
            spec.size
        );
    }
    Ok(())
}

/// Run the sweep; `on_point` is called as each cell finishes (progress).
pub fn run(spec: &SweepSpec, on_point: &mut dyn FnMut(&SweepPoint)) -> Result<SweepReport> {
    if spec.frag_sizes.is_empty() || spec.frag_distances.is_empty() {
        anyhow::bail!("bench sweep: give at least one --frag-size and one --frag-distance");
    }
    if spec.iterations == 0 {
        anyhow::bail!("--iterations 0: expected at least 1");
    }
    validate(spec)?;
    let scratch_size = spec.scratch_size.unwrap_or_else(|| scratch_size_for(spec));
    let scratch = Scratch::create(&ScratchSpec::new(spec.fs, scratch_size))
        .context("bench sweep: making the scratch file system")?;
    let path = scratch.mountpoint().join("sweep-target");
    let mut points = Vec::new();
    let mut effective = spec.request_size;
    for &f in &spec.frag_sizes {
        for &d in &spec.frag_distances {
            if fragkit_sys::signals::interrupted() {
                anyhow::bail!(fragkit_sys::signals::INTERRUPTED_MESSAGE);
            }
            let _ = std::fs::remove_file(&path);
            nix::unistd::sync();
            let layout = build(&LayoutSpec {
                path: path.clone(),
                size: spec.size,
                frag_size: f,
                frag_distance: d,
                seed: 67005,
                force: false,
                progress: false,
            })
            .with_context(|| {
                format!(
                    "bench sweep: laying out F={f} D={d} on a {} MiB scratch {} (a larger --scratch-size may help)",
                    scratch_size >> 20,
                    spec.fs.name()
                )
            })?;
            // run_job drops the caches before every iteration.
            let mut job = JobSpec::new(&path, Op::Read);
            job.block_size = spec.request_size;
            job.iterations = spec.iterations;
            let result = run_job(&job)?;
            let prediction = super::predict_requests(&job, &result)?;
            if let Some(p) = &prediction {
                effective = p.request_size;
            }
            let point = SweepPoint {
                frag_size: f,
                frag_distance: d,
                technique: layout.technique,
                fragments: layout.achieved.fragments,
                size_fidelity: layout.size_fidelity,
                distance_fidelity: layout.distance_fidelity,
                predicted_split: prediction.as_ref().map_or(0, |p| p.split),
                predicted_ideal: prediction.as_ref().map_or(0, |p| p.ideal),
                device_reads: result.device_mean(|d| d.reads),
                device_read_bytes: result.device_mean(|d| d.read_bytes),
                mb_per_s: result.mb_per_s,
            };
            on_point(&point);
            points.push(point);
        }
    }
    let _ = std::fs::remove_file(&path);
    let device = scratch.device_name();
    let kept = if spec.keep {
        Some(scratch.keep().mountpoint)
    } else {
        scratch.destroy()?;
        None
    };
    Ok(SweepReport {
        version: 1,
        fs: spec.fs.name().to_string(),
        size: spec.size,
        request_size: spec.request_size,
        effective_request_size: effective,
        iterations: spec.iterations,
        device,
        scratch_size,
        kept,
        correlations: correlations(&points),
        points,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(f: u64, d: u64, reads: f64, mbs: f64) -> SweepPoint {
        SweepPoint {
            frag_size: f,
            frag_distance: d,
            technique: Technique::FillAndPunch,
            fragments: 0,
            size_fidelity: 1.0,
            distance_fidelity: 1.0,
            predicted_split: 0,
            predicted_ideal: 0,
            device_reads: reads,
            device_read_bytes: 0.0,
            mb_per_s: Summary {
                mean: mbs,
                ..Summary::default()
            },
        }
    }

    #[test]
    fn correlations_follow_the_parameter_that_matters() {
        // Reads depend on F only (8M / max(F, 128K) / ...), throughput on F only.
        let mut pts = Vec::new();
        for f in [4096u64, 16384, 65536, 131072, 262144] {
            for d in [4096u64, 1 << 20] {
                let reads = (8 << 20) as f64 / f.min(131072) as f64;
                pts.push(point(f, d, reads, 1000.0 / reads));
            }
        }
        let c = correlations(&pts);
        let get = |p: &str, r: &str| {
            c.iter()
                .find(|x| x.parameter == p && x.response == r)
                .unwrap()
                .cc
        };
        assert!(get("frag_size", "device_reads") < -0.5);
        assert!(get("frag_size", "mb_per_s") > 0.5);
        assert_eq!(get("frag_distance", "device_reads"), 0.0);
        assert_eq!(get("frag_distance", "mb_per_s"), 0.0);
    }

    #[test]
    fn scratch_holds_the_widest_layout() {
        let spec = SweepSpec {
            fs: FsType::Ext4,
            size: 8 << 20,
            frag_sizes: vec![4096, 1 << 20],
            frag_distances: vec![4096, 1 << 20],
            request_size: 128 << 10,
            iterations: 1,
            scratch_size: None,
            keep: false,
        };
        // 2048 fragments × (4K + 1M) = 2 GiB + 8 MiB.
        assert_eq!(span(8 << 20, 4096, 1 << 20), 2048 * ((1 << 20) + 4096));
        assert!(scratch_size_for(&spec) >= span(8 << 20, 4096, 1 << 20) * 5 / 4);
    }
}
