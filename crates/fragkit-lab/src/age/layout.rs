//! Exact layouts: a file whose fragments are F bytes with D bytes between consecutive
//! fragments (FragPicker's motivation experiment), on the file system the caller cares about.
//!
//! Three techniques, chosen by file system:
//! - **fill-and-punch** (ext4, xfs): these allocators keep a file contiguous whenever they
//!   can (goal blocks, per-inode preallocation), so interleaving alone does not fragment.
//!   fragkit preallocates one contiguous pattern region and writes its D-byte spacers
//!   (the F-byte pieces stay unwritten, so each is an extent of its own), fills every other
//!   free block, then frees one F piece at a time (committing the free) and fallocates +
//!   writes the next fragment of the target into it: the allocator has no other choice.
//!   ext4's reserved_clusters and the xfs reserve pool are emptied meanwhile and restored;
//!   a few single-block reserve files are freed only when the kernel needs a block for the
//!   target's extent tree. Everything but the target is deleted afterwards.
//! - **reflink** (btrfs; xfs when F is one block or ≥ 128 KiB, or fill-and-punch hit
//!   ENOSPC): btrfs puts a file's next extent after its own previous one, and keeps
//!   allocations of different size classes in different block groups. fragkit writes one
//!   pattern file in order (F, D, F, D, ... in O_DIRECT writes below 128 KiB; on xfs into
//!   one fallocated span), clones the F pieces into the target with FICLONERANGE and
//!   deletes the pattern.
//! - **interleave** (others, e.g. f2fs): alternating O_DIRECT writes of F bytes to the
//!   target and D bytes to a spacer file, which log-structured allocators place in order.
//!
//! Either way the result is mapped with FIEMAP and checked fragment by fragment.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use super::{check_file, require_block_multiple, seeded_buf, write_all_at, FileCheck};
use fragkit_core::layout::model::Fragment;
use fragkit_sys::alloc::{allocate, punch_hole};
use fragkit_sys::fsinfo::{BTRFS_MAGIC, EXT4_MAGIC, XFS_MAGIC};

/// What to build.
#[derive(Debug, Clone)]
pub struct LayoutSpec {
    /// The file to create (replaced if it exists).
    pub path: PathBuf,
    /// File size in bytes (a multiple of the block size).
    pub size: u64,
    /// Bytes per fragment F (a multiple of the block size).
    pub frag_size: u64,
    /// Bytes between the end of one fragment and the start of the next, D (a multiple of
    /// the block size).
    pub frag_distance: u64,
    /// Seed of the data written (the layout itself is fully determined by F and D).
    pub seed: u64,
    /// Allow fill-and-punch on a file system that is not a fragkit scratch one.
    pub force: bool,
    /// Show a progress bar (on a terminal).
    pub progress: bool,
}

/// How a layout was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Technique {
    FillAndPunch,
    /// Write F and D pieces alternately into one pattern file (each its own extent, in
    /// order), clone the F pieces into the target, delete the pattern (btrfs).
    Reflink,
    Interleave,
}

