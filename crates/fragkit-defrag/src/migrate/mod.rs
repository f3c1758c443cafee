//! Range-granular, crash-safe migration: one file system's atomic primitive per file.
//!
//! Every migrator moves bytes [offset, offset+length) of a file to freshly allocated,
//! contiguous space, so that the range reads as one request afterwards, and relies on a
//! kernel primitive that leaves the file either wholly old or wholly new after a crash.

pub mod btrfs;
pub mod ext4;
pub mod f2fs;
pub mod rewrite;
pub mod xfs;

use std::fs::File;
use std::io;
use std::os::fd::AsFd;

use fragkit_sys::tmpfile::temp_file_in;

use anyhow::{bail, Result};
use serde::Serialize;

use super::judge::{judge, Judgement};

use fragkit_core::layout::model::{Extent, FileLayout};
use fragkit_sys::fiemap;
use fragkit_sys::fsinfo::{BTRFS_MAGIC, EXT4_MAGIC, F2FS_MAGIC, XFS_MAGIC};

/// The file being defragmented, opened read-write, with its directory (for temp files).
pub struct Target<'a> {
    pub file: &'a File,
    pub dir: &'a File,
    /// What [`Migrator::open_for_primitive`] opened for this file, if anything.
    pub for_primitive: Option<&'a File>,
    pub size: u64,
    pub block_size: u64,
    pub extents: &'a [Extent],
    pub goal: Goal,
    /// R: the request size whose split requests the move must not increase.
    pub request_size: u64,
    /// Full mode: piece sizes from the free-space plan (best fit, largest first); the donor
    /// is preallocated piece by piece so that the allocator is asked for runs that exist.
    pub pieces: Option<&'a [u64]>,
    /// Where a donor goes when the move is done with it: closing it frees the old blocks
    /// it now holds (the inode's eviction truncates them), which the caller may do off the
    /// moving thread. None: dropped here.
    pub release: Option<&'a (dyn Fn(File) + Sync)>,
    /// Commits the file system so that blocks freed since the last commit can be
    /// allocated (ext4 gives them back at journal commit, xfs keeps them busy until the log
    /// commits); [`donor_for`] asks when no attempt came back whole (never for a planned
    /// layout, which gets one attempt).
    pub commit_frees: &'a dyn CommitFrees,
    /// Called by a migrator that moves in steps ([`Migrator::feeds_before_checksum`]) with
    /// a file offset before any byte below it is moved: the range's before-checksum is read
    /// up to there (in whole windows), and --max-rate waits for the step. None: neither
    /// (the checksum taken before the move, or not verifying; no rate).
    pub before_step: Option<&'a dyn Fn(u64) -> std::io::Result<()>>,
}

/// A commit that may give freed blocks back to the allocator, asked for when a range found
/// no whole donor.
pub trait CommitFrees: Sync {
    /// Commit now if it may help; whether a commit was made.
    fn commit(&self) -> bool;
    /// Whether the attempt after that commit found a whole donor.
    fn helped(&self, whole: bool);
}

impl Target<'_> {
    /// Hand a finished donor (or a sink) back for closing.
    pub fn release(&self, f: File) {
        match self.release {
            Some(r) => r(f),
            None => drop(f),
        }
    }
}

/// What new space must achieve for a move to be worth its writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Goal {
    /// Every R-aligned window inside the range in one physical run (pick, bypass): the
    /// range then reads with one request per window, which is all FragPicker needs.
    WholeWindows(u64),
    /// Fewer fragments than the range has now (full mode; e4defrag's criterion).
    FewerFragments,
}

/// A file's mtime (s, ns), ctime (s, ns) and size: what any write changes.
pub(crate) type Stamp = (i64, i64, i64, i64, u64);

/// The file's stamp now (None when fstat fails).
pub(crate) fn stamp(f: &File) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    f.metadata().ok().map(|m| {
        (
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
            m.size(),
        )
    })
}

