//! /proc/sys/vm knobs: drop_caches.

use anyhow::{anyhow, Result};

/// Sync and drop clean page cache, dentries and inodes (needs root).
pub fn drop_caches() -> Result<()> {
    crate::sync::sync();
    std::fs::write("/proc/sys/vm/drop_caches", "3").map_err(|e| {
        anyhow!("dropping the page cache needs root (/proc/sys/vm/drop_caches: {e}); run as root or pass --no-drop-caches")
    })
}
