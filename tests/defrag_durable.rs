//! Durable results: a power cut right after `defrag` exits (FS_IOC_SHUTDOWN with
//! FS_GOING_DOWN_NOLOGFLUSH: the log is not flushed, as when power fails) must not bring
//! the old layout back on ext4 and xfs; the data must read the same after remounting.
//! (Before defrag fsynced each changed file, 2 of 2 such cuts lost the new layout.)

mod common;

use std::os::fd::AsRawFd;
use std::process::Command;

use common::*;
use fragkit::scratch::FsType;

/// FS_IOC_SHUTDOWN = _IOR('X', 125, __u32) (include/uapi/linux/fs.h).
const FS_IOC_SHUTDOWN: libc::c_ulong =
    nix::request_code_read!(b'X', 125, std::mem::size_of::<u32>()) as libc::c_ulong;
/// FS_GOING_DOWN_NOLOGFLUSH: shut down without flushing the log.
const FS_GOING_DOWN_NOLOGFLUSH: u32 = 2;

/// A scratch file system holding a.db fragmented into 16 KiB pieces. The filler that cuts
/// free space into holes can come up short (xfs frees deleted files' blocks in the
/// background, and its per-AG reserve ends fallocate early), leaving the file nearly
/// contiguous (once: 2 fragments, nothing for the power cut to undo): such a set-up is
/// made again, at most three times.
fn fragmented_file(fs: FsType) -> (fragkit::scratch::Scratch, std::path::PathBuf) {
    for _ in 0..3 {
        let s = scratch(
            fs,
            320 << 20,
            if fs == FsType::Ext4 {
                &["-m", "0"]
            } else {
                &[]
            },
        );
        let a = s.mountpoint().join("a.db");
        fill_punch_fragment(&s, &a, 4 << 20, 16 << 10);
        let doc = fragkit_json(&["scan", "--format", "json", &a.to_string_lossy()]);
        // 4 MiB in 16 KiB pieces: 256 when every hole was used; a quarter of that will do.
        if doc["files"][0]["fragments"].as_u64().unwrap() >= 64 {
            return (s, a);
        }
        s.destroy().unwrap();
    }
    panic!(
        "{}: three tries left a.db with fewer than 64 fragments",
        fs.name()
    );
}

fn survives_power_cut(fs: FsType) {
    let (s, a) = fragmented_file(fs);
    let path = a.to_string_lossy().to_string();
    let hash = file_hash(&a);
    // Everything before the defrag is on disk: only the defrag's own work is at stake.
    nix::unistd::sync();
    let report = fragkit_json(&["defrag", "--mode", "bypass", "--format", "json", &path]);
    assert!(
        report["summary"]["ranges_moved"].as_u64().unwrap() > 0,
        "{report}"
    );
    let moved = report["files"][0].clone();
    let (frags, split) = (&moved["fragments_after"], &moved["split_after"]);
    assert!(
        frags.as_u64() < moved["fragments_before"].as_u64(),
        "{moved}"
    );
    // Cut the power at once.
    let dir = std::fs::File::open(s.mountpoint()).unwrap();
    let mut flags = FS_GOING_DOWN_NOLOGFLUSH;
    // SAFETY: FS_IOC_SHUTDOWN reads one u32.
    let rc = unsafe { libc::ioctl(dir.as_raw_fd(), FS_IOC_SHUTDOWN as _, &mut flags) };
    assert_eq!(
        rc,
        0,
        "FS_IOC_SHUTDOWN: {}",
        std::io::Error::last_os_error()
    );
    drop(dir);
    let mp = s.mountpoint().to_path_buf();
    let dev = s.info.loop_device.clone();
    assert!(Command::new("umount").arg(&mp).status().unwrap().success());
    let mut mount = Command::new("mount");
    if fs == FsType::Xfs {
        mount.args(["-o", "nouuid"]);
    }
    assert!(mount.arg(&dev).arg(&mp).status().unwrap().success());
    let doc = fragkit_json(&["scan", "--format", "json", &path]);
    let f = &doc["files"][0];
    assert_eq!(
        (&f["fragments"], &f["requests"][0]["split"]),
        (frags, split),
        "{}: the layout defrag reported did not survive the power cut",
        fs.name()
    );
    drop_caches();
    assert_eq!(file_hash(&a), hash, "{}: contents changed", fs.name());
}

#[test]
fn survives_power_cut_ext4() {
    survives_power_cut(FsType::Ext4);
}

#[test]
fn survives_power_cut_xfs() {
    survives_power_cut(FsType::Xfs);
}
