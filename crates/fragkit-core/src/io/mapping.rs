//! Reading a file's mapping back into memory after a cache drop, apart from its data.
//!
//! After `drop_caches` a read of a file first needs the metadata that maps it: the inode,
//! the extent tree (ext4), the extent list (xfs), the file's extent items and the data's
//! checksum items (btrfs). Read in the middle of a timed pass, those blocks are device
//! requests of their own, and on ext4 the data requests are also cut where two extent
//! records meet even when their blocks are physically contiguous (seen with `fragkit
//! trace --block`); with the mapping read first, ext4's extent status cache holds such
//! records joined and the request goes out whole. Reading the mapping first makes the
//! data pass's device requests exactly what the file's layout predicts, and counts the
//! metadata reads on their own.

use std::fs::File;
use std::os::fd::AsFd;

use anyhow::{anyhow, Result};

use fragkit_sys::fiemap::read_extents;

/// Read `file`'s mapping metadata into the kernel's caches: FIEMAP walks the whole
/// extent map (ext4 reads every extent-tree block and fills its extent status cache; xfs
/// reads the extent btree into the in-core extent list; btrfs reads the file's extent
/// items); on btrfs also the checksum items of every data extent, which a read looks up
/// to verify what it read. `fs_type` as /proc/self/mountinfo names it.
pub fn read_mapping(file: &File, fs_type: Option<&str>) -> Result<()> {
    // No FIEMAP_FLAG_SYNC: writing back dirty data is not reading the mapping.
    let extents = read_extents(file.as_fd(), false).map_err(|e| anyhow!("FIEMAP: {e}"))?;
    if fs_type == Some("btrfs") {
        for e in extents.iter().filter(|e| e.costs_read_io()) {
            fragkit_sys::btrfs_search::csum_items(file.as_fd(), e.physical, e.physical_end())
                .map_err(|err| anyhow!("reading the checksum items of its data: {err}"))?;
        }
    }
    Ok(())
}