/// Requested next to achieved, and the share of fragments within one block of the request.
#[derive(Debug, Clone, Serialize)]
pub struct LayoutReport {
    pub version: u32,
    pub technique: Technique,
    pub requested: Requested,
    pub achieved: FileCheck,
    /// Fragments whose size is within one block of F (the last one may be shorter when the
    /// size is not a multiple of F), over all fragments.
    pub size_fidelity: f64,
    /// Gaps between logically consecutive fragments within one block of D, over all gaps.
    pub distance_fidelity: f64,
    /// Which fragments and gaps are not exactly F and D, and why.
    pub off_pieces: OffPieces,
    /// Fragments in logical order: (logical, physical, length) in bytes.
    pub fragments: Vec<Fragment>,
    pub elapsed_seconds: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Requested {
    pub size: u64,
    pub frag_size: u64,
    pub frag_distance: u64,
    pub fragments: u64,
    pub seed: u64,
}

/// Pieces of a layout that are not exactly as asked, with the reason fragkit can see.
#[derive(Debug, Clone, Default, Serialize)]
pub struct OffPieces {
    /// Share of fragments exactly F bytes long (the last one may be the size's tail).
    pub exact_fragments: f64,
    /// Share of gaps between logically consecutive fragments exactly D bytes.
    pub exact_gaps: f64,
    /// Fragments and gaps that are off.
    pub count: usize,
    /// Off pieces per reason.
    pub by_reason: std::collections::BTreeMap<String, usize>,
    /// The first OFF_LISTED of them.
    pub pieces: Vec<OffPiece>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct OffPiece {
    /// Fragment index (for a gap: the fragment before it).
    pub index: usize,
    pub logical: u64,
    /// "size" (fragment length) or "gap" (distance to the next fragment).
    pub what: &'static str,
    pub wanted: u64,
    /// The gap as a signed byte distance (the next fragment may lie before this one).
    pub got: i64,
    pub reason: String,
}

const OFF_LISTED: usize = 64;

/// Where the fragments' groups and the wanted places' owners come from (ext4, xfs).
pub struct Surroundings<'a> {
    pub geometry: Option<fragkit_sys::superblock::GroupGeometry>,
    /// What holds the byte range [start, end) now: Some(None) all free, Some(Some(what))
    /// metadata or another inode, None unknown (no GETFSMAP, e.g. btrfs).
    pub owner_of: &'a dyn Fn(u64, u64) -> Option<Option<String>>,
}

/// Compare each fragment and gap with F and D; say why each off one is off: it would have
/// crossed a group boundary (ext4 block groups begin with bitmaps and inode tables, xfs
/// allocation groups with their headers), the wanted place holds something else, or the
/// allocator chose another place although it was free.
pub fn off_pieces(
    runs: &[Fragment],
    size: u64,
    f: u64,
    d: u64,
    around: &Surroundings,
) -> OffPieces {
    let mut o = OffPieces::default();
    if runs.is_empty() {
        return o;
    }
    let tail = size % f;
    let group = |b: u64| {
        around.geometry.map(|g| {
            let bs = g.block_size.max(1);
            g.group_of(b / bs)
        })
    };
    let crosses = |start: u64, end: u64| -> Option<String> {
        let g = around.geometry?;
        let (a, b) = (group(start)?, group(end.saturating_sub(1))?);
        (a != b).then(|| {
            let bs = g.block_size.max(1);
            format!(
                "group boundary ({} {} starts at byte {})",
                g.group_kind,
                b,
                g.group_range(b).0 * bs
            )
        })
    };
    let mut exact_f = 0usize;
    let mut off = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let last = i == runs.len() - 1;
        if r.length == f || (last && tail != 0 && r.length == tail) || (last && r.length < f) {
            exact_f += 1;
        } else {
            let reason = crosses(r.physical, r.physical + f.max(r.length))
                .or_else(|| {
                    (r.length < f)
                        .then(|| (around.owner_of)(r.physical_end(), r.physical + f))
                        .flatten()
                        .flatten()
                        .map(|w| format!("no room: {w} right after it"))
                })
                .unwrap_or_else(|| "allocator split it".into());
            off.push(OffPiece {
                index: i,
                logical: r.logical,
                what: "size",
                wanted: f,
                got: r.length as i64,
                reason,
            });
        }
    }
    let mut exact_d = 0usize;
    for (i, w) in runs.windows(2).enumerate() {
        let got = w[1].physical as i128 - w[0].physical_end() as i128;
        if got == d as i128 {
            exact_d += 1;
            continue;
        }
        let want = w[0].physical_end() + d;
        let reason = crosses(w[0].physical_end(), want + f).unwrap_or_else(|| {
            match (around.owner_of)(want, want + w[1].length) {
                Some(Some(w)) => format!("wanted place holds {w}"),
                Some(None) => "allocator placed it elsewhere (the wanted place is free now)".into(),
                None => "allocator placed it elsewhere (no GETFSMAP here to see the wanted place)"
                    .into(),
            }
        });
        off.push(OffPiece {
            index: i,
            logical: w[0].logical,
            what: "gap",
            wanted: d,
            got: got.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
            reason,
        });
    }
    o.exact_fragments = exact_f as f64 / runs.len() as f64;
    let gaps = runs.len() - 1;
    o.exact_gaps = if gaps == 0 {
        1.0
    } else {
        exact_d as f64 / gaps as f64
    };
    o.count = off.len();
    for p in &off {
        // Counted by the reason's kind, without its numbers.
        let kind = p.reason.split(" (").next().unwrap_or(&p.reason);
        let kind = kind.split(':').next().unwrap_or(kind).to_string();
        *o.by_reason.entry(kind).or_default() += 1;
    }
    off.sort_by_key(|p| (p.index, p.what));
    off.truncate(OFF_LISTED);
    o.pieces = off;
    o
}

