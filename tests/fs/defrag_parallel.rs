//! `defrag -j N`: several workers give the same result as one (checksums, no file worse,
//! exit status, summary counts), --budget stays global, the move log stays one line per
//! write, and full mode's device writes stay near the bytes it moved (a buffered
//! before-checksum once made ext4's MOVE_EXT write 4.2× and no test noticed).

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::*;
use fragkit::io::BlockDevice;
use fragkit::scratch::FsType;
use fragkit::scratch::Scratch;
use serde_json::Value;

/// [`paf_aged`] at the smallest size each file system takes.
fn aged(fs: FsType, files: &str, size: &str) -> Scratch {
    // xfs's minimum is 300 MiB.
    let bytes = if fs == FsType::Xfs {
        320 << 20
    } else {
        256 << 20
    };
    paf_aged(fs, bytes, files, size)
}

/// Every regular file under `dir` with its (checksum, fragments, S(128K)).
fn state(dir: &Path) -> BTreeMap<PathBuf, (u64, u64, u64)> {
    drop_caches();
    file_counts(dir)
        .into_iter()
        .map(|(p, (f, s))| {
            let h = file_hash(&p);
            (p, (h, f, s))
        })
        .collect()
}

/// Run `defrag ARGS... DIR` on `s`; the report and the exit status.
fn defrag(s: &Scratch, args: &[&str]) -> (Value, i32) {
    let dir = s.mountpoint().to_string_lossy().to_string();
    let mut all = vec!["defrag", "--format", "json"];
    all.extend(args);
    all.push(&dir);
    let out = fragkit(&all);
    let code = out.status.code().unwrap();
    assert!(
        code == 0 || code == 1,
        "defrag {args:?}: exit {code}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (serde_json::from_slice(&out.stdout).unwrap(), code)
}

/// The per-file report's paths in the order they were printed, relative to `s`.
fn per_file(report: &Value, s: &Scratch) -> Vec<PathBuf> {
    report["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            Path::new(f["path"].as_str().unwrap())
                .strip_prefix(s.mountpoint())
                .unwrap()
                .to_path_buf()
        })
        .collect()
}

