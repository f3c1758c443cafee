//! A job: one target, one access pattern, a number of iterations. The driver keeps up to
//! the queue depth of requests in flight, times each request, and snapshots the device's
//! counters around every iteration so the result says what the device itself saw.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use super::buf::AlignedBuf;
use super::device::{BlockDevice, DeviceDelta, QueueLimits};
use super::engine::{self, Completion, EngineKind, Op, Request};
use crate::stats::{mean, percentile_sorted, Summary};
use fragkit_sys::fsinfo::{FsInfo, TMPFS_MAGIC};

/// Most requests a job issues per iteration (`count`): each keeps its latency, 8 bytes.
pub const MAX_REQUESTS: u64 = 100_000_000;

/// Where requests go within the region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Pattern {
    /// Back to back from the region start.
    Sequential,
    /// A request, then `gap` bytes skipped (FragPicker's stride workloads).
    Stride { gap: u64 },
    /// Uniformly random offsets that are multiples of `align` (seeded, reproducible).
    /// With `align` equal to the request size every block is visited once per pass.
    Random { seed: u64, align: u64 },
}

impl Pattern {
    pub fn name(&self) -> &'static str {
        match self {
            Pattern::Sequential => "seq",
            Pattern::Stride { .. } => "stride",
            Pattern::Random { .. } => "random",
        }
    }
}

/// Everything a run needs; [`JobSpec::new`] gives fio-like defaults.
#[derive(Debug, Clone)]
pub struct JobSpec {
    pub path: PathBuf,
    pub op: Op,
    /// Bytes per request.
    pub block_size: u64,
    pub queue_depth: u32,
    pub pattern: Pattern,
    pub direct: bool,
    pub engine: EngineKind,
    /// Region start in the target.
    pub offset: u64,
    /// Region length [default: the target's size from `offset`; required to write a new file].
    pub size: Option<u64>,
    /// Requests per iteration [default: enough to cover the region once].
    pub count: Option<u64>,
    /// Measured iterations.
    pub iterations: u32,
    /// Unmeasured iterations first.
    pub warmup: u32,
    /// Sync and drop the page cache before every iteration (root).
    pub drop_caches: bool,
    /// After each cache drop, read the file's mapping back before the timed pass
    /// (`io::mapping`), counting its device I/O apart: the pass then issues only data
    /// requests. Off: the pass also pays the mapping's reads, as a cold start does.
    pub read_mapping_first: bool,
    /// A write pass ends with fdatasync (timed in it for buffered writes), so that its bytes
    /// are on the device and counted. Off: it ends at the last write (IOR without -e).
    pub sync_writes: bool,
    /// The pattern over the region, repeated: segment s is the region shifted by
    /// s × `stride` (IOR's `-s`: a rank's block in each segment of the file). A random
    /// pattern visits every segment in the same order, as IOR's `-z` does.
    pub segments: Segments,
    /// Stop submitting once this long has passed since the first submission (IOR's `-D`
    /// stonewalling); the iteration reports the bytes that did move.
    pub deadline: Option<std::time::Duration>,
    /// At most this many requests per iteration over all segments (a reader of a
    /// stonewalled writer's file reads what was written).
    pub limit: Option<u64>,
    /// A read of a regular file stops at its end: a `size` reaching past it is cut there
    /// (what lies past would be zero-byte reads, neither data nor device I/O). Off: such a
    /// read is a short read, an error (IOR's semantics).
    pub clip_at_eof: bool,
}

/// How many times the region's pattern repeats, and how far apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Segments {
    pub count: u64,
    pub stride: u64,
}

impl Segments {
    /// The region once.
    pub const ONE: Segments = Segments {
        count: 1,
        stride: 0,
    };
}

impl JobSpec {
    pub fn new(path: impl Into<PathBuf>, op: Op) -> JobSpec {
        JobSpec {
            path: path.into(),
            op,
            block_size: 128 << 10,
            queue_depth: 1,
            pattern: Pattern::Sequential,
            direct: true,
            engine: EngineKind::Uring,
            offset: 0,
            size: None,
            count: None,
            iterations: 1,
            warmup: 0,
            drop_caches: true,
            read_mapping_first: true,
            sync_writes: true,
            segments: Segments::ONE,
            deadline: None,
            limit: None,
            clip_at_eof: false,
        }
    }
}

