//! fragkit defrag on real ext4, xfs and btrfs: it removes split requests, keeps every byte,
//! refuses what it must, and survives being killed and concurrent writers.

use crate::common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use fragkit::scratch::FsType;
use fragkit::scratch::Scratch;
use serde_json::Value;

fn scan_file(path: &Path) -> Value {
    let doc = fragkit_json(&["scan", "--format", "json", &path.to_string_lossy()]);
    doc["files"][0].clone()
}

/// Two 4 MiB files in 16 KiB fragments 16 KiB apart: every 128 KiB window is split.
/// (btrfs: interleaved O_DIRECT appends, as its allocator hands out space in write
/// order; ext4 and xfs need the fill-and-punch technique.)
fn fragmented_pair(s: &Scratch) -> (PathBuf, PathBuf) {
    let dir = s.mountpoint();
    let (a, b) = (dir.join("a.db"), dir.join("b.log"));
    if s.info.fs == "btrfs" {
        interleaved_direct_appends(&[a.clone(), b.clone()], 16 << 10, 256);
    } else {
        fill_punch_fragment(s, &a, 4 << 20, 16 << 10);
        fill_punch_fragment(s, &b, 4 << 20, 16 << 10);
    }
    (a, b)
}

fn bypass_reaches_ideal(fs: FsType, check_device: bool) {
    let s = frag_scratch(fs, 512 << 20);
    let (a, _b) = fragmented_pair(&s);
    let before = scan_file(&a);
    let req = &before["requests"][0];
    assert!(
        req["split"].as_u64() > req["ideal"].as_u64(),
        "{} file not fragmented: {req}",
        fs.name()
    );
    let hash = file_hash(&a);
    let report = fragkit_json(&[
        "defrag",
        "--mode",
        "bypass",
        "--io-size",
        "128K",
        "--format",
        "json",
        &a.to_string_lossy(),
    ]);
    let sum = &report["summary"];
    assert_eq!(sum["verify_failures"], 0, "{report}");
    assert_eq!(sum["ranges_failed"], 0, "{report}");
    assert!(sum["ranges_moved"].as_u64().unwrap() > 0, "{report}");
    let after = scan_file(&a);
    let r = &after["requests"][0];
    assert_eq!(
        r["split"],
        r["ideal"],
        "{}: S(128K) must equal I(128K) after bypass: {r}",
        fs.name()
    );
    drop_caches();
    assert_eq!(file_hash(&a), hash, "{}: contents changed", fs.name());
    if check_device {
        let split = r["split"].as_u64().unwrap();
        // O_DIRECT reads bypass the page cache; the inode and extent map are cached from
        // the hash above, so the device sees exactly the data requests.
        let reads = direct_read_requests(&s.device_name(), &a, 128 << 10);
        assert_eq!(
            reads,
            split,
            "{}: device reads vs S(128K) after bypass",
            fs.name()
        );
    }
}

#[test]
fn bypass_reaches_ideal_ext4() {
    bypass_reaches_ideal(FsType::Ext4, true);
}

#[test]
fn bypass_reaches_ideal_xfs() {
    bypass_reaches_ideal(FsType::Xfs, true);
}

#[test]
fn bypass_reaches_ideal_btrfs() {
    bypass_reaches_ideal(FsType::Btrfs, false);
}

