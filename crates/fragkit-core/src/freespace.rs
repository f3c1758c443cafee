//! Free-space fragmentation of a mounted ext4/xfs file system, from GETFSMAP: the one
//! place fragkit reads free space (`fragkit free` prints the full analysis; the aging
//! reports keep its [`FreeSpaceSummary`]).
//!
//! A free extent is one GETFSMAP record owned by "free space" on the data device, exactly
//! what e2freefrag and `xfs_spaceman -c freesp` count, so the figures agree with theirs.
//! Both file systems keep free extents inside one group; the "largest free run" also joins
//! free extents that touch across a group boundary.

use std::os::fd::AsFd;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::metrics::Distribution;
use fragkit_sys::fsinfo::{self, FsInfo};
use fragkit_sys::fsmap::{self, FsmapRecord, Owner};
use fragkit_sys::superblock::{self, GroupGeometry};

/// One power-of-two bucket: free extents of [min_blocks, max_blocks] blocks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FreeBucket {
    pub min_blocks: u64,
    pub max_blocks: u64,
    pub extents: u64,
    pub blocks: u64,
    /// Share of all free blocks, in percent.
    pub percent: f64,
}

/// How many groups have how much of their blocks free, in eval_dumpe2fs's bands (Seagate's
/// PaF instrumentation counts block groups this way, for inodes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GroupBands {
    /// More than half of the group free.
    pub over_half: u64,
    /// Between a quarter and a half.
    pub quarter_to_half: u64,
    pub eighth_to_quarter: u64,
    pub sixteenth_to_eighth: u64,
    /// Less than a sixteenth free (full groups included).
    pub under_sixteenth: u64,
}

impl GroupBands {
    fn of(groups: &[GroupSummary]) -> GroupBands {
        let mut b = GroupBands::default();
        for g in groups {
            let (f, n) = (g.free_blocks, g.blocks.max(1));
            let slot = if f * 2 > n {
                &mut b.over_half
            } else if f * 4 >= n {
                &mut b.quarter_to_half
            } else if f * 8 >= n {
                &mut b.eighth_to_quarter
            } else if f * 16 >= n {
                &mut b.sixteenth_to_eighth
            } else {
                &mut b.under_sixteenth
            };
            *slot += 1;
        }
        b
    }
}

/// One block group (ext4) or allocation group (xfs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupSummary {
    pub group: u64,
    pub start_block: u64,
    pub blocks: u64,
    pub free_blocks: u64,
    pub free_extents: u64,
    pub largest_free_extent_blocks: u64,
    pub metadata_blocks: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FreeSpace {
    pub fs_type: String,
    pub device: String,
    pub block_size: u64,
    pub total_blocks: u64,
    pub free_blocks: u64,
    pub free_extents: u64,
    pub min_free_extent_blocks: u64,
    pub max_free_extent_blocks: u64,
    /// Exact mean free extent, in blocks (free blocks / free extents; e2freefrag rounds
    /// it down to whole blocks: see [`FreeSpace::e2freefrag_avg_kib`]).
    pub mean_free_extent_blocks_exact: f64,
    /// Longest run of free blocks, joining free extents that touch across group boundaries.
    pub largest_free_run_blocks: u64,
    pub metadata_blocks: u64,
    pub histogram: Vec<FreeBucket>,
    pub group_kind: String,
    pub blocks_per_group: u64,
    pub group_bands: GroupBands,
    pub groups: Vec<GroupSummary>,
    /// Sizes of the free extents in bytes (the aging reports' histogram; `fragkit free`
    /// prints `histogram` instead).
    #[serde(skip)]
    pub extent_sizes: Distribution,
}

impl FreeSpace {
    /// e2freefrag's "Avg. free extent" in KiB: free blocks / free extents in whole blocks
    /// (integer division), times KiB per block (misc/e2freefrag.c).
    pub fn e2freefrag_avg_kib(&self) -> u64 {
        (self.free_blocks / self.free_extents.max(1)) * (self.block_size / 1024)
    }
}

