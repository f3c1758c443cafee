//! (device, inode) → path, once per file: first from the tracee's open file descriptors
//! (/proc/PID/fd, while it still has the file open); else by open_by_handle_at(2) with the
//! inode number and generation the tracer recorded (ext4, xfs), which finds the cached
//! dentry of a file the tracee just used; else (other file systems) by one walk of the
//! mount point for all inodes still unknown on that device.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use fragkit_sys::dev::{self, kernel_dev};
use fragkit_sys::fsinfo::{FsInfo, EXT4_MAGIC, XFS_MAGIC};
use fragkit_sys::mountinfo;
use fragkit_sys::{handle, stat};

fn same_file(path: &Path, dev: u32, ino: u64) -> bool {
    fs::metadata(path).is_ok_and(|m| m.ino() == ino && on_dev(&m, path, dev))
}

/// Whether a file with metadata `m` at `path` is on the superblock `dev`. stat() usually
/// reports s_dev; btrfs reports a per-subvolume device, so ask mountinfo then.
fn on_dev(m: &fs::Metadata, path: &Path, dev: u32) -> bool {
    kernel_dev(m.dev()) == dev || superblock_dev(path) == Some(dev)
}

/// The path under which process `tgid` has (dev, ino) open, if it still has.
pub(crate) fn from_proc(tgid: u32, dev: u32, ino: u64) -> Option<PathBuf> {
    let dir = fs::read_dir(format!("/proc/{tgid}/fd")).ok()?;
    for ent in dir.flatten() {
        // metadata() follows the magic link to the open file itself.
        let Ok(m) = fs::metadata(ent.path()) else {
            continue;
        };
        if m.ino() != ino {
            continue;
        }
        let target = fs::read_link(ent.path()).ok()?;
        if !on_dev(&m, &target, dev) {
            continue;
        }
        // Deleted or renamed since it was opened: the link text no longer names it.
        if target.is_absolute() && same_file(&target, dev, ino) {
            return Some(target);
        }
    }
    None
}

/// The superblock's dev_t (kernel encoding) of the file system holding `path`, from the
/// mountinfo entry with the longest mount point that contains it.
pub(crate) fn superblock_dev(path: &Path) -> Option<u32> {
    let path = path.canonicalize().ok()?;
    let mounts = mountinfo::read().ok()?;
    let m = mountinfo::containing(&mounts, &path)?;
    Some(dev::kernel_dev_from(m.major, m.minor))
}

/// Mount point of the device (kernel dev_t), preferring a mount of the file system's root.
pub(crate) fn mount_point(dev: u32) -> Option<PathBuf> {
    let (ma, mi) = dev::kernel_dev_parts(dev);
    let mut best: Option<PathBuf> = None;
    for m in mountinfo::read().ok()? {
        if (m.major, m.minor) != (ma, mi) {
            continue;
        }
        if m.root == "/" {
            return Some(m.mountpoint);
        }
        best.get_or_insert(m.mountpoint);
    }
    best
}

/// include/linux/exportfs.h FILEID_INO32_GEN: { u32 ino; u32 gen } (ext2/3/4, xfs).
const FILEID_INO32_GEN: i32 = 1;
/// fs/xfs/xfs_export.h XFS_FILEID_TYPE_64FLAG | FILEID_INO32_GEN: { u64 ino; u32 gen }.
const XFS_FILEID_INO64_GEN: i32 = 0x81;

/// Outcome of asking the kernel for a file by handle.
pub(crate) enum ByHandle {
    Found(PathBuf),
    /// The file no longer exists (ESTALE): no point walking for it.
    Gone,
    /// This file system's handles are not known here; try a walk.
    Unsupported,
}

