//! SIGINT and SIGTERM. During `defrag` the first one stops the run from starting further
//! ranges: the moves in flight finish, are made durable and verified, the file-system knobs
//! the run set are put back, and the report lists what was not started as `interrupted`,
//! exit 1. A second one, or one during a command that cannot stop cleanly (`age`), ends the
//! process, but only after the signal handler put every knob back. Before, the default
//! action killed the process: no report, and full mode's mb_max_to_scan (or aging's
//! reserved_clusters) stayed as set until the next mount.

use crate::common;

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use fragkit::defrag::movelog;
use fragkit::scratch::FsType;
use serde_json::Value;

#[test]
fn sigint_ends_a_full_run_with_its_report_and_knobs_restored() {
    let s = paf_aged(FsType::Ext4, 1 << 30, "8", "16M");
    let fp = s.mountpoint().join("fp");
    let knob = format!(
        "/sys/fs/ext4/{}/mb_max_to_scan",
        fragkit::sys::tunable::block_device_name(&fp).unwrap()
    );
    let knob_before = std::fs::read_to_string(&knob).unwrap();
    let before = file_counts(&fp);
    let hashes: Vec<u64> = before.keys().map(|p| file_hash(p)).collect();
    let log = s.mountpoint().join("moves.log");
    // 8 x 16 MiB at 16 MB/s: about 8 s, the first file done after about one.
    let child = Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args([
            "defrag",
            "--mode",
            "full",
            "--max-rate",
            "16",
            "--format",
            "json",
        ])
        .arg(&fp)
        .env(movelog::ENV, &log)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("end "))
    {
        assert!(t0.elapsed() < Duration::from_secs(60), "no move finished");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let summary = &report["summary"];
    assert_eq!(summary["interrupted"], true, "{summary}");
    let ranges: Vec<&Value> = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["ranges"].as_array().unwrap())
        .collect();
    let moved = ranges.iter().filter(|r| r["status"] == "moved").count();
    let interrupted = ranges.iter().filter(|r| r["skip"] == "interrupted").count();
    assert!(moved >= 1, "{summary}");
    assert!(interrupted >= 1, "the run ended before SIGINT: {summary}");
    assert_eq!(moved + interrupted, ranges.len(), "{report}");
    // Every range that began also ended: nothing was cut off in the middle.
    let text = std::fs::read_to_string(&log).unwrap();
    let begins = text.lines().filter(|l| l.starts_with("begin ")).count();
    let ends = text.lines().filter(|l| l.starts_with("end ")).count();
    assert_eq!((begins, ends), (moved, moved));
    assert_eq!(report["tunables"][0]["restored"], true, "{report}");
    assert_eq!(std::fs::read_to_string(&knob).unwrap(), knob_before);
    // What the report calls moved is on disk: a power cut now changes nothing.
    power_cut_and_remount(&s, FsType::Ext4);
    assert_layouts_as_reported(&report, &fp);
    drop_caches();
    let after: Vec<u64> = before.keys().map(|p| file_hash(p)).collect();
    assert_eq!(hashes, after, "contents changed");
    s.destroy().unwrap();
}

/// Poll `path` until it reads `want` (a knob the child sets at its start).
fn wait_for(path: &str, want: &str) {
    let t0 = Instant::now();
    while std::fs::read_to_string(path).unwrap().trim() != want {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{path} never read {want}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Two SIGINTs: the second ends defrag at once, and full mode's knob reads its old value.
#[test]
fn second_sigint_ends_defrag_with_the_knob_put_back() {
    let s = paf_aged(FsType::Ext4, 512 << 20, "2", "32M");
    let fp = s.mountpoint().join("fp");
    let knob = format!(
        "/sys/fs/ext4/{}/mb_max_to_scan",
        fragkit::sys::tunable::block_device_name(&fp).unwrap()
    );
    let before = std::fs::read_to_string(&knob).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args([
            "defrag",
            "--mode",
            "full",
            "--max-rate",
            "8",
            "--format",
            "json",
        ])
        .arg(&fp)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The run raises it (to half the file system's blocks) before its first move.
    let t0 = Instant::now();
    while std::fs::read_to_string(&knob).unwrap() == before {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the knob was never set"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    for _ in 0..2 {
        // SAFETY: kill(2) on our own child.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}");
    assert_eq!(std::fs::read_to_string(&knob).unwrap(), before);
    s.destroy().unwrap();
}

/// SIGTERM during `age layout`, which sets ext4's reserved_clusters to 0 while it fills the
/// file system: the process ends by the signal and the knob reads its old value.
#[test]
fn sigterm_during_aging_puts_reserved_clusters_back() {
    let s = scratch(FsType::Ext4, 1 << 30, &[]);
    let knob = format!("/sys/fs/ext4/{}/reserved_clusters", s.device_name());
    let before = std::fs::read_to_string(&knob).unwrap();
    assert_ne!(before.trim(), "0");
    let mut child = Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args([
            "age",
            "layout",
            "--size",
            "128M",
            "--frag-size",
            "4K",
            "--frag-distance",
            "4K",
        ])
        .arg(s.mountpoint().join("f"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&knob, "0");
    // SAFETY: kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    assert_eq!(std::fs::read_to_string(&knob).unwrap(), before);
    s.destroy().unwrap();
}
