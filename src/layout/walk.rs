//! Parallel tree walk that maps every regular file once.
//!
//! Directories are read with getdents and files opened relative to their directory
//! (openat), so each file costs open + fstat + FIEMAP + fstat + close and nothing more.
//! The walk stays on the file system of each root unless told otherwise, reports each
//! hard-linked inode once, and treats files that vanish or change under it as ordinary
//! events to count, not failures.

use std::collections::{HashMap, HashSet};
use std::ffi::{CStr, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use super::model::FileLayout;
use crate::sys::fiemap::{self, FiemapError};
use crate::sys::fsinfo::FsInfo;

/// What the walk should do.
#[derive(Debug, Clone)]
pub struct WalkOptions {
    /// Stay on the file system of each root (like `find -xdev`).
    pub one_file_system: bool,
    /// Ask FIEMAP to flush delalloc data first (FIEMAP_FLAG_SYNC).
    pub sync: bool,
    /// Only files whose extension (lower-case, without the dot) is listed; empty = all.
    pub extensions: Vec<String>,
}

impl Default for WalkOptions {
    fn default() -> Self {
        WalkOptions {
            one_file_system: true,
            sync: false,
            extensions: Vec::new(),
        }
    }
}

/// One mapped file.
#[derive(Debug, Clone)]
pub struct ScannedFile {
    pub path: PathBuf,
    pub dev: u64,
    pub ino: u64,
    pub nlink: u64,
    pub fs: FsInfo,
    pub layout: FileLayout,
}

impl ScannedFile {
    /// "major:minor" of the device, as in docs/design.md's JSON.
    pub fn dev_string(&self) -> String {
        let (major, minor) = crate::sys::dev::split(self.dev);
        format!("{major}:{minor}")
    }
}

/// A path the walk could not read, with the reason in words.
#[derive(Debug, Clone)]
pub struct PathError {
    pub path: PathBuf,
    pub message: String,
}

/// Counters for everything that was not a plainly mapped file.
#[derive(Debug, Default)]
pub struct WalkStats {
    pub files: AtomicU64,
    pub directories: AtomicU64,
    /// Symlinks, FIFOs, sockets, devices met inside the tree.
    pub skipped_non_regular: AtomicU64,
    /// Files skipped by the extension filter.
    pub skipped_filtered: AtomicU64,
    /// Further names of a hard-linked inode already mapped.
    pub hard_link_duplicates: AtomicU64,
    /// Directories on another file system, not entered.
    pub other_fs_directories: AtomicU64,
    /// Files or directories that disappeared between listing and opening.
    pub vanished: AtomicU64,
    /// Files whose size or mtime changed while being mapped (mapped again; the later map kept).
    pub changed: AtomicU64,
}

/// Counters as plain numbers, for reports.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct WalkCounts {
    pub files: u64,
    pub directories: u64,
    pub skipped_non_regular: u64,
    pub skipped_filtered: u64,
    pub hard_link_duplicates: u64,
    pub other_fs_directories: u64,
    pub vanished: u64,
    pub changed: u64,
}

impl WalkStats {
    pub fn snapshot(&self) -> WalkCounts {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        WalkCounts {
            files: g(&self.files),
            directories: g(&self.directories),
            skipped_non_regular: g(&self.skipped_non_regular),
            skipped_filtered: g(&self.skipped_filtered),
            hard_link_duplicates: g(&self.hard_link_duplicates),
            other_fs_directories: g(&self.other_fs_directories),
            vanished: g(&self.vanished),
            changed: g(&self.changed),
        }
    }
}

/// A root the user named, checked before any walking.
#[derive(Debug)]
pub enum Root {
    File(PathBuf),
    Dir(PathBuf),
}

