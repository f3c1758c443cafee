//! The watch's HTTP server defends itself: Host check (against DNS rebinding), a
//! header-read timeout, a cap on half-sent requests, and /metrics stays served beside
//! a flood of slowloris, idle and event-stream connections, each tested over raw TCP.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Child;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use fragkit::scratch::FsType;

struct Watch(Child);

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One request, the status code of the answer.
fn status(addr: &str, host: Option<&str>, path: &str) -> u16 {
    answer(addr, host, path, "").0
}

/// One request with extra header lines; the status code and the whole answer.
fn answer(addr: &str, host: Option<&str>, path: &str, headers: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let host = host.map(|h| format!("Host: {h}\r\n")).unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\n{host}{headers}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    let code = answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {answer:?}"));
    (code, answer)
}

#[test]
fn file_names_need_the_token() {
    use std::os::unix::fs::MetadataExt;
    require_root();
    let fs = scratch(FsType::Ext4, 64 << 20, &[]);
    let dir = fs.mountpoint().join("private");
    std::fs::create_dir(&dir).unwrap();
    let (a, b) = (dir.join("secret-a.db"), dir.join("secret-b.db"));
    write_file(&a, 0, 0);
    write_file(&b, 0, 0);
    interleaved_direct_appends(&[a.clone(), b.clone()], 32 << 10, 8);
    let db = tempfile::tempdir().unwrap();
    let db_file = db.path().join("w.db");
    let (child, addr) = watch_listening(&dir, &db_file, "1s");
    let mut watch = Watch(child);
    let token_file = db.path().join("w.db.token");
    let meta = std::fs::symlink_metadata(&token_file).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o600, "token file mode");
    // SAFETY: geteuid(2) cannot fail.
    let me = unsafe { libc::geteuid() };
    assert_eq!(meta.uid(), me, "token file owner");
    let token = watch_token(&db_file);
    assert_eq!(token.len(), 64, "{token}");
    let h = Some(addr.as_str());

    // Without the token: 401 for what lists names; a wrong one: 403. The wrong token
    // differs in its first digit (a fixed '0' equalled the token one time in 16).
    let wrong = format!(
        "{}{}",
        if token.starts_with('0') { '1' } else { '0' },
        &token[1..]
    );
    for path in ["/", "/api/state", "/events"] {
        assert_eq!(status(&addr, h, path), 401, "{path} without a token");
        assert_eq!(
            status(&addr, h, &format!("{path}?token={wrong}")),
            403,
            "{path} with a wrong token"
        );
        let (code, body) = answer(&addr, h, path, "Authorization: Bearer nope\r\n");
        assert_eq!(code, 403, "{path} with a wrong bearer token: {body}");
        assert!(!body.contains("secret-"), "{path}: {body}");
    }
    // With it, in the query or as a bearer token: the data.
    let (code, body) = answer(&addr, h, &format!("/api/state?token={token}"), "");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("secret-a.db"), "{body}");
    let (code, body) = answer(
        &addr,
        h,
        "/api/state",
        &format!("Authorization: Bearer {token}\r\n"),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(status(&addr, h, &format!("/?token={token}")), 200);

    // /metrics: aggregates for anyone, the worst files' paths only with the token.
    let (code, public) = answer(&addr, h, "/metrics", "");
    assert_eq!(code, 200, "{public}");
    assert!(
        public.contains("fragkit_watch_fragmented_files{ext=\"db\""),
        "{public}"
    );
    assert!(!public.contains("secret-"), "{public}");
    let (code, full) = answer(
        &addr,
        h,
        "/metrics",
        &format!("Authorization: Bearer {token}\r\n"),
    );
    assert_eq!(code, 200, "{full}");
    assert!(
        full.contains(&format!(
            "fragkit_watch_file_fragments{{path=\"{}\"}}",
            a.display()
        )),
        "{full}"
    );
    assert_eq!(status(&addr, h, "/metrics?token=wrong"), 403);

    // The token file goes with the watch.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(watch.0.id() as i32, libc::SIGTERM) };
    assert!(watch.0.wait().unwrap().success());
    assert!(!token_file.exists(), "token file left behind");
}

