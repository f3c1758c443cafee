//! (device, inode) → path, once per file: first from the tracee's open file descriptors
//! (/proc/PID/fd, while it still has the file open), else by one walk of the file system's
//! mount point for all inodes still unknown on that device.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::loader::kernel_dev;
use crate::scratch::unescape_mountinfo;

fn same_file(path: &Path, dev: u32, ino: u64) -> bool {
    fs::metadata(path).is_ok_and(|m| kernel_dev(m.dev()) == dev && m.ino() == ino)
}

/// The path under which process `tgid` has (dev, ino) open, if it still has.
pub fn from_proc(tgid: u32, dev: u32, ino: u64) -> Option<PathBuf> {
    let dir = fs::read_dir(format!("/proc/{tgid}/fd")).ok()?;
    for ent in dir.flatten() {
        // metadata() follows the magic link to the open file itself.
        let Ok(m) = fs::metadata(ent.path()) else {
            continue;
        };
        if m.ino() != ino || kernel_dev(m.dev()) != dev {
            continue;
        }
        let target = fs::read_link(ent.path()).ok()?;
        // Deleted or renamed since it was opened: the link text no longer names it.
        if target.is_absolute() && same_file(&target, dev, ino) {
            return Some(target);
        }
    }
    None
}

/// Mount point of the device (kernel dev_t), preferring a mount of the file system's root.
pub fn mount_point(dev: u32) -> Option<PathBuf> {
    let text = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let (ma, mi) = super::loader::kernel_dev_parts(dev);
    let want = format!("{ma}:{mi}");
    let mut best: Option<PathBuf> = None;
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f.len() < 5 || f[2] != want {
            continue;
        }
        let mp = PathBuf::from(unescape_mountinfo(f[4]));
        if f[3] == "/" {
            return Some(mp);
        }
        best.get_or_insert(mp);
    }
    best
}

/// Walk the mount of `dev` (staying on it) until every inode in `inos` has a path.
pub fn by_walk(dev: u32, inos: &HashSet<u64>) -> HashMap<u64, PathBuf> {
    let mut found = HashMap::new();
    let Some(root) = mount_point(dev) else {
        return found;
    };
    let mut stack = vec![root];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = fs::read_dir(&dir) else {
            continue;
        };
        for ent in rd.flatten() {
            let Ok(m) = ent.metadata() else {
                continue;
            };
            if kernel_dev(m.dev()) != dev {
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
        if mount_point(dev).is_some_and(|mp| dir.path().starts_with(mp)) {
            let found = by_walk(dev, &HashSet::from([m.ino()]));
            assert_eq!(
                fs::canonicalize(&found[&m.ino()]).unwrap(),
                fs::canonicalize(&p).unwrap()
            );
        }
    }
}
