//! Crash trials that hit a move in the middle (issue 15 item 7). One large file is
//! fragmented once (`age layout`, 64 KiB fragments 64 KiB apart) and the unmounted image is
//! kept as the starting point of every trial. Each trial: `defrag --mode full` (one range:
//! the whole file, one long move) with FRAGKIT_MOVE_LOG set; once the log shows the move
//! began, sleep a random time within the move's measured duration, SIGKILL. The log and
//! /proc/PID/io then say where the kill landed:
//! - mid-move: the move began, its end was never logged, and the process had written data
//!   since the move began (its write_bytes grew): data was moving;
//! - in setup: began, no end, nothing written yet (donor allocation, judging);
//! - after the move: its end is in the log (fsync, verification, report).
//!
//! Only mid-move kills count toward the number asked for. After every kill: unmount, fsck
//! (e2fsck -fn / xfs_repair -n / btrfs check --readonly) must be clean, remount, the file's
//! checksum is the one it had and no temporary file is left; then the image is reset.
//!
//! FRAGKIT_CRASH_MID_MOVE (mid-move kills per file system, default 3) and
//! FRAGKIT_CRASH_FILE_MIB (file size, default 16) size it; FRAGKIT_CRASH_BIN names the
//! fragkit that defragments; FRAGKIT_CRASH_VERBOSE prints every trial. scripts/crash-trials
//! runs 100 per file system.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{file_hash, fragkit, scratch};
use fragkit::defrag::movelog;
use fragkit::scratch::{FsType, Scratch};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{text}",
        out.status
    );
    text
}

/// fsck without repairing: exit 0 only when the file system is clean.
fn fsck(fs: FsType, dev: &Path) -> String {
    match fs {
        FsType::Ext4 => run_ok(Command::new("e2fsck").arg("-fn").arg(dev)),
        FsType::Xfs => {
            // Debian 12's xfs_repair (6.1) refuses the exchange-range feature bit the scratch
            // fs carries (see scratch.rs): check with the bit cleared, then set it again.
            // The log is clean after umount, so no exchange is in flight on disk.
            let incompat = |v: Option<u64>| {
                let mut c = Command::new("xfs_db");
                match v {
                    None => c.args(["-r", "-c", "sb 0", "-c", "p features_incompat"]),
                    Some(v) => c.args([
                        "-x",
                        "-c",
                        "sb 0",
                        "-c",
                        &format!("write -d features_incompat {v:#x}"),
                    ]),
                };
                run_ok(c.arg(dev))
            };
            let out = incompat(None);
            let v = out
                .lines()
                .find_map(|l| l.strip_prefix("features_incompat = "))
                .unwrap_or_else(|| panic!("xfs_db: no features_incompat in {out:?}"))
                .trim();
            let v = u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap();
            incompat(Some(v & !XFS_SB_FEAT_INCOMPAT_EXCHRANGE));
            let out = Command::new("xfs_repair")
                .arg("-n")
                .arg(dev)
                .output()
                .unwrap();
            incompat(Some(v));
            let text = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(
                out.status.success(),
                "xfs_repair -n {}:\n{text}",
                dev.display()
            );
            text
        }
        FsType::Btrfs => run_ok(Command::new("btrfs").args(["check", "--readonly"]).arg(dev)),
        other => panic!("no fsck for {}", other.name()),
    }
}

/// XFS_SB_FEAT_INCOMPAT_EXCHRANGE (fs/xfs/libxfs/xfs_format.h).
const XFS_SB_FEAT_INCOMPAT_EXCHRANGE: u64 = 1 << 6;

struct Image<'a> {
    s: &'a Scratch,
    fs: FsType,
    golden: PathBuf,
}

/// The golden copy and the move log live beside the scratch image, in its directory, which
/// the scratch's teardown removes only when empty: they go first.
impl Drop for Image<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.golden);
        let _ = std::fs::remove_file(self.s.info.dir.join("moves.log"));
    }
}

