//! `fragkit watch` on real loop-mounted ext4: a file fragmented while watched shows up in
//! the history and in /metrics within two ticks; a deleted file disappears; a renamed one
//! keeps its history (a file, and a whole directory). Run once with fanotify and once with
//! inotify. And `--fragtracer`: the artefacts follow a file fragmented while watched.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use fragkit::scratch::FsType;

/// Once in a test file: parse the Prometheus text format strictly enough to catch breakage.
fn check_prometheus(text: &str) {
    let mut typed = std::collections::HashSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split(' ');
            let name = it.next().unwrap();
            let kind = it.next().unwrap();
            assert!(["gauge", "counter"].contains(&kind), "type {kind}");
            assert!(typed.insert(name.to_string()), "TYPE twice for {name}");
            continue;
        }
        if line.starts_with("# HELP ") || line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("sample line has a value");
        value
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("bad value in {line:?}"));
        let name = series.split('{').next().unwrap();
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name in {line:?}"
        );
        assert!(typed.contains(name), "sample before its TYPE: {line:?}");
        if let Some(labels) = series.strip_prefix(name) {
            if !labels.is_empty() {
                assert!(labels.starts_with('{') && labels.ends_with('}'), "{line:?}");
            }
        }
    }
}

struct Watch {
    child: Option<std::process::Child>,
    addr: String,
    token: String,
}

impl Watch {
    fn start(dir: &Path, db: &Path, interval: &str, events: &str, extra: &[&str]) -> Watch {
        use std::io::BufRead;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_fragkit"))
            .args(["watch", "--interval", interval, "--listen", "127.0.0.1:0"])
            .args(["--events", events, "--format", "json", "--db"])
            .arg(db)
            .args(extra)
            .arg(dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start fragkit watch");
        let stderr = child.stderr.take().unwrap();
        let mut lines = std::io::BufReader::new(stderr).lines();
        let addr = loop {
            let line = lines
                .next()
                .expect("fragkit watch exited before listening")
                .unwrap();
            if let Some(rest) = line.split("live page on http://").nth(1) {
                break rest.split('/').next().unwrap().to_string();
            }
        };
        // Keep draining stderr so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Watch {
            child: Some(child),
            addr,
            token: watch_token(db),
        }
    }

    fn get(&self, path: &str) -> String {
        http_get(&self.addr, path, Some(&self.token))
    }

    fn ticks(&self) -> u64 {
        metric(&self.get("/metrics"), "fragkit_watch_ticks_total").unwrap() as u64
    }

    /// Poll /metrics until `pred` holds; returns (metrics text, ticks done by then).
    fn wait_for(&self, what: &str, pred: impl Fn(&str) -> bool) -> (String, u64) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let m = self.get("/metrics");
            if pred(&m) {
                return (
                    m.clone(),
                    metric(&m, "fragkit_watch_ticks_total").unwrap() as u64,
                );
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}:\n{m}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn stop(mut self) -> serde_json::Value {
        let child = self.child.take().unwrap();
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "fragkit watch failed: {:?}",
            out.status
        );
        serde_json::from_slice(&out.stdout).expect("summary JSON")
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub fn http_get(addr: &str, path: &str, token: Option<&str>) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect to fragkit watch");
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).unwrap();
    let (head, body) = buf.split_once("\r\n\r\n").expect("HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "GET {path}: {head}");
    body.to_string()
}

/// Value of a sample line whose series text starts with `series`.
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.rsplit_once(' ').is_some_and(|(s, _)| s == series))
        .and_then(|l| l.rsplit_once(' ').unwrap().1.parse().ok())
}

fn file_series(p: &Path) -> String {
    format!("fragkit_watch_file_fragments{{path=\"{}\"}}", p.display())
}

fn scan_fragments(p: &Path) -> u64 {
    let v = fragkit_json(&["scan", "--format", "json", p.to_str().unwrap()]);
    v["files"][0]["fragments"].as_u64().unwrap()
}

