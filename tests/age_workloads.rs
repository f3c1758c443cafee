//! The seeds' fragmenting workloads on real file systems: FAST'24 hypothetical and
//! FragPicker's synthetic round-robin appends.

mod common;

use common::*;
use fragkit::age::hypothetical::{build, HypotheticalMode, HypotheticalPattern, HypotheticalSpec};
use fragkit::scratch::FsType;
use fragkit::scratch::{Scratch, ScratchSpec};

#[test]
fn hypothetical_worst_append_gives_256_fragments_on_ext4_nodelalloc() {
    require_root();
    // The artifact's mount: ext4 nodelalloc.
    let mut spec = ScratchSpec::new(FsType::Ext4, 256 << 20);
    spec.mount_options = Some("nodelalloc".into());
    let s = Scratch::create(&spec).unwrap();
    let r = build(&HypotheticalSpec {
        path: s.mountpoint().join("T0"),
        mode: HypotheticalMode::Append,
        pattern: HypotheticalPattern::Worst,
        chunk: 32 << 10,
        stripe: 256 << 10,
        size: 8 << 20,
        direct: false,
        tune: true,
        keep_dummies: false,
        seed: 1,
    })
    .unwrap();
    assert_eq!(r.chunks, 256);
    assert_eq!(r.achieved.size, 8 << 20);
    assert_eq!(r.achieved.fragments, 256, "{:?}", r.achieved.frag_sizes);
    assert!(r.setup.nodelalloc, "{}", r.setup.mount_options);
    assert_eq!(r.dummy_bytes, 256 * (224 << 10));
    // Every fragment is one chunk; most gaps are exactly the dummy (S - G).
    assert_eq!(r.achieved.frag_sizes.min, 32 << 10);
    assert_eq!(r.achieved.frag_sizes.max, 32 << 10);
    assert_eq!(r.achieved.frag_distances.min, 224 << 10);
    // Dummies are gone, the knob is restored.
    assert!(!s.mountpoint().join("T0.dummies").exists());
    let dev = s.device_name();
    let knob = std::fs::read_to_string(format!("/sys/fs/ext4/{dev}/mb_stream_req")).unwrap();
    assert_eq!(knob.trim(), "16");
}

#[test]
fn fragpicker_synthetic_interleaves_exactly_on_btrfs_and_xfs() {
    for (fs, size) in [(FsType::Btrfs, 256u64 << 20), (FsType::Xfs, 320 << 20)] {
        let s = scratch(fs, size, &[]);
        let r = fragkit::age::fragpicker::synthetic(&s.mountpoint().join("syn"), 4, 1 << 20, 3)
            .unwrap();
        assert_eq!(r.rounds, 4);
        assert_eq!(r.expected_fragments_per_file, 132);
        for f in &r.files {
            assert_eq!(f.size, 1 << 20);
            assert_eq!(f.fragments, 132, "{} {}", fs.name(), f.path.display());
            assert_eq!(f.frag_sizes.min, 4096);
            assert_eq!(f.frag_sizes.max, 128 << 10);
        }
    }
}

#[test]
fn profile_records_a_time_series_and_repeats_with_the_seed() {
    use fragkit::age::profile::{run, ProfileSpec, SizeProfile};
    let mut digests = Vec::new();
    for _ in 0..2 {
        let s = scratch(FsType::Ext4, 256 << 20, &[]);
        let r = run(&ProfileSpec {
            target: s.mountpoint().to_path_buf(),
            fullness_pct: 60.0,
            sizes: SizeProfile::load("office").unwrap(),
            churn: 0.5,
            steps: 4,
            seed: 21,
            force: false,
            progress: false,
        })
        .unwrap();
        assert_eq!(r.series.len(), 5, "one point after the fill, one per step");
        assert!(r.files_deleted > 0 && r.files_created > r.files_deleted);
        assert!(r.bytes_written as f64 >= 0.5 * r.capacity as f64);
        for p in &r.series {
            assert!((0.0..=1.0).contains(&p.layout_score));
            assert!(
                p.used_pct < 65.0 && p.used_pct > 45.0,
                "step {}: {:.1}%",
                p.step,
                p.used_pct
            );
            let fs = p.free_space.as_ref().expect("GETFSMAP on ext4");
            assert_eq!(fs.source, "getfsmap");
            assert!(fs.extents.count > 0);
        }
        // Churn fragments free space: more free extents at the end than after the fill.
        assert!(
            r.series[4].free_space.as_ref().unwrap().extents.count
                > r.series[0].free_space.as_ref().unwrap().extents.count
        );
        let steps: Vec<u64> = r.series.iter().map(|p| p.churn_bytes).collect();
        assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
        digests.push((r.file_set_digest.clone(), r.files_created, r.files_deleted));
    }
    assert_eq!(digests[0], digests[1], "same seed, same file set");
}
