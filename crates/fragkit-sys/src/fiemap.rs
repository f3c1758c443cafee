//! FS_IOC_FIEMAP: the kernel's extent map of one open file.
//!
//! Layout and numbers from include/uapi/linux/fiemap.h and include/uapi/linux/fs.h.

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use serde::{Serialize, Serializer};

/// FIEMAP extent flags (include/uapi/linux/fiemap.h), kept exactly as the kernel gave them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct ExtentFlags(pub u32);

impl ExtentFlags {
    pub const LAST: ExtentFlags = ExtentFlags(0x0000_0001);
    pub const UNKNOWN: ExtentFlags = ExtentFlags(0x0000_0002);
    pub const DELALLOC: ExtentFlags = ExtentFlags(0x0000_0004);
    pub const ENCODED: ExtentFlags = ExtentFlags(0x0000_0008);
    pub const DATA_ENCRYPTED: ExtentFlags = ExtentFlags(0x0000_0080);
    pub const NOT_ALIGNED: ExtentFlags = ExtentFlags(0x0000_0100);
    pub const DATA_INLINE: ExtentFlags = ExtentFlags(0x0000_0200);
    pub const DATA_TAIL: ExtentFlags = ExtentFlags(0x0000_0400);
    pub const UNWRITTEN: ExtentFlags = ExtentFlags(0x0000_0800);
    pub const MERGED: ExtentFlags = ExtentFlags(0x0000_1000);
    pub const SHARED: ExtentFlags = ExtentFlags(0x0000_2000);
    /// ext4's extent-status-cache hole marker (fs/ext4/ext4.h); never from plain FIEMAP.
    pub const EXT4_HOLE: ExtentFlags = ExtentFlags(0x0800_0000);

    /// Names in filefrag's order, as used in JSON output.
    pub const NAMED: [(ExtentFlags, &'static str); 12] = [
        (Self::LAST, "last"),
        (Self::UNKNOWN, "unknown"),
        (Self::DELALLOC, "delalloc"),
        (Self::ENCODED, "encoded"),
        (Self::DATA_ENCRYPTED, "encrypted"),
        (Self::NOT_ALIGNED, "not_aligned"),
        (Self::DATA_INLINE, "inline"),
        (Self::DATA_TAIL, "tail"),
        (Self::UNWRITTEN, "unwritten"),
        (Self::MERGED, "merged"),
        (Self::SHARED, "shared"),
        (Self::EXT4_HOLE, "hole"),
    ];

    pub fn contains(self, other: ExtentFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Flag names; bits fragkit has no name for appear as hex ("0x40000").
    pub fn names(self) -> Vec<String> {
        let mut rest = self.0;
        let mut out = Vec::new();
        for (flag, name) in Self::NAMED {
            if rest & flag.0 != 0 {
                out.push(name.to_string());
                rest &= !flag.0;
            }
        }
        let mut bit = 1u32;
        while rest != 0 && bit != 0 {
            if rest & bit != 0 {
                out.push(format!("{bit:#x}"));
                rest &= !bit;
            }
            bit <<= 1;
        }
        out
    }
}

impl Serialize for ExtentFlags {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.names())
    }
}

/// One FIEMAP record: bytes [logical, logical+length) of the file live at
/// [physical, physical+length) of the device (on btrfs: btrfs's logical address space).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Extent {
    pub logical: u64,
    pub physical: u64,
    pub length: u64,
    pub flags: ExtentFlags,
}

