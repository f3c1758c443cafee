#![cfg(feature = "mpi")]
//! fragkit as MPI ranks under OpenMPI's mpirun (4 ranks on this host, oversubscribed) on
//! real scratch file systems: `age paf` reaches the spec's capacity and repeats itself
//! with the same seed, `bench ior` writes one file per rank and prints IOR's summary, a
//! rank that fails ends the job with its error, and the same binary runs without mpirun.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;
use fragkit::scratch::FsType;

const BIN: &str = env!("CARGO_BIN_EXE_fragkit");
/// A job that hangs is killed after this long and the test fails (timeout's status 124).
const LIMIT_SECONDS: &str = "180";

/// `mpirun -np N fragkit ARGS` under a time limit.
fn mpirun(n: usize, args: &[&str]) -> Output {
    let np = n.to_string();
    let mut cmd = Command::new("timeout");
    cmd.args([
        LIMIT_SECONDS,
        "mpirun",
        "--allow-run-as-root",
        "--oversubscribe",
        "-np",
        &np,
        BIN,
    ]);
    cmd.args(args);
    let out = cmd.output().expect("run timeout/mpirun");
    assert_ne!(
        out.status.code(),
        Some(124),
        "mpirun {args:?} hung: killed after {LIMIT_SECONDS} s\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn ok_json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "status {:?}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Every file under `root` (relative name, size), sorted.
fn listing(root: &Path) -> Vec<(String, u64)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, u64)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                walk(root, &e.path(), out);
            } else {
                let rel = e.path().strip_prefix(root).unwrap().display().to_string();
                out.push((rel, m.len()));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

#[test]
fn four_ranks_populate_paf_to_the_capacity_and_repeat_with_the_seed() {
    let s = scratch(FsType::Ext4, 512 << 20, &[]);
    let mnt = s.mountpoint().to_str().unwrap().to_string();
    let spec = "PAF:40.30:67005@4M";
    let run = || {
        ok_json(&mpirun(
            4,
            &["age", "paf", spec, "--target", &mnt, "--format", "json"],
        ))
    };
    let a = run();
    assert_eq!(a["ranks"], 4);
    let f = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap();
    // Whole 4 MiB files: the ranks wrote the spec's 40% to within 1% of capacity, and what
    // the file system holds after the 30% deletion is the spec's 28% to within 1%.
    assert!((f(&a, "written_pct") - 40.0).abs() <= 1.0, "{a}");
    assert!(
        (f(&a, "added_pct") - f(&a, "requested_remaining_pct")).abs() <= 1.0,
        "{a}"
    );
    let files_a = listing(&s.mountpoint().join("paf"));
    assert_eq!(files_a.len() as u64, a["files"].as_u64().unwrap());
    // Each rank wrote under its own directory, shares within one file of each other.
    let per_rank: Vec<usize> = (0..4)
        .map(|r| {
            files_a
                .iter()
                .filter(|(n, _)| n.starts_with(&format!("r{r:04}/")))
                .count()
        })
        .collect();
    assert_eq!(
        per_rank.iter().sum::<usize>(),
        files_a.len(),
        "{per_rank:?}"
    );
    let written: Vec<u64> = a["per_rank"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["bytes_written"].as_u64().unwrap())
        .collect();
    assert!(
        written.iter().max().unwrap() - written.iter().min().unwrap() <= 4 << 20,
        "{written:?}"
    );
    // The same spec, seed and rank count again on the emptied file system: the same files.
    std::fs::remove_dir_all(s.mountpoint().join("paf")).unwrap();
    let b = run();
    assert_eq!(listing(&s.mountpoint().join("paf")), files_a);
    assert_eq!(a["file_set_digest"], b["file_set_digest"]);
    // Each rank's populate time is its own, not the slowest rank's (taken before the
    // collective check that waits for all).
    let secs: Vec<f64> = a["per_rank"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["populate_seconds"].as_f64().unwrap())
        .collect();
    assert!(secs.windows(2).any(|w| w[0] != w[1]), "{secs:?}");
    // The same seed with 2 ranks: the same file set (names without the rank directory),
    // so the same digest.
    std::fs::remove_dir_all(s.mountpoint().join("paf")).unwrap();
    let c = ok_json(&mpirun(
        2,
        &["age", "paf", spec, "--target", &mnt, "--format", "json"],
    ));
    assert_eq!(c["ranks"], 2);
    assert_eq!(a["file_set_digest"], c["file_set_digest"]);
    let strip = |v: &[(String, u64)]| -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = v
            .iter()
            .map(|(n, s)| (n.split_once('/').unwrap().1.to_string(), *s))
            .collect();
        out.sort();
        out
    };
    assert_eq!(
        strip(&listing(&s.mountpoint().join("paf"))),
        strip(&files_a)
    );
}

