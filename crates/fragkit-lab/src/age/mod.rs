//! Reproduce fragmentation on purpose: exact layouts, the seeds' fragmenting workloads,
//! Populate-and-Fragment aging and profile aging. Every generator checks what it built with
//! fragkit's own extent engine and reports achieved next to requested.
//!
//! Library entry points (the CLI in `cmd/age.rs` is a thin layer over them):
//! [`layout::build`], [`fragpicker::synthetic`], [`hypothetical::build`], [`paf::run`],
//! [`profile::run`].

pub mod filebench;
pub mod fileserver;
pub mod fragpicker;
pub mod hypothetical;
pub mod layout;
pub mod paf;
pub mod profile;
pub mod sqlite;

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::rngs::ChaCha8Rng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use fragkit_core::io::buf::AlignedBuf;
use fragkit_core::layout::model::Fragment;
use fragkit_core::layout::walk;
use fragkit_core::metrics::{Distribution, FileMetrics};
use fragkit_sys::fsinfo::FsInfo;

/// The seed used when none is given: runs are reproducible by default.
pub const DEFAULT_SEED: u64 = 67005;

/// The seeded generator every aging workload draws from: ChaCha8, a fixed algorithm, so
/// the same seed gives the same file set on every machine and every rand release.
pub(crate) fn seeded_rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// A page-aligned buffer (usable with O_DIRECT) of at least 4 KiB filled with seeded
/// pseudo-random bytes: incompressible, so no layer can shrink what is written.
pub(crate) fn seeded_buf(len: usize, seed: u64) -> AlignedBuf {
    let mut b = AlignedBuf::new(len.max(4096));
    seeded_rng(seed).fill_bytes(b.as_mut_slice());
    b
}

/// Write all of `buf` at `offset`, retrying short writes.
pub(crate) fn write_all_at(f: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(f, buf, offset)
}

/// Capacity and use of a mounted file system, from statfs, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FsUsage {
    /// Data capacity (f_blocks × block size; metadata overhead excluded where the fs does).
    pub capacity: u64,
    /// capacity − free (f_bfree).
    pub used: u64,
    pub free: u64,
    pub block_size: u32,
}

impl FsUsage {
    pub fn of(path: &Path) -> Result<FsUsage> {
        let f = File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
        let info = FsInfo::of_fd(f.as_fd())
            .with_context(|| format!("{}: statfs failed", path.display()))?;
        // statfs counts in f_frsize units; block_size is FIGETBSZ, equal on ext4/xfs/btrfs.
        let bs = info.fragment_size;
        let used = info.blocks.saturating_sub(info.blocks_free) * bs;
        if info.magic == libc::BTRFS_SUPER_MAGIC as u64 {
            // btrfs's f_blocks is the whole device, metadata (DUP: twice) included, and its
            // f_bfree counts unallocated space metadata will also take; f_bavail is its own
            // estimate of what data can still use. Planning on f_blocks overfills a small
            // btrfs (512 MiB: 85% is 435 MiB, only 431 MiB can hold data) with ENOSPC.
            let free = info.blocks_available * bs;
            return Ok(FsUsage {
                capacity: used + free,
                used,
                free,
                block_size: info.block_size,
            });
        }
        Ok(FsUsage {
            capacity: info.blocks * bs,
            used,
            free: info.blocks_free * bs,
            block_size: info.block_size,
        })
    }

    /// Used share of capacity in percent.
    pub fn used_pct(&self) -> f64 {
        if self.capacity == 0 {
            0.0
        } else {
            100.0 * self.used as f64 / self.capacity as f64
        }
    }
}

/// The mount point a path lives under: the highest ancestor on the same device.
pub(crate) fn mount_point_of(path: &Path) -> Result<PathBuf> {
    let abs = path
        .canonicalize()
        .with_context(|| format!("{}: no such file or directory", path.display()))?;
    let dev = std::fs::metadata(&abs)?.dev();
    let mut cur = abs.as_path();
    while let Some(parent) = cur.parent() {
        match std::fs::metadata(parent) {
            Ok(m) if m.dev() == dev => cur = parent,
            _ => break,
        }
    }
    Ok(cur.to_path_buf())
}

/// Generators that fill or churn a whole file system only run on fragkit scratch file
/// systems unless the caller forces it.
pub(crate) fn require_scratch(path: &Path, force: bool, what: &str) -> Result<()> {
    if force {
        return Ok(());
    }
    let mp = mount_point_of(path)?;
    fragkit_core::scratch::Scratch::open_existing(&mp).map_err(|_| {
        anyhow!(
            "{what} changes the whole file system at {}, which is not a fragkit scratch file system; \
             use `fragkit scratch create` or pass --force",
            mp.display()
        )
    })?;
    Ok(())
}

/// Fragment-by-fragment view of one file as fragkit's scan sees it, plus its metrics.
#[derive(Debug, Clone, Serialize)]
pub struct FileCheck {
    #[serde(flatten, serialize_with = "fragkit_core::units::path_fields")]
    pub path: PathBuf,
    pub fs: String,
    pub block_size: u32,
    pub size: u64,
    pub fragments: u64,
    pub extents: u64,
    pub frag_sizes: Distribution,
    pub frag_distances: Distribution,
    pub layout_score: f64,
    /// Fragments in logical order (not serialized: callers summarise them).
    #[serde(skip)]
    pub runs: Vec<Fragment>,
}