/// What GETFSMAP says holds [start, end) now: Some(None) when all free, None when the
/// file system has no GETFSMAP (btrfs).
fn fsmap_owner(dir: &File, start: u64, end: u64) -> Option<Option<String>> {
    use fragkit_sys::fsmap::{read_fsmap, Owner};
    let recs = read_fsmap(
        std::os::fd::AsFd::as_fd(dir),
        None,
        start,
        end.saturating_sub(1),
    )
    .ok()?;
    Some(
        recs.iter()
            .filter(|r| r.physical < end && r.physical_end() > start)
            .find_map(|r| match r.owner {
                Owner::Free => None,
                Owner::Unknown => Some("blocks of unknown use".to_string()),
                Owner::Metadata(m) => Some(format!("metadata ({m})")),
                Owner::Inode(ino) => Some(format!("inode {ino}'s data")),
            }),
    )
}

/// Share of fragments within one block of F and of gaps within one block of D.
pub fn fidelity(runs: &[Fragment], size: u64, f: u64, d: u64, block: u64) -> (f64, f64) {
    if runs.is_empty() {
        return (0.0, 0.0);
    }
    let tail = size % f;
    let good_size = runs
        .iter()
        .enumerate()
        .filter(|(i, r)| {
            r.length.abs_diff(f) <= block
                || (*i == runs.len() - 1 && tail != 0 && r.length.abs_diff(tail) <= block)
        })
        .count();
    let gaps = runs.len().saturating_sub(1);
    let good_gap = runs
        .windows(2)
        .filter(|w| {
            let gap = w[1].physical as i128 - w[0].physical_end() as i128;
            (gap - d as i128).unsigned_abs() <= block as u128
        })
        .count();
    let gap_share = if gaps == 0 {
        1.0
    } else {
        good_gap as f64 / gaps as f64
    };
    (good_size as f64 / runs.len() as f64, gap_share)
}