/// What the job ran against.
#[derive(Debug, Clone, Serialize)]
pub struct TargetInfo {
    /// "file" or "block_device".
    pub kind: &'static str,
    pub size: u64,
    pub fs_type: Option<String>,
    pub device: Option<BlockDevice>,
    pub limits: Option<QueueLimits>,
    /// min(request size, device caps): the largest request the device can see.
    pub effective_request_size: Option<u64>,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Latency {
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p99_9_us: f64,
    pub max_us: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct IterationResult {
    pub bytes: u64,
    pub requests: u64,
    pub seconds: f64,
    /// Decimal megabytes (10^6 bytes) per second.
    pub mb_per_s: f64,
    pub iops: f64,
    pub latency: Latency,
    /// The device's counters over the iteration (None when no block device is under it).
    pub device: Option<DeviceDelta>,
    /// The device's counters while the file's mapping was read back after the cache drop,
    /// before the timed pass (None when it was not: no cache drop, a block device, or
    /// `read_mapping_first` off): the metadata reads a cold pass pays on top of `device`.
    pub mapping: Option<DeviceDelta>,
}

/// Device I/O during a read job that the job cannot have caused: another process shares
/// the device, and the device counters include its requests.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct ForeignIo {
    /// Iterations in which the device did more than the job explains.
    pub iterations: usize,
    /// Bytes read beyond what the job can explain, summed over those iterations.
    pub read_bytes: u64,
    /// Bytes written (a read job writes nothing), summed over those iterations.
    pub write_bytes: u64,
}

/// Metadata a reader may read itself on top of its data: inode, directory, superblock and
/// tree roots (a fixed MiB), and per request at most one uncached mapping block (an extent
/// or bmbt leaf, or a btrfs extent/checksum leaf: 16 KiB, btrfs's default node size and the
/// largest of the three).
const METADATA_SLACK_FIXED: u64 = 1 << 20;
const METADATA_SLACK_PER_REQUEST: u64 = 16 << 10;
/// Writes a read job may itself cause: a journal commit of its atime update (a descriptor,
/// the inode's block and a commit block: a few KiB on ext4, a log record on xfs, a 16 KiB
/// node path on btrfs); 1 MiB is far above any of them and far below another writer.
const OWN_WRITE_SLACK: u64 = 1 << 20;

/// Compare each iteration's device counters with what a read job can account for:
/// O_DIRECT reads reach the device as issued (holes read nothing), buffered reads read each
/// allocated page at most once per iteration (readahead included). `allocated` is the
/// target's allocated bytes (st_blocks × 512, or the device size).
pub fn foreign_io(
    iterations: &[IterationResult],
    direct: bool,
    allocated: u64,
) -> Option<ForeignIo> {
    let mut f = ForeignIo::default();
    for r in iterations {
        let Some(d) = r.device else { continue };
        let own_reads = if direct { r.bytes } else { allocated };
        let slack = METADATA_SLACK_FIXED + r.requests * METADATA_SLACK_PER_REQUEST;
        let extra_reads = d.read_bytes.saturating_sub(own_reads + slack);
        let extra_writes = if d.write_bytes > OWN_WRITE_SLACK {
            d.write_bytes
        } else {
            0
        };
        if extra_reads > 0 || extra_writes > 0 {
            f.iterations += 1;
            f.read_bytes += d.read_bytes.saturating_sub(own_reads);
            f.write_bytes += extra_writes;
        }
    }
    (f.iterations > 0).then_some(f)
}

#[derive(Debug, Clone, Serialize)]
pub struct JobResult {
    #[serde(flatten, serialize_with = "crate::units::path_fields")]
    pub path: PathBuf,
    pub op: Op,
    pub engine: EngineKind,
    pub pattern: Pattern,
    pub block_size: u64,
    pub queue_depth: u32,
    /// What the engine really kept in flight (psync: 1).
    pub effective_queue_depth: u32,
    pub direct: bool,
    pub region_offset: u64,
    pub region_size: u64,
    pub target: TargetInfo,
    pub iterations: Vec<IterationResult>,
    pub mb_per_s: Summary,
    pub iops: Summary,
    /// Read jobs: device I/O the job did not issue (other processes on the same device);
    /// None when the counters match the job or the job is a write.
    pub foreign_io: Option<ForeignIo>,
    /// Seconds in the open call (IOR's open time; finding the device and its limits, and
    /// setting up buffers, are not in it, as IOR prepares before it opens).
    pub open_seconds: f64,
    /// Seconds in fdatasync at the end of the write passes (`sync_writes`), over all
    /// iterations (O_DIRECT passes do not count it in their own time).
    pub sync_seconds: f64,
    /// Seconds in the close call.
    pub close_seconds: f64,
    /// When the open call started and when the close returned (in this process; to place
    /// the job among others').
    #[serde(skip)]
    pub opened_at: Instant,
    #[serde(skip)]
    pub closed_at: Instant,
}

impl JobResult {
    /// Mean over iterations of one device counter (`|d| d.reads`, ...); 0 when the device
    /// gave no counters.
    pub fn device_mean(&self, counter: impl Fn(&DeviceDelta) -> u64) -> f64 {
        let v: Vec<f64> = self
            .iterations
            .iter()
            .filter_map(|i| i.device.as_ref().map(|d| counter(d) as f64))
            .collect();
        mean(&v)
    }
}

/// An opened, validated target.
struct Target {
    file: File,
    /// When the open call started, and its own time.
    opened_at: Instant,
    open_seconds: f64,
    info: TargetInfo,
    /// Offsets and lengths must be multiples of this with O_DIRECT.
    block: u64,
}

fn open_target(spec: &JobSpec) -> Result<Target> {
    let shown = spec.path.display();
    if spec.queue_depth == 0 {
        bail!("queue depth 0: expected at least 1 request in flight");
    }
    if spec.block_size == 0 || spec.block_size > u32::MAX as u64 / 2 {
        bail!("request size {}: expected 1 byte to 2 GiB", spec.block_size);
    }
    let existing = std::fs::metadata(&spec.path).ok();
    let is_blockdev = existing
        .as_ref()
        .is_some_and(|m| m.file_type().is_block_device());
    if let Some(m) = &existing {
        if !m.is_file() && !is_blockdev {
            bail!("{shown}: not a regular file or block device");
        }
    }
    if spec.op == Op::Write && is_blockdev {
        bail!("{shown}: a block device; fragkit bench writes only to files (writing would destroy the device's contents)");
    }
    if spec.op == Op::Read && existing.is_none() {
        bail!("{shown}: no such file");
    }
    if spec.op == Op::Write && existing.is_none() && spec.size.is_none() {
        bail!("{shown}: does not exist; give --size to create and write it");
    }
    // The device and its limits are found before the open (by the file, or by its directory
    // for a file the job creates), so the open-to-close window holds no sysfs reads.
    let device = match (&existing, spec.path.parent()) {
        (None, Some(dir)) if !dir.as_os_str().is_empty() => BlockDevice::for_path(dir),
        _ => BlockDevice::for_path(&spec.path),
    };
    let limits = device.as_ref().ok().map(|d| d.limits());
    let mut opts = OpenOptions::new();
    match spec.op {
        Op::Read => opts.read(true),
        Op::Write => opts.write(true).create(true),
    };
    let direct = if spec.direct { libc::O_DIRECT } else { 0 };
    // Reads do not update the access time where the kernel lets us say so (owner or
    // root): an atime update is a metadata write, which after a cache drop can read the
    // inode's block back inside the pass (1-3 reads more than predicted on ext4 and xfs
    // in the first pass after a write; none with O_NOATIME).
    let opening = Instant::now();
    let opened = if spec.op == Op::Read && !is_blockdev {
        fragkit_sys::openat::open_without_atime(&opts, direct, &spec.path)
    } else {
        opts.custom_flags(direct).open(&spec.path)
    };
    let open_seconds = opening.elapsed().as_secs_f64();
    let mut file = match opened {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) && spec.direct => {
            bail!("{shown}: the file system refuses O_DIRECT; drop --direct")
        }
        Err(e) => return Err(anyhow!("{shown}: {e}")),
    };
    let size = file
        .seek(SeekFrom::End(0))
        .with_context(|| format!("{shown}: cannot find its size"))?;
    let fs = if is_blockdev {
        None
    } else {
        FsInfo::of_fd(file.as_fd()).ok()
    };
    if spec.direct && fs.is_some_and(|f| f.magic == TMPFS_MAGIC) {
        bail!("{shown}: on tmpfs, which has no block device; --direct would time memory copies, not a device (use a file on a disk file system, or drop --direct)");
    }
    if spec.direct {
        if let Err(e) = &device {
            bail!("--direct: {e:#}");
        }
    }
    let device = device.ok();
    let block = limits.map_or(512, |l| l.logical_block_size);
    if spec.direct {
        let dev = device.as_ref().map_or(String::new(), |d| d.name.clone());
        let check = |what: &str, v: u64| -> Result<()> {
            if !v.is_multiple_of(block) {
                bail!("{what} {v}: not a multiple of the logical block size {block} of {dev} (O_DIRECT moves whole blocks)");
            }
            Ok(())
        };
        check("request size", spec.block_size)?;
        check("offset", spec.offset)?;
        match spec.pattern {
            Pattern::Stride { gap } => check("gap", gap)?,
            Pattern::Random { align, .. } => check("alignment", align)?,
            Pattern::Sequential => {}
        }
    }
    if let Pattern::Random { align: 0, .. } = spec.pattern {
        bail!("alignment 0: expected a positive number of bytes");
    }
    let info = TargetInfo {
        kind: if is_blockdev { "block_device" } else { "file" },
        size,
        fs_type: fs.map(|f| f.type_name()),
        device,
        effective_request_size: limits.map(|l| l.effective_request_size(spec.block_size)),
        limits,
    };
    Ok(Target {
        file,
        opened_at: opening,
        open_seconds,
        info,
        block,
    })
}

