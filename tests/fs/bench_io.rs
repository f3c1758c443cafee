//! `fragkit bench` and `fragkit probe` on real loop-mounted file systems: the device's own
//! request counters against the layout, and the one-line refusals of bad input.

use crate::common;

use std::path::Path;

use common::*;
use fragkit::scratch::FsType;

/// Held by every test here for its whole run, so the module's tests run one at a time: a
/// cache drop in one test's job evicts what another's job read before its pass (btrfs
/// keeps its checksum leaves in the page cache), and in one run of the suite a sibling
/// running beside the exact-count test gave it 49 device reads it did not issue.
static CACHE_DROPS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn cache_drops() -> std::sync::MutexGuard<'static, ()> {
    CACHE_DROPS.lock().unwrap_or_else(|e| e.into_inner())
}

fn bench_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["bench"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "json"]);
    fragkit_json(&all)
}

fn split_at(path: &Path, r: u64) -> (u64, u64) {
    let doc = fragkit_json(&[
        "scan",
        "--format",
        "json",
        "--request-size",
        &r.to_string(),
        &path.to_string_lossy(),
    ]);
    let req = &doc["files"][0]["requests"][0];
    (
        req["split"].as_u64().unwrap(),
        req["ideal"].as_u64().unwrap(),
    )
}