/// Build the layout in `spec` and verify it with FIEMAP.
pub fn build(spec: &LayoutSpec) -> Result<LayoutReport> {
    let start = Instant::now();
    // F above the file size would silently make a one-fragment file.
    if spec.frag_size > spec.size {
        bail!(
            "--frag-size {} is larger than --size {}: the file would be one fragment; expected a fragment size at most the file size",
            fragkit_core::units::short_size(spec.frag_size),
            fragkit_core::units::short_size(spec.size)
        );
    }
    let dir = match spec.path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        bail!("{}: no such directory", dir.display());
    }
    let probe = File::open(&dir).with_context(|| format!("{}: cannot open", dir.display()))?;
    let info = fragkit_sys::fsinfo::FsInfo::of_fd(std::os::fd::AsFd::as_fd(&probe))
        .with_context(|| format!("{}: statfs failed", dir.display()))?;
    let bs = info.block_size as u64;
    require_block_multiple("--size", spec.size, bs)?;
    require_block_multiple("--frag-size", spec.frag_size, bs)?;
    require_block_multiple("--frag-distance", spec.frag_distance, bs)?;
    let n = spec.size.div_ceil(spec.frag_size);
    let mut technique = match info.magic {
        EXT4_MAGIC => Technique::FillAndPunch,
        // xfs holds back some single free blocks (per-AG reservations) that fill-and-punch
        // cannot take but a one-block allocation may get; a reflinked pattern allocates
        // nothing for the target, so use it there (xfs has reflink by default).
        // From 128 KiB up a fragment no longer fits beside xfs's per-AG allocation
        // headroom in one freed hole (ENOSPC with every reserve block freed): reflink too.
        XFS_MAGIC if spec.frag_size == bs || spec.frag_size >= 128 << 10 => Technique::Reflink,
        XFS_MAGIC => Technique::FillAndPunch,
        // btrfs places a file's next extent after its own previous one, so interleaving
        // two files only works for small D; a single pattern file is laid out in order.
        BTRFS_MAGIC => Technique::Reflink,
        _ => Technique::Interleave,
    };
    let _ = fs::remove_file(&spec.path);
    // A target this run did not finish is not left behind.
    let mut target_guard = RemoveOnDrop(vec![spec.path.clone()]);
    let pb = spec.progress.then(|| super::progress_bar(n, "age layout"));
    match technique {
        Technique::FillAndPunch => {
            super::require_scratch(
                &dir,
                spec.force,
                "age layout (fill-and-punch fills every free block)",
            )?;
            match fill_and_punch(spec, &dir, bs, info.magic, pb.as_ref()) {
                Ok(()) => {}
                // xfs keeps per-AG allocation headroom (AGFL refill, btree splits) that a
                // fragment of 128 KiB or more cannot fit beside in one freed hole; its
                // reflink technique needs no free-space games, so use that instead.
                Err(e) if info.magic == XFS_MAGIC && is_enospc(&e) => {
                    let _ = fs::remove_file(&spec.path);
                    if let Some(pb) = &pb {
                        pb.set_position(0);
                    }
                    technique = Technique::Reflink;
                    reflink(spec, &dir, info.magic, pb.as_ref())?
                }
                Err(e) => return Err(e),
            }
        }
        Technique::Reflink => reflink(spec, &dir, info.magic, pb.as_ref())?,
        Technique::Interleave => interleave(spec, &dir, pb.as_ref())?,
    }
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    target_guard.0.clear();
    let achieved = check_file(&spec.path)?;
    let (size_fidelity, distance_fidelity) = fidelity(
        &achieved.runs,
        spec.size,
        spec.frag_size,
        spec.frag_distance,
        bs,
    );
    let geometry = {
        use std::os::unix::fs::MetadataExt;
        let dev = probe.metadata()?.dev();
        fragkit_sys::superblock::device_path(dev)
            .and_then(|p| fragkit_sys::superblock::read_geometry(&p))
            .ok()
    };
    let owner_of = |a: u64, b: u64| fsmap_owner(&probe, a, b);
    let off = off_pieces(
        &achieved.runs,
        spec.size,
        spec.frag_size,
        spec.frag_distance,
        &Surroundings {
            geometry,
            owner_of: &owner_of,
        },
    );
    Ok(LayoutReport {
        version: 1,
        technique,
        off_pieces: off,
        requested: Requested {
            size: spec.size,
            frag_size: spec.frag_size,
            frag_distance: spec.frag_distance,
            fragments: n,
            seed: spec.seed,
        },
        fragments: achieved.runs.clone(),
        achieved,
        size_fidelity,
        distance_fidelity,
        elapsed_seconds: start.elapsed().as_secs_f64(),
    })
}

fn open_direct(path: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .with_context(|| format!("{}: cannot create with O_DIRECT", path.display()))
}

/// Alternate O_DIRECT writes of F to the target and D to a spacer (CoW / log-structured).
fn interleave(spec: &LayoutSpec, dir: &Path, pb: Option<&indicatif::ProgressBar>) -> Result<()> {
    let spacer_path = dir.join(format!(".fragkit-layout-spacer.{}", std::process::id()));
    let target = open_direct(&spec.path)?;
    let spacer = open_direct(&spacer_path)?;
    let _cleanup = RemoveOnDrop(vec![spacer_path.clone()]);
    let buf = seeded_buf(spec.frag_size.max(spec.frag_distance) as usize, spec.seed);
    // An anchor block of spacer first, so that an allocator placing a file's next extent
    // after its previous one puts each spacer piece right after a target piece.
    let anchor = 4096usize.min(buf.len());
    write_all_at(&spacer, &buf.as_slice()[..anchor], 0)
        .with_context(|| format!("{}: write", spacer_path.display()))?;
    let mut off = 0u64;
    let mut spacer_off = anchor as u64;
    while off < spec.size {
        stop_if_interrupted()?;
        let len = spec.frag_size.min(spec.size - off) as usize;
        write_all_at(&target, &buf.as_slice()[..len], off)
            .with_context(|| format!("{}: write", spec.path.display()))?;
        off += len as u64;
        if off < spec.size {
            let d = spec.frag_distance as usize;
            write_all_at(&spacer, &buf.as_slice()[..d], spacer_off)
                .with_context(|| format!("{}: write", spacer_path.display()))?;
            spacer_off += d as u64;
        }
        if let Some(pb) = pb {
            pb.inc(1);
        }
    }
    target.sync_all()?;
    Ok(())
}

