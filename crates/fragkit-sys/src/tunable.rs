//! Allocator knobs aging and defrag need to set for a while and put back: sysfs tunables
//! (ext4, f2fs) and xfs's reserved block pool. Every change is undone when the guard is dropped.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Name of the block device a path lives on ("loop3"), from /sys/dev/block/MAJ:MIN.
pub fn block_device_name(path: &Path) -> Option<String> {
    crate::dev::block_name(std::fs::metadata(path).ok()?.dev())
}

/// Give block device `dev` ("loop3") the kernel's default largest request again. A
/// `max_sectors_kb` someone wrote survives detaching and re-attaching a loop device (the
/// readahead window does not: attaching sets it anew), so a fresh scratch device would
/// otherwise cut requests where an earlier experiment left it. Linux 6.10 and later take
/// 0 for "the default"; older kernels refuse 0 and get their default written out:
/// max_hw_sectors_kb capped at 1280 KiB (BLK_DEF_MAX_SECTORS_CAP).
pub fn reset_max_request(dev: &str) -> io::Result<()> {
    if dev.contains('/') {
        return Err(io::Error::other(format!(
            "block device {dev}: expected a plain name"
        )));
    }
    let queue = PathBuf::from(format!("/sys/block/{dev}/queue"));
    let knob = queue.join("max_sectors_kb");
    if std::fs::write(&knob, "0").is_ok() {
        return Ok(());
    }
    let hw: u64 = std::fs::read_to_string(queue.join("max_hw_sectors_kb"))?
        .trim()
        .parse()
        .map_err(|_| io::Error::other(format!("{dev}: unreadable max_hw_sectors_kb")))?;
    std::fs::write(&knob, hw.min(1280).to_string())
}

/// One sysfs tunable of a mounted file system, /sys/fs/<fs>/<dev>/<name> (ext4's
/// reserved_clusters, f2fs's ipu_policy, ...), put back to its old value on drop, so an
/// error or a panic in between never leaves the file system tuned.
pub struct SysfsTunable {
    path: PathBuf,
    old: String,
    new: String,
    restored: bool,
    /// Puts the old value back if SIGINT or SIGTERM ends the process first.
    _on_signal: Option<crate::signals::UndoGuard>,
}

/// ext4's tunables are the ones aging sets.
pub type Ext4Tunable = SysfsTunable;

impl SysfsTunable {
    /// Set `/sys/fs/ext4/<dev of path>/<name>` to `value`; None if the knob does not exist.
    pub fn set(path: &Path, name: &str, value: &str) -> io::Result<Option<SysfsTunable>> {
        Self::set_fs(path, "ext4", name, value)
    }

    /// Set `/sys/fs/<fs>/<dev of path>/<name>` to `value`; None if the knob does not exist.
    pub fn set_fs(
        path: &Path,
        fs: &str,
        name: &str,
        value: &str,
    ) -> io::Result<Option<SysfsTunable>> {
        let Some(dev) = block_device_name(path) else {
            return Ok(None);
        };
        Self::set_knob(PathBuf::from(format!("/sys/fs/{fs}/{dev}/{name}")), value)
    }

    /// Set the block device `dev`'s queue attribute `/sys/block/<dev>/queue/<name>`
    /// (max_sectors_kb, read_ahead_kb, ...); None if it does not exist.
    pub fn set_block_queue(dev: &str, name: &str, value: &str) -> io::Result<Option<SysfsTunable>> {
        if dev.contains('/') || name.contains('/') {
            return Err(io::Error::other(format!(
                "block queue attribute {dev}/{name}: expected plain names"
            )));
        }
        Self::set_knob(
            PathBuf::from(format!("/sys/block/{dev}/queue/{name}")),
            value,
        )
    }