/// Histogram bucket of an extent of `blocks` blocks: floor(log2(blocks)).
fn bucket_of(blocks: u64) -> usize {
    63 - blocks.max(1).leading_zeros() as usize
}

/// Build the report from the data device's GETFSMAP records (sorted by physical address).
pub(crate) fn analyse(
    fs_type: &str,
    device: &str,
    geo: &GroupGeometry,
    records: &[FsmapRecord],
) -> FreeSpace {
    let bs = geo.block_size;
    let mut counts = [0u64; 64];
    let mut block_sums = [0u64; 64];
    let mut groups: Vec<GroupSummary> = (0..geo.groups)
        .map(|g| {
            let (s, e) = geo.group_range(g);
            GroupSummary {
                group: g,
                start_block: s,
                blocks: e - s,
                free_blocks: 0,
                free_extents: 0,
                largest_free_extent_blocks: 0,
                metadata_blocks: 0,
            }
        })
        .collect();
    let (mut free_blocks, mut extents, mut min, mut max, mut metadata) = (0, 0, u64::MAX, 0, 0);
    let (mut run_end, mut run_len, mut largest_run) = (u64::MAX, 0u64, 0u64);
    let mut extent_sizes = Distribution::default();
    for r in records {
        let start = r.physical / bs;
        let len = r.length / bs;
        if len == 0 {
            continue;
        }
        let is_meta = matches!(r.owner, Owner::Metadata(_));
        if r.owner.is_free() {
            extents += 1;
            free_blocks += len;
            min = min.min(len);
            max = max.max(len);
            let b = bucket_of(len);
            counts[b] += 1;
            block_sums[b] += len;
            extent_sizes.add(len * bs);
            run_len = if start == run_end { run_len + len } else { len };
            run_end = start + len;
            largest_run = largest_run.max(run_len);
        } else if is_meta {
            metadata += len;
        }
        if !(r.owner.is_free() || is_meta) {
            continue;
        }
        // Attribute to groups, splitting a range that crosses a boundary.
        let mut b = start;
        let end = start + len;
        while b < end {
            let g = geo.group_of(b);
            let (_, gend) = geo.group_range(g);
            let piece = end.min(gend.max(b + 1)) - b;
            let s = &mut groups[g as usize];
            if r.owner.is_free() {
                s.free_blocks += piece;
                s.free_extents += 1;
                s.largest_free_extent_blocks = s.largest_free_extent_blocks.max(piece);
            } else {
                s.metadata_blocks += piece;
            }
            b += piece;
        }
    }
    let histogram = (0..64)
        .filter(|&i| counts[i] > 0)
        .map(|i| FreeBucket {
            min_blocks: 1 << i,
            max_blocks: (1u64 << i) * 2 - 1,
            extents: counts[i],
            blocks: block_sums[i],
            percent: 100.0 * block_sums[i] as f64 / free_blocks.max(1) as f64,
        })
        .collect();
    FreeSpace {
        fs_type: fs_type.to_string(),
        device: device.to_string(),
        block_size: bs,
        total_blocks: geo.total_blocks,
        free_blocks,
        free_extents: extents,
        min_free_extent_blocks: if extents == 0 { 0 } else { min },
        max_free_extent_blocks: max,
        mean_free_extent_blocks_exact: if extents == 0 {
            0.0
        } else {
            free_blocks as f64 / extents as f64
        },
        largest_free_run_blocks: largest_run,
        metadata_blocks: metadata,
        histogram,
        group_kind: geo.group_kind.to_string(),
        blocks_per_group: geo.blocks_per_group,
        group_bands: GroupBands::of(&groups),
        groups,
        extent_sizes,
    }
}

/// What a mounted file system offers for free-space analysis.
pub enum FreeSpaceView {
    /// ext4/xfs: the full GETFSMAP analysis.
    Fsmap(Box<FreeSpace>),
    /// btrfs: chunk usage only (no GETFSMAP).
    Btrfs {
        info: FsInfo,
        spaces: Vec<fragkit_sys::btrfs_space::SpaceInfo>,
    },
}

