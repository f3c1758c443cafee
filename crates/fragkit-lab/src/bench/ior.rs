//! IOR's bandwidth method as MPI ranks (`bench ior`), on fragkit's I/O engine.
//!
//! Per transfer size and iteration, like IOR (`-w -r -t XFER -b BLOCK [-F] -B -C -i N`):
//! a barrier, then every rank opens its file (file per process) or its BLOCK-sized
//! region of one shared file, writes it in XFER requests (O_DIRECT with `direct`), and
//! closes it. The phase's time runs from the common start to the last rank's close (each
//! rank times itself from the barrier; the phase takes the slowest, so no clocks of
//! different hosts are compared); bandwidth is all ranks' bytes over that time, in MiB/s
//! as IOR prints it. Reads are shifted as IOR's `-C` does: rank r reads the data of rank
//! (r + tasks per node) mod N, so no rank reads what it wrote, and on another node when
//! there is one; when all ranks share one node (the shift would be 0) the shift is 1.
//! After writing, each rank maps its file (FIEMAP) and reports its fragments. Files are
//! removed at the end of every iteration, as IOR does without `-k`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use crate::cluster::Cluster;
use fragkit_core::io::{run_job, EngineKind, JobSpec, Op};
use fragkit_core::stats::mean;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IorLayout {
    /// IOR `-F`: one file per rank.
    FilePerProcess,
    /// IOR's default: one file, rank r's block at r × BLOCK.
    SharedFile,
}

#[derive(Debug, Clone)]
pub struct IorSpec {
    pub dir: PathBuf,
    pub xfers: Vec<u64>,
    /// Bytes each rank writes and reads per iteration (IOR `-b`).
    pub block: u64,
    pub direct: bool,
    pub write: bool,
    pub read: bool,
    pub iterations: u32,
    pub layout: IorLayout,
    /// IOR `-C`: read another rank's data.
    pub reorder: bool,
    /// IOR `-k`: keep the files after the last iteration.
    pub keep: bool,
    /// IOR `-e`: fsync at the end of each write phase, inside its time (each rank its own
    /// file or block). Off, as IOR's default: the phase ends at the last write.
    pub fsync: bool,
}

/// One phase (write or read) of one iteration, over all ranks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IorIteration {
    pub op: String,
    pub xfer: u64,
    pub iteration: u32,
    pub tasks: usize,
    pub block: u64,
    /// All ranks' bytes.
    pub bytes: u64,
    /// From the common start to the last rank's close.
    pub seconds: f64,
    /// `bytes` / `seconds`, MiB (2^20 bytes) per second as IOR prints.
    pub mib_per_s: f64,
    /// The fastest and slowest rank's own open-to-close time.
    pub rank_seconds_min: f64,
    pub rank_seconds_max: f64,
    /// The phase's parts as IOR's Results table shows them, each the slowest rank's: open
    /// (opening the file), wr/rd (the transfers), close (the rest: closing, and with
    /// `--fsync` the fsync, which IOR too does at close).
    pub open_seconds: f64,
    pub data_seconds: f64,
    pub close_seconds: f64,
    /// Transfers of all ranks, and per second of the wr/rd part (IOR's IOPS).
    pub transfers: u64,
    pub iops: f64,
    /// Mean time per transfer of one rank: wr/rd ÷ transfers per rank (IOR's Latency).
    pub latency_seconds: f64,
}

/// IOR's summary line for one (operation, transfer size).
#[derive(Debug, Clone, Serialize)]
pub struct IorSummary {
    pub op: String,
    pub max_mib_per_s: f64,
    pub min_mib_per_s: f64,
    pub mean_mib_per_s: f64,
    /// Population standard deviation over the iterations (IOR divides by the count).
    pub stddev_mib_per_s: f64,
    pub mean_seconds: f64,
    /// Transfers per second over the whole phase (bandwidth ÷ transfer size, IOR's OPs).
    pub max_ops: f64,
    pub min_ops: f64,
    pub mean_ops: f64,
    pub stddev_ops: f64,
    pub xfer: u64,
    pub block: u64,
    pub tasks: usize,
    pub tasks_per_node: usize,
    pub iterations: u32,
}