fn watch_lifecycle(events: &str) {
    let fs = scratch(FsType::Ext4, 256 << 20, &[]);
    let dir = fs.mountpoint().join("data");
    std::fs::create_dir(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    let dbdir = tempfile::tempdir().unwrap();
    let db = dbdir.path().join("watch.db");
    // A file present from the start, to see that unrelated files stay put.
    write_file(&dir.join("steady.log"), 100_000, 1);
    let before_write = fragkit::watch::engine::now();

    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();

    let w = Watch::start(&dir, &db, "300ms", events, &[]);
    check_prometheus(&w.get("/metrics"));
    assert_eq!(
        metric(&w.get("/metrics"), &file_series(&dir.join("a.db"))),
        None
    );

    // Fragment three files while watched (one in a subdirectory).
    let a: PathBuf = dir.join("a.db");
    let b: PathBuf = dir.join("b.db");
    let c: PathBuf = sub.join("c.db");
    interleaved_direct_appends(&[a.clone(), b.clone(), c.clone()], 64 << 10, 16);
    let written_at_tick = w.ticks();
    let expected = scan_fragments(&a);
    assert!(expected > 1, "interleaved appends did not fragment a.db");
    let (m, seen_at_tick) = w.wait_for("a.db, b.db and sub/c.db in /metrics", |m| {
        metric(m, &file_series(&a)) == Some(expected as f64)
            && metric(m, &file_series(&b)) == Some(scan_fragments(&b) as f64)
            && metric(m, &file_series(&c)) == Some(scan_fragments(&c) as f64)
    });
    assert!(
        seen_at_tick <= written_at_tick + 2,
        "a.db showed up {} ticks after it was written",
        seen_at_tick - written_at_tick
    );
    check_prometheus(&m);
    assert!(
        metric(
            &m,
            "fragkit_watch_fragmented_files{ext=\"db\",request_size=\"131072\"}"
        )
        .is_some_and(|v| v >= 2.0),
        "per-extension gauge for db:\n{m}"
    );
    assert_eq!(
        metric(
            &m,
            "fragkit_watch_fragmented_files{ext=\"log\",request_size=\"131072\"}"
        ),
        Some(0.0)
    );
    // In the history by then, with the same fragment count.
    let store = fragkit::watch::store::Store::open_existing(&db).unwrap();
    let hist = store.file_history(a.to_str().unwrap()).unwrap();
    assert_eq!(
        hist.last().map(|(_, s)| s.fragments),
        Some(expected),
        "{hist:?}"
    );
    assert!(hist.first().is_some_and(|(t, _)| *t >= before_write));
    drop(store);

    // Rename: the history follows the file.
    let renamed = dir.join("renamed.db");
    let before_rename = fragkit::watch::engine::now();
    std::fs::rename(&a, &renamed).unwrap();
    let t0 = w.ticks();
    let (m, t1) = w.wait_for("renamed.db in /metrics", |m| {
        metric(m, &file_series(&renamed)) == Some(expected as f64)
    });
    assert!(t1 <= t0 + 2, "rename took {} ticks", t1 - t0);
    assert_eq!(metric(&m, &file_series(&a)), None, "old name still listed");
    let store = fragkit::watch::store::Store::open_existing(&db).unwrap();
    let hist = store.file_history(renamed.to_str().unwrap()).unwrap();
    assert!(
        hist.iter()
            .any(|(t, s)| *t < before_rename && s.fragments == expected),
        "renamed file lost its history: {hist:?}"
    );
    drop(store);

    // Rename a directory: every file below keeps its history.
    let moved = dir.join("moved");
    let c_moved = moved.join("c.db");
    let c_fragments = scan_fragments(&c);
    std::fs::rename(&sub, &moved).unwrap();
    let t0 = w.ticks();
    let (m, t1) = w.wait_for("moved/c.db in /metrics", |m| {
        metric(m, &file_series(&c_moved)) == Some(c_fragments as f64)
    });
    assert!(t1 <= t0 + 2, "directory rename took {} ticks", t1 - t0);
    assert_eq!(metric(&m, &file_series(&c)), None, "old name still listed");
    let store = fragkit::watch::store::Store::open_existing(&db).unwrap();
    let hist = store.file_history(c_moved.to_str().unwrap()).unwrap();
    assert!(
        hist.iter()
            .any(|(t, s)| *t < before_rename && s.fragments == c_fragments),
        "file in a renamed directory lost its history: {hist:?}"
    );
    drop(store);

    // Changed again under its new directory name: the change shows there (fanotify
    // remembers directory paths across reads and must forget them when a directory moves).
    // A hole punched inside a 64 KiB extent splits it.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&c_moved)
        .unwrap();
    fallocate(
        &f,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        (128 + 16) << 10,
        16 << 10,
    );
    f.sync_all().unwrap();
    drop(f);
    let c_punched = scan_fragments(&c_moved);
    assert!(
        c_punched > c_fragments,
        "the punched hole did not split an extent of moved/c.db"
    );
    let t0 = w.ticks();
    let (m, t1) = w.wait_for("moved/c.db changed after the rename", |m| {
        metric(m, &file_series(&c_moved)) == Some(c_punched as f64)
    });
    assert!(
        t1 <= t0 + 2,
        "a change after a directory rename took {} ticks",
        t1 - t0
    );
    assert_eq!(
        metric(&m, &file_series(&c)),
        None,
        "old directory name came back"
    );

    // Delete: gone from /metrics and marked deleted in the history.
    assert!(metric(&w.get("/metrics"), &file_series(&b)).is_some());
    std::fs::remove_file(&b).unwrap();
    let t0 = w.ticks();
    let (m, t1) = w.wait_for("b.db gone from /metrics", |m| {
        metric(m, &file_series(&b)).is_none()
    });
    assert!(t1 <= t0 + 2, "delete took {} ticks", t1 - t0);
    assert_eq!(
        metric(
            &m,
            "fragkit_watch_files{ext=\"db\",request_size=\"131072\"}"
        ),
        Some(2.0)
    );

    let summary = w.stop();
    assert_eq!(summary["source"], events);
    assert_eq!(summary["totals"]["files"], 3, "{summary}");

    let png = dbdir.path().join("history.png");
    let report = fragkit_json(&[
        "watch",
        "report",
        "--db",
        db.to_str().unwrap(),
        "--format",
        "json",
        "--png",
        png.to_str().unwrap(),
    ]);
    let first = report["first_fragmented"].as_array().unwrap();
    let find = |p: &Path| {
        first
            .iter()
            .find(|f| f["path"] == p.to_str().unwrap())
            .cloned()
    };
    let r = find(&renamed).expect("renamed file in first_fragmented");
    assert!(r["deleted"].is_null());
    assert!(r["t"].as_f64().unwrap() < before_rename);
    assert!(find(&c_moved).is_some_and(|f| f["t"].as_f64().unwrap() < before_rename));
    let gone = find(&b).expect("deleted file keeps its first-fragmented moment");
    assert!(gone["deleted"].as_f64().is_some());
    assert!(find(&dir.join("steady.log")).is_none());
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
}

#[test]
fn watch_fanotify_history_metrics_rename_delete() {
    watch_lifecycle("fanotify");
}

#[test]
fn watch_inotify_history_metrics_rename_delete() {
    watch_lifecycle("inotify");
}

#[test]
fn watch_refuses_non_loopback_listen() {
    let out = fragkit(&["watch", "/", "--listen", "0.0.0.0:9477", "--duration", "0s"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a loopback address"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// `--db` is never opened through a symbolic link nor when another user owns the file
/// (or one of SQLite's companions): one line naming the path (and the owner), exit 2,
/// nothing written at the link's target; a new database is the user's alone (0600).
#[test]
fn watch_db_refuses_a_link_and_another_users_file() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    std::fs::write(tree.join("f"), b"x").unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let run = |db: &Path| {
        fragkit(&[
            "watch",
            "--events",
            "inotify",
            "--duration",
            "0s",
            "--db",
            db.to_str().unwrap(),
            tree.to_str().unwrap(),
        ])
    };

    // A link planted where the database would be: refused, its target never created.
    let target = dir.path().join("victim.db");
    let link = shared.join("watch.db");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = run(&link);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("{}: a symbolic link", link.display())),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!target.exists(), "the link's target was created");
    std::fs::remove_file(&link).unwrap();

    // A link at the WAL's name: refused too.
    let db = shared.join("w.db");
    std::os::unix::fs::symlink(&target, shared.join("w.db-wal")).unwrap();
    let out = run(&db);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("w.db-wal: a symbolic link"), "{err}");
    assert!(
        !target.exists() && !db.exists(),
        "written through the WAL link"
    );
    std::fs::remove_file(shared.join("w.db-wal")).unwrap();

    // Another user's file: refused, naming the owner.
    let theirs = shared.join("theirs.db");
    std::fs::write(&theirs, b"").unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let out = run(&theirs);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("{}: owned by", theirs.display())) && err.contains("uid 65534"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(
        std::fs::metadata(&theirs).unwrap().len(),
        0,
        "their file was written"
    );

    // A new database: made by the watch, mode 0600.
    let out = run(&db);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::metadata(&db).unwrap().mode() & 0o777, 0o600);
}

