//! FS_IOC_GETFSMAP: who owns every byte of a mounted file system (files, metadata, free
//! space). ext4 and xfs implement it; it needs CAP_SYS_ADMIN.
//!
//! Layout and numbers from include/uapi/linux/fsmap.h; the xfs/ext4 special owner codes from
//! fs/xfs/libxfs/xfs_fs.h and fs/ext4/fsmap.h.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// FS_IOC_GETFSMAP = _IOWR('X', 59, struct fsmap_head) (include/uapi/linux/fsmap.h).
const FS_IOC_GETFSMAP: libc::c_ulong = 0xC0C0_583B;

/// fmr_flags (include/uapi/linux/fsmap.h), the header's whole set; not all are read here.
#[allow(dead_code)]
mod unread_flags {
    pub(crate) const FMR_OF_PREALLOC: u32 = 0x1;
    pub(crate) const FMR_OF_ATTR_FORK: u32 = 0x2;
    pub(crate) const FMR_OF_EXTENT_MAP: u32 = 0x4;
    pub(crate) const FMR_OF_SHARED: u32 = 0x8;
}
pub(crate) const FMR_OF_SPECIAL_OWNER: u32 = 0x10;
pub(crate) const FMR_OF_LAST: u32 = 0x20;

/// Generic special owners (include/uapi/linux/fsmap.h); fragkit decodes owners by file
/// system (below), so these stay as the header's reference.
#[allow(dead_code)]
mod generic_owners {
    const fn fmr_owner(kind: u8, code: u32) -> u64 {
        ((kind as u64) << 32) | code as u64
    }
    pub(crate) const FMR_OWN_FREE: u64 = fmr_owner(0, 1);
    pub(crate) const FMR_OWN_UNKNOWN: u64 = fmr_owner(0, 2);
    pub(crate) const FMR_OWN_METADATA: u64 = fmr_owner(0, 3);
}

/// struct fsmap (64 bytes).
#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
struct RawFsmap {
    fmr_device: u32,
    fmr_flags: u32,
    fmr_physical: u64,
    fmr_owner: u64,
    fmr_offset: u64,
    fmr_length: u64,
    fmr_reserved: [u64; 3],
}

/// struct fsmap_head (64 bytes + two keys), followed by fmh_count records.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct RawFsmapHead {
    fmh_iflags: u32,
    fmh_oflags: u32,
    fmh_count: u32,
    fmh_entries: u32,
    fmh_reserved: [u64; 6],
    fmh_keys: [RawFsmap; 2],
}

const _: () = assert!(std::mem::size_of::<RawFsmap>() == 64);
const _: () = assert!(std::mem::size_of::<RawFsmapHead>() == 192);

/// Records asked for per call (as e2freefrag does); the call repeats from the last record.
const RECORDS_PER_CALL: usize = 1024;

#[repr(C)]
struct FsmapBuf {
    head: RawFsmapHead,
    recs: [RawFsmap; RECORDS_PER_CALL],
}

/// Who owns a mapped range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Owner {
    Free,
    Unknown,
    /// File-system metadata; the name says which kind ("inodes", "log", "bitmap", ...).
    Metadata(&'static str),
    /// A file (or directory, symlink) by inode number; `offset` is in the record.
    Inode(u64),
}

impl Owner {
    fn decode(flags: u32, owner: u64) -> Owner {
        if flags & FMR_OF_SPECIAL_OWNER == 0 {
            return Owner::Inode(owner);
        }
        let kind = (owner >> 32) as u8;
        let code = owner as u32;
        match (kind, code) {
            (0, 1) => Owner::Free,
            (0, 2) => Owner::Unknown,
            (0, 3) => Owner::Metadata("metadata"),
            // xfs (fs/xfs/libxfs/xfs_fs.h) and ext4 (fs/ext4/fsmap.h) share the 'X' codes.
            (b'X', 1) => Owner::Metadata("static fs metadata"),
            (b'X', 2) => Owner::Metadata("journal/log"),
            (b'X', 3) => Owner::Metadata("per-AG metadata"),
            (b'X', 4) => Owner::Metadata("inode btree"),
            (b'X', 5) => Owner::Metadata("inodes"),
            (b'X', 6) => Owner::Metadata("refcount btree"),
            (b'X', 7) => Owner::Metadata("cow reservation"),
            (b'X', 8) => Owner::Metadata("bad blocks"),
            (b'f', 1) => Owner::Metadata("group descriptors"),
            (b'f', 2) => Owner::Metadata("reserved gdt"),
            (b'f', 3) => Owner::Metadata("block bitmap"),
            (b'f', 4) => Owner::Metadata("inode bitmap"),
            _ => Owner::Metadata("metadata"),
        }
    }

