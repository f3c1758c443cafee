//! O_TMPFILE: an unnamed file in a directory, gone with its last descriptor.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// An unnamed temporary file in `dir` (O_TMPFILE): nothing is left behind after a crash.
pub fn temp_file_in(dir: &File) -> io::Result<File> {
    let name = c".";
    // SAFETY: openat with O_TMPFILE on a directory fd; the fd is owned by the File below.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh fd.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}
