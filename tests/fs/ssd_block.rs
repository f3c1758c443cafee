//! `fragkit trace --block` on a real scratch ext4, replayed by `fragkit ssd`: the recording
//! holds the workload's requests (none dropped, reads resolved to the file that was read)
//! and the model's answer is the same, bit for bit, every time.

use crate::common;

use common::{fragkit_json, scratch, trace_block};
use fragkit::scratch::FsType;

#[test]
fn block_trace_records_the_workload_and_replays_deterministically() {
    let s = scratch(FsType::Ext4, 256 << 20, &[]);
    let mnt = s.info.mountpoint.clone();
    let dev = s.info.loop_device.clone();
    let out = tempfile::tempdir().unwrap();
    let trace = out.path().join("blk.json");
    // The FAST'24 hypothetical sequence, small: 32 KiB of T, fdatasync, a 224 KiB dummy
    // file, fdatasync; then T read back with O_DIRECT 1 MiB reads.
    let script = format!(
        "for i in $(seq 0 31); do \
           dd if=/dev/zero of={m}/T bs=32K count=1 oflag=append conv=notrunc,fdatasync status=none; \
           dd if=/dev/zero of={m}/D$i bs=224K count=1 conv=fdatasync status=none; \
         done; sync; echo 3 > /proc/sys/vm/drop_caches; \
         dd if={m}/T of=/dev/null bs=1M iflag=direct status=none",
        m = mnt.display()
    );
    let t = trace_block(&dev, &mnt, &trace, &script);
    assert_eq!(t["kind"], "fragkit-blktrace");
    assert_eq!(t["dropped"], 0);
    let reqs = t["requests"].as_array().unwrap();
    let ino = std::fs::metadata(mnt.join("T")).map(|m| {
        use std::os::unix::fs::MetadataExt;
        m.ino()
    });
    let ino = ino.unwrap();
    let bytes = |op: &str, of_t: bool| -> u64 {
        reqs.iter()
            .filter(|r| r["op"] == op && (!of_t || r["inode"] == ino))
            .map(|r| r["bytes"].as_u64().unwrap())
            .sum()
    };
    // T's 1 MiB of data was read from the device exactly once, and resolved to T.
    assert_eq!(bytes("read", true), 1 << 20);
    // Every byte written by the workload reached the device (more: metadata, journal).
    assert!(bytes("write", false) >= 32 * (32 << 10) + 32 * (224 << 10));
    assert!(bytes("write", true) >= 1 << 20);
    for r in reqs {
        assert!(r["complete_ns"].as_u64() >= r["issue_ns"].as_u64());
    }
    // The model: same trace, same parameters, same numbers.
    let a = fragkit_json(&["ssd", trace.to_str().unwrap(), "--format", "json"]);
    let b = fragkit_json(&["ssd", trace.to_str().unwrap(), "--format", "json"]);
    assert_eq!(a, b);
    let r = &a["report"];
    assert!(r["read_bytes"].as_u64().unwrap() >= 1 << 20);
    assert!(r["read_mb_s"].as_f64().unwrap() > 0.0);
    assert_eq!(r["die_utilisation"].as_array().unwrap().len(), 8);
    let c = fragkit_json(&[
        "ssd",
        trace.to_str().unwrap(),
        "--approach",
        "--format",
        "json",
    ]);
    assert_eq!(c["report"]["read_bytes"], r["read_bytes"]);
}

#[test]
fn bad_model_parameters_get_one_line_errors() {
    for (spec, want) in [
        ("32K,100K", "not a multiple of g"),
        ("24K,48K", "power of two"),
        ("0,1M", "must be > 0"),
        ("nvme-z", "expected fast24"),
    ] {
        let e = common::fragkit_error(&["ssd", "/nonexistent.json", "--model", spec]);
        assert!(e.contains(want), "{spec}: {e}");
    }
}
