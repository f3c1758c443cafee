//! xfs's atomic commit of a staged range: XFS_IOC_START_COMMIT samples the file's
//! freshness, XFS_IOC_COMMIT_RANGE exchanges a staged file's range into it only if the
//! file did not change since (EBUSY otherwise). Kernel 6.10+ (exchange-range), 6.13+
//! (commit-range).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

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

/// The freshness XFS_IOC_START_COMMIT sampled, for one [`Commit::commit`].
pub struct Commit {
    args: CommitRangeArgs,
}

/// XFS_IOC_START_COMMIT on `file` (the one to commit into). ENOTTY: the kernel has no
/// commit-range.
pub fn start_commit(file: &File) -> io::Result<Commit> {
    let mut args = CommitRangeArgs::default();
    // SAFETY: valid struct for the ioctl; the kernel fills file2_freshness.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), XFS_IOC_START_COMMIT as _, &mut args) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Commit { args })
}

impl Commit {
    /// XFS_IOC_COMMIT_RANGE with XFS_EXCHANGE_RANGE_DSYNC: exchange `staged`'s
    /// [offset, offset+length) with `file`'s (same offset in both), logged, data and
    /// metadata flushed. EBUSY: `file` changed since [`start_commit`]; EOPNOTSUPP: the file
    /// system lacks the exchange-range feature.
    pub fn commit(
        mut self,
        file: &File,
        staged: &File,
        offset: u64,
        length: u64,
    ) -> io::Result<()> {
        let args = &mut self.args;
        args.file1_fd = staged.as_raw_fd();
        args.file1_offset = offset;
        args.file2_offset = offset;
        args.length = length;
        args.flags = XFS_EXCHANGE_RANGE_DSYNC;
        // SAFETY: valid struct for the ioctl, which only reads it.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), XFS_IOC_COMMIT_RANGE as _, &*args) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn request_codes_match_the_header() {
        assert_eq!(super::XFS_IOC_START_COMMIT, 0x8058_5882);
        assert_eq!(super::XFS_IOC_COMMIT_RANGE, 0x4058_5883);
    }
}
