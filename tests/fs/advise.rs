//! `advise` on fixed layouts: it ranks what costs most, and what `--apply` achieves is what
//! it predicted — bytes within 5% of what the device wrote, modeled read time within 5%
//! of the time modeled on the layout the move left.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::*;
use fragkit::age::layout::{build, LayoutSpec};
use fragkit::scratch::FsType;

const K: u64 = 1024;

fn layout(path: &Path, size: u64, frag: u64, distance: u64) {
    build(&LayoutSpec {
        path: path.to_path_buf(),
        size,
        frag_size: frag,
        frag_distance: distance,
        seed: 11,
        force: false,
        progress: false,
    })
    .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
}

/// A file's priced option for one fix.
fn option<'a>(file: &'a serde_json::Value, fix: &str) -> &'a serde_json::Value {
    file["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["fix"] == fix)
        .unwrap_or_else(|| panic!("no {fix} option: {file:#}"))
}

fn within(actual: f64, predicted: f64, pct: f64) -> bool {
    (actual - predicted).abs() <= predicted * pct / 100.0
}

fn applied_agrees(r: &serde_json::Value) {
    let a = &r["applied"];
    let files = a["files"].as_array().unwrap();
    assert!(!files.is_empty(), "{r:#}");
    for f in files {
        let (p, got) = (
            f["predicted_ns"].as_f64().unwrap(),
            f["achieved_ns"].as_f64().unwrap(),
        );
        assert!(within(got, p, 5.0), "modeled time: {f:#}");
        assert_eq!(f["moved_bytes"], f["predicted_bytes"], "{f:#}");
        assert!(
            f["achieved_ns"].as_u64() < f["before_ns"].as_u64(),
            "the move helped: {f:#}"
        );
    }
    let (p, w) = (
        a["predicted_bytes"].as_f64().unwrap(),
        a["device_written_bytes"].as_f64().unwrap(),
    );
    assert!(within(w, p, 5.0), "device wrote {w} for {p} predicted");
}

/// Three layouts: 32 KiB pieces one stripe (256 KiB) apart land on one die (the worst),
/// 64 KiB pieces 64 KiB apart cost less, a file in one piece nothing. The worst is ranked
/// first, the flat file gets no fix, and --apply achieves what was predicted.
#[test]
fn apply_achieves_the_prediction_on_ext4() {
    let s = scratch(FsType::Ext4, 512 << 20, &["-m", "0"]);
    let m = s.mountpoint();
    layout(&m.join("worst"), 32 << 20, 32 * K, 224 * K);
    layout(&m.join("mid"), 16 << 20, 64 * K, 64 * K);
    write_file(&m.join("flat"), 8 << 20, 7);
    drop_caches();
    let mp = m.to_string_lossy();
    let r = fragkit_json(&["advise", &mp, "--format", "json"]);
    let files = r["advice"]["files"].as_array().unwrap();
    let name = |f: &serde_json::Value| {
        Path::new(f["path"].as_str().unwrap())
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    };
    assert_eq!(name(&files[0]), "worst", "{r:#}");
    let flat = files.iter().find(|f| name(f) == "flat").unwrap();
    assert_eq!(
        (flat["excess_ns"].as_u64(), flat["fix"].as_str()),
        (Some(0), Some("none"))
    );
    assert!(files[0]["collision_ns"].as_u64().unwrap() > 0, "{r:#}");
    assert!(r["advice"]["answer"]
        .as_str()
        .unwrap()
        .contains("fragkit defrag --mode"));
    // Read-only: nothing moved.
    let before = filefrag_extents(&m.join("worst")).1.len();
    assert!(before > 100);
    let hash = file_hash(&m.join("worst"));
    let r = fragkit_json(&["advise", &mp, "--apply", "--format", "json"]);
    applied_agrees(&r);
    assert_eq!(file_hash(&m.join("worst")), hash);
    assert!(filefrag_extents(&m.join("worst")).1.len() < before / 10);
}

