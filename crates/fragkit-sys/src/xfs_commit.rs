//! xfs's atomic commit of a staged range: XFS_IOC_START_COMMIT samples the file's
//! freshness, XFS_IOC_COMMIT_RANGE exchanges a staged file's range into it only if the
//! file did not change since (EBUSY otherwise). Kernel 6.10+ (exchange-range), 6.13+
//! (commit-range).
//!
//! The exchange sets the file's mtime and ctime unless the descriptor it is issued on has
//! FMODE_NOCMTIME (fs/xfs/xfs_exchrange.c, xfs_exchange_range), which only xfs's
//! XFS_IOC_OPEN_BY_HANDLE gives (fs/xfs/xfs_handle.c, as xfs_fsr and DMAPI use it):
//! [`open_keeping_times`] opens the file that way.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};

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

/// struct xfs_fsop_handlereq (fs/xfs/libxfs/xfs_fs.h).
#[repr(C)]
struct HandleReq {
    fd: u32,
    path: *mut libc::c_void,
    oflags: u32,
    ihandle: *mut libc::c_void,
    ihandlen: u32,
    ohandle: *mut libc::c_void,
    ohandlen: *mut u32,
}

/// XFS_IOC_FD_TO_HANDLE = _IOWR('X', 106, struct xfs_fsop_handlereq).
const XFS_IOC_FD_TO_HANDLE: libc::c_ulong =
    nix::request_code_readwrite!(b'X', 106, std::mem::size_of::<HandleReq>()) as libc::c_ulong;
/// XFS_IOC_OPEN_BY_HANDLE = _IOWR('X', 107, struct xfs_fsop_handlereq).
const XFS_IOC_OPEN_BY_HANDLE: libc::c_ulong =
    nix::request_code_readwrite!(b'X', 107, std::mem::size_of::<HandleReq>()) as libc::c_ulong;
/// sizeof(xfs_handle_t): fsid (8 bytes) and the file id (16); MAXHANSIZ in xfsprogs.
const HANDLE_LEN: usize = 24;

/// `file` opened again, read-write, through its xfs handle: a descriptor with
/// FMODE_NOCMTIME and O_NOATIME, so that neither an exchange issued on it nor reads and
/// writes through it change the file's times (what xfs_fsr relies on). `dir` is a
/// directory on the same file system (the open is issued on it: ENOTDIR on a file).
/// Needs CAP_SYS_ADMIN (EPERM otherwise); ENOTTY off xfs.
pub fn open_keeping_times(file: &File, dir: &File) -> io::Result<File> {
    let mut handle = [0u8; HANDLE_LEN];
    let mut handle_len = HANDLE_LEN as u32;
    let mut req = HandleReq {
        fd: file.as_raw_fd() as u32,
        path: std::ptr::null_mut(),
        oflags: 0,
        ihandle: std::ptr::null_mut(),
        ihandlen: 0,
        ohandle: handle.as_mut_ptr().cast(),
        ohandlen: &mut handle_len,
    };
    // SAFETY: valid request; the kernel writes at most *ohandlen (HANDLE_LEN) bytes to
    // `handle` and the length to `handle_len`, both alive for the call.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), XFS_IOC_FD_TO_HANDLE as _, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut open = HandleReq {
        fd: 0,
        path: std::ptr::null_mut(),
        oflags: (libc::O_RDWR | libc::O_LARGEFILE) as u32,
        ihandle: handle.as_mut_ptr().cast(),
        ihandlen: handle_len.min(HANDLE_LEN as u32),
        ohandle: std::ptr::null_mut(),
        ohandlen: std::ptr::null_mut(),
    };
    // SAFETY: valid request; the kernel reads `ihandlen` bytes of `handle` (alive for the
    // call) and returns a new descriptor.
    let fd = unsafe { libc::ioctl(dir.as_raw_fd(), XFS_IOC_OPEN_BY_HANDLE as _, &mut open) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor from the ioctl, owned by nobody else.
    let f = unsafe { File::from_raw_fd(fd) };
    // The ioctl installs the descriptor without close-on-exec (get_unused_fd_flags(0)).
    // SAFETY: F_SETFD on a descriptor we own.
    if unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    #[test]
    fn request_codes_match_the_header() {
        assert_eq!(super::XFS_IOC_START_COMMIT, 0x8058_5882);
        assert_eq!(super::XFS_IOC_COMMIT_RANGE, 0x4058_5883);
        // xfs_fsop_handlereq is 56 bytes on 64-bit: _IOWR('X', 106/107, 56).
        assert_eq!(super::XFS_IOC_FD_TO_HANDLE, 0xc038_586a);
        assert_eq!(super::XFS_IOC_OPEN_BY_HANDLE, 0xc038_586b);
    }
}
