//! FICLONERANGE: share a range of one file's extents with another (reflink; btrfs, xfs).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// struct file_clone_range (include/uapi/linux/fs.h).
#[repr(C)]
struct FileCloneRange {
    src_fd: i64,
    src_offset: u64,
    src_length: u64,
    dest_offset: u64,
}

/// FICLONERANGE = _IOW(0x94, 13, struct file_clone_range) (include/uapi/linux/fs.h).
const FICLONERANGE: libc::c_ulong = 0x4020_940D;

/// Make dest[dest_offset..+len] share src[src_offset..+len]'s extents (no data copied).
pub fn clone_range(
    src: &File,
    src_offset: u64,
    len: u64,
    dest: &File,
    dest_offset: u64,
) -> io::Result<()> {
    let arg = FileCloneRange {
        src_fd: src.as_raw_fd() as i64,
        src_offset,
        src_length: len,
        dest_offset,
    };
    // SAFETY: the ioctl reads one file_clone_range.
    if unsafe { libc::ioctl(dest.as_raw_fd(), FICLONERANGE as _, &arg) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