/// Why a path given by the user cannot be mapped. Each message is one line naming the path.
#[derive(Debug, thiserror::Error)]
pub enum RootError {
    #[error("{}: no such file or directory", .0.display())]
    NotFound(PathBuf),
    #[error("{}: permission denied", .0.display())]
    PermissionDenied(PathBuf),
    #[error("{}: is {kind}; expected a regular file or a directory", path.display())]
    NotFileOrDirectory { path: PathBuf, kind: &'static str },
    #[error("{}: is on {fs}, which has no FIEMAP extent maps; expected a path on ext4, xfs, btrfs, f2fs or another file system with FIEMAP", path.display())]
    RootWithoutFiemap { path: PathBuf, fs: String },
    #[error("{}: {fs} has no FIEMAP; expected a file on ext4, xfs, btrfs or f2fs", path.display())]
    FileWithoutFiemap { path: PathBuf, fs: String },
    /// A system call failed; `what` says which ("cannot open", "statfs failed", ...).
    /// The cause is part of the one line (not a `source`, so `{:#}` does not repeat it).
    #[error("{}: {what}{}{err}", path.display(), if what.is_empty() { "" } else { ": " })]
    Io {
        path: PathBuf,
        what: &'static str,
        err: io::Error,
    },
    #[error("{}: {err}", path.display())]
    Fiemap { path: PathBuf, err: FiemapError },
}

impl RootError {
    /// As a per-path error of a scan: the path, and the rest of the one-line message.
    pub fn into_path_error(self) -> PathError {
        let path = match &self {
            RootError::NotFound(p) | RootError::PermissionDenied(p) => p.clone(),
            RootError::NotFileOrDirectory { path, .. }
            | RootError::RootWithoutFiemap { path, .. }
            | RootError::FileWithoutFiemap { path, .. }
            | RootError::Io { path, .. }
            | RootError::Fiemap { path, .. } => path.clone(),
        };
        let line = self.to_string();
        let prefix = format!("{}: ", path.display());
        let message = line.strip_prefix(&prefix).unwrap_or(&line).to_string();
        PathError { path, message }
    }
}

fn io_error<'a>(path: &'a Path, what: &'static str) -> impl FnOnce(io::Error) -> RootError + 'a {
    move |err| RootError::Io {
        path: path.to_path_buf(),
        what,
        err,
    }
}

/// Check a user-supplied path: it must exist, be a regular file or a directory, and be on
/// a file system that has FIEMAP. The error is one line naming the path.
pub fn check_root(path: &Path) -> Result<Root, RootError> {
    // Roots follow symlinks (as filefrag does); nothing inside the tree is followed.
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => RootError::NotFound(path.to_path_buf()),
        io::ErrorKind::PermissionDenied => RootError::PermissionDenied(path.to_path_buf()),
        _ => io_error(path, "")(e),
    })?;
    let ft = meta.file_type();
    use std::os::unix::fs::FileTypeExt;
    let kind = if ft.is_dir() || ft.is_file() {
        None
    } else if ft.is_fifo() {
        Some("a FIFO")
    } else if ft.is_socket() {
        Some("a socket")
    } else if ft.is_block_device() {
        Some("a block device")
    } else if ft.is_char_device() {
        Some("a character device")
    } else {
        Some("not a regular file")
    };
    if let Some(kind) = kind {
        return Err(RootError::NotFileOrDirectory {
            path: path.to_path_buf(),
            kind,
        });
    }
    // O_PATH needs no read permission, so the file-system check works on any root.
    let fd = open_path(path).map_err(io_error(path, ""))?;
    let fs = FsInfo::of_fd(fd.as_fd()).map_err(io_error(path, "statfs failed"))?;
    if fs.lacks_fiemap() {
        return Err(RootError::RootWithoutFiemap {
            path: path.to_path_buf(),
            fs: fs.type_name(),
        });
    }
    Ok(if ft.is_dir() {
        Root::Dir(path.to_path_buf())
    } else {
        Root::File(path.to_path_buf())
    })
}

fn open_path(path: &Path) -> io::Result<OwnedFd> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    // SAFETY: plain open(2) with a valid C string.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by open and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Files handed to one task when a directory is large: keeps both cores busy on a flat
/// directory of many files.
const FILES_PER_TASK: usize = 256;

struct Walker<'a, F> {
    opts: &'a WalkOptions,
    visit: &'a F,
    stats: &'a WalkStats,
    errors: Mutex<Vec<PathError>>,
    seen_links: Mutex<HashSet<(u64, u64)>>,
    fs_cache: RwLock<HashMap<u64, FsInfo>>,
}