#[test]
fn bench_ior_writes_one_file_per_rank_and_prints_iors_summary() {
    let s = scratch(FsType::Ext4, 512 << 20, &[]);
    let dir: PathBuf = s.mountpoint().join("ior");
    std::fs::create_dir(&dir).unwrap();
    let d = dir.to_str().unwrap();
    let common = [
        "bench",
        "ior",
        d,
        "--xfer",
        "1M,4M",
        "--block",
        "16M",
        "--direct",
        "--write",
        "--read",
        "--iterations",
        "2",
    ];
    let mut args = common.to_vec();
    args.extend(["--file-per-process", "--keep", "--format", "json"]);
    let r = ok_json(&mpirun(4, &args));
    assert_eq!(r["tasks"], 4);
    assert_ne!(r["read_shift"], 0, "-C: no rank reads its own file");
    let mut files: Vec<(String, u64)> = listing(&dir);
    files.sort();
    let want: Vec<(String, u64)> = (0..4).map(|i| (format!("ior.{i:08}"), 16 << 20)).collect();
    assert_eq!(files, want);
    let summary = r["summary"].as_array().unwrap();
    assert_eq!(summary.len(), 4, "write and read for 2 transfer sizes");
    for s in summary {
        assert_eq!(s["tasks"], 4);
        assert_eq!(s["iterations"], 2);
        assert!(s["min_mib_per_s"].as_f64().unwrap() > 0.0, "{s}");
    }
    assert_eq!(r["iterations"].as_array().unwrap().len(), 8);
    // Every rank mapped its file after every write: 2 sizes × 2 iterations × 4 ranks.
    let frags = r["fragments"].as_array().unwrap();
    assert_eq!(frags.len(), 16);
    assert!(frags.iter().all(|f| f["fragments"].as_u64().unwrap() >= 1));
    for f in std::fs::read_dir(&dir).unwrap() {
        std::fs::remove_file(f.unwrap().path()).unwrap();
    }

    // IOR's table, one shared file this time.
    let mut args = common.to_vec();
    args.push("--shared-file");
    let out = mpirun(4, &args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // IOR's summary: a header of column names, then one row per operation and size.
    let summary = text
        .split("Summary of all tests:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no summary: {text}"));
    let mut lines = summary.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let tasks = header.iter().position(|h| *h == "#Tasks").unwrap();
    let fpp = header.iter().position(|h| *h == "fPP").unwrap();
    let rows: Vec<Vec<&str>> = lines
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .take_while(|c| c.len() == header.len())
        .collect();
    assert_eq!(rows.len(), 4, "{text}");
    for row in rows {
        assert_eq!(row[tasks], "4", "#Tasks column: {row:?}");
        assert_eq!(row[fpp], "0", "fPP column (shared file): {row:?}");
    }
    assert!(listing(&dir).is_empty(), "files removed without --keep");
}

/// Sectors read and written on a block device (/sys/block/DEV/stat fields 3 and 7), in bytes.
fn device_bytes(dev: &str) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/sys/block/{dev}/stat")).unwrap();
    let f: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
    (f[2] * 512, f[6] * 512)
}

