//! What defrag refuses to touch, and why.

use std::collections::HashSet;
use std::fs::File;
use std::os::unix::fs::MetadataExt;

use fragkit_sys::inode::{self, FS_APPEND_FL, FS_IMMUTABLE_FL};

/// Why a file must not be defragmented, if it must not.
pub(crate) fn refusal(file: &File) -> Option<String> {
    if let Ok(flags) = inode::flags(file) {
        if flags & FS_IMMUTABLE_FL != 0 {
            return Some("immutable file (chattr +i): not touched".into());
        }
        if flags & FS_APPEND_FL != 0 {
            return Some("append-only file (chattr +a): not touched".into());
        }
    }
    let meta = file.metadata().ok()?;
    if active_swap_files().contains(&(meta.dev(), meta.ino())) {
        return Some("active swap file: not touched".into());
    }
    None
}

/// (dev, ino) of every swap file in use (/proc/swaps). A file enabled from another mount
/// namespace may not resolve here; the writable open is refused by the kernel then
/// (ETXTBSY), which the caller reports as well.
fn active_swap_files() -> HashSet<(u64, u64)> {
    let Ok(text) = std::fs::read("/proc/swaps") else {
        return HashSet::new();
    };
    text.split(|&b| b == b'\n')
        .skip(1)
        .filter_map(|l| l.split(|b| b.is_ascii_whitespace()).find(|f| !f.is_empty()))
        .filter_map(|p| std::fs::metadata(unescape(p)).ok())
        .filter(|m| m.file_type().is_file())
        .map(|m| (m.dev(), m.ino()))
        .collect()
}

/// /proc/swaps writes a path with seq_file's octal escapes (`\ooo` for space, tab, newline
/// and backslash): every such escape is decoded, other bytes kept as they are (names need
/// not be UTF-8).
fn unescape(b: &[u8]) -> std::path::PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let escape = b
            .get(i + 1..i + 4)
            .filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .map(|d| d.iter().fold(0u16, |v, c| v * 8 + u16::from(c - b'0')))
            .and_then(|v| u8::try_from(v).ok());
        match escape {
            Some(byte) => {
                out.push(byte);
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    std::path::PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// (dev, ino) of files some other process has open for writing, from /proc/*/fd.
pub(crate) fn files_open_for_write() -> HashSet<(u64, u64)> {
    let me = std::process::id().to_string();
    let mut out = HashSet::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let pid = p.file_name();
        let pid = pid.to_string_lossy();
        if !pid.bytes().all(|b| b.is_ascii_digit()) || pid == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let info = p.path().join("fdinfo").join(fd.file_name());
            let Ok(text) = std::fs::read_to_string(info) else {
                continue;
            };
            // fdinfo "flags:" is octal open(2) flags; O_WRONLY=1, O_RDWR=2.
            let writable = text
                .lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
                .is_some_and(|f| f & 3 != 0);
            if writable {
                if let Ok(m) = std::fs::metadata(fd.path()) {
                    if m.file_type().is_file() {
                        out.insert((m.dev(), m.ino()));
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::unescape;

    #[test]
    fn proc_swaps_escapes_are_decoded() {
        let p = |s: &str| std::path::PathBuf::from(s);
        assert_eq!(unescape(b"/a\\040b\\011c\\012d\\134e"), p("/a b\tc\nd\\e"));
        assert_eq!(unescape(b"/plain"), p("/plain"));
        // Not escapes: kept as they are (a short tail, a non-octal digit, past 0o377).
        assert_eq!(unescape(b"/x\\9"), p("/x\\9"));
        assert_eq!(unescape(b"/x\\12"), p("/x\\12"));
        assert_eq!(unescape(b"/x\\777"), p("/x\\777"));
    }
}
