//! fanotify(7) with directory file handles and names: the change source when root.
//!
//! One FAN_MARK_FILESYSTEM mark per watched file system reports every open, create, delete
//! and rename on it, whatever the directory depth, with no per-directory watch to add (so a
//! million-file tree costs nothing to set up). Events carry the parent directory's file
//! handle plus the name (FAN_REPORT_DFID_NAME, kernel 5.9+; FAN_RENAME with old and new
//! names, 5.17+); the handle is turned back into a path with open_by_handle_at.
//!
//! Writes are where a monitor costs the watched programs: the kernel builds each event in
//! the writer's own system call. A file-system-wide FAN_MODIFY taxes every write on the
//! file system by ~0.7 µs here (a buffered 4 KiB write takes ~1.2 µs), and even with the
//! event ignored the parent and name are looked up first (+0.27 µs). So the file-system
//! mark leaves FAN_MODIFY out, and FAN_MODIFY is asked for on one file at a time
//! ("armed"), with an evictable inode mark (kernel 5.19+; never pins an inode):
//! - a file opened (FAN_OPEN on the file-system mark) or created is dirty: the next tick
//!   arms it, then maps it;
//! - the first write to an armed file raises FAN_MODIFY, read soon after (between ticks
//!   the queue is read at most every MIN_READ_GAP): the file is dirty, disarmed and *hot*;
//! - a hot file is not armed again while it keeps changing: each tick arms it, stats it
//!   (size, blocks, mtime, ctime; the kernel's fine-grained timestamps make every write
//!   after a stat visible), and if anything moved it is disarmed again and mapped. Once a
//!   tick finds it unchanged it stays armed, and is mapped one last time. A database's
//!   write stream costs no event at all while it lasts, one stat and map per tick;
//! - files already open for writing when the watch starts are armed from /proc/*/fd;
//! - armed inodes also ignore FAN_OPEN, so reopening them (and fragkit's own opens) is
//!   free. An inode evicted from the cache loses its mark, but nothing holds it open, so
//!   its next writer opens it first and raises FAN_OPEN.
//!
//! Not seen: writes through a shared mmap, and truncate(2) by path of a file nobody has
//! opened since it was last evicted; the slow full rescan catches both.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::Change;
use fragkit_sys::fanotify::{self, NameKind, FAN_MARK_EVICTABLE};
use fragkit_sys::{handle, openat, poll, rw};

/// Events on the file-system mark: opens (a file about to be written, see above) and
/// directory-entry changes; FAN_ONDIR so created or moved directories are seen too.
const MASK: u64 =
    libc::FAN_OPEN | libc::FAN_CREATE | libc::FAN_DELETE | libc::FAN_RENAME | libc::FAN_ONDIR;

/// Least time between two reads of the queue between ticks. Reading at once on every
/// event would wake fragkit for each small transaction of a database (SQLite's journal
/// is created, written and deleted each time: 4.5% of a core at 400 txn/s); waiting lets
/// the kernel merge them, and keeps an armed file loud for at most this long per tick.
const MIN_READ_GAP: Duration = Duration::from_millis(100);
/// Hot files followed by stat at once; past this, written files are simply re-armed.
const HOT_MAX: usize = 4096;

/// Changes read between ticks that wait for the next one; past this many, the tick gets
/// an overflow (full rescan) instead, as if the kernel's own queue had overflowed.
const PENDING_MAX: usize = 16_384;

/// Directory paths remembered across queue reads (handle -> path); past this many the
/// cache starts again. Each entry saves an open_by_handle_at and a readlink per read.
const DIR_CACHE_MAX: usize = 4096;

