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
    let Some(root) = fragkit_sys::blkio::root() else {
        return String::new();
    };
    ["read_bps", "write_bps", "read_iops", "write_iops"]
        .iter()
        .map(|k| {
            std::fs::read_to_string(root.join(format!("blkio.throttle.{k}_device")))
                .unwrap_or_default()
        })
        .collect()
}

/// One lab at a time: the throttle rules are machine-wide, and each run checks that it
/// left them as it found them (and two labs on two CPUs would time each other).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `fragkit lab --app APP --size SIZE --rounds 1` with its images in RAM: (report.json,
/// the temporary directories to keep alive). Checks what holds for every application:
/// stdout and report.json agree, the report and its chart are written, the throttle rules
/// are as they were, nothing is left mounted.
fn lab_app(app: &str, size: &str) -> (Value, [tempfile::TempDir; 2]) {
    common::require_root();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("lab");
    let tmpdir = tempfile::tempdir_in("/dev/shm").unwrap();
    let rules_before = throttle_rules();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args(["lab", "--app", app, "--size", size, "--rounds", "1"])
        .args(["--out", dir.to_str().unwrap(), "--format", "json"])
        .env("TMPDIR", tmpdir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let printed: Value = serde_json::from_slice(&o.stdout).unwrap();
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(printed["contenders"], report["contenders"]);
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
    assert!(dir.join("report.html").is_file());
    assert_eq!(report["chart"], "interference.png");
    assert!(dir.join("interference.png").is_file());
    (report, [out, tmpdir])
}

fn contender(report: &Value, name: &str) -> Value {
    report["contenders"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no contender {name}"))
        .clone()
}

/// FAST'24's database grown through the library under the artifact's allocator and
/// writeback settings comes out in thousands of pieces; the model prices the loss and the
/// moves recover it; a tool that refuses is reported as declined, not paired.
#[test]
fn lab_app_sqlite_recovers_the_modeled_loss() {
    let (report, _keep) = lab_app("sqlite", "2G");
    let db = &report["database"];
    assert_eq!(f(db, "/files"), 1.0);
    assert!(f(db, "/fragments") > 1000.0, "{db}");
    assert!(f(db, "/bytes") > 150e6, "{db}");
    let a = &report["advice"][0];
    assert_eq!(a["device"], "fast24");
    let (now, contiguous) = (f(a, "/now_ns"), f(a, "/contiguous_ns"));
    assert!(
        now > contiguous * 1.1,
        "a loss to price: {now} vs {contiguous}"
    );
    for name in ["pick", "bypass", "full"] {
        let after = f(&contender(&report, name), "/modeled_ms/median") * 1e6;
        assert!(
            now - after > 0.5 * (now - contiguous),
            "{name} recovered less than half: {after} of {now} → {contiguous}"
        );
    }
    // advise --apply on the disk model (which always advises a move here): the device
    // wrote what it predicted and the modeled time after is what it predicted, within 5%.
    let applied = report["advise_applied"].as_array().unwrap();
    assert_eq!(applied.len(), 2);
    let hdd = applied.iter().find(|a| a["device"] == "hdd").unwrap();
    assert!(f(hdd, "/files") >= 1.0, "{hdd}");
    let near = |a: f64, p: f64| (a / p - 1.0).abs() <= 0.05;
    assert!(
        near(f(hdd, "/device_written_bytes"), f(hdd, "/predicted_bytes")),
        "{hdd}"
    );
    assert!(
        near(f(hdd, "/achieved_ns"), f(hdd, "/predicted_ns")),
        "{hdd}"
    );
    let none = f(&contender(&report, "none"), "/modeled_ms/median") * 1e6;
    assert!(
        (none - now).abs() < 1.0,
        "the untouched clone prices as advised"
    );
    // FAST'24's measure: the build's writes and the application's reads, recorded and
    // replayed on fast24 in write order, the journal left out (the artifact's drive never
    // saw it).
    let fl = &report["flash"];
    assert_eq!(fl["journal_left_out"], true, "{fl}");
    assert_eq!(f(fl, "/dropped_events"), 0.0, "{fl}");
    let (frag, contig) = (f(fl, "/fragmented_mb_s"), f(fl, "/contiguous_mb_s"));
    assert!(frag < 0.8 * contig, "the replay prices a loss: {fl}");
    // The untouched clone, its reads recorded again, keeps the loss, and prices as the
    // base: both read back on the unthrottled device (under the ceiling the recorded
    // overlap differed and the clone replayed 4-15% faster; now 1-3% apart when quiet).
    let none = f(&contender(&report, "none"), "/replayed_mb_s/median");
    assert!(
        none < 0.8 * contig,
        "the untouched clone replays with the loss: {none} vs {contig}"
    );
    assert!(
        (none / frag - 1.0).abs() < 0.08,
        "the untouched clone replays as the base did: {none} vs {frag} MB/s"
    );
    // A whole-file rewrite gives every page a new place in write order.
    let full = f(&contender(&report, "full"), "/replayed_mb_s/median");
    assert!(
        full - frag > 0.5 * (contig - frag),
        "full recovered less than half of the replayed loss: {full} of {frag} → {contig}"
    );
    let round = &contender(&report, "e4defrag")["rounds"][0];
    if round["defrag_exit"] != 0 {
        let k = &round["defrag"];
        assert!(!k["declined"].is_null(), "a refusal says why: {k}");
        for v in report["versus_tool"].as_array().unwrap() {
            assert!(
                v["bytes_written"].is_null(),
                "a declined round is no pair: {v}"
            );
        }
    }
}

#[test]
fn lab_app_rocksdb_defragments_while_the_application_reads() {
    let (report, keep) = lab_app("rocksdb", "512M");
    let out = &keep[0];

    // Every contender ran, in this order, with the application measured around its window.
    let names: Vec<&str> = report["contenders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["none", "pick", "bypass", "full", "e4defrag"]);
    let c = |name: &str| contender(&report, name);
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
    // With two CPUs or more, every defragmenter ran on CPUs other than the application's,
    // and its command says so; with one, nothing was pinned.
    let cpus = fragkit::sys::affinity::allowed_cpus().unwrap();
    let pinned = cpus.len() >= 2;
    assert_eq!(!report["cpus"].is_null(), pinned, "{}", report["cpus"]);
    if pinned {
        let app = report["cpus"]["application"].as_u64().unwrap() as usize;
        assert_eq!(app, *cpus.last().unwrap());
        let others: Vec<String> = cpus[..cpus.len() - 1]
            .iter()
            .map(|c| c.to_string())
            .collect();
        let prefix = format!("taskset -c {} ", others.join(","));
        for step in ["defrag --mode pick", "defrag --mode full", "e4defrag"] {
            let command = report["steps"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["name"] == step)
                .unwrap_or_else(|| panic!("no step {step}"))["command"]
                .as_str()
                .unwrap();
            assert!(command.contains(&prefix), "{step}: {command}");
        }
    }
    // advise spoke for both models, and the ceiling was the data sheet's.
    assert_eq!(report["advice"].as_array().unwrap().len(), 2);
    assert_eq!(report["io_limit"]["read_bytes_per_s"], 550_000_000);
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

/// `--database-from` starts from a kept run's database and trace: no fill, no trace of its
/// own, and pick plans exactly what it planned in the kept run (the same layout, the same
/// profile); it says clearly what it will not take.
#[test]
fn lab_app_rocksdb_from_a_kept_database() {
    common::require_root();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().unwrap();
    let tmpdir = tempfile::tempdir_in("/dev/shm").unwrap();
    let (kept, again) = (out.path().join("kept"), out.path().join("again"));
    let lab = |extra: &[&str], dir: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_fragkit"))
            .args(["lab", "--app", "rocksdb", "--size", "512M", "--rounds", "1"])
            .args(extra)
            .args(["--out", dir.to_str().unwrap(), "--format", "json"])
            .env("TMPDIR", tmpdir.path())
            .output()
            .unwrap()
    };
    let o = lab(&["--keep"], &kept);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let first: Value = serde_json::from_slice(&o.stdout).unwrap();
    let from = kept.to_str().unwrap();
    let o = lab(&["--database-from", from], &again);
    let second: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    // What it will not take, each in one line, before anything is made.
    let elsewhere = out.path().join("x");
    let refused = |extra: &[&str], dir: &str| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_fragkit"))
            .args(["lab", "--app"])
            .args(extra)
            .args(["--out", dir])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{extra:?}");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let x = elsewhere.to_str().unwrap();
    let sqlite = refused(&["sqlite", "--database-from", from], x);
    let size = refused(&["rocksdb", "--size", "1G", "--database-from", from], x);
    let same = refused(&["rocksdb", "--database-from", from], from);
    let none = refused(&["rocksdb", "--database-from", "/nonexistent"], x);
    // The kept base goes before anything can fail.
    let base = first["variables"]["BASE"].as_str().unwrap().to_string();
    let destroyed = std::process::Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args(["scratch", "destroy", &base])
        .output()
        .unwrap();
    assert!(destroyed.status.success());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(second["database_from"], from);
    let steps: Vec<&str> = second["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(
        !steps.iter().any(|s| s.contains("fill") || *s == "age paf"),
        "{steps:?}"
    );
    assert!(
        steps.contains(&"trace application (the kept run's)"),
        "{steps:?}"
    );
    // pick's planned ranges, file by file (names and offsets; the mount points differ).
    let planned = |dir: &std::path::Path| -> Vec<(String, u64, u64)> {
        let d: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("data/defrag-pick-r1.json")).unwrap(),
        )
        .unwrap();
        let mut v: Vec<(String, u64, u64)> = d["files"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|f| {
                let name = f["path"]
                    .as_str()
                    .unwrap()
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_string();
                f["ranges"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .map(move |r| {
                        (
                            name.clone(),
                            r["offset"].as_u64().unwrap(),
                            r["length"].as_u64().unwrap(),
                        )
                    })
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(planned(&again), planned(&kept));
    assert!(sqlite.contains("only with --app rocksdb"), "{sqlite}");
    assert!(size.contains("that run's size is"), "{size}");
    assert!(same.contains("the same directory as --out"), "{same}");
    assert!(none.contains("--database-from /nonexistent"), "{none}");
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mountinfo.contains(tmpdir.path().to_str().unwrap()),
        "a scratch file system is still mounted"
    );
}
