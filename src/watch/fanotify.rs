//! fanotify(7) with directory file handles and names: the change source when root.
//!
//! One FAN_MARK_FILESYSTEM mark per watched file system reports every write, truncate,
//! fallocate, create, delete and rename on it, whatever the directory depth, with no
//! per-directory watch to add (so a million-file tree costs nothing to set up). Events carry
//! the parent directory's file handle plus the name (FAN_REPORT_DFID_NAME, kernel 5.9+;
//! FAN_RENAME with old and new names, 5.17+); the handle is turned back into a path with
//! open_by_handle_at. The kernel merges repeated events on the same name while they wait,
//! so reading once per tick keeps the queue small even under a database's write stream.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::Change;

// Event and info-record layouts: include/uapi/linux/fanotify.h (struct
// fanotify_event_metadata, fanotify_event_info_header, fanotify_event_info_fid);
// the handle inside is struct file_handle from include/linux/fs.h (u32 bytes, i32 type, data).
const METADATA_LEN: usize = 24;
const INFO_HEADER_LEN: usize = 4;
const FSID_LEN: usize = 8;

/// Events watched: content changes (write, truncate and fallocate all raise FAN_MODIFY)
/// and directory-entry changes; FAN_ONDIR so created or moved directories are seen too.
const MASK: u64 =
    libc::FAN_MODIFY | libc::FAN_CREATE | libc::FAN_DELETE | libc::FAN_RENAME | libc::FAN_ONDIR;

pub struct Fanotify {
    fd: OwnedFd,
    /// (fsid, an open directory on that file system) for open_by_handle_at.
    mounts: Vec<([i32; 2], OwnedFd)>,
    buf: Vec<u8>,
}

fn fsid_of(path: &Path) -> io::Result<[i32; 2]> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    // SAFETY: statfs fills plain data.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fsid_t is two i32 (include/uapi/asm-generic/posix_types.h __kernel_fsid_t).
    Ok(unsafe { std::mem::transmute::<libc::fsid_t, [i32; 2]>(st.f_fsid) })
}