/// splitmix64: small, seedable, good enough to scatter offsets.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

/// Above this many slots a random pass samples with replacement instead of permuting.
const MAX_PERMUTATION: u64 = 1 << 24;

/// The (offset, length) sequence of one iteration.
struct Offsets {
    pattern: Pattern,
    start: u64,
    end: u64,
    bs: u64,
    round_to: u64,
    remaining: u64,
    next_seq: u64,
    rng: Rng,
    slots: u64,
    perm: Vec<u32>,
    perm_pos: usize,
    /// Requests per segment, left in the current one, and the current segment's shift.
    per_segment: u64,
    left_in_segment: u64,
    shift: u64,
    stride: u64,
}

impl Offsets {
    fn new(spec: &JobSpec, region: u64, round_to: u64, iteration: u32) -> Offsets {
        let bs = spec.block_size;
        let step = match spec.pattern {
            Pattern::Stride { gap } => bs + gap,
            _ => bs,
        };
        let (seed, align) = match spec.pattern {
            Pattern::Random { seed, align } => (seed, align),
            _ => (0, bs),
        };
        let slots = if region >= bs {
            (region - bs) / align + 1
        } else {
            1
        };
        let default_count = match spec.pattern {
            Pattern::Random { .. } => region.div_ceil(bs).max(1),
            _ => region.div_ceil(step).max(1),
        };
        let per_segment = spec.count.unwrap_or(default_count);
        Offsets {
            pattern: spec.pattern,
            start: spec.offset,
            end: spec.offset + region,
            bs,
            round_to,
            remaining: per_segment
                .saturating_mul(spec.segments.count.max(1))
                .min(spec.limit.unwrap_or(u64::MAX)),
            next_seq: spec.offset,
            // Each iteration its own sequence, reproducible from the seed.
            rng: Rng(seed ^ (iteration as u64).wrapping_mul(0xA24B_AED4_963E_E407)),
            slots,
            perm: Vec::new(),
            perm_pos: 0,
            per_segment,
            left_in_segment: per_segment,
            shift: 0,
            stride: spec.segments.stride,
        }
    }

