//! What file system a path lives on: statfs(2)/fstatfs(2) (the one wrapper) and FIGETBSZ.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// FIGETBSZ = _IO(0x00, 2): the block size FIEMAP/FIBMAP reports in (include/uapi/linux/fs.h).
const FIGETBSZ: libc::c_ulong = 2;

/// Per-file-system facts the extent engine needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsInfo {
    /// statfs f_type magic (include/uapi/linux/magic.h).
    pub magic: u64,
    /// Fundamental block size (f_bsize).
    pub block_size: u32,
    /// Total blocks (f_blocks), in f_frsize units.
    pub blocks: u64,
    /// Free blocks for unprivileged users (f_bavail).
    pub blocks_available: u64,
    /// Free blocks (f_bfree).
    pub blocks_free: u64,
    /// The unit f_blocks/f_bfree/f_bavail count in (f_frsize).
    pub fragment_size: u64,
    /// f_fsid: what fanotify reports events' file systems by.
    pub fsid: [i32; 2],
}

pub const EXT4_MAGIC: u64 = 0xEF53;
pub const XFS_MAGIC: u64 = 0x5846_5342;
pub const BTRFS_MAGIC: u64 = 0x9123_683E;
pub const F2FS_MAGIC: u64 = 0xF2F5_2010;
pub const TMPFS_MAGIC: u64 = 0x0102_1994;
pub const CGROUP2_MAGIC: u64 = 0x6367_7270;

impl FsInfo {
    /// All zero: a placeholder until a file's file system is known.
    pub fn unknown() -> FsInfo {
        FsInfo {
            magic: 0,
            block_size: 0,
            blocks: 0,
            blocks_available: 0,
            blocks_free: 0,
            fragment_size: 0,
            fsid: [0, 0],
        }
    }

    /// fstatfs(2) on an open file, with the block size FIGETBSZ reports where it answers.
    pub fn of_fd(fd: BorrowedFd<'_>) -> io::Result<FsInfo> {
        // SAFETY: statfs is plain data; fstatfs fills it or fails.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: `st` is a live, writable `libc::statfs` and `fd` is borrowed, so open, for the
        // call; fstatfs(2) writes at most size_of::<statfs>() bytes into `st`.
        if unsafe { libc::fstatfs(fd.as_raw_fd(), &mut st) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut info = FsInfo::from_statfs(&st);
        if let Ok(bs) = block_size_of(fd) {
            info.block_size = bs;
        }
        Ok(info)
    }

    /// statfs(2) on a path, without opening it (a FIFO or a cgroup directory is fine);
    /// block_size is f_bsize.
    pub fn of_path(path: &Path) -> io::Result<FsInfo> {
        let c = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
        // SAFETY: statfs is plain data; statfs fills it or fails.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: `c` is a NUL-terminated CString alive for the call and `st` a live, writable
        // `libc::statfs`; statfs(2) writes at most size_of::<statfs>() bytes into it.
        if unsafe { libc::statfs(c.as_ptr(), &mut st) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(FsInfo::from_statfs(&st))
    }

    fn from_statfs(st: &libc::statfs) -> FsInfo {
        FsInfo {
            magic: st.f_type as u64,
            block_size: st.f_bsize as u32,
            blocks: st.f_blocks,
            blocks_available: st.f_bavail,
            blocks_free: st.f_bfree,
            fragment_size: st.f_frsize as u64,
            // SAFETY: fsid_t is two i32 (include/uapi/asm-generic/posix_types.h __kernel_fsid_t).
            fsid: unsafe { std::mem::transmute::<libc::fsid_t, [i32; 2]>(st.f_fsid) },
        }
    }

    /// Short name of the file system type ("ext4", "xfs", ...), or the magic in hex.
    pub fn type_name(&self) -> String {
        fs_type_name(self.magic)
    }

    /// File systems known to have no FIEMAP at all; scanning them can only fail.
    pub fn lacks_fiemap(&self) -> bool {
        matches!(
            self.magic,
            TMPFS_MAGIC
                | 0x9fa0      // procfs
                | 0x6265_6572 // sysfs
                | 0x1373      // devfs/devtmpfs shares tmpfs magic; kept for old kernels
                | CGROUP2_MAGIC
                | 0x2702_0420 // ramfs (shares tmpfs magic on modern kernels)
        )
    }
}

/// FIGETBSZ on an open file: the unit FIEMAP-based tools (filefrag) count blocks in.
pub(crate) fn block_size_of(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let mut bs: libc::c_int = 0;
    // SAFETY: FIGETBSZ writes one int.
    if unsafe { libc::ioctl(fd.as_raw_fd(), FIGETBSZ as _, &mut bs) } < 0 || bs <= 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(bs as u32)
}

pub fn fs_type_name(magic: u64) -> String {
    match known_fs_name(magic) {
        Some(name) => name.into(),
        None => format!("{magic:#x}"),
    }
}

/// The name of a file system type this tool knows by its magic number.
pub fn known_fs_name(magic: u64) -> Option<&'static str> {
    Some(match magic {
        EXT4_MAGIC => "ext4",
        XFS_MAGIC => "xfs",
        BTRFS_MAGIC => "btrfs",
        F2FS_MAGIC => "f2fs",
        TMPFS_MAGIC => "tmpfs",
        0x9fa0 => "proc",
        0x6265_6572 => "sysfs",
        0x794c_7630 => "overlay",
        0x6573_5546 => "fuse",
        0x6969 => "nfs",
        0x5346_544e => "ntfs",
        0x4d44 => "vfat",
        0x2fc1_2fc1 => "zfs",
        0xcafe_4a11 => "bpf",
        CGROUP2_MAGIC => "cgroup2",
        0xca45_1a4e => "bcachefs",
        _ => return None,
    })
}
