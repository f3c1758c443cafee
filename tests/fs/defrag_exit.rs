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