impl Extent {
    /// A written, located extent with no flags (tests and synthetic layouts).
    pub fn plain(logical: u64, physical: u64, length: u64) -> Extent {
        Extent {
            logical,
            physical,
            length,
            flags: ExtentFlags(0),
        }
    }
    pub fn logical_end(&self) -> u64 {
        self.logical.saturating_add(self.length)
    }
    pub fn physical_end(&self) -> u64 {
        self.physical.saturating_add(self.length)
    }
    /// Has a real place on the device (not delalloc/unknown, not packed into metadata).
    pub fn is_located(&self) -> bool {
        !self.flags.contains(ExtentFlags::UNKNOWN)
            && !self.flags.contains(ExtentFlags::DELALLOC)
            && !self.flags.contains(ExtentFlags::DATA_INLINE)
            && !self.flags.contains(ExtentFlags::EXT4_HOLE)
    }
    /// Reading it costs device I/O: located and written (unwritten extents read as zeros).
    pub fn costs_read_io(&self) -> bool {
        self.is_located() && !self.flags.contains(ExtentFlags::UNWRITTEN)
    }
    /// Whether `next` continues this extent on the device, so a read crosses no seek.
    ///
    /// Compressed (ENCODED) extents report their logical length, not the smaller length
    /// on disk, so a following extent that starts anywhere inside this one's reported
    /// span is taken as adjacent rather than blindly counted as fragmentation.
    pub fn continues_into(&self, next: &Extent) -> bool {
        if next.logical != self.logical_end() {
            return false;
        }
        if next.physical == self.physical_end() {
            return true;
        }
        self.flags.contains(ExtentFlags::ENCODED)
            && next.physical > self.physical
            && next.physical <= self.physical_end()
    }
}

/// FS_IOC_FIEMAP = _IOWR('f', 11, struct fiemap) (include/uapi/linux/fs.h).
const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
/// fm_flags: flush delalloc data before mapping (include/uapi/linux/fiemap.h).
pub const FIEMAP_FLAG_SYNC: u32 = 0x0000_0001;

/// struct fiemap header (32 bytes), followed by fm_extent_count struct fiemap_extent.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct FiemapHeader {
    fm_start: u64,
    fm_length: u64,
    fm_flags: u32,
    fm_mapped_extents: u32,
    fm_extent_count: u32,
    fm_reserved: u32,
}

/// struct fiemap_extent (56 bytes).
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct FiemapExtent {
    fe_logical: u64,
    fe_physical: u64,
    fe_length: u64,
    fe_reserved64: [u64; 2],
    fe_flags: u32,
    fe_reserved: [u32; 3],
}

const _: () = assert!(std::mem::size_of::<FiemapHeader>() == 32);
const _: () = assert!(std::mem::size_of::<FiemapExtent>() == 56);

/// Extents asked for per ioctl; the call is repeated from the last end until LAST.
/// 256 records (14 KiB) covers almost every file in one call.
const EXTENTS_PER_CALL: usize = 256;

#[repr(C)]
struct FiemapBuf {
    header: FiemapHeader,
    extents: [FiemapExtent; EXTENTS_PER_CALL],
}

thread_local! {
    // One buffer per thread: the walk calls FIEMAP on many files and must not allocate each time.
    static BUF: RefCell<Box<FiemapBuf>> = RefCell::new(Box::new(FiemapBuf {
        header: FiemapHeader::default(),
        extents: [FiemapExtent::default(); EXTENTS_PER_CALL],
    }));
}