/// `exact`: the file system's allocator gives the same space to the same calls (xfs, btrfs
/// here), so every count must match; else only what does not depend on where donors land.
fn same_as_serial(fs: FsType, exact: bool) {
    let base = aged(fs, "6", "8M");
    let a = base.clone_to(None).unwrap();
    let b = base.clone_to(None).unwrap();
    let before = state(base.mountpoint());
    let (serial, code1) = defrag(&a, &["--mode", "bypass", "-j", "1"]);
    let logdir = tempfile::tempdir().unwrap();
    let log = logdir.path().join("moves.log");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args(["defrag", "--format", "json", "--mode", "bypass", "-j", "2"])
        .arg(b.mountpoint())
        .env("FRAGKIT_MOVE_LOG", &log)
        .output()
        .unwrap();
    let code2 = out.status.code().unwrap();
    let parallel: Value = serde_json::from_slice(&out.stdout).unwrap();
    let name = fs.name();
    let (s1, s2) = (&serial["summary"], &parallel["summary"]);
    assert!(
        s1["ranges_moved"].as_u64().unwrap() > 0,
        "{name}: nothing moved: {s1}"
    );
    // The exit status is what each run's own counts say (0: nothing refused, skipped as
    // not improvable, failed or worse).
    for (code, sum) in [(code1, s1), (code2, s2)] {
        let incomplete: u64 = [
            "files_refused",
            "ranges_failed",
            "verify_failures",
            "files_worse",
            "ranges_not_improvable",
        ]
        .iter()
        .map(|k| sum[k].as_u64().unwrap())
        .sum();
        assert_eq!(
            code,
            i32::from(incomplete > 0),
            "{name}: exit status vs {sum}"
        );
    }
    let mut same = vec![
        "files_scanned",
        "files_planned",
        "files_refused",
        "ranges_planned",
        "ranges_failed",
        "bytes_planned",
        "verify_failures",
        "files_worse",
    ];
    if exact {
        same.extend([
            "files_changed",
            "ranges_moved",
            "ranges_skipped",
            "ranges_not_improvable",
            "bytes_moved",
        ]);
        assert_eq!(code1, code2, "{name}: exit status -j 1 vs -j 2");
    } else {
        // ext4 frees a moved range's old blocks only when its journal commits, so which
        // holes a donor gets depends on timing: two -j 1 runs on clones of one image moved
        // 29.49 / 29.62 / 29.36 MB with 9 / 8 / 10 ranges not improvable (docs/defrag.md),
        // and 6.8% apart on a busy machine. So the runs may differ only by ranges one of
        // them skipped as not improvable: every byte moved by one and not the other is in
        // such a range.
        let (m1, m2) = (
            s1["bytes_moved"].as_u64().unwrap(),
            s2["bytes_moved"].as_u64().unwrap(),
        );
        let skipped = |r: &Value| -> u64 {
            r["files"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|f| f["ranges"].as_array().unwrap())
                .filter(|x| x["status"] == "skipped")
                .map(|x| x["length"].as_u64().unwrap())
                .sum()
        };
        let (k1, k2) = (skipped(&serial), skipped(&parallel));
        assert!(
            m1.abs_diff(m2) <= k1 + k2,
            "{name}: bytes moved -j 1 {m1} vs -j 2 {m2}, more apart than the bytes either \
             skipped as not improvable ({k1}, {k2})"
        );
    }
    for k in same {
        assert_eq!(s1[k], s2[k], "{name}: summary.{k}: -j 1 {s1} vs -j 2 {s2}");
    }
    assert_eq!(s2["files_worse"], 0, "{name}");
    assert_eq!(s2["verify_failures"], 0, "{name}");
    // The per-file report comes in plan order whatever worker finished first.
    assert_eq!(
        per_file(&serial, &a),
        per_file(&parallel, &b),
        "{name}: report order"
    );
    for (s, run) in [(&a, "-j 1"), (&b, "-j 2")] {
        let after = state(s.mountpoint());
        for (path, &(h0, f0, s0)) in &before {
            let rel = path.strip_prefix(base.mountpoint()).unwrap();
            let &(h1, f1, s1) = after.get(&s.mountpoint().join(rel)).unwrap();
            assert_eq!(h0, h1, "{name} {run}: {} changed its data", rel.display());
            assert!(
                !(s1 > s0 || (f1 > f0 && s1 >= s0)),
                "{name} {run}: {} came out worse: fragments {f0}→{f1}, S(128K) {s0}→{s1}",
                rel.display()
            );
        }
    }
    // The crash-trial log: one whole line per write, every begin ended.
    let text = std::fs::read_to_string(&log).unwrap();
    let mut open = std::collections::HashSet::new();
    let mut ends = 0;
    for line in text.lines() {
        let w: Vec<&str> = line.splitn(7, ' ').collect();
        match w[0] {
            "begin" => {
                assert_eq!(w.len(), 6, "{name}: {line:?}");
                assert!(
                    open.insert((w[5].to_string(), w[3].to_string())),
                    "{line:?}"
                );
            }
            "end" => {
                assert_eq!(w.len(), 7, "{name}: {line:?}");
                assert!(
                    open.remove(&(w[6].to_string(), w[3].to_string())),
                    "{line:?}"
                );
                ends += 1;
            }
            "verify" => {
                // verify <ns> <write_bytes> <ranges> <path>: a file's read-back begins.
                let v: Vec<&str> = line.splitn(5, ' ').collect();
                assert_eq!(v.len(), 5, "{name}: {line:?}");
                for n in &v[1..4] {
                    n.parse::<u64>()
                        .unwrap_or_else(|_| panic!("{name}: {line:?}"));
                }
                continue;
            }
            _ => panic!("{name}: malformed move log line {line:?}"),
        }
        for n in &w[1..5] {
            n.parse::<u64>()
                .unwrap_or_else(|_| panic!("{name}: {line:?}"));
        }
    }
    assert!(open.is_empty(), "{name}: moves without an end: {open:?}");
    assert!(ends > 0, "{name}: empty move log");
    for s in [a, b, base] {
        s.destroy().unwrap();
    }
}

#[test]
fn jobs_2_same_as_jobs_1_on_aged_ext4() {
    same_as_serial(FsType::Ext4, false);
}

#[test]
fn jobs_2_same_as_jobs_1_on_aged_xfs() {
    same_as_serial(FsType::Xfs, true);
}

#[test]
fn jobs_2_same_as_jobs_1_on_aged_btrfs() {
    same_as_serial(FsType::Btrfs, true);
}

