//! f2fs: F2FS_IOC_DEFRAGMENT rewrites the range's blocks out of place (a new log
//! location); the node update is checkpointed, so a crash leaves the old blocks.

use std::os::fd::AsRawFd;

use anyhow::Result;

use super::{Migrator, RangeOutcome, Target};

/// struct f2fs_defragment (include/uapi/linux/f2fs.h): bytes.
#[repr(C)]
struct F2fsDefragment {
    start: u64,
    len: u64,
}

/// F2FS_IOC_DEFRAGMENT = _IOWR(0xf5, 8, struct f2fs_defragment).
const F2FS_IOC_DEFRAGMENT: libc::c_ulong =
    nix::request_code_readwrite!(0xf5, 8, std::mem::size_of::<F2fsDefragment>()) as libc::c_ulong;

pub struct Defragment;

impl Migrator for Defragment {
    fn primitive(&self) -> &'static str {
        "F2FS_IOC_DEFRAGMENT"
    }

    fn migrate(&self, t: &Target<'_>, offset: u64, length: u64) -> Result<RangeOutcome> {
        let mut args = F2fsDefragment {
            start: offset,
            len: length,
        };
        // SAFETY: valid struct for the ioctl.
        let rc = unsafe { libc::ioctl(t.file.as_raw_fd(), F2FS_IOC_DEFRAGMENT as _, &mut args) };
        if rc < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        t.file.sync_data()?;
        Ok(RangeOutcome::Moved { bytes: length })
    }
}
