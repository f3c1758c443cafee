//! Parallel tree walk that maps every regular file once.
//!
//! Directories are read with getdents and files opened relative to their directory
//! (openat), so each file costs open + FIEMAP + statx + close and nothing more.
//! The walk stays on the file system of each root unless told otherwise, reports each
//! hard-linked inode once, and treats files that vanish or change under it as ordinary
//! events to count, not failures.

use std::collections::{HashMap, HashSet};
use std::ffi::{CStr, OsStr};
use std::fs::File;
use std::io;
use std::ops::ControlFlow;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use super::model::{Extent, FileLayout};
use fragkit_sys::fiemap::{self, FiemapError};
use fragkit_sys::fsinfo::FsInfo;
use fragkit_sys::stat;

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
    /// Nothing mapped yet: the buffer the walk maps file after file into.
    pub fn empty() -> ScannedFile {
        ScannedFile {
            path: PathBuf::new(),
            dev: 0,
            ino: 0,
            nlink: 0,
            fs: FsInfo::unknown(),
            layout: FileLayout {
                size: 0,
                allocated: 0,
                block_size: 0,
                extents: Vec::new(),
            },
        }
    }

    /// "major:minor" of the device, as in docs/design.md's JSON.
    pub fn dev_string(&self) -> String {
        let (major, minor) = fragkit_sys::dev::split(self.dev);
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
    // open(2) is openat(AT_FDCWD) (glibc makes the same system call).
    fragkit_sys::openat::open_at(libc::AT_FDCWD, &c, libc::O_PATH)
}

/// Files handed to one worker at a time: large enough that the hand-off (two channel
/// operations) is noise beside 256 × open+FIEMAP+close, small enough to keep both cores
/// busy on a directory of a few thousand files.
const FILES_PER_BATCH: usize = 256;

/// Batches mapped but not yet handed to the sink, per worker: bounds the memory a slow
/// file (a huge extent map) can make the others pile up behind it.
const BATCHES_IN_FLIGHT_PER_WORKER: usize = 4;

/// Consecutive files of one directory (or one named root file), in output order.
struct Job {
    seq: u64,
    /// None: `names` are paths named by the user, opened relative to the working directory.
    dir: Option<std::sync::Arc<OwnedFd>>,
    dir_path: std::sync::Arc<PathBuf>,
    /// The files' names (paths if `dir` is None), each followed by a NUL byte: one buffer
    /// per batch, not one allocation per file.
    names: Vec<u8>,
}

/// Shared state of one walk: options, counters, errors, the hard-link and statfs caches.
struct Walker<'a> {
    opts: &'a WalkOptions,
    stats: &'a WalkStats,
    errors: Mutex<Vec<PathError>>,
    seen_links: Mutex<HashSet<(u64, u64)>>,
    fs_cache: RwLock<HashMap<u64, FsInfo>>,
    /// Set when the sink wants no more (its output closed) or a worker panicked: the
    /// walk lists no further directories.
    stop: AtomicBool,
}

/// Walk `roots` (checked with [`check_root`]) and call `visit` for every regular file
/// mapped, from worker threads, in no particular order. Returns per-path errors; counters
/// go to `stats`. [`walk_ordered`] is the same walk with results handed over in order.
pub fn walk<F>(roots: &[Root], opts: &WalkOptions, stats: &WalkStats, visit: &F) -> Vec<PathError>
where
    F: Fn(ScannedFile) + Sync,
{
    // The visitor keeps each file: hand it over, the walk starts a fresh buffer.
    let workers = rayon::current_num_threads();
    walk_ordered(
        roots,
        opts,
        stats,
        workers,
        &|| (),
        &|_, f| visit(std::mem::replace(f, ScannedFile::empty())),
        &mut |_| ControlFlow::Continue(()),
    )
}

