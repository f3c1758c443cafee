//! read(2), write(2), pread(2) and pwrite(2) on raw descriptors: event queues read
//! without blocking, standard output written past std's line buffer, and the psync I/O
//! engine's positioned requests.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};

/// One read(2) from a non-blocking descriptor (an fanotify or inotify queue): Some(bytes),
/// or None when the queue is empty (EAGAIN) or closed (0 bytes).
pub fn read_nonblocking(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Option<usize>> {
    match nix::unistd::read(fd.as_raw_fd(), buf) {
        Ok(n) => Ok((n > 0).then_some(n)),
        Err(nix::errno::Errno::EAGAIN) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// One write(2) of `buf` to `fd`: the bytes written, possibly fewer than `buf.len()`.
pub fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    Ok(nix::unistd::write(fd, buf)?)
}

/// One pread(2) of `len` bytes at `offset` into `buf`: the bytes read.
///
/// # Safety
/// `buf` must be valid for writes of `len` bytes for the duration of the call.
pub unsafe fn pread(fd: RawFd, buf: *mut u8, len: usize, offset: u64) -> io::Result<usize> {
    // SAFETY: the caller guarantees `buf` is writable for `len` bytes; a bad `fd` only makes
    // the call fail.
    let n = unsafe { libc::pread(fd, buf.cast(), len, offset as i64) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// One pwrite(2) of `len` bytes from `buf` at `offset`: the bytes written.
///
/// # Safety
/// `buf` must be valid for reads of `len` bytes for the duration of the call.
pub unsafe fn pwrite(fd: RawFd, buf: *const u8, len: usize, offset: u64) -> io::Result<usize> {
    // SAFETY: the caller guarantees `buf` is readable for `len` bytes; a bad `fd` only makes
    // the call fail.
    let n = unsafe { libc::pwrite(fd, buf.cast(), len, offset as i64) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use std::os::fd::{AsFd, AsRawFd};

    #[test]
    fn an_empty_nonblocking_pipe_reads_as_none() {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_NONBLOCK).unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(super::read_nonblocking(r.as_fd(), &mut buf).unwrap(), None);
        assert_eq!(super::write(w.as_fd(), b"abc").unwrap(), 3);
        assert_eq!(
            super::read_nonblocking(r.as_fd(), &mut buf).unwrap(),
            Some(3)
        );
        assert_eq!(&buf[..3], b"abc");
        drop(w);
        assert_eq!(super::read_nonblocking(r.as_fd(), &mut buf).unwrap(), None);
    }

    #[test]
    fn positioned_reads_and_writes() {
        let path = std::env::temp_dir().join(format!("fragkit-rw-{}", std::process::id()));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let data = *b"hello";
        // SAFETY: `data` is readable for its 5 bytes.
        let n = unsafe { super::pwrite(f.as_raw_fd(), data.as_ptr(), 5, 3) }.unwrap();
        assert_eq!(n, 5);
        let mut back = [0u8; 8];
        // SAFETY: `back` is writable for its 8 bytes.
        let n = unsafe { super::pread(f.as_raw_fd(), back.as_mut_ptr(), 8, 0) }.unwrap();
        assert_eq!((n, &back), (8, b"\0\0\0hello"));
        std::fs::remove_file(&path).unwrap();
    }
}
