//! A directory's entries: readdir(3) (getdents64 underneath) on a duplicate of an open
//! directory's descriptor, names and d_type only (no stat per entry).

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};
use std::ptr::NonNull;

/// A DIR* from fdopendir, closed (with its descriptor) on drop.
struct Dir(NonNull<libc::DIR>);

impl Drop for Dir {
    fn drop(&mut self) {
        // SAFETY: the DIR* came from fdopendir and is closed only here, once; closedir also
        // closes the descriptor it was opened on.
        unsafe { libc::closedir(self.0.as_ptr()) };
    }
}

/// A stream over a duplicate of `dir` (fdopendir takes ownership of the descriptor it is
/// given): `dir` stays open, but shares its file offset with the duplicate, so reading
/// moves it on.
fn open_dup(dir: BorrowedFd<'_>) -> io::Result<Dir> {
    // SAFETY: F_DUPFD_CLOEXEC of a descriptor borrowed, so open, for the call.
    let dup = unsafe { libc::fcntl(dir.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor from fcntl, owned by nobody else.
    let dup = unsafe { OwnedFd::from_raw_fd(dup) };
    // SAFETY: fdopendir on a directory descriptor we own; on success the DIR* owns it.
    let dirp = unsafe { libc::fdopendir(dup.as_raw_fd()) };
    match NonNull::new(dirp) {
        Some(dirp) => {
            // Closed by closedir from here on.
            let _ = dup.into_raw_fd();
            Ok(Dir(dirp))
        }
        None => Err(io::Error::last_os_error()), // `dup` is still ours and closes here
    }
}

/// Call `f(name, d_type)` for every entry of the directory open at `dir`, "." and ".."
/// left out, in the order the file system returns them. `d_type` is `libc::DT_*`
/// (DT_UNKNOWN where the file system does not fill it in). The first error, from readdir
/// or from `f`, ends the listing and is returned.
///
/// The listing starts at `dir`'s file offset and leaves it where it ended: list a freshly
/// opened directory descriptor once.
pub fn for_each_entry<F>(dir: BorrowedFd<'_>, mut f: F) -> io::Result<()>
where
    F: FnMut(&CStr, u8) -> io::Result<()>,
{
    let dirp = open_dup(dir)?;
    loop {
        // readdir signals errors only through errno, so clear it first.
        nix::errno::Errno::clear();
        // SAFETY: `dirp` is an open DIR*; the entry it returns stays valid until the next
        // readdir or closedir on it, and is only read before either.
        let ent = unsafe { libc::readdir64(dirp.0.as_ptr()) };
        if ent.is_null() {
            let errno = nix::errno::Errno::last_raw();
            if errno != 0 {
                return Err(io::Error::from_raw_os_error(errno));
            }
            return Ok(());
        }
        // SAFETY: d_name is NUL-terminated within the entry.
        let (name, dtype) = unsafe { (CStr::from_ptr((*ent).d_name.as_ptr()), (*ent).d_type) };
        if matches!(name.to_bytes(), b"." | b"..") {
            continue;
        }
        f(name, dtype)?;
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    #[test]
    fn lists_names_and_types_without_dots() {
        let dir = std::env::temp_dir().join(format!("fragkit-dirent-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("file"), b"x").unwrap();
        let d = std::fs::File::open(&dir).unwrap();
        let mut seen = Vec::new();
        super::for_each_entry(d.as_fd(), |name, dtype| {
            seen.push((name.to_bytes().to_vec(), dtype));
            Ok(())
        })
        .unwrap();
        seen.sort();
        // tmpfs and the usual disk file systems all fill d_type in.
        assert_eq!(
            seen,
            [
                (b"file".to_vec(), libc::DT_REG),
                (b"sub".to_vec(), libc::DT_DIR)
            ]
        );
        // An error from the callback ends the listing and comes back.
        // The caller's descriptor is still open, its offset at the end of the listing.
        assert!(d.metadata().unwrap().is_dir());
        super::for_each_entry(d.as_fd(), |_, _| panic!("listed twice")).unwrap();
        // An error from the callback ends the listing and comes back.
        let d = std::fs::File::open(&dir).unwrap();
        let e = super::for_each_entry(d.as_fd(), |_, _| Err(std::io::Error::other("stop")))
            .unwrap_err();
        assert_eq!(e.to_string(), "stop");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
