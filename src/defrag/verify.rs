//! Checksums of a byte range: before a move through the page cache, after it from the
//! device with O_DIRECT.
//!
//! Before: the range is read once, with readahead asked for the whole range first
//! (POSIX_FADV_WILLNEED), so the kernel sends every fragment's read at once; MOVE_EXT then
//! finds the pages uptodate and only swaps and writes them. Reading it with O_DIRECT
//! instead left the pages uncached, so MOVE_EXT read every fragment a second time, one
//! page at a time (measured on 4 × 128 MiB files of 16.9k fragments each: 769 MiB read
//! from the device for 256 MiB moved; docs/defrag.md).
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

/// xxh3-64 of [offset, offset+length) (clipped at EOF) as the file reads now, through
/// the page cache, leaving the range cached for the migration that follows.
pub fn hash_before(f: &File, offset: u64, length: u64) -> std::io::Result<u64> {
    prefetch(f, offset, length);
    hash_with(f, offset, length)
}

/// xxh3-64 of [offset, offset+length) (clipped at EOF) as the device holds it. `offset`
/// must be block-aligned (migration ranges are). Dirty cached data is written back first
/// by the kernel, as for any O_DIRECT read. The range's clean pages are dropped after.
pub fn hash_range(f: &File, offset: u64, length: u64) -> std::io::Result<u64> {
    let direct = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(format!("/proc/self/fd/{}", f.as_raw_fd()))?;
    let h = hash_with(&direct, offset, length);
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