/// Largest write that stays in btrfs's "small" allocation size class.
const BTRFS_SMALL_WRITE: u64 = 64 * 1024;

/// One pattern file written in order (F, D, F, D, ... each its own O_DIRECT write), then
/// its F pieces cloned into the target: the target's extents are exactly those pieces.
fn reflink(
    spec: &LayoutSpec,
    dir: &Path,
    magic: u64,
    pb: Option<&indicatif::ProgressBar>,
) -> Result<()> {
    let f = spec.frag_size;
    let d = spec.frag_distance;
    let n = spec.size.div_ceil(f);
    let stride = f + d;
    let pattern_path = dir.join(format!(".fragkit-layout-pattern.{}", std::process::id()));
    let burner_path = dir.join(format!(".fragkit-layout-burner.{}", std::process::id()));
    let _cleanup = RemoveOnDrop(vec![pattern_path.clone(), burner_path.clone()]);
    let span = (n - 1) * stride + f.min(spec.size - (n - 1) * f);
    // btrfs allocates data chunk by chunk: a pattern that runs off the end of the current
    // data block group continues at the next one, far away (the first, mkfs-made one is
    // only 8 MiB). Such a pattern is kept as a burner (it fills that tail) and written once
    // more, which then starts inside the new chunk, if the span fits in one: a data chunk
    // is 10% of the file system up to 1 GiB (btrfs volumes.c).
    let chunk = nix::sys::statvfs::statvfs(dir)
        .map(|v| (v.blocks() * v.fragment_size() / 10).min(1 << 30))
        .unwrap_or(0);
    let attempts = if magic == BTRFS_MAGIC && span <= chunk {
        2
    } else {
        1
    };
    for attempt in 1..=attempts {
        write_pattern(spec, &pattern_path, magic, span)?;
        if attempt < attempts && check_file(&pattern_path)?.fragments > 1 {
            fs::rename(&pattern_path, &burner_path)?;
            continue;
        }
        break;
    }
    let src = File::open(&pattern_path)?;
    let target = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&spec.path)
        .with_context(|| format!("{}: cannot create", spec.path.display()))?;
    for k in 0..n {
        stop_if_interrupted()?;
        let len = f.min(spec.size - k * f);
        fragkit_sys::clone::clone_range(&src, k * stride, len, &target, k * f)
            .map_err(|e| io_err(e, &spec.path, "FICLONERANGE"))?;
        if let Some(pb) = pb {
            pb.inc(1);
        }
    }
    target.set_len(spec.size)?;
    target.sync_all()?;
    Ok(())
}

/// Write the pattern file: F, D, F, D, ... in order (see `reflink`).
fn write_pattern(spec: &LayoutSpec, pattern_path: &Path, magic: u64, span: u64) -> Result<()> {
    let f = spec.frag_size;
    let d = spec.frag_distance;
    let n = spec.size.div_ceil(f);
    let stride = f + d;
    let pattern = open_direct(pattern_path)?;
    if magic != BTRFS_MAGIC {
        // xfs places each extending O_DIRECT write near the inode, i.e. in the small holes
        // that earlier metadata allocations leave at the AG's start, which splits F pieces.
        // One fallocate of the whole span asks for the largest free extents instead.
        allocate(&pattern, 0, span).map_err(|e| io_err(e, pattern_path, "fallocate"))?;
    }
    let buf = seeded_buf(BTRFS_SMALL_WRITE as usize, spec.seed);
    // btrfs sorts data allocations into size classes (< 128 KiB, < 8 MiB, larger) kept in
    // different block groups: writing everything in pieces below 128 KiB keeps the F and
    // D pieces in one block group, in write order.
    let write_piece = |off: u64, len: u64| -> Result<()> {
        let mut done = 0;
        while done < len {
            let n = (len - done).min(BTRFS_SMALL_WRITE);
            write_all_at(&pattern, &buf.as_slice()[..n as usize], off + done)
                .map_err(|e| io_err(e, pattern_path, "write"))?;
            done += n;
        }
        Ok(())
    };
    for k in 0..n {
        stop_if_interrupted()?;
        write_piece(k * stride, f.min(spec.size - k * f))?;
        if k + 1 < n {
            write_piece(k * stride + f, d)?;
        }
    }
    pattern.sync_all()?;
    Ok(())
}