/// The file's atime, mtime and ctime now (None when fstat fails).
pub(crate) fn times(f: &File) -> Option<fragkit_sys::stat::Times> {
    f.metadata().ok().map(|m| fragkit_sys::stat::times(&m))
}

/// Which of atime, mtime and ctime differ between two samples ("unknown" when either
/// could not be read).
pub(crate) fn times_changed(
    before: Option<fragkit_sys::stat::Times>,
    after: Option<fragkit_sys::stat::Times>,
) -> Vec<&'static str> {
    match (before, after) {
        (Some(b), Some(a)) => fragkit_sys::stat::times_changed(&b, &a),
        _ => vec!["unknown"],
    }
}

/// For a primitive that changes the file's times itself (xfs's commit, a rewrite): the
/// stamp just as it began and just after it ended. The caller compares `began` with its
/// own stamp from before the checksum (a difference is another writer) and checks the
/// read-back against `ended`, so a mismatch is not excused by the primitive's own change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Restamp {
    pub began: Option<Stamp>,
    pub ended: Option<Stamp>,
}

/// What happened to one range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RangeOutcome {
    /// Moved; bytes the migration wrote (data copied by the kernel), and how the range's
    /// counts changed (judged on the donor before the move, or on the result after it);
    /// `restamped` when the primitive itself changed the file's times.
    Moved {
        bytes: u64,
        judged: Judgement,
        restamped: Option<Restamp>,
    },
    /// Left alone, for the reason given.
    Skipped(Skip),
}

/// Why a range was left alone: the kind for reports and tests, the detail for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    pub kind: SkipKind,
    pub detail: String,
}

