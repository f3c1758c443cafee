//! Never worse: on a file system whose free space is cut into small holes (PAF aging, then
//! FragPicker's round-robin appends), no defrag mode leaves any file with more split
//! requests, or with more fragments that bought no fewer requests (full mode: any more
//! fragments), on ext4, xfs and btrfs. Before this was enforced, full mode rewrote such
//! files window by window and turned 22 fragments into 172-204.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::*;
use fragkit::scratch::FsType;
use fragkit::scratch::Scratch;
use serde_json::Value;

/// (fragments, S(128K)) of every file under `dir`.
fn counts(dir: &Path) -> BTreeMap<PathBuf, (u64, u64)> {
    let doc = fragkit_json(&["scan", "--format", "json", &dir.to_string_lossy()]);
    doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                PathBuf::from(f["path"].as_str().unwrap()),
                (
                    f["fragments"].as_u64().unwrap(),
                    f["requests"][0]["split"].as_u64().unwrap(),
                ),
            )
        })
        .collect()
}

/// A scratch fs aged into small free holes, with four 16 MiB round-robin files in fp/
/// (they take the few large free runs PAF leaves, so only holes of <= 6 MiB remain).
fn aged(fs: FsType) -> Scratch {
    let s = scratch(
        fs,
        384 << 20,
        if fs == FsType::Ext4 {
            &["-m", "0"]
        } else {
            &[]
        },
    );
    let m = s.mountpoint().to_string_lossy().to_string();
    // btrfs needs room for its metadata chunks: 75% instead of 85% full before deletes.
    let spec = if fs == FsType::Btrfs {
        "PAF:75.50@64K"
    } else {
        "PAF:85.50@64K"
    };
    let out = fragkit(&["age", "paf", "--target", &m, spec]);
    assert!(
        out.status.success(),
        "age paf: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fp = s.mountpoint().join("fp");
    std::fs::create_dir(&fp).unwrap();
    let out = fragkit(&[
        "age",
        "fragpicker-synthetic",
        "--files",
        "4",
        "--size",
        "16M",
        &fp.to_string_lossy(),
    ]);
    assert!(
        out.status.success(),
        "age fragpicker-synthetic: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    s
}

/// A pick profile that reads every other 128 KiB of each file (FragPicker's stride).
fn stride_profile(dir: &Path, out: &Path) {
    let files: Vec<Value> = counts(dir)
        .keys()
        .map(|p| {
            let ranges: Vec<Value> = (0..64u64)
                .map(|k| serde_json::json!({"offset": k * (256 << 10), "length": 128 << 10, "reads": 5}))
                .collect();
            serde_json::json!({"path": p, "ranges": ranges})
        })
        .collect();
    std::fs::write(
        out,
        serde_json::json!({"version": 1, "kind": "fragkit-trace-profile", "files": files})
            .to_string(),
    )
    .unwrap();
}

fn never_worse(fs: FsType) {
    let base = aged(fs);
    let profile = base.mountpoint().join("profile.json");
    stride_profile(&base.mountpoint().join("fp"), &profile);
    for mode in ["full", "bypass", "pick"] {
        let s = base.clone_to(None).unwrap();
        let fp = s.mountpoint().join("fp");
        let before = counts(&fp);
        let hashes: Vec<u64> = before.keys().map(|p| file_hash(p)).collect();
        let mut args = vec!["defrag", "--mode", mode, "--format", "json"];
        let prof = s
            .mountpoint()
            .join("profile.json")
            .to_string_lossy()
            .to_string();
        // The clone's profile names the clone's files: rewrite the mount point.
        let text = std::fs::read_to_string(&prof).unwrap().replace(
            &*base.mountpoint().to_string_lossy(),
            &s.mountpoint().to_string_lossy(),
        );
        std::fs::write(&prof, text).unwrap();
        if mode == "pick" {
            args.extend(["--profile", &prof]);
        }
        let fp_s = fp.to_string_lossy().to_string();
        args.push(&fp_s);
        let out = fragkit(&args);
        let code = out.status.code();
        assert!(
            matches!(code, Some(0) | Some(1)),
            "{} {mode}: exit {code:?}: {}",
            fs.name(),
            String::from_utf8_lossy(&out.stderr)
        );
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let after = counts(&fp);
        for (path, &(f0, s0)) in &before {
            let (f1, s1) = after[path];
            let worse = s1 > s0 || (f1 > f0 && (mode == "full" || s1 >= s0));
            assert!(
                !worse,
                "{} {mode}: {} came out worse: fragments {f0}→{f1}, S(128K) {s0}→{s1}",
                fs.name(),
                path.display()
            );
        }
        assert_eq!(
            report["summary"]["files_worse"],
            0,
            "{} {mode}: {report}",
            fs.name()
        );
        assert_eq!(
            report["summary"]["verify_failures"],
            0,
            "{} {mode}",
            fs.name()
        );
        // Every skip carries its kind; a run with skips exits 1, one without exits 0.
        let skipped = report["summary"]["ranges_not_improvable"].as_u64().unwrap();
        for f in report["files"].as_array().unwrap() {
            for r in f["ranges"].as_array().unwrap() {
                if r["status"] == "skipped" {
                    assert!(
                        r["skip"].is_string(),
                        "{} {mode}: skip without a kind: {r}",
                        fs.name()
                    );
                }
            }
        }
        assert_eq!(
            code,
            Some(i32::from(skipped > 0)),
            "{} {mode}: {}",
            fs.name(),
            report["summary"]
        );
        drop_caches();
        let now: Vec<u64> = before.keys().map(|p| file_hash(p)).collect();
        assert_eq!(hashes, now, "{} {mode}: contents changed", fs.name());
        s.destroy().unwrap();
    }
}

#[test]
fn never_worse_on_aged_ext4() {
    never_worse(FsType::Ext4);
}

#[test]
fn never_worse_on_aged_xfs() {
    never_worse(FsType::Xfs);
}

#[test]
fn never_worse_on_aged_btrfs() {
    never_worse(FsType::Btrfs);
}
