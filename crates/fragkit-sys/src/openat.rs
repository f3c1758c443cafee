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

/// `opts` opened at `path` with `flags` and O_NOATIME, so that reading the file leaves its
/// access time as it was; without O_NOATIME where the kernel refuses it (EPERM: the caller
/// neither owns the file nor has CAP_FOWNER), since an atime update is then all it costs.
pub fn open_without_atime(
    opts: &std::fs::OpenOptions,
    flags: libc::c_int,
    path: &std::path::Path,
) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut opts = opts.clone();
    match opts.custom_flags(flags | libc::O_NOATIME).open(path) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => opts.custom_flags(flags).open(path),
        other => other,
    }
}
