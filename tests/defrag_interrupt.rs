//! Ctrl-C during `defrag`: SIGINT (or SIGTERM) stops the run from starting further ranges;
//! the moves in flight finish, are made durable and verified, the file-system knobs the run
//! set are put back, and the report lists what was not started as `interrupted`, exit 1.
//! Before, the default action killed the process: no report, and full mode's
//! mb_max_to_scan stayed raised until the next mount.

mod common;

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
        fragkit::age::fstune::block_device_name(&fp).unwrap()
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
