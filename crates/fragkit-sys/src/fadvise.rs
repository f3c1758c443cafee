//! posix_fadvise(2): tell the page cache what a file's range is about to see.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use nix::fcntl::PosixFadviseAdvice;

/// The advice fragkit gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    /// POSIX_FADV_WILLNEED: start reading the range into the page cache now.
    WillNeed,
    /// POSIX_FADV_DONTNEED: drop the range's clean pages from the page cache.
    DontNeed,
}

/// posix_fadvise(f, offset, len, advice); `len` 0 means to the end of the file.
pub fn fadvise(f: &File, offset: u64, len: u64, advice: Advice) -> io::Result<()> {
    let advice = match advice {
        Advice::WillNeed => PosixFadviseAdvice::POSIX_FADV_WILLNEED,
        Advice::DontNeed => PosixFadviseAdvice::POSIX_FADV_DONTNEED,
    };
    Ok(nix::fcntl::posix_fadvise(
        f.as_raw_fd(),
        offset as i64,
        len as i64,
        advice,
    )?)
}
