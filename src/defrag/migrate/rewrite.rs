//! FragPicker's own migration, kept only to compare against: read the range, punch it
//! out, reallocate, write it back. NOT crash-safe — a crash between the punch and the
//! write leaves zeros — so it runs only with --method rewrite --unsafe.

use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use anyhow::Result;

use super::{fallocate, Migrator, RangeOutcome, Target};

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
        // SAFETY: fallocate(2) punching a hole inside the file, size kept.
        let rc = unsafe {
            libc::fallocate(
                t.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset as i64,
                alloc as i64,
            )
        };
        if rc < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        fallocate(t.file, offset, alloc)?;
        t.file.write_all_at(&data, offset)?;
        t.file.sync_all()?;
        Ok(RangeOutcome::Moved { bytes: length })
    }
}
