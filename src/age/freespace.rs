//! Free-space histogram of a mounted file system, for the aging reports.
//!
// TODO(merge): replace with layout::fsmap once issue 3 lands. This is a minimal private
// GETFSMAP reader (free records only) so that aging can record free-space structure now.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

use serde::Serialize;

use crate::metrics::Distribution;

/// struct fsmap (include/uapi/linux/fsmap.h): one record of the device map.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Fsmap {
    device: u32,
    flags: u32,
    physical: u64,
    owner: u64,
    offset: u64,
    length: u64,
    reserved: [u64; 3],
}

/// struct fsmap_head (include/uapi/linux/fsmap.h), followed by `RECORDS` records.
#[repr(C)]
struct FsmapHead {
    iflags: u32,
    oflags: u32,
    count: u32,
    entries: u32,
    reserved: [u64; 6],
    keys: [Fsmap; 2],
    recs: [Fsmap; RECORDS],
}

const RECORDS: usize = 512;
/// FS_IOC_GETFSMAP = _IOWR('X', 59, struct fsmap_head) (include/uapi/linux/fsmap.h).
const FS_IOC_GETFSMAP: libc::c_ulong = 0xC0C0_583B;
/// FMR_OWN_FREE = FMR_OWNER(0, 1): free space (include/uapi/linux/fsmap.h).
const FMR_OWN_FREE: u64 = 1;
/// FMR_OF_LAST: last record of the query (include/uapi/linux/fsmap.h).
const FMR_OF_LAST: u32 = 0x20;

/// Free extents of the file system: count, bytes and a power-of-two size histogram.
#[derive(Debug, Clone, Serialize)]
pub struct FreeSpace {
    /// "getfsmap", or "statfs" when the file system has no GETFSMAP (btrfs): then only
    /// the total is known and `extents` is empty.
    pub source: &'static str,
    pub free_bytes: u64,
    /// Sizes of free extents in bytes.
    pub extents: Distribution,
}

/// Free-space histogram of the file system holding `path`.
pub fn free_space(path: &Path) -> io::Result<FreeSpace> {
    let file = File::open(path)?;
    match getfsmap_free(&file) {
        Ok(d) => Ok(FreeSpace {
            source: "getfsmap",
            free_bytes: d.sum,
            extents: d,
        }),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ENOTTY) | Some(libc::EOPNOTSUPP)
            ) =>
        {
            let u = super::FsUsage::of(path).map_err(io::Error::other)?;
            Ok(FreeSpace {
                source: "statfs",
                free_bytes: u.free,
                extents: Distribution::default(),
            })
        }
        Err(e) => Err(e),
    }
}

fn getfsmap_free(file: &File) -> io::Result<Distribution> {
    let mut head: Box<FsmapHead> = Box::new(FsmapHead {
        iflags: 0,
        oflags: 0,
        count: RECORDS as u32,
        entries: 0,
        reserved: [0; 6],
        keys: [Fsmap::default(); 2],
        recs: [Fsmap::default(); RECORDS],
    });
    head.keys[1] = Fsmap {
        device: u32::MAX,
        flags: u32::MAX,
        physical: u64::MAX,
        owner: u64::MAX,
        offset: u64::MAX,
        length: 0,
        reserved: [0; 3],
    };
    let mut dist = Distribution::default();
    loop {
        head.count = RECORDS as u32;
        head.entries = 0;
        // SAFETY: head is a properly laid out fsmap_head with RECORDS records after it.
        if unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_GETFSMAP as _, &mut *head) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = head.entries as usize;
        if n == 0 {
            break;
        }
        for r in &head.recs[..n] {
            if r.owner == FMR_OWN_FREE {
                dist.add(r.length);
            }
        }
        let last = head.recs[n - 1];
        if last.flags & FMR_OF_LAST != 0 {
            break;
        }
        // Continue after the last record returned (the kernel's documented iteration).
        head.keys[0] = last;
    }
    Ok(dist)
}