/// With a profile, only the hot range is priced and moved (pick), and the prediction
/// holds for it.
#[test]
fn a_profile_makes_it_pick_the_hot_range() {
    let s = scratch(FsType::Ext4, 512 << 20, &["-m", "0"]);
    let m = s.mountpoint();
    let f = m.join("db");
    layout(&f, 32 << 20, 32 * K, 224 * K);
    drop_caches();
    let profile = m.join("profile.json");
    let hot = 4u64 << 20;
    std::fs::write(
        &profile,
        serde_json::json!({
            "version": 1,
            "kind": "fragkit-profile",
            "files": [{
                "path": f, "size": 32u64 << 20, "reads": 640, "writes": 0,
                "bytes_read": 640 * 128 * K,
                "ranges": [{"offset": 0, "length": hot, "reads": 640, "writes": 0}]
            }]
        })
        .to_string(),
    )
    .unwrap();
    let pf = profile.to_string_lossy();
    let fs = f.to_string_lossy();
    let r = fragkit_json(&["advise", &fs, "--profile", &pf, "--format", "json"]);
    let a = &r["advice"]["files"][0];
    assert_eq!(a["fix"], "pick", "{r:#}");
    let pick = option(a, "pick");
    assert_eq!(pick["bytes"].as_u64(), Some(hot), "{r:#}");
    // 20 passes over the hot range, each one 4 MiB read.
    assert_eq!(a["read_bytes"].as_u64(), Some(20 * hot));
    let r = fragkit_json(&[
        "advise",
        &fs,
        "--profile",
        &pf,
        "--apply",
        "--format",
        "json",
    ]);
    applied_agrees(&r);
}

#[test]
fn apply_needs_root_and_a_bad_device_is_one_line() {
    let s = scratch(FsType::Ext4, 128 << 20, &[]);
    let f = s.mountpoint().join("a");
    write_file(&f, 1 << 20, 1);
    let out = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_fragkit"))
        .args(["advise", "--apply", &f.to_string_lossy()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("needs root"), "{err}");
    let out = fragkit(&["advise", "--device", "warp9", &f.to_string_lossy()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--device warp9"), "{err}");
}

/// `--trace-for` records the accesses itself: a reader named `advreader` reads the first
/// 4 MiB of the file over and over with O_DIRECT; the advice prices that profile and picks.
#[test]
fn trace_for_records_the_profile_it_prices() {
    let s = scratch(FsType::Ext4, 512 << 20, &["-m", "0"]);
    let m = s.mountpoint();
    let f = m.join("db");
    layout(&f, 32 << 20, 32 * K, 224 * K);
    // A copy of dd under a name no other process has.
    let reader = m.join("advreader");
    std::fs::copy("/bin/dd", &reader).unwrap();
    let script = format!(
        "while :; do {} if={} of=/dev/null bs=128K count=32 iflag=direct status=none; done",
        reader.display(),
        f.display()
    );
    let mut child = Command::new("sh").args(["-c", &script]).spawn().unwrap();
    let fs = f.to_string_lossy();
    let out = fragkit(&[
        "advise",
        &fs,
        "--trace-for",
        "3",
        "--comm",
        "advreader",
        "--format",
        "json",
    ]);
    let _ = child.kill();
    let _ = child.wait();
    let _ = Command::new("pkill").args(["-x", "advreader"]).status();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let a = &r["advice"]["files"][0];
    assert_eq!(r["advice"]["access"], "profile", "{r:#}");
    assert!(a["read_bytes"].as_u64().unwrap() >= 4 << 20, "{r:#}");
    assert_eq!(a["fix"], "pick", "{r:#}");
    let pick = option(a, "pick");
    assert_eq!(pick["bytes"].as_u64(), Some(4 << 20), "{r:#}");
}

/// A sparse file of 8 EiB − 1 with 512 KiB of data: priced in time proportional to its
/// data (4 requests of 128 KiB), not its size.
#[test]
fn a_sparse_file_is_priced_by_its_data() {
    use std::os::unix::fs::FileExt;
    let s = scratch(FsType::Xfs, 512 << 20, &[]);
    let f = s.mountpoint().join("sparse");
    let file = std::fs::File::create(&f).unwrap();
    file.write_all_at(&vec![7u8; 512 << 10], 1 << 40).unwrap();
    file.set_len(i64::MAX as u64).unwrap();
    file.sync_all().unwrap();
    drop(file);
    let r = fragkit_json(&["advise", &f.to_string_lossy(), "--format", "json"]);
    let a = &r["advice"]["files"][0];
    assert_eq!(a["now"]["device_reads"].as_u64(), Some(4), "{r:#}");
    assert_eq!(a["read_bytes"].as_u64(), Some(i64::MAX as u64 + 1));
}
