//! Checksums of a byte range, read back from the device after a migration.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use xxhash_rust::xxh3::Xxh3;

/// xxh3-64 of [offset, offset+length) (clipped at EOF), as the page cache or disk has it.
pub fn hash_range(f: &File, offset: u64, length: u64) -> std::io::Result<u64> {
    let mut h = Xxh3::new();
    let mut buf = vec![0u8; (1 << 20).min(length as usize).max(4096)];
    let mut pos = offset;
    let end = offset + length;
    while pos < end {
        let want = ((end - pos) as usize).min(buf.len());
        let n = f.read_at(&mut buf[..want], pos)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        pos += n as u64;
    }
    Ok(h.digest())
}

/// Hash the range as stored on the device: write back, drop its cached pages, read again.
pub fn hash_range_from_disk(f: &File, offset: u64, length: u64) -> std::io::Result<u64> {
    f.sync_data()?;
    // SAFETY: advisory call on an open fd.
    unsafe {
        libc::posix_fadvise(
            f.as_raw_fd(),
            offset as i64,
            length as i64,
            libc::POSIX_FADV_DONTNEED,
        );
    }
    hash_range(f, offset, length)
}
