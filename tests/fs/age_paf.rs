//! `age paf` on a real 1 GiB scratch file system: fill lands on the target, the right share
//! of files is deleted, and the same seed gives the same file set.

use crate::common;

use common::*;
use fragkit::age::paf::{run, PafOptions, PafSpec};
use fragkit::scratch::FsType;

fn listing(root: &std::path::Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for g in std::fs::read_dir(root.join("paf")).unwrap() {
        let g = g.unwrap();
        for f in std::fs::read_dir(g.path()).unwrap() {
            let f = f.unwrap();
            out.push((
                format!(
                    "{}/{}",
                    g.file_name().to_string_lossy(),
                    f.file_name().to_string_lossy()
                ),
                f.metadata().unwrap().len(),
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn paf_50_30_fills_deletes_and_repeats() {
    let spec = PafSpec::parse("PAF:50.30:11@8M").unwrap();
    let opts = PafOptions {
        threads: 2,
        ..Default::default()
    };
    let a = scratch(FsType::Ext4, 1 << 30, &[]);
    let ra = run(&spec, a.mountpoint(), &opts).unwrap();
    let g = &ra.generations[0];
    assert!(
        (g.used_pct_after_fill - 50.0).abs() <= 2.0,
        "fill reached {:.2}%",
        g.used_pct_after_fill
    );
    let want = g.files_written as f64 * 0.3;
    assert!(
        (g.files_deleted as f64 - want).abs() <= 1.0,
        "deleted {} of {}",
        g.files_deleted,
        g.files_written
    );
    let la = listing(a.mountpoint());
    assert_eq!(la.len() as u64, g.files_written - g.files_deleted);
    assert!(la.iter().all(|(_, s)| *s == 8 << 20));
    let fs = ra.free_space.as_ref().expect("free space on ext4");
    assert_eq!(fs.source, "getfsmap");
    assert!(fs.extents.count > 0);
    drop(a);

    // Same seed on a fresh file system: the same names, sizes and deletions.
    let b = scratch(FsType::Ext4, 1 << 30, &[]);
    let rb = run(&spec, b.mountpoint(), &opts).unwrap();
    assert_eq!(listing(b.mountpoint()), la);
    assert_eq!(rb.file_set_digest, ra.file_set_digest);
    assert_eq!(rb.generations[0].deleted, ra.generations[0].deleted);
    // Refuses to age it again (already holds paf/, already above the target).
    assert!(run(&spec, b.mountpoint(), &opts).is_err());
}

#[test]
fn paf_refuses_a_non_scratch_target() {
    let dir = tempfile::tempdir().unwrap();
    let spec = PafSpec::parse("PAF:10.10@1M").unwrap();
    let e = run(&spec, dir.path(), &PafOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a fragkit scratch file system"), "{e}");
}

#[test]
fn paf_bad_specs_get_one_line() {
    for (spec, needle) in [
        ("PAF:70", "character 7"),
        ("PAF:70.30@", "character 11"),
        ("PAF:170.30@1M", "character 5"),
        ("PAF:70.30@1X", "character 12"),
    ] {
        let out = fragkit(&["age", "paf", spec, "--target", "/nonexistent"]);
        assert_eq!(out.status.code(), Some(2), "{spec}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{spec}: {err}");
        assert!(err.contains(needle), "{spec}: {err}");
    }
}

/// The lab's default structure on a 512 MiB btrfs: 85% of the whole device (metadata DUP
/// included) is more than btrfs can hold as data, and the fill ran into ENOSPC. The
/// percentages are of what btrfs can store as data.
#[test]
fn paf_85_50_fits_a_512m_btrfs() {
    let spec = PafSpec::parse("PAF:85.50@64K").unwrap();
    let opts = PafOptions {
        threads: 2,
        ..Default::default()
    };
    let s = scratch(FsType::Btrfs, 512 << 20, &[]);
    let r = run(&spec, s.mountpoint(), &opts).unwrap_or_else(|e| panic!("{e:#}"));
    let g = &r.generations[0];
    assert!(
        (g.used_pct_after_fill - 85.0).abs() <= 3.0,
        "fill reached {:.2}%",
        g.used_pct_after_fill
    );
    assert!(g.files_written > 5000, "{} files", g.files_written);
}