/// full mode makes a hole-free file one fragment; dry run changes nothing; pick moves
/// only the hot range of the profile.
#[test]
fn full_dry_run_and_pick_on_ext4() {
    let s = frag_scratch(FsType::Ext4, 512 << 20);
    let (a, b) = fragmented_pair(&s);
    let (ha, hb) = (file_hash(&a), file_hash(&b));

    let before = scan_file(&b);
    let dry = fragkit_json(&[
        "defrag",
        "--dry-run",
        "--mode",
        "full",
        "--format",
        "json",
        &b.to_string_lossy(),
    ]);
    assert_eq!(dry["summary"]["bytes_moved"], 0);
    assert_eq!(dry["summary"]["ranges_planned"], 1);
    assert_eq!(
        scan_file(&b)["extents"],
        before["extents"],
        "dry run must not move anything"
    );

    // Pick: a profile that says only the first MiB of a.db is read.
    let profile = s.mountpoint().join("profile.json");
    let st = std::fs::metadata(&a).unwrap();
    use std::os::unix::fs::MetadataExt;
    std::fs::write(
        &profile,
        serde_json::json!({
            "version": 1, "kind": "fragkit-trace-profile",
            "files": [{"path": a, "dev": format!("{}:{}", libc::major(st.dev()), libc::minor(st.dev())),
                       "ino": st.ino(), "block_size": 4096,
                       "ranges": [{"offset": 0, "length": 1 << 20, "reads": 10, "writes": 0}]}]
        })
        .to_string(),
    )
    .unwrap();
    let pick = fragkit_json(&[
        "defrag",
        "--mode",
        "pick",
        "--profile",
        &profile.to_string_lossy(),
        "--format",
        "json",
        &a.to_string_lossy(),
    ]);
    assert_eq!(pick["summary"]["bytes_moved"], 1 << 20, "{pick}");
    let after = scan_file(&a);
    // The hot first MiB reads in 8 requests now; the cold rest still splits.
    let runs_in_first_mib = after["extents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["logical"].as_u64().unwrap() < 1 << 20)
        .count();
    assert!(
        runs_in_first_mib <= 8,
        "hot range still fragmented: {after}"
    );
    assert!(
        after["requests"][0]["extra"].as_u64().unwrap() > 0,
        "cold part must be left alone: {after}"
    );

    let full = fragkit_json(&[
        "defrag",
        "--mode",
        "full",
        "--format",
        "json",
        &b.to_string_lossy(),
    ]);
    assert_eq!(full["summary"]["verify_failures"], 0);
    assert_eq!(scan_file(&b)["fragments"], 1, "{full}");
    drop_caches();
    assert_eq!((file_hash(&a), file_hash(&b)), (ha, hb));
}

#[test]
fn refuses_unsafe_targets() {
    let s = frag_scratch(FsType::Ext4, 256 << 20);
    let (a, b) = fragmented_pair(&s);
    // Immutable file.
    assert!(Command::new("chattr")
        .arg("+i")
        .arg(&a)
        .status()
        .unwrap()
        .success());
    // Refused targets: exit status 1, the reason in the report.
    let r = fragkit_json_exit(&["defrag", "--format", "json", &a.to_string_lossy()], 1);
    Command::new("chattr").arg("-i").arg(&a).status().unwrap();
    assert!(
        r["files"][0]["refused"]
            .as_str()
            .unwrap()
            .contains("immutable"),
        "{r}"
    );
    assert_eq!(r["summary"]["bytes_moved"], 0);
    // A symlink named as target.
    let link = s.mountpoint().join("link");
    std::os::unix::fs::symlink(&a, &link).unwrap();
    let out = fragkit(&["defrag", &link.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("symlink"));
    // The unsafe method without --unsafe.
    let out = fragkit(&["defrag", "--method", "rewrite", &a.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--unsafe"));
    // A file another process holds open for writing: refused unless --force.
    // The holder says "open" once fd 3 is open: a sleep here raced it under load.
    let mut holder = Command::new("sh")
        .arg("-c")
        .arg(format!("exec 3>>'{}'; echo open; sleep 30", b.display()))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line, "open\n", "the holder did not open {}", b.display());
    let r = fragkit_json_exit(&["defrag", "--format", "json", &b.to_string_lossy()], 1);
    assert!(
        r["files"][0]["refused"]
            .as_str()
            .unwrap()
            .contains("open for writing"),
        "{r}"
    );
    let forced = fragkit_json(&[
        "defrag",
        "--force",
        "--format",
        "json",
        &b.to_string_lossy(),
    ]);
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert!(
        forced["summary"]["ranges_moved"].as_u64().unwrap() > 0,
        "{forced}"
    );
}

/// A writer appends to and overwrites a file while defrag runs over and over; afterwards
/// the file must equal the writer's own record of what it wrote.
fn concurrent_writer(fs: FsType) {
    let s = frag_scratch(fs, 512 << 20);
    let (a, _b) = fragmented_pair(&s);
    let mut model = std::fs::read(&a).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let a = a.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let f = OpenOptions::new().write(true).open(&a).unwrap();
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || n < 200 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let len = 1 + (x % 20000) as usize;
                let off = if x.is_multiple_of(5) {
                    model.len()
                } else {
                    (x >> 20) as usize % model.len()
                };
                let data: Vec<u8> = (0..len).map(|i| (x as u8).wrapping_add(i as u8)).collect();
                f.write_all_at(&data, off as u64).unwrap();
                if off + len > model.len() {
                    model.resize(off + len, 0);
                }
                model[off..off + len].copy_from_slice(&data);
                n += 1;
                if n % 16 == 0 {
                    f.sync_data().unwrap();
                }
            }
            model
        })
    };
    let t = Instant::now();
    let mut runs = 0;
    while t.elapsed() < Duration::from_secs(4) {
        let out = fragkit(&[
            "defrag",
            "--force",
            "--mode",
            if runs % 2 == 0 { "bypass" } else { "full" },
            "--format",
            "json",
            &a.to_string_lossy(),
        ]);
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["summary"]["verify_failures"], 0, "{report}");
        runs += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let model = writer.join().unwrap();
    drop_caches();
    let on_disk = std::fs::read(&a).unwrap();
    assert_eq!(
        on_disk.len(),
        model.len(),
        "{}: size differs from the writer's log",
        fs.name()
    );
    let first_diff = on_disk.iter().zip(&model).position(|(x, y)| x != y);
    assert_eq!(
        first_diff,
        None,
        "{}: content differs from the writer's log ({runs} defrag runs)",
        fs.name()
    );
}