    pub fn is_free(self) -> bool {
        self == Owner::Free
    }
}

/// One GETFSMAP record; byte units throughout, as the kernel reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsmapRecord {
    /// new_encode_dev() of the device the range is on (see [`crate::dev::encode_dev`]).
    pub device: u32,
    pub flags: u32,
    pub physical: u64,
    pub owner: Owner,
    /// Offset in the owning file (meaningless for special owners).
    pub offset: u64,
    pub length: u64,
}

impl FsmapRecord {
    pub fn physical_end(&self) -> u64 {
        self.physical + self.length
    }
}

/// Why GETFSMAP could not map a file system.
#[derive(Debug, thiserror::Error)]
pub enum FsmapError {
    #[error("the file system has no GETFSMAP (only ext4 and xfs do)")]
    Unsupported,
    #[error("GETFSMAP needs root (CAP_SYS_ADMIN); run as root, e.g. with sudo")]
    NotPermitted,
    #[error("GETFSMAP failed: {0}")]
    Io(#[from] io::Error),
}

/// Every record in [start, end) (bytes) on `device` (a [`crate::dev::encode_dev`] value), or on every
/// device when None (then the range only bounds the first and last device), in the
/// kernel's order: by device, then physical address.
pub fn read_fsmap(
    fd: BorrowedFd<'_>,
    device: Option<u32>,
    start: u64,
    end: u64,
) -> Result<Vec<FsmapRecord>, FsmapError> {
    let mut buf = Box::new(FsmapBuf {
        head: RawFsmapHead::default(),
        recs: [RawFsmap::default(); RECORDS_PER_CALL],
    });
    buf.head.fmh_count = RECORDS_PER_CALL as u32;
    buf.head.fmh_keys[0].fmr_physical = start;
    buf.head.fmh_keys[0].fmr_device = device.unwrap_or(0);
    buf.head.fmh_keys[1] = RawFsmap {
        fmr_device: device.unwrap_or(u32::MAX),
        fmr_flags: u32::MAX,
        fmr_physical: end,
        fmr_owner: u64::MAX,
        fmr_offset: u64::MAX,
        fmr_length: 0,
        fmr_reserved: [0; 3],
    };
    let mut out = Vec::new();
    loop {
        // SAFETY: buf is a valid fsmap_head with room for fmh_count records.
        let rc = unsafe {
            libc::ioctl(
                fd.as_raw_fd(),
                FS_IOC_GETFSMAP as _,
                &mut *buf as *mut FsmapBuf,
            )
        };
        if rc < 0 {
            let err = io::Error::last_os_error();
            return Err(match err.raw_os_error() {
                Some(libc::EOPNOTSUPP) | Some(libc::ENOTTY) => FsmapError::Unsupported,
                Some(libc::EPERM) | Some(libc::EACCES) => FsmapError::NotPermitted,
                _ => FsmapError::Io(err),
            });
        }
        let n = (buf.head.fmh_entries as usize).min(RECORDS_PER_CALL);
        if n == 0 {
            break;
        }
        for r in &buf.recs[..n] {
            out.push(FsmapRecord {
                device: r.fmr_device,
                flags: r.fmr_flags,
                physical: r.fmr_physical,
                owner: Owner::decode(r.fmr_flags, r.fmr_owner),
                offset: r.fmr_offset,
                length: r.fmr_length,
            });
        }
        let last = buf.recs[n - 1];
        if last.fmr_flags & FMR_OF_LAST != 0 {
            break;
        }
        // The next call starts after the last record returned (fsmap_advance in xfsprogs).
        buf.head.fmh_keys[0] = last;
    }
    Ok(out)
}