impl Image<'_> {
    /// A killed defrag's io_uring rings are torn down by a kernel worker after the
    /// process is reaped (io_ring_exit_work), holding the files a little longer: EBUSY is
    /// retried for up to 5 s before it counts as a failure.
    fn umount(&self) {
        for _ in 0..50 {
            match nix::mount::umount2(self.s.mountpoint(), nix::mount::MntFlags::empty()) {
                Err(nix::errno::Errno::EBUSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(100))
                }
                Err(e) => panic!("umount {}: {e}", self.s.mountpoint().display()),
                Ok(()) => return,
            }
        }
        run_ok(Command::new("umount").arg(self.s.mountpoint()));
    }
    fn mount(&self) {
        run_ok(
            Command::new("mount")
                .args(["-t", self.fs.name()])
                .arg(&self.s.info.loop_device)
                .arg(self.s.mountpoint()),
        );
    }
    /// Back to the fragmented starting point (unmounted in between).
    fn reset(&self) {
        self.umount();
        run_ok(
            Command::new("cp")
                .arg("--sparse=always")
                .arg(&self.golden)
                .arg(&self.s.info.image),
        );
        // The loop device's own page cache still holds the old blocks.
        run_ok(
            Command::new("blockdev")
                .arg("--flushbufs")
                .arg(&self.s.info.loop_device),
        );
        self.mount();
    }
}

/// One `begin`/`end` line of the move log.
struct Entry {
    begin: bool,
    ns: u64,
    write_bytes: u64,
}

fn read_log(path: &Path) -> Vec<Entry> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            Some(Entry {
                begin: match *w.first()? {
                    "begin" => true,
                    "end" => false,
                    _ => return None,
                },
                ns: w.get(1)?.parse().ok()?,
                write_bytes: w.get(2)?.parse().ok()?,
            })
        })
        .collect()
}

