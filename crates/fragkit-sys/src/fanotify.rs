//! fanotify(7): the group descriptor (fanotify_init), marks (fanotify_mark), and the event
//! records a read of the group returns, decoded from the buffer.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

// Event and info-record layouts: include/uapi/linux/fanotify.h (struct
// fanotify_event_metadata, fanotify_event_info_header, fanotify_event_info_fid);
// the handle inside is struct file_handle from include/linux/fs.h (u32 bytes, i32 type, data).
/// sizeof(struct fanotify_event_metadata).
pub const METADATA_LEN: usize = 24;
const INFO_HEADER_LEN: usize = 4;
const FSID_LEN: usize = 8;

/// fanotify_mark flag (include/uapi/linux/fanotify.h): the inode mark does not pin the
/// inode in the cache (kernel 5.19+).
pub const FAN_MARK_EVICTABLE: libc::c_uint = 0x200;

/// fanotify_init(flags, event_f_flags): a new notification group.
pub fn init(flags: libc::c_uint, event_f_flags: libc::c_uint) -> io::Result<OwnedFd> {
    // SAFETY: fanotify_init takes no pointers.
    let fd = unsafe { libc::fanotify_init(flags, event_f_flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor from fanotify_init, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// fanotify_mark(group, flags, mask, AT_FDCWD, path): add, remove or change the mark on
/// `path` (or on its mount or file system, by `flags`).
pub fn mark(group: BorrowedFd<'_>, flags: libc::c_uint, mask: u64, path: &CStr) -> io::Result<()> {
    // SAFETY: `group` is borrowed, so open, and `path` NUL-terminated, both for the call.
    let rc = unsafe {
        libc::fanotify_mark(
            group.as_raw_fd(),
            flags,
            mask,
            libc::AT_FDCWD,
            path.as_ptr(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_ne_bytes([b[o], b[o + 1]])
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_ne_bytes(b[o..o + 4].try_into().unwrap())
}

/// The events of a read buffer, in order. Ends at the first event whose length does not
/// fit (then [`Events::malformed`]) or when less than a metadata record is left.
pub fn events(buf: &[u8]) -> Events<'_> {
    Events {
        data: buf,
        malformed: false,
    }
}

pub struct Events<'a> {
    data: &'a [u8],
    malformed: bool,
}

impl Events<'_> {
    /// Whether the events ended at one whose event_len is shorter than its metadata or
    /// longer than what is left of the buffer.
    pub fn malformed(&self) -> bool {
        self.malformed
    }
}

/// One event: struct fanotify_event_metadata and the info records after it.
pub struct Event<'a> {
    pub mask: u64,
    pub pid: i32,
    /// The whole event, metadata first.
    event: &'a [u8],
    metadata_len: usize,
}

impl<'a> Iterator for Events<'a> {
    type Item = Event<'a>;

    fn next(&mut self) -> Option<Event<'a>> {
        let data = self.data;
        if data.len() < METADATA_LEN {
            return None;
        }
        let event_len = u32_at(data, 0) as usize;
        let metadata_len = u16_at(data, 6) as usize;
        let mask = u64::from_ne_bytes(data[8..16].try_into().unwrap());
        let pid = u32_at(data, 20) as i32;
        if event_len < METADATA_LEN || event_len > data.len() {
            self.malformed = true;
            self.data = &[];
            return None;
        }
        self.data = &data[event_len..];
        Some(Event {
            mask,
            pid,
            event: &data[..event_len],
            metadata_len,
        })
    }
}

/// Which directory entry a DFID_NAME-style info record names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameKind {
    /// FAN_EVENT_INFO_TYPE_DFID_NAME: the entry the event is about.
    Entry,
    /// FAN_EVENT_INFO_TYPE_OLD_DFID_NAME: a rename's old name.
    Old,
    /// FAN_EVENT_INFO_TYPE_NEW_DFID_NAME: a rename's new name.
    New,
}

/// A directory (file system id and file handle) and a name in it.
pub struct DfidName<'a> {
    pub kind: NameKind,
    /// The file system's f_fsid, as statfs reports it.
    pub fsid: [i32; 2],
    /// The directory's struct file_handle (handle_bytes, handle_type, f_handle), as
    /// [`crate::handle::open_by_handle_at`] takes it.
    pub handle: &'a [u8],
    /// The name up to its NUL (empty without one; "." for the directory itself).
    pub name: &'a [u8],
}