pub struct Fanotify {
    fd: OwnedFd,
    /// (fsid, an open directory on that file system) for open_by_handle_at.
    mounts: Vec<([i32; 2], OwnedFd)>,
    buf: Vec<u8>,
    /// Every event of one `read_queue`, read before any is decoded.
    batch: Vec<u8>,
    /// Directory handle (fsid + file handle) -> its path, across reads: a process that
    /// creates and deletes a file per transaction would otherwise cost a handle lookup and
    /// a readlink per read (a third of fragkit's CPU under SQLite's journal). A directory's
    /// path changes only by a rename of it or of a directory above it, and every such
    /// rename (or delete) on the file system is an event of the mark's: a batch holding one
    /// empties the cache before any of its events is decoded.
    dirs: HashMap<Vec<u8>, PathBuf>,
    /// Changes read since the last tick (`wait`).
    pending: Vec<Change>,
    /// Files disarmed since the last tick.
    disarmed: usize,
    /// While fragkit maps a whole tree it opens every file: those FAN_OPEN events of its
    /// own are dropped (and read as they come, so they cannot overflow the queue).
    own_pid: i32,
    skip_own_opens: bool,
    /// When `wait` last read the queue.
    last_read: Option<Instant>,
    /// Disarmed files still being written, with what stat said at the last tick (None:
    /// not looked at yet).
    hot: HashMap<PathBuf, Option<StatKey>>,
}

/// What changes when a file is written (or truncated, or fallocated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StatKey {
    ino: u64,
    size: u64,
    blocks: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

fn stat_key(path: &Path) -> Option<StatKey> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    m.is_file().then(|| StatKey {
        ino: m.ino(),
        size: m.size(),
        blocks: m.blocks(),
        mtime: (m.mtime(), m.mtime_nsec()),
        ctime: (m.ctime(), m.ctime_nsec()),
    })
}

fn fsid_of(path: &Path) -> io::Result<[i32; 2]> {
    Ok(fragkit_sys::fsinfo::FsInfo::of_path(path)?.fsid)
}

