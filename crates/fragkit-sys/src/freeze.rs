//! FIFREEZE/FITHAW: hold a mounted file system still (all dirty data and metadata on the
//! device, writes blocked).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

// include/uapi/linux/fs.h
nix::ioctl_readwrite!(fifreeze, b'X', 119, libc::c_int);
nix::ioctl_readwrite!(fithaw, b'X', 120, libc::c_int);

/// A frozen file system, thawed when dropped, so an error while frozen cannot leave it stuck.
pub struct Frozen {
    dir: File,
}

impl Frozen {
    pub fn freeze(mountpoint: &Path) -> io::Result<Frozen> {
        let dir = File::open(mountpoint)?;
        let mut arg: libc::c_int = 0;
        // SAFETY: FIFREEZE takes no meaningful argument; the fd is an open directory.
        unsafe { fifreeze(dir.as_raw_fd(), &mut arg) }.map_err(io::Error::from)?;
        Ok(Frozen { dir })
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let mut arg: libc::c_int = 0;
        // SAFETY: as for FIFREEZE.
        if let Err(e) = unsafe { fithaw(self.dir.as_raw_fd(), &mut arg) } {
            crate::stderr_line!("fragkit: thawing a scratch file system failed: {e}");
        }
    }
}