/// IOR's -s, -z, -Z and -D: segments place every rank's blocks where IOR does (the shared
/// file is whole, rank r's block at (segment × tasks + r) × block), and with a deadline the
/// figures count the bytes that moved, which the device confirms: the read phase reads what
/// the stopped writers wrote.
#[test]
fn bench_ior_segments_random_order_and_deadline_count_what_moved() {
    let s = scratch(FsType::Ext4, 1 << 30, &[]);
    let dev = loop_name(&s);
    let dir = s.mountpoint().join("ior");
    std::fs::create_dir(&dir).unwrap();
    let d = dir.to_str().unwrap();
    let r = ok_json(&mpirun(
        4,
        &[
            "bench",
            "ior",
            d,
            "--xfer",
            "1M",
            "--block",
            "4M",
            "--segments",
            "3",
            "--random-offsets",
            "--reorder-random",
            "--reorder-seed",
            "5",
            "--direct",
            "--shared-file",
            "--iterations",
            "1",
            "--keep",
            "--format",
            "json",
        ],
    ));
    let shared = dir.join("ior.shared");
    let m = std::fs::metadata(&shared).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(m.len(), 4 * 3 * (4 << 20), "4 ranks × 3 segments × 4 MiB");
    // Every block written, no hole (an extent-tree block may come on top).
    assert!(
        m.blocks() * 512 >= m.len(),
        "{} allocated",
        m.blocks() * 512
    );
    for it in r["iterations"].as_array().unwrap() {
        assert_eq!(it["bytes"], 48u64 << 20, "{it}");
        assert_eq!(it["planned_bytes"], 48u64 << 20, "{it}");
    }
    assert_eq!(r["segments"], 3);
    assert_eq!(r["order"]["kind"], "random");
    assert_eq!(r["read_plans"][0]["read_from"].as_array().unwrap().len(), 4);
    for s in r["summary"].as_array().unwrap() {
        assert_eq!(s["aggregate_bytes"], 48u64 << 20);
    }
    std::fs::remove_file(&shared).unwrap();

    // A deadline far shorter than 2 × 256 MiB takes: each rank stops early.
    let (r0, w0) = device_bytes(&dev);
    let r = ok_json(&mpirun(
        2,
        &[
            "bench",
            "ior",
            d,
            "--xfer",
            "1M",
            "--block",
            "256M",
            "--deadline",
            "0.05",
            "--direct",
            "--file-per-process",
            "--iterations",
            "1",
            "--format",
            "json",
        ],
    ));
    let (r1, w1) = device_bytes(&dev);
    let rows = r["iterations"].as_array().unwrap();
    let (write, read) = (&rows[0], &rows[1]);
    let wb = write["bytes"].as_u64().unwrap();
    let rb = read["bytes"].as_u64().unwrap();
    assert!(wb < 512 << 20 && wb > 0, "{write}");
    assert_eq!(write["planned_bytes"], 512u64 << 20);
    // Each reader reads its writer's file: what it holds, not the planned 256 MiB.
    assert_eq!(read["planned_bytes"].as_u64().unwrap(), wb, "{read}");
    assert!(rb <= wb, "{read}");
    // The device saw the data the figures count (plus at most 1 MiB of metadata).
    let (dr, dw) = (r1 - r0, w1 - w0);
    assert!(
        dw >= wb && dw <= wb + (1 << 20) + wb / 100,
        "device wrote {dw}, ranks {wb}"
    );
    assert!(
        dr >= rb && dr <= rb + (1 << 20),
        "device read {dr}, ranks {rb}"
    );
}

#[test]
fn a_failing_rank_ends_the_job_with_its_error() {
    let s = scratch(FsType::Ext4, 256 << 20, &[]);
    let dir = s.mountpoint().join("ior");
    std::fs::create_dir(&dir).unwrap();
    // Rank 2's file path is taken by a directory: only rank 2 fails.
    std::fs::create_dir(dir.join("ior.00000002")).unwrap();
    let out = mpirun(
        4,
        &[
            "bench",
            "ior",
            dir.to_str().unwrap(),
            "--xfer",
            "1M",
            "--block",
            "4M",
            "--direct",
            "--iterations",
            "1",
            "--file-per-process",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("rank 2: ") && err.contains("ior.00000002: not a regular file"),
        "{err}"
    );
    // mpirun ends the other ranks once one exits non-zero, so rank 0's own line ("stopped
    // because rank 2 failed") may or may not come out first; no other rank claims a failure.
    assert!(
        !err.contains("rank 0: ") && !err.contains("rank 1: "),
        "{err}"
    );
}

#[test]
fn the_same_binary_runs_without_mpirun() {
    // No launcher variables, no OpenMPI root permission: fragkit must not start MPI.
    let plain = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .env_remove("OMPI_ALLOW_RUN_AS_ROOT")
            .env_remove("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")
            .output()
            .unwrap()
    };
    let v = plain(&["--version"]);
    assert!(v.status.success());
    assert!(String::from_utf8_lossy(&v.stdout).starts_with("fragkit "));
    let s = scratch(FsType::Ext4, 256 << 20, &[]);
    let mnt = s.mountpoint().to_str().unwrap();
    let out = plain(&[
        "age",
        "paf",
        "PAF:20.10:3@4M",
        "--target",
        mnt,
        "--format",
        "json",
    ]);
    let r = ok_json(&out);
    assert!(r.get("ranks").is_none(), "the single-node report: {r}");
    assert_eq!(r["dir"], "paf");
    assert!(s.mountpoint().join("paf/g0").is_dir());
    // And under mpirun, every rank prints the version.
    let out = mpirun(2, &["--version"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .matches("fragkit ")
            .count(),
        2
    );
}

/// Under a launcher without --mpi, `bench paf` would run one whole matrix per rank into
/// the same output: it refuses before making anything, with one line naming --mpi.
#[test]
fn bench_paf_under_mpirun_without_mpi_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("paf.csv");
    let out = mpirun(
        2,
        &[
            "bench",
            "paf",
            "--capacities",
            "20",
            "--fs-size",
            "256M",
            "--csv",
            csv.to_str().unwrap(),
        ],
    );
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("without --mpi") && err.contains("add --mpi"),
        "{err}"
    );
    assert_eq!(err.matches("without --mpi").count(), 1, "said once: {err}");
    assert!(!csv.exists(), "nothing written");
}

