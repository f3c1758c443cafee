//! xfs's reserved block pool (XFS_IOC_GET/SET_RESBLKS).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// struct xfs_fsop_resblks (fs/xfs/libxfs/xfs_fs.h): the reserved block pool.
#[repr(C)]
#[derive(Default)]
struct XfsFsopResblks {
    resblks: u64,
    resblks_avail: u64,
}

/// XFS_IOC_SET_RESBLKS = _IOWR('X', 114, struct xfs_fsop_resblks) (fs/xfs/libxfs/xfs_fs.h).
const XFS_IOC_SET_RESBLKS: libc::c_ulong = 0xC010_5872;
/// XFS_IOC_GET_RESBLKS = _IOR('X', 115, struct xfs_fsop_resblks) (fs/xfs/libxfs/xfs_fs.h).
const XFS_IOC_GET_RESBLKS: libc::c_ulong = 0x8010_5873;

/// The xfs reserved block pool, emptied while held and restored on drop.
pub struct XfsResblks {
    /// Sets the old reserve back if SIGINT or SIGTERM ends the process first; declared
    /// first so that it is unregistered before `file` closes.
    _on_signal: Option<super::signals::UndoGuard>,
    file: File,
    old: u64,
}

impl XfsResblks {
    pub fn empty(path: &Path) -> io::Result<XfsResblks> {
        let file = File::open(path)?;
        let mut r = XfsFsopResblks::default();
        // SAFETY: the ioctl writes one xfs_fsop_resblks.
        if unsafe { libc::ioctl(file.as_raw_fd(), XFS_IOC_GET_RESBLKS as _, &mut r) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let old = r.resblks;
        let back = XfsFsopResblks {
            resblks: old,
            resblks_avail: 0,
        };
        // SAFETY: plain old data of the kernel's layout, viewed as bytes for the record.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                (&back as *const XfsFsopResblks).cast::<u8>(),
                std::mem::size_of::<XfsFsopResblks>(),
            )
        }
        .to_vec();
        let on_signal = super::signals::undo_on_signal_ioctl(
            file.as_raw_fd(),
            XFS_IOC_SET_RESBLKS as libc::c_ulong,
            bytes,
        );
        let mut zero = XfsFsopResblks::default();
        // SAFETY: the ioctl reads and writes one xfs_fsop_resblks.
        if unsafe { libc::ioctl(file.as_raw_fd(), XFS_IOC_SET_RESBLKS as _, &mut zero) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(XfsResblks {
            _on_signal: on_signal,
            file,
            old,
        })
    }
}

impl Drop for XfsResblks {
    fn drop(&mut self) {
        let mut r = XfsFsopResblks {
            resblks: self.old,
            resblks_avail: 0,
        };
        // SAFETY: as above.
        unsafe { libc::ioctl(self.file.as_raw_fd(), XFS_IOC_SET_RESBLKS as _, &mut r) };
    }
}