impl Skip {
    pub fn new(kind: SkipKind, detail: impl Into<String>) -> Skip {
        Skip {
            kind,
            detail: detail.into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipKind {
    /// The space the allocator gave would not make the range better (see [`Judgement`]).
    NotBetter,
    /// Free space (GETFSMAP) cannot hold the range in fewer pieces than it has.
    NoBetterLayout,
    /// Reflinked or snapshot-shared extents (btrfs without --unshare).
    Shared,
    /// Compressed extents (btrfs).
    Compressed,
    /// The range lies past the end of the file (it shrank since the scan).
    PastEof,
    /// Another process kept writing the file.
    KeptChanging,
    /// --budget reached.
    Budget,
    /// SIGINT or SIGTERM came before the range was started.
    Interrupted,
}

pub(crate) trait Migrator: Sync {
    /// The primitive used, for reports ("EXT4_IOC_MOVE_EXT").
    fn primitive(&self) -> &'static str;
    /// A second descriptor of `file` that the primitive is to be issued through, opened
    /// once per file (`dir`: its directory); None: the file's own.
    fn open_for_primitive(&self, _file: &File, _dir: &File) -> Option<File> {
        None
    }
    fn migrate(&self, t: &Target<'_>, offset: u64, length: u64) -> Result<RangeOutcome>;
    /// Whether `migrate` calls [`Target::before_step`] before each of its moves.
    fn feeds_before_checksum(&self) -> bool {
        false
    }
}

/// How to migrate: the file system's safe primitive, or FragPicker's rewrite (unsafe).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Auto,
    Rewrite,
}

/// The migrator for a file system, by statfs magic.
pub(crate) fn for_fs(magic: u64, method: Method, unshare: bool) -> Result<Box<dyn Migrator>> {
    if method == Method::Rewrite {
        // F2FS rewrites out of place by itself (given the ipu_policy): no punch needed.
        if magic == F2FS_MAGIC {
            return Ok(Box::new(f2fs::Rewrite));
        }
        return Ok(Box::new(rewrite::Rewrite));
    }
    Ok(match magic {
        EXT4_MAGIC => Box::new(ext4::MoveExt::default()),
        XFS_MAGIC => Box::new(xfs::CommitRange),
        BTRFS_MAGIC => Box::new(btrfs::DefragRange { unshare }),
        F2FS_MAGIC => Box::new(f2fs::Defragment),
        other => bail!(
            "{} has no range-granular atomic migration in fragkit (ext4, xfs, btrfs, f2fs are supported)",
            fragkit_sys::fsinfo::fs_type_name(other)
        ),
    })
}

/// Attempts at a contiguous donor before giving up on a range.
const DONOR_TRIES: usize = 6;

/// Why a range was not moved because no donor was better than the range as it is.
pub(crate) fn not_better(best: Option<Judgement>, length: u64) -> RangeOutcome {
    RangeOutcome::Skipped(Skip::new(
        SkipKind::NotBetter,
        match best {
            Some(j) => format!(
                "{NO_CONTIGUOUS}: the best of the space the allocator gave for {} would leave {}; not moved",
                fragkit_core::units::HumanBytes(length),
                j.describe()
            ),
            None => format!(
                "{NO_CONTIGUOUS}: free space cannot hold {} in fewer pieces",
                fragkit_core::units::HumanBytes(length)
            ),
        },
    ))
}

/// Whether a range settles for the best donor that is better than the range as it is
/// (fewer fragments, no more split requests at R: issue 15's rule) when no attempt left
/// every R-window whole. Full mode always does; pick and bypass do for a range inside one
/// R-window. A longer range does not: the caller retries it window by window, and each
/// window then settles.
pub fn settles(goal: Goal, offset: u64, length: u64) -> bool {
    match goal {
        Goal::FewerFragments => true,
        Goal::WholeWindows(r) => {
            let r = r.max(1);
            length == 0 || offset / r == (offset + length - 1) / r
        }
    }
}

/// Marker at the start of the skip reason, so callers can retry with smaller pieces.
pub(crate) const NO_CONTIGUOUS: &str = "no contiguous space";

/// A temporary file in `dir` with [offset, offset+length) preallocated so that moving the
/// range there is better (see [`Judgement::better`]) and, for pick and bypass, leaves every
/// R-window in one run, else the best better attempt where [`settles`]; with that
/// judgement. Err(best judgement seen) if no attempt qualifies.
///
/// Allocators aim near the new inode, where the fragments being fixed left small holes;
/// a donor that lands in them is kept open (holding those holes) while the next attempt
/// is pushed further out, and all of them are released when the caller drops the result.
#[allow(clippy::type_complexity)]
pub(crate) fn donor_for(
    t: &Target<'_>,
    offset: u64,
    length: u64,
) -> Result<std::result::Result<(File, Judgement, Vec<File>), Option<Judgement>>> {
    let mut tried: Vec<(Judgement, File)> = Vec::new();
    // A planned layout gets one attempt per plan: holding a donor would take the very
    // runs the plan counted on.
    let mut tries = if t.pieces.is_some() { 1 } else { DONOR_TRIES };
    let mut attempt = 0;
    loop {
        if attempt == tries {
            // No whole donor in free space as the allocator sees it; blocks that earlier
            // moves (or deletions just before the run) freed come back only with a commit.
            // One more attempt after one (two workers ran out of whole runs this way:
            // docs/defrag.md).
            if tries == DONOR_TRIES && t.commit_frees.commit() {
                tries += 1;
            } else {
                break;
            }
        }
        let after_commit = attempt == DONOR_TRIES;
        let donor = temp_file_in(t.dir)?;
        let mut at = offset;
        let steps = donor_steps(t.pieces, t.goal, t.block_size, offset, length, attempt);
        let mut full = false;
        for step in steps {
            let len = step.min(offset + length - at);
            if len == 0 {
                break;
            }
            if let Err(e) = fragkit_sys::alloc::allocate(&donor, at, len) {
                if e.raw_os_error() == Some(libc::ENOSPC) {
                    full = true;
                    break;
                }
                return Err(e.into());
            }
            at += len;
        }
        if full {
            break;
        }
        let extents = fiemap::read_extents(donor.as_fd(), false)?;
        let j = judge(
            t.extents,
            &extents,
            offset,
            length,
            t.block_size,
            t.request_size,
        );
        let frags = fragments_in(&extents, offset, length, t.block_size);
        let whole = frags.len() == 1
            || matches!(t.goal, Goal::WholeWindows(r) if fragkit_core::metrics::split_window_list(&frags, r).is_empty());
        if after_commit {
            t.commit_frees.helped(whole);
        }
        if whole && j.better() {
            return Ok(Ok((donor, j, tried.into_iter().map(|(_, f)| f).collect())));
        }
        tried.push((j, donor));
        attempt += 1;
    }
    let best =
        (0..tried.len()).min_by_key(|&i| (tried[i].0.split_after, tried[i].0.fragments_after));
    if settles(t.goal, offset, length) {
        if let Some(best) = best.filter(|&i| tried[i].0.better()) {
            let (j, donor) = tried.swap_remove(best);
            return Ok(Ok((donor, j, tried.into_iter().map(|(_, f)| f).collect())));
        }
    }
    Ok(Err(best.map(|i| tried[i].0)))
}

/// The fallocate calls that build a donor for [offset, offset+length), attempt `attempt`
/// (0 first): the free-space plan's pieces (full mode); otherwise the whole range in one
/// call first, so that free space with a run that long gives one; for pick and bypass,
/// a range longer than R whose first donor was not whole gets one call per R-window on
/// later attempts, each then a power-of-two request when R is one (128 KiB: 32 blocks).
/// ext4's mballoc searches its buddy lists for an aligned free chunk (CR_POWER2_ALIGNED)
/// only for power-of-two lengths; any other length starts at CR_GOAL_LEN_FAST and, when
/// no free run is that long, falls to CR_GOAL_LEN_SLOW, which takes the best of the first
/// 200 free extents it scans (mb_max_to_scan) in the goal's group, often one block:
/// measured with the ext4_mballoc_alloc tracepoint, a 96-block donor made 96 one-block
/// allocations, and a bypass run whose every attempt was one call made 24,877
/// allocations for 2,131 windows, 21,783 of them short (FragPicker-B's 128 KiB
/// fallocates: 2,327, all whole, CR_POWER2_ALIGNED). One call per window on every attempt
/// was as fast there but left more windows split in the lab, where free space has longer
/// runs that a whole-range call finds (docs/defrag.md).
fn donor_steps(
    pieces: Option<&[u64]>,
    goal: Goal,
    block_size: u64,
    offset: u64,
    length: u64,
    attempt: usize,
) -> Vec<u64> {
    if let Some(p) = pieces {
        return p.to_vec();
    }
    let Goal::WholeWindows(r) = goal else {
        return vec![length];
    };
    let r = r.max(block_size).max(1);
    if length <= r || attempt == 0 {
        // One request's worth (pick's ranges are the application's requests, which need
        // not start on a window boundary) in one run; a longer range in one run if free
        // space has one.
        return vec![length];
    }
    let end = offset + length;
    let mut steps = Vec::new();
    let mut at = offset;
    while at < end {
        let next = ((at / r + 1) * r).min(end);
        steps.push(next - at);
        at = next;
    }
    steps
}

/// The judgement of a move the kernel placed itself (btrfs, f2fs, rewrite): the file's
/// extents now against `t.extents` from before it.
pub(crate) fn judge_result(t: &Target<'_>, offset: u64, length: u64) -> Result<Judgement> {
    // FIEMAP_FLAG_SYNC: the new extents have their addresses only once written back (on
    // btrfs also once their ordered extents completed); this waits for that, no commit.
    judge_mapped(t, offset, length, true)
}

/// As [`judge_result`]; `sync: false` where the blocks were placed before writeback
/// (fallocate on ext4 and xfs), so the map is read without writing anything back.
pub(crate) fn judge_mapped(
    t: &Target<'_>,
    offset: u64,
    length: u64,
    sync: bool,
) -> Result<Judgement> {
    let (lo, hi) = judged_span(offset, length, t.request_size, t.block_size);
    let now = fiemap::read_extents_span(t.file.as_fd(), sync, lo, hi)?;
    Ok(judge(
        t.extents,
        &now,
        offset,
        length,
        t.block_size,
        t.request_size,
    ))
}

/// The part of a file [`judge`] looks at for a range: the R-windows it touches and a block
/// either side; mapping only this keeps defrag linear in a file's extents.
pub(crate) fn judged_span(
    offset: u64,
    length: u64,
    request_size: u64,
    block_size: u64,
) -> (u64, u64) {
    let r = request_size.max(1);
    let end = offset + length;
    (
        (offset - offset % r).saturating_sub(block_size),
        end.div_ceil(r).saturating_mul(r).saturating_add(block_size),
    )
}

/// Fragments of [offset, offset+length) in an extent list (clipped to the range).
fn fragments_in(
    extents: &[Extent],
    offset: u64,
    length: u64,
    block_size: u64,
) -> Vec<fragkit_core::layout::model::Fragment> {
    let layout = FileLayout {
        size: offset + length,
        allocated: 0,
        block_size: block_size as u32,
        extents: extents.to_vec(),
    };
    fragkit_core::layout::model::clip_fragments(&layout.fragments(), offset, offset + length)
}

/// Copy [offset, offset+length) from one file to the same offsets of another.
pub(crate) fn copy_range_data(from: &File, to: &File, offset: u64, length: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; (1 << 20).min(length as usize).max(1)];
    let mut pos = offset;
    let end = offset + length;
    while pos < end {
        let want = ((end - pos) as usize).min(buf.len());
        let n = from.read_at(&mut buf[..want], pos)?;
        if n == 0 {
            break; // past EOF: nothing more to copy
        }
        to.write_all_at(&buf[..n], pos)?;
        pos += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_window_settles_for_better_longer_ranges_retry_by_window() {
        let r = 128 << 10;
        assert!(settles(Goal::FewerFragments, 0, 64 << 20));
        assert!(settles(Goal::WholeWindows(r), 0, r));
        assert!(settles(Goal::WholeWindows(r), r + 4096, 8192));
        assert!(!settles(Goal::WholeWindows(r), 0, 2 * r));
        assert!(!settles(Goal::WholeWindows(r), r - 4096, 8192));
    }

    #[test]
    fn donors_are_built_one_window_per_call_after_a_whole_range_call_failed() {
        let (k, r) = (1u64 << 10, 128u64 << 10);
        let w = Goal::WholeWindows(r);
        // Bypass: a run of windows in one call first, then one call per window.
        assert_eq!(donor_steps(None, w, 4096, 3 * r, 3 * r, 0), vec![3 * r]);
        assert_eq!(donor_steps(None, w, 4096, 3 * r, 3 * r, 1), vec![r, r, r]);
        // Pick: one request's worth, wherever it starts, in one call on every attempt.
        assert_eq!(donor_steps(None, w, 4096, 416 * k, r, 3), vec![r]);
        assert_eq!(donor_steps(None, w, 4096, 416 * k, 8192, 1), vec![8192]);
        // Longer and unaligned: cut at the window boundaries.
        assert_eq!(
            donor_steps(None, w, 4096, 416 * k, 2 * r, 1),
            vec![96 * k, r, 32 * k]
        );
        // Full mode: the whole range, or the free-space plan's pieces.
        assert_eq!(
            donor_steps(None, Goal::FewerFragments, 4096, 0, 64 * r, 1),
            vec![64 * r]
        );
        assert_eq!(
            donor_steps(
                Some(&[5 * r, 3 * r]),
                Goal::FewerFragments,
                4096,
                0,
                8 * r,
                0
            ),
            vec![5 * r, 3 * r]
        );
    }
}
