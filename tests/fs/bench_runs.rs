//! `fragkit bench sweep | dof | paf` end to end: each makes its own scratch file systems,
//! lays files out with `age`, reads them through the I/O engine, and reports what the
//! device saw. The assertions are about request counts (deterministic), never timing.

use crate::common;

use std::collections::BTreeMap;

use common::*;

const K: u64 = 1024;

fn points(doc: &serde_json::Value) -> &Vec<serde_json::Value> {
    doc["points"].as_array().expect("points array")
}

/// FragPicker's motivation result on ext4: the device's read requests rise as the frag
/// size falls below the 128 KiB request, stay flat above it, and do not depend on the
/// frag distance; CC and NLRS are reported; the plot is a PNG.
#[test]
fn sweep_ext4_requests_follow_frag_size_not_distance() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("sweep.png");
    let doc = fragkit_json(&[
        "bench",
        "sweep",
        "--frag-size",
        "16K..512K",
        "--frag-distance",
        "4K,1M",
        "--size",
        "4M",
        "--iterations",
        "1",
        "--plot",
        &png.to_string_lossy(),
        "--format",
        "json",
    ]);
    assert_eq!(doc["fs"], "ext4");
    assert_eq!(doc["request_size"], 128 * K);
    let mut reads: BTreeMap<(u64, u64), f64> = BTreeMap::new();
    for p in points(&doc) {
        let f = p["frag_size"].as_u64().unwrap();
        let d = p["frag_distance"].as_u64().unwrap();
        let r = p["device_reads"].as_f64().unwrap();
        let split = p["predicted_split"].as_u64().unwrap() as f64;
        // The layout is what was asked for, and the device did what the layout predicts.
        assert_eq!(
            p["fragments"].as_u64().unwrap(),
            (4 << 20) / f,
            "F={f} D={d}"
        );
        // Beyond 2%, up to 4 reads of metadata: another test's drop_caches during the pass
        // makes the device read the inode table (one readahead request), the extent
        // tree's index and leaf blocks and the directory again (once, in CI at 049340c+:
        // 35 reads for S = 32 while other work dropped caches).
        assert!(
            (r - split).abs() <= split * 0.02 + 4.0,
            "F={f} D={d}: device {r} reads, S(128K) {split}"
        );
        reads.insert((f, d), r);
    }
    assert_eq!(reads.len(), 12);
    for d in [4 * K, 1024 * K] {
        let at = |f: u64| reads[&(f * K, d)];
        // Below the request size: every halving of F doubles the requests (±5%).
        for f in [16, 32, 64] {
            assert!(
                at(f) > at(2 * f) * 1.9,
                "D={d}: F={f}K {} vs {}",
                at(f),
                at(2 * f)
            );
        }
        // At and above it: flat.
        for f in [256, 512] {
            assert!(
                // + 2: a stray metadata read of the device's (an extent block, the journal)
                // is one request in a count of ~32.
                (at(f) - at(128)).abs() <= at(128) * 0.05 + 2.0,
                "D={d}: F={f}K {} vs F=128K {}",
                at(f),
                at(128)
            );
        }
    }
    // No dependence on distance.
    for f in [16, 32, 64, 128, 256, 512] {
        let (a, b) = (reads[&(f * K, 4 * K)], reads[&(f * K, 1024 * K)]);
        assert!(
            (a - b).abs() <= a.max(b) * 0.03 + 2.0,
            "F={f}K: D=4K {a} vs D=1M {b}"
        );
    }
    let corr = doc["correlations"].as_array().unwrap();
    let find = |param: &str, resp: &str| {
        corr.iter()
            .find(|c| c["parameter"] == param && c["response"] == resp)
            .unwrap_or_else(|| panic!("no correlation {param} vs {resp}"))
    };
    for param in ["frag_size", "frag_distance"] {
        for resp in ["mb_per_s", "device_reads"] {
            let c = find(param, resp);
            assert!(c["cc"].as_f64().unwrap().abs() <= 1.0 + 1e-9);
            assert!(c["nlrs"].is_f64(), "{param}/{resp}: {c}");
        }
    }
    assert!(find("frag_size", "device_reads")["cc"].as_f64().unwrap() < -0.5);
    assert!(
        find("frag_distance", "device_reads")["cc"]
            .as_f64()
            .unwrap()
            .abs()
            < 0.1
    );
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    let err = fragkit_error(&["bench", "sweep", "--frag-size", "6K,8K"]);
    assert!(
        err.contains("--frag-size 6144") && err.contains("4 KiB"),
        "{err}"
    );
}