    fn next(&mut self) -> Option<(u64, usize)> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        if self.left_in_segment == 0 {
            // The next segment: the same pattern again, shifted (a random pass replays its
            // permutation).
            self.left_in_segment = self.per_segment;
            self.shift += self.stride;
            self.next_seq = self.start;
            self.perm_pos = 0;
        }
        self.left_in_segment -= 1;
        let offset = match self.pattern {
            Pattern::Sequential | Pattern::Stride { .. } => {
                if self.next_seq >= self.end {
                    self.next_seq = self.start; // wrap, as fio loops over its region
                }
                let o = self.next_seq;
                let gap = match self.pattern {
                    Pattern::Stride { gap } => gap,
                    _ => 0,
                };
                self.next_seq += self.bs + gap;
                o
            }
            Pattern::Random { align, .. } => {
                let slot = if align == self.bs && self.slots <= MAX_PERMUTATION {
                    if self.perm_pos == self.perm.len() {
                        self.refill_permutation();
                    }
                    self.perm_pos += 1;
                    self.perm[self.perm_pos - 1] as u64
                } else {
                    self.rng.below(self.slots)
                };
                self.start + slot * align
            }
        };
        let len = self.bs.min(self.end.saturating_sub(offset)).max(1);
        Some((
            offset + self.shift,
            len.div_ceil(self.round_to) as usize * self.round_to as usize,
        ))
    }

    fn refill_permutation(&mut self) {
        self.perm = (0..self.slots as u32).collect();
        for i in (1..self.perm.len()).rev() {
            let j = self.rng.below(i as u64 + 1) as usize;
            self.perm.swap(i, j);
        }
        self.perm_pos = 0;
    }
}

