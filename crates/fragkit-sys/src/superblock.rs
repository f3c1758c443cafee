//! Group geometry read from the on-disk superblock of a mounted ext4 or xfs file system.
//!
//! Neither statfs nor GETFSMAP says how big a block group / allocation group is; the
//! superblock does. Offsets from fs/ext4/ext4.h (struct ext4_super_block, little endian)
//! and fs/xfs/libxfs/xfs_format.h (struct xfs_dsb, big endian).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// How a file system divides its blocks into groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupGeometry {
    /// "block group" (ext4) or "allocation group" (xfs).
    pub group_kind: &'static str,
    pub block_size: u64,
    /// Blocks on the data device.
    pub total_blocks: u64,
    /// First block of group 0 (ext4 with 1 KiB blocks starts at 1).
    pub first_block: u64,
    pub blocks_per_group: u64,
    pub groups: u64,
}

impl GroupGeometry {
    /// Block range [start, end) of group `g`.
    pub fn group_range(&self, g: u64) -> (u64, u64) {
        let start = self.first_block + g * self.blocks_per_group;
        (
            start,
            (start + self.blocks_per_group).min(self.total_blocks),
        )
    }
    /// Group holding block `b` (blocks before the first group count as group 0).
    pub fn group_of(&self, b: u64) -> u64 {
        (b.saturating_sub(self.first_block) / self.blocks_per_group).min(self.groups - 1)
    }
}

/// The block device node of a mounted file system, from its st_dev.
pub fn device_path(dev: libc::dev_t) -> io::Result<PathBuf> {
    let (major, minor) = super::dev::split(dev);
    let uevent = format!("/sys/dev/block/{major}:{minor}/uevent");
    let text = std::fs::read_to_string(&uevent)?;
    let name = text
        .lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no DEVNAME in uevent"))?;
    Ok(PathBuf::from("/dev").join(name))
}

fn le32(b: &[u8], at: usize) -> u64 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as u64
}
fn be32(b: &[u8], at: usize) -> u64 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap()) as u64
}
fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

/// Read the group geometry of the ext4 or xfs file system on `device`.
pub fn read_geometry(device: &std::path::Path) -> io::Result<GroupGeometry> {
    let f = File::open(device)?;
    let mut sb = vec![0u8; 4096];
    f.read_exact_at(&mut sb, 0)?;
    if &sb[0..4] == b"XFSB" {
        let block_size = be32(&sb, 4);
        let total_blocks = be64(&sb, 8);
        let agblocks = be32(&sb, 84);
        let agcount = be32(&sb, 88);
        return Ok(GroupGeometry {
            group_kind: "allocation group",
            block_size,
            total_blocks,
            first_block: 0,
            blocks_per_group: agblocks,
            groups: agcount,
        });
    }
    let e = &sb[1024..2048];
    if u16::from_le_bytes([e[56], e[57]]) == 0xEF53 {
        let block_size = 1024u64 << le32(e, 24);
        let incompat = le32(e, 0x60);
        let mut total_blocks = le32(e, 4);
        if incompat & 0x80 != 0 {
            total_blocks |= le32(e, 0x150) << 32;
        }
        let first_block = le32(e, 20);
        let per_group = le32(e, 32);
        if per_group == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "ext4 superblock: 0 blocks per group",
            ));
        }
        return Ok(GroupGeometry {
            group_kind: "block group",
            block_size,
            total_blocks,
            first_block,
            blocks_per_group: per_group,
            groups: (total_blocks - first_block).div_ceil(per_group),
        });
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "neither an ext4 nor an xfs superblock",
    ))
}