/// Err once SIGINT or SIGTERM arrived (when the command routed them to the flag): the
/// error unwinds through the guards, which remove the filler, pattern and spacer files,
/// the half-made target, and put the file-system knobs back.
fn stop_if_interrupted() -> Result<()> {
    if fragkit_sys::signals::interrupted() {
        bail!(fragkit_sys::signals::INTERRUPTED_MESSAGE);
    }
    Ok(())
}

/// Removes the listed paths (files or directories) when dropped.
struct RemoveOnDrop(Vec<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        for p in &self.0 {
            if p.is_dir() {
                let _ = fs::remove_dir_all(p);
            } else {
                let _ = fs::remove_file(p);
            }
        }
    }
}

/// Fallocate one filler file, in halving chunks, until the file system has no free block
/// left. One file: creating more inodes may itself fail once space is gone (xfs).
fn fill_free_space(fill_dir: &Path, bs: u64) -> Result<(PathBuf, File)> {
    let usage = super::FsUsage::of(fill_dir)?;
    let mut chunk = (usage.free / bs).next_power_of_two() * bs;
    let path = fill_dir.join("fill");
    // Not truncated: a second pass continues the first one's file.
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .with_context(|| format!("{}: cannot create filler", path.display()))?;
    let mut end = f.metadata()?.len();
    while chunk >= bs {
        stop_if_interrupted()?;
        match allocate(&f, end, chunk) {
            Ok(()) => end += chunk,
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                // A partial allocation may remain; the next chunk starts past it.
                end = end.max(f.metadata()?.len());
                chunk /= 2;
            }
            Err(e) => return Err(anyhow!("{}: fallocate: {e}", path.display())),
        }
    }
    Ok((path, f))
}

fn open_rw(path: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(path)
        .with_context(|| format!("{}: cannot create", path.display()))
}