/// Free space in brief, as the aging reports keep it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FreeSpaceSummary {
    /// "getfsmap", or "statfs" when the file system has no GETFSMAP (btrfs, f2fs): then
    /// only the total is known and `extents` is empty.
    pub source: &'static str,
    pub free_bytes: u64,
    /// Sizes of free extents in bytes.
    pub extents: Distribution,
}

impl FreeSpaceSummary {
    fn statfs(free_bytes: u64) -> FreeSpaceSummary {
        FreeSpaceSummary {
            source: "statfs",
            free_bytes,
            extents: Distribution::default(),
        }
    }
}

impl FreeSpaceView {
    pub fn summary(&self) -> FreeSpaceSummary {
        let statfs = FreeSpaceSummary::statfs;
        match self {
            FreeSpaceView::Fsmap(f) => FreeSpaceSummary {
                source: "getfsmap",
                free_bytes: f.free_blocks * f.block_size,
                extents: f.extent_sizes.clone(),
            },
            // btrfs's f_bfree counts unallocated space metadata will also take; f_bavail
            // is its own estimate of what data can still use (as age::FsUsage).
            FreeSpaceView::Btrfs { info, .. } => statfs(info.blocks_available * info.fragment_size),
        }
    }
}

/// GETFSMAP records of the data device of the file system mounted at `mountpoint` (all of
/// it, or only the byte range given), with its geometry. Needs root.
pub fn data_device_map(
    mountpoint: &Path,
    range: Option<(u64, u64)>,
) -> Result<(String, String, GroupGeometry, Vec<FsmapRecord>)> {
    let shown = mountpoint.display();
    let f = std::fs::File::open(mountpoint).with_context(|| format!("{shown}"))?;
    let info = FsInfo::of_fd(f.as_fd()).with_context(|| format!("{shown}: statfs"))?;
    let fs_type = info.type_name();
    if !matches!(info.magic, fsinfo::EXT4_MAGIC | fsinfo::XFS_MAGIC) {
        bail!("{shown}: {fs_type} has no GETFSMAP (expected an ext4 or xfs mount point)");
    }
    let dev = std::fs::metadata(mountpoint)
        .map(|m| std::os::unix::fs::MetadataExt::dev(&m))
        .with_context(|| format!("{shown}"))?;
    let devpath = superblock::device_path(dev)
        .with_context(|| format!("{shown}: finding the block device"))?;
    let geo = superblock::read_geometry(&devpath).map_err(|e| {
        if e.kind() == std::io::ErrorKind::PermissionDenied && !nix::unistd::geteuid().is_root() {
            anyhow::anyhow!("{}: reading the superblock needs root", devpath.display())
        } else {
            anyhow::anyhow!("{}: reading the superblock: {e}", devpath.display())
        }
    })?;
    let data_dev = fragkit_sys::dev::encode_dev(dev);
    let (start, end) = range.unwrap_or((0, u64::MAX));
    let records = fsmap::read_fsmap(f.as_fd(), Some(data_dev), start, end)
        .map_err(|e| anyhow::anyhow!("{shown}: {e}"))?;
    let mut records: Vec<FsmapRecord> = records
        .into_iter()
        .filter(|r| r.device == data_dev)
        .collect();
    records.sort_by_key(|r| r.physical);
    Ok((fs_type, devpath.display().to_string(), geo, records))
}

