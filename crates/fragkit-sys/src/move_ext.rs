//! EXT4_IOC_MOVE_EXT: the kernel copies a range into a donor file's blocks and swaps the
//! block mappings under the inode locks, journalled. Used by the ext4 migrator (defrag)
//! and by the ext4 fragmentor of `age fragpicker-synthetic`.

use std::os::fd::AsRawFd;

/// struct move_extent (fs/ext4/ext4.h).
#[repr(C)]
#[derive(Default)]
struct MoveExtent {
    reserved: u32,
    donor_fd: u32,
    orig_start: u64,
    donor_start: u64,
    len: u64,
    moved_len: u64,
}

/// EXT4_IOC_MOVE_EXT = _IOWR('f', 15, struct move_extent) (fs/ext4/ext4.h).
const EXT4_IOC_MOVE_EXT: libc::c_ulong =
    nix::request_code_readwrite!(b'f', 15, std::mem::size_of::<MoveExtent>()) as libc::c_ulong;

/// One EXT4_IOC_MOVE_EXT call: exchange `len` blocks of `orig` from block `orig_start`
/// with the donor's from `donor_start` (the kernel copies the data into the donor's blocks
/// first). Returns the blocks moved, which may be fewer than asked.
pub fn move_ext(
    orig: &std::fs::File,
    donor: &std::fs::File,
    orig_start: u64,
    donor_start: u64,
    len: u64,
) -> std::io::Result<u64> {
    let mut me = MoveExtent {
        donor_fd: donor.as_raw_fd() as u32,
        orig_start,
        donor_start,
        len,
        ..Default::default()
    };
    // SAFETY: valid struct move_extent for the ioctl.
    let rc = unsafe { libc::ioctl(orig.as_raw_fd(), EXT4_IOC_MOVE_EXT as _, &mut me) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(me.moved_len)
}
