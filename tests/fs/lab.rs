//! `fragkit lab` end to end: a real scratch ext4, real aging, a traced workload, three
//! defragmenters on block-for-block clones, and the report they produce.

use crate::common;

use std::path::{Path, PathBuf};

use serde_json::Value;

fn method<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["methods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no method {name} in the report"))
}

fn f(v: &Value, ptr: &str) -> f64 {
    v.pointer(ptr)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no number at {ptr}"))
}

/// `fragkit lab --size 512M EXTRA...` with its images in RAM: (report.json, out dir, the
/// temporary directories to keep alive, TMPDIR).
fn lab(extra: &[&str]) -> (Value, PathBuf, [tempfile::TempDir; 2]) {
    common::require_root();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("lab");
    // The images go where TMPDIR says (here a directory in RAM, as the default would be).
    let tmpdir = tempfile::tempdir_in("/dev/shm").unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args([
            "lab",
            "--size",
            "512M",
            "--out",
            dir.to_str().unwrap(),
            "--format",
            "json",
        ])
        .args(extra)
        .env("TMPDIR", tmpdir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let printed: Value = serde_json::from_slice(&o.stdout).unwrap();
    let text = std::fs::read_to_string(dir.join("report.json")).expect("report.json written");
    let report: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        printed["methods"], report["methods"],
        "stdout and report.json agree"
    );
    // Every speed-up is one figure: report.json's methods, its headline and the verdict
    // sentences quote the same median, with its paired interval.
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    for m in report["methods"].as_array().unwrap().iter().skip(1) {
        let x = f(m, "/speedup");
        assert_eq!(
            report["headline"]["speedup"][m["name"].as_str().unwrap()],
            m["speedup"],
            "{}",
            m["name"]
        );
        let i = &m["real_time"];
        let said = format!(
            "median ×{x:.2} over {} paired rounds, interval [{:.2}, {:.2}]",
            i["rounds"],
            f(i, "/low"),
            f(i, "/high")
        );
        assert!(
            html.contains(&format!("{}: wrote", m["name"].as_str().unwrap()))
                && html.contains(&said),
            "{}: no verdict saying {said}",
            m["name"]
        );
    }
    // No method made the file system worse, and fragkit says none of its files came out
    // worse.
    let base = method(&report, "before");
    for m in report["methods"].as_array().unwrap() {
        for key in ["/layout/fragments", "/layout/split"] {
            assert!(
                f(m, key) <= f(base, key),
                "{}: {key} {} before, {} after",
                m["name"],
                f(base, key),
                f(m, key)
            );
        }
        if let Some(w) = m.pointer("/defrag/files_worse") {
            assert_eq!(w, 0, "{}", m["name"]);
        }
    }
    let tmp = tmpdir.path().to_path_buf();
    (report, tmp, [out, tmpdir])
}

/// The second aging scenario: no PaF, so free space has room for whole files and the
/// conventional defragmenters act: full and e4defrag both rewrite the files, and the
/// report compares them on bytes, time and request counts.
#[test]
fn lab_512m_room_for_whole_files_conventional_tools_act() {
    let (report, _, _keep) = lab(&["--paf", "none"]);
    assert_eq!(report["scratch"]["paf"]["spec"], "none");
    let base = method(&report, "before");
    for name in ["full", "e4defrag"] {
        let m = method(&report, name);
        assert!(
            f(m, "/defrag/device_bytes_written") > 0.0 && f(m, "/defrag/seconds") > 0.0,
            "{name} wrote nothing: {}",
            m["defrag"]
        );
        assert!(
            f(m, "/layout/fragments") < f(base, "/layout/fragments") / 2.0,
            "{name}: fragments {} -> {}",
            f(base, "/layout/fragments"),
            f(m, "/layout/fragments")
        );
        assert!(
            f(m, "/workload/device_reads") < f(base, "/workload/device_reads"),
            "{name}: device reads not cut"
        );
    }
    // Where e4defrag acted on every file it does not claim to have declined.
    assert!(
        method(&report, "e4defrag")["defrag"]["declined"].is_null(),
        "{}",
        method(&report, "e4defrag")["defrag"]
    );
}