/// Analyse the file system mounted at `mountpoint`.
pub fn free_space(mountpoint: &Path) -> Result<FreeSpaceView> {
    let shown = mountpoint.display();
    let meta = std::fs::metadata(mountpoint).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => anyhow::anyhow!("{shown}: no such file or directory"),
        _ => anyhow::anyhow!("{shown}: {e}"),
    })?;
    if !meta.is_dir() {
        bail!("{shown}: not a directory (expected the mount point of an ext4, xfs or btrfs file system)");
    }
    let f = std::fs::File::open(mountpoint).with_context(|| format!("{shown}"))?;
    let info = FsInfo::of_fd(f.as_fd()).with_context(|| format!("{shown}: statfs"))?;
    if info.magic == fsinfo::BTRFS_MAGIC {
        let spaces = fragkit_sys::btrfs_space::space_info(f.as_fd())
            .with_context(|| format!("{shown}: BTRFS_IOC_SPACE_INFO"))?;
        return Ok(FreeSpaceView::Btrfs { info, spaces });
    }
    let (fs_type, device, geo, records) = data_device_map(mountpoint, None)?;
    Ok(FreeSpaceView::Fsmap(Box::new(analyse(
        &fs_type, &device, &geo, &records,
    ))))
}

/// [`free_space`] in brief for the file system holding `path` (a directory); where there
/// is no GETFSMAP and no btrfs chunk info (f2fs, tmpfs, ...), the statfs total.
pub fn summary(path: &Path) -> Result<FreeSpaceSummary> {
    let f = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
    let info = FsInfo::of_fd(f.as_fd()).with_context(|| format!("{}: statfs", path.display()))?;
    if matches!(
        info.magic,
        fsinfo::EXT4_MAGIC | fsinfo::XFS_MAGIC | fsinfo::BTRFS_MAGIC
    ) {
        Ok(free_space(path)?.summary())
    } else {
        Ok(FreeSpaceSummary::statfs(
            info.blocks_free * info.fragment_size,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(physical_blocks: u64, blocks: u64, owner: Owner) -> FsmapRecord {
        FsmapRecord {
            device: 0,
            flags: 0,
            physical: physical_blocks * 4096,
            owner,
            offset: 0,
            length: blocks * 4096,
        }
    }

    #[test]
    fn histogram_groups_and_runs() {
        let geo = GroupGeometry {
            group_kind: "block group",
            block_size: 4096,
            total_blocks: 200,
            first_block: 0,
            blocks_per_group: 100,
            groups: 2,
        };
        let recs = [
            rec(0, 10, Owner::Metadata("inodes")),
            rec(10, 1, Owner::Free),
            rec(11, 9, Owner::Inode(12)),
            rec(20, 80, Owner::Free),
            rec(100, 30, Owner::Free), // touches the previous across the boundary
            rec(130, 70, Owner::Inode(13)),
        ];
        let f = analyse("ext4", "/dev/x", &geo, &recs);
        assert_eq!(f.free_extents, 3);
        assert_eq!(f.free_blocks, 111);
        assert_eq!(
            (f.min_free_extent_blocks, f.max_free_extent_blocks),
            (1, 80)
        );
        assert_eq!(f.largest_free_run_blocks, 110);
        // The aging reports' summary comes from the same records.
        assert_eq!(
            (f.extent_sizes.count, f.extent_sizes.sum, f.extent_sizes.max),
            (3, 111 * 4096, 80 * 4096)
        );
        let s = FreeSpaceView::Fsmap(Box::new(f.clone())).summary();
        assert_eq!((s.source, s.free_bytes), ("getfsmap", 111 * 4096));
        assert_eq!(s.extents, f.extent_sizes);
        assert_eq!(f.metadata_blocks, 10);
        let b: Vec<(u64, u64, u64)> = f
            .histogram
            .iter()
            .map(|b| (b.min_blocks, b.extents, b.blocks))
            .collect();
        assert_eq!(b, vec![(1, 1, 1), (16, 1, 30), (64, 1, 80)]);
        assert_eq!(f.groups[0].free_blocks, 81);
        assert_eq!(f.groups[0].largest_free_extent_blocks, 80);
        assert_eq!(f.groups[1].free_extents, 1);
        assert_eq!(f.groups[0].metadata_blocks, 10);
        // 81 of 100 and 30 of 100 free.
        assert_eq!(
            (f.group_bands.over_half, f.group_bands.quarter_to_half),
            (1, 1)
        );
    }
}
