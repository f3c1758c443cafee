//! The machine's memory and task limits (/proc/meminfo, /proc/sys/kernel/threads-max),
//! /proc/sys/vm knobs (drop_caches) and madvise hints for the process's own memory.

use anyhow::{anyhow, Result};

/// Sync and drop clean page cache, dentries and inodes (needs root).
pub fn drop_caches() -> Result<()> {
    crate::sync::sync();
    std::fs::write("/proc/sys/vm/drop_caches", "3").map_err(|e| {
        anyhow!("dropping the page cache needs root (/proc/sys/vm/drop_caches: {e}); run as root or pass --no-drop-caches")
    })
}

/// MemAvailable from /proc/meminfo in bytes: what the kernel estimates can be allocated
/// without swapping (None when unreadable).
pub fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_available(&text)
}

fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let kb: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    kb.checked_mul(1024)
}

/// /proc/sys/kernel/threads-max: the most threads the system can have at once.
pub fn threads_max() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/threads-max")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Ask the kernel to back the whole 2 MiB pages inside `v`'s allocation (its capacity)
/// with transparent huge pages (MADV_HUGEPAGE, for the `madvise` THP mode). A hint: only
/// the time of later accesses changes; a failure is ignored.
pub fn hint_huge_pages<T>(v: &Vec<T>) {
    const HUGE: usize = 2 << 20;
    let bytes = v.capacity() * std::mem::size_of::<T>();
    let start = (v.as_ptr() as usize).next_multiple_of(HUGE);
    let end = (v.as_ptr() as usize + bytes) / HUGE * HUGE;
    if end > start {
        // SAFETY: the range lies inside `v`'s allocation, alive for the call; MADV_HUGEPAGE
        // changes how the kernel backs it, never its contents.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_parses_meminfo_and_this_machine_has_some() {
        let text = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2048 kB\n";
        assert_eq!(parse_mem_available(text), Some(2048 * 1024));
        assert_eq!(parse_mem_available("MemFree: 1 kB\n"), None);
        assert!(mem_available().is_some_and(|b| b > 0));
        assert!(threads_max().is_some_and(|n| n > 0));
    }
}