/// Whether the server has closed `s` (EOF or reset), waiting at most `wait`.
fn closed(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => true, // an error response, then close
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

#[test]
fn host_check_header_timeout_and_connection_cap() {
    require_root();
    let fs = scratch(FsType::Ext4, 64 << 20, &[]);
    let dir = fs.mountpoint().join("w");
    std::fs::create_dir(&dir).unwrap();
    write_file(&dir.join("a"), 64 << 10, 1);
    let db = tempfile::tempdir().unwrap();
    let (child, addr) = watch_listening(&dir, &db.path().join("w.db"), "1s");
    let _watch = Watch(child);
    let port = addr.rsplit(':').next().unwrap();
    let token = watch_token(&db.path().join("w.db"));
    let state = format!("/api/state?token={token}");

    // Host: the bound address and localhost names only.
    assert_eq!(status(&addr, Some(&addr), "/metrics"), 200);
    assert_eq!(
        status(&addr, Some(&format!("localhost:{port}")), &state),
        200
    );
    assert_eq!(
        status(&addr, Some(&format!("rebind.example:{port}")), "/metrics"),
        421
    );
    assert_eq!(status(&addr, Some("rebind.example"), &state), 421);
    assert_eq!(status(&addr, Some("localhost.rebind.example"), "/"), 421);
    assert_eq!(status(&addr, None, "/metrics"), 421);

    // 500 half-sent requests: all but the cap are closed at once, the rest when the
    // header-read timeout (10 s) runs out.
    let held: Vec<TcpStream> = (0..500)
        .map(|_| {
            let mut s = TcpStream::connect(&addr).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                .unwrap();
            s
        })
        .collect();
    // "At once": well before the 10 s header-read timeout could close any of them. Polled
    // until 5 s rather than read once after a fixed 1 s, which a loaded machine's accept
    // loop could miss; a missing cap still leaves all 500 open at 5 s.
    let mut still = held;
    let t0 = Instant::now();
    loop {
        still.retain_mut(|s| !closed(s, Duration::from_millis(5)));
        if still.len() <= 64 || t0.elapsed() >= Duration::from_secs(5) {
            break;
        }
    }
    assert!(
        still.len() <= 64,
        "{} of 500 half-sent requests still open after 5 s",
        still.len()
    );
    let t0 = Instant::now();
    while !still.is_empty() && t0.elapsed() < Duration::from_secs(20) {
        still.retain_mut(|s| !closed(s, Duration::from_millis(200)));
    }
    assert!(
        still.is_empty(),
        "{} half-sent requests still open 20 s later",
        still.len()
    );
    // And the server still answers.
    assert_eq!(status(&addr, Some(&addr), "/metrics"), 200);
}

/// What the flood did, for the assertion message (and to show it was a real flood).
#[derive(Default)]
struct Flood {
    connects: AtomicU64,
    closed_by_server: AtomicU64,
    event_bytes: AtomicU64,
}

/// One hostile client: `kind` 0 = slowloris (a head begun, then one header byte every
/// 2 s), 1 = idle (connects, sends nothing), 2 = an `/events` stream dropped and opened
/// again every 10 s. Whatever the server closes is opened again at once.
fn hostile(addr: String, kind: u32, stop: Arc<AtomicBool>, flood: Arc<Flood>) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut s) = TcpStream::connect(&addr) else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        flood.connects.fetch_add(1, Ordering::Relaxed);
        let opened = Instant::now();
        match kind {
            0 => {
                let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ");
            }
            2 => {
                let _ = write!(
                    s,
                    "GET /events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
                );
            }
            _ => {}
        }
        let mut last_byte = Instant::now();
        let mut buf = [0u8; 4096];
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        while !stop.load(Ordering::Relaxed) {
            if kind == 2 && opened.elapsed() >= Duration::from_secs(10) {
                break; // the reconnecting page
            }
            if kind == 0 && last_byte.elapsed() >= Duration::from_secs(2) {
                if s.write_all(b"x").is_err() {
                    flood.closed_by_server.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                last_byte = Instant::now();
            }
            match s.read(&mut buf) {
                Ok(0) => {
                    flood.closed_by_server.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                Ok(n) => {
                    if kind == 2 {
                        flood.event_bytes.fetch_add(n as u64, Ordering::Relaxed);
                    } else {
                        // An answer to a half-sent head (408) or an error: closed next.
                        continue;
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => {
                    flood.closed_by_server.fetch_add(1, Ordering::Relaxed);
                    break;
                }
            }
        }
    }
}

/// One /metrics request as Prometheus makes it; whether a complete exposition came back.
fn metrics_ok(addr: &str) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAccept: text/plain\r\nConnection: close\r\n\r\n"
    )
    .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200") && answer.contains("\nfragkit_watch_ticks_total ")
}

#[test]
fn metrics_stay_served_beside_64_hostile_connections() {
    require_root();
    let fs = scratch(FsType::Ext4, 64 << 20, &[]);
    let dir = fs.mountpoint().join("w");
    std::fs::create_dir(&dir).unwrap();
    write_file(&dir.join("a"), 64 << 10, 1);
    let db = tempfile::tempdir().unwrap();
    let (child, addr) = watch_listening(&dir, &db.path().join("w.db"), "1s");
    let _watch = Watch(child);
    assert!(metrics_ok(&addr), "no /metrics before the flood");

    // 64 hostile connections from the poller's own address: 22 slowloris, 21 idle,
    // 21 event streams reconnecting every 10 s.
    let stop = Arc::new(AtomicBool::new(false));
    let flood = Arc::new(Flood::default());
    let clients: Vec<_> = (0..64u32)
        .map(|i| {
            let kind = match i {
                0..=21 => 0,
                22..=42 => 1,
                _ => 2,
            };
            let (addr, stop, flood) = (addr.clone(), stop.clone(), flood.clone());
            std::thread::spawn(move || hostile(addr, kind, stop, flood))
        })
        .collect();
    // Let the flood take hold before polling.
    std::thread::sleep(Duration::from_secs(2));
    let (mut ok, mut tried) = (0u32, 0u32);
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(30) {
        tried += 1;
        if metrics_ok(&addr) {
            ok += 1;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let (connects, closed, event_bytes) = (
        flood.connects.load(Ordering::Relaxed),
        flood.closed_by_server.load(Ordering::Relaxed),
        flood.event_bytes.load(Ordering::Relaxed),
    );
    let what = format!(
        "{ok} of {tried} /metrics requests answered; the flood made {connects} connections, \
         the server closed {closed}, event streams received {event_bytes} bytes"
    );
    // The flood was real: every hostile client connected, streams were served, and the
    // server had to close half-sent requests (the header-read timeout).
    assert!(connects >= 64 && event_bytes > 0 && closed > 0, "{what}");
    assert!(tried >= 100, "{what}");
    assert!(ok as f64 >= 0.99 * tried as f64, "{what}");
}