impl Fanotify {
    /// Mark the file systems holding `roots`. Needs CAP_SYS_ADMIN (root); the error says so.
    pub fn new(roots: &[PathBuf]) -> io::Result<Fanotify> {
        let fd = fanotify::init(
            libc::FAN_CLASS_NOTIF
                | libc::FAN_CLOEXEC
                | libc::FAN_NONBLOCK
                | libc::FAN_REPORT_DFID_NAME,
            (libc::O_RDONLY | libc::O_LARGEFILE) as libc::c_uint,
        )?;
        let mut mounts: Vec<([i32; 2], OwnedFd)> = Vec::new();
        for root in roots {
            let fsid = fsid_of(root)?;
            if mounts.iter().any(|(f, _)| *f == fsid) {
                continue;
            }
            let c = std::ffi::CString::new(root.as_os_str().as_bytes())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
            fanotify::mark(
                fd.as_fd(),
                libc::FAN_MARK_ADD | libc::FAN_MARK_FILESYSTEM,
                MASK,
                &c,
            )?;
            // open(2) of a directory (openat(AT_FDCWD), O_CLOEXEC added). Not O_PATH:
            // open_by_handle_at refuses O_PATH descriptors as mount_fd (EBADF) on this kernel.
            let mfd = openat::open_at(libc::AT_FDCWD, &c, libc::O_RDONLY | libc::O_DIRECTORY)?;
            mounts.push((fsid, mfd));
        }
        let f = Fanotify {
            fd,
            mounts,
            buf: vec![0u8; 64 * 1024],
            batch: Vec::new(),
            dirs: HashMap::new(),
            pending: Vec::new(),
            disarmed: 0,
            own_pid: std::process::id() as i32,
            skip_own_opens: false,
            last_read: None,
            hot: HashMap::new(),
        };
        // Per-file arming needs evictable inode marks (kernel 5.19+); without them no write
        // would be heard, so refuse and let inotify take over (the caller says why).
        if let Some(root) = roots.first() {
            f.mark(
                libc::FAN_MARK_ADD | FAN_MARK_EVICTABLE,
                libc::FAN_MODIFY,
                root,
            )
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("evictable inode marks (kernel 5.19+): {e}"),
                )
            })?;
            let _ = f.mark(libc::FAN_MARK_REMOVE, libc::FAN_MODIFY, root);
        }
        // Writers that opened their files before the mark raise no FAN_OPEN: arm those now
        // (after the mark, so a file opened meanwhile is seen one way or the other).
        for p in open_for_writing(roots) {
            f.arm(&p);
        }
        Ok(f)
    }

    /// Between ticks: wait up to `timeout` for events, keep what they say for the next
    /// tick, and disarm every file written (see the module comment).
    pub fn wait(&mut self, mut timeout: Duration) -> io::Result<()> {
        if let Some(t) = self.last_read {
            let nap = MIN_READ_GAP.saturating_sub(t.elapsed()).min(timeout);
            std::thread::sleep(nap);
            timeout -= nap;
        }
        match poll::readable(self.fd.as_fd(), timeout) {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(e),
        }
        self.last_read = Some(Instant::now());
        self.pump()
    }

    /// Read what is queued now (non-blocking) into the changes for the next tick,
    /// disarming each file written.
    pub(crate) fn pump(&mut self) -> io::Result<()> {
        let mut got = Vec::new();
        self.read_queue(&mut got, true)?;
        if matches!(self.pending.last(), Some(Change::Overflow)) {
            return Ok(());
        }
        if self.pending.len() + got.len() > PENDING_MAX {
            self.pending.clear();
            self.pending.push(Change::Overflow);
        } else {
            self.pending.append(&mut got);
        }
        Ok(())
    }

    fn mark(&self, flags: libc::c_uint, mask: u64, path: &Path) -> io::Result<()> {
        let c = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
        fanotify::mark(self.fd.as_fd(), flags, mask, &c)
    }

    /// Ask for this file's next write (FAN_MODIFY), and stop hearing its opens. Best
    /// effort: a file gone meanwhile needs no arming, and one renamed is dirty under its
    /// new name, which is armed instead.
    fn arm(&self, path: &Path) {
        let add = libc::FAN_MARK_ADD | FAN_MARK_EVICTABLE;
        let _ = self.mark(add, libc::FAN_MODIFY, path);
        let _ = self.mark(
            add | libc::FAN_MARK_IGNORED_MASK | libc::FAN_MARK_IGNORED_SURV_MODIFY,
            libc::FAN_OPEN,
            path,
        );
    }

    /// Stop hearing this file's writes: it is hot (followed by stat at each tick) until a
    /// tick finds it unchanged.
    fn disarm(&mut self, path: &Path) {
        if self.hot.len() >= HOT_MAX && !self.hot.contains_key(path) {
            return; // stays armed: loud, but nothing is missed
        }
        if self
            .mark(libc::FAN_MARK_REMOVE, libc::FAN_MODIFY, path)
            .is_ok()
        {
            self.disarmed += 1;
            self.hot.insert(path.to_path_buf(), None);
        }
    }

    /// Hot files now (for tests and reports).
    pub fn hot(&self) -> usize {
        self.hot.len()
    }

    /// Drop (true) or keep (false) FAN_OPEN events caused by fragkit itself: on while it
    /// maps a whole tree, where each of its opens would otherwise be a change.
    pub(crate) fn skip_own_opens(&mut self, on: bool) {
        self.skip_own_opens = on;
    }

    /// Files disarmed since the last tick (for tests and reports).
    pub fn disarmed(&self) -> usize {
        self.disarmed
    }

    /// The directory a handle names now, or None when it is gone (deleted) or on an
    /// unwatched file system.
    fn dir_path(&self, fsid: [i32; 2], handle: &[u8]) -> Option<PathBuf> {
        let (_, mfd) = self.mounts.iter().find(|(f, _)| *f == fsid)?;
        let fd =
            handle::open_by_handle_at(mfd.as_fd(), handle, libc::O_PATH | libc::O_CLOEXEC).ok()?;
        std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()
    }

    /// The tick: hand out what was read since the last tick and whatever is still queued,
    /// plus the hot files that changed, arming each file first (from here on its next
    /// write raises an event, for the next tick) or, if still hot, following it by stat.
    /// The caller maps these paths after this returns.
    pub fn drain(&mut self, out: &mut Vec<Change>) -> io::Result<()> {
        let from = out.len();
        out.append(&mut self.pending);
        self.read_queue(out, true)?;
        // Hot files: arm, then stat. Unchanged since the last tick: leave it armed (a write
        // from here on raises an event) and map it one last time. Changed: disarm, map.
        let mut listed: std::collections::HashSet<PathBuf> = out[from..]
            .iter()
            .filter_map(|c| match c {
                Change::Changed(p) => Some(p.clone()),
                _ => None,
            })
            .collect();
        let hot: Vec<(PathBuf, Option<StatKey>)> = self.hot.drain().collect();
        for (path, last) in hot {
            // Only FAN_MODIFY: a hot file was armed before, and its FAN_OPEN ignore mask
            // is never removed.
            let _ = self.mark(
                libc::FAN_MARK_ADD | FAN_MARK_EVICTABLE,
                libc::FAN_MODIFY,
                &path,
            );
            // Quiet (armed now) or gone: no longer hot. Changed: disarm again.
            if let Some(k) = stat_key(&path).filter(|k| Some(*k) != last) {
                if self
                    .mark(libc::FAN_MARK_REMOVE, libc::FAN_MODIFY, &path)
                    .is_ok()
                {
                    self.hot.insert(path.clone(), Some(k));
                }
            }
            if listed.insert(path.clone()) {
                out.push(Change::Changed(path));
            }
        }
        let mut files: Vec<&Path> = out[from..]
            .iter()
            .filter_map(|c| match c {
                Change::Changed(p) => Some(p.as_path()),
                Change::Moved { to, .. } => Some(to.as_path()),
                Change::Overflow => None,
            })
            .collect();
        files.sort();
        files.dedup();
        for p in files {
            if !self.hot.contains_key(p) {
                self.arm(p);
            }
        }
        self.disarmed = 0;
        Ok(())
    }

    /// Read every queued event (non-blocking) and append the changes they describe;
    /// with `disarm`, disarm each file written.
    fn read_queue(&mut self, out: &mut Vec<Change>, disarm: bool) -> io::Result<()> {
        let mut written = Vec::new();
        self.batch.clear();
        while let Some(n) = rw::read_nonblocking(self.fd.as_fd(), &mut self.buf)? {
            // The kernel hands out whole events only, so reads concatenate.
            self.batch.extend_from_slice(&self.buf[..n]);
        }
        if self.dirs.len() >= DIR_CACHE_MAX || moves_directories(&self.batch) {
            self.dirs.clear();
        }
        let batch = std::mem::take(&mut self.batch);
        let mut dirs = std::mem::take(&mut self.dirs);
        self.parse(&batch, &mut dirs, out, &mut written);
        self.dirs = dirs;
        self.batch = batch;
        if disarm {
            written.sort();
            written.dedup();
            for p in &written {
                self.disarm(p);
            }
        }
        Ok(())
    }

    /// Decode events into `out`; files with FAN_MODIFY also go to `written`.
    fn parse(
        &self,
        data: &[u8],
        dirs: &mut HashMap<Vec<u8>, PathBuf>,
        out: &mut Vec<Change>,
        written: &mut Vec<PathBuf>,
    ) {
        for event in fanotify::events(data) {
            let mask = event.mask;
            if self.skip_own_opens
                && event.pid == self.own_pid
                && mask & !(libc::FAN_OPEN | libc::FAN_ONDIR) == 0
            {
                continue;
            }
            if mask & libc::FAN_Q_OVERFLOW != 0 {
                out.push(Change::Overflow);
                continue;
            }
            let is_dir = mask & libc::FAN_ONDIR != 0;
            let (mut plain, mut old, mut new) = (None, None, None);
            for rec in event.dfid_names() {
                let mut key = Vec::with_capacity(8 + rec.handle.len());
                key.extend_from_slice(&rec.fsid[0].to_ne_bytes());
                key.extend_from_slice(&rec.fsid[1].to_ne_bytes());
                key.extend_from_slice(rec.handle);
                // Only found paths are kept: a failed lookup may be passing (EMFILE).
                let dir = match dirs.get(&key) {
                    Some(d) => d.clone(),
                    None => match self.dir_path(rec.fsid, rec.handle) {
                        Some(d) => dirs.entry(key).or_insert(d).clone(),
                        None => continue,
                    },
                };
                let path = if rec.name.is_empty() || rec.name == b"." {
                    dir
                } else {
                    dir.join(OsStr::from_bytes(rec.name))
                };
                match rec.kind {
                    NameKind::Old => old = Some(path),
                    NameKind::New => new = Some(path),
                    NameKind::Entry => plain = Some(path),
                }
            }
            if mask & libc::FAN_RENAME != 0 {
                match (old, new) {
                    (Some(from), Some(to)) => out.push(Change::Moved { from, to }),
                    (Some(p), None) | (None, Some(p)) => out.push(Change::Changed(p)),
                    (None, None) => {}
                }
            } else if let Some(path) = plain {
                // The kernel merges a create, write and delete of one name into one event
                // whose mask says little about the end state: the engine looks at the path.
                if !is_dir && mask & libc::FAN_MODIFY != 0 {
                    written.push(path.clone());
                }
                if !is_dir || mask & (libc::FAN_CREATE | libc::FAN_DELETE) != 0 {
                    out.push(Change::Changed(path));
                }
            }
        }
    }
}

