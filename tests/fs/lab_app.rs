//! `fragkit lab --app rocksdb` end to end: a real RocksDB database built by db_bench on an
//! aged scratch ext4, traced, advised, then defragmented by every method while db_bench
//! reads it, each on its own clone under a device ceiling.

use crate::common;

use serde_json::Value;

fn f(v: &Value, ptr: &str) -> f64 {
    v.pointer(ptr)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no number at {ptr} in {v}"))
}

/// The blkio throttle rules of the root group, one "MAJ:MIN VALUE" per line.
fn throttle_rules() -> String {
    let root = "/sys/fs/cgroup/blkio";
    ["read_bps", "write_bps", "read_iops", "write_iops"]
        .iter()
        .map(|k| {
            std::fs::read_to_string(format!("{root}/blkio.throttle.{k}_device")).unwrap_or_default()
        })
        .collect()
}

#[test]
fn lab_app_rocksdb_defragments_while_the_application_reads() {
    common::require_root();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("lab");
    let tmpdir = tempfile::tempdir_in("/dev/shm").unwrap();
    let rules_before = throttle_rules();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args(["lab", "--app", "rocksdb", "--size", "512M", "--rounds", "1"])
        .args(["--out", dir.to_str().unwrap(), "--format", "json"])
        .env("TMPDIR", tmpdir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let printed: Value = serde_json::from_slice(&o.stdout).unwrap();
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(printed["contenders"], report["contenders"]);

    // Every contender ran, in this order, with the application measured around its window.
    let names: Vec<&str> = report["contenders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["none", "pick", "bypass", "full", "e4defrag"]);
    let c = |name: &str| {
        report["contenders"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()
            .clone()
    };
    for name in &names {
        let k = &c(name)["rounds"][0];
        for key in [
            "/before_ops_per_s",
            "/during_ops_per_s",
            "/after_ops_per_s",
            "/read_ops_per_s",
        ] {
            assert!(f(k, key) > 0.0, "{name}: {key}");
        }
        assert!(f(k, "/defrag_end_s") >= f(k, "/defrag_start_s"), "{name}");
        assert!(
            f(k, "/read_requests") > 0.0,
            "{name}: the read run reached the device"
        );
        assert!(
            k["series"].as_array().unwrap().len() > 10,
            "{name}: progress lines"
        );
        assert_eq!(k["defrag"].is_null(), *name == "none", "{name}");
    }
    // The conventional tools moved the database; pick moved no more than full, and the
    // tool's bytes are what the device counted.
    let written = |n: &str| f(&c(n)["rounds"][0], "/defrag/device_bytes_written");
    assert!(
        written("e4defrag") > 1e6,
        "e4defrag wrote {}",
        written("e4defrag")
    );
    assert!(written("full") > 1e6, "full wrote {}", written("full"));
    assert!(written("pick") <= written("full"));
    for n in ["pick", "bypass", "full"] {
        assert_eq!(f(&c(n)["rounds"][0], "/defrag/files_worse"), 0.0, "{n}");
    }
    // The paired ratios against the tool are the rounds' own figures.
    let vs = report["versus_tool"].as_array().unwrap();
    let pick = vs.iter().find(|v| v["contender"] == "pick").unwrap();
    let expect = written("pick") / written("e4defrag");
    assert!((f(pick, "/bytes_written/median") - expect).abs() < 1e-9);
    // advise spoke for both models, and the ceiling was the data sheet's.
    assert_eq!(report["advice"].as_array().unwrap().len(), 2);
    assert_eq!(report["io_limit"]["read_bytes_per_s"], 550_000_000);
    // The report, its chart, and nothing left behind: no throttle rule, no mount.
    assert!(dir.join("report.html").is_file());
    assert_eq!(report["chart"], "interference.png");
    assert!(dir.join("interference.png").is_file());
    assert_eq!(
        throttle_rules(),
        rules_before,
        "the throttle rules are as they were"
    );
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mountinfo.contains(tmpdir.path().to_str().unwrap()),
        "a scratch file system is still mounted"
    );
    let text = String::from_utf8_lossy(
        &std::process::Command::new(env!("CARGO_BIN_EXE_fragkit"))
            .args(["lab", "--app", "rocksdb", "--io-limit", "fast", "--out"])
            .arg(out.path().join("x"))
            .output()
            .unwrap()
            .stderr,
    )
    .into_owned();
    assert!(text.contains("--io-limit fast: expected"), "{text}");
}