/// Walk `roots` with `workers` threads mapping files. Files are mapped in batches of consecutive files: each batch starts as
/// `new_batch()`, each mapped file goes through `map(&mut batch, file)` on a worker, and
/// the batches reach `sink` on the calling thread in walk order, which is the byte order
/// of the full paths within each root (directory entries sorted by name, a directory
/// sorting as its name followed by '/'), roots in the order given.
///
/// Memory stays bounded whatever the tree's size: one open directory per level of the
/// current path, and at most a few batches per worker between the walk and the sink.
pub fn walk_ordered<B: Send>(
    roots: &[Root],
    opts: &WalkOptions,
    stats: &WalkStats,
    workers: usize,
    new_batch: &(dyn Fn() -> B + Sync),
    map: &(dyn Fn(&mut B, &mut ScannedFile) + Sync),
    sink: &mut dyn FnMut(B) -> ControlFlow<()>,
) -> Vec<PathError> {
    let w = Walker {
        opts,
        stats,
        errors: Mutex::new(Vec::new()),
        seen_links: Mutex::new(HashSet::new()),
        fs_cache: RwLock::new(HashMap::new()),
        stop: AtomicBool::new(false),
    };
    let workers = workers.max(1);
    let run = |job: &Job| {
        let mut batch = new_batch();
        let dirfd = job.dir.as_ref().map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
        let named = job.dir.is_none();
        // One file's buffers (path, extents) for the whole batch: `map` borrows the file
        // (or takes it, leaving an empty one), the next file is mapped into the same room.
        let mut file = ScannedFile::empty();
        for name in job.names.split_inclusive(|&b| b == 0) {
            let name = CStr::from_bytes_with_nul(name).expect("one NUL after each name");
            let dir = if named {
                Path::new("")
            } else {
                &**job.dir_path
            };
            set_path(&mut file.path, dir, name.to_bytes());
            if w.map_file(dirfd, name, named, &mut file) {
                map(&mut batch, &mut file);
            }
        }
        batch
    };
    if workers == 1 {
        // One thread: walk, map and sink inline, no hand-offs (a panic unwinds as usual).
        w.produce(roots, &mut |job| {
            if sink(run(&job)).is_break() {
                w.stop.store(true, Ordering::Relaxed);
            }
        });
    } else {
        let in_flight = workers * BATCHES_IN_FLIGHT_PER_WORKER;
        let (tokens_tx, tokens_rx) = crossbeam_channel::bounded::<()>(in_flight);
        for _ in 0..in_flight {
            tokens_tx.send(()).expect("token channel has room");
        }
        let (jobs_tx, jobs_rx) = crossbeam_channel::bounded::<Job>(in_flight);
        let (done_tx, done_rx) = crossbeam_channel::unbounded::<(u64, B)>();
        // A worker's panic, kept to be raised again on this thread once the others ended.
        let panicked: Mutex<Option<Box<dyn std::any::Any + Send>>> = Mutex::new(None);
        std::thread::scope(|scope| {
            let w = &w;
            scope.spawn(move || {
                w.produce(roots, &mut |job| {
                    // Wait until the sink has taken a batch if `in_flight` are out.
                    if tokens_rx.recv().is_ok() && !w.stop.load(Ordering::Relaxed) {
                        let _ = jobs_tx.send(job);
                    }
                });
                drop(jobs_tx);
            });
            for _ in 0..workers {
                let (jobs_rx, done_tx, run) = (jobs_rx.clone(), done_tx.clone(), &run);
                let (tokens_tx, panicked) = (tokens_tx.clone(), &panicked);
                scope.spawn(move || {
                    for job in jobs_rx {
                        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&job))) {
                            Ok(batch) => {
                                let _ = done_tx.send((job.seq, batch));
                            }
                            Err(payload) => {
                                // The batch never arrives, so the sink could wait for it
                                // forever: stop the walk, free the producer, end.
                                w.stop.store(true, Ordering::Relaxed);
                                panicked.lock().unwrap().get_or_insert(payload);
                                let _ = tokens_tx.try_send(());
                                return;
                            }
                        }
                    }
                });
            }
            drop(done_tx);
            let mut waiting = std::collections::BTreeMap::new();
            let mut next = 0u64;
            for (seq, batch) in done_rx {
                if w.stop.load(Ordering::Relaxed) {
                    // Stopping: drop what is still mapped, keep the producer moving.
                    let _ = tokens_tx.try_send(());
                    continue;
                }
                waiting.insert(seq, batch);
                while let Some(b) = waiting.remove(&next) {
                    next += 1;
                    let _ = tokens_tx.try_send(());
                    if sink(b).is_break() {
                        w.stop.store(true, Ordering::Relaxed);
                        waiting.clear();
                        break;
                    }
                }
            }
        });
        if let Some(payload) = panicked.into_inner().unwrap() {
            std::panic::resume_unwind(payload);
        }
    }
    let mut errors = w.errors.into_inner().unwrap();
    errors.sort_by(|a, b| a.path.cmp(&b.path));
    errors
}

