//! `fragkit bench fragpicker`: the requests the device saw are the ones FragPicker's
//! read_seq / read_stride / write_seq / write_stride issue (128 KiB O_DIRECT at QD 1,
//! 288 KiB skipped between stride requests), recorded with `fragkit trace --block`.

use crate::common;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;

use common::{fragkit, scratch, trace_block, write_file};
use fragkit::scratch::FsType;

const K: u64 = 1024;

#[test]
fn fragpicker_preset_issues_fragpickers_requests() {
    let s = scratch(FsType::Ext4, 64 << 20, &[]);
    let mnt = s.info.mountpoint.clone();
    let dev = s.info.loop_device.clone();
    // 2144 KiB: five stride periods of 416 KiB plus 64 KiB, so every loop's tail rule
    // shows: read_stride's sixth read is 64 KiB long, write_stride stops at five, and the
    // sequential jobs end with a 96 KiB request.
    let size = 5 * 416 * K + 64 * K;
    let file = mnt.join("f");
    write_file(&file, size as usize, 0x33);
    let ino = std::fs::metadata(&file).unwrap().ino();
    let out = tempfile::tempdir().unwrap();
    let trace = out.path().join("blk.json");
    let report = out.path().join("report.json");
    let cmd = format!(
        "{} bench fragpicker --runs 1 --format json {} > {}",
        env!("CARGO_BIN_EXE_fragkit"),
        file.display(),
        report.display()
    );
    let t = trace_block(&dev, &mnt, &trace, &cmd);

    // What FragPicker's programs issue, each run twice (one unmeasured, one measured).
    let seq: Vec<(u64, u64)> = (0..size.div_ceil(128 * K))
        .map(|k| (k * 128 * K, (128 * K).min(size - k * 128 * K)))
        .collect();
    let stride_read: Vec<(u64, u64)> = (0..6)
        .map(|k| (k * 416 * K, (128 * K).min(size - k * 416 * K)))
        .collect();
    let stride_write: Vec<(u64, u64)> = (0..5).map(|k| (k * 416 * K, 128 * K)).collect();
    assert_eq!(seq.len(), 17);
    assert_eq!(seq[16], (2048 * K, 96 * K));
    assert_eq!(stride_read[5], (2080 * K, 64 * K));
    let mut want_reads = BTreeMap::new();
    let mut want_writes = BTreeMap::new();
    for (r, n) in seq.iter().chain(&stride_read).map(|r| (r, 2)) {
        *want_reads.entry(*r).or_insert(0) += n;
    }
    for (r, n) in seq.iter().chain(&stride_write).map(|r| (r, 2)) {
        *want_writes.entry(*r).or_insert(0) += n;
    }

    assert_eq!(t["dropped"], 0);
    let mut reads = BTreeMap::new();
    let mut writes = BTreeMap::new();
    for r in t["requests"].as_array().unwrap() {
        if r["inode"].as_u64() != Some(ino) {
            continue;
        }
        let key = (r["offset"].as_u64().unwrap(), r["bytes"].as_u64().unwrap());
        match r["op"].as_str() {
            Some("read") => *reads.entry(key).or_insert(0) += 1,
            Some("write") => *writes.entry(key).or_insert(0) += 1,
            _ => {}
        }
    }
    // The file was written before the trace and its data synced; the only data
    // requests on it are the suite's, whole (nothing split or merged).
    assert_eq!(reads, want_reads, "device reads (offset, bytes) -> count");
    assert_eq!(
        writes, want_writes,
        "device writes (offset, bytes) -> count"
    );

    let rep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let rows = rep["rows"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["workload"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["seq-read", "stride-read", "seq-update", "stride-update"]
    );
    let requests: Vec<u64> = rows
        .iter()
        .map(|r| r["requests"].as_u64().unwrap())
        .collect();
    assert_eq!(requests, [17, 6, 17, 5]);
    for r in rows {
        // The device counters also see the inode read after each cache drop, and for
        // updates the journal's commit of the new mtime: the trace above is the exact
        // check of the data requests, this one only that nothing is missing.
        let dev = r["device_requests"].as_f64().unwrap();
        let want = r["requests"].as_f64().unwrap();
        let extra = if r["workload"].as_str().unwrap().ends_with("read") {
            2.0
        } else {
            16.0
        };
        assert!(dev >= want && dev <= want + extra, "{r}");
        assert!(r["mb_per_s_mean"].as_f64().unwrap() > 0.0);
    }
    assert_eq!(rep["stride_gap"], 288 * K);
    assert_eq!(rep["request_size"], 128 * K);
}

#[test]
fn fragpicker_preset_refuses_a_file_too_small_for_write_stride() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("tiny");
    std::fs::write(&f, vec![1u8; 4096]).unwrap();
    let o = fragkit(&[
        "bench",
        "fragpicker",
        "--workloads",
        "stride-update",
        f.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("too small for write_stride"), "{err}");
}