    /// Set the machine-wide writeback knob `/proc/sys/vm/<name>` (dirty_ratio,
    /// dirty_writeback_centisecs, ...); it applies to every file system while set.
    pub fn set_vm(name: &str, value: &str) -> io::Result<Option<SysfsTunable>> {
        if name.contains('/') {
            return Err(io::Error::other(format!(
                "vm knob {name}: expected a plain name"
            )));
        }
        Self::set_knob(PathBuf::from(format!("/proc/sys/vm/{name}")), value)
    }

    /// Let ext4's allocator look at every free extent of `path`'s file system (`blocks`
    /// blocks) when no group's free fragments average the length asked for: it otherwise
    /// takes the best of the first `mb_max_to_scan` (200) free extents it meets, often one
    /// block on aged space (docs/defrag.md). A file system has at most one free extent per
    /// two blocks; the scan still stops at the first fit it can use. None: no such knob,
    /// or it already scans that far (left exactly as set).
    pub fn ext4_scan_every_free_extent(path: &Path, blocks: u64) -> io::Result<Option<Self>> {
        let every = (blocks / 2).clamp(1, u64::from(u32::MAX));
        let Some(t) = Self::set_fs(path, "ext4", "mb_max_to_scan", &every.to_string())? else {
            return Ok(None);
        };
        if t.old().parse::<u64>().is_ok_and(|old| old >= every) {
            t.restore()?;
            return Ok(None);
        }
        Ok(Some(t))
    }

    /// Set the knob file `knob` to `value`, remembering its old value; None if it does
    /// not exist.
    pub(crate) fn set_knob(knob: PathBuf, value: &str) -> io::Result<Option<SysfsTunable>> {
        let Ok(old) = std::fs::read_to_string(&knob) else {
            return Ok(None);
        };
        let old = old.trim().to_string();
        let on_signal = crate::signals::undo_on_signal_write(&knob, &old);
        std::fs::write(&knob, value)?;
        Ok(Some(SysfsTunable {
            path: knob,
            old,
            new: value.to_string(),
            restored: false,
            _on_signal: on_signal,
        }))
    }

    pub fn knob(&self) -> &Path {
        &self.path
    }

    /// The value before `set`.
    pub fn old(&self) -> &str {
        &self.old
    }

    /// The value `set` wrote.
    pub fn new_value(&self) -> &str {
        &self.new
    }

    /// Put the old value back now and say whether the knob reads it back.
    pub fn restore(mut self) -> io::Result<()> {
        self.restored = true;
        std::fs::write(&self.path, &self.old)?;
        let now = std::fs::read_to_string(&self.path)?;
        if now.trim() != self.old {
            return Err(io::Error::other(format!(
                "{} reads {:?} after restoring {:?}",
                self.path.display(),
                now.trim(),
                self.old
            )));
        }
        Ok(())
    }
}

impl Drop for SysfsTunable {
    fn drop(&mut self) {
        if !self.restored {
            let _ = std::fs::write(&self.path, &self.old);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guard restores the old value when dropped on an error path, and `restore`
    /// checks it explicitly (a plain file stands in for the sysfs attribute: same calls).
    #[test]
    fn tunable_is_restored_on_drop_and_on_restore() {
        let dir = std::env::temp_dir().join(format!("fragkit-fstune-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let knob = dir.join("ipu_policy");
        std::fs::write(&knob, "129\n").unwrap();
        let failing = || -> io::Result<()> {
            let _t = SysfsTunable::set_knob(knob.clone(), "0")?.unwrap();
            assert_eq!(std::fs::read_to_string(&knob)?, "0");
            Err(io::Error::other("migration failed"))
        };
        assert!(failing().is_err());
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "129");
        let t = SysfsTunable::set_knob(knob.clone(), "0").unwrap().unwrap();
        assert_eq!((t.old(), t.new_value()), ("129", "0"));
        t.restore().unwrap();
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "129");
        assert!(SysfsTunable::set_knob(dir.join("missing"), "0")
            .unwrap()
            .is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
