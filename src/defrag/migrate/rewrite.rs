//! FragPicker's own migration, kept only to compare against: read the range, punch it
//! out, reallocate, write it back. NOT crash-safe — a crash between the punch and the
//! write leaves zeros — so it runs only with --method rewrite --unsafe.

use std::os::unix::fs::FileExt;

use anyhow::Result;

use super::{Migrator, RangeOutcome, Target};
use crate::sys::alloc::{allocate, punch_hole};

pub struct Rewrite;

impl Migrator for Rewrite {
    fn primitive(&self) -> &'static str {
        "read+punch+fallocate+write (unsafe)"
    }

    fn migrate(&self, t: &Target<'_>, offset: u64, length: u64) -> Result<RangeOutcome> {
        let length = length.min(t.size.saturating_sub(offset));
        let mut data = vec![0u8; length as usize];
        t.file.read_exact_at(&mut data, offset)?;
        let alloc = length.div_ceil(t.block_size) * t.block_size;
        punch_hole(t.file, offset, alloc)?;
        allocate(t.file, offset, alloc)?;
        t.file.write_all_at(&data, offset)?;
        t.file.sync_all()?;
        Ok(RangeOutcome::Moved { bytes: length })
    }
}
