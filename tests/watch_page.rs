//! The live page in a real browser: headless Chromium (Debian's `chromium`) loads
//! `fragkit watch`'s page from 127.0.0.1, a watched file becomes fragmented while the page is
//! open, and the DOM Chromium dumps must show it: the file's row says "fragmented", the
//! page logged the transition it saw live, and the block map drew the file in the
//! fragmented colours.

mod common;

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use fragkit::cli::FsType;

fn chromium_dump_dom(url: &str, wait: Duration) -> std::process::Child {
    let profile = tempfile::tempdir().unwrap().keep();
    Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--timeout={}", wait.as_millis()))
        .arg("--dump-dom")
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium (scripts/install-deps installs it)")
}

#[test]
fn live_page_shows_a_file_becoming_fragmented() {
    let fs = scratch(FsType::Ext4, 256 << 20, &[]);
    let dir = fs.mountpoint().join("live");
    std::fs::create_dir(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    let db = tempfile::tempdir().unwrap();
    let a = dir.join("grow.db");
    let b = dir.join("other.db");
    // Contiguous to begin with: one write each.
    write_file(&a, 256 << 10, 1);
    write_file(&b, 256 << 10, 2);

    let mut watch = Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args([
            "watch",
            "--interval",
            "200ms",
            "--listen",
            "127.0.0.1:0",
            "--db",
        ])
        .arg(db.path().join("w.db"))
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(watch.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("watch exited").unwrap();
        if let Some(rest) = line.split("live page on http://").nth(1) {
            break rest.split('/').next().unwrap().to_string();
        }
    };
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    std::thread::spawn(move || for _ in lines {});

    let browser = chromium_dump_dom(&format!("http://{addr}/"), Duration::from_secs(12));
    // Let the page load and draw the contiguous state, then fragment the file.
    std::thread::sleep(Duration::from_secs(5));
    interleaved_direct_appends(&[a.clone(), b.clone()], 32 << 10, 24);
    let out = browser.wait_with_output().unwrap();
    let _ = watch.kill();
    let _ = watch.wait();
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(dom.contains("id=\"status\""), "no page in the dump:\n{dom}");
    let path = a.to_str().unwrap();
    let row = format!("<tr data-path=\"{path}\" data-fragmented=\"true\"");
    assert!(dom.contains(&row), "row for {path} not fragmented:\n{dom}");
    let logged = format!("<li class=\"became-fragmented\" data-path=\"{path}\"");
    assert!(
        dom.contains(&logged),
        "the page did not see {path} become fragmented live:\n{dom}"
    );
    // The block map coloured the file's cells with the fragmented colours.
    let map_cell = |colour: &str| {
        dom.split("<rect").any(|r| {
            r.contains(&format!("fill=\"{colour}\""))
                && r.contains(&format!("data-path=\"{path}\""))
        })
    };
    assert!(
        map_cell("#e74c3c") && map_cell("#f39c12"),
        "map cells:\n{dom}"
    );
    assert!(Path::new(path).exists());
}