/// The (offset, length) requests iteration `iteration` (warm-up ones counted) of `spec`
/// issues over a region of `region` bytes, in submission order: what `run_job` submits
/// (lengths rounded up to `round_to`, the logical block with O_DIRECT, else 1).
pub fn planned_requests(
    spec: &JobSpec,
    region: u64,
    round_to: u64,
    iteration: u32,
) -> Vec<(u64, u64)> {
    let mut o = Offsets::new(spec, region, round_to.max(1), iteration);
    std::iter::from_fn(|| o.next())
        .map(|(off, len)| (off, len as u64))
        .collect()
}

/// Sync and drop clean page cache, dentries and inodes (needs root).
pub fn drop_caches() -> Result<()> {
    fragkit_sys::vm::drop_caches()
}

/// Run a job: validate, open, warm up, then the measured iterations.
pub fn run_job(spec: &JobSpec) -> Result<JobResult> {
    run_job_observed(spec, &mut |_, _| {})
}

/// As [`run_job`], calling `observe(index, result)` after each measured iteration.
pub fn run_job_observed(
    spec: &JobSpec,
    observe: &mut dyn FnMut(u32, &IterationResult),
) -> Result<JobResult> {
    if spec.iterations == 0 {
        bail!("iterations 0: expected at least 1");
    }
    // With the region known, the transfer buffers are made (and a write's filled) before
    // the target is opened, as IOR prepares its buffers before it opens: the open-to-close
    // window then holds the I/O, not memory set-up.
    let slot_len = (spec.block_size as usize).next_multiple_of(super::buf::BUFFER_ALIGN);
    let buffers = |depth: u32| match spec.op {
        Op::Read => AlignedBuf::new(slot_len * depth as usize),
        Op::Write => AlignedBuf::patterned(slot_len * depth as usize, 0x5a),
    };
    let most_depth = |region: u64| {
        let engine_depth = match spec.engine {
            EngineKind::Psync => 1,
            _ => spec.queue_depth,
        };
        // Never more buffers than requests: 8 MiB in one request at QD32 needs one buffer.
        let per_iteration = Offsets::new(spec, region, 1, 0).remaining;
        engine_depth.min(per_iteration.clamp(1, u32::MAX as u64) as u32)
    };
    let early = match spec.size {
        Some(size) if spec.block_size <= u32::MAX as u64 / 2 => {
            let depth = most_depth(size);
            Some((depth, buffers(depth)))
        }
        _ => None,
    };
    let target = open_target(spec)?;
    let open_seconds = target.open_seconds;
    let opened_at = target.opened_at;
    if spec.count.is_some_and(|c| c == 0 || c > MAX_REQUESTS) {
        bail!(
            "count {}: expected 1 to {MAX_REQUESTS} requests",
            spec.count.unwrap_or(0)
        );
    }
    let region = match spec.size {
        Some(s) if spec.clip_at_eof && spec.op == Op::Read && target.info.kind == "file" => {
            s.min(target.info.size.saturating_sub(spec.offset))
        }
        Some(s) => s,
        None => target.info.size.saturating_sub(spec.offset),
    };
    if region == 0 && spec.op == Op::Read && target.info.kind == "file" {
        bail!(
            "{}: nothing to read from offset {} (the file has {} bytes)",
            spec.path.display(),
            spec.offset,
            target.info.size
        );
    }
    if region == 0 {
        bail!(
            "{}: nothing to {} (empty from offset {}); give --size",
            spec.path.display(),
            spec.op.name(),
            spec.offset
        );
    }
    let round_to = if spec.direct { target.block } else { 1 };
    let fd = target.file.as_raw_fd();
    let mut eng = engine::open(spec.engine, fd, spec.queue_depth)
        .with_context(|| format!("{}: {} engine", spec.path.display(), spec.engine.name()))?;
    let depth = eng
        .effective_depth(spec.queue_depth)
        .min(most_depth(region));
    let mut bufs = match early {
        Some((made, bufs)) if made >= depth => bufs,
        _ => buffers(depth),
    };
    // Registered once for every iteration. No request is in flight once `drive` returns,
    // and the kernel holds its own references to the pinned pages until the ring closes.
    eng.register_buffers(bufs.as_mut_ptr(), slot_len * depth as usize);
    let mut iterations = Vec::new();
    let mut sync_seconds = 0.0;
    for i in 0..spec.warmup + spec.iterations {
        let mut mapping = None;
        if spec.drop_caches {
            drop_caches()?;
            if spec.read_mapping_first && target.info.kind == "file" {
                let before = match &target.info.device {
                    Some(d) => Some(d.settled_stats()?),
                    None => None,
                };
                super::mapping::read_mapping(&target.file, target.info.fs_type.as_deref())
                    .with_context(|| format!("{}: reading its mapping", spec.path.display()))?;
                mapping = match (&target.info.device, before) {
                    (Some(d), Some(b)) => Some(b.delta(&d.settled_stats()?)),
                    _ => None,
                };
            }
        }
        let mut offsets = Offsets::new(spec, region, round_to, i);
        let before = match &target.info.device {
            Some(d) => Some(d.settled_stats()?),
            None => None,
        };
        let (bytes, requests, seconds, mut lat) = drive(
            &mut *eng,
            &mut bufs,
            slot_len,
            depth,
            spec.op,
            &mut offsets,
            &spec.path,
            spec.deadline,
        )?;
        let mut seconds = seconds;
        if spec.op == Op::Write && spec.sync_writes {
            // Written data must reach the device to be counted; buffered writes pay for it.
            let t = Instant::now();
            target
                .file
                .sync_data()
                .with_context(|| format!("{}: fdatasync", spec.path.display()))?;
            let synced = t.elapsed().as_secs_f64();
            if i >= spec.warmup {
                sync_seconds += synced;
            }
            if !spec.direct {
                seconds += synced;
            }
        }
        let device = match (&target.info.device, before) {
            (Some(d), Some(b)) => Some(b.delta(&d.settled_stats()?)),
            _ => None,
        };
        lat.sort_unstable();
        let us = |ns: u64| ns as f64 / 1000.0;
        let latency = Latency {
            mean_us: if lat.is_empty() {
                0.0
            } else {
                us(lat.iter().sum::<u64>() / lat.len() as u64)
            },
            p50_us: us(percentile_sorted(&lat, 50.0)),
            p99_us: us(percentile_sorted(&lat, 99.0)),
            p99_9_us: us(percentile_sorted(&lat, 99.9)),
            max_us: us(lat.last().copied().unwrap_or(0)),
        };
        let seconds = seconds.max(1e-9);
        let r = IterationResult {
            bytes,
            requests,
            seconds,
            mb_per_s: bytes as f64 / 1e6 / seconds,
            iops: requests as f64 / seconds,
            latency,
            device,
            mapping,
        };
        if i >= spec.warmup {
            observe(i - spec.warmup, &r);
            iterations.push(r);
        }
    }
    let allocated = if target.info.kind == "block_device" {
        target.info.size
    } else {
        target
            .file
            .metadata()
            .map_or(u64::MAX, |m| m.blocks() * 512)
    };
    let foreign_io = match spec.op {
        Op::Read => foreign_io(&iterations, spec.direct, allocated),
        Op::Write => None,
    };
    let mut target_info = target.info;
    if spec.op == Op::Write {
        // A write job may have created or extended the file: report what it is now.
        if let Ok(m) = target.file.metadata() {
            target_info.size = m.len();
        }
    }
    let mbs: Vec<f64> = iterations.iter().map(|r| r.mb_per_s).collect();
    let iops: Vec<f64> = iterations.iter().map(|r| r.iops).collect();
    drop(eng);
    let closing = Instant::now();
    drop(target.file);
    let closed_at = Instant::now();
    let close_seconds = closed_at.duration_since(closing).as_secs_f64();
    Ok(JobResult {
        path: spec.path.clone(),
        op: spec.op,
        engine: spec.engine,
        pattern: spec.pattern,
        block_size: spec.block_size,
        queue_depth: spec.queue_depth,
        effective_queue_depth: depth,
        direct: spec.direct,
        region_offset: spec.offset,
        region_size: region,
        target: target_info,
        iterations,
        mb_per_s: Summary::of(&mbs),
        iops: Summary::of(&iops),
        foreign_io,
        open_seconds,
        sync_seconds,
        close_seconds,
        opened_at,
        closed_at,
    })
}

