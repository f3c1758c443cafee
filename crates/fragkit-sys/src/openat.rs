//! openat(2): a name opened relative to a directory descriptor (or AT_FDCWD), always with
//! O_CLOEXEC, as an owned descriptor.

use std::ffi::CStr;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// openat(dirfd, name, flags | O_CLOEXEC). `dirfd` may be `libc::AT_FDCWD`; a descriptor
/// that is not open only makes the call fail (EBADF). No mode: not for O_CREAT.
pub fn open_at(dirfd: RawFd, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated and borrowed for the call; openat(2) reads only it.
    let fd = unsafe { libc::openat(dirfd, name.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor from openat, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