impl<'a> Event<'a> {
    /// The event's directory-and-name records; other info records, and ones too short for
    /// what they say they hold, are left out. Ends at a record whose length does not fit.
    pub fn dfid_names(&self) -> impl Iterator<Item = DfidName<'a>> {
        let event = self.event;
        let mut off = self.metadata_len;
        std::iter::from_fn(move || {
            while off + INFO_HEADER_LEN <= event.len() {
                let info_type = event[off];
                let len = u16_at(event, off + 2) as usize;
                if len < INFO_HEADER_LEN || off + len > event.len() {
                    return None;
                }
                let rec = &event[off..off + len];
                off += len;
                let kind = match info_type {
                    libc::FAN_EVENT_INFO_TYPE_DFID_NAME => NameKind::Entry,
                    libc::FAN_EVENT_INFO_TYPE_OLD_DFID_NAME => NameKind::Old,
                    libc::FAN_EVENT_INFO_TYPE_NEW_DFID_NAME => NameKind::New,
                    _ => continue,
                };
                if rec.len() < INFO_HEADER_LEN + FSID_LEN + 8 {
                    continue;
                }
                let fsid = [u32_at(rec, 4) as i32, u32_at(rec, 8) as i32];
                let h = INFO_HEADER_LEN + FSID_LEN;
                let handle_bytes = u32_at(rec, h) as usize;
                let handle_end = h + 8 + handle_bytes;
                if handle_end > rec.len() {
                    continue;
                }
                let name_bytes = &rec[handle_end..];
                return Some(DfidName {
                    kind,
                    fsid,
                    handle: &rec[h..handle_end],
                    name: &name_bytes[..name_bytes.iter().position(|&b| b == 0).unwrap_or(0)],
                });
            }
            None
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(mask: u64, pid: i32, records: &[u8]) -> Vec<u8> {
        let len = METADATA_LEN + records.len();
        let mut e = Vec::with_capacity(len);
        e.extend_from_slice(&(len as u32).to_ne_bytes());
        e.extend_from_slice(&[libc::FANOTIFY_METADATA_VERSION, 0]);
        e.extend_from_slice(&(METADATA_LEN as u16).to_ne_bytes());
        e.extend_from_slice(&mask.to_ne_bytes());
        e.extend_from_slice(&(-1i32).to_ne_bytes());
        e.extend_from_slice(&pid.to_ne_bytes());
        e.extend_from_slice(records);
        e
    }

    /// fanotify_event_info_fid with a DFID_NAME-type header, an 8-byte handle and a name.
    fn dfid_name(info_type: u8, fsid: [i32; 2], name: &[u8]) -> Vec<u8> {
        let mut r = vec![info_type, 0, 0, 0];
        r.extend_from_slice(&fsid[0].to_ne_bytes());
        r.extend_from_slice(&fsid[1].to_ne_bytes());
        r.extend_from_slice(&8u32.to_ne_bytes()); // handle_bytes
        r.extend_from_slice(&1i32.to_ne_bytes()); // handle_type
        r.extend_from_slice(&[7; 8]);
        r.extend_from_slice(name);
        r.push(0);
        while r.len() % 4 != 0 {
            r.push(0);
        }
        let len = r.len() as u16;
        r[2..4].copy_from_slice(&len.to_ne_bytes());
        r
    }

    #[test]
    fn decodes_events_and_their_names() {
        let mut records = dfid_name(libc::FAN_EVENT_INFO_TYPE_OLD_DFID_NAME, [1, 2], b"a");
        records.extend(dfid_name(99, [1, 2], b"skipped"));
        records.extend(dfid_name(
            libc::FAN_EVENT_INFO_TYPE_NEW_DFID_NAME,
            [1, 2],
            b"bc",
        ));
        let mut buf = event(libc::FAN_RENAME, 42, &records);
        buf.extend(event(libc::FAN_OPEN, 7, &[]));
        let mut it = events(&buf);
        let e = it.next().unwrap();
        assert_eq!((e.mask, e.pid), (libc::FAN_RENAME, 42));
        let names: Vec<_> = e
            .dfid_names()
            .map(|n| (n.kind, n.fsid, n.handle.len(), n.name.to_vec()))
            .collect();
        assert_eq!(
            names,
            [
                (NameKind::Old, [1, 2], 16, b"a".to_vec()),
                (NameKind::New, [1, 2], 16, b"bc".to_vec())
            ]
        );
        let e = it.next().unwrap();
        assert_eq!(
            (e.mask, e.pid, e.dfid_names().count()),
            (libc::FAN_OPEN, 7, 0)
        );
        assert!(it.next().is_none());
        assert!(!it.malformed());

        let mut cut = event(libc::FAN_OPEN, 1, &[]);
        cut[0] = 200; // longer than the buffer
        let mut it = events(&cut);
        assert!(it.next().is_none());
        assert!(it.malformed());
    }
}