/// A tmpfs of its own, unmounted at the end.
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn new(size: &str) -> Tmpfs {
        let d = tempfile::tempdir().unwrap();
        let st = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(d.path())
            .status()
            .unwrap();
        assert!(st.success(), "mount tmpfs");
        Tmpfs(d)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.0.path())
            .status();
    }
}

/// The history's disk fills up under a running watch: it says so once, naming the
/// database, keeps serving /metrics, and when space is back it writes the history again
/// (rebuilt by a full rescan) with every file created meanwhile.
#[test]
fn watch_survives_a_full_disk_under_the_history() {
    use std::io::{BufRead, Write};
    require_root();
    let fs = scratch(FsType::Ext4, 128 << 20, &[]);
    let dir = fs.mountpoint().join("w");
    std::fs::create_dir(&dir).unwrap();
    write_file(&dir.join("first"), 4096, 1);
    let small = Tmpfs::new("2m");
    let db = small.0.path().join("w.db");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args(["watch", "--interval", "200ms", "--listen", "127.0.0.1:0"])
        .args(["--format", "json", "--db"])
        .arg(&db)
        .arg(&dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(l);
        }
    });
    let mut seen = Vec::new();
    let mut wait_line = |what: &str, pred: &dyn Fn(&str) -> bool, secs: u64| -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(l) => {
                    seen.push(l.clone());
                    if pred(&l) {
                        return l;
                    }
                }
                Err(_) => panic!(
                    "no line {what} within {secs} s; stderr so far:\n{}",
                    seen.join("\n")
                ),
            }
        }
    };
    let live = wait_line(
        "with the live page",
        &|l| l.contains("live page on http://"),
        60,
    );
    let addr = live
        .split("live page on http://")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let get = |path: &str| http_get(&addr, path, None);
    let files = |m: &str| {
        m.lines()
            .filter(|l| l.starts_with("fragkit_watch_files{"))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum::<f64>()
    };
    assert_eq!(files(&get("/metrics")), 1.0);

    // Fill the history's file system, then give the watch much to write.
    let filler = small.0.path().join("filler");
    {
        let mut f = std::fs::File::create(&filler).unwrap();
        let chunk = vec![7u8; 64 << 10];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.sync_all();
    }
    let names: Vec<PathBuf> = (0..3000)
        .map(|i| dir.join(format!("{i:05}-{}", "n".repeat(150))))
        .collect();
    for n in &names {
        std::fs::write(n, b"x").unwrap();
    }
    let warning = wait_line(
        "warning of the full disk",
        &|l| l.contains("cannot write the history"),
        60,
    );
    assert!(
        warning.starts_with("fragkit: warning: ")
            && warning.contains(&format!("{}: ", db.display())),
        "{warning}"
    );
    // Still alive and serving, a few ticks later.
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        child.try_wait().unwrap().is_none(),
        "watch ended: {}",
        seen.join("\n")
    );
    let m = get("/metrics");
    assert!(m.contains("fragkit_watch_ticks_total "), "{m}");

    // Space again: the history is written again, with every file.
    std::fs::remove_file(&filler).unwrap();
    wait_line(
        "saying the history is written again",
        &|l| l.contains("the history is written again"),
        60,
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n = files(&get("/metrics"));
        if n == 3001.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "/metrics says {n} files, not 3001"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        seen.join("\n")
    );
    let warnings = seen
        .iter()
        .filter(|l| l.contains("cannot write the history"))
        .count();
    assert_eq!(warnings, 1, "one warning per outage:\n{}", seen.join("\n"));
    // The history holds them: `watch report` counts every file.
    let out = fragkit(&[
        "watch",
        "report",
        "--format",
        "json",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["rows"]["files"], 3001, "{report}");
    let last = report["series"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["files"], 3001, "{last}");
}

