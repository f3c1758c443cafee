//! Bad input gets one clear line naming the input and what was expected.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};

use common::*;

fn one_line_error(out: &Output, code: i32, must_contain: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "exit status; stderr: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "expected exactly one line on stderr, got: {err:?}"
    );
    for m in must_contain {
        assert!(lines[0].contains(m), "{:?} should mention {m:?}", lines[0]);
    }
    assert!(lines[0].starts_with("fragkit: "), "{:?}", lines[0]);
}

/// A path `scan` cannot map is a refused target (exit 1, one line naming it), not a fatal
/// error: the other paths are still scanned (tests/filefrag_dropin.rs).
#[test]
fn nonexistent_path() {
    let out = fragkit(&["scan", "/nonexistent/fragkit-test"]);
    one_line_error(&out, 1, &["/nonexistent/fragkit-test", "no such file"]);
}

#[test]
fn fifo_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let out = fragkit(&["scan", &fifo.to_string_lossy()]);
    one_line_error(
        &out,
        1,
        &[
            &fifo.to_string_lossy(),
            "FIFO",
            "regular file or a directory",
        ],
    );
}

#[test]
fn tmpfs_directory_is_refused() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    nix::mount::mount(
        Some("tmpfs"),
        dir.path(),
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        Some("size=4m"),
    )
    .unwrap();
    std::fs::write(dir.path().join("f"), b"data").unwrap();
    let out = fragkit(&["scan", &dir.path().to_string_lossy()]);
    nix::mount::umount2(dir.path(), nix::mount::MntFlags::MNT_DETACH).unwrap();
    one_line_error(&out, 1, &[&dir.path().to_string_lossy(), "tmpfs", "FIEMAP"]);
}

#[test]
fn unreadable_file_when_not_root() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, vec![7u8; 8192]).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_fragkit"))
        .args(["scan", "--format", "json"])
        .arg(&secret)
        .output()
        .unwrap();
    one_line_error(&out, 1, &[&secret.to_string_lossy(), "permission denied"]);
    // The report still comes out, counting the error.
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["summary"]["errors"], 1);
    assert_eq!(doc["summary"]["files"], 0);
}

#[test]
fn zero_request_size() {
    let out = fragkit(&["scan", "--request-size", "0", "/"]);
    one_line_error(&out, 2, &["request size", "greater than zero"]);
    let out = fragkit(&["scan", "--request-size", "1000", "/"]);
    one_line_error(&out, 2, &["multiple of 512"]);
    let out = fragkit(&["scan", "--request-size", "12Q", "/"]);
    one_line_error(&out, 2, &["12Q", "not a size"]);
}

/// Values that used to panic (exit 101) get one line naming the value and exit 2.
#[test]
fn huge_and_nan_values_are_refused_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_string_lossy().to_string();
    let cases: &[(&[&str], &str)] = &[
        (&["defrag", "--max-rate", "NaN", &d], "NaN"),
        (&["defrag", "--max-rate", "1e-300", &d], "1e-300"),
        (&["defrag", "--max-rate", "inf", &d], "inf"),
        (
            &["watch", "--interval", "99999999999999999999", &d],
            "99999999999999999999",
        ),
        (
            &["watch", "--rescan", "99999999999999999999d", &d],
            "99999999999999999999d",
        ),
        (
            &["trace", "-d", "99999999999999999999"],
            "99999999999999999999",
        ),
        (&["bench", "sweep", "--frag-size", "0"], "--frag-size 0"),
    ];
    all_refused(cases);
}

/// Each command exits 2 with one line on stderr that contains its text.
fn all_refused(cases: &[(&[&str], &str)]) {
    for (args, named) in cases {
        let out = fragkit(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(named), "{args:?} should say {named}: {err}");
    }
}

/// Nonsense that used to be accepted (exit 0 with an empty or meaningless result).
#[test]
fn nonsense_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f").to_string_lossy().to_string();
    let d = dir.path().to_string_lossy().to_string();
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "age",
                "layout",
                "--frag-size",
                "16M",
                "--size",
                "8M",
                "--frag-distance",
                "4K",
                &f,
            ],
            "--frag-size 16M is larger than --size 8M",
        ),
        (
            &["age", "paf", "PAF:50.30@1M<0", "--target", &d, "--dry-run"],
            "KBLOCKS",
        ),
        (
            &[
                "age",
                "paf",
                "PAF:50.30@18446744073709551615",
                "--target",
                &d,
                "--dry-run",
            ],
            "less than one file",
        ),
        (
            &["age", "paf", "PAF:5Ã.30@1M", "--target", &d, "--dry-run"],
            "found 'Ã'",
        ),
        // The FAST'24 workloads write into an existing directory, never create one.
        (
            &["age", "fileserver", &f, "--files", "3"],
            "not a directory",
        ),
        (
            &["age", "fileserver", &d, "--contiguous"],
            "apply to --mix artifact only",
        ),
        (
            &["age", "fileserver", &d, "--mix", "artifact", "--loops", "5"],
            "applies to --mix filebench only",
        ),
        (&["age", "sqlite", &f, "--records", "3"], "not a directory"),
        (&["age", "sqlite", &d, "--records", "0"], "--records 0"),
    ];
    all_refused(cases);
}

