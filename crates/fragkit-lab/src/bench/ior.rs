//! IOR's bandwidth method as MPI ranks (`bench ior`), on fragkit's I/O engine.
//!
//! Per transfer size and iteration, like IOR (`-w -r -t XFER -b BLOCK -s SEGMENTS [-F] -B
//! -C -i N`): a barrier, then every rank opens its file (file per process) or the shared
//! file, writes its BLOCK in each of the SEGMENTS segments in XFER requests (O_DIRECT with
//! `direct`; in random order within the block with `random_offsets`, the same order in
//! every segment, as IOR's `-z`), and closes it. The phase's time runs from the first
//! rank's open to the last rank's close, as IOR's: each rank times its open call, its
//! transfers and its close, and says when its open started after the barrier (so no clocks
//! of different hosts are compared); bandwidth is the bytes all ranks actually moved over
//! that time, in MiB/s as IOR prints it. With a deadline (IOR's
//! `-D`) each rank stops submitting once it has passed, and a reader of that data reads
//! what was written.
//!
//! Reads come from another rank's data as IOR's `-C`, `-Z` and `-Q` arrange it, with the
//! mapping of ranks to nodes learnt from the ranks' host names as IOR does: by slot (rank 1
//! on rank 0's node) the constant shift is one node's worth of tasks, round robin it is 1;
//! `-Q` nodes away. fragkit differs in two cases: with every rank on one node IOR's `-C`
//! shift is 0 (each rank reads its own data), fragkit's is 1; and `-Z` draws among the ranks
//! on other nodes by host name, where IOR's drawn offset assumes placement by slot. After writing, each rank maps its file
//! (FIEMAP) and reports its fragments. Files are removed at the end of every iteration, as
//! IOR does without `-k`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use rand::RngExt;
use serde::{Deserialize, Serialize};

use crate::cluster::Cluster;
use fragkit_core::io::{run_job, EngineKind, JobSpec, Op, Pattern, Segments};
use fragkit_core::stats::mean;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IorLayout {
    /// IOR `-F`: one file per rank.
    FilePerProcess,
    /// IOR's default: one file, rank r's block at (segment × tasks + r) × BLOCK.
    SharedFile,
}

/// Whose data a rank reads back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ReadOrder {
    /// Its own (IOR without `-C` or `-Z`).
    Own,
    /// IOR `-C`: the data of the rank `nodes` nodes' worth of tasks further (`-Q`).
    Constant { nodes: usize },
    /// IOR `-Z`: a random rank's on another node (any rank's when `nodes`, IOR's `-Q`, is 0
    /// or there is one node), drawn per rank from `seed` (`-X`; negative: its magnitude plus
    /// the iteration, a new draw every iteration).
    Random { nodes: usize, seed: i64 },
}

#[derive(Debug, Clone)]
pub struct IorSpec {
    pub dir: PathBuf,
    pub xfers: Vec<u64>,
    /// Bytes each rank writes and reads per segment (IOR `-b`).
    pub block: u64,
    /// Segments (IOR `-s`): each rank's data is `segments` blocks.
    pub segments: u64,
    pub direct: bool,
    pub write: bool,
    pub read: bool,
    pub iterations: u32,
    pub layout: IorLayout,
    pub order: ReadOrder,
    /// IOR `-z`: each block's transfers in a seeded random order.
    pub random_offsets: bool,
    /// IOR `-D`: seconds after which a phase stops submitting.
    pub deadline: Option<f64>,
    /// IOR `-k`: keep the files after the last iteration.
    pub keep: bool,
    /// IOR `-e`: fsync at the end of each write phase, inside its time (each rank its own
    /// file or block). Off, as IOR's default: the phase ends at the last write.
    pub fsync: bool,
    /// IOR `-v`: 1 says the node map, whose data each rank reads and each phase as it ends;
    /// 2 adds every rank's bytes and times.
    pub verbose: u8,
}

/// One phase (write or read) of one iteration, over all ranks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IorIteration {
    pub op: String,
    pub xfer: u64,
    pub iteration: u32,
    pub tasks: usize,
    pub block: u64,
    /// Bytes all ranks moved (fewer than planned only when the deadline stopped a rank).
    pub bytes: u64,
    /// Bytes the ranks were to move: tasks × segments × block, or for a read what the
    /// ranks read from wrote.
    pub planned_bytes: u64,
    /// The fewest and most bytes one rank moved.
    pub rank_bytes_min: u64,
    pub rank_bytes_max: u64,
    /// From the first rank's open to the last rank's close (each rank placed by when its
    /// open started after the common barrier).
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
    /// Reads: ranks that read data written on their own node while other nodes exist.
    pub own_node_reads: usize,
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
    /// The first iteration's bytes moved by all ranks (IOR's aggs(MiB)).
    pub aggregate_bytes: u64,
}