fn fill_and_punch(
    spec: &LayoutSpec,
    dir: &Path,
    bs: u64,
    magic: u64,
    pb: Option<&indicatif::ProgressBar>,
) -> Result<()> {
    let f = spec.frag_size;
    let d = spec.frag_distance;
    let n = spec.size.div_ceil(f);
    let work = dir.join(format!(".fragkit-layout-fill.{}", std::process::id()));
    fs::create_dir(&work).with_context(|| format!("{}: cannot create", work.display()))?;
    let _cleanup = RemoveOnDrop(vec![work.clone()]);
    // Every inode exists before the fill, so none needs space later.
    let target = open_direct(&spec.path)?;
    let holes = open_rw(&work.join("holes"))?;
    let spacers = open_rw(&work.join("spacers"))?;
    let reserve_count = 16 + n / 64;
    let reserve_paths: Vec<PathBuf> = (0..reserve_count)
        .map(|i| work.join(format!("reserve.{i}")))
        .collect();
    // Allocator reserves would stay free behind the filler and take the target's data:
    // empty them meanwhile (the FAST'24 artifact zeroes ext4's reserved_clusters too).
    let _ext4_reserve = if magic == EXT4_MAGIC {
        fragkit_sys::tunable::Ext4Tunable::set(dir, "reserved_clusters", "0")
            .context("setting ext4 reserved_clusters to 0")?
    } else {
        None
    };
    let _xfs_reserve = if magic == XFS_MAGIC {
        Some(fragkit_sys::xfs::XfsResblks::empty(dir).context("emptying the xfs reserve pool")?)
    } else {
        None
    };
    // 1. One contiguous preallocation for the whole pattern; then write the D-byte
    //    spacers (O_DIRECT), leaving the F-byte pieces unwritten. Written and unwritten
    //    extents never merge, so every future hole is one extent of its own, and the
    //    extent tree has grown to its final size while free space is still plentiful.
    let stride = f + d;
    let len_of = |k: u64| f.min(spec.size - k * f);
    let falloc = |file: &File, off: u64, len: u64, what: &str| {
        allocate(file, off, len).map_err(|e| {
            anyhow!("fallocate {what}: {e}; use a smaller --size or --frag-distance, or a larger file system")
        })
    };
    let span = (n - 1) * stride + len_of(n - 1);
    let spacer_buf = seeded_buf(f.max(d) as usize, spec.seed ^ 1);
    let pattern = {
        falloc(&holes, 0, span, "pattern")?;
        drop(holes);
        let pattern = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(work.join("holes"))?;
        for k in 0..n.saturating_sub(1) {
            stop_if_interrupted()?;
            write_all_at(
                &pattern,
                &spacer_buf.as_slice()[..d as usize],
                k * stride + f,
            )
            .map_err(|e| io_err(e, &work, "writing spacers"))?;
        }
        pattern
    };
    pattern.sync_all()?;
    drop(spacers);
    let holes = pattern;
    let spacers = open_rw(&work.join("spacers"))?;
    // Single blocks for the metadata the target's extent tree needs, freed one at a time
    // only when the kernel says ENOSPC (a full leaf splits every few hundred extents).
    let mut spacer_end = 0;
    for p in &reserve_paths {
        // Closed at once: an unlinked file's blocks are freed only when no fd is open.
        falloc(&open_rw(p)?, 0, bs, "reserve")?;
        falloc(&spacers, spacer_end, bs, "reserve")?;
        spacer_end += bs;
    }
    // 2. Take every other free block.
    // Space freed just before (earlier runs, the pattern's own writes) may still be
    // "busy" until the log commits and then escape the fill: commit, fill, commit, and
    // fill what was released.
    let fd = holes.as_raw_fd();
    nix::unistd::syncfs(fd)?;
    let _fill = fill_free_space(&work, bs)?;
    nix::unistd::syncfs(fd)?;
    let _fill = fill_free_space(&work, bs)?;
    // 3. Free one piece of `holes` at a time and allocate the next fragment into it.
    let buf = seeded_buf(f as usize, spec.seed);
    let mut next_reserve = 0usize;
    for k in 0..n {
        stop_if_interrupted()?;
        let len = len_of(k);
        punch_hole(&holes, k * stride, len).with_context(|| format!("freeing hole {k}"))?;
        // Freed blocks are reusable only once the journal has committed the free.
        nix::unistd::syncfs(holes.as_raw_fd())?;
        loop {
            let r = allocate(&target, k * f, len)
                .and_then(|()| write_all_at(&target, &buf.as_slice()[..len as usize], k * f));
            match r {
                Ok(()) => break,
                Err(e)
                    if e.raw_os_error() == Some(libc::ENOSPC)
                        && next_reserve < reserve_paths.len() =>
                {
                    fs::remove_file(&reserve_paths[next_reserve])?;
                    next_reserve += 1;
                    nix::unistd::syncfs(holes.as_raw_fd())?;
                }
                Err(e) => return Err(io_err(e, &spec.path, "write (fill-and-punch)")),
            }
        }
        if let Some(pb) = pb {
            pb.inc(1);
        }
    }
    target
        .sync_all()
        .map_err(|e| io_err(e, &spec.path, "fsync"))?;
    Ok(())
}

fn is_enospc(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.raw_os_error() == Some(libc::ENOSPC))
    }) || e.to_string().contains("No space left on device")
}