/// Whether a batch of events renames or deletes a directory, or lost events (overflow):
/// then directory paths known from earlier reads may be stale.
fn moves_directories(data: &[u8]) -> bool {
    let mut events = fanotify::events(data);
    for event in &mut events {
        let mask = event.mask;
        if mask & libc::FAN_Q_OVERFLOW != 0
            || (mask & libc::FAN_ONDIR != 0 && mask & (libc::FAN_RENAME | libc::FAN_DELETE) != 0)
        {
            return true;
        }
    }
    // Malformed: trust nothing remembered.
    events.malformed()
}

/// Files under `roots` that some process has open for writing now, from /proc/*/fd and
/// the access mode in /proc/*/fdinfo. Processes that go away meanwhile are skipped.
fn open_for_writing(roots: &[PathBuf]) -> Vec<PathBuf> {
    let roots: Vec<PathBuf> = roots
        .iter()
        .map(|r| r.canonicalize().unwrap_or_else(|_| r.clone()))
        .collect();
    let mut found = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return found;
    };
    for p in procs.flatten() {
        let name = p.file_name();
        if !name.as_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            if !roots.iter().any(|r| target.starts_with(r)) {
                continue;
            }
            let info = p.path().join("fdinfo").join(fd.file_name());
            let writable = std::fs::read_to_string(info).ok().is_some_and(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("flags:"))
                    .and_then(|v| i64::from_str_radix(v.trim(), 8).ok())
                    .is_some_and(|flags| flags & libc::O_ACCMODE as i64 != libc::O_RDONLY as i64)
            });
            if writable {
                found.push(target);
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use fragkit_sys::fanotify::METADATA_LEN;

    /// One event's metadata as the kernel lays it out (no info records).
    fn event(mask: u64) -> Vec<u8> {
        let mut e = Vec::with_capacity(METADATA_LEN);
        e.extend_from_slice(&(METADATA_LEN as u32).to_ne_bytes());
        e.extend_from_slice(&[libc::FANOTIFY_METADATA_VERSION, 0]);
        e.extend_from_slice(&(METADATA_LEN as u16).to_ne_bytes());
        e.extend_from_slice(&mask.to_ne_bytes());
        e.extend_from_slice(&(-1i32).to_ne_bytes());
        e.extend_from_slice(&1i32.to_ne_bytes());
        e
    }

    #[test]
    fn remembered_directories_go_when_a_directory_moves() {
        let file = libc::FAN_CREATE | libc::FAN_OPEN | libc::FAN_DELETE;
        assert!(!moves_directories(&event(file)));
        assert!(!moves_directories(&event(libc::FAN_RENAME)));
        assert!(!moves_directories(&event(
            libc::FAN_CREATE | libc::FAN_ONDIR
        )));
        assert!(!moves_directories(&[]));
        for dir in [
            libc::FAN_RENAME | libc::FAN_ONDIR,
            libc::FAN_DELETE | libc::FAN_ONDIR,
            libc::FAN_Q_OVERFLOW,
        ] {
            // Anywhere in the batch, also after file events.
            let mut batch = event(file);
            batch.extend(event(dir));
            batch.extend(event(file));
            assert!(moves_directories(&batch), "mask {dir:#x}");
        }
        let mut cut = event(file);
        cut[0] = 200; // longer than the batch
        assert!(moves_directories(&cut));
    }
}
