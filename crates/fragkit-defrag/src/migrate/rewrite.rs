//! FragPicker's own migration, kept only to compare against: read the range, punch it
//! out, reallocate, write it back. NOT crash-safe — a crash between the punch and the
//! write leaves zeros — so it runs only with --method rewrite --unsafe.
//!
//! Done as FragPicker-B does it (src/migration/FragPicker_bypass_IP.py, github.com/
//! jonggyup/FragPicker): one R-window at a time (its `defragsize`), each read through the
//! page cache, punched (FALLOC_FL_PUNCH_HOLE | KEEP_SIZE), allocated again with a plain
//! fallocate of the window, and written back buffered; durability is one fsync per file
//! at the end (the executor's). Allocating window by window lets ext4 place each window
//! next to the one before (its goal is the neighbouring extent), which is why FragPicker-B
//! leaves consecutive windows contiguous; one fallocate for a run of windows does not.
//! A range inside one window (pick) is done whole, as FragPicker_IP.py does a traced range.

use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;

use anyhow::Result;

use super::{judge_mapped, stamp, Migrator, RangeOutcome, Restamp, Target};
use fragkit_sys::alloc::{allocate, punch_hole};
use fragkit_sys::fsinfo::{FsInfo, EXT4_MAGIC, XFS_MAGIC};

pub struct Rewrite;

impl Migrator for Rewrite {
    fn primitive(&self) -> &'static str {
        "read+punch+fallocate+write (unsafe)"
    }

    fn migrate(&self, t: &Target<'_>, offset: u64, length: u64) -> Result<RangeOutcome> {
        let length = length.min(t.size.saturating_sub(offset));
        let r = t.request_size.max(t.block_size);
        let began = stamp(t.file);
        let mut data = Vec::new();
        let mut at = offset;
        let end = offset + length;
        while at < end {
            let len = if length > r {
                (r - at % r).min(end - at)
            } else {
                length
            };
            data.resize(len as usize, 0);
            t.file.read_exact_at(&mut data, at)?;
            let alloc = len.div_ceil(t.block_size) * t.block_size;
            punch_hole(t.file, at, alloc)?;
            allocate(t.file, at, alloc)?;
            t.file.write_all_at(&data, at)?;
            at += len;
        }
        // ext4 and xfs placed the blocks at fallocate time: the map shows them before
        // writeback. Elsewhere (btrfs) the data's address is known once written back.
        let placed = FsInfo::of_fd(t.file.as_fd())
            .is_ok_and(|fs| fs.magic == EXT4_MAGIC || fs.magic == XFS_MAGIC);
        let judged = judge_mapped(t, offset, length, !placed)?;
        Ok(RangeOutcome::Moved {
            bytes: length,
            judged,
            restamped: Some(Restamp {
                began,
                ended: stamp(t.file),
            }),
        })
    }
}
