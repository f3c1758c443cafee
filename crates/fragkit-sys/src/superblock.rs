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

/// The device byte ranges of an ext4 internal journal, from the superblock's backup of the
/// journal inode's block map (`s_jnl_blocks`, the extent tree's root; ext4.h): what
/// GETFSMAP cannot tell (it reports the journal's blocks as "unknown"). Empty when the
/// file system is not ext4, its journal is external or absent, or the backup is not a
/// depth-0 extent root (a journal in more than four extents, or block-mapped).
pub fn ext4_journal_ranges(device: &std::path::Path) -> io::Result<Vec<(u64, u64)>> {
    let f = File::open(device)?;
    let mut sb = vec![0u8; 1024];
    f.read_exact_at(&mut sb, 1024)?;
    Ok(journal_ranges_of(&sb))
}

/// [`ext4_journal_ranges`] of a 1024-byte ext4 superblock.
fn journal_ranges_of(e: &[u8]) -> Vec<(u64, u64)> {
    if e.len() < 1024 {
        return Vec::new();
    }
    let le16 = |at: usize| u16::from_le_bytes([e[at], e[at + 1]]) as u64;
    const HAS_JOURNAL: u64 = 0x4;
    const JNL_BACKUP_BLOCKS: u8 = 1;
    const EXTENT_MAGIC: u64 = 0xF30A;
    let internal = le32(e, 0xE0) != 0 && le32(e, 0xE4) == 0 && e[0xD0..0xE0] == [0; 16];
    if le16(56) != 0xEF53
        || le32(e, 0x5C) & HAS_JOURNAL == 0
        || !internal
        || e[0xFD] != JNL_BACKUP_BLOCKS
    {
        return Vec::new();
    }
    let block_size = 1024u64 << le32(e, 24).min(16);
    // i_block[15] of the journal inode: a 12-byte extent header, then up to 4 extents.
    let root = 0x10C;
    if le16(root) != EXTENT_MAGIC || le16(root + 6) != 0 {
        return Vec::new();
    }
    let entries = le16(root + 2).min(4) as usize;
    (0..entries)
        .filter_map(|i| {
            let x = root + 12 + 12 * i;
            // ee_len above 32768 marks an unwritten extent of ee_len - 32768 blocks.
            let len = match le16(x + 4) {
                l if l > 32768 => l - 32768,
                l => l,
            };
            let start = (le16(x + 6) << 32) | le32(e, x + 8);
            (len > 0).then(|| (start * block_size, (start + len) * block_size))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ext4 superblock with 4 KiB blocks whose journal inode (8) is one extent of
    /// 16384 blocks at block 262144, as `mkfs.ext4` makes it on a 2 GiB file system.
    fn superblock() -> Vec<u8> {
        let mut e = vec![0u8; 1024];
        let put16 =
            |e: &mut Vec<u8>, at: usize, v: u16| e[at..at + 2].copy_from_slice(&v.to_le_bytes());
        let put32 =
            |e: &mut Vec<u8>, at: usize, v: u32| e[at..at + 4].copy_from_slice(&v.to_le_bytes());
        put16(&mut e, 56, 0xEF53);
        put32(&mut e, 24, 2);
        put32(&mut e, 0x5C, 0x4);
        put32(&mut e, 0xE0, 8);
        e[0xFD] = 1;
        put16(&mut e, 0x10C, 0xF30A);
        put16(&mut e, 0x10C + 2, 1);
        put16(&mut e, 0x10C + 4, 4);
        put32(&mut e, 0x10C + 12, 0);
        put16(&mut e, 0x10C + 16, 16384);
        put32(&mut e, 0x10C + 20, 262144);
        e
    }

    #[test]
    fn the_internal_journal_is_found_in_the_superblock_backup() {
        assert_eq!(
            journal_ranges_of(&superblock()),
            vec![(262144 * 4096, (262144 + 16384) * 4096)]
        );
    }

    #[test]
    fn no_ranges_without_an_internal_extent_mapped_journal() {
        let mut external = superblock();
        external[0xE4] = 7;
        assert!(journal_ranges_of(&external).is_empty());
        let mut none = superblock();
        none[0x5C] = 0;
        assert!(journal_ranges_of(&none).is_empty());
        let mut deep = superblock();
        deep[0x10C + 6] = 1;
        assert!(journal_ranges_of(&deep).is_empty());
        let mut not_ext4 = superblock();
        not_ext4[56] = 0;
        assert!(journal_ranges_of(&not_ext4).is_empty());
    }
}