#[test]
fn bench_paf_mpi_measures_cells_as_ranks_and_resumes() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("paf.csv");
    let args = [
        "bench",
        "paf",
        "--mpi",
        "--capacities",
        "20",
        "--frag",
        "0,30",
        "--xfer",
        "1M",
        "--iterations",
        "2",
        "--fs-size",
        "256M",
        "--bench-size",
        "8M",
        "--file-size",
        "4M",
        "--csv",
        csv.to_str().unwrap(),
        "--format",
        "json",
    ];
    let r = ok_json(&mpirun(2, &args));
    assert_eq!(r["measured_cells"], 2);
    let rows = r["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "2 cells × write, read");
    assert!(rows.iter().all(|row| row["ranks"] == 2), "{r}");
    assert!(rows
        .iter()
        .all(|row| row["mb_per_s_mean"].as_f64().unwrap() > 0.0));
    // The cell with 30% deleted holds less than the one with none.
    let used = |frag: u64| {
        rows.iter().find(|row| row["frag_pct"] == frag).unwrap()["used_pct"]
            .as_f64()
            .unwrap()
    };
    assert!(used(30) < used(0) - 3.0, "{r}");
    let again = ok_json(&mpirun(2, &args));
    assert_eq!(
        (
            again["measured_cells"].clone(),
            again["skipped_cells"].clone()
        ),
        (0.into(), 2.into())
    );
}

/// Loop devices whose backing file lies under `dir`, and mounts under it.
fn devices_under(dir: &Path) -> (usize, usize) {
    let d = dir.to_string_lossy().to_string();
    let loops = std::fs::read_dir("/sys/block")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path().join("loop/backing_file"))
                .is_ok_and(|b| b.starts_with(&d))
        })
        .count();
    let mounts = std::fs::read_to_string("/proc/self/mounts")
        .unwrap()
        .lines()
        .filter(|l| l.split(' ').nth(1).is_some_and(|m| m.starts_with(&d)))
        .count();
    (loops, mounts)
}

/// SIGTERM to mpirun in the middle of `bench paf --mpi`: mpirun ends the ranks (SIGTERM,
/// then SIGKILL a second later), rank 0 among them, before it can tear its scratch down;
/// the guard it started does, so no loop device, mount or image is left.
#[test]
fn bench_paf_mpi_stopped_by_its_launcher_leaves_nothing() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("paf.csv");
    let images = tmp.path().join("images");
    std::fs::create_dir(&images).unwrap();
    let mut job = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "2", BIN])
        .args([
            "bench",
            "paf",
            "--mpi",
            "--capacities",
            "40,50",
            "--frag",
            "30",
            "--xfer",
            "1M,4M",
            "--iterations",
            "30",
            "--fs-size",
            "512M",
            "--bench-size",
            "64M",
        ])
        .arg("--csv")
        .arg(&csv)
        .env("TMPDIR", &images)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the first cell's scratch is mounted.
    let t0 = std::time::Instant::now();
    while devices_under(&images).1 == 0 {
        assert!(t0.elapsed().as_secs() < 60, "no scratch mounted in 60 s");
        assert!(job.try_wait().unwrap().is_none(), "the job ended early");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(job.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = job.wait().unwrap();
    assert!(!status.success(), "{status:?}");
    // The guard waits 3 s for the ranks to be gone, then tears down.
    let t0 = std::time::Instant::now();
    while devices_under(&images) != (0, 0) || std::fs::read_dir(&images).unwrap().count() > 0 {
        assert!(
            t0.elapsed().as_secs() < 20,
            "left behind after 20 s: {:?} (loops, mounts), files {:?}",
            devices_under(&images),
            std::fs::read_dir(&images)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .collect::<Vec<_>>()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}
