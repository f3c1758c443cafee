//! Per-inode ioctls: attribute flags (chattr) and the generation number.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// FS_IOC_GETFLAGS = _IOR('f', 1, long) (include/uapi/linux/fs.h); the kernel reads an int.
const FS_IOC_GETFLAGS: libc::c_ulong =
    nix::request_code_read!(b'f', 1, std::mem::size_of::<libc::c_long>()) as libc::c_ulong;
/// FS_IOC_GETVERSION = _IOR('v', 1, long) (include/uapi/linux/fs.h): i_generation.
const FS_IOC_GETVERSION: libc::c_ulong =
    nix::request_code_read!(b'v', 1, std::mem::size_of::<libc::c_long>()) as libc::c_ulong;

/// FS_IMMUTABLE_FL and FS_APPEND_FL (include/uapi/linux/fs.h).
pub const FS_IMMUTABLE_FL: u32 = 0x10;
pub const FS_APPEND_FL: u32 = 0x20;

/// The inode's attribute flags (what lsattr shows).
pub fn flags(file: &File) -> io::Result<u32> {
    let mut flags: libc::c_int = 0;
    // SAFETY: FS_IOC_GETFLAGS writes one int.
    if unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_GETFLAGS as _, &mut flags) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(flags as u32)
}

/// The inode's generation (with the inode number, what ext4/xfs file handles hold).
pub fn generation(file: &File) -> io::Result<u32> {
    let mut g: libc::c_long = 0;
    // SAFETY: the ioctl writes one long.
    if unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_GETVERSION as _, &mut g) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(g as u32)
}

#[cfg(test)]
mod tests {
    #[test]
    fn request_codes_match_the_header() {
        assert_eq!(super::FS_IOC_GETFLAGS, 0x8008_6601);
        assert_eq!(super::FS_IOC_GETVERSION, 0x8008_7601);
    }
}
