//! Free-space histogram of a mounted file system, for the aging reports (GETFSMAP through
//! `sys::fsmap`; statfs totals where the file system has none).

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::Path;

use serde::Serialize;

use crate::metrics::Distribution;
use crate::sys::fsmap::{read_fsmap, FsmapError};

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
        Err(FsmapError::Unsupported) => {
            let u = super::FsUsage::of(path).map_err(io::Error::other)?;
            Ok(FreeSpace {
                source: "statfs",
                free_bytes: u.free,
                extents: Distribution::default(),
            })
        }
        Err(FsmapError::Io(e)) => Err(e),
        Err(e) => Err(io::Error::other(e.to_string())),
    }
}

fn getfsmap_free(file: &File) -> Result<Distribution, FsmapError> {
    let mut dist = Distribution::default();
    for r in read_fsmap(file.as_fd(), None, 0, u64::MAX)? {
        if r.owner.is_free() {
            dist.add(r.length);
        }
    }
    Ok(dist)
}
