//! Block allocation on an open file: fallocate(2), wrapped once for `age` (building
//! layouts) and `defrag` (donor files, the rewrite migrator).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// fallocate(2) with `mode` (0 = allocate, or FALLOC_FL_* flags).
fn fallocate(f: &File, mode: libc::c_int, offset: u64, len: u64) -> io::Result<()> {
    // SAFETY: plain fallocate(2) on an open fd.
    let rc = unsafe { libc::fallocate(f.as_raw_fd(), mode, offset as i64, len as i64) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Allocate (unwritten) blocks under [offset, offset+len), growing the file if needed.
pub fn allocate(f: &File, offset: u64, len: u64) -> io::Result<()> {
    fallocate(f, 0, offset, len)
}

/// Free the blocks under [offset, offset+len) without changing the file size.
pub fn punch_hole(f: &File, offset: u64, len: u64) -> io::Result<()> {
    fallocate(
        f,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        offset,
        len,
    )
}
