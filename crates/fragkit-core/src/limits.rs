//! Values past what the machine can give, refused in one line naming the option before
//! anything is allocated or written: memory (MemAvailable), threads (threads-max), and
//! bytes and inodes free under a directory.

use std::fs::File;
use std::path::Path;

use anyhow::{Context, Result};

/// Refuse an option whose value needs `bytes` of memory at once when the machine has
/// less available (MemAvailable): one line naming the option, instead of an allocation
/// failure that aborts the process.
pub fn require_memory(what: &str, bytes: u128) -> Result<()> {
    if let Some(avail) = fragkit_sys::vm::mem_available() {
        if bytes > avail as u128 {
            anyhow::bail!(
                "{what}: needs {} of memory at once, and this machine has {} available; expected a smaller value",
                human(bytes),
                human(avail as u128)
            );
        }
    }
    Ok(())
}

/// Refuse an option that asks for more threads than the system can run at once
/// (/proc/sys/kernel/threads-max).
pub fn require_threads(what: &str, n: u64) -> Result<()> {
    if let Some(max) = fragkit_sys::vm::threads_max() {
        if n > max {
            anyhow::bail!("{what} {n}: more threads than this system allows ({max}, /proc/sys/kernel/threads-max)");
        }
    }
    Ok(())
}

/// Refuse an option whose files need more bytes or inodes than the file system under
/// `dir` has free.
pub fn require_room(what: &str, dir: &Path, bytes: u128, files: u64) -> Result<()> {
    let f = File::open(dir).with_context(|| format!("{}: cannot open", dir.display()))?;
    let v = nix::sys::statvfs::fstatvfs(&f)
        .with_context(|| format!("{}: statvfs failed", dir.display()))?;
    let free = v.blocks_available() as u128 * v.fragment_size() as u128;
    if bytes > free {
        anyhow::bail!(
            "{what}: needs {} and {} has {} free; expected a smaller value",
            human(bytes),
            dir.display(),
            human(free)
        );
    }
    // Some file systems (btrfs) report no inode limit: 0 files free and 0 in total.
    if v.files() > 0 && files > v.files_available() as u64 {
        anyhow::bail!(
            "{what}: needs {files} files and {} has {} inodes free; expected a smaller value",
            dir.display(),
            v.files_available()
        );
    }
    Ok(())
}

fn human(bytes: u128) -> String {
    crate::units::HumanBytes(bytes.min(u64::MAX as u128) as u64).to_string()
}
