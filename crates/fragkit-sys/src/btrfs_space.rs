//! BTRFS_IOC_SPACE_INFO: how much of each chunk type (data, metadata, system) btrfs has
//! allocated and used. btrfs has no GETFSMAP, so this is what it tells about free space.
//!
//! Layout and numbers from include/uapi/linux/btrfs.h and btrfs_tree.h.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// BTRFS_IOC_SPACE_INFO = _IOWR(0x94, 20, struct btrfs_ioctl_space_args) (uapi/linux/btrfs.h).
const BTRFS_IOC_SPACE_INFO: libc::c_ulong = 0xC010_9414;

/// struct btrfs_ioctl_space_info (24 bytes).
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct RawSpaceInfo {
    flags: u64,
    total_bytes: u64,
    used_bytes: u64,
}

/// One chunk type and RAID profile: bytes allocated to chunks and bytes used in them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SpaceInfo {
    /// "data", "metadata", "system", "global_reserve" (or a mix, e.g. "data+metadata").
    pub kind: String,
    /// "single", "dup", "raid1", ...
    pub profile: String,
    pub total: u64,
    pub used: u64,
}

fn describe(flags: u64) -> (String, String) {
    // BTRFS_SPACE_INFO_GLOBAL_RSV = 1 << 49 (uapi/linux/btrfs.h).
    if flags & (1 << 49) != 0 {
        return ("global_reserve".into(), "single".into());
    }
    let mut kinds = Vec::new();
    for (bit, name) in [(1, "data"), (4, "metadata"), (2, "system")] {
        if flags & bit != 0 {
            kinds.push(name);
        }
    }
    let profile = [
        (8, "raid0"),
        (16, "raid1"),
        (32, "dup"),
        (64, "raid10"),
        (128, "raid5"),
        (256, "raid6"),
        (512, "raid1c3"),
        (1024, "raid1c4"),
    ]
    .iter()
    .find(|(bit, _)| flags & bit != 0)
    .map_or("single", |(_, n)| n);
    (kinds.join("+"), profile.to_string())
}

/// Space per chunk type of the btrfs file system `fd` is on.
pub fn space_info(fd: BorrowedFd<'_>) -> io::Result<Vec<SpaceInfo>> {
    // First call with no slots: the kernel says how many there are.
    let mut head = [0u64; 2];
    // SAFETY: head is struct btrfs_ioctl_space_args with space_slots = 0.
    if unsafe { libc::ioctl(fd.as_raw_fd(), BTRFS_IOC_SPACE_INFO as _, head.as_mut_ptr()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = head[1] as usize;
    // u64 words: 2 for the head, 3 per record.
    let mut buf = vec![0u64; 2 + 3 * n];
    buf[0] = n as u64;
    // SAFETY: buf holds the head and space_slots records.
    if unsafe { libc::ioctl(fd.as_raw_fd(), BTRFS_IOC_SPACE_INFO as _, buf.as_mut_ptr()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let filled = (buf[1] as usize).min(n);
    Ok((0..filled)
        .map(|i| {
            let r = RawSpaceInfo {
                flags: buf[2 + 3 * i],
                total_bytes: buf[3 + 3 * i],
                used_bytes: buf[4 + 3 * i],
            };
            let (kind, profile) = describe(r.flags);
            SpaceInfo {
                kind,
                profile,
                total: r.total_bytes,
                used: r.used_bytes,
            }
        })
        .collect())
}