/// Keep `depth` requests in flight until the offsets run out (or, with a deadline, until
/// it has passed: what is in flight completes, nothing more is submitted). Returns bytes,
/// requests, seconds from first submission to last completion, and per-request latencies
/// in ns.
#[allow(clippy::too_many_arguments)]
fn drive(
    eng: &mut dyn engine::Engine,
    bufs: &mut AlignedBuf,
    slot_len: usize,
    depth: u32,
    op: Op,
    offsets: &mut Offsets,
    path: &Path,
    deadline: Option<std::time::Duration>,
) -> Result<(u64, u64, f64, Vec<u64>)> {
    let base = bufs.as_mut_ptr();
    let mut free: Vec<usize> = (0..depth as usize).rev().collect();
    let mut started = vec![Instant::now(); depth as usize];
    let mut placed = vec![(0u64, 0usize); depth as usize];
    let mut done: Vec<Completion> = Vec::with_capacity(depth as usize);
    let mut lat = Vec::new();
    let (mut bytes, mut requests, mut inflight) = (0u64, 0u64, 0usize);
    let t0 = Instant::now();
    let mut exhausted = false;
    loop {
        while !exhausted && !free.is_empty() {
            if deadline.is_some_and(|d| t0.elapsed() > d) {
                exhausted = true;
                break;
            }
            let Some((offset, len)) = offsets.next() else {
                exhausted = true;
                break;
            };
            let slot = free.pop().expect("free slot");
            started[slot] = Instant::now();
            placed[slot] = (offset, len);
            eng.queue(Request {
                slot,
                op,
                offset,
                // SAFETY: slot < depth, so the slot lies inside the buffer.
                buf: unsafe { base.add(slot * slot_len) },
                len,
            })
            .with_context(|| format!("{}: submitting at offset {offset}", path.display()))?;
            inflight += 1;
        }
        if inflight == 0 {
            break;
        }
        eng.reap(1, &mut done)
            .with_context(|| format!("{}: waiting for completions", path.display()))?;
        let now = Instant::now();
        for c in done.drain(..) {
            let (offset, len) = placed[c.slot];
            let n = c.result.map_err(|e| {
                anyhow!(
                    "{}: {} of {len} bytes at offset {offset}: {e}",
                    path.display(),
                    op.name()
                )
            })?;
            // A short transfer is not the job that was asked for (IOR stops on it too: "read()
            // returned EOF prematurely"); counting it would report bandwidth for bytes that
            // never moved.
            if n < len {
                bail!(
                    "{}: {} returned {n} of {len} bytes at offset {offset} (the file ends at {} bytes)",
                    path.display(),
                    op.name(),
                    std::fs::metadata(path).map_or(0, |m| m.len())
                );
            }
            lat.push(now.duration_since(started[c.slot]).as_nanos() as u64);
            bytes += n as u64;
            requests += 1;
            inflight -= 1;
            free.push(c.slot);
        }
    }
    Ok((bytes, requests, t0.elapsed().as_secs_f64(), lat))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(pattern: Pattern, region: u64, bs: u64, count: Option<u64>) -> Vec<(u64, usize)> {
        let mut spec = JobSpec::new("/nonexistent", Op::Read);
        spec.block_size = bs;
        spec.pattern = pattern;
        spec.count = count;
        let mut o = Offsets::new(&spec, region, 512, 0);
        std::iter::from_fn(|| o.next()).collect()
    }

    #[test]
    fn sequential_covers_region_once() {
        let v = offsets(Pattern::Sequential, 1000 << 10, 128 << 10, None);
        assert_eq!(v.len(), 8);
        assert_eq!(v[7], (896 << 10, 104 << 10));
        assert!(v.windows(2).all(|w| w[1].0 == w[0].0 + (128 << 10)));
    }

    fn segmented(pattern: Pattern, region: u64, bs: u64, segments: Segments) -> Vec<u64> {
        let mut spec = JobSpec::new("/nonexistent", Op::Read);
        spec.block_size = bs;
        spec.pattern = pattern;
        spec.offset = 1 << 20;
        spec.segments = segments;
        let mut o = Offsets::new(&spec, region, 512, 0);
        std::iter::from_fn(|| o.next())
            .map(|(off, _)| off)
            .collect()
    }

    #[test]
    fn segments_repeat_the_pattern_shifted() {
        let seg = Segments {
            count: 3,
            stride: 4 << 20,
        };
        let v = segmented(Pattern::Sequential, 2 << 20, 1 << 20, seg);
        let mib = 1u64 << 20;
        assert_eq!(v, [1, 2, 5, 6, 9, 10].map(|m| m * mib));
        // A random pass visits each segment's blocks in the same order (IOR's -z).
        let p = Pattern::Random {
            seed: 3,
            align: 4096,
        };
        let v = segmented(p, 64 << 10, 4096, seg);
        assert_eq!(v.len(), 48);
        for s in 1..3u64 {
            let shifted: Vec<u64> = v[..16].iter().map(|o| o + s * (4 << 20)).collect();
            assert_eq!(&v[16 * s as usize..16 * (s as usize + 1)], &shifted[..]);
        }
        assert_eq!(
            segmented(Pattern::Sequential, 2 << 20, 1 << 20, Segments::ONE),
            [mib, 2 * mib]
        );
    }

    #[test]
    fn stride_skips_gap() {
        let v = offsets(Pattern::Stride { gap: 4096 }, 1 << 20, 4096, None);
        assert_eq!(v.len(), 128);
        assert_eq!(v[1].0, 8192);
    }

    #[test]
    fn random_is_a_seeded_permutation() {
        let p = Pattern::Random {
            seed: 7,
            align: 4096,
        };
        let a = offsets(p, 1 << 20, 4096, None);
        let b = offsets(p, 1 << 20, 4096, None);
        assert_eq!(a, b);
        let mut sorted: Vec<u64> = a.iter().map(|x| x.0).collect();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..256).map(|i| i * 4096).collect::<Vec<_>>());
        assert_ne!(a.iter().map(|x| x.0).collect::<Vec<_>>(), sorted);
    }

    #[test]
    fn random_respects_alignment() {
        let p = Pattern::Random {
            seed: 1,
            align: 64 << 10,
        };
        let v = offsets(p, 16 << 20, 4096, Some(1000));
        assert_eq!(v.len(), 1000);
        assert!(v.iter().all(|(o, l)| o % (64 << 10) == 0 && *l == 4096));
        assert!(v.iter().all(|(o, _)| *o + 4096 <= 16 << 20));
    }
}