/// The fragments of one rank's data after one write.
#[derive(Debug, Clone, Serialize)]
pub struct RankFragments {
    pub rank: usize,
    pub xfer: u64,
    pub iteration: u32,
    pub path: PathBuf,
    /// Fragments (physically contiguous runs) of the rank's file, or of its block of the
    /// shared file.
    pub fragments: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct IorReport {
    pub version: u32,
    pub dir: PathBuf,
    pub tasks: usize,
    pub tasks_per_node: usize,
    pub layout: IorLayout,
    pub direct: bool,
    /// Each write phase ended with an fsync inside its time (IOR -e).
    pub fsync: bool,
    pub block: u64,
    pub xfers: Vec<u64>,
    /// Rank r read the data of rank (r + shift) mod tasks (0: its own).
    pub read_shift: usize,
    pub iterations: Vec<IorIteration>,
    pub summary: Vec<IorSummary>,
    pub fragments: Vec<RankFragments>,
    /// Unix times at the start and the end of the run (IOR's Began and Finished).
    pub began: f64,
    pub finished: f64,
}

/// Refuse what IOR refuses: a block that is not whole transfers, empty lists.
pub fn validate(spec: &IorSpec) -> Result<()> {
    if spec.xfers.is_empty() {
        bail!("--xfer: expected at least one transfer size");
    }
    if let Some(&x) = spec
        .xfers
        .iter()
        .find(|&&x| x == 0 || !spec.block.is_multiple_of(x))
    {
        bail!(
            "--xfer {x}: expected a transfer size that divides --block {} (each rank writes whole transfers)",
            spec.block
        );
    }
    if spec.iterations == 0 {
        bail!("--iterations 0: expected at least 1");
    }
    if !spec.write && !spec.read {
        bail!("nothing to do: give --write, --read or both");
    }
    Ok(())
}

/// The shift of IOR's `-C`: one node's worth of tasks, or 1 when every rank is on one node.
pub fn read_shift(tasks: usize, tasks_per_node: usize, reorder: bool) -> usize {
    if !reorder || tasks <= 1 {
        return 0;
    }
    match tasks_per_node % tasks {
        0 => 1,
        s => s,
    }
}

/// The file and offset holding rank `r`'s data.
fn place(spec: &IorSpec, r: usize) -> (PathBuf, u64) {
    match spec.layout {
        IorLayout::FilePerProcess => (spec.dir.join(format!("ior.{r:08}")), 0),
        IorLayout::SharedFile => (spec.dir.join("ior.shared"), r as u64 * spec.block),
    }
}

/// One rank's phase: open-to-close seconds, and its open and transfer parts.
struct PhaseTimes {
    total: f64,
    open: f64,
    data: f64,
}

/// Run one phase on this rank.
fn phase(spec: &IorSpec, op: Op, xfer: u64, path: &Path, offset: u64) -> Result<PhaseTimes> {
    let mut job = JobSpec::new(path, op);
    job.block_size = xfer;
    job.size = Some(spec.block);
    job.offset = offset;
    job.direct = spec.direct;
    // IOR's POSIX back end: one synchronous request at a time per rank.
    job.engine = EngineKind::Psync;
    job.queue_depth = 1;
    job.drop_caches = false;
    job.sync_writes = spec.fsync;
    let t0 = Instant::now();
    let r = run_job(&job)?;
    Ok(PhaseTimes {
        total: t0.elapsed().as_secs_f64(),
        open: r.open_seconds,
        data: r.iterations.iter().map(|i| i.seconds).sum(),
    })
}

/// Fragments of this rank's data: the whole file, or the runs overlapping its block.
fn fragments_of(path: &Path, offset: u64, len: u64, layout: IorLayout) -> Result<u64> {
    let check = crate::age::check_file(path)?;
    Ok(match layout {
        IorLayout::FilePerProcess => check.fragments,
        IorLayout::SharedFile => check
            .runs
            .iter()
            .filter(|f| f.logical < offset + len && f.logical_end() > offset)
            .count() as u64,
    })
}

/// Every rank runs the whole benchmark; rank 0 gets the report.
pub fn run(spec: &IorSpec, cluster: &Cluster) -> Result<Option<IorReport>> {
    let began = fragkit_core::units::unix_now();
    cluster.agree(validate(spec).and_then(|_| {
        if !spec.dir.is_dir() {
            bail!("{}: not a directory", spec.dir.display());
        }
        Ok(())
    }))?;
    let (rank, tasks) = (cluster.rank(), cluster.size());
    let tpn = cluster.local_size();
    let shift = read_shift(tasks, tpn, spec.reorder);
    let (my_path, my_offset) = place(spec, rank);
    let (read_path, read_offset) = place(spec, (rank + shift) % tasks);
    if spec.write {
        remove_stale(spec, cluster, &my_path)?;
    }
    let mut iterations = Vec::new();
    let mut fragments = Vec::new();
    for &xfer in &spec.xfers {
        for it in 0..spec.iterations {
            let mut ops = Vec::new();
            if spec.write {
                ops.push((Op::Write, &my_path, my_offset));
            }
            if spec.read {
                ops.push((Op::Read, &read_path, read_offset));
            }
            for (op, path, offset) in ops {
                cluster.barrier();
                let t = cluster.agree(phase(spec, op, xfer, path, offset))?;
                // Every rank's [total, open, data] in one collective; each part the
                // slowest rank's, close the rest of the phase.
                let gathered = cluster.all_gather_f64s(&[t.total, t.open, t.data]);
                let ranks: Vec<&[f64]> = gathered.chunks(3).collect();
                let all: Vec<f64> = ranks.iter().map(|r| r[0]).collect();
                let slowest =
                    |part: fn(&[f64]) -> f64| ranks.iter().map(|r| part(r)).fold(0.0, f64::max);
                let open = slowest(|r| r[1]);
                let data = slowest(|r| r[2]).max(1e-9);
                let close = slowest(|r| (r[0] - r[1] - r[2]).max(0.0));
                let seconds = all.iter().copied().fold(0.0, f64::max).max(1e-9);
                let bytes = spec.block * tasks as u64;
                let per_rank = spec.block / xfer;
                iterations.push(IorIteration {
                    op: op.name().to_string(),
                    xfer,
                    iteration: it,
                    tasks,
                    block: spec.block,
                    bytes,
                    seconds,
                    mib_per_s: bytes as f64 / (1u64 << 20) as f64 / seconds,
                    rank_seconds_min: all.iter().copied().fold(f64::INFINITY, f64::min),
                    rank_seconds_max: seconds,
                    open_seconds: open,
                    data_seconds: data,
                    close_seconds: close,
                    transfers: per_rank * tasks as u64,
                    iops: (per_rank * tasks as u64) as f64 / data,
                    latency_seconds: data / per_rank.max(1) as f64,
                });
                if op == Op::Write {
                    let n = cluster.agree(fragments_of(
                        &my_path,
                        my_offset,
                        spec.block,
                        spec.layout,
                    ))?;
                    for (r, &f) in cluster.all_gather_u64(n).iter().enumerate() {
                        fragments.push(RankFragments {
                            rank: r,
                            xfer,
                            iteration: it,
                            path: place(spec, r).0,
                            fragments: f,
                        });
                    }
                }
            }
            let last = xfer == *spec.xfers.last().unwrap_or(&xfer) && it + 1 == spec.iterations;
            // Every rank is done reading before any file goes.
            cluster.barrier();
            if spec.write && !(spec.keep && last) {
                cluster.agree(if removes_its_file(spec, cluster) {
                    std::fs::remove_file(&my_path)
                        .map_err(|e| anyhow::anyhow!("{}: cannot remove: {e}", my_path.display()))
                } else {
                    Ok(())
                })?;
            }
        }
    }
    if !cluster.is_root() {
        return Ok(None);
    }
    let summary = summarize(&iterations, spec, tasks, tpn);
    Ok(Some(IorReport {
        version: 1,
        dir: spec.dir.clone(),
        tasks,
        tasks_per_node: tpn,
        layout: spec.layout,
        direct: spec.direct,
        fsync: spec.fsync,
        block: spec.block,
        xfers: spec.xfers.clone(),
        read_shift: shift,
        iterations,
        summary,
        fragments,
        began,
        finished: fragkit_core::units::unix_now(),
    }))
}

/// Whether this rank removes the file it writes: each rank its own, or rank 0 the shared one.
fn removes_its_file(spec: &IorSpec, cluster: &Cluster) -> bool {
    match spec.layout {
        IorLayout::FilePerProcess => true,
        IorLayout::SharedFile => cluster.is_root(),
    }
}

/// Before the first write, the files a write phase will write are removed if they
/// exist (as IOR does): a write over a kept, larger file would leave its old size and
/// fragments, and a read of it would measure that. Root says how many went.
fn remove_stale(spec: &IorSpec, cluster: &Cluster, my_path: &Path) -> Result<()> {
    let removed = cluster.agree(if removes_its_file(spec, cluster) {
        match std::fs::symlink_metadata(my_path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0u64),
            Ok(m) if !m.is_file() => Err(anyhow::anyhow!(
                "{}: not a regular file; expected none there, or a file to replace",
                my_path.display()
            )),
            _ => std::fs::remove_file(my_path).map(|()| 1).map_err(|e| {
                anyhow::anyhow!(
                    "{}: exists and cannot be removed before writing: {e}",
                    my_path.display()
                )
            }),
        }
    } else {
        Ok(0)
    })?;
    let total: u64 = cluster.all_gather_u64(removed).iter().sum();
    if total > 0 && cluster.is_root() {
        fragkit_sys::stderr_line!(
            "bench ior: removed {total} existing file{} in {} before writing (as IOR does)",
            if total == 1 { "" } else { "s" },
            spec.dir.display()
        );
    }
    // No rank writes before every stale file is gone.
    cluster.barrier();
    Ok(())
}

