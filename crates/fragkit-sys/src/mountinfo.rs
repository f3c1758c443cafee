//! /proc/self/mountinfo, parsed once (proc_pid_mountinfo(5)):
//! "id parent MAJ:MIN root mountpoint opts [optional...] - fstype source superopts".

use std::io;
use std::path::{Path, PathBuf};

/// One mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// st_dev of files on it, as (major, minor) (btrfs: the anonymous superblock device).
    pub major: u32,
    pub minor: u32,
    /// Path inside the file system that is mounted here ("/" for the whole file system).
    pub root: String,
    pub mountpoint: PathBuf,
    /// Per-mount options ("rw,relatime").
    pub options: String,
    pub fstype: String,
    pub source: String,
    /// Superblock options.
    pub super_options: String,
}

impl Mount {
    /// "MAJ:MIN", as mountinfo writes it.
    pub fn dev_string(&self) -> String {
        format!("{}:{}", self.major, self.minor)
    }
}

/// The mounts of this process's mount namespace, in mount order.
pub fn read() -> io::Result<Vec<Mount>> {
    Ok(parse(&std::fs::read_to_string("/proc/self/mountinfo")?))
}

/// Parse mountinfo text; malformed lines are skipped.
pub fn parse(text: &str) -> Vec<Mount> {
    let mut out = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        if dash < 6 || fields.len() < dash + 3 {
            continue;
        }
        let Some((ma, mi)) = fields[2].split_once(':') else {
            continue;
        };
        let (Ok(major), Ok(minor)) = (ma.parse(), mi.parse()) else {
            continue;
        };
        out.push(Mount {
            major,
            minor,
            root: unescape(fields[3]),
            mountpoint: PathBuf::from(unescape(fields[4])),
            options: fields[5].to_string(),
            fstype: fields[dash + 1].to_string(),
            source: unescape(fields[dash + 2]),
            super_options: fields.get(dash + 3).copied().unwrap_or("").to_string(),
        });
    }
    out
}

/// The mount a canonical `path` lives under: the longest mount point containing it
/// (later lines are mounted on top of earlier ones at the same point, so they win ties).
pub fn containing<'a>(mounts: &'a [Mount], path: &Path) -> Option<&'a Mount> {
    let mut best: Option<&Mount> = None;
    for m in mounts {
        if path.starts_with(&m.mountpoint)
            && best.is_none_or(|b| m.mountpoint.as_os_str().len() >= b.mountpoint.as_os_str().len())
        {
            best = Some(m);
        }
    }
    best
}

/// Whether something is mounted exactly at `mountpoint`.
pub fn is_mount_point(mountpoint: &Path) -> bool {
    read().is_ok_and(|ms| ms.iter().any(|m| m.mountpoint == mountpoint))
}

/// mountinfo escapes space, tab, newline and backslash as \ooo octal.
pub fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            let octal = std::str::from_utf8(&b[i + 1..i + 4]).ok();
            if let Some(v) = octal.and_then(|t| u8::from_str_radix(t, 8).ok()) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro
40 22 7:3 / /mnt/with\\040space rw,noatime - xfs /dev/loop3 rw,attr2
41 22 0:45 /sub /mnt/b rw - btrfs /dev/loop4 rw,subvol=/sub
42 41 7:5 / /mnt/b rw - ext4 /dev/loop5 rw
garbage line
";

    #[test]
    fn parses_fields_and_unescapes() {
        let m = parse(TEXT);
        assert_eq!(m.len(), 4);
        assert_eq!((m[0].major, m[0].minor), (8, 1));
        assert_eq!(m[0].options, "rw,relatime");
        assert_eq!(m[0].fstype, "ext4");
        assert_eq!(m[0].source, "/dev/sda1");
        assert_eq!(m[0].super_options, "rw,errors=remount-ro");
        assert_eq!(m[1].mountpoint, Path::new("/mnt/with space"));
        assert_eq!(m[2].root, "/sub");
        assert_eq!(m[2].dev_string(), "0:45");
    }

    #[test]
    fn longest_and_latest_mount_wins() {
        let m = parse(TEXT);
        let c = containing(&m, Path::new("/mnt/b/x")).unwrap();
        assert_eq!(c.source, "/dev/loop5");
        let c = containing(&m, Path::new("/mnt/with space/f")).unwrap();
        assert_eq!(c.fstype, "xfs");
        let c = containing(&m, Path::new("/etc")).unwrap();
        assert_eq!(c.source, "/dev/sda1");
    }

    #[test]
    fn unescape_handles_octal_and_plain_backslash() {
        assert_eq!(unescape("a\\011b\\134c"), "a\tb\\c");
        assert_eq!(unescape("tail\\"), "tail\\");
    }
}
