//! Checksums of a byte range, read from the device with O_DIRECT, before and after a move.
//!
//! Before: O_DIRECT, then readahead is asked for the range (POSIX_FADV_WILLNEED, as
//! `--no-verify` does), so MOVE_EXT finds most pages in the cache without the range having
//! gone through a buffered read. Hashing it with buffered reads instead made ext4's
//! MOVE_EXT of a whole 32 MiB range (full mode) write 284 MB with 26k cache flushes for
//! 67 MB moved, 9.1 s against 1.5 s (`bench writes -- defrag --mode full` on an aged
//! ext4, 2026-11-23); the same as the measurement this module's first version recorded
//! (154 MB of writes for a 32 MiB range read through the cache).
//! After: O_DIRECT, so the checksum is what the device holds; then the range's pages are
//! dropped from the cache (as e4defrag does) so a defrag run does not evict the
//! applications' working set.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};

use xxhash_rust::xxh3::Xxh3;

use crate::io::buf::AlignedBuf;

const CHUNK: usize = 1 << 20;

fn advise(f: &File, offset: u64, length: u64, advice: libc::c_int) {
    // SAFETY: posix_fadvise on an open fd; advice only, failure changes nothing.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), offset as i64, length as i64, advice) };
}

/// Start reading [offset, offset+length) into the page cache (without --verify: the
/// migration then finds the pages there instead of reading them one by one).
pub fn prefetch(f: &File, offset: u64, length: u64) {
    advise(f, offset, length, libc::POSIX_FADV_WILLNEED);
}

/// xxh3-64 of [offset, offset+length) (clipped at EOF) as the device holds it now, then
/// readahead of the range for the migration that follows.
pub fn hash_before(f: &File, offset: u64, length: u64) -> std::io::Result<u64> {
    let h = hash_with(&open_direct(f)?, offset, length);
    prefetch(f, offset, length);
    h
}

fn open_direct(f: &File) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(format!("/proc/self/fd/{}", f.as_raw_fd()))
}

/// xxh3-64 of [offset, offset+length) (clipped at EOF) as the device holds it. `offset`
/// must be block-aligned (migration ranges are). Dirty cached data is written back first
/// by the kernel, as for any O_DIRECT read. The range's clean pages are dropped after.
pub fn hash_range(f: &File, offset: u64, length: u64) -> std::io::Result<u64> {
    let h = hash_with(&open_direct(f)?, offset, length);
    advise(f, offset, length, libc::POSIX_FADV_DONTNEED);
    h
}

fn hash_with(f: &File, offset: u64, length: u64) -> std::io::Result<u64> {
    let mut h = Xxh3::new();
    let mut buf = AlignedBuf::new(CHUNK);
    let mut pos = offset;
    let end = offset + length;
    while pos < end {
        // Read whole blocks; only the bytes inside the range are hashed.
        let want = (end - pos).next_multiple_of(4096).min(CHUNK as u64) as usize;
        let n = f.read_at(&mut buf.as_mut_slice()[..want], pos)?;
        if n == 0 {
            break;
        }
        let take = (n as u64).min(end - pos) as usize;
        h.update(&buf.as_slice()[..take]);
        pos += n as u64;
    }
    Ok(h.digest())
}

/// Make sure what the migration wrote is on the device before reading it back.
pub fn write_back(f: &File) -> std::io::Result<()> {
    f.sync_data()
}