#[test]
fn lab_512m_pick_writes_less_than_full_and_both_cut_requests() {
    let (report, tmpdir, keep) = lab(&[]);
    let dir = keep[0].path().join("lab");

    // BPF works on this machine, so pick ran on a traced profile, not the fallback.
    assert_eq!(report["traced"], true, "notes: {}", report["notes"]);
    assert!(f(&report, "/trace/ranges") > 0.0);

    let pick = method(&report, "pick");
    let full = method(&report, "full");
    let pick_written = f(pick, "/defrag/device_bytes_written");
    let full_written = f(full, "/defrag/device_bytes_written");
    assert!(pick_written > 0.0, "pick moved nothing");
    // Full either rewrote whole files (more than pick) or, where free space cannot hold
    // them in fewer pieces, declined and said why in its verdict.
    let full_declined = f(full, "/defrag/bytes_moved") == 0.0;
    if full_declined {
        assert!(full["defrag"]["declined"].is_string(), "{}", full["defrag"]);
    } else {
        assert!(
            pick_written < full_written,
            "pick wrote {pick_written} bytes, full {full_written}"
        );
    }
    let before = f(method(&report, "before"), "/workload/device_reads");
    let cut: &[&Value] = if full_declined {
        &[pick]
    } else {
        &[pick, full]
    };
    for m in cut {
        let after = f(m, "/workload/device_reads");
        assert!(
            after < before,
            "{}: device reads {before} before, {after} after",
            m["name"]
        );
    }
    // The layout model predicts what the device counted, before and after, to within 2%
    // of the untouched layout's count. The slack is a share of the untouched count, not of
    // each method's: the device also completes a few hundred reads per run that no data
    // layout explains (98 over a 3480 prediction after pick in one CI run, 360-600 in the
    // default 2 GiB lab) and that do not shrink when defragmentation cuts the data reads.
    let untouched = f(
        method(&report, "before"),
        "/workload/predicted_device_reads",
    );
    for m in report["methods"].as_array().unwrap() {
        let seen = f(m, "/workload/device_reads");
        let predicted = f(m, "/workload/predicted_device_reads");
        assert!(
            (seen - predicted).abs() <= untouched * 0.02,
            "{}: device saw {seen} reads, layout predicted {predicted} (untouched: {untouched})",
            m["name"]
        );
    }

    // The modeled NVMe column: present for every method, and the same in every round
    // (the lab refuses rounds that disagree; check the rounds' own outputs too).
    for m in report["methods"].as_array().unwrap() {
        let mb = f(m, "/workload/modeled/mb_s");
        assert!(mb > 0.0, "{}: modeled {mb} MB/s", m["name"]);
        assert!(m.pointer("/workload/modeled/collisions").is_some());
    }
    let modeled = |round: u32| -> Vec<(String, Value)> {
        let text = std::fs::read_to_string(dir.join(format!("data/bench-round-{round}.json")))
            .expect("bench round output kept");
        let v: Value = serde_json::from_str(&text).unwrap();
        let mut jobs: Vec<(String, Value)> = v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| (j["path"].as_str().unwrap().to_string(), j["model"].clone()))
            .collect();
        jobs.sort_by(|a, b| a.0.cmp(&b.0));
        jobs
    };
    let first = modeled(1);
    assert!(
        first.iter().all(|(_, m)| m.is_object()),
        "every job modeled"
    );
    assert_eq!(first, modeled(2), "modeled figures differ between rounds");
    // The fragmented files split the workload's requests on the modeled device too, and
    // the report says which mechanism the fragmentation costs.
    let before_model = &method(&report, "before")["workload"];
    assert!(
        f(before_model, "/modeled/device_reads") > f(before_model, "/requests"),
        "{before_model}"
    );
    let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(
        page.contains("On the modeled fast24 NVMe"),
        "no modeled verdict in the page"
    );

    // Every image the page references exists and is a PNG.
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let mut images = 0;
    for part in html.split("src=\"").skip(1) {
        let src = &part[..part.find('"').unwrap()];
        let path = dir.join(src);
        let bytes =
            std::fs::read(&path).unwrap_or_else(|_| panic!("{src} is referenced but missing"));
        assert!(bytes.starts_with(b"\x89PNG"), "{src} is not a PNG");
        images += 1;
    }
    let methods = report["methods"].as_array().unwrap().len();
    assert_eq!(images, methods + 1, "a map per method and the chart");
    let images = report["variables"]["IMAGES"].as_str().unwrap();
    assert!(
        Path::new(images).starts_with(&tmpdir),
        "images in {images}, TMPDIR {}",
        tmpdir.display()
    );

    // reproduce.sh sets every variable before it uses it (it used ${IMAGES} unset, which
    // would have made the images at /base), and sh can parse it.
    let script = std::fs::read_to_string(dir.join("reproduce.sh")).unwrap();
    let mut set: Vec<String> = vec!["TMPDIR".into()];
    for line in script.lines().filter(|l| !l.starts_with('#')) {
        for used in line.split("${").skip(1) {
            let name: String = used
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let defaulted = used[name.len()..].starts_with(":-");
            assert!(
                defaulted || set.contains(&name),
                "reproduce.sh uses ${{{name}}} before setting it: {line}"
            );
        }
        for stmt in line.split(';') {
            if let Some((name, _)) = stmt.trim().split_once('=') {
                if name.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                    set.push(name.to_string());
                }
            }
        }
    }
    let sh = std::process::Command::new("sh")
        .arg("-n")
        .arg(dir.join("reproduce.sh"))
        .status()
        .unwrap();
    assert!(sh.success(), "sh -n reproduce.sh");

    // Nothing of the lab's is left mounted.
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    for (var, path) in report["variables"].as_object().unwrap() {
        if var == "OUT" {
            continue;
        }
        let path = path.as_str().unwrap();
        assert!(
            !mountinfo.lines().any(|l| l.split(' ').nth(4) == Some(path)),
            "${var} ({path}) is still mounted"
        );
    }

    report_html_runs_no_script_from_names(&dir, &tmpdir);
}