/// inotify mode (a user without root): a directory the user cannot read and one whose
/// path is longer than the kernel takes (4,096 bytes) are each named once on stderr and
/// skipped; the watch goes on, hears a file created afterwards, and ends with status 0.
/// A tree under `top/tree` with `ok/a` (4 KiB), an empty directory `locked` (mode 0000)
/// and a chain of directories 26 × 201 bytes deep holding a file, whose path is longer
/// than the kernel takes; everything owned by `owner`. (top, tree, the chain's name).
fn unreadable_and_too_long_tree(
    s: &fragkit::scratch::Scratch,
    owner: &str,
) -> (PathBuf, PathBuf, String) {
    use std::os::unix::fs::PermissionsExt;
    let top = s.mountpoint().join("u");
    let tree = top.join("tree");
    std::fs::create_dir_all(tree.join("ok")).unwrap();
    write_file(&tree.join("ok/a"), 4096, 1);
    std::fs::create_dir(tree.join("locked")).unwrap();
    // A chain of directories 26 × 201 bytes deep: made one `cd` at a time, as no single
    // path to it may be longer than PATH_MAX.
    let name = "d".repeat(200);
    let st = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "cd '{}' && for i in $(seq 26); do mkdir {name} && cd -P {name} || exit 1; done && echo deep > f",
            tree.display()
        ))
        .status()
        .unwrap();
    assert!(st.success());
    let st = std::process::Command::new("chown")
        .args(["-R", owner])
        .arg(&top)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::set_permissions(tree.join("locked"), std::fs::Permissions::from_mode(0o000)).unwrap();
    (top, tree, name)
}