/// Map `path` with FIEMAP (flushing delayed allocation) and compute fragkit's metrics.
pub(crate) fn check_file(path: &Path) -> Result<FileCheck> {
    let scanned = walk::map_path(path, true).map_err(|e| anyhow!(e))?;
    let metrics = FileMetrics::compute(&scanned.layout, &[]);
    Ok(FileCheck {
        path: path.to_path_buf(),
        fs: scanned.fs.type_name(),
        block_size: scanned.layout.block_size,
        size: scanned.layout.size,
        fragments: metrics.fragments,
        extents: metrics.extents,
        frag_sizes: metrics.frag_sizes.clone(),
        frag_distances: metrics.frag_distances.clone(),
        layout_score: metrics.layout_score(),
        runs: scanned.layout.fragments(),
    })
}

/// A progress bar on stderr when it is a terminal; hidden otherwise.
pub(crate) fn progress_bar(len: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        pb.set_draw_target(ProgressDrawTarget::hidden());
    }
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}

/// Require `n` to be a positive multiple of the file system's block size.
pub(crate) fn require_block_multiple(name: &str, n: u64, block_size: u64) -> Result<()> {
    if n == 0 || !n.is_multiple_of(block_size) {
        bail!("{name} {n}: expected a positive multiple of the file system block size ({block_size} bytes)");
    }
    Ok(())
}

/// FNV-1a over a sorted list of (name, size): a short fingerprint of a file set, equal for
/// equal sets (names and sizes).
pub fn file_set_digest(files: &[(String, u64)]) -> String {
    let mut sorted: Vec<&(String, u64)> = files.iter().collect();
    sorted.sort();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (name, size) in sorted {
        for b in name.bytes().chain([0u8]).chain(size.to_le_bytes()) {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// What reading files back cost: the artifact's read phase (page cache dropped, O_DIRECT,
/// 1 MiB reads, timed from the first read to the last).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ReadBack {
    /// CLOCK_MONOTONIC ns when the timed reads began (the block tracepoints' clock): where
    /// a recording's read phase starts.
    #[serde(skip)]
    pub started_ns: u64,
    pub bytes: u64,
    pub seconds: f64,
    /// bytes / seconds, MB = 10^6 bytes (as the artifact's printresult).
    pub mb_s: f64,
}

impl ReadBack {
    pub fn new(started_ns: u64, bytes: u64, seconds: f64) -> ReadBack {
        let mb_s = if seconds > 0.0 {
            bytes as f64 / seconds / 1e6
        } else {
            0.0
        };
        ReadBack {
            started_ns,
            bytes,
            seconds,
            mb_s,
        }
    }
}

/// Read all of `path` with O_DIRECT in `io` byte requests into `buf`; returns the bytes read.
pub(crate) fn read_whole_direct(path: &Path, buf: &mut AlignedBuf, io: usize) -> Result<u64> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .with_context(|| format!("{}: cannot open for O_DIRECT reading", path.display()))?;
    let io = io.min(buf.len());
    let mut off = 0u64;
    loop {
        let n = f
            .read_at(&mut buf.as_mut_slice()[..io], off)
            .with_context(|| format!("{}: read at {off}", path.display()))?;
        if n == 0 {
            return Ok(off);
        }
        off += n as u64;
    }
}

/// Drop the page cache, then read `path` whole with O_DIRECT 1 MiB reads, timed.
pub fn read_back(path: &Path) -> Result<ReadBack> {
    fragkit_core::io::job::drop_caches()?;
    let mut buf = AlignedBuf::new(1 << 20);
    let started = monotonic_ns();
    let t = std::time::Instant::now();
    let bytes = read_whole_direct(path, &mut buf, 1 << 20)?;
    Ok(ReadBack::new(started, bytes, t.elapsed().as_secs_f64()))
}

pub use fragkit_sys::clock::monotonic_ns;

/// Sizes of the gaps between a file's consecutive fragments (physical start of one minus
/// physical end of the one before, in logical order), counted per size: the histogram the
/// FAST'24 runs are compared by.
pub(crate) fn gap_histogram(runs: &[Fragment]) -> Vec<(i64, u64)> {
    let mut h = std::collections::BTreeMap::new();
    for w in runs.windows(2) {
        let gap = w[1].physical as i64 - (w[0].physical + w[0].length) as i64;
        *h.entry(gap).or_insert(0u64) += 1;
    }
    h.into_iter().collect()
}

/// Extent sizes of a file's fragments, counted per size.
pub(crate) fn size_histogram(runs: &[Fragment]) -> Vec<(u64, u64)> {
    let mut h = std::collections::BTreeMap::new();
    for r in runs {
        *h.entry(r.length).or_insert(0u64) += 1;
    }
    h.into_iter().collect()
}

/// The whole block device (`/dev/loopN`) a directory's file system sits on, and that file
/// system's mount point: what a block recording of a workload in `dir` needs.
pub fn device_of(dir: &Path) -> Result<(PathBuf, PathBuf)> {
    let abs = dir
        .canonicalize()
        .with_context(|| format!("{}: cannot resolve", dir.display()))?;
    let dev = fragkit_core::io::device::BlockDevice::for_path(&abs)?.dev_path();
    let mounts = fragkit_sys::mountinfo::read()?;
    let m = fragkit_sys::mountinfo::containing(&mounts, &abs)
        .ok_or_else(|| anyhow!("{}: no mount holds it", abs.display()))?;
    Ok((dev, m.mountpoint.clone()))
}