impl Walker<'_> {
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

    /// Hand every file of `roots` to `emit` in batches, in walk order (one thread).
    fn produce(&self, roots: &[Root], emit: &mut dyn FnMut(Job)) {
        let mut seq = 0u64;
        for root in roots {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            match root {
                Root::File(p) => {
                    // An explicitly named file is mapped whatever its extension.
                    emit(Job {
                        seq,
                        dir: None,
                        dir_path: std::sync::Arc::new(PathBuf::new()),
                        names: [p.as_os_str().as_bytes(), b"\0"].concat(),
                    });
                    seq += 1;
                }
                Root::Dir(p) => match open_root_dir(p) {
                    Ok(dir) => {
                        let id = dir_id(&dir);
                        self.walk_tree(dir, p.clone(), id, &mut seq, emit);
                    }
                    Err(e) => self.error(p, e, "cannot open directory"),
                },
            }
        }
    }

    /// Walk the tree under `dir` (at `path`) without recursion: a stack of levels, so
    /// that depth costs heap, not stack (a tree 10,000 directories deep overflowed the
    /// walking thread's stack). Levels deeper than [`OPEN_LEVELS`] give their descriptor
    /// up while a subdirectory is walked and get it back through the subdirectory's
    /// "..", checked to be the same directory (device, inode), as fts does: open
    /// descriptors stay bounded however deep the tree.
    fn walk_tree(
        &self,
        dir: OwnedFd,
        path: PathBuf,
        root_id: (u64, u64),
        seq: &mut u64,
        emit: &mut dyn FnMut(Job),
    ) {
        let mut stack: Vec<Level> = Vec::new();
        if let Some(level) = self.enter(dir, path, root_id) {
            stack.push(level);
        }
        while let Some(top) = stack.last_mut() {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            let Some(k) = top.kept.get(top.next) else {
                top.flush(seq, emit);
                let done = stack.pop().expect("the top level");
                let Some(parent) = stack.last_mut() else {
                    break;
                };
                if parent.dir.is_none() {
                    let child = done
                        .dir
                        .as_ref()
                        .expect("the top level keeps its descriptor");
                    match reopen_parent(child, parent.id) {
                        Ok(fd) => parent.dir = Some(std::sync::Arc::new(fd)),
                        Err(e) => {
                            // The chain back up is broken (a directory moved meanwhile):
                            // nothing above can be reached safely.
                            self.error(&parent.path, e, "cannot return to directory");
                            return;
                        }
                    }
                }
                continue;
            };
            top.next += 1;
            let (start, is_dir) = (k.start, k.is_dir);
            if !is_dir {
                let cname = top.entries.name(start);
                top.names.extend_from_slice(cname.to_bytes_with_nul());
                top.count += 1;
                if top.count == FILES_PER_BATCH {
                    top.flush(seq, emit);
                }
                continue;
            }
            top.flush(seq, emit);
            let cname = top.entries.name(start);
            let sub = top.path.join(OsStr::from_bytes(cname.to_bytes()));
            let dirfd = top
                .dir
                .as_ref()
                .expect("the top level keeps its descriptor");
            match open_dir_at(dirfd.as_raw_fd(), cname) {
                Ok(fd) => {
                    let id = dir_id(&fd);
                    if self.opts.one_file_system && id.0 != root_id.0 {
                        self.stats
                            .other_fs_directories
                            .fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    if let Some(level) = self.enter(fd, sub, id) {
                        if stack.len() > OPEN_LEVELS {
                            // Jobs already emitted keep their own reference.
                            stack.last_mut().expect("the top level").dir = None;
                        }
                        stack.push(level);
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    self.stats.vanished.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => self.error(&sub, e, "cannot open directory"),
            }
        }
    }

    /// A directory opened for the walk (`id`: its [`dir_id`]): its entries read, the
    /// regular files to map and the directories to enter kept in path order. None when it
    /// cannot be read (said).
    fn enter(&self, dir: OwnedFd, path: PathBuf, id: (u64, u64)) -> Option<Level> {
        self.stats.directories.fetch_add(1, Ordering::Relaxed);
        let entries = match read_dir_entries(dir.as_fd()) {
            Ok(e) => e,
            Err(e) => {
                self.error(&path, e, "cannot read directory");
                return None;
            }
        };
        // Regular files to map and directories to enter, nothing else.
        let mut kept: Vec<Kept> = Vec::with_capacity(entries.list.len());
        for &(start, len, dtype) in &entries.list {
            let cname = entries.name((start, len));
            let name = cname.to_bytes();
            let dtype = if dtype == libc::DT_UNKNOWN {
                match stat::fstatat_nofollow(dir.as_raw_fd(), cname) {
                    Ok(st) => mode_to_dtype(st.st_mode),
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                        self.stats.vanished.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    Err(e) => {
                        self.error(&path.join(OsStr::from_bytes(name)), e, "cannot stat");
                        continue;
                    }
                }
            } else {
                dtype
            };
            let is_dir = match dtype {
                libc::DT_DIR => true,
                libc::DT_REG if self.wanted(name) => false,
                libc::DT_REG => {
                    self.stats.skipped_filtered.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                _ => {
                    self.stats
                        .skipped_non_regular
                        .fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            };
            kept.push(Kept {
                key: sort_prefix(name, is_dir),
                start: (start, len),
                is_dir,
            });
        }
        // Byte order of the full paths: a directory sorts as "name/", so its whole subtree
        // lands where its paths sort ("a.txt" < "a/x" because '.' < '/'). The first eight
        // bytes decide almost every comparison as one integer compare.
        kept.sort_unstable_by(|a, b| {
            a.key.cmp(&b.key).then_with(|| {
                let (an, bn) = (entries.name(a.start), entries.name(b.start));
                path_order(an.to_bytes(), a.is_dir, bn.to_bytes(), b.is_dir)
            })
        });
        Some(Level {
            dir: Some(std::sync::Arc::new(dir)),
            id,
            path: std::sync::Arc::new(path),
            entries,
            kept,
            next: 0,
            names: Vec::new(),
            count: 0,
        })
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

    /// Open, map, stat and close one file: open + FIEMAP + statx + close, the C floor's
    /// open + FIEMAP + close plus the one stat that gives size, blocks, device and inode.
    /// `rel` is relative to `dirfd`.
    ///
    /// The stat comes after FIEMAP, so size and blocks are no older than the map. A file
    /// truncated while it was mapped shows extents past its end and is mapped once more
    /// (counted as changed); one that grew or was rewritten in place meanwhile keeps the
    /// map FIEMAP gave, as `filefrag` would, and the next scan sees the change. (The
    /// stat before and after FIEMAP that caught those too cost 14% of a scan.)
    ///
    /// Maps into `file`, whose path is already set, reusing its extent vector; false if
    /// the file was skipped (vanished, not regular, a hard link seen before, an error).
    fn map_file(&self, dirfd: RawFd, rel: &CStr, named: bool, file: &mut ScannedFile) -> bool {
        let full = &file.path;
        let fd = match open_file_at(dirfd, rel, named) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) && !named => {
                self.stats.vanished.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) && !named => {
                // Replaced by a symlink since the listing: not followed.
                self.stats
                    .skipped_non_regular
                    .fetch_add(1, Ordering::Relaxed);
                return false;
            }
            Err(e) => {
                self.error(full, e, "cannot open");
                return false;
            }
        };
        let raw = fd.as_raw_fd();
        let mut extents = std::mem::take(&mut file.layout.extents);
        let mut changed = false;
        for attempt in 0..2 {
            extents.clear();
            let mapped = fiemap::read_extents_into(fd.as_fd(), self.opts.sync, &mut extents);
            let st = match statx_fd(fd.as_fd()) {
                Ok(st) => st,
                Err(e) => {
                    self.error(full, e, "cannot stat");
                    return false;
                }
            };
            // Replaced by a directory or FIFO since the listing (FIEMAP's answer is moot).
            if u32::from(st.stx_mode) & libc::S_IFMT != libc::S_IFREG {
                self.stats
                    .skipped_non_regular
                    .fetch_add(1, Ordering::Relaxed);
                return false;
            }
            if attempt == 0 && st.stx_nlink > 1 {
                let key = (st.dev(), st.stx_ino);
                if !self.seen_links.lock().unwrap().insert(key) {
                    self.stats
                        .hard_link_duplicates
                        .fetch_add(1, Ordering::Relaxed);
                    return false;
                }
            }
            // The batch's files are mostly on the previous file's file system.
            let known = (file.dev == st.dev() && file.fs.magic != 0).then_some(file.fs);
            let fs = match known.map_or_else(|| self.fs_of(st.dev(), raw), Ok) {
                Ok(fs) => fs,
                Err(e) => {
                    self.error(full, e, "statfs failed");
                    return false;
                }
            };
            if let Err(e) = mapped {
                let message = match e {
                    FiemapError::Unsupported => format!(
                        "{} has no FIEMAP; this file's extents cannot be read",
                        fs.type_name()
                    ),
                    other => other.to_string(),
                };
                self.errors.lock().unwrap().push(PathError {
                    path: full.clone(),
                    message,
                });
                return false;
            }
            let bs = u64::from(fs.block_size.max(1));
            let end = extents.last().map_or(0, |e| e.logical_end());
            let truncated = end > st.stx_size.div_ceil(bs) * bs;
            if truncated && attempt == 0 {
                changed = true;
                continue;
            }
            if changed {
                self.stats.changed.fetch_add(1, Ordering::Relaxed);
            }
            drop(fd);
            self.stats.files.fetch_add(1, Ordering::Relaxed);
            file.dev = st.dev();
            file.ino = st.stx_ino;
            file.nlink = u64::from(st.stx_nlink);
            file.fs = fs;
            file.layout = FileLayout {
                size: st.stx_size,
                allocated: st.stx_blocks * 512,
                block_size: fs.block_size,
                extents,
            };
            return true;
        }
        unreachable!("the second attempt always returns")
    }
}

/// What statx says about an open file, with the device number put together.
trait StatxDev {
    fn dev(&self) -> u64;
}

impl StatxDev for libc::statx {
    fn dev(&self) -> u64 {
        fragkit_sys::dev::makedev(self.stx_dev_major, self.stx_dev_minor)
    }
}

/// statx(fd, "", AT_EMPTY_PATH) for the fields a scan needs.
fn statx_fd(fd: BorrowedFd<'_>) -> io::Result<libc::statx> {
    let mask = libc::STATX_TYPE
        | libc::STATX_MODE
        | libc::STATX_NLINK
        | libc::STATX_INO
        | libc::STATX_SIZE
        | libc::STATX_BLOCKS;
    stat::statx_fd(fd, mask)
}

fn cpath(p: &Path) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// One command-line argument mapped as `filefrag -v` maps it: opened with symlinks followed
/// (O_NONBLOCK, so a FIFO or a device does not wait for a peer), stat'ed, and mapped with
/// FIEMAP, or where the file system has none, probed with FIBMAP as filefrag does.
pub struct ArgumentMap {
    pub dev: u64,
    pub fs: FsInfo,
    pub size: u64,
    /// An ext2/3/4 file without EXT4_EXTENTS_FL (block-mapped or inline data).
    pub block_mapped_ext: bool,
    pub extents: ArgumentExtents,
}

/// What FIEMAP (and FIBMAP after it) said about an argument.
pub enum ArgumentExtents {
    Mapped(Vec<Extent>),
    /// FIEMAP failed; `bad_flags` when it failed on flags it did not know. `fibmap` is
    /// FIBMAP's answer for block 0, None for an empty file (nothing to ask).
    Unmapped {
        bad_flags: Option<u32>,
        fibmap: Option<io::Result<u32>>,
    },
}

/// EXT4_EXTENTS_FL (include/uapi/linux/fs.h FS_EXTENT_FL).
const EXT4_EXTENTS_FL: u32 = 0x0008_0000;

/// Map `path` as filefrag does; Err names the step that failed ("open", "stat",
/// "fstatfs") with its error.
pub fn map_argument(path: &Path, sync: bool) -> Result<ArgumentMap, (&'static str, io::Error)> {
    let file = File::from(
        open_at(libc::AT_FDCWD, path, libc::O_RDONLY | libc::O_NONBLOCK)
            .map_err(|e| ("open", e))?,
    );
    let st = file.metadata().map_err(|e| ("stat", e))?;
    let fs = FsInfo::of_fd(file.as_fd()).map_err(|e| ("fstatfs", e))?;
    // statfs magics of ext2, ext3 (old kernels) and ext4.
    let block_mapped_ext = (0xef51..=0xef53).contains(&fs.magic)
        && fragkit_sys::inode::flags(&file).is_ok_and(|f| f & EXT4_EXTENTS_FL == 0);
    let size = st.size();
    let extents = match fiemap::read_extents(file.as_fd(), sync) {
        Ok(extents) => ArgumentExtents::Mapped(extents),
        Err(e) => ArgumentExtents::Unmapped {
            bad_flags: match e {
                FiemapError::BadFlags(flags) => Some(flags),
                _ => None,
            },
            fibmap: (size > 0).then(|| fiemap::fibmap(file.as_fd(), 0)),
        },
    };
    Ok(ArgumentMap {
        dev: st.dev(),
        fs,
        size,
        block_mapped_ext,
        extents,
    })
}

/// openat(2) with O_CLOEXEC added.
pub fn open_at(dirfd: RawFd, p: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    open_at_c(dirfd, &cpath(p)?, flags)
}

/// openat(2) of a name already NUL-terminated (a directory entry): no copy.
fn open_at_c(dirfd: RawFd, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    fragkit_sys::openat::open_at(dirfd, name, flags)
}

fn open_dir_at(dirfd: RawFd, name: &CStr) -> io::Result<OwnedFd> {
    open_at_c(
        dirfd,
        name,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
    )
}

/// A directory the user named: a symlink to one is followed, as for files.
fn open_root_dir(p: &Path) -> io::Result<OwnedFd> {
    open_at(libc::AT_FDCWD, p, libc::O_RDONLY | libc::O_DIRECTORY)
}

/// O_NONBLOCK: a file replaced by a FIFO after listing must not hang the walk. Only a
/// file named by the user is reached through a symlink.
fn open_file_at(dirfd: RawFd, name: &CStr, follow: bool) -> io::Result<OwnedFd> {
    let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
    open_at_c(dirfd, name, libc::O_RDONLY | nofollow | libc::O_NONBLOCK)
}

/// `path` = `dir` joined with `name` as `Path::join` joins them, written into the
/// path's own buffer (no allocation once it is long enough).
fn set_path(path: &mut PathBuf, dir: &Path, name: &[u8]) {
    use std::os::unix::ffi::OsStringExt;
    let mut buf = std::mem::take(path).into_os_string().into_vec();
    buf.clear();
    let dir = dir.as_os_str().as_bytes();
    if name.first() != Some(&b'/') {
        buf.extend_from_slice(dir);
        if !dir.is_empty() && !dir.ends_with(b"/") {
            buf.push(b'/');
        }
    }
    buf.extend_from_slice(name);
    *path = PathBuf::from(std::ffi::OsString::from_vec(buf));
}

/// Byte order of two names of one directory as parts of full paths, a directory's name
/// followed by '/'. Compares the common prefix as slices (memcmp): the chained-iterator
/// comparison this replaces was 23% of a one-thread scan's instructions (callgrind).
fn path_order(a: &[u8], a_dir: bool, b: &[u8], b_dir: bool) -> std::cmp::Ordering {
    let n = a.len().min(b.len());
    a[..n].cmp(&b[..n]).then_with(|| {
        // One name is a prefix of the other. Names hold no '/', so the next bytes differ
        // unless both names are equal.
        let next = |s: &[u8], dir: bool| s.get(n).copied().or(dir.then_some(b'/'));
        next(a, a_dir).cmp(&next(b, b_dir))
    })
}

fn mode_to_dtype(mode: libc::mode_t) -> u8 {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => libc::DT_DIR,
        libc::S_IFREG => libc::DT_REG,
        libc::S_IFLNK => libc::DT_LNK,
        _ => libc::DT_UNKNOWN + 100, // anything else is skipped as non-regular
    }
}

/// A directory's entries, "." and ".." left out: every name NUL-terminated in one
/// buffer (one allocation per directory, not per entry) and (offset, d_type) per entry.
struct DirEntries {
    names: Vec<u8>,
    /// (offset, length without the NUL, d_type)
    list: Vec<(u32, u32, u8)>,
}

impl DirEntries {
    fn name(&self, (start, len): (u32, u32)) -> &CStr {
        let (start, len) = (start as usize, len as usize);
        let bytes = &self.names[start..start + len + 1];
        debug_assert!(bytes[len] == 0 && !bytes[..len].contains(&0));
        // SAFETY: read_dir_entries put each d_name (no NUL inside) and then one NUL here.
        unsafe { CStr::from_bytes_with_nul_unchecked(bytes) }
    }
}

/// Directory levels that keep their descriptor open while a subdirectory is walked; deeper
/// ones reopen theirs through ".." (fts's approach). 256 open directories at most, far
/// under the usual 1,024 descriptors a process may hold.
const OPEN_LEVELS: usize = 256;

/// One directory on the walk's stack.
struct Level {
    /// None while a subdirectory is walked below [`OPEN_LEVELS`]; reopened from it.
    dir: Option<std::sync::Arc<OwnedFd>>,
    /// (device, inode), to check that ".." led back to this directory.
    id: (u64, u64),
    path: std::sync::Arc<PathBuf>,
    entries: DirEntries,
    /// The entries to visit, in path order, and the next one's index.
    kept: Vec<Kept>,
    next: usize,
    /// File names (each NUL-terminated) of the batch being gathered, and their count.
    names: Vec<u8>,
    count: usize,
}

impl Level {
    /// Hand the gathered names to `emit` as one batch (the level has its descriptor: it is
    /// the top of the stack).
    fn flush(&mut self, seq: &mut u64, emit: &mut dyn FnMut(Job)) {
        if self.count > 0 {
            emit(Job {
                seq: *seq,
                dir: self.dir.clone(),
                dir_path: self.path.clone(),
                names: std::mem::take(&mut self.names),
            });
            *seq += 1;
            self.count = 0;
        }
    }
}

/// A directory's (device, inode), from the one fstat the walk makes of it: the device for
/// `one_file_system`, both to check a reopen through ".." ((0, 0) when fstat fails).
fn dir_id(dir: &OwnedFd) -> (u64, u64) {
    stat::fstat(dir.as_fd()).map_or((0, 0), |st| (st.st_dev, st.st_ino))
}

/// The directory `id` (device, inode) opened again through `child`'s "..": an error when
/// ".." is another directory now (the child moved since it was entered).
fn reopen_parent(child: &OwnedFd, id: (u64, u64)) -> io::Result<OwnedFd> {
    let fd = open_dir_at(child.as_raw_fd(), c"..")?;
    let st = stat::fstat(fd.as_fd())?;
    if (st.st_dev, st.st_ino) != id {
        return Err(io::Error::other(
            "it is no longer the parent of the directory walked below it (moved during the walk)",
        ));
    }
    Ok(fd)
}

/// An entry the walk keeps, with the first bytes of its sort key as one integer.
struct Kept {
    key: u64,
    /// Offset and length of the name in [`DirEntries::names`].
    start: (u32, u32),
    is_dir: bool,
}

/// The first 8 bytes of a name's place in path order (the name, then '/' for a
/// directory), big-endian and zero-padded: keys compare as the names do unless equal,
/// since a name has no NUL and 0 sorts before every byte that can follow.
fn sort_prefix(name: &[u8], is_dir: bool) -> u64 {
    let mut k = [0u8; 8];
    let n = name.len().min(8);
    k[..n].copy_from_slice(&name[..n]);
    if is_dir && n < 8 {
        k[n] = b'/';
    }
    u64::from_be_bytes(k)
}

/// Names and d_type of a directory's entries, "." and ".." left out.
fn read_dir_entries(dir: BorrowedFd<'_>) -> io::Result<DirEntries> {
    let mut out = DirEntries {
        names: Vec::new(),
        list: Vec::new(),
    };
    fragkit_sys::dirent::for_each_entry(dir, |name, dtype| {
        let name = name.to_bytes_with_nul();
        let Ok(start) = u32::try_from(out.names.len()) else {
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                "directory names exceed 4 GiB",
            ));
        };
        out.names.extend_from_slice(name);
        out.list.push((start, name.len() as u32 - 1, dtype));
        Ok(())
    })?;
    Ok(out)
}

