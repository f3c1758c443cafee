//! Output of `fragkit free`: table, JSON, CSV.

use std::io::{self, Write};

use serde::Serialize;

use crate::freespace::{FreeSpace, FreeSpaceView};
use crate::units::HumanBytes;

/// Groups the table lists before pointing at --all-groups / JSON.
const TABLE_GROUPS: usize = 32;

pub(crate) const BTRFS_NOTE: &str =
    "btrfs has no GETFSMAP: free-extent counts, sizes, the histogram, \
the largest free run and per-group free extents are not available; shown instead: space \
allocated to chunks and used in them per type (BTRFS_IOC_SPACE_INFO) and statfs totals";

pub(crate) fn write_table(
    out: &mut (impl Write + ?Sized),
    v: &FreeSpaceView,
    all_groups: bool,
) -> io::Result<()> {
    match v {
        FreeSpaceView::Fsmap(f) => write_fsmap_table(out, f, all_groups),
        FreeSpaceView::Btrfs { info, spaces } => {
            writeln!(out, "{BTRFS_NOTE}.")?;
            let bs = info.block_size as u64;
            writeln!(
                out,
                "total      {} ({} blocks of {bs}), free {} (statfs)",
                HumanBytes(info.blocks * bs),
                info.blocks,
                HumanBytes(info.blocks_free * bs)
            )?;
            writeln!(
                out,
                "{:<16} {:<8} {:>12} {:>12} {:>7}",
                "CHUNK TYPE", "PROFILE", "ALLOCATED", "USED", "USED%"
            )?;
            for s in spaces {
                writeln!(
                    out,
                    "{:<16} {:<8} {:>12} {:>12} {:>6.1}%",
                    s.kind,
                    s.profile,
                    HumanBytes(s.total).to_string(),
                    HumanBytes(s.used).to_string(),
                    100.0 * s.used as f64 / s.total.max(1) as f64
                )?;
            }
            Ok(())
        }
    }
}

