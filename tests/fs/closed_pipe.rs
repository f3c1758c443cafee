//! A closed stdout or stderr (`fragkit … | head -0`, `2>&-` through a pipe whose reader
//! went away) ends every subcommand quietly with its own status: no panic (exit 101), no
//! death by signal, no "Broken pipe" message. Each subcommand is run once with a normal
//! pipe to learn its status, then with stdout closed, then with stdout and stderr closed.

use crate::common;

use std::fs;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use fragkit::scratch::FsType;

/// A pipe whose read end is already closed: every write to it fails with EPIPE.
fn closed_pipe() -> OwnedFd {
    let (read, write) = nix::unistd::pipe().expect("pipe");
    drop(read);
    write
}

fn run(args: &[String], close_stdout: bool, close_stderr: bool) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fragkit"));
    cmd.args(args).stdin(Stdio::null());
    if close_stdout {
        cmd.stdout(closed_pipe());
    }
    if close_stderr {
        cmd.stderr(closed_pipe());
    }
    cmd.output().expect("run fragkit")
}

/// Runs `args` three ways and checks the closed-pipe runs end as the rule says.
fn check(args: &[String]) {
    let normal = run(args, false, false);
    let expected = normal.status.code();
    assert!(
        expected.is_some_and(|c| c != 101),
        "{args:?} failed on its own: {:?}\n{}",
        normal.status,
        String::from_utf8_lossy(&normal.stderr)
    );
    for (close_stdout, close_stderr) in [(true, false), (true, true), (false, true)] {
        let o = run(args, close_stdout, close_stderr);
        let stderr = String::from_utf8_lossy(&o.stderr);
        let code = o.status.code();
        assert!(
            code.is_some(),
            "{args:?} (stdout closed {close_stdout}, stderr closed {close_stderr}) died of a signal: {:?}",
            o.status
        );
        // Ending early because stdout is gone is success (as ripgrep does); otherwise the
        // command's own status.
        assert!(
            code == expected || (close_stdout && code == Some(0)),
            "{args:?} (stdout closed {close_stdout}, stderr closed {close_stderr}): status {code:?}, \
             with open pipes {expected:?}\n{stderr}"
        );
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "{args:?} (stdout closed): {stderr}"
        );
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

#[test]
fn every_subcommand_ends_quietly_on_a_closed_pipe() {
    common::require_root();
    let s = common::scratch(FsType::Ext4, 128 << 20, &[]);
    let mp = s.mountpoint().to_path_buf();
    let f = mp.join("f");
    common::write_file(&f, 4 << 20, 7);
    let tmp = tempfile::tempdir().unwrap();
    let t = |name: &str| tmp.path().join(name).to_string_lossy().into_owned();
    let p = |path: &Path| path.to_string_lossy().into_owned();

    // History for `watch report`, and a block trace for `ssd`.
    let db = t("watch.db");
    let o = common::fragkit(&["watch", &p(&mp), "--db", &db, "--duration", "1s"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let trace = t("blk.json");
    common::trace_block(
        &s.info.loop_device,
        &mp,
        Path::new(&trace),
        &format!(
            "dd if={} of=/dev/null bs=128k iflag=direct status=none",
            p(&f)
        ),
    );

    let cases: Vec<Vec<String>> = vec![
        strings(&["scan", &p(&mp)]),
        strings(&["scan", "--format", "json", &p(&mp)]),
        strings(&["scan", "--format", "filefrag", &p(&f)]),
        // The issue's own example: an error line for the missing path, then the table.
        strings(&["scan", "/nonexistent", &p(&mp)]),
        strings(&["free", &p(&mp)]),
        strings(&["map", &p(&mp), "--out", &t("m.png")]),
        strings(&["defrag", "--dry-run", &p(&f)]),
        strings(&["bench", "read", "--bs", "128K", "--iterations", "2", &p(&f)]),
        strings(&["probe", "alignment", "--help"]),
        strings(&["trace", "--summary", "--", "cat", &p(&f)]),
        strings(&[
            "age",
            "layout",
            &p(&mp.join("g")),
            "--size",
            "1M",
            "--frag-size",
            "16K",
            "--frag-distance",
            "4K",
        ]),
        strings(&["ssd", &trace, "--model", "fast24"]),
        strings(&["watch", "report", "--db", &db]),
        strings(&["watch", "report", "--db", &db, "--format", "csv"]),
        strings(&["scratch", "list"]),
        strings(&["lab", "--help"]),
        strings(&["completions", "bash"]),
        strings(&["man"]),
        strings(&["no-such-command"]),
    ];
    for args in &cases {
        check(args);
    }
    fs::remove_file(&f).ok();
}