/// Map one file by path (no walk): for tools that already know their file.
pub fn map_path(path: &Path, sync: bool) -> Result<ScannedFile, RootError> {
    let file = File::open(path).map_err(io_error(path, "cannot open"))?;
    let st = stat::fstat(file.as_fd()).map_err(io_error(path, "cannot stat"))?;
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

    #[test]
    fn path_order_is_byte_order_of_full_paths() {
        // (name, is_dir) → the key the walk orders by: name, then '/' for a directory.
        let names: &[(&[u8], bool)] = &[
            (b"a", true),
            (b"a.txt", false),
            (b"a", false),
            (b"ab", true),
            (b"a0", false),
            (b"b", false),
            (b"", false),
            (b"a-", true),
        ];
        for &(a, ad) in names {
            for &(b, bd) in names {
                let key = |s: &[u8], d: bool| {
                    let mut k = s.to_vec();
                    if d {
                        k.push(b'/');
                    }
                    k
                };
                assert_eq!(
                    path_order(a, ad, b, bd),
                    key(a, ad).cmp(&key(b, bd)),
                    "{a:?}/{ad} vs {b:?}/{bd}"
                );
            }
        }
    }

    /// A tree of `dirs` directories with one small file each: one batch per directory.
    fn one_file_dirs(dirs: usize) -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        for d in 0..dirs {
            let dd = t.path().join(format!("d{d:03}"));
            std::fs::create_dir(&dd).unwrap();
            std::fs::write(dd.join("f"), b"x").unwrap();
        }
        t
    }

    #[test]
    fn sink_break_stops_the_walk() {
        let t = one_file_dirs(200);
        for workers in [1, 2] {
            let stats = WalkStats::default();
            let mut sunk = 0;
            let roots = [check_root(t.path()).unwrap()];
            walk_ordered(
                &roots,
                &WalkOptions::default(),
                &stats,
                workers,
                &|| 0usize,
                &|n, _| *n += 1,
                &mut |_| {
                    sunk += 1;
                    ControlFlow::Break(())
                },
            );
            assert_eq!(sunk, 1, "workers {workers}");
            // The producer stops listing: far fewer than all 200 directories were read
            // (at most the batches already in flight when the sink said stop).
            let dirs = stats.snapshot().directories;
            assert!(dirs < 100, "workers {workers}: {dirs} directories read");
        }
    }

    /// A chain of `depth` directories "d", with a file "z<i>" beside every 500th level's
    /// "d" (visited after the subtree below it, so the walk must get back up): made with
    /// openat, since the deep paths are longer than PATH_MAX.
    fn deep_tree(depth: usize) -> (tempfile::TempDir, usize) {
        use nix::fcntl::{openat, OFlag};
        use nix::sys::stat::{mkdirat, Mode};
        use std::os::fd::FromRawFd;
        let t = tempfile::tempdir().unwrap();
        let mut dir = File::open(t.path()).unwrap();
        let mut files = 0;
        for i in 0..depth {
            mkdirat(Some(dir.as_raw_fd()), "d", Mode::S_IRWXU).unwrap();
            if i % 500 == 0 {
                let fd = openat(
                    Some(dir.as_raw_fd()),
                    format!("z{i}").as_str(),
                    OFlag::O_CREAT | OFlag::O_WRONLY | OFlag::O_CLOEXEC,
                    Mode::S_IRUSR | Mode::S_IWUSR,
                )
                .unwrap();
                // SAFETY: a fresh descriptor from openat, owned here.
                let mut f = unsafe { File::from_raw_fd(fd) };
                std::io::Write::write_all(&mut f, b"x").unwrap();
                files += 1;
            }
            let fd = openat(
                Some(dir.as_raw_fd()),
                "d",
                OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .unwrap();
            // SAFETY: as above.
            dir = unsafe { File::from_raw_fd(fd) };
        }
        (t, files)
    }

    /// Depth costs neither stack nor descriptors: a 3,000-deep tree is walked on a thread
    /// with a 256 KiB stack (the recursive walk needed about 1 KiB per level), every file
    /// is found in path order (those beside a deep subtree after it, so every level past
    /// OPEN_LEVELS got its descriptor back through ".."), and the process never holds more
    /// than OPEN_LEVELS and a few descriptors.
    #[test]
    fn deep_trees_walk_in_bounded_stack_and_descriptors() {
        let (t, files) = deep_tree(3000);
        let roots = std::sync::Arc::new([check_root(t.path()).unwrap()]);
        for workers in [1, 2] {
            let roots = roots.clone();
            let (found, most_fds) = std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || {
                    let stats = WalkStats::default();
                    let found = Mutex::new(Vec::new());
                    let most_fds = AtomicU64::new(0);
                    let errors = walk_ordered(
                        &roots[..],
                        &WalkOptions::default(),
                        &stats,
                        workers,
                        &Vec::new,
                        &|b: &mut Vec<PathBuf>, f| {
                            let open = std::fs::read_dir("/proc/self/fd").unwrap().count();
                            most_fds.fetch_max(open as u64, Ordering::Relaxed);
                            b.push(f.path.clone());
                        },
                        &mut |b| {
                            found.lock().unwrap().extend(b);
                            ControlFlow::Continue(())
                        },
                    );
                    assert!(errors.is_empty(), "{errors:?}");
                    (found.into_inner().unwrap(), most_fds.into_inner())
                })
                .unwrap()
                .join()
                .unwrap();
            assert_eq!(found.len(), files, "workers {workers}");
            let mut sorted = found.clone();
            sorted.sort_by(|a, b| a.as_os_str().as_bytes().cmp(b.as_os_str().as_bytes()));
            assert_eq!(found, sorted, "workers {workers}: not in path order");
            assert!(
                most_fds < OPEN_LEVELS as u64 + 64,
                "workers {workers}: {most_fds} descriptors open"
            );
        }
    }

    #[test]
    fn a_worker_panic_reaches_the_caller() {
        let t = one_file_dirs(40);
        let roots = [check_root(t.path()).unwrap()];
        let stats = WalkStats::default();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            walk_ordered(
                &roots,
                &WalkOptions::default(),
                &stats,
                2,
                &|| (),
                &|_, f| {
                    if f.path.ends_with("d005/f") {
                        panic!("mapping d005 failed");
                    }
                },
                &mut |_| ControlFlow::Continue(()),
            )
        }));
        let payload = r.expect_err("the panic propagates instead of hanging the walk");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"mapping d005 failed"));
    }
}
