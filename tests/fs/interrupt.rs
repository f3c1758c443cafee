//! SIGINT and SIGTERM. During `defrag` the first one stops the run from starting further
//! ranges: the moves in flight finish, are made durable and verified, the file-system knobs
//! the run set are put back, and the report lists what was not started as `interrupted`,
//! exit 1. A second one ends the process, but only after the signal handler put every knob
//! back. `age layout`, `lab`, `bench dof` and `bench sweep` stop at their next step and
//! leave nothing behind: filler files, half-made targets, scratch file systems, loop
//! devices and images go the way an error takes them.

use crate::common;

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use fragkit::defrag::movelog;
use fragkit::scratch::FsType;
use serde_json::Value;

#[test]
fn sigint_ends_a_full_run_with_its_report_and_knobs_restored() {
    let s = paf_aged(FsType::Ext4, 1 << 30, "8", "16M");
    let fp = s.mountpoint().join("fp");
    let knob = format!(
        "/sys/fs/ext4/{}/mb_max_to_scan",
        fragkit::sys::tunable::block_device_name(&fp).unwrap()
    );
    let knob_before = std::fs::read_to_string(&knob).unwrap();
    let before = file_counts(&fp);
    let hashes: Vec<u64> = before.keys().map(|p| file_hash(p)).collect();
    let log = s.mountpoint().join("moves.log");
    // 8 x 16 MiB at 16 MB/s: about 8 s, the first file done after about one.
    let child = Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args([
            "defrag",
            "--mode",
            "full",
            "--max-rate",
            "16",
            "--format",
            "json",
        ])
        .arg(&fp)
        .env(movelog::ENV, &log)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("end "))
    {
        assert!(t0.elapsed() < Duration::from_secs(60), "no move finished");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let summary = &report["summary"];
    assert_eq!(summary["interrupted"], true, "{summary}");
    let ranges: Vec<&Value> = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["ranges"].as_array().unwrap())
        .collect();
    let moved = ranges.iter().filter(|r| r["status"] == "moved").count();
    let interrupted = ranges.iter().filter(|r| r["skip"] == "interrupted").count();
    assert!(moved >= 1, "{summary}");
    assert!(interrupted >= 1, "the run ended before SIGINT: {summary}");
    assert_eq!(moved + interrupted, ranges.len(), "{report}");
    // Every range that began also ended: nothing was cut off in the middle.
    let text = std::fs::read_to_string(&log).unwrap();
    let begins = text.lines().filter(|l| l.starts_with("begin ")).count();
    let ends = text.lines().filter(|l| l.starts_with("end ")).count();
    assert_eq!((begins, ends), (moved, moved));
    assert_eq!(report["tunables"][0]["restored"], true, "{report}");
    assert_eq!(std::fs::read_to_string(&knob).unwrap(), knob_before);
    // What the report calls moved is on disk: a power cut now changes nothing.
    power_cut_and_remount(&s, FsType::Ext4);
    assert_layouts_as_reported(&report, &fp);
    drop_caches();
    let after: Vec<u64> = before.keys().map(|p| file_hash(p)).collect();
    assert_eq!(hashes, after, "contents changed");
    s.destroy().unwrap();
}