/// Walk `roots` (checked with [`check_root`]) in parallel on the current rayon pool, calling
/// `visit` for every regular file mapped. Returns per-path errors; counters go to `stats`.
pub fn walk<F>(roots: &[Root], opts: &WalkOptions, stats: &WalkStats, visit: &F) -> Vec<PathError>
where
    F: Fn(ScannedFile) + Sync,
{
    let w = Walker {
        opts,
        visit,
        stats,
        errors: Mutex::new(Vec::new()),
        seen_links: Mutex::new(HashSet::new()),
        fs_cache: RwLock::new(HashMap::new()),
    };
    rayon::scope(|s| {
        for root in roots {
            match root {
                Root::File(p) => {
                    // An explicitly named file is mapped whatever its extension.
                    w.map_file(libc::AT_FDCWD, p, p.clone(), true)
                }
                Root::Dir(p) => match open_root_dir(p) {
                    Ok(dir) => {
                        let dev = fstat(dir.as_raw_fd()).map(|st| st.st_dev).unwrap_or(0);
                        let w = &w;
                        s.spawn(move |s| w.walk_dir(s, dir, p.clone(), dev));
                    }
                    Err(e) => w.error(p, e, "cannot open directory"),
                },
            }
        }
    });
    let mut errors = w.errors.into_inner().unwrap();
    errors.sort_by(|a, b| a.path.cmp(&b.path));
    errors
}

