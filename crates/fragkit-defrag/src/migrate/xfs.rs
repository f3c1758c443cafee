//! xfs: stage the range in a temporary file, then XFS_IOC_COMMIT_RANGE swaps it in
//! atomically — and only if the file did not change since XFS_IOC_START_COMMIT sampled it
//! (EBUSY otherwise). The exchange is logged: after a crash the file holds either the old
//! or the new blocks. Kernel 6.10+ (exchange-range), 6.13+ (commit-range).

use std::os::fd::AsRawFd;

use anyhow::Result;

use super::{
    copy_range_data, donor_for, not_better, Migrator, RangeOutcome, Skip, SkipKind, Target,
};

/// struct xfs_commit_range (fs/xfs/libxfs/xfs_fs.h).
#[repr(C)]
#[derive(Default)]
struct CommitRangeArgs {
    file1_fd: i32,
    pad: u32,
    file1_offset: u64,
    file2_offset: u64,
    length: u64,
    flags: u64,
    file2_freshness: [u64; 6],
}

/// XFS_IOC_START_COMMIT = _IOR('X', 130, struct xfs_commit_range) (fs/xfs/libxfs/xfs_fs.h).
const XFS_IOC_START_COMMIT: libc::c_ulong =
    nix::request_code_read!(b'X', 130, std::mem::size_of::<CommitRangeArgs>()) as libc::c_ulong;
/// XFS_IOC_COMMIT_RANGE = _IOW('X', 131, struct xfs_commit_range).
const XFS_IOC_COMMIT_RANGE: libc::c_ulong =
    nix::request_code_write!(b'X', 131, std::mem::size_of::<CommitRangeArgs>()) as libc::c_ulong;
/// XFS_EXCHANGE_RANGE_DSYNC: flush data and metadata before returning.
const XFS_EXCHANGE_RANGE_DSYNC: u64 = 1 << 1;

pub(crate) struct CommitRange;

impl Migrator for CommitRange {
    fn primitive(&self) -> &'static str {
        "XFS_IOC_COMMIT_RANGE"
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
        for _attempt in 0..3 {
            let mut args = CommitRangeArgs::default();
            // SAFETY: valid struct for the ioctl; the kernel fills file2_freshness.
            let rc =
                unsafe { libc::ioctl(t.file.as_raw_fd(), XFS_IOC_START_COMMIT as _, &mut args) };
            if rc < 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::ENOTTY) {
                    anyhow::bail!(
                        "this kernel's xfs has no XFS_IOC_START_COMMIT (needs Linux 6.13+)"
                    );
                }
                return Err(e.into());
            }
            let alloc_len = length.div_ceil(t.block_size) * t.block_size;
            let (staged, judged, _sinks) = match donor_for(t, offset, alloc_len)? {
                Ok(d) => d,
                Err(best) => return Ok(not_better(best, alloc_len)),
            };
            copy_range_data(t.file, &staged, offset, length)?;
            args.file1_fd = staged.as_raw_fd();
            args.file1_offset = offset;
            args.file2_offset = offset;
            args.length = length;
            args.flags = XFS_EXCHANGE_RANGE_DSYNC;
            // SAFETY: as above.
            let rc = unsafe { libc::ioctl(t.file.as_raw_fd(), XFS_IOC_COMMIT_RANGE as _, &args) };
            if rc == 0 {
                // The staged file now holds the old blocks; closing it frees them.
                return Ok(RangeOutcome::Moved {
                    bytes: length,
                    judged,
                });
            }
            let e = std::io::Error::last_os_error();
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
