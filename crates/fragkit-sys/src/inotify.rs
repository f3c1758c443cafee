//! inotify(7): the instance (inotify_init1), watches (inotify_add_watch), and the event
//! records a read of the instance returns, decoded from the buffer.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

// struct inotify_event {int wd; u32 mask; u32 cookie; u32 len; char name[];}
// (include/uapi/linux/inotify.h).
const EVENT_HEADER_LEN: usize = 16;

/// inotify_init1(flags): a new inotify instance (`libc::IN_NONBLOCK`, `IN_CLOEXEC`).
pub fn init(flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: inotify_init1 takes no pointers.
    let fd = unsafe { libc::inotify_init1(flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor from inotify_init1, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// inotify_add_watch(instance, path, mask): the watch descriptor (the same one again for
/// a path already watched). ENOSPC: the user is out of watches (max_user_watches).
pub fn add_watch(instance: BorrowedFd<'_>, path: &CStr, mask: u32) -> io::Result<i32> {
    // SAFETY: `instance` is borrowed, so open, and `path` NUL-terminated, both for the call.
    let wd = unsafe { libc::inotify_add_watch(instance.as_raw_fd(), path.as_ptr(), mask) };
    if wd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(wd)
}

/// One struct inotify_event.
#[derive(Debug, PartialEq, Eq)]
pub struct Event<'a> {
    pub wd: i32,
    pub mask: u32,
    pub cookie: u32,
    /// The name up to its first NUL (empty for the watched directory itself).
    pub name: &'a [u8],
}

/// The events of a read buffer, in order; an event cut short by the buffer's end keeps
/// the part of its name that is there.
pub fn events(buf: &[u8]) -> impl Iterator<Item = Event<'_>> {
    let mut data = buf;
    std::iter::from_fn(move || {
        if data.len() < EVENT_HEADER_LEN {
            return None;
        }
        let wd = i32::from_ne_bytes(data[0..4].try_into().unwrap());
        let mask = u32::from_ne_bytes(data[4..8].try_into().unwrap());
        let cookie = u32::from_ne_bytes(data[8..12].try_into().unwrap());
        let len = u32::from_ne_bytes(data[12..16].try_into().unwrap()) as usize;
        let end = (EVENT_HEADER_LEN + len).min(data.len());
        let name = &data[EVENT_HEADER_LEN..end];
        let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
        data = &data[end..];
        Some(Event {
            wd,
            mask,
            cookie,
            name,
        })
    })
}

#[cfg(test)]
mod tests {
    fn event(wd: i32, mask: u32, cookie: u32, name: &[u8], len: u32) -> Vec<u8> {
        let mut e = Vec::new();
        for v in [wd as u32, mask, cookie, len] {
            e.extend_from_slice(&v.to_ne_bytes());
        }
        e.extend_from_slice(name);
        e.resize(16 + len as usize, 0);
        e
    }

    #[test]
    fn decodes_a_buffer_of_events() {
        let mut buf = event(1, libc::IN_CREATE, 0, b"a.txt", 16);
        buf.extend(event(2, libc::IN_IGNORED, 0, b"", 0));
        buf.extend(event(3, libc::IN_MOVED_TO, 9, b"cut-short", 16));
        buf.truncate(buf.len() - 10);
        let got: Vec<_> = super::events(&buf).collect();
        let e = |wd, mask, cookie, name| super::Event {
            wd,
            mask,
            cookie,
            name,
        };
        assert_eq!(
            got,
            [
                e(1, libc::IN_CREATE, 0, &b"a.txt"[..]),
                e(2, libc::IN_IGNORED, 0, b""),
                e(3, libc::IN_MOVED_TO, 9, b"cut-sh"),
            ]
        );
    }
}
