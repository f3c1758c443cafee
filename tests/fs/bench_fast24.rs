//! `fragkit bench fast24 --quick --format json`: all 18 rows in the schema, the
//! paper's figures, and modeled figures that a replay of the kept trace gives again, bit
//! for bit (the model is deterministic; the real MB/s is not and is only checked present).

use crate::common;

use common::{fragkit, fragkit_json, require_root};

#[test]
fn bench_fast24_quick_gives_18_rows_with_deterministic_modeled_figures() {
    require_root();
    let traces = tempfile::tempdir().unwrap();
    let o = fragkit(&[
        "bench",
        "fast24",
        "--quick",
        "--format",
        "json",
        "--keep-traces",
        traces.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(v["kind"], "fragkit-fast24");
    let obj = v.as_object().unwrap();
    assert_eq!(obj.len(), 3, "exactly version, kind, rows: {obj:?}");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 18);
    let mut seen = std::collections::BTreeSet::new();
    for r in rows {
        let keys: Vec<&str> = r.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "modeled_mib_s",
                "modeled_ratio",
                "paper_mib_s",
                "paper_ratio",
                "real_mib_s",
                "state",
                "workload"
            ],
            "{r}"
        );
        let w = r["workload"].as_str().unwrap();
        let s = r["state"].as_str().unwrap();
        assert!(seen.insert((w.to_string(), s.to_string())), "{w} {s} twice");
        assert!(r["modeled_mib_s"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["paper_mib_s"].as_f64().unwrap() > 0.0, "{r}");
        if s == "contiguous" {
            assert_eq!(r["modeled_ratio"].as_f64(), Some(1.0), "{r}");
            assert_eq!(r["paper_ratio"].as_f64(), Some(1.0), "{r}");
        }
        let real_expected = !(s == "approach" && (w == "sqlite" || w == "fileserver"));
        assert_eq!(r["real_mib_s"].as_f64().is_some(), real_expected, "{r}");
    }
    for w in [
        "append-worst",
        "append-random",
        "overwrite-worst",
        "overwrite-random",
        "sqlite",
        "fileserver",
    ] {
        for s in ["contiguous", "fragmented", "approach"] {
            assert!(seen.contains(&(w.to_string(), s.to_string())), "{w} {s}");
        }
    }
    let row = |w: &str, s: &str| {
        rows.iter()
            .find(|r| r["workload"] == w && r["state"] == s)
            .unwrap()["modeled_mib_s"]
            .as_f64()
            .unwrap()
    };
    // The mechanism shows: the worst case is far below contiguous, the approach recovers it.
    assert!(row("append-worst", "fragmented") < 0.5 * row("append-worst", "contiguous"));
    assert!(row("append-worst", "approach") > 0.9 * row("append-worst", "contiguous"));
    // Replaying a kept trace gives the row's modeled figure again, twice the same.
    let trace = traces.path().join("append-worst.json");
    let a = fragkit_json(&["ssd", trace.to_str().unwrap(), "--format", "json"]);
    let b = fragkit_json(&["ssd", trace.to_str().unwrap(), "--format", "json"]);
    assert_eq!(a, b);
    // `ssd` reports MB/s (10^6), the table MiB/s.
    let mib = |mb: f64| (mb * 1e6 / 1048576.0 * 10.0).round() / 10.0;
    let mb = a["report"]["read_mb_s"].as_f64().unwrap();
    assert_eq!(mib(mb), row("append-worst", "fragmented"));
    let c = fragkit_json(&[
        "ssd",
        trace.to_str().unwrap(),
        "--approach",
        "--format",
        "json",
    ]);
    let mb = c["report"]["read_mb_s"].as_f64().unwrap();
    assert_eq!(mib(mb), row("append-worst", "approach"));
    // The fileserver's read phase is 10 closed-loop readers in the table; `ssd --readers 10`
    // on its kept trace gives the same figure.
    let fs = traces.path().join("fileserver.json");
    let f = fragkit_json(&[
        "ssd",
        fs.to_str().unwrap(),
        "--readers",
        "10",
        "--format",
        "json",
    ]);
    let mb = f["report"]["read_mb_s"].as_f64().unwrap();
    assert_eq!(mib(mb), row("fileserver", "fragmented"));
}