/// stderr names `locked` once (when `locked_too`) and the first too-long directory of
/// the chain once.
fn assert_named_once(err: &str, tree: &Path, name: &str, locked_too: bool) {
    let locked = format!("{}: skipped, not watched (", tree.join("locked").display());
    assert_eq!(
        err.matches(&locked).count(),
        usize::from(locked_too),
        "{err}"
    );
    let long: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("bytes, longer than the kernel takes"))
        .collect();
    assert_eq!(long.len(), 1, "{err}");
    assert!(
        long[0].starts_with(&format!("fragkit: {}/{name}/", tree.display())),
        "{err}"
    );
}

#[test]
fn inotify_skips_an_unreadable_and_a_too_long_directory() {
    require_root();
    let fs = scratch(FsType::Ext4, 64 << 20, &[]);
    let (top, tree, name) = unreadable_and_too_long_tree(&fs, "nobody:nogroup");
    let db = top.join("w.db");
    let child = std::process::Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_fragkit"))
        .args([
            "watch",
            "--events",
            "inotify",
            "--interval",
            "200ms",
            "--duration",
            "4s",
        ])
        .args(["--format", "json", "--db"])
        .arg(&db)
        .arg(&tree)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A file created while watched, in a watched directory.
    std::thread::sleep(Duration::from_millis(2500));
    write_file(&tree.join("ok/b"), 4096, 2);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {err}", out.status);
    assert_named_once(&err, &tree, &name, true);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["source"], "inotify", "{summary}");
    assert_eq!(
        summary["totals"]["files"], 2,
        "a and the file made while watched: {summary}"
    );
}

/// fanotify mode (root): the walk reaches a file under a path longer than the kernel
/// takes, which nothing can map again by name: the first too-long directory is named once
/// and skipped (it was recorded, then deleted from the history at the next look, without
/// a word), a file created afterwards is heard, status 0. Then without CAP_DAC_READ_SEARCH
/// and CAP_DAC_OVERRIDE (root that cannot read a mode-0000 directory; fanotify cannot
/// resolve events then, so only the walk is checked): the unreadable directory is named
/// once too (it was skipped silently).
#[test]
fn fanotify_skips_an_unreadable_and_a_too_long_directory() {
    require_root();
    let fs = scratch(FsType::Ext4, 64 << 20, &[]);
    let (top, tree, name) = unreadable_and_too_long_tree(&fs, "root:root");
    let watch = |prefix: &[&str], db: &str, duration: &str| {
        let (cmd, rest) = prefix.split_first().unwrap();
        std::process::Command::new(cmd)
            .args(rest)
            .arg(env!("CARGO_BIN_EXE_fragkit"))
            .args(["watch", "--events", "fanotify", "--interval", "200ms"])
            .args(["--duration", duration, "--format", "json", "--db"])
            .arg(top.join(db))
            .arg(&tree)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let child = watch(&["env"], "w.db", "4s");
    std::thread::sleep(Duration::from_millis(2500));
    write_file(&tree.join("ok/b"), 4096, 2);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {err}", out.status);
    assert_named_once(&err, &tree, &name, false);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["source"], "fanotify", "{summary}");
    assert_eq!(
        summary["totals"]["files"], 2,
        "a and the file made while watched: {summary}"
    );

    let out = watch(
        &["setpriv", "--bounding-set=-dac_override,-dac_read_search"],
        "w2.db",
        "1s",
    )
    .wait_with_output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {err}", out.status);
    assert_named_once(&err, &tree, &name, true);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["totals"]["files"], 2, "a and b: {summary}");
}

/// `--duration` shorter than `--interval` ends the watch at its end, with one tick then
/// (it ran until the first tick, 20 minutes here; found by the commands' fuzzing). Killed
/// after 2 minutes if it does not end.
#[test]
fn watch_duration_ends_before_a_longer_interval() {
    let (dir, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(dir.path().join("f"), b"x").unwrap();
    let out = output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_fragkit"))
            .args(["watch", "--interval", "20m", "--duration", "300ms"])
            .args(["--format", "json", "--db"])
            .arg(db.path().join("w.db"))
            .arg(dir.path()),
        Duration::from_secs(120),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {err}", out.status);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["ticks"], 1, "{summary}");
    assert_eq!(summary["totals"]["files"], 1, "{summary}");
}

/// fragProc.tbl's rows for one file: (start LBA, length) in table order.
fn proc_rows_of(table: &str, name: &str) -> Vec<(u64, u64)> {
    table
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|c| c[0] == name)
        .map(|c| (c[1].parse().unwrap(), c[2].parse().unwrap()))
        .collect()
}

