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
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use anyhow::{bail, Result};

use crate::layout::model::{Extent, FileLayout};
use crate::sys::fiemap;
use crate::sys::fsinfo::{BTRFS_MAGIC, EXT4_MAGIC, F2FS_MAGIC, XFS_MAGIC};

/// The file being defragmented, opened read-write, with its directory (for temp files).
pub struct Target<'a> {
    pub file: &'a File,
    pub dir: &'a File,
    pub size: u64,
    pub block_size: u64,
    pub extents: &'a [Extent],
    pub goal: Goal,
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

/// What happened to one range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeOutcome {
    /// Moved; bytes the migration wrote (data copied by the kernel).
    Moved { bytes: u64 },
    /// Left alone, for the reason given (e.g. no contiguous free space).
    Skipped(SkipReason),
}

/// Why a migrator left a range alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SkipReason {
    /// Free space could not give the range (this many bytes) fewer pieces; the caller may
    /// retry with smaller pieces.
    #[error("no contiguous space: free space cannot hold {} in fewer pieces", crate::units::HumanBytes(*.0))]
    NoContiguousSpace(u64),
    #[error("range lies past end of file")]
    PastEndOfFile,
    #[error("file kept changing during migration (commit refused 3 times)")]
    KeptChanging,
    #[error("shared (reflink/snapshot) extents: rewriting would unshare them; use --unshare")]
    Shared,
    #[error("compressed extents: their on-disk size is already small; not rewritten")]
    Compressed,
}

pub trait Migrator: Sync {
    /// The primitive used, for reports ("EXT4_IOC_MOVE_EXT").
    fn primitive(&self) -> &'static str;
    fn migrate(&self, t: &Target<'_>, offset: u64, length: u64) -> Result<RangeOutcome>;
}

/// How to migrate: the file system's safe primitive, or FragPicker's rewrite (unsafe).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Auto,
    Rewrite,
}

/// The migrator for a file system, by statfs magic.
pub fn for_fs(magic: u64, method: Method, unshare: bool) -> Result<Box<dyn Migrator>> {
    if method == Method::Rewrite {
        // F2FS rewrites out of place by itself (given the ipu_policy): no punch needed.
        if magic == F2FS_MAGIC {
            return Ok(Box::new(f2fs::Rewrite));
        }
        return Ok(Box::new(rewrite::Rewrite));
    }
    Ok(match magic {
        EXT4_MAGIC => Box::new(ext4::MoveExt),
        XFS_MAGIC => Box::new(xfs::CommitRange),
        BTRFS_MAGIC => Box::new(btrfs::DefragRange { unshare }),
        F2FS_MAGIC => Box::new(f2fs::Defragment),
        other => bail!(
            "{} has no range-granular atomic migration in fragkit (ext4, xfs, btrfs, f2fs are supported)",
            crate::sys::fsinfo::fs_type_name(other)
        ),
    })
}

/// An unnamed temporary file in `dir` (O_TMPFILE): nothing is left behind after a crash.
pub fn temp_file_in(dir: &File) -> io::Result<File> {
    let name = c".";
    // SAFETY: openat with O_TMPFILE on a directory fd; the fd is owned by the File below.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh fd.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Attempts at a contiguous donor before giving up on a range.
const DONOR_TRIES: usize = 6;

/// Why a range was not moved because free space could not give it one run.
pub fn no_contiguous_space(length: u64) -> RangeOutcome {
    RangeOutcome::Skipped(SkipReason::NoContiguousSpace(length))
}

/// A temporary file in `dir` with [offset, offset+length) preallocated so that it meets
/// the target's goal, or None if free space cannot give that.
///
/// Allocators aim near the new inode, where the fragments being fixed left small holes;
/// a donor that lands in them is kept open (holding those holes) while the next attempt
/// is pushed further out, and all of them are released when the caller drops the result.
pub fn donor_for(t: &Target<'_>, offset: u64, length: u64) -> Result<Option<(File, Vec<File>)>> {
    let now = fragments_in(t.extents, offset, length, t.block_size).len();
    let mut tried: Vec<(usize, File)> = Vec::new();
    for _ in 0..DONOR_TRIES {
        let donor = temp_file_in(t.dir)?;
        if let Err(e) = crate::sys::alloc::allocate(&donor, offset, length) {
            if e.raw_os_error() == Some(libc::ENOSPC) {
                break;
            }
            return Err(e.into());
        }
        let extents = fiemap::read_extents(donor.as_fd(), false)?;
        let frags = fragments_in(&extents, offset, length, t.block_size);
        let whole = frags.len() == 1
            || matches!(t.goal, Goal::WholeWindows(r) if crate::metrics::split_window_list(&frags, r).is_empty());
        if whole {
            return Ok(Some((donor, tried.into_iter().map(|(_, f)| f).collect())));
        }
        tried.push((frags.len(), donor));
    }
    // Full mode settles for the best attempt if it beats the file (e4defrag's criterion).
    if t.goal == Goal::FewerFragments {
        if let Some(best) = (0..tried.len()).min_by_key(|&i| tried[i].0) {
            if tried[best].0 < now {
                let (_, donor) = tried.swap_remove(best);
                return Ok(Some((donor, tried.into_iter().map(|(_, f)| f).collect())));
            }
        }
    }
    Ok(None)
}

/// Fragments of [offset, offset+length) in an extent list (clipped to the range).
fn fragments_in(
    extents: &[Extent],
    offset: u64,
    length: u64,
    block_size: u64,
) -> Vec<crate::layout::model::Fragment> {
    let layout = FileLayout {
        size: offset + length,
        allocated: 0,
        block_size: block_size as u32,
        extents: extents.to_vec(),
    };
    crate::layout::model::clip_fragments(&layout.fragments(), offset, offset + length)
}

/// Copy [offset, offset+length) from one file to the same offsets of another.
pub fn copy_range_data(from: &File, to: &File, offset: u64, length: u64) -> io::Result<()> {
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
    fn skip_reasons_read_as_before() {
        let RangeOutcome::Skipped(r) = no_contiguous_space(1 << 20) else {
            panic!("not skipped");
        };
        assert_eq!(r, SkipReason::NoContiguousSpace(1 << 20));
        assert_eq!(
            r.to_string(),
            "no contiguous space: free space cannot hold 1 MiB in fewer pieces"
        );
        assert_eq!(
            SkipReason::PastEndOfFile.to_string(),
            "range lies past end of file"
        );
    }
}
