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

/// (dev, ino) of every swap file in use (/proc/swaps).
fn active_swap_files() -> HashSet<(u64, u64)> {
    let Ok(text) = std::fs::read_to_string("/proc/swaps") else {
        return HashSet::new();
    };
    text.lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|p| std::fs::metadata(unescape(p)).ok())
        .filter(|m| m.file_type().is_file())
        .map(|m| (m.dev(), m.ino()))
        .collect()
}

fn unescape(p: &str) -> String {
    p.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\134", "\\")
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