/// Open (ino, gen) on the file system mounted at `mount` and read back its path.
pub(crate) fn by_handle(mount: &Path, dev: u32, ino: u64, gen: u32) -> ByHandle {
    let Ok(dir) = fs::File::open(mount) else {
        return ByHandle::Unsupported;
    };
    let Ok(info) = FsInfo::of_fd(std::os::fd::AsFd::as_fd(&dir)) else {
        return ByHandle::Unsupported;
    };
    let (mut handle_bytes, mut handle_type) = (8, FILEID_INO32_GEN);
    match info.magic {
        EXT4_MAGIC => {}
        XFS_MAGIC if ino > u32::MAX as u64 => {
            handle_bytes = 12;
            handle_type = XFS_FILEID_INO64_GEN;
        }
        XFS_MAGIC => {}
        _ => return ByHandle::Unsupported,
    }
    let mut f_handle = [0u8; 12];
    if handle_type == FILEID_INO32_GEN {
        f_handle[..4].copy_from_slice(&(ino as u32).to_ne_bytes());
        f_handle[4..8].copy_from_slice(&gen.to_ne_bytes());
    } else {
        f_handle[..8].copy_from_slice(&ino.to_ne_bytes());
        f_handle[8..12].copy_from_slice(&gen.to_ne_bytes());
    }
    let h = handle::file_handle(handle_type, &f_handle[..handle_bytes]);
    let file = match handle::open_by_handle_at(dir.as_fd(), &h, libc::O_PATH | libc::O_CLOEXEC) {
        Ok(file) => file,
        Err(e) => {
            return match e.raw_os_error() {
                Some(libc::ESTALE) | Some(libc::ENOENT) => ByHandle::Gone,
                _ => ByHandle::Unsupported,
            }
        }
    };
    match fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
        Ok(p) if p.is_absolute() && same_file(&p, dev, ino) => ByHandle::Found(p),
        _ => {
            // Still cached but unlinked: gone. Otherwise a dentry not connected to the
            // tree: only a walk can say.
            if stat::fstat(file.as_fd()).is_ok_and(|st| st.st_nlink == 0) {
                ByHandle::Gone
            } else {
                ByHandle::Unsupported
            }
        }
    }
}

/// Walk the mount of `dev` (staying on it) until every inode in `inos` has a path or the
/// deadline passes (a walk of a big root file system can take minutes).
pub(crate) fn by_walk(dev: u32, inos: &HashSet<u64>, deadline: Instant) -> HashMap<u64, PathBuf> {
    let mut found = HashMap::new();
    let Some(root) = mount_point(dev) else {
        return found;
    };
    // The walk stays on the mount: on btrfs its files carry the root's per-subvolume
    // device rather than s_dev.
    let root_dev = fs::metadata(&root).map(|m| kernel_dev(m.dev())).ok();
    let mut stack = vec![root];
    while let Some(dir) = stack.pop() {
        if Instant::now() >= deadline {
            break;
        }
        let Ok(rd) = fs::read_dir(&dir) else {
            continue;
        };
        for ent in rd.flatten() {
            let Ok(m) = ent.metadata() else {
                continue;
            };
            let d = kernel_dev(m.dev());
            if d != dev && Some(d) != root_dev {
                continue;
            }
            if m.is_dir() {
                stack.push(ent.path());
            } else if m.is_file() && inos.contains(&m.ino()) {
                found.entry(m.ino()).or_insert_with(|| ent.path());
                if found.len() == inos.len() {
                    return found;
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generation(f: &fs::File) -> u32 {
        fragkit_sys::inode::generation(f).unwrap_or(0)
    }

    #[test]
    fn finds_own_open_file_and_walks_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a b");
        let f = fs::File::create(&p).unwrap();
        let m = f.metadata().unwrap();
        let dev = kernel_dev(m.dev());
        let got = from_proc(std::process::id(), dev, m.ino()).unwrap();
        assert_eq!(
            fs::canonicalize(got).unwrap(),
            fs::canonicalize(&p).unwrap()
        );
        if let Some(mp) = mount_point(dev) {
            if let ByHandle::Found(q) = by_handle(&mp, dev, m.ino(), generation(&f)) {
                assert_eq!(fs::canonicalize(q).unwrap(), fs::canonicalize(&p).unwrap());
            }
        }
        if mount_point(dev).is_some_and(|mp| dir.path().starts_with(mp)) {
            let deadline = Instant::now() + std::time::Duration::from_secs(60);
            let found = by_walk(dev, &HashSet::from([m.ino()]), deadline);
            assert_eq!(
                fs::canonicalize(&found[&m.ino()]).unwrap(),
                fs::canonicalize(&p).unwrap()
            );
        }
    }
}