impl<'a, F> Walker<'a, F>
where
    F: Fn(ScannedFile) + Sync,
{
    fn error(&self, path: &Path, e: io::Error, what: &str) {
        let message = match e.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => format!("{what}: permission denied"),
            _ => format!("{what}: {e}"),
        };
        self.errors.lock().unwrap().push(PathError {
            path: path.to_path_buf(),
            message,
        });
    }

    fn walk_dir<'s>(&'s self, s: &rayon::Scope<'s>, dir: OwnedFd, path: PathBuf, root_dev: u64) {
        self.stats.directories.fetch_add(1, Ordering::Relaxed);
        let entries = match read_dir_entries(dir.as_raw_fd()) {
            Ok(e) => e,
            Err(e) => return self.error(&path, e, "cannot read directory"),
        };
        let mut files: Vec<Vec<u8>> = Vec::new(); // regular files, mapped below
        for (name, dtype) in entries {
            let dtype = if dtype == libc::DT_UNKNOWN {
                match fstatat_nofollow(dir.as_raw_fd(), &name) {
                    Ok(st) => mode_to_dtype(st.st_mode),
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                        self.stats.vanished.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    Err(e) => {
                        self.error(&path.join(OsStr::from_bytes(&name)), e, "cannot stat");
                        continue;
                    }
                }
            } else {
                dtype
            };
            match dtype {
                libc::DT_DIR => {
                    let sub = path.join(OsStr::from_bytes(&name));
                    match open_dir_at(dir.as_raw_fd(), Path::new(OsStr::from_bytes(&name))) {
                        Ok(fd) => {
                            let dev = fstat(fd.as_raw_fd()).map(|st| st.st_dev).unwrap_or(0);
                            if self.opts.one_file_system && dev != root_dev {
                                self.stats
                                    .other_fs_directories
                                    .fetch_add(1, Ordering::Relaxed);
                                continue;
                            }
                            s.spawn(move |s| self.walk_dir(s, fd, sub, root_dev));
                        }
                        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                            self.stats.vanished.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => self.error(&sub, e, "cannot open directory"),
                    }
                }
                libc::DT_REG => {
                    if self.wanted(&name) {
                        files.push(name);
                    } else {
                        self.stats.skipped_filtered.fetch_add(1, Ordering::Relaxed);
                    }
                }
                _ => {
                    self.stats
                        .skipped_non_regular
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if files.len() <= FILES_PER_TASK {
            for name in files {
                let full = path.join(OsStr::from_bytes(&name));
                self.map_file(
                    dir.as_raw_fd(),
                    Path::new(OsStr::from_bytes(&name)),
                    full,
                    false,
                );
            }
            return;
        }
        // Large directory: share the directory fd between tasks of FILES_PER_TASK files.
        let dir = std::sync::Arc::new(dir);
        let path = std::sync::Arc::new(path);
        while !files.is_empty() {
            let chunk: Vec<Vec<u8>> = files.drain(..files.len().min(FILES_PER_TASK)).collect();
            let (dir, path) = (dir.clone(), path.clone());
            s.spawn(move |_| {
                for name in chunk {
                    let full = path.join(OsStr::from_bytes(&name));
                    self.map_file(
                        dir.as_raw_fd(),
                        Path::new(OsStr::from_bytes(&name)),
                        full,
                        false,
                    );
                }
            });
        }
    }

    fn wanted(&self, name: &[u8]) -> bool {
        if self.opts.extensions.is_empty() {
            return true;
        }
        let ext = Path::new(OsStr::from_bytes(name))
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match ext {
            Some(e) => self.opts.extensions.contains(&e),
            None => false,
        }
    }

    fn fs_of(&self, dev: u64, fd: RawFd) -> io::Result<FsInfo> {
        if let Some(fs) = self.fs_cache.read().unwrap().get(&dev) {
            return Ok(*fs);
        }
        // SAFETY: fd is open for the duration of this call.
        let fs = FsInfo::of_fd(unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) })?;
        self.fs_cache.write().unwrap().insert(dev, fs);
        Ok(fs)
    }

    /// Open, stat, map and close one file. `rel` is relative to `dirfd`.
    fn map_file(&self, dirfd: RawFd, rel: &Path, full: PathBuf, named: bool) {
        let fd = match open_file_at(dirfd, rel, named) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) && !named => {
                self.stats.vanished.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) && !named => {
                // Replaced by a symlink since the listing: not followed.
                self.stats
                    .skipped_non_regular
                    .fetch_add(1, Ordering::Relaxed);
                return;
            }
            Err(e) => return self.error(&full, e, "cannot open"),
        };
        let raw = fd.as_raw_fd();
        let mut before = match fstat(raw) {
            Ok(st) => st,
            Err(e) => return self.error(&full, e, "cannot stat"),
        };
        if before.st_mode & libc::S_IFMT != libc::S_IFREG {
            self.stats
                .skipped_non_regular
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        if before.st_nlink > 1 {
            let key = (before.st_dev, before.st_ino);
            if !self.seen_links.lock().unwrap().insert(key) {
                self.stats
                    .hard_link_duplicates
                    .fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        let fs = match self.fs_of(before.st_dev, raw) {
            Ok(fs) => fs,
            Err(e) => return self.error(&full, e, "statfs failed"),
        };
        let mut extents = Vec::new();
        let mut changed = false;
        for attempt in 0..2 {
            extents.clear();
            if let Err(e) = fiemap::read_extents_into(fd.as_fd(), self.opts.sync, &mut extents) {
                let message = match e {
                    FiemapError::Unsupported => format!(
                        "{} has no FIEMAP; this file's extents cannot be read",
                        fs.type_name()
                    ),
                    other => other.to_string(),
                };
                self.errors.lock().unwrap().push(PathError {
                    path: full,
                    message,
                });
                return;
            }
            let after = match fstat(raw) {
                Ok(st) => st,
                Err(e) => return self.error(&full, e, "cannot stat"),
            };
            let same = after.st_size == before.st_size
                && after.st_mtime == before.st_mtime
                && after.st_mtime_nsec == before.st_mtime_nsec
                && after.st_blocks == before.st_blocks;
            if same {
                break;
            }
            changed = true;
            before = after;
            if attempt == 1 {
                break;
            }
        }
        if changed {
            self.stats.changed.fetch_add(1, Ordering::Relaxed);
        }
        drop(fd);
        self.stats.files.fetch_add(1, Ordering::Relaxed);
        (self.visit)(ScannedFile {
            path: full,
            dev: before.st_dev,
            ino: before.st_ino,
            nlink: before.st_nlink,
            fs,
            layout: FileLayout {
                size: before.st_size as u64,
                allocated: before.st_blocks as u64 * 512,
                block_size: fs.block_size,
                extents,
            },
        });
    }
}

fn cpath(p: &Path) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// openat(2) with O_CLOEXEC added.
pub fn open_at(dirfd: RawFd, p: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    let c = cpath(p)?;
    // SAFETY: openat with a valid C string; the returned fd is owned here.
    let fd = unsafe { libc::openat(dirfd, c.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh fd from openat.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn open_dir_at(dirfd: RawFd, p: &Path) -> io::Result<OwnedFd> {
    open_at(
        dirfd,
        p,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
    )
}

/// A directory the user named: a symlink to one is followed, as for files.
fn open_root_dir(p: &Path) -> io::Result<OwnedFd> {
    open_at(libc::AT_FDCWD, p, libc::O_RDONLY | libc::O_DIRECTORY)
}

/// O_NONBLOCK: a file replaced by a FIFO after listing must not hang the walk. Only a
/// file named by the user is reached through a symlink.
fn open_file_at(dirfd: RawFd, p: &Path, follow: bool) -> io::Result<OwnedFd> {
    let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
    open_at(dirfd, p, libc::O_RDONLY | nofollow | libc::O_NONBLOCK)
}

fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    // SAFETY: stat is plain data filled by the kernel.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn fstatat_nofollow(dirfd: RawFd, name: &[u8]) -> io::Result<libc::stat> {
    let c = std::ffi::CString::new(name.to_vec())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"))?;
    // SAFETY: as fstat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatat(dirfd, c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn mode_to_dtype(mode: libc::mode_t) -> u8 {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => libc::DT_DIR,
        libc::S_IFREG => libc::DT_REG,
        libc::S_IFLNK => libc::DT_LNK,
        _ => libc::DT_UNKNOWN + 100, // anything else is skipped as non-regular
    }
}

/// Names and d_type of a directory's entries, "." and ".." left out.
fn read_dir_entries(dirfd: RawFd) -> io::Result<Vec<(Vec<u8>, u8)>> {
    // fdopendir takes ownership of the fd it is given, so hand it a duplicate.
    // SAFETY: dup of an fd we hold.
    let dup = unsafe { libc::fcntl(dirfd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: dup is a directory fd we own; closedir closes it.
    let dirp = unsafe { libc::fdopendir(dup) };
    if dirp.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: still ours when fdopendir failed.
        unsafe { libc::close(dup) };
        return Err(e);
    }
    let mut out = Vec::new();
    loop {
        // readdir signals errors only through errno, so clear it first.
        // SAFETY: errno location is thread-local.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: dirp is a valid DIR*.
        let ent = unsafe { libc::readdir64(dirp) };
        if ent.is_null() {
            let errno = unsafe { *libc::__errno_location() };
            unsafe { libc::closedir(dirp) };
            if errno != 0 {
                return Err(io::Error::from_raw_os_error(errno));
            }
            return Ok(out);
        }
        // SAFETY: d_name is NUL-terminated within the entry.
        let (name, dtype) = unsafe {
            (
                CStr::from_ptr((*ent).d_name.as_ptr()).to_bytes().to_vec(),
                (*ent).d_type,
            )
        };
        if name == b"." || name == b".." {
            continue;
        }
        out.push((name, dtype));
    }
}

/// Map one file by path (no walk): for tools that already know their file.
pub fn map_path(path: &Path, sync: bool) -> Result<ScannedFile, RootError> {
    let file = File::open(path).map_err(io_error(path, "cannot open"))?;
    let st = fstat(file.as_raw_fd()).map_err(io_error(path, "cannot stat"))?;
    let fs = FsInfo::of_fd(file.as_fd()).map_err(io_error(path, "statfs failed"))?;
    let extents = fiemap::read_extents(file.as_fd(), sync).map_err(|e| match e {
        FiemapError::Unsupported => RootError::FileWithoutFiemap {
            path: path.to_path_buf(),
            fs: fs.type_name(),
        },
        err => RootError::Fiemap {
            path: path.to_path_buf(),
            err,
        },
    })?;
    Ok(ScannedFile {
        path: path.to_path_buf(),
        dev: st.st_dev,
        ino: st.st_ino,
        nlink: st.st_nlink,
        fs,
        layout: FileLayout {
            size: st.st_size as u64,
            allocated: st.st_blocks as u64 * 512,
            block_size: fs.block_size,
            extents,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_root_says_why_in_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let e = check_root(&missing).unwrap_err();
        assert!(
            matches!(e, RootError::NotFound(ref p) if *p == missing),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!("{}: no such file or directory", missing.display())
        );

        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let e = check_root(&fifo).unwrap_err();
        assert!(
            matches!(e, RootError::NotFileOrDirectory { kind: "a FIFO", .. }),
            "{e:?}"
        );

        // procfs has no extent maps.
        let e = check_root(Path::new("/proc/self/status")).unwrap_err();
        assert!(
            matches!(e, RootError::RootWithoutFiemap { ref fs, .. } if fs == "proc"),
            "{e:?}"
        );
        assert!(!e.to_string().contains('\n'));
    }
}