fn spawn_defrag(dir: &Path, log: &Path) -> std::process::Child {
    let _ = std::fs::remove_file(log);
    // scripts/crash-trials runs a copy, so that a rebuild during a long run changes nothing.
    let bin = std::env::var("FRAGKIT_CRASH_BIN").unwrap_or(env!("CARGO_BIN_EXE_fragkit").into());
    Command::new(bin)
        .args(["defrag", "--mode", "full", "--format", "json"])
        .arg(dir)
        .env(movelog::ENV, log)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[derive(Default, Debug)]
struct Counts {
    mid_move: u64,
    in_setup: u64,
    after_move: u64,
    before_move: u64,
}

fn crash_trials(fs: FsType) {
    let want = env_u64("FRAGKIT_CRASH_MID_MOVE", 3);
    let mib = env_u64("FRAGKIT_CRASH_FILE_MIB", 16);
    let s = scratch(
        fs,
        (mib * 4).max(384) << 20,
        if fs == FsType::Ext4 {
            &["-m", "0"]
        } else {
            &[]
        },
    );
    let dir = s.mountpoint().join("d");
    std::fs::create_dir(&dir).unwrap();
    let file = dir.join("f");
    let size = format!("{mib}M");
    let f = file.to_string_lossy();
    fragkit(&[
        "age",
        "layout",
        &f,
        "--size",
        &size,
        "--frag-size",
        "64K",
        "--frag-distance",
        "64K",
    ]);
    let hash = file_hash(&file);
    let golden = s.info.dir.join("golden.img");
    let img = Image {
        s: &s,
        fs,
        golden: golden.clone(),
    };
    img.umount();
    run_ok(
        Command::new("cp")
            .arg("--sparse=always")
            .arg(&s.info.image)
            .arg(&golden),
    );
    img.mount();
    let log = s.info.dir.join("moves.log");

    // The move's duration, uninterrupted; it must really move the file.
    let out = spawn_defrag(&dir, &log).wait_with_output().unwrap();
    let entries = read_log(&log);
    assert!(
        entries.len() == 2 && entries[0].begin && !entries[1].begin,
        "{}: expected one move (begin, end) in {}:\n{}",
        fs.name(),
        log.display(),
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(
        out.status.code() == Some(0),
        "{}: calibration defrag exited {:?}",
        fs.name(),
        out.status
    );
    let took = Duration::from_nanos(entries[1].ns - entries[0].ns);
    let after = fragkit(&["scan", "--format", "json", &f]);
    let after: serde_json::Value = serde_json::from_slice(&after.stdout).unwrap();
    assert!(
        after["files"][0]["fragments"].as_u64().unwrap() < 16,
        "{}: uninterrupted full defrag left {}",
        fs.name(),
        after["files"][0]
    );
    img.reset();

    let mut c = Counts::default();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15 ^ fs as u64;
    let mut trial = 0u64;
    let mut landed = Vec::new();
    while c.mid_move < want {
        trial += 1;
        assert!(
            trial <= 3 * want + 10,
            "{}: only {} of {trial} kills landed mid-move: {c:?}",
            fs.name(),
            c.mid_move
        );
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = Duration::from_nanos(seed % took.as_nanos() as u64);
        let mut child = spawn_defrag(&dir, &log);
        let pid = child.id();
        let t0 = Instant::now();
        while !read_log(&log).iter().any(|e| e.begin) {
            assert!(
                t0.elapsed() < Duration::from_secs(60) && child.try_wait().unwrap().is_none(),
                "{}: defrag never began a move",
                fs.name()
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        std::thread::sleep(delay);
        let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
        let kill_ns = movelog::monotonic_ns();
        // std's Child::kill is SIGKILL on Unix.
        let _ = child.kill();
        child.wait().unwrap();
        let entries = read_log(&log);
        let begin = entries.iter().rev().find(|e| e.begin);
        let ended = entries.last().is_some_and(|e| !e.begin);
        let kind = match begin {
            None => {
                c.before_move += 1;
                "before any move"
            }
            Some(_) if ended => {
                c.after_move += 1;
                "after the move ended"
            }
            Some(b) if b.ns < kill_ns && movelog::write_bytes(&io) > b.write_bytes => {
                c.mid_move += 1;
                landed.push((kill_ns - b.ns) as f64 / took.as_nanos() as f64);
                "mid-move"
            }
            Some(_) => {
                c.in_setup += 1;
                "in the move's setup"
            }
        };
        img.umount();
        let report = fsck(fs, &s.info.loop_device);
        img.mount();
        assert_eq!(
            file_hash(&file),
            hash,
            "{} trial {trial}: data changed after a kill {kind} ({delay:?} after it began)",
            fs.name()
        );
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(
            names.len(),
            1,
            "{} trial {trial}: left behind: {names:?}",
            fs.name()
        );
        if std::env::var_os("FRAGKIT_CRASH_VERBOSE").is_some() {
            eprintln!(
                "{} trial {trial}: kill {kind} at {delay:?} of {took:?}; fsck clean: {}",
                fs.name(),
                report.lines().last().unwrap_or("")
            );
        }
        img.reset();
    }
    landed.sort_by(f64::total_cmp);
    let q = |p: f64| landed[((landed.len() - 1) as f64 * p) as usize];
    eprintln!(
        "crash trials {}: {trial} kills, {} mid-move (at {:.2}/{:.2}/{:.2} of the move, min/median/max), {} in setup, {} after the move, {} before any move; move of {mib} MiB takes {took:?}; fsck clean and checksum intact after every kill",
        fs.name(),
        c.mid_move,
        q(0.0),
        q(0.5),
        q(1.0),
        c.in_setup,
        c.after_move,
        c.before_move
    );
}

#[test]
fn crash_trials_mid_move_ext4() {
    crash_trials(FsType::Ext4);
}

#[test]
fn crash_trials_mid_move_xfs() {
    crash_trials(FsType::Xfs);
}

#[test]
fn crash_trials_mid_move_btrfs() {
    crash_trials(FsType::Btrfs);
}
