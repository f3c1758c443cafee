//! `age layout` builds the layout it promises: fragments of F bytes, D bytes apart, as
//! fragkit's own FIEMAP scan sees them, on real ext4, xfs and btrfs.

use crate::common;

use common::*;
use fragkit::age::layout::{build, LayoutSpec, Technique};
use fragkit::scratch::FsType;

const K: u64 = 1024;

fn fidelity_on(fs: FsType, distances: &[u64], frag_sizes: &[u64]) {
    let s = scratch(fs, 512 << 20, &[]);
    let mut failures = Vec::new();
    for &f in frag_sizes {
        for &d in distances {
            // Far apart fragments span size/F × D: keep 64 of them so the span fits.
            let size = if d == 4 * K { 4 << 20 } else { 64 * f };
            let path = s.mountpoint().join(format!("layout-{f}-{d}"));
            let spec = LayoutSpec {
                path: path.clone(),
                size,
                frag_size: f,
                frag_distance: d,
                seed: 7,
                force: false,
                progress: false,
            };
            let r = build(&spec).unwrap_or_else(|e| panic!("{} F={f} D={d}: {e:#}", fs.name()));
            let expected = match fs {
                FsType::Btrfs => Technique::Reflink,
                FsType::Xfs if f == 4 * K || f >= 128 * K => Technique::Reflink,
                _ => Technique::FillAndPunch,
            };
            assert_eq!(r.technique, expected);
            assert_eq!(r.achieved.size, size);
            assert_eq!(r.requested.fragments, size / f);
            eprintln!(
                "{} F={f} D={d}: {} fragments, size fidelity {:.3}, distance fidelity {:.3}",
                fs.name(),
                r.achieved.fragments,
                r.size_fidelity,
                r.distance_fidelity
            );
            if r.size_fidelity < 0.95 || r.distance_fidelity < 0.95 {
                failures.push(format!(
                    "F={f} D={d}: size {:.3} distance {:.3} ({} fragments)",
                    r.size_fidelity, r.distance_fidelity, r.achieved.fragments
                ));
            }
            std::fs::remove_file(&path).unwrap();
            nix::unistd::sync();
        }
    }
    assert!(failures.is_empty(), "{}: {failures:?}", fs.name());
    // Nothing of the technique's scaffolding is left behind.
    let left: Vec<_> = std::fs::read_dir(s.mountpoint())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with(".fragkit"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

const ALL_F: [u64; 3] = [4 * K, 16 * K, 64 * K];

#[test]
fn layout_fidelity_ext4() {
    fidelity_on(FsType::Ext4, &[4 * K, 1024 * K], &ALL_F);
}

#[test]
fn layout_fidelity_xfs() {
    fidelity_on(FsType::Xfs, &[4 * K, 1024 * K], &ALL_F);
}

/// From 128 KiB up, xfs's per-AG headroom leaves no room for fill-and-punch: reflink.
#[test]
fn layout_fidelity_xfs_large_fragments() {
    fidelity_on(FsType::Xfs, &[4 * K, 1024 * K], &[128 * K, 1024 * K]);
}

#[test]
fn layout_fidelity_btrfs() {
    fidelity_on(FsType::Btrfs, &[4 * K, 1024 * K], &ALL_F);
}

#[test]
fn layout_refuses_sizes_off_the_block_grid() {
    let s = scratch(FsType::Ext4, 64 << 20, &[]);
    let spec = LayoutSpec {
        path: s.mountpoint().join("x"),
        size: 1 << 20,
        frag_size: 6000,
        frag_distance: 4096,
        seed: 1,
        force: false,
        progress: false,
    };
    let e = build(&spec).unwrap_err().to_string();
    assert!(e.contains("--frag-size 6000") && e.contains("4096"), "{e}");
}

#[test]
fn layout_cli_json_reports_requested_and_achieved() {
    let s = scratch(FsType::Btrfs, 256 << 20, &[]);
    let path = s.mountpoint().join("cli");
    let v = fragkit_json(&[
        "age",
        "layout",
        path.to_str().unwrap(),
        "--size",
        "1M",
        "--frag-size",
        "64K",
        "--frag-distance",
        "128K",
        "--format",
        "json",
    ]);
    assert_eq!(v["version"], 1);
    assert_eq!(v["technique"], "reflink");
    assert_eq!(v["requested"]["fragments"], 16);
    assert_eq!(v["requested"]["frag_distance"], 131072);
    assert_eq!(
        v["achieved"]["fragments"],
        v["fragments"].as_array().unwrap().len()
    );
    assert_eq!(v["achieved"]["frag_sizes"]["min"], 65536);
    assert!(v["distance_fidelity"].as_f64().unwrap() >= 0.9);
    // fragkit scan agrees with the generator's own check.
    let scan = fragkit_json(&["scan", path.to_str().unwrap(), "--format", "json"]);
    assert_eq!(scan["files"][0]["fragments"], v["achieved"]["fragments"]);
}

/// Held-out values (not those the techniques were tuned on), 8 MiB files as `bench sweep`
/// lays them out: at least 98% of fragments exactly F and of gaps exactly D, and every piece
/// that is off comes with a reason. The whole grid: bench/layout-grid.sh.
fn held_out(fs: FsType, scratch_size: u64, points: &[(u64, u64)]) {
    let s = scratch(fs, scratch_size, &[]);
    let mut failures = Vec::new();
    for &(f, d) in points {
        let path = s.mountpoint().join(format!("held-{f}-{d}"));
        let r = build(&LayoutSpec {
            path: path.clone(),
            size: 8 << 20,
            frag_size: f,
            frag_distance: d,
            seed: 11,
            force: false,
            progress: false,
        })
        .unwrap_or_else(|e| panic!("{} F={f} D={d}: {e:#}", fs.name()));
        let o = &r.off_pieces;
        eprintln!(
            "{} F={f} D={d}: {} fragments, exact F {:.4}, exact D {:.4}, off {:?}",
            fs.name(),
            r.achieved.fragments,
            o.exact_fragments,
            o.exact_gaps,
            o.by_reason
        );
        assert!(o.pieces.iter().all(|p| !p.reason.is_empty()));
        assert_eq!(o.by_reason.values().sum::<usize>(), o.count);
        if o.exact_fragments < 0.98 || o.exact_gaps < 0.98 {
            failures.push(format!("F={f} D={d}: {o:?}"));
        }
        std::fs::remove_file(&path).unwrap();
        nix::unistd::sync();
    }
    assert!(failures.is_empty(), "{}: {failures:#?}", fs.name());
}

#[test]
fn layout_held_out_ext4_and_xfs_12k_1m() {
    // 683 fragments 1 MiB apart span 691 MiB: across ext4 block groups and xfs AGs.
    held_out(FsType::Ext4, 1 << 30, &[(12 * K, 1024 * K)]);
    held_out(FsType::Xfs, 1 << 30, &[(12 * K, 1024 * K)]);
}

/// btrfs's first data block group (made by mkfs) is 8 MiB: a pattern running off its end
/// continued ~270 MiB further on (one gap off in 7 for F = 1 MiB).
#[test]
fn layout_held_out_btrfs() {
    held_out(
        FsType::Btrfs,
        1 << 30,
        &[
            (1024 * K, 4 * K),
            (1024 * K, 1024 * K),
            (48 * K, 200 * K),
            (4 * K, 4 * K),
        ],
    );
}
