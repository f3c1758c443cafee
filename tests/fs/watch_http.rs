//! The watch's HTTP server defends itself: Host check (against DNS rebinding), a
//! header-read timeout, and a connection cap, each tested over raw TCP.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Child;
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
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let host = host.map(|h| format!("Host: {h}\r\n")).unwrap_or_default();
    write!(s, "GET {path} HTTP/1.1\r\n{host}Connection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {answer:?}"))
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

    // Host: the bound address and localhost names only.
    assert_eq!(status(&addr, Some(&addr), "/metrics"), 200);
    assert_eq!(
        status(&addr, Some(&format!("localhost:{port}")), "/api/state"),
        200
    );
    assert_eq!(
        status(&addr, Some(&format!("rebind.example:{port}")), "/metrics"),
        421
    );
    assert_eq!(status(&addr, Some("rebind.example"), "/api/state"), 421);
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
