//! Checksums of a byte range, read from the device with O_DIRECT.
//!
//! Reading through the page cache would leave the range's pages cached when the kernel
//! migrates it, and ext4's MOVE_EXT then goes through those pages one by one (measured:
//! 50 s and 154 MB of writes for a 32 MiB range, against 0.24 s and 33 MB uncached).
//! O_DIRECT also means the "after" checksum is what the device holds.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};

use xxhash_rust::xxh3::Xxh3;

/// A page-aligned buffer for O_DIRECT.
struct Aligned {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let layout = std::alloc::Layout::from_size_align(len, 4096).expect("valid layout");
        // SAFETY: non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        assert!(!ptr.is_null(), "out of memory");
        Aligned { ptr, layout }
    }
    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for layout.size() bytes and uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

const CHUNK: usize = 1 << 20;

/// xxh3-64 of [offset, offset+length) (clipped at EOF) as the device holds it. `offset`
/// must be block-aligned (migration ranges are). Dirty cached data is written back first
/// by the kernel, as for any O_DIRECT read.
pub fn hash_range(f: &File, offset: u64, length: u64) -> std::io::Result<u64> {
    let direct = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(format!("/proc/self/fd/{}", f.as_raw_fd()))?;
    let mut h = Xxh3::new();
    let mut buf = Aligned::new(CHUNK);
    let mut pos = offset;
    let end = offset + length;
    while pos < end {
        // Read whole blocks; only the bytes inside the range are hashed.
        let want = (end - pos).next_multiple_of(4096).min(CHUNK as u64) as usize;
        let n = direct.read_at(&mut buf.as_mut()[..want], pos)?;
        if n == 0 {
            break;
        }
        let take = (n as u64).min(end - pos) as usize;
        h.update(&buf.as_mut()[..take]);
        pos += n as u64;
    }
    Ok(h.digest())
}

/// Make sure what the migration wrote is on the device before reading it back.
pub fn write_back(f: &File) -> std::io::Result<()> {
    f.sync_data()
}
