//! `fragkit scan --format filefrag ARGS...` against `filefrag -v ARGS...` on real loop-mounted
//! file systems: stdout, stderr and the exit status must be identical for every argument
//! list of a table (argument order, missing paths, symlinks, repeats, directories, devices,
//! FIFOs, inline data, block-mapped ext files, sparse, unwritten, shared and many-extent
//! files, tmpfs without FIEMAP, and a user without FIBMAP rights).

use crate::common;

use std::fs::OpenOptions;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;
use fragkit::scratch::FsType;

/// The same files on every file system (what one cannot hold, e.g. unwritten extents on a
/// block-mapped ext4, is simply absent or empty there, for both tools alike).
fn populate(dir: &Path) {
    let p = |n: &str| dir.join(n);
    write_file(&p("small"), 6, 1); // inline on ext4 -O inline_data and btrfs
    write_file(&p("mid"), 200_000, 2);
    write_file(&p("empty"), 0, 0);
    let sparse = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(p("sparse"))
        .unwrap();
    sparse.write_all_at(&[7u8; 8192], 0).unwrap();
    sparse.write_all_at(&[8u8; 4096], 1 << 30).unwrap();
    sparse.set_len(10 << 30).unwrap();
    sparse.sync_all().unwrap();
    // Unwritten (preallocated) extents; block-mapped ext files cannot have them.
    let unwr = std::fs::File::create(p("unwritten")).unwrap();
    // SAFETY: fallocate(2) on an open fd.
    unsafe { libc::fallocate(std::os::fd::AsRawFd::as_raw_fd(&unwr), 0, 0, 1 << 20) };
    // More extents than filefrag asks FIEMAP for in one call (292): every other 1 KiB block.
    let many = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(p("many"))
        .unwrap();
    for i in 0..700u64 {
        many.write_all_at(&[9u8; 4096], i * 8192).unwrap();
    }
    many.sync_all().unwrap();
    std::os::unix::fs::symlink("mid", p("link")).unwrap();
    std::fs::create_dir(p("dir")).unwrap();
    nix::unistd::mkfifo(&p("fifo"), nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    nix::sys::stat::mknod(
        &p("null"),
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::from_bits_truncate(0o666),
        nix::sys::stat::makedev(1, 3),
    )
    .unwrap();
    // A reflinked copy where the file system shares extents (xfs, btrfs).
    let _ = Command::new("cp")
        .arg("--reflink=always")
        .arg(p("mid"))
        .arg(p("shared"))
        .stderr(std::process::Stdio::null())
        .status();
    nix::unistd::sync();
}

fn run(cmd: &mut Command, as_nobody: bool) -> Output {
    if as_nobody {
        let prog = cmd.get_program().to_owned();
        let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(prog)
            .args(args)
            .output()
            .unwrap()
    } else {
        cmd.output().unwrap()
    }
}

/// Both tools over `args`; a description of every difference.
fn differences(args: &[PathBuf], as_nobody: bool) -> Option<String> {
    // Warm the kernel's extent cache first: ext4 splits a block-mapped file's first FIEMAP
    // after a cold cache at the 12 direct blocks, and merges them on every later call.
    let _ = Command::new("filefrag").arg("-v").args(args).output();
    let ours = run(
        Command::new(env!("CARGO_BIN_EXE_fragkit"))
            .args(["scan", "--format", "filefrag"])
            .args(args),
        as_nobody,
    );
    let theirs = run(Command::new("filefrag").arg("-v").args(args), as_nobody);
    let mut d = String::new();
    // fragkit keeps its own 0/1/2 rule: 1 exactly where filefrag exits with an errno.
    let expected = theirs.status.code().map(|c| if c == 0 { 0 } else { 1 });
    if ours.status.code() != expected {
        d += &format!(
            "exit status: fragkit {:?}, filefrag {:?} (fragkit should be 1 where filefrag fails)\n",
            ours.status.code(),
            theirs.status.code()
        );
    }
    for (what, a, b) in [
        ("stdout", &ours.stdout, &theirs.stdout),
        ("stderr", &ours.stderr, &theirs.stderr),
    ] {
        if a != b {
            d += &format!(
                "{what}:\n--- fragkit\n{}--- filefrag\n{}",
                String::from_utf8_lossy(a),
                String::from_utf8_lossy(b)
            );
        }
    }
    (!d.is_empty()).then_some(d)
}

#[test]
fn scan_format_filefrag_equals_filefrag_v() {
    let ext4 = scratch(FsType::Ext4, 256 << 20, &[]);
    let inline = scratch(FsType::Ext4, 256 << 20, &["-O", "inline_data"]);
    // ext2/ext3-style block maps (no extents): filefrag's "cylinder groups" case.
    let blockmap = scratch(FsType::Ext4, 256 << 20, &["-O", "^extent,^64bit"]);
    let xfs = scratch(FsType::Xfs, 320 << 20, &[]);
    let btrfs = scratch(FsType::Btrfs, 256 << 20, &[]);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    nix::mount::mount(
        Some("tmpfs"),
        tmp.path(),
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        Some("size=64m,mode=755"),
    )
    .unwrap();
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = nix::mount::umount2(self.0, nix::mount::MntFlags::MNT_DETACH);
        }
    }
    let _unmount = Unmount(tmp.path());

    let mounts: Vec<(&str, PathBuf)> = vec![
        ("ext4", ext4.mountpoint().to_path_buf()),
        ("ext4 inline_data", inline.mountpoint().to_path_buf()),
        ("ext4 block-mapped", blockmap.mountpoint().to_path_buf()),
        ("xfs", xfs.mountpoint().to_path_buf()),
        ("btrfs", btrfs.mountpoint().to_path_buf()),
        ("tmpfs", tmp.path().to_path_buf()),
    ];
    for (_, m) in &mounts {
        populate(m);
    }

    let per_fs: &[&[&str]] = &[
        &[
            "small",
            "mid",
            "empty",
            "sparse",
            "unwritten",
            "many",
            "shared",
        ],
        &["many", "small", "mid"], // argument order, not sorted
        &["mid", "missing", "small", "missing2"], // missing in the middle and at the end
        &["link", "mid", "mid", "link"], // symlinks followed, repeats repeated
        &["dir", "."],             // directories as their own inodes
        &["null", "fifo", "small"], // a device node and a FIFO on the fs
        &["missing"],
    ];
    let mut cases: Vec<(String, Vec<PathBuf>, bool)> = Vec::new();
    for (fs, m) in &mounts {
        for args in per_fs {
            cases.push((
                format!("{fs} {args:?}"),
                args.iter().map(|a| m.join(a)).collect(),
                false,
            ));
        }
    }
    let at = |i: usize, f: &str| mounts[i].1.join(f);
    // Across file systems: the "Filesystem type" line each time the device changes.
    cases.push((
        "across file systems".into(),
        vec![
            at(0, "mid"),
            at(3, "mid"),
            at(0, "small"),
            at(4, "small"),
            "/dev/null".into(),
            at(5, "mid"),
            at(2, "mid"),
        ],
        false,
    ));
    // The cylinder-group line comes only with the first file of a device, when that file
    // has no extent tree (inline data here).
    cases.push((
        "inline first".into(),
        vec![at(1, "small"), at(1, "mid"), at(1, "dir")],
        false,
    ));
    cases.push((
        "inline later".into(),
        vec![at(1, "mid"), at(1, "small")],
        false,
    ));
    // A name that is not UTF-8 is printed as its bytes.
    let odd = std::ffi::OsStr::from_bytes(b"odd-\xff-name");
    std::fs::copy(at(0, "mid"), mounts[0].1.join(odd)).unwrap();
    std::fs::copy(at(5, "mid"), mounts[5].1.join(odd)).unwrap();
    cases.push((
        "a name that is not UTF-8".into(),
        vec![mounts[0].1.join(odd), mounts[5].1.join(odd)],
        false,
    ));
    cases.push((
        "character devices".into(),
        vec!["/dev/null".into(), "/dev/zero".into()],
        false,
    ));
    // Without CAP_SYS_RAWIO, FIBMAP (filefrag's fallback where FIEMAP is missing) is refused.
    cases.push((
        "tmpfs as nobody".into(),
        vec![at(5, "small"), at(5, "empty"), at(0, "mid")],
        true,
    ));

    // filefrag's open(2) of a FIFO waits for a writer (fragkit's does not): hold each FIFO
    // open read-write so both tools see the same, writer-present FIFO.
    let _writers: Vec<std::fs::File> = mounts
        .iter()
        .map(|(_, m)| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .open(m.join("fifo"))
                .unwrap()
        })
        .collect();
    let mut failures = Vec::new();
    for (name, args, nobody) in &cases {
        if let Some(d) = differences(args, *nobody) {
            failures.push(format!("== {name}\n{d}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} argument lists differ from filefrag -v:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// The other formats: a path that cannot be scanned is reported on stderr and counted,
/// the rest is still scanned (symlinks named followed), and the exit status is 1.
#[test]
fn scan_reports_missing_paths_and_scans_the_rest() {
    let s = scratch(FsType::Ext4, 128 << 20, &[]);
    let m = s.mountpoint();
    write_file(&m.join("a"), 100_000, 1);
    std::fs::create_dir(m.join("d")).unwrap();
    write_file(&m.join("d/b"), 100_000, 2);
    // Symlinks named on the command line are followed, to a file and to a directory.
    std::os::unix::fs::symlink("a", m.join("link-a")).unwrap();
    std::os::unix::fs::symlink("d", m.join("link-d")).unwrap();
    let missing = m.join("missing");
    let out = fragkit(&[
        "scan",
        "--format",
        "json",
        &missing.to_string_lossy(),
        &m.join("link-a").to_string_lossy(),
        &m.join("link-d").to_string_lossy(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim_end(),
        format!("fragkit: {}: no such file or directory", missing.display())
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["summary"]["files"], 2, "{doc}");
    assert_eq!(doc["summary"]["errors"], 1, "{doc}");
    assert_eq!(
        doc["summary"]["error_list"][0]["path"],
        missing.to_string_lossy().as_ref()
    );
}