/// The fragments of one rank's data after one write.
#[derive(Debug, Clone, Serialize)]
pub struct RankFragments {
    pub rank: usize,
    pub xfer: u64,
    pub iteration: u32,
    pub path: PathBuf,
    /// Fragments (physically contiguous runs) of the rank's file, or of its blocks of the
    /// shared file.
    pub fragments: u64,
}

/// Whose data every rank read in one iteration.
#[derive(Debug, Clone, Serialize)]
pub struct ReadPlan {
    pub xfer: u64,
    pub iteration: u32,
    /// Rank r read the data rank `read_from[r]` wrote.
    pub read_from: Vec<usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct IorReport {
    pub version: u32,
    pub dir: PathBuf,
    pub tasks: usize,
    /// Tasks on rank 0's node (IOR's tPN), nodes, and whether ranks were placed by slot
    /// (rank 1 on rank 0's node) or round robin, from the ranks' host names.
    pub tasks_per_node: usize,
    pub nodes: usize,
    pub by_slot: bool,
    /// IOR's Nodemap: 1 for each rank on rank 0's node, 0 for the others.
    pub node_map: String,
    pub layout: IorLayout,
    pub direct: bool,
    /// Each write phase ended with an fsync inside its time (IOR -e).
    pub fsync: bool,
    pub block: u64,
    pub segments: u64,
    pub random_offsets: bool,
    pub deadline: Option<f64>,
    pub xfers: Vec<u64>,
    pub order: ReadOrder,
    /// Constant order: rank r read the data of rank (r + shift) mod tasks (0: its own).
    pub read_shift: usize,
    pub read_plans: Vec<ReadPlan>,
    pub iterations: Vec<IorIteration>,
    pub summary: Vec<IorSummary>,
    pub fragments: Vec<RankFragments>,
    /// Unix times at the start and the end of the run (IOR's Began and Finished).
    pub began: f64,
    pub finished: f64,
}

/// Refuse what IOR refuses: a block that is not whole transfers, empty lists, and what
/// cannot mean anything.
pub fn validate(spec: &IorSpec, tasks: usize) -> Result<()> {
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
    if spec.segments == 0 {
        bail!("--segments 0: expected at least 1");
    }
    if spec
        .block
        .checked_mul(spec.segments)
        .and_then(|b| b.checked_mul(tasks as u64))
        .is_none_or(|b| b > i64::MAX as u64)
    {
        bail!(
            "--block {} × --segments {} × {tasks} ranks: expected a file no larger than 2^63 bytes",
            spec.block,
            spec.segments
        );
    }
    if spec.random_offsets {
        if let Some(&x) = spec.xfers.iter().find(|&&x| x == spec.block) {
            bail!(
                "--random-offsets with --xfer {x} = --block: expected a block of more than one transfer (a single transfer has one order)"
            );
        }
    }
    if let Some(d) = spec.deadline {
        if !(d.is_finite() && d > 0.0) {
            bail!("--deadline {d}: expected a positive number of seconds");
        }
    }
    if !spec.write && !spec.read {
        bail!("nothing to do: give --write, --read or both");
    }
    Ok(())
}

/// How ranks sit on nodes, from every rank's host name (IOR's QueryNodeMapping).
#[derive(Debug, Clone)]
pub struct NodeMap {
    pub hosts: Vec<String>,
}

impl NodeMap {
    pub fn tasks(&self) -> usize {
        self.hosts.len()
    }
    /// Ranks on rank 0's node (IOR's numTasksOnNode0, its tPN column).
    pub fn tasks_on_node0(&self) -> usize {
        self.hosts.iter().filter(|h| **h == self.hosts[0]).count()
    }
    pub fn nodes(&self) -> usize {
        let mut h: Vec<&String> = self.hosts.iter().collect();
        h.sort_unstable();
        h.dedup();
        h.len()
    }
    /// By slot: consecutive ranks fill a node (IOR: rank 1 shares rank 0's node).
    pub fn by_slot(&self) -> bool {
        self.hosts.len() < 2 || self.hosts[1] == self.hosts[0]
    }
    /// IOR's Nodemap line: 1 per rank on rank 0's node, else 0.
    pub fn map_line(&self) -> String {
        self.hosts
            .iter()
            .map(|h| if *h == self.hosts[0] { '1' } else { '0' })
            .collect()
    }
}

/// The constant shift of IOR's `-C -Q nodes` under the detected mapping: one node's worth
/// of tasks by slot, 1 round robin, times `nodes`; 1 when that comes to 0 with more than
/// one rank (every rank on one node: fragkit still reads another rank's data).
pub fn constant_shift(map: &NodeMap, nodes: usize) -> usize {
    let tasks = map.tasks();
    if tasks <= 1 {
        return 0;
    }
    let per = if map.by_slot() {
        map.tasks_on_node0()
    } else {
        1
    };
    match nodes.saturating_mul(per) % tasks {
        0 => 1,
        s => s,
    }
}

/// Whose data each rank reads in `iteration`.
pub fn read_partners(map: &NodeMap, order: ReadOrder, iteration: u32) -> Vec<usize> {
    let tasks = map.tasks();
    match order {
        ReadOrder::Own => (0..tasks).collect(),
        ReadOrder::Constant { nodes } => {
            let s = constant_shift(map, nodes);
            (0..tasks).map(|r| (r + s) % tasks).collect()
        }
        ReadOrder::Random { nodes, seed } => {
            // IOR's -Z draws a rank offset of at least `nodes` nodes' worth of tasks, which
            // assumes placement by slot; fragkit draws among the ranks on other nodes (any
            // rank when there is one node or `nodes` is 0), by host name.
            let base = if seed < 0 {
                seed.unsigned_abs() + iteration as u64
            } else {
                seed as u64
            };
            let elsewhere = nodes > 0 && map.nodes() > 1;
            (0..tasks)
                .map(|r| {
                    let pool: Vec<usize> = (0..tasks)
                        .filter(|&p| !elsewhere || map.hosts[p] != map.hosts[r])
                        .collect();
                    let mut rng = crate::age::seeded_rng(base ^ (r as u64).rotate_left(32));
                    pool[rng.random_range(0..pool.len())]
                })
                .collect()
        }
    }
}

/// The file holding rank `r`'s data, its first block's offset, and the distance between
/// its blocks in consecutive segments.
fn place(spec: &IorSpec, r: usize, tasks: usize) -> (PathBuf, u64, u64) {
    match spec.layout {
        IorLayout::FilePerProcess => (spec.dir.join(format!("ior.{r:08}")), 0, spec.block),
        IorLayout::SharedFile => (
            spec.dir.join("ior.shared"),
            r as u64 * spec.block,
            spec.block * tasks as u64,
        ),
    }
}

/// The seed of rank `r`'s random transfer order: a reader of its data replays it.
fn offset_seed(r: usize) -> u64 {
    crate::age::DEFAULT_SEED ^ ((r as u64) << 20)
}

/// One rank's phase: when its open started (seconds after the phase's barrier), its
/// open-to-close seconds, its open and transfer parts, and what moved.
struct PhaseTimes {
    start: f64,
    total: f64,
    open: f64,
    data: f64,
    bytes: u64,
    transfers: u64,
}

/// Run one phase on this rank over rank `owner`'s data, at most `limit` transfers.
fn phase(
    spec: &IorSpec,
    op: Op,
    xfer: u64,
    owner: usize,
    tasks: usize,
    limit: Option<u64>,
) -> Result<PhaseTimes> {
    let (path, offset, stride) = place(spec, owner, tasks);
    let mut job = JobSpec::new(&path, op);
    job.block_size = xfer;
    job.size = Some(spec.block);
    job.offset = offset;
    job.segments = Segments {
        count: spec.segments,
        stride,
    };
    if spec.random_offsets {
        job.pattern = Pattern::Random {
            seed: offset_seed(owner),
            align: xfer,
        };
    }
    job.deadline = spec.deadline.map(Duration::from_secs_f64);
    job.limit = limit;
    job.direct = spec.direct;
    // IOR's POSIX back end: one synchronous request at a time per rank.
    job.engine = EngineKind::Psync;
    job.queue_depth = 1;
    job.drop_caches = false;
    job.sync_writes = spec.fsync;
    let began = Instant::now();
    let r = run_job(&job)?;
    // As IOR times a phase: from the open call to the close's return, the fsync (with
    // `fsync`) in the close part. The job finds the device and fills its buffers before
    // it opens, as IOR prepares before it opens; a buffered pass's own time holds the
    // fsync, which goes to the close part here.
    let passes: f64 = r.iterations.iter().map(|i| i.seconds).sum();
    let data = if spec.direct {
        passes
    } else {
        (passes - r.sync_seconds).max(0.0)
    };
    Ok(PhaseTimes {
        start: r.opened_at.saturating_duration_since(began).as_secs_f64(),
        total: r.closed_at.duration_since(r.opened_at).as_secs_f64(),
        open: r.open_seconds,
        data,
        bytes: r.iterations.iter().map(|i| i.bytes).sum(),
        transfers: r.iterations.iter().map(|i| i.requests).sum(),
    })
}

/// Fragments of this rank's data: the whole file, or the runs overlapping its blocks.
fn fragments_of(spec: &IorSpec, rank: usize, tasks: usize) -> Result<u64> {
    let (path, offset, stride) = place(spec, rank, tasks);
    let check = crate::age::check_file(&path)?;
    Ok(match spec.layout {
        IorLayout::FilePerProcess => check.fragments,
        IorLayout::SharedFile => check
            .runs
            .iter()
            .filter(|f| {
                (0..spec.segments).any(|s| {
                    let start = offset + s * stride;
                    f.logical < start + spec.block && f.logical_end() > start
                })
            })
            .count() as u64,
    })
}

/// Every rank runs the whole benchmark; rank 0 gets the report.
pub fn run(spec: &IorSpec, cluster: &Cluster) -> Result<Option<IorReport>> {
    let began = fragkit_core::units::unix_now();
    let (rank, tasks) = (cluster.rank(), cluster.size());
    cluster.agree(validate(spec, tasks).and_then(|_| {
        if !spec.dir.is_dir() {
            bail!("{}: not a directory", spec.dir.display());
        }
        Ok(())
    }))?;
    let map = NodeMap {
        hosts: cluster.host_names()?,
    };
    let tpn = map.tasks_on_node0();
    let root = cluster.is_root();
    if root && spec.verbose >= 1 {
        fragkit_sys::stderr_line!(
            "bench ior: Nodemap: {} ({} node{}, {})",
            map.map_line(),
            map.nodes(),
            if map.nodes() == 1 { "" } else { "s" },
            if map.by_slot() {
                "by slot"
            } else {
                "round robin"
            }
        );
    }
    let (my_path, ..) = place(spec, rank, tasks);
    if spec.write {
        remove_stale(spec, cluster, &my_path)?;
    }
    let planned_per_rank = spec.block * spec.segments;
    let mut iterations = Vec::new();
    let mut fragments = Vec::new();
    let mut read_plans = Vec::new();
    let mut warned_own_node = false;
    for &xfer in &spec.xfers {
        for it in 0..spec.iterations {
            // What each rank's write phase moved (all of it unless a deadline stopped it).
            let mut written = vec![planned_per_rank; tasks];
            let mut ops = Vec::new();
            if spec.write {
                ops.push(Op::Write);
            }
            if spec.read {
                ops.push(Op::Read);
            }
            for op in ops {
                let (owner, limit, own_node_reads, planned) = match op {
                    Op::Write => (rank, None, 0, planned_per_rank * tasks as u64),
                    Op::Read => {
                        let from = read_partners(&map, spec.order, it);
                        let own = if map.nodes() > 1 {
                            (0..tasks)
                                .filter(|&r| map.hosts[from[r]] == map.hosts[r])
                                .count()
                        } else {
                            0
                        };
                        if own > 0 && root && !warned_own_node {
                            warned_own_node = true;
                            fragkit_sys::stderr_line!(
                                "bench ior: {own} of {tasks} ranks read data written on their own node (Nodemap {}): its page cache may serve them",
                                map.map_line()
                            );
                        }
                        if root && spec.verbose >= 1 && (it == 0 || spec.order_varies()) {
                            fragkit_sys::stderr_line!(
                                "bench ior: xsize {xfer} iteration {it}: rank r reads the data of rank {:?}[r]",
                                from
                            );
                        }
                        let p = from[rank];
                        let limit = (written[p] < planned_per_rank).then(|| written[p] / xfer);
                        read_plans.push(ReadPlan {
                            xfer,
                            iteration: it,
                            read_from: from.clone(),
                        });
                        // A reader reads what its writer wrote.
                        let planned = from.iter().map(|&w| written[w]).sum();
                        (p, limit, own, planned)
                    }
                };
                cluster.barrier();
                let t = cluster.agree(phase(spec, op, xfer, owner, tasks, limit))?;
                // Every rank's figures in one collective; each part the slowest rank's,
                // close the rest of the phase.
                let gathered = cluster.all_gather_f64s(&[
                    t.total,
                    t.open,
                    t.data,
                    t.bytes as f64,
                    t.transfers as f64,
                    t.start,
                ]);
                let ranks: Vec<&[f64]> = gathered.chunks(6).collect();
                let all: Vec<f64> = ranks.iter().map(|r| r[0]).collect();
                let slowest =
                    |part: fn(&[f64]) -> f64| ranks.iter().map(|r| part(r)).fold(0.0, f64::max);
                let open = slowest(|r| r[1]);
                let data = slowest(|r| r[2]).max(1e-9);
                let close = slowest(|r| (r[0] - r[1] - r[2]).max(0.0));
                // The phase runs from the first rank's open to the last rank's close, each
                // rank placed by when its open started after the common barrier (as IOR
                // takes the earliest open and the latest close): ranks that do not run side
                // by side (more ranks than cores) do not add up to more than they moved.
                let first = ranks.iter().map(|r| r[5]).fold(f64::INFINITY, f64::min);
                let last = ranks.iter().map(|r| r[5] + r[0]).fold(0.0, f64::max);
                let seconds = (last - first).max(1e-9);
                let rank_bytes: Vec<u64> = ranks.iter().map(|r| r[3] as u64).collect();
                let bytes: u64 = rank_bytes.iter().sum();
                let transfers: u64 = ranks.iter().map(|r| r[4] as u64).sum();
                if op == Op::Write {
                    written = rank_bytes.clone();
                }
                let row = IorIteration {
                    op: op.name().to_string(),
                    xfer,
                    iteration: it,
                    tasks,
                    block: spec.block,
                    bytes,
                    planned_bytes: planned,
                    rank_bytes_min: rank_bytes.iter().copied().min().unwrap_or(0),
                    rank_bytes_max: rank_bytes.iter().copied().max().unwrap_or(0),
                    seconds,
                    mib_per_s: bytes as f64 / (1u64 << 20) as f64 / seconds,
                    rank_seconds_min: all.iter().copied().fold(f64::INFINITY, f64::min),
                    rank_seconds_max: all.iter().copied().fold(0.0, f64::max),
                    open_seconds: open,
                    data_seconds: data,
                    close_seconds: close,
                    transfers,
                    iops: transfers as f64 / data,
                    latency_seconds: data / (transfers as f64 / tasks as f64).max(1.0),
                    own_node_reads,
                };
                if root && spec.verbose >= 1 {
                    fragkit_sys::stderr_line!(
                        "bench ior: {} xsize {xfer} iteration {it}: {bytes} bytes in {seconds:.6} s, {:.2} MiB/s",
                        row.op,
                        row.mib_per_s
                    );
                    if spec.verbose >= 2 {
                        for (r, v) in ranks.iter().enumerate() {
                            fragkit_sys::stderr_line!(
                                "bench ior:   rank {r} ({}): {} bytes, open {:.6} s, {} {:.6} s, total {:.6} s",
                                map.hosts[r],
                                v[3] as u64,
                                v[1],
                                op.name(),
                                v[2],
                                v[0]
                            );
                        }
                    }
                }
                iterations.push(row);
                if op == Op::Write {
                    let n = cluster.agree(fragments_of(spec, rank, tasks))?;
                    for (r, &f) in cluster.all_gather_u64(n).iter().enumerate() {
                        fragments.push(RankFragments {
                            rank: r,
                            xfer,
                            iteration: it,
                            path: place(spec, r, tasks).0,
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
    if !root {
        return Ok(None);
    }
    let summary = summarize(&iterations, spec, tasks, tpn);
    Ok(Some(IorReport {
        version: 2,
        dir: spec.dir.clone(),
        tasks,
        tasks_per_node: tpn,
        nodes: map.nodes(),
        by_slot: map.by_slot(),
        node_map: map.map_line(),
        layout: spec.layout,
        direct: spec.direct,
        fsync: spec.fsync,
        block: spec.block,
        segments: spec.segments,
        random_offsets: spec.random_offsets,
        deadline: spec.deadline,
        xfers: spec.xfers.clone(),
        order: spec.order,
        read_shift: match spec.order {
            ReadOrder::Constant { nodes } => constant_shift(&map, nodes),
            _ => 0,
        },
        read_plans,
        iterations,
        summary,
        fragments,
        began,
        finished: fragkit_core::units::unix_now(),
    }))
}

impl IorSpec {
    /// Whether whose data a rank reads changes between iterations (IOR -Z with a negative
    /// seed).
    fn order_varies(&self) -> bool {
        matches!(self.order, ReadOrder::Random { seed, .. } if seed < 0)
    }
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
                aggregate_bytes: mine[0].bytes,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(hosts: &str) -> NodeMap {
        NodeMap {
            hosts: hosts.chars().map(|c| c.to_string()).collect(),
        }
    }

    #[test]
    fn reads_never_come_from_the_writer() {
        let c1 = ReadOrder::Constant { nodes: 1 };
        // One node of 4: fragkit shifts by 1 (IOR by 0). Two nodes of 2 by slot: 2.
        assert_eq!(constant_shift(&nodes("aaaa"), 1), 1);
        assert_eq!(constant_shift(&nodes("aabb"), 1), 2);
        assert_eq!(constant_shift(&nodes("a"), 1), 0);
        assert_eq!(
            read_partners(&nodes("aaaa"), ReadOrder::Own, 0),
            [0, 1, 2, 3]
        );
        for map in ["aa", "aaaa", "aabbccdd", "aaabbb", "abab", "abcabc"] {
            let m = nodes(map);
            let from = read_partners(&m, c1, 0);
            assert!((0..m.tasks()).all(|r| from[r] != r), "{map}");
        }
    }

    #[test]
    fn the_mapping_is_detected_so_reads_come_from_another_node() {
        // By slot and round robin (mpirun --map-by node): every rank reads the other
        // node's data. Taking the local size as the shift (the old rule) read rank 2's
        // data on rank 0 under round robin: the same node.
        for map in ["aabb", "abab", "aaabbb", "abcabc", "aabbcc"] {
            let m = nodes(map);
            for order in [
                ReadOrder::Constant { nodes: 1 },
                ReadOrder::Random { nodes: 1, seed: 5 },
                ReadOrder::Random { nodes: 1, seed: -5 },
            ] {
                for it in 0..4 {
                    let from = read_partners(&m, order, it);
                    for (r, &p) in from.iter().enumerate() {
                        assert_ne!(m.hosts[p], m.hosts[r], "{map} {order:?} rank {r}");
                    }
                }
            }
        }
        let m = nodes("abab");
        assert!(!m.by_slot());
        assert_eq!(
            (m.tasks_on_node0(), m.nodes(), m.map_line().as_str()),
            (2, 2, "1010")
        );
        // -Q 2 on three nodes by slot: two nodes away.
        let m = nodes("aabbcc");
        assert_eq!(read_partners(&m, ReadOrder::Constant { nodes: 2 }, 0)[0], 4);
        // -Z: reproducible from the seed; a negative seed draws anew per iteration.
        let m = nodes("aaaaaaaabbbbbbbb");
        let z = |seed, it| read_partners(&m, ReadOrder::Random { nodes: 1, seed }, it);
        assert_eq!(z(7, 0), z(7, 1));
        assert_ne!(z(-7, 0), z(-7, 1));
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
            order: ReadOrder::Constant { nodes: 1 },
            random_offsets: false,
            segments: 1,
            deadline: None,
            keep: false,
            fsync: false,
            verbose: 0,
        }
    }

    #[test]
    fn block_must_be_whole_transfers() {
        let mut s = spec();
        validate(&s, 4).unwrap();
        s.xfers = vec![3 << 20];
        assert!(validate(&s, 4)
            .unwrap_err()
            .to_string()
            .starts_with("--xfer"));
        let mut s = spec();
        s.write = false;
        s.read = false;
        assert!(validate(&s, 4).is_err());
        let mut s = spec();
        s.segments = 0;
        assert!(validate(&s, 4)
            .unwrap_err()
            .to_string()
            .starts_with("--segments 0"));
        s.segments = u64::MAX / 2;
        assert!(validate(&s, 4).unwrap_err().to_string().contains("2^63"));
        let mut s = spec();
        s.random_offsets = true;
        s.xfers = vec![s.block];
        assert!(validate(&s, 4)
            .unwrap_err()
            .to_string()
            .starts_with("--random-offsets"));
        let mut s = spec();
        s.deadline = Some(0.0);
        assert!(validate(&s, 4)
            .unwrap_err()
            .to_string()
            .starts_with("--deadline"));
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
            planned_bytes: 4 * s.block,
            rank_bytes_min: s.block,
            rank_bytes_max: s.block,
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
            own_node_reads: 0,
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