/// The read requests `bench read --direct` sees the device complete equal, in every
/// iteration, the requests the file's layout predicts (for a whole-file sequential read,
/// S(R)): exactly, for sequential, stride and random patterns. The file's mapping is
/// read back after each cache drop and its reads counted apart; with `--cold-mapping`
/// they fall inside the pass instead.
fn device_reads_equal_split_count(fs: FsType) {
    let s = scratch(fs, 512 << 20, &[]);
    let dir = s.mountpoint();
    if fs == FsType::Ext4 {
        // Files past mb_stream_req blocks get their own preallocation and stay contiguous;
        // raising it keeps both files in the shared group preallocation, so they interleave.
        let knob = format!("/sys/fs/ext4/{}/mb_stream_req", s.device_name());
        std::fs::write(&knob, "1000000").unwrap_or_else(|e| panic!("{knob}: {e}"));
    }
    interleaved_direct_appends(&[dir.join("a"), dir.join("b")], 64 << 10, 256);
    write_file(&dir.join("contiguous"), 16 << 20, 7);
    common::global_sync();
    let patterns: [&[&str]; 3] = [
        &["--bs", "128K"],
        &["--bs", "128K", "--pattern", "stride", "--gap", "192K"],
        &["--bs", "16K", "--pattern", "random", "--count", "300"],
    ];
    for name in ["a", "contiguous"] {
        let path = dir.join(name);
        let (split, ideal) = split_at(&path, 128 << 10);
        for pattern in patterns {
            let mut args = vec!["read", "--direct", "--iterations", "3"];
            args.extend_from_slice(pattern);
            let shown = path.to_string_lossy();
            args.push(&shown);
            let doc = bench_json(&args);
            let job = &doc["jobs"][0];
            assert_eq!(job["target"]["device"]["name"], s.device_name().as_str());
            let predicted: Vec<u64> = job["layout"]["split_each"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            let its = job["iterations"].as_array().unwrap();
            let reads: Vec<u64> = its
                .iter()
                .map(|it| it["device"]["reads"].as_u64().unwrap())
                .collect();
            eprintln!(
                "{} {name} {pattern:?}: predicted {predicted:?}, device {reads:?}",
                fs.name()
            );
            assert_eq!(reads, predicted, "{} {name} {pattern:?}", fs.name());
            for it in its {
                assert!(it["mapping"]["reads"].as_u64().is_some(), "{it}");
            }
            if pattern.len() == 2 {
                // The whole-file sequential prediction is S(R).
                assert_eq!(predicted, [split; 3]);
                assert_eq!(job["layout"]["ideal"].as_u64(), Some(ideal));
                assert_eq!(its[0]["bytes"].as_u64(), Some(16 << 20), "whole file read");
            }
        }
        if name == "a" && fs == FsType::Ext4 {
            assert!(
                split > ideal,
                "interleaved 64K appends must split 128K requests on ext4"
            );
        }
        if name == "contiguous" {
            assert_eq!(
                split,
                ideal,
                "{} contiguous file is one fragment",
                fs.name()
            );
        }
    }
    // Cold: nothing is read before the pass, so nothing is reported apart, and the pass
    // pays at least its data requests (the mapping too, where the cache drop evicted it:
    // ext4 keeps an open file's extent status cache, btrfs drops its checksum leaves).
    let a = dir.join("a");
    let (split, _) = split_at(&a, 128 << 10);
    let doc = bench_json(&[
        "read",
        "--direct",
        "--bs",
        "128K",
        "--iterations",
        "1",
        "--cold-mapping",
        &a.to_string_lossy(),
    ]);
    let it = &doc["jobs"][0]["iterations"][0];
    assert!(it["mapping"].is_null(), "{it}");
    let reads = it["device"]["reads"].as_u64().unwrap();
    assert!(
        reads >= split,
        "{}: {reads} device reads, S(128K) = {split}",
        fs.name()
    );
    // A write job: the device wrote at least the bytes requested.
    let w = dir.join("written");
    let doc = bench_json(&[
        "write",
        "--bs",
        "128K",
        "--direct",
        "--size",
        "4M",
        "--iterations",
        "1",
        &w.to_string_lossy(),
    ]);
    let it = &doc["jobs"][0]["iterations"][0];
    assert_eq!(it["bytes"].as_u64(), Some(4 << 20));
    assert!(
        it["device"]["write_bytes"].as_u64().unwrap() >= 4 << 20,
        "{it}"
    );
}

#[test]
fn bench_read_device_requests_equal_split_count_ext4() {
    let _one_at_a_time = cache_drops();
    device_reads_equal_split_count(FsType::Ext4);
}

#[test]
fn bench_read_device_requests_equal_split_count_xfs() {
    let _one_at_a_time = cache_drops();
    device_reads_equal_split_count(FsType::Xfs);
}

#[test]
fn bench_read_device_requests_equal_split_count_btrfs() {
    let _one_at_a_time = cache_drops();
    device_reads_equal_split_count(FsType::Btrfs);
}

/// `bench writes` counts what a command wrote on the device under a path.
#[test]
fn bench_writes_counts_a_commands_bytes() {
    let _one_at_a_time = cache_drops();
    let s = scratch(FsType::Ext4, 64 << 20, &[]);
    let target = s.mountpoint().join("dd-out");
    let of = format!("of={}", target.display());
    let doc = fragkit_json(&[
        "bench",
        "writes",
        "--path",
        &s.mountpoint().to_string_lossy(),
        "--format",
        "json",
        "--",
        "dd",
        "if=/dev/zero",
        &of,
        "bs=1M",
        "count=8",
        "oflag=direct",
        "status=none",
    ]);
    assert_eq!(doc["exit_status"], 0);
    assert_eq!(doc["device"]["name"], s.device_name().as_str());
    let written = doc["counts"]["write_bytes"].as_u64().unwrap();
    assert!(
        (8 << 20..16 << 20).contains(&written),
        "dd wrote 8 MiB; device counted {written} bytes"
    );
}

/// On a loop device there are no dies: the probe must say so rather than invent g and S.
#[test]
fn probe_alignment_on_loop_device_finds_no_structure() {
    let _one_at_a_time = cache_drops();
    let img = LoopImage::new(64 << 20);
    let dev = img.device.to_string_lossy().into_owned();
    let doc = fragkit_json(&[
        "probe",
        "alignment",
        &dev,
        "--count",
        "1024",
        "--max",
        "128K",
        "--qd",
        "32",
        "--format",
        "json",
    ]);
    assert_eq!(doc["points"].as_array().unwrap().len(), 32);
    let inf = &doc["inference"];
    assert_eq!(inf["found"], false, "{inf:#}");
    assert!(inf["granularity"].is_null() && inf["stripe"].is_null());
    let last = inf["explanation"].as_array().unwrap().last().unwrap();
    assert!(last
        .as_str()
        .unwrap()
        .contains("no periodic structure found"));
    // The interface probe reads the same bytes in more requests; the device counts them.
    let doc = fragkit_json(&[
        "probe",
        "interface",
        &dev,
        "--bytes",
        "1M",
        "--max-requests",
        "16",
        "--qd",
        "1",
        "--iterations",
        "1",
        "--format",
        "json",
    ]);
    let pts = doc["points"].as_array().unwrap();
    assert_eq!(pts.len(), 5);
    assert_eq!(pts[4]["requests"], 16);
    assert_eq!(
        pts[4]["device_reads"], 16,
        "QD1 4K..64K requests are not merged"
    );
}

/// `bench read --model` puts the modeled figures in its CSV (one set per job, on every
/// iteration row), the same as the JSON's; without `--model` those cells are empty.
#[test]
fn bench_read_model_columns_in_csv() {
    let _one_at_a_time = cache_drops();
    let s = scratch(FsType::Ext4, 256 << 20, &[]);
    let dir = s.mountpoint();
    let knob = format!("/sys/fs/ext4/{}/mb_stream_req", s.device_name());
    std::fs::write(&knob, "1000000").unwrap_or_else(|e| panic!("{knob}: {e}"));
    interleaved_direct_appends(&[dir.join("a"), dir.join("b")], 64 << 10, 64);
    write_file(&dir.join("contiguous"), 4 << 20, 7);
    let csv_rows = |args: &[&str]| -> Vec<std::collections::HashMap<String, String>> {
        let mut all = vec!["bench"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--format", "csv"]);
        let o = fragkit(&all);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut r = csv::Reader::from_reader(o.stdout.as_slice());
        let head: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
        r.records()
            .map(|rec| {
                let rec = rec.unwrap();
                head.iter()
                    .cloned()
                    .zip(rec.iter().map(String::from))
                    .collect()
            })
            .collect()
    };
    let mut modeled_reads = Vec::new();
    for name in ["a", "contiguous"] {
        let path = dir.join(name).to_string_lossy().into_owned();
        let args = [
            "read",
            "--bs",
            "128K",
            "--direct",
            "--iterations",
            "2",
            "--model",
            "fast24",
            &path,
        ];
        let m = bench_json(&args)["jobs"][0]["model"].clone();
        let rows = csv_rows(&args);
        assert_eq!(rows.len(), 2, "one row per iteration");
        for row in &rows {
            assert_eq!(row["model"], m["model"].as_str().unwrap());
            assert_eq!(row["model_mapping"], m["mapping"].as_str().unwrap());
            assert_eq!(
                row["model_mb_s"],
                format!("{:.3}", m["mb_s"].as_f64().unwrap())
            );
            for (col, key) in [
                ("model_read_time_ns", "read_time_ns"),
                ("model_collisions", "collisions"),
                ("model_collided_requests", "collided_requests"),
                ("model_device_reads", "device_reads"),
            ] {
                assert_eq!(row[col], m[key].as_u64().unwrap().to_string(), "{col}");
            }
        }
        modeled_reads.push(m["device_reads"].as_u64().unwrap());
        // Without --model the columns are there and empty.
        let plain = csv_rows(&[
            "read",
            "--bs",
            "128K",
            "--direct",
            "--iterations",
            "1",
            &path,
        ]);
        assert_eq!(plain[0]["model_mb_s"], "");
        assert_eq!(plain[0]["model_collisions"], "");
    }
    // The interleaved file's 64 KiB extents split each 128 KiB read in the model too.
    assert!(
        modeled_reads[0] > modeled_reads[1],
        "modeled device reads {modeled_reads:?}"
    );
}

#[test]
fn bad_input_is_one_clear_line() {
    let _one_at_a_time = cache_drops();
    // tmpfs has no block device: O_DIRECT there would time memory copies.
    let shm = tempfile::Builder::new()
        .prefix("fragkit-bench-")
        .tempfile_in("/dev/shm")
        .unwrap();
    std::fs::write(shm.path(), vec![1u8; 1 << 20]).unwrap();
    let p = shm.path().to_string_lossy().into_owned();
    let e = fragkit_error(&["bench", "read", "--direct", &p]);
    assert!(e.contains("tmpfs") && e.contains(&p), "{e}");

    let e = fragkit_error(&["bench", "read", "--qd", "0", &p]);
    assert!(e.contains("queue depth '0'"), "{e}");

    let s = scratch(FsType::Ext4, 32 << 20, &[]);
    let f = s.mountpoint().join("f");
    write_file(&f, 1 << 20, 3);
    let e = fragkit_error(&[
        "bench",
        "read",
        "--direct",
        "--bs",
        "1000",
        &f.to_string_lossy(),
    ]);
    assert!(
        e.contains("request size 1000") && e.contains("logical block size 512"),
        "{e}"
    );

    // A raw device under a mounted file system is refused, naming the mount point.
    let dev = s.info.loop_device.to_string_lossy().into_owned();
    for probe in ["alignment", "interface"] {
        let e = fragkit_error(&["probe", probe, &dev]);
        assert!(
            e.contains(&dev) && e.contains(&*s.mountpoint().to_string_lossy()),
            "{e}"
        );
    }
}

/// Another process reading the same device while `bench read` runs: its requests land in
/// the device counters, and the job says so (text and JSON); alone, it says nothing.
#[test]
fn bench_read_warns_when_another_process_uses_the_device() {
    let _one_at_a_time = cache_drops();
    let s = scratch(FsType::Ext4, 512 << 20, &[]);
    let dir = s.mountpoint();
    write_file(&dir.join("mine"), 32 << 20, 1);
    write_file(&dir.join("theirs"), 64 << 20, 2);
    let mine = dir.join("mine").to_string_lossy().into_owned();
    let args = [
        "read",
        "--bs",
        "4K",
        "--engine",
        "psync",
        "--direct",
        "--iterations",
        "3",
        &mine,
    ];
    let alone = bench_json(&args);
    assert!(
        alone["jobs"][0]["foreign_io"].is_null(),
        "{:#}",
        alone["jobs"][0]
    );

    use std::os::unix::process::CommandExt;
    let mut other = std::process::Command::new("sh")
        .process_group(0)
        .arg("-c")
        .arg(format!(
            "while :; do dd if='{}' of=/dev/null bs=1M iflag=direct status=none; done",
            dir.join("theirs").display()
        ))
        .spawn()
        .unwrap();
    let shared = bench_json(&args);
    let mut text_args = vec!["bench"];
    text_args.extend_from_slice(&args);
    let text = fragkit(&text_args);
    // The shell and the dd it is running: the whole group, so nothing holds the mount.
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(other.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    let _ = other.wait();
    let f = &shared["jobs"][0]["foreign_io"];
    assert!(
        f["iterations"].as_u64().unwrap_or(0) >= 1,
        "{:#}",
        shared["jobs"][0]
    );
    assert!(f["read_bytes"].as_u64().unwrap_or(0) >= 1 << 20, "{f:#}");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("warning: the device saw I/O this job did not issue"),
        "{text}"
    );
}

/// `bench ior` never reports bandwidth for bytes it did not move: reading 16 MiB per rank
/// from files of 8 MiB stops with an error naming the file, the offset and the byte counts
/// (IOR stops with "read() returned EOF prematurely"), instead of a figure for 16 MiB.
#[test]
fn ior_short_read_is_an_error_not_a_bandwidth() {
    let _one_at_a_time = cache_drops();
    let s = scratch(FsType::Ext4, 128 << 20, &[]);
    let d = s.mountpoint().join("ior");
    std::fs::create_dir(&d).unwrap();
    let dir = d.to_string_lossy().to_string();
    let w = fragkit(&[
        "bench",
        "ior",
        &dir,
        "--block",
        "8M",
        "--xfer",
        "1M",
        "--write",
        "--keep",
        "--iterations",
        "1",
        "--file-per-process",
        "--direct",
    ]);
    assert!(w.status.success(), "{}", String::from_utf8_lossy(&w.stderr));
    let r = fragkit(&[
        "bench",
        "ior",
        &dir,
        "--block",
        "16M",
        "--xfer",
        "1M",
        "--read",
        "--iterations",
        "1",
        "--file-per-process",
        "--direct",
    ]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_ne!(
        r.status.code(),
        Some(0),
        "a short read must not succeed: {err}"
    );
    assert!(
        err.contains("returned 0 of") && err.contains("offset 8388608"),
        "{err}"
    );
    assert!(
        r.stdout.is_empty() || !String::from_utf8_lossy(&r.stdout).contains("read "),
        "no read bandwidth printed"
    );
}

/// A rerun that writes over kept files starts from fresh ones (as IOR does): a 4 MiB run
/// over a kept 8 MiB file leaves a 4 MiB file, and says it removed the old one. With
/// nothing there it says nothing.
/// IOR's -e: without `--fsync` a write phase ends at the last write, with it each rank
/// fdatasyncs its data inside the phase: counted with strace (the layout read after each
/// write phase flushes dirty data by FIEMAP_FLAG_SYNC, outside the phase's time, so the
/// device's byte counts cannot tell the two apart).
#[test]
fn ior_fsyncs_writes_only_when_asked() {
    let s = scratch(FsType::Ext4, 128 << 20, &[]);
    let d = s.mountpoint().join("ior");
    std::fs::create_dir(&d).unwrap();
    let dir = d.to_string_lossy().to_string();
    let log = tempfile::NamedTempFile::new().unwrap();
    for fsync in [false, true] {
        let mut cmd = std::process::Command::new("strace");
        cmd.args(["-f", "-e", "trace=fdatasync,fsync", "-o"])
            .arg(log.path())
            .arg(env!("CARGO_BIN_EXE_fragkit"))
            .args([
                "bench",
                "ior",
                &dir,
                "--block",
                "8M",
                "--xfer",
                "1M",
                "--write",
                "--iterations",
                "2",
                "--file-per-process",
            ]);
        if fsync {
            cmd.arg("--fsync");
        }
        let out = cmd
            .output()
            .expect("strace (scripts/install-deps installs it)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            text.contains("fsync at the end of each write phase"),
            fsync,
            "{text}"
        );
        let calls = std::fs::read_to_string(log.path()).unwrap();
        let syncs = calls
            .lines()
            .filter(|l| l.contains("fdatasync(") || l.contains("fsync("))
            .count();
        // One per write phase (two iterations, one rank) with --fsync, none without.
        assert_eq!(syncs, if fsync { 2 } else { 0 }, "{calls}");
    }
}

#[test]
fn ior_removes_existing_files_before_writing() {
    let _one_at_a_time = cache_drops();
    let s = scratch(FsType::Ext4, 128 << 20, &[]);
    let d = s.mountpoint().join("ior");
    std::fs::create_dir(&d).unwrap();
    let dir = d.to_string_lossy().to_string();
    let write = |block: &str| {
        fragkit(&[
            "bench",
            "ior",
            &dir,
            "--block",
            block,
            "--xfer",
            "1M",
            "--write",
            "--keep",
            "--iterations",
            "1",
            "--file-per-process",
            "--direct",
        ])
    };
    let first = write("8M");
    let err = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "{err}");
    assert!(!err.contains("removed"), "{err}");
    let file = d.join("ior.00000000");
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 8 << 20);
    let second = write("4M");
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{err}");
    assert!(
        err.contains("removed 1 existing file in") && err.contains("before writing"),
        "{err}"
    );
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 4 << 20);
}
