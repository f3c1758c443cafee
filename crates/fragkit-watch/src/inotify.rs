//! inotify(7), one watch per directory: the change source without root.
//!
//! inotify cannot watch a whole file system, so every directory under the roots gets a
//! watch (each costs ~1 KiB of kernel memory and counts against
//! /proc/sys/fs/inotify/max_user_watches), and directories created later are added as
//! their IN_CREATE arrives. Renames pair IN_MOVED_FROM with IN_MOVED_TO by cookie.
//! A directory that cannot be watched (unreadable, or a path longer than the kernel
//! takes) is skipped and named on stderr once; running out of watches ends the watch.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::Change;
use fragkit_sys::{inotify, rw};

const MASK: u32 = libc::IN_MODIFY
    | libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DONT_FOLLOW
    | libc::IN_EXCL_UNLINK;

pub struct Inotify {
    fd: OwnedFd,
    dirs: HashMap<i32, PathBuf>,
    buf: Vec<u8>,
}

impl Inotify {
    pub fn new(roots: &[PathBuf]) -> io::Result<Inotify> {
        let fd = inotify::init(libc::IN_NONBLOCK | libc::IN_CLOEXEC)?;
        let mut me = Inotify {
            fd,
            dirs: HashMap::new(),
            buf: vec![0u8; 64 * 1024],
        };
        for root in roots {
            if root.is_dir() {
                me.add_tree(root)?;
            } else if let Some(parent) = root.parent() {
                me.add_dir(parent)?;
            }
        }
        Ok(me)
    }

    /// Directories watched (one kernel watch each).
    pub(crate) fn watches(&self) -> usize {
        self.dirs.len()
    }

    fn add_dir(&mut self, dir: &Path) -> io::Result<()> {
        let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
        let wd = inotify::add_watch(self.fd.as_fd(), &c, MASK).map_err(|e| {
            if e.raw_os_error() == Some(libc::ENOSPC) {
                return io::Error::new(
                    io::ErrorKind::QuotaExceeded,
                    format!(
                        "{}: out of inotify watches (raise /proc/sys/fs/inotify/max_user_watches, or run as root to use fanotify)",
                        dir.display()
                    ),
                );
            }
            e
        })?;
        self.dirs.insert(wd, dir.to_path_buf());
        Ok(())
    }

    /// A directory that cannot be watched or listed: say so once, go on without it.
    fn skip(&mut self, dir: &Path, e: &io::Error) {
        if e.raw_os_error() == Some(libc::ENAMETOOLONG) {
            crate::skipped::skip(dir, &crate::skipped::too_long(dir));
        } else {
            crate::skipped::skip(dir, &e.to_string());
        }
    }

    /// Watch `dir` and every directory below it on the same file system. A directory
    /// that cannot be watched (no read permission, a path too long) is skipped with what
    /// is below it; only running out of watches is an error.
    fn add_tree(&mut self, dir: &Path) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let dev = match std::fs::symlink_metadata(dir) {
            Ok(m) => m.dev(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                self.skip(dir, &e);
                return Ok(());
            }
        };
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            match self.add_dir(&d) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) if e.kind() == io::ErrorKind::QuotaExceeded => return Err(e),
                Err(e) => {
                    self.skip(&d, &e);
                    continue;
                }
            }
            let rd = match std::fs::read_dir(&d) {
                Ok(rd) => rd,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    self.skip(&d, &e);
                    continue;
                }
            };
            for ent in rd.flatten() {
                let Ok(meta) = ent.metadata() else { continue };
                if meta.is_dir() && meta.dev() == dev {
                    stack.push(ent.path());
                }
            }
        }
        Ok(())
    }

    pub fn drain(&mut self, out: &mut Vec<Change>) -> io::Result<()> {
        let mut moved_from: HashMap<u32, PathBuf> = HashMap::new();
        while let Some(n) = rw::read_nonblocking(self.fd.as_fd(), &mut self.buf)? {
            let buf = std::mem::take(&mut self.buf);
            for e in inotify::events(&buf[..n]) {
                self.event(e.wd, e.mask, e.cookie, e.name, &mut moved_from, out);
            }
            self.buf = buf;
        }
        // A move whose other half is outside the watched tree: gone from here.
        out.extend(moved_from.into_values().map(Change::Changed));
        Ok(())
    }

    fn event(
        &mut self,
        wd: i32,
        mask: u32,
        cookie: u32,
        name: &[u8],
        moved_from: &mut HashMap<u32, PathBuf>,
        out: &mut Vec<Change>,
    ) {
        if mask & libc::IN_Q_OVERFLOW != 0 {
            out.push(Change::Overflow);
            return;
        }
        if mask & libc::IN_IGNORED != 0 {
            self.dirs.remove(&wd);
            return;
        }
        let Some(dir) = self.dirs.get(&wd) else {
            return;
        };
        let path = dir.join(OsStr::from_bytes(name));
        let is_dir = mask & libc::IN_ISDIR != 0;
        if mask & libc::IN_MOVED_FROM != 0 {
            moved_from.insert(cookie, path);
        } else if mask & libc::IN_MOVED_TO != 0 {
            match moved_from.remove(&cookie) {
                Some(from) => {
                    if is_dir {
                        // Watches below keep their wd; their remembered paths move.
                        for p in self.dirs.values_mut() {
                            if let Ok(rest) = p.strip_prefix(&from) {
                                *p = path.join(rest);
                            }
                        }
                    }
                    out.push(Change::Moved { from, to: path });
                }
                None => {
                    if is_dir {
                        let _ = self.add_tree(&path);
                    }
                    out.push(Change::Changed(path));
                }
            }
        } else {
            if is_dir && mask & libc::IN_CREATE != 0 {
                let _ = self.add_tree(&path);
            }
            out.push(Change::Changed(path));
        }
    }
}