/// `trace --help` says which I/O paths the tracer does not see, before anyone relies on it.
#[test]
fn trace_help_names_what_is_not_traced() {
    let out = fragkit(&["trace", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let line = help
        .lines()
        .find(|l| l.starts_with("Not traced"))
        .unwrap_or_else(|| panic!("no 'Not traced' line in:\n{help}"));
    for blind in ["mmap", "io_uring", "AIO"] {
        assert!(line.contains(blind), "{line}");
    }
}

/// `trace -o` into a directory that does not exist is refused before anything runs: the
/// traced command never starts.
#[test]
fn trace_output_directory_is_checked_before_the_command_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("ran");
    let out = tmp.path().join("no-such-dir").join("p.json");
    let o = fragkit(&[
        "trace",
        "-o",
        &out.to_string_lossy(),
        "--",
        "touch",
        &marker.to_string_lossy(),
    ]);
    one_line_error(&o, 2, &["-o", "does not exist"]);
    assert!(
        !marker.exists(),
        "the traced command ran before -o was checked"
    );
}

/// Counts and sizes past what the machine or the file system can hold are refused in one
/// line naming the option and the limit (threads-max, MemAvailable, free bytes), before
/// anything is allocated or written: no allocation failure aborts the process.
#[test]
fn values_past_the_machines_limits_are_one_line_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_string_lossy().into_owned();
    let h = dir.path().join("h").to_string_lossy().into_owned();
    let huge = "100000000000";
    let cases: [(Vec<&str>, &[&str]); 7] = [
        (vec!["scan", "-j", huge, &d], &["--threads", "threads-max"]),
        (
            vec![
                "age",
                "fragpicker-synthetic",
                "--files",
                huge,
                "--size",
                "1M",
                &d,
            ],
            &["--files", "free"],
        ),
        (
            vec!["age", "hypothetical", "--stripe", "1000T", &h],
            &["--stripe", "memory"],
        ),
        (
            vec!["age", "sqlite", "--dummy", huge, &d],
            &["--dummy", "memory"],
        ),
        (
            vec!["age", "fileserver", "--files", huge, &d],
            &["--files", "memory"],
        ),
        (
            vec!["age", "fileserver", "--threads", huge, &d],
            &["--threads", "threads-max"],
        ),
        (
            vec!["age", "fileserver", "--iosize", "1000T", &d],
            &["--iosize", "memory"],
        ),
    ];
    for (args, words) in cases {
        let out = fragkit(&args);
        one_line_error(&out, 2, words);
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "nothing written: {left:?}");
}

/// `bench read|write` and `probe alignment` refuse a request count they could never
/// finish (2^32 and more hung, holding a latency per request) at parse time; a read's
/// `--size` past the end of the file is clipped there, so no zero-byte read is counted.
#[test]
fn io_counts_are_bounded_and_reads_stop_at_end_of_file() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f");
    std::fs::write(&f, vec![7u8; 1 << 20]).unwrap();
    let p = f.to_string_lossy();
    for args in [
        &[
            "bench",
            "read",
            &p,
            "--count",
            "4294967296",
            "--no-drop-caches",
        ][..],
        &[
            "bench",
            "write",
            &p,
            "--count",
            "4294967296",
            "--no-drop-caches",
        ][..],
        &["bench", "read", &p, "--count", "0", "--no-drop-caches"][..],
        &["probe", "alignment", &p, "--count", "18446744073709551615"][..],
    ] {
        let out = fragkit(args);
        one_line_error(&out, 2, &["--count", "expected 1 to 100000000 requests"]);
    }
    // 4 MiB asked of a 1 MiB file: 1 MiB read, in 8 requests of 128 KiB, each iteration.
    let out = fragkit(&[
        "bench",
        "read",
        &p,
        "--size",
        "4M",
        "--no-drop-caches",
        "--iterations",
        "2",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let job = &v["jobs"][0];
    assert_eq!(job["region_size"], 1 << 20, "{job}");
    for it in job["iterations"].as_array().unwrap() {
        assert_eq!(it["bytes"], 1 << 20, "{it}");
        assert_eq!(it["requests"], 8, "{it}");
    }
    // Starting past the end: nothing to read, one line saying so.
    let out = fragkit(&["bench", "read", &p, "--offset", "2M", "--no-drop-caches"]);
    one_line_error(&out, 2, &[&p, "nothing to read from offset 2097152"]);
}
