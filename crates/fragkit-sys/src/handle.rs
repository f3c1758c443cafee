//! open_by_handle_at(2): a file by its file handle (struct file_handle), on the file
//! system a mount descriptor is on. Needs CAP_DAC_READ_SEARCH.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// struct file_handle's header (include/linux/fs.h, uapi/linux/fcntl.h): u32 handle_bytes,
/// i32 handle_type; f_handle's bytes follow.
const HEADER_LEN: usize = 8;

/// A struct file_handle as bytes: `f_handle` (a file system's encoding, e.g. exportfs's
/// FILEID_INO32_GEN) under its length and `handle_type`.
pub fn file_handle(handle_type: i32, f_handle: &[u8]) -> Vec<u8> {
    let mut h = Vec::with_capacity(HEADER_LEN + f_handle.len());
    h.extend_from_slice(&(f_handle.len() as u32).to_ne_bytes());
    h.extend_from_slice(&handle_type.to_ne_bytes());
    h.extend_from_slice(f_handle);
    h
}

/// open_by_handle_at(mount, handle, flags): `handle` is a struct file_handle as bytes (as
/// fanotify reports it, or from [`file_handle`]). EINVAL if it is shorter than its
/// handle_bytes says; ESTALE if the file is gone.
pub fn open_by_handle_at(
    mount: BorrowedFd<'_>,
    handle: &[u8],
    flags: libc::c_int,
) -> io::Result<OwnedFd> {
    let declared = handle
        .get(..4)
        .map(|b| u32::from_ne_bytes(b.try_into().unwrap()) as usize);
    if declared.is_none_or(|n| handle.len() < HEADER_LEN + n) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // struct file_handle must be 4-byte aligned: copy into a u32 buffer.
    let mut aligned = vec![0u32; handle.len().div_ceil(4)];
    // SAFETY: `aligned` has at least handle.len() bytes and does not overlap `handle`.
    unsafe {
        std::ptr::copy_nonoverlapping(
            handle.as_ptr(),
            aligned.as_mut_ptr().cast::<u8>(),
            handle.len(),
        )
    };
    // SAFETY: `aligned` holds a whole struct file_handle (header and the handle_bytes it
    // declares, checked above), aligned, alive for the call; `mount` is borrowed, so open.
    let fd = unsafe {
        libc::open_by_handle_at(
            mount.as_raw_fd(),
            aligned.as_mut_ptr().cast::<libc::file_handle>(),
            flags,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor from open_by_handle_at, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    #[test]
    fn a_handle_shorter_than_it_says_is_refused() {
        let root = std::fs::File::open("/").unwrap();
        let mut h = super::file_handle(1, &[0; 8]);
        assert_eq!(h.len(), 16);
        h.truncate(12);
        let e = super::open_by_handle_at(root.as_fd(), &h, libc::O_PATH).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
        let e = super::open_by_handle_at(root.as_fd(), &[0; 3], libc::O_PATH).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    }
}
