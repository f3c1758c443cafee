//! Paths the watch cannot follow (a directory it may not read, a path longer than the
//! kernel takes): each is named once on stderr, whichever part of the watch met it (the
//! change source or the engine's walks), and the watch goes on without it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

static SKIPPED: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// Say once that `path` is skipped, and why.
pub(crate) fn skip(path: &Path, why: &str) {
    let mut set = SKIPPED.lock().unwrap_or_else(|e| e.into_inner());
    if set
        .get_or_insert_with(HashSet::new)
        .insert(path.to_path_buf())
    {
        fragkit_sys::stderr_line!(
            "fragkit: {}: skipped, not watched ({}); watching goes on",
            fragkit_core::units::printable(&path.to_string_lossy()),
            fragkit_core::units::printable(why)
        );
    }
}

/// The words for a path the kernel refuses as too long.
pub(crate) fn too_long(path: &Path) -> String {
    format!(
        "its path is {} bytes, longer than the kernel takes",
        path.as_os_str().len()
    )
}

/// The shortest leading part of `path` (itself or an ancestor) that the kernel refuses as
/// a path (PATH_MAX bytes with its NUL), if any: what is skipped when `path` is met.
pub(crate) fn too_long_prefix(path: &Path) -> Option<&Path> {
    if path.as_os_str().len() < libc::PATH_MAX as usize {
        return None;
    }
    let mut first = path;
    for a in path.ancestors() {
        if a.as_os_str().len() < libc::PATH_MAX as usize {
            break;
        }
        first = a;
    }
    Some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_too_long_ancestor_is_named() {
        let d = "d".repeat(200);
        let mut p = PathBuf::from("/t");
        for _ in 0..26 {
            p.push(&d);
        }
        p.push("f");
        let first = too_long_prefix(&p).unwrap();
        assert!(first.as_os_str().len() >= 4096, "{}", first.display());
        assert!(first.parent().unwrap().as_os_str().len() < 4096);
        assert!(p.starts_with(first));
        assert_eq!(too_long_prefix(Path::new("/t/f")), None);
    }
}