#[test]
fn concurrent_writer_ext4() {
    concurrent_writer(FsType::Ext4);
}

#[test]
fn concurrent_writer_xfs() {
    concurrent_writer(FsType::Xfs);
}

#[test]
fn concurrent_writer_btrfs() {
    concurrent_writer(FsType::Btrfs);
}

/// kill -9 the defrag at random points; every file's checksum must survive.
/// FRAGKIT_CRASH_TRIALS sets trials per file system (scripts/crash-trials runs many).
fn killed_mid_migration(fs: FsType) {
    let trials: u64 = std::env::var("FRAGKIT_CRASH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let s = frag_scratch(fs, 512 << 20);
    let dir = s.mountpoint();
    let mut seed: u64 = 12345 + fs as u64;
    for trial in 0..trials {
        let sub = dir.join(format!("t{trial}"));
        std::fs::create_dir(&sub).unwrap();
        let names: Vec<PathBuf> = (0..4).map(|i| sub.join(format!("f{i}"))).collect();
        interleaved_direct_appends(&names, 8 << 10, 256);
        let hashes: Vec<u64> = names.iter().map(|p| file_hash(p)).collect();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = Duration::from_millis(seed % 120);
        let mode = ["bypass", "full"][(seed % 2) as usize];
        let mut child = Command::new(env!("CARGO_BIN_EXE_fragkit"))
            .args(["defrag", "--mode", mode, &sub.to_string_lossy()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        // std's Child::kill is SIGKILL on Unix.
        let _ = child.kill();
        child.wait().unwrap();
        drop_caches();
        for (p, h) in names.iter().zip(&hashes) {
            assert_eq!(
                file_hash(p),
                *h,
                "{} trial {trial}: {} changed after kill -9 at {delay:?} ({mode})",
                fs.name(),
                p.display()
            );
        }
        let stray: Vec<_> = std::fs::read_dir(&sub)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(stray.len(), 4, "temp files left behind: {stray:?}");
        let _ = fragkit(&["scan", "--format", "json", &sub.to_string_lossy()]);
    }
}

#[test]
fn killed_mid_migration_ext4() {
    killed_mid_migration(FsType::Ext4);
}

#[test]
fn killed_mid_migration_xfs() {
    killed_mid_migration(FsType::Xfs);
}

#[test]
fn killed_mid_migration_btrfs() {
    killed_mid_migration(FsType::Btrfs);
}

/// Files deleted just before a full run: ext4 lets the allocator reuse their blocks only
/// after the journal commits, though GETFSMAP already lists them free. Without the commit
/// full mode planned into that space and then skipped "no contiguous space" (7 → 6).
#[test]
fn full_mode_uses_space_freed_just_before() {
    let s = frag_scratch(FsType::Ext4, 256 << 20);
    let dir = s.mountpoint();
    let target = dir.join("target");
    let mut t = std::fs::File::create(&target).unwrap();
    for i in 0..64 {
        std::io::Write::write_all(&mut t, &[i as u8; 64 << 10]).unwrap();
        t.sync_all().unwrap();
        write_file(&dir.join(format!("gap{i}")), 64 << 10, 1);
    }
    drop(t);
    // Fill the rest, commit it, then free it without a commit.
    let mut fills = Vec::new();
    for i in 0.. {
        let p = dir.join(format!("fill{i}"));
        let mut f = std::fs::File::create(&p).unwrap();
        let ok =
            std::io::Write::write_all(&mut f, &vec![2u8; 1 << 20]).is_ok() && f.sync_all().is_ok();
        fills.push(p);
        if !ok {
            break;
        }
    }
    Command::new("sync").status().unwrap();
    for p in &fills {
        std::fs::remove_file(p).unwrap();
    }
    let before = scan_file(&target)["fragments"].as_u64().unwrap();
    assert!(before > 1, "target is fragmented: {before}");
    let hash = file_hash(&target);
    let r = fragkit_json(&[
        "defrag",
        "--mode",
        "full",
        "--format",
        "json",
        &target.to_string_lossy(),
    ]);
    assert_eq!(r["summary"]["bytes_moved"], 4 << 20, "{r}");
    assert_eq!(scan_file(&target)["fragments"], 1, "{r}");
    assert_eq!(file_hash(&target), hash);
}

/// A block of moved data corrupted on the device after the move, before the read-back,
/// is reported: "VERIFY FAILED", exit 1, on ext4 and on xfs, whose commit changes the
/// file's times itself (those must not pass for another writer's change). The run stops
/// itself just before the read-back (FRAGKIT_MOVE_LOG_STOP); the test overwrites 4 KiB of
/// the file's first extent in the loop device's backing image and lets it go on.
fn verification_catches_corruption(fs: FsType) {
    let s = frag_scratch(fs, 512 << 20);
    let (a, _b) = fragmented_pair(&s);
    global_sync();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("moves.log");
    let child = Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args(["defrag", "--mode", "full", "--format", "json"])
        .arg(&a)
        .env(fragkit::defrag::movelog::ENV, &log)
        .env(fragkit::defrag::movelog::STOP_ENV, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let t0 = Instant::now();
    let stopped = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|st| st.rsplit_once(") ").map(|(_, rest)| rest.starts_with('T')))
            .unwrap_or(false)
    };
    while !stopped() {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "{}: defrag never reached the read-back; log: {}",
            fs.name(),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let (bs, extents) = filefrag_extents(&a);
    let first = extents.first().expect("the file has data");
    // btrfs's FIEMAP gives its logical address; the device offset is the chunk map's.
    let at = if fs == FsType::Btrfs {
        btrfs_device_offset(&s.info.mountpoint, &s.info.loop_device, first.physical * bs)
    } else {
        first.physical * bs
    };
    let image = OpenOptions::new().write(true).open(&s.info.image).unwrap();
    image.write_all_at(&vec![0xEE; 4096], at).unwrap();
    image.sync_all().unwrap();
    // SAFETY: kill(2) on our own, stopped, child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}: {err}; ranges: {}",
        fs.name(),
        doc["files"][0]["ranges"]
    );
    assert!(
        doc["summary"]["verify_failures"].as_u64().unwrap_or(0) >= 1,
        "{}: {}",
        fs.name(),
        doc["summary"]
    );
    let reasons: Vec<&str> = doc["files"][0]["ranges"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["reason"].as_str())
        .collect();
    assert!(
        reasons.iter().any(|r| r.starts_with("VERIFY FAILED")),
        "{}: {reasons:?}",
        fs.name()
    );
    assert!(
        !reasons.iter().any(|r| r.contains("changed concurrently")),
        "{}: the commit's own change passed for a concurrent writer: {reasons:?}",
        fs.name()
    );
}

/// The device offset of btrfs logical address `logical` (btrfs-map-logical's first copy).
/// btrfs-map-logical reads the chunk tree from the device, where a chunk the move just
/// allocated appears only once its transaction commits: the file system under `mp` is
/// synced first (its data then also reaches the device before the test overwrites it).
fn btrfs_device_offset(mp: &Path, dev: &Path, logical: u64) -> u64 {
    fragkit::sys::sync::syncfs(mp).unwrap();
    let out = Command::new("btrfs-map-logical")
        .args(["-l", &logical.to_string()])
        .arg(dev)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // "mirror 1 logical L physical P device D"
    text.lines()
        .find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let i = w.iter().position(|x| *x == "physical")?;
            w.get(i + 1)?.parse().ok()
        })
        .unwrap_or_else(|| {
            panic!(
                "btrfs-map-logical -l {logical} ({}): {text}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

#[test]
fn verification_catches_corruption_ext4() {
    verification_catches_corruption(FsType::Ext4);
}

#[test]
fn verification_catches_corruption_xfs() {
    verification_catches_corruption(FsType::Xfs);
}

#[test]
fn verification_catches_corruption_btrfs() {
    verification_catches_corruption(FsType::Btrfs);
}

/// atime, mtime and ctime (s, ns each), as stat shows them.
fn times(path: &Path) -> [(i64, i64); 3] {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).unwrap();
    [
        (m.atime(), m.atime_nsec()),
        (m.mtime(), m.mtime_nsec()),
        (m.ctime(), m.ctime_nsec()),
    ]
}

/// Every mode leaves atime, mtime and ctime as they were, as xfs_fsr and e4defrag do
/// (xfstests' _defrag compares all three): full on one file, bypass on the other, each
/// with its atime set back first so that any read without O_NOATIME would move it
/// (relatime updates an atime older than the mtime); the report says so per file.
fn defrag_keeps_times(fs: FsType) {
    let s = frag_scratch(fs, 512 << 20);
    let (a, b) = fragmented_pair(&s);
    for (path, mode) in [(&a, "full"), (&b, "bypass")] {
        let st = Command::new("touch")
            .args(["-a", "-d", "@946684800"])
            .arg(path)
            .status()
            .unwrap();
        assert!(st.success());
        let before = times(path);
        let report = fragkit_json(&[
            "defrag",
            "--mode",
            mode,
            "--format",
            "json",
            &path.to_string_lossy(),
        ]);
        let sum = &report["summary"];
        assert!(sum["ranges_moved"].as_u64().unwrap() > 0, "{report}");
        assert_eq!(sum["verify_failures"], 0, "{report}");
        assert_eq!(
            times(path),
            before,
            "{} {mode}: atime, mtime, ctime changed",
            fs.name()
        );
        assert_eq!(sum["files_times_changed"], 0, "{report}");
        assert_eq!(report["files"][0]["times_kept"], true, "{report}");
    }
}

#[test]
fn defrag_keeps_times_ext4() {
    defrag_keeps_times(FsType::Ext4);
}

#[test]
fn defrag_keeps_times_xfs() {
    defrag_keeps_times(FsType::Xfs);
}

#[test]
fn defrag_keeps_times_btrfs() {
    defrag_keeps_times(FsType::Btrfs);
}
