//! A pseudo-terminal (openpty(3)): for a tool that writes its report to stdout only when
//! its stdin is a terminal (xfs_fsr sends it to syslog otherwise).

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// The primary and the secondary end of a new pseudo-terminal.
pub fn open() -> io::Result<(OwnedFd, OwnedFd)> {
    let (mut primary, mut secondary) = (-1, -1);
    // SAFETY: openpty fills two descriptors; null name, termios and winsize are allowed.
    let rc = unsafe {
        libc::openpty(
            &mut primary,
            &mut secondary,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just opened and are owned by nobody else.
    Ok(unsafe {
        (
            OwnedFd::from_raw_fd(primary),
            OwnedFd::from_raw_fd(secondary),
        )
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_secondary_end_is_a_terminal() {
        let (_p, s) = super::open().unwrap();
        // SAFETY: isatty only queries the descriptor; `s` is an open descriptor we own.
        let tty = unsafe { libc::isatty(std::os::fd::AsRawFd::as_raw_fd(&s)) };
        assert_eq!(tty, 1);
    }
}
