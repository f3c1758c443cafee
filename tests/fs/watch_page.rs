//! The live page in a real browser: headless Chromium (Debian's `chromium`) loads
//! `fragkit watch`'s page from 127.0.0.1 and first shows a watched file as contiguous; the
//! file then becomes fragmented while the page is open, and the page's DOM must show it:
//! the transition logged as seen live (over server-sent events), the file's row says
//! "fragmented", and the block map drew the file in the fragmented colours.

use crate::common;

use crate::browser::{chromium_available, Browser};
use common::*;
use fragkit::scratch::FsType;

#[test]
fn live_page_shows_a_file_becoming_fragmented() {
    if !chromium_available("live_page_shows_a_file_becoming_fragmented") {
        return;
    }
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

    let (mut watch, addr) = watch_listening(&dir, &db.path().join("w.db"), "200ms");
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    let token = watch_token(&db.path().join("w.db"));

    let mut browser = Browser::open(&format!("http://{addr}/?token={token}"));
    let path = a.to_str().unwrap().to_string();
    let contiguous_row = format!("<tr data-path=\"{path}\" data-fragmented=\"false\"");
    browser.wait_dom("the file as contiguous", |d| d.contains(&contiguous_row));
    // Now fragment it while the page is open.
    interleaved_direct_appends(&[a.clone(), b.clone()], 32 << 10, 24);
    let logged = format!("<li class=\"became-fragmented\" data-path=\"{path}\"");
    let dom = browser.wait_dom("the file becoming fragmented", |d| d.contains(&logged));
    drop(browser);
    let _ = watch.kill();
    let _ = watch.wait();
    let path = path.as_str();
    let row = format!("<tr data-path=\"{path}\" data-fragmented=\"true\"");
    assert!(dom.contains(&row), "row for {path} not fragmented:\n{dom}");
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
}