fn io_err(e: io::Error, path: &Path, what: &str) -> anyhow::Error {
    anyhow!("{}: {what}: {e}", path.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frag(physical: u64, length: u64) -> Fragment {
        Fragment {
            logical: 0,
            physical,
            length,
            extents: 1,
        }
    }

    /// Off pieces get the reason fragkit can see: a group boundary in the way, something
    /// else at the wanted place, or else the allocator's choice.
    #[test]
    fn off_pieces_name_group_boundaries_and_occupants() {
        const K: u64 = 1024;
        let geo = fragkit_sys::superblock::GroupGeometry {
            group_kind: "block group",
            block_size: 4096,
            total_blocks: 1 << 20,
            first_block: 0,
            blocks_per_group: 32768, // 128 MiB groups
            groups: 32,
        };
        let group1 = 128u64 << 20;
        // F = 12K, D = 1M: fragment 0 just before group 1; fragment 1 pushed 9 MiB past
        // the wanted place (ext4's bitmaps and inode tables at the group's start).
        let mut runs = vec![frag(group1 - 12 * K - 512 * K, 12 * K)];
        runs.push(frag(group1 + (9 << 20), 12 * K));
        runs.push(frag(runs[1].physical_end() + 1024 * K, 12 * K)); // exact
        runs.push(frag(runs[2].physical_end() + 2048 * K, 12 * K)); // 1 MiB too far
        runs.push(frag(runs[3].physical_end() + 3072 * K, 12 * K)); // too far, place taken
        for (i, r) in runs.iter_mut().enumerate() {
            r.logical = i as u64 * 12 * K;
        }
        let taken = runs[3].physical_end() + 1024 * K;
        let owner = move |a: u64, b: u64| {
            Some((a < taken + 12 * K && b > taken).then(|| "inode 12's data".to_string()))
        };
        let o = off_pieces(
            &runs,
            60 * K,
            12 * K,
            1024 * K,
            &Surroundings {
                geometry: Some(geo),
                owner_of: &owner,
            },
        );
        assert_eq!(o.exact_fragments, 1.0);
        assert_eq!(o.exact_gaps, 0.25);
        assert_eq!(o.count, 3);
        let reasons: Vec<(usize, &str)> = o
            .pieces
            .iter()
            .map(|p| (p.index, p.reason.as_str()))
            .collect();
        assert!(
            reasons[0].1.starts_with("group boundary (block group 1"),
            "{reasons:?}"
        );
        assert!(reasons[1].1.ends_with("free now)"), "{reasons:?}");
        assert_eq!(reasons[2], (3, "wanted place holds inode 12's data"));
        assert_eq!(o.by_reason["group boundary"], 1);
        assert_eq!(o.pieces[0].got, (9 << 20) + 512 * K as i64);

        // No geometry, nothing known about the place: the allocator's choice.
        let none = |_: u64, _: u64| None;
        let o = off_pieces(
            &runs,
            60 * K,
            12 * K,
            1024 * K,
            &Surroundings {
                geometry: None,
                owner_of: &none,
            },
        );
        assert_eq!(o.count, 3);
        assert!(o
            .pieces
            .iter()
            .all(|p| p.reason.starts_with("allocator") && p.reason.contains("no GETFSMAP")));
    }

    #[test]
    fn fidelity_counts_sizes_and_gaps() {
        let k = 4096;
        // F=8K, D=4K: three perfect fragments.
        let runs = vec![frag(0, 2 * k), frag(3 * k, 2 * k), frag(6 * k, 2 * k)];
        assert_eq!(fidelity(&runs, 6 * k, 2 * k, k, k), (1.0, 1.0));
        // A gap of 3 blocks instead of 1 is outside one block.
        let runs = vec![frag(0, 2 * k), frag(5 * k, 2 * k)];
        assert_eq!(fidelity(&runs, 4 * k, 2 * k, k, k), (1.0, 0.0));
        // A short last fragment matches the tail of a size that is not a multiple of F.
        let runs = vec![frag(0, 4 * k), frag(5 * k, k)];
        assert_eq!(fidelity(&runs, 5 * k, 4 * k, k, k), (1.0, 1.0));
        // Backwards is not D.
        let runs = vec![frag(10 * k, k), frag(0, k)];
        assert_eq!(fidelity(&runs, 2 * k, k, k, k).1, 0.0);
    }
}
