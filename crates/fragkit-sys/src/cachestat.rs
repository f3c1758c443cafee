//! cachestat(2) (Linux 6.5+): how much of a file's range is in the page cache.

use std::fs::File;
use std::os::fd::AsRawFd;

/// cachestat(2)'s result (include/uapi/linux/mman.h).
#[repr(C)]
#[derive(Default)]
struct CacheStat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// struct cachestat_range (include/uapi/linux/mman.h).
#[repr(C)]
struct CacheStatRange {
    off: u64,
    len: u64,
}

/// cachestat's syscall number: 451 in every architecture's table since its 6.5 addition
/// (arch/x86/entry/syscalls/syscall_64.tbl, include/uapi/asm-generic/unistd.h); the libc
/// crate lists it only for some targets.
const SYS_CACHESTAT: libc::c_long = 451;

/// Pages of [offset, offset+length) in the page cache (uptodate or still being read), or
/// None where cachestat(2) is not available (kernels before 6.5).
pub fn cached_pages(f: &File, offset: u64, length: u64) -> Option<u64> {
    let range = CacheStatRange {
        off: offset,
        len: length,
    };
    let mut cs = CacheStat::default();
    // SAFETY: cachestat(fd, &range, &cs, 0) with both structs alive and of the kernel's
    // layout; it only writes `cs`.
    let r = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            f.as_raw_fd(),
            &range as *const CacheStatRange,
            &mut cs as *mut CacheStat,
            0u32,
        )
    };
    (r == 0).then_some(cs.nr_cache)
}
