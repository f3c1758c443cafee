//! `fragkit scratch`: destroy only what fragkit provably made; a failed create leaves
//! nothing behind.

use crate::common;

use std::path::{Path, PathBuf};

use common::*;

fn is_mounted(mp: &Path) -> bool {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let want = mp.to_string_lossy();
    text.lines().any(|l| l.split(' ').nth(4) == Some(&*want))
}

/// `scratch create` of a 64 MiB ext4 in `dir` with `extra` arguments: its JSON.
fn create_ext4(dir: &Path, extra: &[&str]) -> serde_json::Value {
    let dir = dir.to_string_lossy();
    let mut args = vec![
        "scratch", "create", "--fs", "ext4", "--size", "64M", "--dir", &dir, "--format", "json",
    ];
    args.extend_from_slice(extra);
    let out = fragkit(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Destroy must fail with one line, and touch nothing.
fn refused(mp: &Path, victim: &Path) -> String {
    let out = fragkit(&["scratch", "destroy", &mp.to_string_lossy()]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_ne!(
        out.status.code(),
        Some(0),
        "forged destroy succeeded: {err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("refusing"), "{err}");
    assert!(victim.exists(), "{} was deleted: {err}", victim.display());
    err
}

#[test]
fn destroy_refuses_forged_markers() {
    require_root();
    let top = tempfile::tempdir().unwrap();
    let victim = top.path().join("precious.img");
    std::fs::write(&victim, b"keep me").unwrap();

    // A real scratch file system, to borrow its loop device and marker.
    let real_dir = top.path().join("real");
    let info = create_ext4(&real_dir, &[]);
    let real_mp = PathBuf::from(info["mountpoint"].as_str().unwrap());
    let real_image = PathBuf::from(info["image"].as_str().unwrap());
    let marker = real_dir
        .canonicalize()
        .unwrap()
        .join("fragkit-scratch.json");
    let genuine = std::fs::read_to_string(&marker).unwrap();

    // 1. A hand-written marker naming any file, beside an empty directory.
    let forged = top.path().join("forged");
    std::fs::create_dir_all(forged.join("mnt")).unwrap();
    let forged = forged.canonicalize().unwrap();
    let mut fake = info.clone();
    fake["dir"] = forged.to_string_lossy().into();
    fake["mountpoint"] = forged.join("mnt").to_string_lossy().into();
    fake["image"] = victim.to_string_lossy().into();
    std::fs::write(forged.join("fragkit-scratch.json"), fake.to_string()).unwrap();
    refused(&forged.join("mnt"), &victim);

    // 2. The same with the image inside the directory and a tmpfs mounted there.
    let inside = forged.join("ext4.img");
    std::fs::write(&inside, b"not fragkit's").unwrap();
    fake["image"] = inside.to_string_lossy().into();
    std::fs::write(forged.join("fragkit-scratch.json"), fake.to_string()).unwrap();
    nix::mount::mount(
        Some("tmpfs"),
        &forged.join("mnt"),
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        Some("size=1m"),
    )
    .unwrap();
    let err = refused(&forged.join("mnt"), &inside);
    assert!(is_mounted(&forged.join("mnt")), "{err}");
    nix::mount::umount2(&forged.join("mnt"), nix::mount::MntFlags::MNT_DETACH).unwrap();

    // 3. The genuine marker edited to name another file in the scratch directory.
    let other = real_dir.canonicalize().unwrap().join("other.img");
    std::fs::write(&other, b"x").unwrap();
    let mut edited: serde_json::Value = serde_json::from_str(&genuine).unwrap();
    edited["image"] = other.to_string_lossy().into();
    std::fs::write(&marker, edited.to_string()).unwrap();
    refused(&real_mp, &other);
    assert!(is_mounted(&real_mp));

    // 4. The genuine marker with another id: the UUID on the device does not match.
    let mut edited: serde_json::Value = serde_json::from_str(&genuine).unwrap();
    edited["id"] = "00000000-0000-4000-8000-000000000000".into();
    std::fs::write(&marker, edited.to_string()).unwrap();
    let err = refused(&real_mp, &real_image);
    assert!(err.contains("UUID"), "{err}");
    assert!(is_mounted(&real_mp));

    // The genuine marker: destroyed, directory and all (fragkit made it).
    std::fs::remove_file(&other).unwrap();
    std::fs::write(&marker, &genuine).unwrap();
    let out = fragkit(&["scratch", "destroy", &real_mp.to_string_lossy()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!is_mounted(&real_mp));
    assert!(!real_dir.exists());
    assert!(victim.exists());
}

#[test]
fn failed_create_leaves_no_dir() {
    require_root();
    let top = tempfile::tempdir().unwrap();
    for (extra, named) in [
        (&["--size", "17179869183G"][..], "8 EiB"),
        (
            &["--size", "64M", "--mkfs-args", "--no-such-option"][..],
            "mkfs",
        ),
    ] {
        let dir = top.path().join("new");
        let mut args = vec!["scratch", "create", "--fs", "ext4"];
        args.extend_from_slice(extra);
        let d = dir.to_string_lossy().to_string();
        args.extend_from_slice(&["--dir", &d]);
        let out = fragkit(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(named), "{args:?}: {err}");
        assert!(!dir.exists(), "{args:?} left {} behind", dir.display());
    }
}

/// The mount options of `mp` (the per-mount and the per-superblock ones together).
fn mount_options(mp: &Path) -> String {
    let mounts = fragkit::sys::mountinfo::read().unwrap();
    let m = mounts
        .iter()
        .find(|m| m.mountpoint == mp)
        .unwrap_or_else(|| panic!("{} not mounted", mp.display()));
    format!("{},{}", m.options, m.super_options)
}

#[test]
fn a_clone_is_mounted_with_its_sources_options() {
    require_root();
    let top = tempfile::tempdir().unwrap();
    let info = create_ext4(&top.path().join("src"), &["--mount-options", "nodelalloc"]);
    let mp = PathBuf::from(info["mountpoint"].as_str().unwrap());
    assert_eq!(info["mount_options"], "nodelalloc");
    let out = fragkit(&[
        "scratch",
        "clone",
        &mp.to_string_lossy(),
        "--dir",
        &top.path().join("copy").to_string_lossy(),
        "--format",
        "json",
    ]);
    let ok = out.status.success();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let copy = ok.then(|| {
        let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        PathBuf::from(c["mountpoint"].as_str().unwrap())
    });
    let (source_opts, copy_opts) = (
        mount_options(&mp),
        copy.as_deref().map(mount_options).unwrap_or_default(),
    );
    for m in copy.iter().chain([&mp]) {
        let d = fragkit(&["scratch", "destroy", &m.to_string_lossy()]);
        assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
    }
    assert!(ok, "{err}");
    assert!(source_opts.contains("nodelalloc"), "{source_opts}");
    assert!(
        copy_opts.contains("nodelalloc"),
        "the clone lost nodelalloc: {copy_opts}"
    );
}

/// A loop device keeps a written max_sectors_kb across detach and attach; a new scratch
/// file system on it gets the kernel's default back.
#[test]
fn a_new_scratch_does_not_inherit_a_stale_request_limit() {
    require_root();
    let top = tempfile::tempdir().unwrap();
    let queue = |info: &serde_json::Value| {
        let dev = PathBuf::from(info["loop_device"].as_str().unwrap());
        PathBuf::from(format!(
            "/sys/block/{}/queue",
            dev.file_name().unwrap().to_string_lossy()
        ))
    };
    let read = |p: PathBuf| std::fs::read_to_string(p).unwrap().trim().to_string();
    let first = create_ext4(&top.path().join("a"), &[]);
    let default = read(queue(&first).join("max_sectors_kb"));
    std::fs::write(queue(&first).join("max_sectors_kb"), "256").unwrap();
    let mp = first["mountpoint"].as_str().unwrap();
    assert!(fragkit(&["scratch", "destroy", mp]).status.success());
    let second = create_ext4(&top.path().join("b"), &[]);
    let now = read(queue(&second).join("max_sectors_kb"));
    let (same, stale) = (
        second["loop_device"] == first["loop_device"],
        read(queue(&first).join("max_sectors_kb")),
    );
    // Put a device another test took meanwhile back as well.
    if !same {
        let _ = std::fs::write(queue(&first).join("max_sectors_kb"), "0");
    }
    let mp = second["mountpoint"].as_str().unwrap();
    assert!(fragkit(&["scratch", "destroy", mp]).status.success());
    if same {
        assert_eq!(now, default, "the scratch kept the stale 256 KiB limit");
    } else {
        eprintln!("another test took the loop device meanwhile (it had {stale})");
    }
}