/// The kernel's view of a file for fragProc.tbl: written extents, sorted by LBA.
fn filefrag_written(p: &Path) -> Vec<(u64, u64)> {
    let (_, ext) = filefrag_extents(p);
    let mut v: Vec<(u64, u64)> = ext
        .iter()
        .filter(|e| !e.flags.iter().any(|f| f == "unwritten"))
        .map(|e| (e.physical, e.length))
        .collect();
    v.sort();
    v
}

#[test]
fn watch_fragtracer_artefacts_follow_a_file_fragmented_while_watched() {
    let fs = scratch(FsType::Ext4, 256 << 20, &[]);
    let dir = fs.mountpoint().join("data");
    std::fs::create_dir(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    write_file(&dir.join("steady.log"), 100_000, 1);
    let dbdir = tempfile::tempdir().unwrap();
    let db = dbdir.path().join("watch.db");
    // Inside the watched tree on purpose: the watch must not track (or list) its own output.
    let out = dir.join("artefacts");
    let (info, proc, img) = (
        out.join("fragInfo.txt"),
        out.join("fragProc.tbl"),
        out.join("fragImg.png"),
    );

    let w = Watch::start(
        &dir,
        &db,
        "300ms",
        "fanotify",
        &["--fragtracer", out.to_str().unwrap()],
    );
    // Written once at start, before the watch listens.
    let table = std::fs::read_to_string(&proc).expect("fragProc.tbl at start");
    assert!(!proc_rows_of(&table, "steady.log").is_empty(), "{table}");
    assert!(proc_rows_of(&table, "a.db").is_empty());
    let first_png = std::fs::read(&img).expect("fragImg.png at start");
    assert_eq!(&first_png[..8], b"\x89PNG\r\n\x1a\n");

    let a = dir.join("a.db");
    interleaved_direct_appends(&[a.clone(), dir.join("b.db")], 64 << 10, 16);
    let written_at_tick = w.ticks();
    let want = filefrag_written(&a);
    assert!(want.len() > 1, "interleaved appends did not fragment a.db");
    let deadline = Instant::now() + Duration::from_secs(30);
    let (table, seen_at_tick) = loop {
        let table = std::fs::read_to_string(&proc).unwrap();
        let ticks = w.ticks();
        if proc_rows_of(&table, "a.db") == want {
            break (table, ticks);
        }
        assert!(
            Instant::now() < deadline,
            "fragProc.tbl never matched filefrag for a.db: want {want:?}\n{table}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        seen_at_tick <= written_at_tick + 2,
        "artefacts caught up {} ticks after the write",
        seen_at_tick - written_at_tick
    );
    // All rows in LBA order; the file's rows are exactly filefrag's written extents.
    let lbas: Vec<u64> = table
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split('\t').nth(1).unwrap().parse().unwrap())
        .collect();
    assert!(lbas.windows(2).all(|w| w[0] <= w[1]), "not sorted by LBA");
    assert_eq!(
        proc_rows_of(&table, "b.db"),
        filefrag_written(&dir.join("b.db"))
    );
    assert!(
        !table.contains("artefacts/") && !table.contains("fragInfo"),
        "the watch listed its own output:\n{table}"
    );
    // fragInfo.txt: one line per FIEMAP extent of a.db, as many as filefrag reports.
    let info_text = std::fs::read_to_string(&info).unwrap();
    let a_lines = info_text
        .lines()
        .filter(|l| l.starts_with("a.db\t"))
        .count();
    assert_eq!(a_lines, filefrag_extents(&a).1.len(), "{info_text}");
    assert!(
        !info_text.contains("artefacts/"),
        "the watch listed its own output:\n{info_text}"
    );
    let png = std::fs::read(&img).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_ne!(png, first_png, "fragImg.png was not redrawn");

    // Quiet ticks write nothing (and the watch's own writes are not changes to react to).
    let wait_ticks = |n: u64| {
        let until = w.ticks() + n;
        while w.ticks() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let mtime = || std::fs::metadata(&proc).unwrap().modified().unwrap();
    wait_ticks(2);
    let settled = mtime();
    wait_ticks(3);
    assert_eq!(mtime(), settled, "fragProc.tbl rewritten on quiet ticks");

    // A deleted file leaves the artefacts within two ticks too.
    std::fs::remove_file(&a).unwrap();
    let t0 = w.ticks();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let table = std::fs::read_to_string(&proc).unwrap();
        let ticks = w.ticks();
        if proc_rows_of(&table, "a.db").is_empty() {
            assert!(
                ticks <= t0 + 2,
                "delete reached the artefacts after {} ticks",
                ticks - t0
            );
            break;
        }
        assert!(Instant::now() < deadline, "a.db never left fragProc.tbl");
        std::thread::sleep(Duration::from_millis(50));
    }
    w.stop();
}

/// fanotify hears the first write to a quiet file and then nothing more from it while it
/// keeps changing: the first write raises an event and disarms the file ("hot"), its
/// further writes raise nothing (and cost the writer nothing), and each tick finds the
/// change by stat and hands the file out. A tick that finds it unchanged arms it again (and
/// hands it out one last time); its next write raises an event again. Files already open
/// for writing when the watch starts are armed too, and a file opened later is reported
/// by its open.
#[test]
fn fanotify_hears_a_file_once_while_it_is_being_written() {
    use fragkit::watch::{fanotify::Fanotify, Change};
    use std::io::Write;
    let fs = scratch(FsType::Ext4, 64 << 20, &[]);
    let mnt = fs.mountpoint().canonicalize().unwrap();
    let hot = mnt.join("hot.log");
    let append = |p: &Path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .unwrap()
    };
    // Open before the watch starts: armed from /proc/self/fd.
    let mut file = append(&hot);
    let mut fan = Fanotify::new(std::slice::from_ref(&mnt)).unwrap();
    let tick = |fan: &mut Fanotify| {
        let mut out = Vec::new();
        fan.drain(&mut out).unwrap();
        out
    };
    let changed = |p: &Path| vec![Change::Changed(p.to_path_buf())];
    assert_eq!(tick(&mut fan), vec![], "nothing happened yet");

    file.write_all(b"a").unwrap();
    fan.wait(Duration::from_millis(500)).unwrap();
    assert_eq!(fan.disarmed(), 1, "the first write disarms the file");
    assert_eq!(fan.hot(), 1);
    for _ in 0..1000 {
        file.write_all(b"b").unwrap();
    }
    fan.wait(Duration::from_millis(200)).unwrap();
    assert_eq!(
        tick(&mut fan),
        changed(&hot),
        "1000 more writes raised events"
    );

    // Still being written: no event, found by the tick's stat.
    file.write_all(b"c").unwrap();
    fan.wait(Duration::from_millis(200)).unwrap();
    assert_eq!(fan.disarmed(), 0, "a hot file raised an event");
    assert_eq!(
        tick(&mut fan),
        changed(&hot),
        "the tick missed a write to a hot file"
    );
    // A write right after the tick (while the engine maps) is not lost either.
    file.write_all(b"d").unwrap();
    assert_eq!(tick(&mut fan), changed(&hot));

    // Quiet for a tick: armed again, handed out one last time, then nothing.
    assert_eq!(tick(&mut fan), changed(&hot));
    assert_eq!(fan.hot(), 0);
    assert_eq!(tick(&mut fan), vec![]);
    file.write_all(b"e").unwrap();
    fan.wait(Duration::from_millis(500)).unwrap();
    assert_eq!(fan.disarmed(), 1, "the armed file's write was not heard");
    assert_eq!(tick(&mut fan), changed(&hot));

    // A file opened after the start: its open is the change; the tick arms it.
    let late = mnt.join("late.log");
    let mut late_file = append(&late);
    let got = tick(&mut fan);
    assert!(got.contains(&Change::Changed(late.clone())), "{got:?}");
    late_file.write_all(b"x").unwrap();
    fan.wait(Duration::from_millis(500)).unwrap();
    assert_eq!(
        fan.disarmed(),
        1,
        "a file armed after its open did not report a write"
    );
    assert!(tick(&mut fan).contains(&Change::Changed(late.clone())));
    // Once both are quiet and armed, reopening one is not reported.
    let quiet = (0..5).any(|_| tick(&mut fan).is_empty());
    assert!(quiet, "files kept changing without writes");
    drop(append(&hot));
    assert_eq!(tick(&mut fan), vec![]);
}

