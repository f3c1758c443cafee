//! The stat(2) family on descriptors: fstat(2), fstatat(2) and statx(2).

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};

/// fstat(2) of an open descriptor.
pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    Ok(nix::sys::stat::fstat(fd.as_raw_fd())?)
}

/// fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW): a directory entry itself, a symlink not
/// followed. A `dirfd` that is not open only makes the call fail (EBADF).
pub fn fstatat_nofollow(dirfd: RawFd, name: &CStr) -> io::Result<libc::stat> {
    Ok(nix::sys::stat::fstatat(
        Some(dirfd),
        name,
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )?)
}

/// statx(fd, "", AT_EMPTY_PATH, mask): the open file itself, the fields `mask` asks for
/// (`libc::STATX_*`; the others are zero).
pub fn statx_fd(fd: BorrowedFd<'_>, mask: libc::c_uint) -> io::Result<libc::statx> {
    // SAFETY: statx is plain integers, for which all-zero bytes are valid.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: an empty C string with AT_EMPTY_PATH stats the descriptor itself; `st` is a
    // live, writable `libc::statx` that statx(2) fills with at most one `struct statx`.
    let rc = unsafe {
        libc::statx(
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            mask,
            &mut st,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// A file's atime, mtime and ctime (seconds, nanoseconds each), as stat(2) gives them.
pub type Times = [(i64, i64); 3];

/// The times in `m`.
pub fn times(m: &std::fs::Metadata) -> Times {
    use std::os::unix::fs::MetadataExt;
    [
        (m.atime(), m.atime_nsec()),
        (m.mtime(), m.mtime_nsec()),
        (m.ctime(), m.ctime_nsec()),
    ]
}

/// Which of "atime", "mtime" and "ctime" differ between two samples.
pub fn times_changed(before: &Times, after: &Times) -> Vec<&'static str> {
    ["atime", "mtime", "ctime"]
        .into_iter()
        .zip(before.iter().zip(after))
        .filter(|(_, (b, a))| b != a)
        .map(|(name, _)| name)
        .collect()
}

#[cfg(test)]
mod tests {
    use std::os::fd::{AsFd, AsRawFd};
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn the_three_agree_with_std() {
        let dir = std::env::temp_dir().join(format!("fragkit-stat-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, b"12345").unwrap();
        let _ = std::fs::remove_file(dir.join("l"));
        std::os::unix::fs::symlink("f", dir.join("l")).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        let m = f.metadata().unwrap();
        let st = super::fstat(f.as_fd()).unwrap();
        assert_eq!((st.st_ino, st.st_size), (m.ino(), 5));
        let d = std::fs::File::open(&dir).unwrap();
        let l = super::fstatat_nofollow(d.as_raw_fd(), c"l").unwrap();
        assert_eq!(l.st_mode & libc::S_IFMT, libc::S_IFLNK);
        let e = super::fstatat_nofollow(d.as_raw_fd(), c"missing").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        let sx = super::statx_fd(f.as_fd(), libc::STATX_INO | libc::STATX_SIZE).unwrap();
        assert_eq!((sx.stx_ino, sx.stx_size), (m.ino(), 5));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