/// Why FIEMAP could not map a file.
#[derive(Debug, thiserror::Error)]
pub enum FiemapError {
    /// The file system has no FIEMAP (tmpfs, procfs, some overlay/fuse setups).
    #[error("the file system does not support FIEMAP (no extent map can be read)")]
    Unsupported,
    /// The kernel rejected requested fm_flags (EBADR); carries the flags it did not accept.
    #[error("FIEMAP rejected flags {0:#x}")]
    BadFlags(u32),
    #[error("FIEMAP failed: {0}")]
    Io(#[from] io::Error),
}

/// Read every extent of the file behind `fd`, in logical order.
///
/// `sync` sets FIEMAP_FLAG_SYNC so delayed-allocation data gets real blocks first
/// (this writes dirty data back; off by default because a scan should not write).
pub fn read_extents(fd: BorrowedFd<'_>, sync: bool) -> Result<Vec<Extent>, FiemapError> {
    let mut out = Vec::new();
    read_extents_into(fd, sync, &mut out)?;
    Ok(out)
}

/// As [`read_extents`], appending to `out` (lets callers reuse an allocation).
pub fn read_extents_into(
    fd: BorrowedFd<'_>,
    sync: bool,
    out: &mut Vec<Extent>,
) -> Result<(), FiemapError> {
    read_span_into(fd, sync, 0, u64::MAX, out)
}

/// The extents overlapping [start, end) only (the first and last may reach beyond it).
/// Defrag maps each range's neighbourhood this way: mapping a whole 17k-extent file per
/// 128 KiB range made the planner quadratic (75k FIEMAP calls for 2048 ranges).
/// `sync` as in [`read_extents`] (btrfs also waits for ordered extents to complete).
pub fn read_extents_span(
    fd: BorrowedFd<'_>,
    sync: bool,
    start: u64,
    end: u64,
) -> Result<Vec<Extent>, FiemapError> {
    let mut out = Vec::new();
    read_span_into(fd, sync, start, end, &mut out)?;
    Ok(out)
}

fn read_span_into(
    fd: BorrowedFd<'_>,
    sync: bool,
    mut start: u64,
    end: u64,
    out: &mut Vec<Extent>,
) -> Result<(), FiemapError> {
    BUF.with(|cell| {
        let mut buf = cell.borrow_mut();
        loop {
            buf.header = FiemapHeader {
                fm_start: start,
                fm_length: end.saturating_sub(start).max(1),
                fm_flags: if sync { FIEMAP_FLAG_SYNC } else { 0 },
                fm_mapped_extents: 0,
                fm_extent_count: EXTENTS_PER_CALL as u32,
                fm_reserved: 0,
            };
            // SAFETY: the buffer is a valid struct fiemap with room for fm_extent_count records.
            let rc = unsafe {
                libc::ioctl(
                    fd.as_raw_fd(),
                    FS_IOC_FIEMAP as _,
                    &mut **buf as *mut FiemapBuf,
                )
            };
            if rc < 0 {
                let err = io::Error::last_os_error();
                return Err(match err.raw_os_error() {
                    Some(libc::EOPNOTSUPP) | Some(libc::ENOTTY) => FiemapError::Unsupported,
                    Some(libc::EBADR) => FiemapError::BadFlags(buf.header.fm_flags),
                    _ => FiemapError::Io(err),
                });
            }
            let n = (buf.header.fm_mapped_extents as usize).min(EXTENTS_PER_CALL);
            if n == 0 {
                return Ok(());
            }
            let mut last = false;
            for fe in &buf.extents[..n] {
                out.push(Extent {
                    logical: fe.fe_logical,
                    physical: fe.fe_physical,
                    length: fe.fe_length,
                    flags: ExtentFlags(fe.fe_flags),
                });
                last |= fe.fe_flags & ExtentFlags::LAST.0 != 0;
            }
            if last || n < EXTENTS_PER_CALL {
                return Ok(());
            }
            let tail = &buf.extents[n - 1];
            let next = tail.fe_logical.saturating_add(tail.fe_length);
            if next <= start || next >= end {
                // A zero-length record would loop forever; the map is as complete as it gets.
                return Ok(());
            }
            start = next;
        }
    })
}

/// FIBMAP = _IO(0x00, 1) (include/uapi/linux/fs.h): the older one-block-at-a-time map.
const FIBMAP: libc::c_ulong = 1;

/// FIBMAP for one logical block: the physical block behind it (0 for a hole). Needs
/// CAP_SYS_RAWIO (EPERM otherwise); EINVAL or ENOTTY where the file system has no bmap.
/// Only `scan --format filefrag` uses it, to fail exactly as filefrag does where FIEMAP is
/// missing.
pub fn fibmap(fd: BorrowedFd<'_>, block: u32) -> io::Result<u32> {
    let mut b: libc::c_int = block as libc::c_int;
    // SAFETY: FIBMAP reads and writes one int.
    if unsafe { libc::ioctl(fd.as_raw_fd(), FIBMAP as _, &mut b) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(b as u32)
}
