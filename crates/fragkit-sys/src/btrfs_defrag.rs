//! BTRFS_IOC_DEFRAG_RANGE: btrfs rewrites a file's range copy-on-write; the old extents
//! stay valid until the new ones are committed.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// struct btrfs_ioctl_defrag_range_args (include/uapi/linux/btrfs.h).
#[repr(C)]
#[derive(Default)]
struct DefragRangeArgs {
    start: u64,
    len: u64,
    flags: u64,
    extent_thresh: u32,
    compress_type: u32,
    unused: [u32; 4],
}

/// BTRFS_IOC_DEFRAG_RANGE = _IOW(0x94, 16, struct btrfs_ioctl_defrag_range_args).
const BTRFS_IOC_DEFRAG_RANGE: libc::c_ulong =
    nix::request_code_write!(0x94, 16, std::mem::size_of::<DefragRangeArgs>()) as libc::c_ulong;
/// BTRFS_DEFRAG_RANGE_START_IO (include/uapi/linux/btrfs.h): start writeback when done.
pub const BTRFS_DEFRAG_RANGE_START_IO: u64 = 2;

/// BTRFS_IOC_DEFRAG_RANGE of [start, start+len): extents smaller than `extent_thresh`
/// bytes are rewritten; `flags` are BTRFS_DEFRAG_RANGE_* (no compression asked).
pub fn defrag_range(
    file: &File,
    start: u64,
    len: u64,
    flags: u64,
    extent_thresh: u32,
) -> io::Result<()> {
    let args = DefragRangeArgs {
        start,
        len,
        flags,
        extent_thresh,
        ..Default::default()
    };
    // SAFETY: valid args struct for the ioctl, which only reads it.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), BTRFS_IOC_DEFRAG_RANGE as _, &args) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn request_code_matches_the_header() {
        assert_eq!(super::BTRFS_IOC_DEFRAG_RANGE, 0x4030_9410);
    }
}