/// IOR's "Summary of all tests": one line per (operation, transfer size).
pub fn summarize(
    rows: &[IorIteration],
    spec: &IorSpec,
    tasks: usize,
    tpn: usize,
) -> Vec<IorSummary> {
    let mut out = Vec::new();
    for &xfer in &spec.xfers {
        for op in ["write", "read"] {
            let mine: Vec<&IorIteration> = rows
                .iter()
                .filter(|r| r.xfer == xfer && r.op == op)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let bw: Vec<f64> = mine.iter().map(|r| r.mib_per_s).collect();
            let ops: Vec<f64> = mine
                .iter()
                .map(|r| r.mib_per_s * (1u64 << 20) as f64 / xfer as f64)
                .collect();
            let secs: Vec<f64> = mine.iter().map(|r| r.seconds).collect();
            // Population standard deviation, as IOR divides by the count.
            let sd = |v: &[f64]| {
                let m = mean(v);
                (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64).sqrt()
            };
            let max = |v: &[f64]| v.iter().copied().fold(f64::MIN, f64::max);
            let min = |v: &[f64]| v.iter().copied().fold(f64::MAX, f64::min);
            out.push(IorSummary {
                op: op.to_string(),
                max_mib_per_s: max(&bw),
                min_mib_per_s: min(&bw),
                mean_mib_per_s: mean(&bw),
                stddev_mib_per_s: sd(&bw),
                mean_seconds: mean(&secs),
                max_ops: max(&ops),
                min_ops: min(&ops),
                mean_ops: mean(&ops),
                stddev_ops: sd(&ops),
                xfer,
                block: spec.block,
                tasks,
                tasks_per_node: tpn,
                iterations: mine.len() as u32,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_never_come_from_the_writer() {
        // One node of 4: shift 1. Two nodes of 2: shift 2 (the other node).
        assert_eq!(read_shift(4, 4, true), 1);
        assert_eq!(read_shift(4, 2, true), 2);
        assert_eq!(read_shift(4, 4, false), 0);
        assert_eq!(read_shift(1, 1, true), 0);
        for (n, tpn) in [(2, 2), (4, 4), (8, 2), (6, 3)] {
            let s = read_shift(n, tpn, true);
            assert!((0..n).all(|r| (r + s) % n != r), "{n} {tpn}");
        }
    }

    fn spec() -> IorSpec {
        IorSpec {
            dir: PathBuf::from("/x"),
            xfers: vec![1 << 20, 4 << 20],
            block: 64 << 20,
            direct: true,
            write: true,
            read: true,
            iterations: 2,
            layout: IorLayout::FilePerProcess,
            reorder: true,
            keep: false,
            fsync: false,
        }
    }

    #[test]
    fn block_must_be_whole_transfers() {
        let mut s = spec();
        validate(&s).unwrap();
        s.xfers = vec![3 << 20];
        assert!(validate(&s).unwrap_err().to_string().starts_with("--xfer"));
        let mut s = spec();
        s.write = false;
        s.read = false;
        assert!(validate(&s).is_err());
    }

    #[test]
    fn summary_is_iors() {
        let s = spec();
        let row = |op: &str, it, mib: f64| IorIteration {
            op: op.into(),
            xfer: 1 << 20,
            iteration: it,
            tasks: 4,
            block: s.block,
            bytes: 4 * s.block,
            seconds: 256.0 / mib,
            mib_per_s: mib,
            rank_seconds_min: 0.0,
            rank_seconds_max: 0.0,
            open_seconds: 0.0,
            data_seconds: 0.0,
            close_seconds: 0.0,
            transfers: 0,
            iops: 0.0,
            latency_seconds: 0.0,
        };
        let rows = vec![
            row("write", 0, 100.0),
            row("write", 1, 200.0),
            row("read", 0, 50.0),
        ];
        let sum = summarize(&rows, &s, 4, 4);
        assert_eq!(sum.len(), 2);
        let w = &sum[0];
        assert_eq!((w.op.as_str(), w.iterations), ("write", 2));
        assert_eq!(
            (w.max_mib_per_s, w.min_mib_per_s, w.mean_mib_per_s),
            (200.0, 100.0, 150.0)
        );
        assert_eq!(w.stddev_mib_per_s, 50.0);
        assert!((w.mean_seconds - (2.56 + 1.28) / 2.0).abs() < 1e-9);
    }
}