/// --budget is one budget for all workers: the bytes moved never exceed it.
#[test]
fn budget_is_global_under_jobs_2() {
    let s = aged(FsType::Ext4, "6", "8M");
    let budget: u64 = 5 << 20;
    let (report, _) = defrag(&s, &["--mode", "bypass", "-j", "2", "--budget", "5M"]);
    let sum = &report["summary"];
    assert!(
        sum["bytes_planned"].as_u64().unwrap() > 2 * budget,
        "the plan must exceed the budget for this to test anything: {sum}"
    );
    let moved: u64 = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["ranges"].as_array().unwrap())
        .filter(|r| r["status"] == "moved")
        .map(|r| r["length"].as_u64().unwrap())
        .sum();
    assert_eq!(moved, sum["bytes_moved"].as_u64().unwrap(), "{sum}");
    assert!(moved <= budget, "moved {moved} > budget {budget}: {sum}");
    assert!(moved > 0, "{sum}");
    assert_eq!(sum["budget_exhausted"], true, "{sum}");
    s.destroy().unwrap();
}

/// A range skipped for the budget between ranges that move leaves every moved range
/// checked against its own checksum: results and checksums were kept in two lists, and a
/// budget skip in the middle of a file shifted every later pair (a skipped range reported
/// VERIFY FAILED, the moved one after it unchecked; CI saw it under -j 2).
#[test]
fn budget_skip_between_moves_keeps_each_range_with_its_checksum() {
    let s = scratch(FsType::Ext4, 256 << 20, &["-m", "0"]);
    let f = s.mountpoint().join("a.db");
    fill_punch_fragment(&s, &f, 4 << 20, 16 << 10);
    // In offset order: 1 MiB (over the budget), then two of 128 KiB (within it).
    let hot = [
        (0u64, 1u64 << 20),
        (2 << 20, 128 << 10),
        (3 << 20, 128 << 10),
    ];
    let ranges: Vec<Value> = hot
        .iter()
        .map(|&(o, l)| serde_json::json!({"offset": o, "length": l, "reads": 5}))
        .collect();
    let profile = s.mountpoint().join("p.json");
    std::fs::write(
        &profile,
        serde_json::json!({"version": 1, "kind": "fragkit-trace-profile",
            "files": [{"path": f, "ranges": ranges}]})
        .to_string(),
    )
    .unwrap();
    let before = file_hash(&f);
    let (report, code) = defrag(
        &s,
        &[
            "--mode",
            "pick",
            "--profile",
            &profile.to_string_lossy(),
            "-j",
            "1",
            "--budget",
            "512K",
        ],
    );
    let sum = &report["summary"];
    assert_eq!(code, 0, "{sum}");
    assert_eq!(sum["verify_failures"], 0, "{report}");
    assert_eq!(sum["budget_exhausted"], true, "{sum}");
    let got: Vec<(u64, &str, Value)> = report["files"][0]["ranges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["offset"].as_u64().unwrap(),
                r["status"].as_str().unwrap(),
                r["verified"].clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (0, "skipped", Value::Null),
            (2 << 20, "moved", Value::Bool(true)),
            (3 << 20, "moved", Value::Bool(true)),
        ],
        "{report}"
    );
    assert_eq!(sum["bytes_moved"], 256 << 10, "{sum}");
    assert_eq!(file_hash(&f), before);
    s.destroy().unwrap();
}

