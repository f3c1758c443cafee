//! The seeds' fragmenting workloads on real file systems: FAST'24 hypothetical and
//! FragPicker's synthetic round-robin appends.

mod common;

use common::*;
use fragkit::age::hypothetical::{build, HypotheticalMode, HypotheticalPattern, HypotheticalSpec};
use fragkit::cli::FsType;
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
