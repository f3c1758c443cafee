//! xfs: stage the range in a temporary file, then XFS_IOC_COMMIT_RANGE swaps it in
//! atomically — and only if the file did not change since XFS_IOC_START_COMMIT sampled it
//! (EBUSY otherwise). The exchange is logged: after a crash the file holds either the old
//! or the new blocks. Kernel 6.10+ (exchange-range), 6.13+ (commit-range).
//!
//! The commit is issued on a descriptor opened through the file's xfs handle, which the
//! exchange leaves mtime and ctime alone for (as xfs_fsr's XFS_IOC_SWAPEXT does); where
//! that open is refused (no CAP_SYS_ADMIN) the commit sets them, and the caller is told.

use std::fs::File;

use anyhow::Result;
use fragkit_sys::xfs_commit;

use super::{
    copy_range_data, donor_for, not_better, stamp, Migrator, RangeOutcome, Restamp, Skip, SkipKind,
    Target,
};

pub(crate) struct CommitRange;

impl Migrator for CommitRange {
    fn primitive(&self) -> &'static str {
        "XFS_IOC_COMMIT_RANGE"
    }

    /// The file opened through its handle: the commit keeps its times through it.
    fn open_for_primitive(&self, file: &File, dir: &File) -> Option<File> {
        xfs_commit::open_keeping_times(file, dir).ok()
    }

    fn migrate(&self, t: &Target<'_>, offset: u64, length: u64) -> Result<RangeOutcome> {
        // The exchanged range may end at EOF unaligned, never past it.
        let length = length.min(t.size.saturating_sub(offset));
        if length == 0 {
            return Ok(RangeOutcome::Skipped(Skip::new(
                SkipKind::PastEof,
                "range lies past end of file",
            )));
        }
        // The descriptor the commit keeps the times through; else the file's own.
        let into = t.for_primitive.unwrap_or(t.file);
        for _attempt in 0..3 {
            let commit = match xfs_commit::start_commit(into) {
                Ok(c) => c,
                Err(e) => {
                    if e.raw_os_error() == Some(libc::ENOTTY) {
                        anyhow::bail!(
                            "this kernel's xfs has no XFS_IOC_START_COMMIT (needs Linux 6.13+)"
                        );
                    }
                    return Err(e.into());
                }
            };
            // Without the kept times the commit changes mtime and ctime; what they were as
            // it began and right after let the caller tell its change from another
            // writer's.
            let began = stamp(t.file);
            let alloc_len = length.div_ceil(t.block_size) * t.block_size;
            let (staged, judged, _sinks) = match donor_for(t, offset, alloc_len)? {
                Ok(d) => d,
                Err(best) => return Ok(not_better(best, alloc_len)),
            };
            copy_range_data(t.file, &staged, offset, length)?;
            let Err(e) = commit.commit(into, &staged, offset, length) else {
                // The staged file now holds the old blocks; closing it frees them.
                return Ok(RangeOutcome::Moved {
                    bytes: length,
                    judged,
                    restamped: t.for_primitive.is_none().then(|| Restamp {
                        began,
                        ended: stamp(t.file),
                    }),
                });
            };
            if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
                anyhow::bail!("this xfs lacks the exchange-range feature (enable it with `xfs_admin -O exchange=1`, xfsprogs 6.10+); fragkit does not fall back to a non-atomic copy");
            }
            if e.raw_os_error() != Some(libc::EBUSY) {
                return Err(e.into());
            }
            // Someone wrote the file meanwhile: stage again from its new contents.
        }
        Ok(RangeOutcome::Skipped(Skip::new(
            SkipKind::KeptChanging,
            "file kept changing during migration (commit refused 3 times)",
        )))
    }
}
