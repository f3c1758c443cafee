//! poll(2) on one descriptor: wait until it has something to read.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

/// Wait up to `timeout` (whole milliseconds, at most i32::MAX) for `fd` to be readable
/// (POLLIN): true if it is, false on timeout. EINTR comes back as an error like any other.
pub fn readable(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one pollfd we own, alive for the call.
    let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc > 0)
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;
    use std::time::Duration;

    #[test]
    fn a_pipe_is_readable_once_written() {
        let (r, w) = nix::unistd::pipe().unwrap();
        assert!(!super::readable(r.as_fd(), Duration::ZERO).unwrap());
        nix::unistd::write(&w, b"x").unwrap();
        assert!(super::readable(r.as_fd(), Duration::from_secs(1)).unwrap());
    }
}