/// Full mode writes about what it moves, with verification on: the
/// before-checksum must not pull the range through the page cache (commit 5ef4bc4; the
/// buffered read made MOVE_EXT write 4.2× the bytes moved). Device counters of the loop
/// device, the whole run plus a final sync.
#[test]
fn full_mode_writes_about_what_it_moves_on_ext4() {
    // 384 MiB, not aged()'s 256: there the free space left after aging (60 MiB in runs of
    // 9 KiB on average; the aging is unseeded) sometimes cannot hold a 32 MiB file in fewer
    // pieces than it has, and full mode rightly skips both files (3 of 7 runs); on 384 MiB
    // both moved in 3 of 3.
    let s = paf_aged(FsType::Ext4, 384 << 20, "2", "32M");
    let dev = BlockDevice::from_name(&s.device_name()).unwrap();
    // Cold, as for a file system aged long ago: the source must come from the device.
    drop_caches();
    let drops = drop_pagecache_count();
    let t0 = dev.stats().unwrap();
    // -j 1, the default: with -j 2 the two files' plans count on the same free runs and one
    // may be skipped as "no contiguous space".
    let (report, _) = defrag(&s, &["--mode", "full", "-j", "1"]);
    nix::unistd::sync();
    let d = t0.delta(&dev.stats().unwrap());
    let moved = report["summary"]["bytes_moved"].as_u64().unwrap();
    eprintln!(
        "full -j 1: moved {moved} bytes, device wrote {} bytes in {} requests, {} flushes",
        d.write_bytes, d.writes, d.flushes
    );
    assert!(
        moved >= 32 << 20,
        "too little moved to judge: {}",
        report["summary"]
    );
    let limit = moved + moved * 3 / 10 + (4 << 20);
    assert!(
        d.write_bytes <= limit,
        "device wrote {} bytes for {moved} moved (limit 1.3× + 4 MiB = {limit}); {} write requests, {} flushes",
        d.write_bytes,
        d.writes,
        d.flushes
    );
    assert_eq!(report["summary"]["verify_failures"], 0);
    // The fragmented source of every range tried is read from the device once
    // (readahead, then the before-checksum from those cached pages, then MOVE_EXT finds
    // them) and the moved data once more (the O_DIRECT after-checksum), plus the scan's
    // metadata. The old O_DIRECT before-checksum read each source a second time (measured
    // here: 2 × 32 MiB planned, 32 MiB moved, 96.8 MiB read now; about 130 before).
    let sum = &report["summary"];
    assert!(
        sum["checksum_chunks_cached"].as_u64().unwrap() > 0,
        "before-checksums not from the cache: {sum}"
    );
    if drop_pagecache_count() != drops {
        // Another process dropped the caches meanwhile (other benchmarks do): pages read
        // ahead were evicted and read again, which says nothing about this code.
        eprintln!("caches dropped by another process during the run: read bound not checked");
        s.destroy().unwrap();
        return;
    }
    let planned = sum["bytes_planned"].as_u64().unwrap();
    let read_limit = planned + moved + (planned + moved) / 10 + (8 << 20);
    assert!(
        d.read_bytes <= read_limit,
        "device read {} bytes for {planned} planned and {moved} moved (limit: each once, + 10% + 8 MiB = {read_limit}): a source was read more than once; {sum}",
        d.read_bytes
    );
    s.destroy().unwrap();
}

/// How often the page cache was dropped through /proc/sys/vm/drop_caches (/proc/vmstat).
fn drop_pagecache_count() -> u64 {
    std::fs::read_to_string("/proc/vmstat")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("drop_pagecache "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn jobs_0_is_a_one_line_error() {
    let err = fragkit_error(&["defrag", "-j", "0", "/nonexistent"]);
    assert!(
        err.starts_with("fragkit: ") && err.contains("-j 0"),
        "{err:?}"
    );
    assert!(err.contains("at least 1"), "{err:?}");
}

/// A file an application has just read sits in the page cache in large folios (a buffered
/// read's readahead allocates them); MOVE_EXT over them wrote 3.4× the bytes moved (111 MB
/// for 32 MiB). Defrag drops the clean pages first, so its own readahead brings them back
/// in order-0 folios: the device writes about what was moved.
#[test]
fn a_file_the_application_just_read_costs_no_more_writes() {
    let s = scratch(FsType::Ext4, 512 << 20, &["-m", "0"]);
    let f = s.mountpoint().join("hot");
    fragkit::age::layout::build(&fragkit::age::layout::LayoutSpec {
        path: f.clone(),
        size: 32 << 20,
        frag_size: 32 << 10,
        frag_distance: 224 << 10,
        seed: 3,
        force: false,
        progress: false,
    })
    .unwrap();
    drop_caches();
    // The application's read: buffered, whole file.
    std::fs::read(&f).unwrap();
    let dev = BlockDevice::from_name(&s.device_name()).unwrap();
    let t0 = dev.stats().unwrap();
    let (report, code) = defrag(&s, &["--mode", "bypass"]);
    nix::unistd::sync();
    let d = t0.delta(&dev.stats().unwrap());
    let moved = report["summary"]["bytes_moved"].as_u64().unwrap();
    assert_eq!(code, 0, "{report}");
    assert_eq!(moved, 32 << 20, "{}", report["summary"]);
    let limit = moved + moved * 3 / 10 + (4 << 20);
    assert!(
        d.write_bytes <= limit,
        "device wrote {} bytes for {moved} moved (limit 1.3× + 4 MiB = {limit})",
        d.write_bytes
    );
    s.destroy().unwrap();
}