/// Poll `path` until it reads `want` (a knob the child sets at its start).
fn wait_for(path: &str, want: &str) {
    let t0 = Instant::now();
    while std::fs::read_to_string(path).unwrap().trim() != want {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{path} never read {want}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Two SIGINTs: the second ends defrag at once, and full mode's knob reads its old value.
#[test]
fn second_sigint_ends_defrag_with_the_knob_put_back() {
    let s = paf_aged(FsType::Ext4, 512 << 20, "2", "32M");
    let fp = s.mountpoint().join("fp");
    let knob = format!(
        "/sys/fs/ext4/{}/mb_max_to_scan",
        fragkit::sys::tunable::block_device_name(&fp).unwrap()
    );
    let before = std::fs::read_to_string(&knob).unwrap();
    let log = s.mountpoint().join("moves.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args([
            "defrag",
            "--mode",
            "full",
            "--max-rate",
            "8",
            "--format",
            "json",
        ])
        .arg(&fp)
        .env(movelog::ENV, &log)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The run raises it (to half the file system's blocks) before its first move.
    let t0 = Instant::now();
    while std::fs::read_to_string(&knob).unwrap() == before {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the knob was never set"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // Signalled only once a move is under way (a 32 MiB file at 8 MB/s: seconds), so the
    // first signal cannot end the run before the second arrives.
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("begin "))
    {
        assert!(t0.elapsed() < Duration::from_secs(60), "no move began");
        std::thread::sleep(Duration::from_millis(5));
    }
    for _ in 0..2 {
        // SAFETY: kill(2) on our own child.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}");
    assert_eq!(std::fs::read_to_string(&knob).unwrap(), before);
    s.destroy().unwrap();
}

/// SIGTERM during `age layout`, which sets ext4's reserved_clusters to 0 while it fills the
/// file system: the process ends by the signal and the knob reads its old value.
#[test]
fn sigterm_during_aging_removes_its_filler_and_puts_reserved_clusters_back() {
    let s = scratch(FsType::Ext4, 1 << 30, &[]);
    let knob = format!("/sys/fs/ext4/{}/reserved_clusters", s.device_name());
    let before = std::fs::read_to_string(&knob).unwrap();
    assert_ne!(before.trim(), "0");
    let mut child = Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args([
            "age",
            "layout",
            "--size",
            "128M",
            "--frag-size",
            "4K",
            "--frag-distance",
            "4K",
        ])
        .arg(s.mountpoint().join("f"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&knob, "0");
    // SAFETY: kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    // It stops between pieces and ends through its error path (exit 2), which puts the
    // knob back and removes the filler and the half-made target.
    assert_eq!(status.code(), Some(2), "{status:?}");
    assert_eq!(std::fs::read_to_string(&knob).unwrap(), before);
    let left: Vec<_> = std::fs::read_dir(s.mountpoint())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "lost+found")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let free = nix::sys::statvfs::statvfs(s.mountpoint()).unwrap();
    let used = (free.blocks() - free.blocks_free()) * free.fragment_size();
    assert!(
        used < 64 << 20,
        "{used} bytes still used after the filler went"
    );
    s.destroy().unwrap();
}

/// Loop devices whose backing file lies under `dir`, and mounts under it: what a run with
/// its images in `dir` left behind.
fn left_under(dir: &std::path::Path) -> Vec<String> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let mut left = Vec::new();
    for e in std::fs::read_dir("/sys/block").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let backing = std::fs::read_to_string(e.path().join("loop/backing_file"));
        if let Ok(b) = backing {
            if std::path::Path::new(b.trim_end()).starts_with(&dir) {
                left.push(format!("loop device {name} over {}", b.trim_end()));
            }
        }
    }
    for line in std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
    {
        let mp = line.split(' ').nth(4).unwrap_or("");
        if std::path::Path::new(mp).starts_with(&dir) {
            left.push(format!("mount {mp}"));
        }
    }
    left
}

/// Lines in the lab's step-times file: how many steps have finished.
fn steps_done(out: &std::path::Path) -> usize {
    std::fs::read_to_string(out.join("logs/steps.times"))
        .unwrap_or_default()
        .lines()
        .count()
}

/// `lab` stops on SIGINT to its process group (Ctrl-C: the running step gets it too) and
/// on SIGTERM to the lab alone (the lab stops the running step), says so, exits 2 and
/// leaves no loop device, mount or image behind, whichever step was running.
#[test]
fn lab_tears_down_what_it_made_on_sigint_and_sigterm() {
    // (signal, to the whole group, steps finished before it is sent): during the first
    // clones, and later during the workload's rounds.
    for (sig, group, after) in [(libc::SIGINT, true, 6), (libc::SIGTERM, false, 12)] {
        let images = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let lab = out.path().join("lab");
        let child = fragkit_in_own_group(&[
            "lab".as_ref(),
            "--size".as_ref(),
            "512M".as_ref(),
            "--out".as_ref(),
            lab.as_os_str(),
            "--scratch-dir".as_ref(),
            images.path().as_os_str(),
        ]);
        let t0 = Instant::now();
        while steps_done(&out.path().join("lab")) < after {
            assert!(
                t0.elapsed() < Duration::from_secs(240),
                "lab did not reach step {after}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let pid = child.id() as i32;
        let target = if group { -pid } else { pid };
        // SAFETY: kill(2) on our own child (or its own process group).
        assert_eq!(unsafe { libc::kill(target, sig) }, 0);
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "signal {sig}: {err}");
        assert!(
            err.contains("interrupted by SIGINT or SIGTERM"),
            "signal {sig}: {err}"
        );
        assert_eq!(
            left_under(images.path()),
            Vec::<String>::new(),
            "signal {sig}: {err}"
        );
        let rest: Vec<_> = std::fs::read_dir(images.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(rest.is_empty(), "signal {sig}: left {rest:?}; {err}");
    }
}

/// `bench dof`, `bench sweep` and `bench paf` on SIGTERM (and SIGINT) stop between runs
/// and take their scratch file system down with them: no loop device, mount or directory
/// left in $TMPDIR.
#[test]
fn bench_dof_sweep_and_paf_tear_down_on_sigint_and_sigterm() {
    let outputs = tempfile::tempdir().unwrap();
    let csv = outputs
        .path()
        .join("paf.csv")
        .to_string_lossy()
        .into_owned();
    let runs: [(Vec<&str>, i32); 3] = [
        (vec!["bench", "dof", "--iterations", "200"], libc::SIGTERM),
        (
            vec![
                "bench",
                "sweep",
                "--iterations",
                "50",
                "--frag-size",
                "4K,8K,16K",
                "--frag-distance",
                "4K,64K",
            ],
            libc::SIGINT,
        ),
        (
            vec![
                "bench",
                "paf",
                "--capacities",
                "40",
                "--frag",
                "50",
                "--xfer",
                "1M",
                "--iterations",
                "200",
                "--fs-size",
                "256M",
                "--bench-size",
                "32M",
                "--file-size",
                "4M",
                "--csv",
                &csv,
            ],
            libc::SIGTERM,
        ),
    ];
    for (args, sig) in runs {
        let tmp = tempfile::tempdir().unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_fragkit"))
            .args(&args)
            .env("TMPDIR", tmp.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Until its scratch file system is mounted.
        let t0 = Instant::now();
        while !left_under(tmp.path())
            .iter()
            .any(|l| l.starts_with("mount"))
        {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "{args:?}: no scratch mounted"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(500));
        // SAFETY: kill(2) on our own child.
        assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("interrupted by SIGINT or SIGTERM"),
            "{args:?}: {err}"
        );
        assert_eq!(left_under(tmp.path()), Vec::<String>::new(), "{args:?}");
        let rest: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(rest.is_empty(), "{args:?}: left {rest:?}");
    }
}

/// `bench writes` (the lab's wrapper around every defrag) passes SIGTERM on to its command
/// and waits for it to end: a command still running on a file system after its wrapper
/// exited kept a lab's clone busy (a loop device left behind).
#[test]
fn bench_writes_passes_sigterm_on_and_waits_for_its_command() {
    let s = scratch(FsType::Ext4, 64 << 20, &[]);
    let ended = s.mountpoint().join("ended");
    let started = s.mountpoint().join("started");
    // The command takes 0.5 s to end after SIGTERM, and says when it has; it holds none of
    // our pipes, so an orphaned command cannot keep this test waiting.
    let script = format!(
        "exec >/dev/null 2>&1; trap 'sleep 0.5; echo term > {e}; exit 3' TERM; touch {s}; \
         while :; do sleep 0.05; done",
        e = ended.display(),
        s = started.display()
    );
    let child = fragkit_in_own_group(&[
        "bench".as_ref(),
        "writes".as_ref(),
        "--no-sync".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        "--path".as_ref(),
        s.mountpoint().as_os_str(),
        "--".as_ref(),
        "sh".as_ref(),
        "-c".as_ref(),
        script.as_ref(),
    ]);
    let t0 = Instant::now();
    while !started.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the command did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: kill(2) on our own child alone.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        ended.exists(),
        "bench writes exited ({:?}) before its command ended: {err}",
        o.status
    );
    assert_eq!(o.status.code(), Some(3), "the command's status: {err}");
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["exit_status"], 3, "{doc}");
    s.destroy().unwrap();
}

/// fragkit with `args`, its output piped, in a process group of its own: a signal sent to
/// the group reaches the commands it runs, and never this test.
fn fragkit_in_own_group(args: &[&std::ffi::OsStr]) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap()
}
