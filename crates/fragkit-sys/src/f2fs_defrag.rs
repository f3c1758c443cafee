//! F2FS_IOC_DEFRAGMENT: f2fs rewrites a range's blocks out of place (a new log location);
//! the node update is checkpointed.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// struct f2fs_defragment (include/uapi/linux/f2fs.h): bytes.
#[repr(C)]
struct F2fsDefragment {
    start: u64,
    len: u64,
}

/// F2FS_IOC_DEFRAGMENT = _IOWR(0xf5, 8, struct f2fs_defragment).
const F2FS_IOC_DEFRAGMENT: libc::c_ulong =
    nix::request_code_readwrite!(0xf5, 8, std::mem::size_of::<F2fsDefragment>()) as libc::c_ulong;

/// F2FS_IOC_DEFRAGMENT of [start, start+len) (bytes).
pub fn defragment(file: &File, start: u64, len: u64) -> io::Result<()> {
    let mut args = F2fsDefragment { start, len };
    // SAFETY: valid struct for the ioctl, which reads and writes it.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), F2FS_IOC_DEFRAGMENT as _, &mut args) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn request_code_matches_the_header() {
        assert_eq!(super::F2FS_IOC_DEFRAGMENT, 0xC010_F508);
    }
}
