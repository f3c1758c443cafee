//! Allocator knobs aging needs to set for a while and put back: ext4's sysfs tunables and
//! xfs's reserved block pool. Every change is undone when the guard is dropped.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

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

/// Name of the block device a path lives on ("loop3"), from /sys/dev/block/MAJ:MIN.
pub fn block_device_name(path: &Path) -> Option<String> {
    let dev = std::fs::metadata(path).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let link = std::fs::read_link(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    Some(link.file_name()?.to_string_lossy().into_owned())
}

/// One ext4 tunable under /sys/fs/ext4/DEV/, restored on drop.
pub struct Ext4Tunable {
    path: PathBuf,
    old: String,
}

impl Ext4Tunable {
    /// Set `/sys/fs/ext4/<dev of path>/<name>` to `value`; None if the knob does not exist.
    pub fn set(path: &Path, name: &str, value: &str) -> io::Result<Option<Ext4Tunable>> {
        let Some(dev) = block_device_name(path) else {
            return Ok(None);
        };
        let knob = PathBuf::from(format!("/sys/fs/ext4/{dev}/{name}"));
        let Ok(old) = std::fs::read_to_string(&knob) else {
            return Ok(None);
        };
        std::fs::write(&knob, value)?;
        Ok(Some(Ext4Tunable {
            path: knob,
            old: old.trim().to_string(),
        }))
    }
}

impl Drop for Ext4Tunable {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.path, &self.old);
    }
}

/// The xfs reserved block pool, emptied while held and restored on drop.
pub struct XfsResblks {
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
        let mut zero = XfsFsopResblks::default();
        // SAFETY: the ioctl reads and writes one xfs_fsop_resblks.
        if unsafe { libc::ioctl(file.as_raw_fd(), XFS_IOC_SET_RESBLKS as _, &mut zero) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(XfsResblks { file, old })
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