/// report.html rebuilt (`lab --report-only`) from this run's outputs with the images'
/// directory, which the report names, renamed to markup in every step's output: in
/// headless Chromium no script from it runs and it is on the page as text
/// (html_xss.rs's check; skipped, saying so, without chromium).
fn report_html_runs_no_script_from_names(dir: &Path, images: &Path) {
    if !crate::browser::chromium_available("lab report.html on hostile names") {
        return;
    }
    let copy = tempfile::tempdir().unwrap();
    let hostile_dir = copy.path().join(crate::html_xss::HOSTILE[2]);
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(dir)
        .arg(&hostile_dir)
        .status()
        .unwrap();
    assert!(st.success());
    let images = images.to_str().unwrap();
    let hostile = format!("/x{}", crate::html_xss::HOSTILE.join("/"));
    let quoted = serde_json::to_string(&hostile).unwrap();
    for e in std::fs::read_dir(hostile_dir.join("data")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "json") {
            let text = std::fs::read_to_string(&p).unwrap();
            std::fs::write(&p, text.replace(images, &quoted[1..quoted.len() - 1])).unwrap();
        }
    }
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args(["lab", "--report-only"])
        .arg(&hostile_dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    crate::html_xss::assert_page_inert(
        "lab report.html",
        &hostile_dir.join("report.html"),
        "document.body.textContent",
        &[&hostile],
    );
}

#[test]
fn lab_refuses_a_directory_with_other_things_in_it() {
    common::require_root();
    let out = tempfile::tempdir().unwrap();
    std::fs::write(out.path().join("precious.txt"), "keep me").unwrap();
    let err = common::fragkit_error(&[
        "lab",
        "--size",
        "512M",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert!(
        err.contains("not empty") && err.lines().count() == 1,
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(out.path().join("precious.txt")).unwrap(),
        "keep me"
    );
}