/// FAST'24's DoF experiment: each DoF is laid out exactly, and the device's read requests
/// (plus the block layer's merges) equal DoF once fragments are no larger than a device
/// request, doubling with it, at both queue depths.
#[test]
fn dof_requests_rise_with_fragments() {
    require_root();
    let doc = fragkit_json(&[
        "bench",
        "dof",
        "--dof",
        "1,4,16,64,256",
        "--qd",
        "1,8",
        "--iterations",
        "1",
        "--format",
        "json",
    ]);
    // The worst-case device request (max_segments pages); a buffer whose pages happen to
    // be physically adjacent makes fewer segments, so requests can reach the user's 1 MiB.
    let cap = doc["effective_request_size"].as_u64().unwrap();
    let ideal = (8u64 << 20) / cap;
    let fewest = (8u64 << 20) / (1 << 20);
    let mut by_qd: BTreeMap<u64, Vec<(u64, f64)>> = BTreeMap::new();
    for p in points(&doc) {
        let dof = p["dof"].as_u64().unwrap();
        let qd = p["queue_depth"].as_u64().unwrap();
        assert_eq!(p["fragments"].as_u64().unwrap(), dof);
        // At depth the block layer may merge adjacent requests: count them too.
        let r = p["device_reads"].as_f64().unwrap() + p["device_read_merges"].as_f64().unwrap();
        if dof >= ideal {
            // Fragments no larger than any device request: one request per fragment.
            let expected = dof as f64;
            assert!(
                (r - expected).abs() <= expected * 0.02 + 2.0,
                "DoF {dof} QD {qd}: {r} reads, expected {expected}"
            );
        } else {
            let lo = dof.max(fewest) as f64;
            assert!(
                r >= lo && r <= ideal as f64 + 2.0,
                "DoF {dof} QD {qd}: {r} reads, expected {lo}..{ideal}"
            );
        }
        by_qd.entry(qd).or_default().push((dof, r));
    }
    assert_eq!(by_qd.len(), 2);
    for (qd, v) in by_qd {
        let small: Vec<_> = v.iter().filter(|(d, _)| *d >= ideal).collect();
        assert!(small.len() >= 3, "QD {qd}: {v:?}");
        assert!(
            small.windows(2).all(|w| w[1].1 > w[0].1 * 1.9),
            "QD {qd}: {v:?}"
        );
        assert!(
            v.last().unwrap().1 > 8.0 * v.first().unwrap().1,
            "QD {qd}: {v:?}"
        );
    }
}

/// A tiny PaF matrix: rows land in the CSV; a second run with more cells measures only
/// the new ones and leaves the old rows untouched; the structures fill what they should;
/// range syntax errors name the character.
#[test]
fn paf_matrix_is_resumable() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("paf.csv");
    let csv_s = csv.to_string_lossy().to_string();
    let run = |caps: &str| {
        fragkit_json(&[
            "bench",
            "paf",
            "--capacities",
            caps,
            "--frag",
            "0,50",
            "--xfer",
            "1M..2M",
            "--iterations",
            "1",
            "--fs-size",
            "256M",
            "--bench-size",
            "32M",
            "--file-size",
            "4M",
            "--csv",
            &csv_s,
            "--plot-dir",
            &dir.path().join("plots").to_string_lossy(),
            "--format",
            "json",
        ])
    };
    let first = run("40");
    assert_eq!(first["measured_cells"], 2);
    assert_eq!(first["skipped_cells"], 0);
    let before = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(before.lines().count(), 1 + 2 * 2 * 2, "{before}");
    let second = run("20..40/20");
    assert_eq!(second["measured_cells"], 2, "only the 20% cells are new");
    assert_eq!(second["skipped_cells"], 2);
    let after = std::fs::read_to_string(&csv).unwrap();
    assert!(after.starts_with(&before), "earlier rows rewritten");
    assert_eq!(after.lines().count(), 1 + 4 * 2 * 2);
    let rows = second["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 16);
    let row = |cap: u64, frag: u64| {
        rows.iter()
            .find(|r| r["capacity_pct"] == cap && r["frag_pct"] == frag && r["op"] == "write")
            .unwrap()
    };
    for r in rows {
        assert!(r["mb_per_s_mean"].as_f64().unwrap() > 0.0);
        assert!(r["device_requests"].as_f64().unwrap() >= 16.0, "{r}");
    }
    let used = |c, f| row(c, f)["used_pct"].as_f64().unwrap();
    assert!(used(40, 0) > used(20, 0) + 10.0);
    assert!(used(40, 50) < used(40, 0) - 10.0);
    // Every write left a mapped file (fragment counts themselves depend on where ext4's
    // allocator puts a 32 MiB file among 4 MiB holes, so only their presence is checked).
    for r in rows {
        assert!(r["bench_file_fragments"].as_f64().unwrap() >= 1.0, "{r}");
    }
    for x in ["1M", "2M"] {
        let png = std::fs::read(dir.path().join(format!("plots/paf-{x}.png"))).unwrap();
        assert_eq!(&png[..4], b"\x89PNG");
    }
    let err = fragkit_error(&["bench", "paf", "--capacities", "10..8x0", "--csv", &csv_s]);
    assert!(err.contains("at character 6 found 'x'"), "{err}");
}