/// Mapping a whole tree opens every file in it: those opens of fragkit's own must not read
/// as changes (nor overflow the event queue, which would force a full rescan every tick).
#[test]
fn watch_full_scan_of_a_big_tree_is_not_a_change() {
    let fs = scratch(FsType::Ext4, 256 << 20, &["-N", "40000"]);
    let dir = fs.mountpoint().join("many");
    for d in 0..20 {
        let sub = dir.join(format!("d{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..1000 {
            std::fs::write(sub.join(format!("f{f}")), b"x").unwrap();
        }
    }
    nix::unistd::sync();
    let dbdir = tempfile::tempdir().unwrap();
    let db = dbdir.path().join("watch.db");
    let v = fragkit_json(&[
        "watch",
        dir.to_str().unwrap(),
        "--interval",
        "300ms",
        "--duration",
        "2s",
        "--rescan",
        "1h",
        "--db",
        db.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(v["source"], "fanotify", "{v}");
    assert_eq!(v["totals"]["files"], 20_000, "{v}");
    assert_eq!(v["full_rescans"], 1, "only the first scan: {v}");
    assert_eq!(v["changed_files"], 0, "{v}");
    assert!(v["events"].as_u64().unwrap() < 100, "{v}");
}

/// A file written through the page cache (delayed allocation) has no blocks when the watch
/// first maps it, and writeback raises no event: after `sync` the watch must map it again
/// by itself, so /metrics equals filefrag within 35 s (not at the 10-minute rescan).
#[test]
fn watch_maps_a_delalloc_file_again_after_writeback() {
    let fs = scratch(FsType::Ext4, 256 << 20, &[]);
    let dir = fs.mountpoint().join("data");
    std::fs::create_dir(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    let dbdir = tempfile::tempdir().unwrap();
    let w = Watch::start(&dir, &dbdir.path().join("w.db"), "1s", "fanotify", &[]);
    let f = dir.join("copy.dat");
    std::fs::write(&f, vec![7u8; 8 << 20]).unwrap(); // like cp: buffered, no fsync
    let files = "fragkit_watch_files{ext=\"dat\",request_size=\"131072\"}";
    w.wait_for("copy.dat watched", |m| metric(m, files) == Some(1.0));
    nix::unistd::sync();
    let synced = Instant::now();
    let fragments = scan_fragments(&f);
    let (_, extents) = filefrag_extents(&f);
    assert!(fragments >= 1 && !extents.is_empty());
    let frag_series = "fragkit_watch_fragments{ext=\"dat\",request_size=\"131072\"}";
    let ext_series = "fragkit_watch_extents{ext=\"dat\",request_size=\"131072\"}";
    loop {
        let m = w.get("/metrics");
        if metric(&m, frag_series) == Some(fragments as f64)
            && metric(&m, ext_series) == Some(extents.len() as f64)
        {
            break;
        }
        assert!(
            synced.elapsed() < Duration::from_secs(35),
            "35 s after sync /metrics still says {:?} fragments, {:?} extents; filefrag: {fragments} fragments, {} extents",
            metric(&m, frag_series),
            metric(&m, ext_series),
            extents.len()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    w.stop();
}

/// `watch report` reads a history on a read-only mount (a WAL database cannot get its
/// shared-memory file there; it used to say "no ticks table").
#[test]
fn report_reads_a_history_on_a_read_only_mount() {
    let s = scratch(FsType::Ext4, 64 << 20, &[]);
    let mp = s.mountpoint().to_path_buf();
    std::fs::create_dir(mp.join("w")).unwrap();
    write_file(&mp.join("w/f"), 1 << 20, 1);
    let db = mp.join("h.db");
    let db_s = db.to_string_lossy().to_string();
    let o = fragkit(&[
        "watch",
        &mp.join("w").to_string_lossy(),
        "--db",
        &db_s,
        "--duration",
        "1s",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rw = fragkit(&["watch", "report", "--db", &db_s, "--format", "json"]);
    assert!(
        rw.status.success(),
        "{}",
        String::from_utf8_lossy(&rw.stderr)
    );
    let st = std::process::Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(&mp)
        .status()
        .unwrap();
    assert!(st.success());
    let ro = fragkit(&["watch", "report", "--db", &db_s, "--format", "json"]);
    let remount = std::process::Command::new("mount")
        .args(["-o", "remount,rw"])
        .arg(&mp)
        .status();
    assert!(
        ro.status.success(),
        "{}",
        String::from_utf8_lossy(&ro.stderr)
    );
    let a: serde_json::Value = serde_json::from_slice(&rw.stdout).unwrap();
    let b: serde_json::Value = serde_json::from_slice(&ro.stdout).unwrap();
    assert_eq!(a["series"], b["series"], "the same history read-only");
    assert!(remount.unwrap().success());
}
