//! syncfs(2): commit one file system's dirty data and journal, not every mounted one; and
//! sync(2), every one of them.

use std::fs::File;
use std::path::Path;

use anyhow::{Context, Result};

/// Commit the file system that holds `path` (its data, metadata and journal).
pub fn syncfs(path: &Path) -> Result<()> {
    let f = File::open(path)?;
    nix::unistd::syncfs(std::os::fd::AsRawFd::as_raw_fd(&f))
        .with_context(|| format!("{}: syncfs", path.display()))?;
    Ok(())
}

/// sync(2): commit every mounted file system's dirty data and metadata.
pub fn sync() {
    nix::unistd::sync();
}