fn write_fsmap_table(
    out: &mut (impl Write + ?Sized),
    f: &FreeSpace,
    all_groups: bool,
) -> io::Result<()> {
    let bs = f.block_size;
    let b = |blocks: u64| HumanBytes(blocks * bs);
    writeln!(out, "{} on {}, block size {bs}", f.fs_type, f.device)?;
    writeln!(
        out,
        "total      {} blocks ({}), free {} blocks ({}, {:.1}%) in {} free extents",
        f.total_blocks,
        b(f.total_blocks),
        f.free_blocks,
        b(f.free_blocks),
        100.0 * f.free_blocks as f64 / f.total_blocks.max(1) as f64,
        f.free_extents
    )?;
    writeln!(
        out,
        "extents    min {} / avg {} / max {}; largest free run {} (free extents joined across {} boundaries)",
        b(f.min_free_extent_blocks),
        if f.fs_type == "ext4" {
            // Rounded as e2freefrag rounds it, so the two read the same.
            format!("{} KiB", f.e2freefrag_avg_kib())
        } else {
            HumanBytes((f.mean_free_extent_blocks_exact * bs as f64) as u64).to_string()
        },
        b(f.max_free_extent_blocks),
        b(f.largest_free_run_blocks),
        f.group_kind
    )?;
    writeln!(
        out,
        "metadata   {} blocks ({}){}",
        f.metadata_blocks,
        b(f.metadata_blocks),
        // xfs without the reverse-mapping btree (rmapbt) gives used space no owner at all.
        if f.metadata_blocks == 0 && f.fs_type == "xfs" {
            " (this xfs has no rmapbt: GETFSMAP reports used space without owners)"
        } else {
            ""
        }
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "HISTOGRAM OF FREE EXTENT SIZES (power-of-two buckets, as e2freefrag)"
    )?;
    writeln!(
        out,
        "{:>25}  {:>12}  {:>12}  {:>7}",
        "extent size range", "free extents", "free blocks", "percent"
    )?;
    for h in &f.histogram {
        writeln!(
            out,
            "{:>11} .. {:>10}  {:>12}  {:>12}  {:>6.2}%",
            b(h.min_blocks).to_string(),
            b(h.max_blocks + 1).to_string() + "-",
            h.extents,
            h.blocks,
            h.percent
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "PER {} ({} groups of {} blocks)",
        f.group_kind.to_uppercase(),
        f.groups.len(),
        f.blocks_per_group
    )?;
    writeln!(
        out,
        "{:>6} {:>12} {:>12} {:>12} {:>14} {:>12}",
        "GROUP", "START", "FREE_BLOCKS", "FREE_EXTENTS", "LARGEST_FREE", "METADATA"
    )?;
    let shown = if all_groups {
        f.groups.len()
    } else {
        TABLE_GROUPS.min(f.groups.len())
    };
    for g in &f.groups[..shown] {
        writeln!(
            out,
            "{:>6} {:>12} {:>12} {:>12} {:>14} {:>12}",
            g.group,
            g.start_block,
            g.free_blocks,
            g.free_extents,
            b(g.largest_free_extent_blocks).to_string(),
            g.metadata_blocks
        )?;
    }
    if shown < f.groups.len() {
        writeln!(
            out,
            "({shown} of {} groups listed; --all-groups lists all, --format json has all)",
            f.groups.len()
        )?;
    }
    let gb = &f.group_bands;
    writeln!(
        out,
        "free share {} groups with many (> 1/2) free blocks, {} with enough (1/4..1/2), {} with few (1/8..1/4), {} with very few (1/16..1/8), {} with really few (< 1/16)",
        gb.over_half, gb.quarter_to_half, gb.eighth_to_quarter, gb.sixteenth_to_eighth, gb.under_sixteenth
    )?;
    Ok(())
}

pub(crate) fn write_json(out: &mut (impl Write + ?Sized), v: &FreeSpaceView) -> io::Result<()> {
    match v {
        FreeSpaceView::Fsmap(f) => {
            #[derive(Serialize)]
            struct Doc<'a> {
                version: u32,
                fsmap: bool,
                #[serde(flatten)]
                free: &'a FreeSpace,
            }
            serde_json::to_writer(
                &mut *out,
                &Doc {
                    version: 1,
                    fsmap: true,
                    free: f,
                },
            )?;
        }
        FreeSpaceView::Btrfs { info, spaces } => {
            #[derive(Serialize)]
            struct Doc<'a> {
                version: u32,
                fs_type: &'a str,
                fsmap: bool,
                message: &'a str,
                block_size: u64,
                total_blocks: u64,
                free_blocks: u64,
                spaces: &'a [crate::sys::btrfs_space::SpaceInfo],
            }
            serde_json::to_writer(
                &mut *out,
                &Doc {
                    version: 1,
                    fs_type: "btrfs",
                    fsmap: false,
                    message: BTRFS_NOTE,
                    block_size: info.block_size as u64,
                    total_blocks: info.blocks,
                    free_blocks: info.blocks_free,
                    spaces,
                },
            )?;
        }
    }
    writeln!(out)
}

/// CSV: the histogram, or with `groups` one row per group; btrfs: one row per chunk type.
pub(crate) fn write_csv(
    out: &mut (impl Write + ?Sized),
    v: &FreeSpaceView,
    groups: bool,
) -> io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    match v {
        FreeSpaceView::Fsmap(f) if groups => {
            w.write_record([
                "group",
                "start_block",
                "blocks",
                "free_blocks",
                "free_extents",
                "largest_free_extent_blocks",
                "metadata_blocks",
            ])?;
            for g in &f.groups {
                w.serialize((
                    g.group,
                    g.start_block,
                    g.blocks,
                    g.free_blocks,
                    g.free_extents,
                    g.largest_free_extent_blocks,
                    g.metadata_blocks,
                ))?;
            }
        }
        FreeSpaceView::Fsmap(f) => {
            w.write_record([
                "min_blocks",
                "max_blocks",
                "min_bytes",
                "max_bytes",
                "extents",
                "blocks",
                "percent",
            ])?;
            for h in &f.histogram {
                w.serialize((
                    h.min_blocks,
                    h.max_blocks,
                    h.min_blocks * f.block_size,
                    h.max_blocks * f.block_size,
                    h.extents,
                    h.blocks,
                    format!("{:.4}", h.percent),
                ))?;
            }
        }
        FreeSpaceView::Btrfs { spaces, .. } => {
            w.write_record(["kind", "profile", "total_bytes", "used_bytes"])?;
            for s in spaces {
                w.serialize((&s.kind, &s.profile, s.total, s.used))?;
            }
        }
    }
    w.flush()
}