impl Fanotify {
    /// Mark the file systems holding `roots`. Needs CAP_SYS_ADMIN (root); the error says so.
    pub fn new(roots: &[PathBuf]) -> io::Result<Fanotify> {
        // SAFETY: plain syscall.
        let fd = unsafe {
            libc::fanotify_init(
                libc::FAN_CLASS_NOTIF
                    | libc::FAN_CLOEXEC
                    | libc::FAN_NONBLOCK
                    | libc::FAN_REPORT_DFID_NAME,
                (libc::O_RDONLY | libc::O_LARGEFILE) as libc::c_uint,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fresh fd.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut mounts: Vec<([i32; 2], OwnedFd)> = Vec::new();
        for root in roots {
            let fsid = fsid_of(root)?;
            if mounts.iter().any(|(f, _)| *f == fsid) {
                continue;
            }
            let c = std::ffi::CString::new(root.as_os_str().as_bytes())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
            // SAFETY: valid fd and C string.
            let rc = unsafe {
                libc::fanotify_mark(
                    fd.as_raw_fd(),
                    libc::FAN_MARK_ADD | libc::FAN_MARK_FILESYSTEM,
                    MASK,
                    libc::AT_FDCWD,
                    c.as_ptr(),
                )
            };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: open(2) of a directory. Not O_PATH: open_by_handle_at refuses
            // O_PATH descriptors as mount_fd (EBADF) on this kernel.
            let mfd = unsafe {
                libc::open(
                    c.as_ptr(),
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
                )
            };
            if mfd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: fresh fd.
            mounts.push((fsid, unsafe { OwnedFd::from_raw_fd(mfd) }));
        }
        Ok(Fanotify {
            fd,
            mounts,
            buf: vec![0u8; 64 * 1024],
        })
    }

    /// The directory a handle names now, or None when it is gone (deleted) or on an
    /// unwatched file system.
    fn dir_path(&self, fsid: [i32; 2], handle: &[u8]) -> Option<PathBuf> {
        let (_, mfd) = self.mounts.iter().find(|(f, _)| *f == fsid)?;
        // struct file_handle must be 4-byte aligned: copy into a u32 buffer.
        let mut aligned = vec![0u32; handle.len().div_ceil(4)];
        // SAFETY: aligned has at least handle.len() bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                handle.as_ptr(),
                aligned.as_mut_ptr() as *mut u8,
                handle.len(),
            )
        };
        // SAFETY: aligned holds a file_handle as the kernel reported it.
        let fd = unsafe {
            libc::open_by_handle_at(
                mfd.as_raw_fd(),
                aligned.as_mut_ptr() as *mut libc::file_handle,
                libc::O_PATH | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return None;
        }
        // SAFETY: fresh fd, closed on drop.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()
    }

    /// Read every queued event (non-blocking) and append the changes they describe.
    pub fn drain(&mut self, out: &mut Vec<Change>) -> io::Result<()> {
        let mut dirs: HashMap<Vec<u8>, Option<PathBuf>> = HashMap::new();
        loop {
            let n = match super::read_nonblocking(&self.fd, &mut self.buf)? {
                Some(n) => n,
                None => return Ok(()),
            };
            let buf = std::mem::take(&mut self.buf);
            self.parse(&buf[..n], &mut dirs, out);
            self.buf = buf;
        }
    }

    fn parse(
        &self,
        mut data: &[u8],
        dirs: &mut HashMap<Vec<u8>, Option<PathBuf>>,
        out: &mut Vec<Change>,
    ) {
        let u16_at = |b: &[u8], o: usize| u16::from_ne_bytes([b[o], b[o + 1]]);
        let u32_at = |b: &[u8], o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
        while data.len() >= METADATA_LEN {
            let event_len = u32_at(data, 0) as usize;
            let metadata_len = u16_at(data, 6) as usize;
            let mask = u64::from_ne_bytes(data[8..16].try_into().unwrap());
            if event_len < METADATA_LEN || event_len > data.len() {
                break;
            }
            let event = &data[..event_len];
            data = &data[event_len..];
            if mask & libc::FAN_Q_OVERFLOW != 0 {
                out.push(Change::Overflow);
                continue;
            }
            let is_dir = mask & libc::FAN_ONDIR != 0;
            let (mut plain, mut old, mut new) = (None, None, None);
            let mut off = metadata_len;
            while off + INFO_HEADER_LEN <= event.len() {
                let info_type = event[off];
                let len = u16_at(event, off + 2) as usize;
                if len < INFO_HEADER_LEN || off + len > event.len() {
                    break;
                }
                let rec = &event[off..off + len];
                off += len;
                let named = matches!(
                    info_type,
                    libc::FAN_EVENT_INFO_TYPE_DFID_NAME
                        | libc::FAN_EVENT_INFO_TYPE_OLD_DFID_NAME
                        | libc::FAN_EVENT_INFO_TYPE_NEW_DFID_NAME
                );
                if !named || rec.len() < INFO_HEADER_LEN + FSID_LEN + 8 {
                    continue;
                }
                let fsid = [u32_at(rec, 4) as i32, u32_at(rec, 8) as i32];
                let h = INFO_HEADER_LEN + FSID_LEN;
                let handle_bytes = u32_at(rec, h) as usize;
                let handle_end = h + 8 + handle_bytes;
                if handle_end > rec.len() {
                    continue;
                }
                let handle = &rec[h..handle_end];
                let name_bytes = &rec[handle_end..];
                let name = &name_bytes[..name_bytes.iter().position(|&b| b == 0).unwrap_or(0)];
                let mut key = Vec::with_capacity(8 + handle.len());
                key.extend_from_slice(&rec[4..12]);
                key.extend_from_slice(handle);
                let dir = dirs
                    .entry(key)
                    .or_insert_with(|| self.dir_path(fsid, handle))
                    .clone();
                let Some(dir) = dir else { continue };
                let path = if name.is_empty() || name == b"." {
                    dir
                } else {
                    dir.join(OsStr::from_bytes(name))
                };
                match info_type {
                    libc::FAN_EVENT_INFO_TYPE_OLD_DFID_NAME => old = Some(path),
                    libc::FAN_EVENT_INFO_TYPE_NEW_DFID_NAME => new = Some(path),
                    _ => plain = Some(path),
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
                if !is_dir || mask & (libc::FAN_CREATE | libc::FAN_DELETE) != 0 {
                    out.push(Change::Changed(path));
                }
            }
        }
    }
}
