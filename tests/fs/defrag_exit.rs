//! defrag's exit status tells the truth: 1 when a target was refused or vanished (each
//! listed with its reason), 2 with one "needs root" line for a non-root user.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::*;
use fragkit::scratch::FsType;

fn ext4() -> fragkit::scratch::Scratch {
    scratch(FsType::Ext4, 256 << 20, &["-m", "0"])
}

#[test]
fn non_root_gets_one_line_and_exit_2() {
    let s = ext4();
    let a = s.mountpoint().join("a.db");
    fill_punch_fragment(&s, &a, 1 << 20, 16 << 10);
    let out = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_fragkit"))
        .args(["defrag", &a.to_string_lossy()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "one line, not one per file: {err}");
    assert!(err.contains("needs root"), "{err}");
    // Planning needs no root.
    let out = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_fragkit"))
        .args(["defrag", "--dry-run", &a.to_string_lossy()])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn read_only_mount_is_refused_with_exit_1() {
    let s = ext4();
    let a = s.mountpoint().join("a.db");
    fill_punch_fragment(&s, &a, 1 << 20, 16 << 10);
    let mp = s.mountpoint().to_string_lossy().to_string();
    assert!(Command::new("mount")
        .args(["-o", "remount,ro", &mp])
        .status()
        .unwrap()
        .success());
    let r = fragkit_json_exit(&["defrag", "--format", "json", &a.to_string_lossy()], 1);
    Command::new("mount")
        .args(["-o", "remount,rw", &mp])
        .status()
        .unwrap();
    let why = r["files"][0]["refused"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(why.contains("Read-only"), "{r}");
    assert_eq!(r["summary"]["files_refused"], 1);
}

#[test]
fn file_vanished_mid_run_is_listed_with_exit_1() {
    let s = ext4();
    let (a, b) = (s.mountpoint().join("a.db"), s.mountpoint().join("b.db"));
    fill_punch_fragment(&s, &a, 4 << 20, 16 << 10);
    fill_punch_fragment(&s, &b, 1 << 20, 16 << 10);
    // a first, slowed to 2 MB/s (about 2 s); b is deleted while a is being moved (one
    // worker, so b waits for a).
    let child = Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args(["defrag", "-j", "1", "--max-rate", "2", "--format", "json"])
        .arg(&a)
        .arg(&b)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    std::fs::remove_file(&b).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gone = r["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with("b.db"))
        .expect("b.db listed");
    assert!(
        gone["refused"].as_str().unwrap().contains("vanished"),
        "{gone}"
    );
    let done = r["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with("a.db"))
        .unwrap();
    assert!(done["bytes_moved"].as_u64().unwrap() > 0, "{done}");
}

/// A 64 MiB file in 512 fragments of 128 KiB, each one R-window (0 split requests), on an
/// ext4 whose free space is in 64 KiB holes: pick with the whole file hot, and bypass, have
/// nothing to do. No window already in one piece is planned, tried or counted, and the run
/// ends with 0 and says so (pick used to retry all 512 windows, skip each "not better" and
/// exit 1).
#[test]
fn pick_and_bypass_leave_whole_windows_alone() {
    let s = ext4();
    let mp = s.mountpoint().to_path_buf();
    let f = mp.join("f");
    let o = fragkit(&[
        "age",
        "layout",
        &f.to_string_lossy(),
        "--size",
        "64M",
        "--frag-size",
        "128K",
        "--frag-distance",
        "64K",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The rest of free space in 64 KiB holes: allocate it all, then punch every other 64 KiB.
    let filler_path = mp.join("filler");
    let filler = std::fs::File::create(&filler_path).unwrap();
    let st = nix::sys::statvfs::statvfs(&mp).unwrap();
    let free = st.blocks_available() as u64 * st.fragment_size() as u64;
    let len = free / (128 << 10) * (128 << 10) - (4 << 20);
    fallocate(&filler, 0, 0, len);
    let mut off = 0;
    while off < len {
        fallocate(
            &filler,
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            off,
            64 << 10,
        );
        off += 128 << 10;
    }
    drop(filler);
    let scan = fragkit_json(&["scan", "--format", "json", &f.to_string_lossy()]);
    assert_eq!(scan["files"][0]["requests"][0]["extra"], 0, "{scan}");
    assert!(
        scan["files"][0]["fragments"].as_u64().unwrap() > 100,
        "{scan}"
    );

    let profile = mp.join("p.json");
    std::fs::write(
        &profile,
        serde_json::json!({"version": 1, "kind": "fragkit-trace-profile", "files": [
            {"path": f, "ranges": [{"offset": 0, "length": 64u64 << 20, "reads": 5}]}]})
        .to_string(),
    )
    .unwrap();
    let p = profile.to_string_lossy().to_string();
    let fp = f.to_string_lossy().to_string();
    for args in [
        vec!["defrag", "--mode", "pick", "--profile", &p, &fp],
        vec!["defrag", "--mode", "bypass", &fp],
    ] {
        let mut json = vec!["defrag", "--format", "json"];
        json.extend(&args[1..]);
        let o = fragkit(&json);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let sum = &r["summary"];
        assert_eq!(sum["ranges_planned"], 0, "{args:?}: {sum}");
        assert_eq!(sum["ranges_skipped"], 0, "{args:?}: {sum}");
        assert_eq!(sum["bytes_moved"], 0, "{args:?}: {sum}");
        let o = fragkit(&args);
        assert_eq!(o.status.code(), Some(0));
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("nothing to do"), "{args:?}: {text}");
    }
}

/// One rule for shared extents on every file system: an xfs file whose planned ranges hold
/// reflinked extents is refused with the shared byte count (exit 1, file untouched, the
/// reflinked copy still shares); `--unshare` moves it and reports the bytes it unshared.
#[test]
fn reflinked_extents_are_refused_unless_unshare() {
    let s = scratch(FsType::Xfs, 512 << 20, &[]);
    let a = s.mountpoint().join("a.db");
    fill_punch_fragment(&s, &a, 8 << 20, 16 << 10);
    let b = s.mountpoint().join("b.db");
    let cp = Command::new("cp")
        .arg("--reflink=always")
        .arg(&a)
        .arg(&b)
        .status()
        .unwrap();
    assert!(cp.success(), "cp --reflink=always on xfs");
    let shared = |p: &std::path::Path| {
        let j = fragkit_json(&["scan", "--format", "json", &p.to_string_lossy()]);
        j["files"][0]["shared_bytes"].as_u64().unwrap()
    };
    assert_eq!(
        shared(&a),
        8 << 20,
        "the reflinked file shares all its data"
    );
    let before = file_hash(&a);
    let ap = a.to_string_lossy().to_string();
    let o = fragkit(&["defrag", "--format", "json", &ap]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let why = r["files"][0]["refused"].as_str().unwrap_or_default();
    assert!(why.contains("shared") && why.contains("--unshare"), "{r}");
    assert!(
        why.contains(&(8u64 << 20).to_string()),
        "names the shared bytes: {why}"
    );
    assert_eq!(r["summary"]["bytes_moved"], 0);
    assert_eq!(shared(&a), 8 << 20, "still shared after the refusal");

    let o = fragkit(&["defrag", "--unshare", "--format", "json", &ap]);
    assert!(
        matches!(o.status.code(), Some(0) | Some(1)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let moved = r["summary"]["bytes_moved"].as_u64().unwrap();
    assert!(moved > 0, "{r}");
    assert!(
        r["summary"]["shared_bytes_unshared"].as_u64().unwrap() > 0,
        "{r}"
    );
    assert_eq!(file_hash(&a), before, "same bytes after the move");
    assert!(shared(&a) < 8 << 20, "the moved ranges no longer share");
}

/// A missing path among the targets is reported and skipped like scan does (exit 1), the
/// other targets are still defragmented, and a file named twice (here by its path and by
/// its directory) is moved once. A hand-written profile range of length u64::MAX covers the
/// rest of the file instead of overflowing to nothing.
#[test]
fn missing_path_is_skipped_and_a_file_named_twice_moves_once() {
    let s = ext4();
    let a = s.mountpoint().join("a.db");
    fill_punch_fragment(&s, &a, 2 << 20, 16 << 10);
    let ap = a.to_string_lossy().to_string();
    let dir = s.mountpoint().to_string_lossy().to_string();
    let missing = s
        .mountpoint()
        .join("no-such-file")
        .to_string_lossy()
        .to_string();
    let o = fragkit(&["defrag", "--format", "json", &missing, &ap, &dir]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("no-such-file"), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let files = r["files"].as_array().unwrap();
    let named_a = files.iter().filter(|f| f["path"] == ap.as_str()).count();
    assert_eq!(named_a, 1, "a.db listed once: {r}");
    let moved = r["summary"]["bytes_moved"].as_u64().unwrap();
    assert!(
        moved > 0 && moved <= 2 << 20,
        "moved once, at most its size: {r}"
    );

    let b = s.mountpoint().join("b.db");
    fill_punch_fragment(&s, &b, 1 << 20, 16 << 10);
    let profile = s.mountpoint().join("p.json");
    std::fs::write(
        &profile,
        serde_json::json!({"version": 1, "files": [
            {"path": b, "ranges": [{"offset": 0, "length": u64::MAX, "reads": 1}]}]})
        .to_string(),
    )
    .unwrap();
    let r = fragkit_json(&[
        "defrag",
        "--dry-run",
        "--mode",
        "pick",
        "--profile",
        &profile.to_string_lossy(),
        "--format",
        "json",
        &b.to_string_lossy(),
    ]);
    assert_eq!(r["summary"]["bytes_planned"], 1 << 20, "{r}");
}

/// A file deleted while it is being moved: the report says so (`vanished`, exit 1) instead
/// of showing its layout after as the one before without a word.
#[test]
fn file_deleted_while_moved_is_said_to_have_vanished() {
    let s = ext4();
    let a = s.mountpoint().join("a.db");
    fill_punch_fragment(&s, &a, 4 << 20, 16 << 10);
    let child = Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args(["defrag", "-j", "1", "--max-rate", "2", "--format", "json"])
        .arg(&a)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    std::fs::remove_file(&a).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = &r["files"][0];
    assert!(
        f["vanished"]
            .as_str()
            .is_some_and(|v| v.contains("deleted")),
        "{f}"
    );
    assert_eq!(r["summary"]["files_vanished"], 1, "{r}");
    assert!(err.contains("a.db"), "{err}");
}

/// An active swap file is recognised by its inode even when its name holds a newline
/// (/proc/swaps writes it as `\012`), and refused as a swap file.
#[test]
fn swap_file_with_a_newline_in_its_name_is_refused_as_swap() {
    let s = ext4();
    let f = s.mountpoint().join("sw\nap");
    fill_punch_fragment(&s, &f, 4 << 20, 16 << 10);
    std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let ok = |c: &mut Command| c.status().unwrap().success();
    assert!(ok(Command::new("mkswap")
        .arg(&f)
        .stdout(std::process::Stdio::null())));
    assert!(ok(Command::new("swapon").arg(&f)), "swapon");
    let o = fragkit(&[
        "defrag",
        "--mode",
        "full",
        "--format",
        "json",
        &f.to_string_lossy(),
    ]);
    let swapoff = ok(Command::new("swapoff").arg(&f));
    assert!(swapoff, "swapoff");
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let why = r["files"][0]["refused"].as_str().unwrap_or_default();
    assert!(why.contains("swap file"), "{r}");
    assert_eq!(r["summary"]["bytes_moved"], 0);
}

/// --max-rate holds inside one range and for reading the moves back: full mode moves a
/// 4 MiB fragmented file as one range, so a wait only between ranges would let the whole
/// file go at once (and the read-back after it).
#[test]
fn max_rate_paces_inside_a_range_and_the_read_back() {
    let s = ext4();
    let a = s.mountpoint().join("a.db");
    fill_punch_fragment(&s, &a, 4 << 20, 16 << 10);
    let log = s.mountpoint().join("moves.log");
    let out = Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args([
            "defrag",
            "--mode",
            "full",
            "--max-rate",
            "4",
            "--format",
            "json",
        ])
        .arg(&a)
        .env(fragkit::defrag::movelog::ENV, &log)
        .output()
        .unwrap();
    let ended = fragkit::defrag::movelog::monotonic_ns();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["summary"]["ranges_moved"], 1, "{r}");
    let moved = r["summary"]["bytes_moved"].as_u64().unwrap();
    let at = |kind: &str| -> u64 {
        let text = std::fs::read_to_string(&log).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with(kind))
            .unwrap_or_else(|| panic!("no {kind} line in {text}"));
        line.split(' ').nth(1).unwrap().parse().unwrap()
    };
    // 4 MB/s: each part takes moved / 4e6 s; 10% slack for the pacer's granularity.
    let should = moved as f64 / 4e6 * 0.9;
    let moving = (at("end") - at("begin")) as f64 / 1e9;
    let reading = (ended - at("verify")) as f64 / 1e9;
    assert!(
        moving >= should,
        "the range moved in {moving:.2} s, expected at least {should:.2} s"
    );
    assert!(
        reading >= should,
        "read back in {reading:.2} s, expected at least {should:.2} s"
    );
}
