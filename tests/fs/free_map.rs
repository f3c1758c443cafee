//! `fragkit free` against e2freefrag / xfs_spaceman, and `fragkit map`'s pictures and
//! FragTracer artefacts against FIEMAP, on real scratch file systems.

use crate::common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use common::*;
use fragkit::scratch::FsType;
use serde_json::Value;

/// Many small files, every other one deleted: free space in many small pieces.
fn fragment_free_space(dir: &Path, files: usize, size: usize) {
    std::fs::create_dir_all(dir).unwrap();
    for i in 0..files {
        write_file(&dir.join(format!("f{i}")), size, i as u8);
    }
    nix::unistd::sync();
    for i in (0..files).step_by(2) {
        std::fs::remove_file(dir.join(format!("f{i}"))).unwrap();
    }
    nix::unistd::sync();
}

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Our histogram as (min bytes, extents, blocks) rows.
fn our_histogram(doc: &Value) -> Vec<(u64, u64, u64)> {
    let bs = doc["block_size"].as_u64().unwrap();
    doc["histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["min_blocks"].as_u64().unwrap() * bs,
                b["extents"].as_u64().unwrap(),
                b["blocks"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn field<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no '{prefix}' in:\n{text}"))
        .trim()
}

#[test]
fn free_equals_e2freefrag_on_ext4() {
    let s = scratch(FsType::Ext4, 256 << 20, &[]);
    fragment_free_space(&s.mountpoint().join("fill"), 600, 96 << 10);
    let mp = s.mountpoint().to_string_lossy().into_owned();
    let doc = fragkit_json(&["free", "--format", "json", &mp]);
    let theirs = run("e2freefrag", &[&s.info.loop_device.to_string_lossy()]);

    let num = |p: &str| {
        field(&theirs, p)
            .split_whitespace()
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert_eq!(doc["free_extents"], num("Num. free extent:"));
    assert_eq!(doc["free_blocks"], num("Free blocks:"));
    assert_eq!(doc["total_blocks"], num("Total blocks:"));
    let kb = doc["block_size"].as_u64().unwrap() / 1024;
    assert_eq!(
        doc["min_free_extent_blocks"].as_u64().unwrap() * kb,
        num("Min. free extent:")
    );
    assert_eq!(
        doc["max_free_extent_blocks"].as_u64().unwrap() * kb,
        num("Max. free extent:")
    );
    // e2freefrag: integer average in blocks, times KiB per block.
    let avg = doc["free_blocks"].as_u64().unwrap() / doc["free_extents"].as_u64().unwrap();
    assert_eq!(avg * kb, num("Avg. free extent:"));
    // The table shows that same rounding, and the free share after the group rows.
    let table = String::from_utf8(fragkit(&["free", &mp]).stdout).unwrap();
    let want = format!("/ avg {} KiB /", num("Avg. free extent:"));
    assert!(table.contains(&want), "table lacks {want:?}:\n{table}");
    let last = table.lines().rfind(|l| !l.trim().is_empty()).unwrap();
    assert!(last.starts_with("free share"), "last line: {last:?}");
    assert!(
        doc["free_extents"].as_u64().unwrap() >= 250,
        "free space was not fragmented: {doc}"
    );

    // "  128K...  256K-  :           198          9900   20.95%"
    let unit = |s: &str| -> u64 {
        let (n, u) = s.split_at(s.len() - 1);
        let shift = match u {
            "K" => 10,
            "M" => 20,
            "G" => 30,
            "T" => 40,
            _ => panic!("unit in {s}"),
        };
        n.trim().parse::<u64>().unwrap() << shift
    };
    let hist: Vec<(u64, u64, u64)> = theirs
        .lines()
        .skip_while(|l| !l.starts_with("Extent Size Range"))
        .skip(1)
        .map(|l| {
            let (range, counts) = l.split_once(':').unwrap();
            let start = range.trim().split("...").next().unwrap();
            let c: Vec<u64> = counts
                .split_whitespace()
                .take(2)
                .map(|x| x.parse().unwrap())
                .collect();
            (unit(start), c[0], c[1])
        })
        .collect();
    assert_eq!(our_histogram(&doc), hist);

    // Every group's free blocks add up, and no free extent is larger than its group.
    let groups = doc["groups"].as_array().unwrap();
    let sum: u64 = groups
        .iter()
        .map(|g| g["free_blocks"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, doc["free_blocks"].as_u64().unwrap());
    assert!(groups
        .iter()
        .all(|g| g["largest_free_extent_blocks"].as_u64() <= g["blocks"].as_u64()));
}

#[test]
fn free_equals_xfs_spaceman_on_xfs() {
    let s = scratch(FsType::Xfs, 320 << 20, &["-d", "agcount=4"]);
    fragment_free_space(&s.mountpoint().join("fill"), 600, 96 << 10);
    let mp = s.mountpoint().to_string_lossy().into_owned();
    // xfs frees a deleted file's blocks in the background (inode inactivation), so the
    // free space can still move after sync: wait until two readings agree.
    let mut doc = fragkit_json(&["free", "--format", "json", &mp]);
    for _ in 0..50 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let again = fragkit_json(&["free", "--format", "json", &mp]);
        if again["free_extents"] == doc["free_extents"]
            && again["free_blocks"] == doc["free_blocks"]
        {
            break;
        }
        doc = again;
    }
    let theirs = run("xfs_spaceman", &["-c", "freesp -s", &mp]);
    let total = |p: &str| field(&theirs, p).parse::<u64>().unwrap();
    assert_eq!(doc["free_extents"], total("total free extents"));
    assert_eq!(doc["free_blocks"], total("total free blocks"));
    assert!(
        doc["free_extents"].as_u64().unwrap() >= 250,
        "free space was not fragmented: {doc}"
    );
    // "   from      to extents  blocks    pct"
    let bs = doc["block_size"].as_u64().unwrap();
    let hist: Vec<(u64, u64, u64)> = theirs
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("from"))
        .skip(1)
        .take_while(|l| !l.starts_with("total"))
        .map(|l| {
            let c: Vec<u64> = l
                .split_whitespace()
                .take(4)
                .map(|x| x.parse().unwrap())
                .collect();
            (c[0] * bs, c[2], c[3])
        })
        .collect();
    assert_eq!(our_histogram(&doc), hist);

    // Per allocation group: "        AG    extents     blocks"
    let per_ag: HashMap<u64, (u64, u64)> = run("xfs_spaceman", &["-c", "freesp -g", &mp])
        .lines()
        .skip(1)
        .map(|l| {
            let c: Vec<u64> = l.split_whitespace().map(|x| x.parse().unwrap()).collect();
            (c[0], (c[1], c[2]))
        })
        .collect();
    let groups = doc["groups"].as_array().unwrap();
    assert_eq!(groups.len(), per_ag.len());
    for g in groups {
        let ag = g["group"].as_u64().unwrap();
        assert_eq!(
            (
                g["free_extents"].as_u64().unwrap(),
                g["free_blocks"].as_u64().unwrap()
            ),
            per_ag[&ag],
            "AG {ag}"
        );
    }
}

#[test]
fn free_on_btrfs_says_what_is_available() {
    let s = scratch(FsType::Btrfs, 256 << 20, &[]);
    write_file(&s.mountpoint().join("a"), 4 << 20, 1);
    nix::unistd::sync();
    let mp = s.mountpoint().to_string_lossy().into_owned();
    let doc = fragkit_json(&["free", "--format", "json", &mp]);
    assert_eq!(doc["fsmap"], false);
    assert!(doc["message"].as_str().unwrap().contains("no GETFSMAP"));
    let data = doc["spaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "data")
        .expect("a data chunk type");
    assert!(data["used"].as_u64().unwrap() >= 4 << 20, "{doc}");
    let table = fragkit(&["free", &mp]);
    assert!(String::from_utf8_lossy(&table.stdout).contains("btrfs has no GETFSMAP"));
}

#[test]
fn fragtracer_artefacts_match_fiemap() {
    let s = scratch(FsType::Ext4, 128 << 20, &[]);
    let dir = s.mountpoint().join("db");
    std::fs::create_dir(&dir).unwrap();
    interleaved_direct_appends(&[dir.join("000012.sst"), dir.join("LOG.log")], 64 << 10, 32);
    // Preallocated and partly written: its unwritten extents must not reach fragProc.tbl.
    let pre = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(dir.join("prealloc.db"))
        .unwrap();
    fallocate(&pre, 0, 0, 1 << 20);
    use std::os::unix::fs::FileExt;
    pre.write_all_at(AlignedBuf::new(128 << 10, 7).as_slice(), 256 << 10)
        .unwrap();
    pre.sync_all().unwrap();
    let out = s.mountpoint().join("artefacts");
    let doc = fragkit_json(&[
        "map",
        &dir.to_string_lossy(),
        "--fragtracer",
        &out.to_string_lossy(),
        "--format",
        "json",
    ]);
    assert_eq!(doc["fragtracer"]["files"], 3);

    let rows: Vec<(String, u64, u64, String)> = std::fs::read_to_string(out.join("fragProc.tbl"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            assert_eq!(c.len(), 4, "{l}");
            (
                c[0].to_string(),
                c[1].parse().unwrap(),
                c[2].parse().unwrap(),
                c[3].to_string(),
            )
        })
        .collect();
    assert!(
        rows.windows(2).all(|w| w[0].1 <= w[1].1),
        "not sorted by LBA"
    );
    assert!(rows.iter().all(|r| !r.3.contains("unwritten")));

    // The kernel's view: every written extent of every file, and nothing else.
    let mut want = Vec::new();
    let mut all_extents = 0;
    for name in ["000012.sst", "LOG.log", "prealloc.db"] {
        let (_, ext) = filefrag_extents(&dir.join(name));
        all_extents += ext.len();
        for e in ext
            .iter()
            .filter(|e| !e.flags.iter().any(|f| f == "unwritten"))
        {
            want.push((name.to_string(), e.physical, e.length));
        }
    }
    let mut got: Vec<(String, u64, u64)> = rows.iter().map(|r| (r.0.clone(), r.1, r.2)).collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    assert!(
        want.len() >= 8,
        "the interleaved files should be in many pieces: {want:?}"
    );

    // fragInfo.txt lists every extent, unwritten ones included.
    let info = std::fs::read_to_string(out.join("fragInfo.txt")).unwrap();
    let lines: Vec<&str> = info.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines.len(), all_extents);
    assert!(lines
        .iter()
        .any(|l| l.starts_with("prealloc.db\t") && l.contains("unwritten")));

    let png = std::fs::read(out.join("fragImg.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}

/// The whole-device map accounts for every block: boxes of file data equal FIEMAP's
/// blocks, free boxes equal GETFSMAP's free blocks (one box per block at this size).
#[test]
fn whole_fs_map_boxes_match_fiemap_and_free_space() {
    use fragkit::render::blockmap::{physical_map, Kind};
    use fragkit::render::ColorConfig;
    let s = scratch(FsType::Ext4, 64 << 20, &[]);
    // Leaves ~20 MiB in 64 KiB holes and less than that in one piece: big.sst must split.
    fragment_free_space(&s.mountpoint().join("fill"), 700, 64 << 10);
    write_file(&s.mountpoint().join("big.sst"), 20 << 20, 9);
    let scan = fragkit::scan::scan_paths(&[s.mountpoint().to_path_buf()], &[128 << 10]).unwrap();
    let (_, _, geo, recs) = fragkit::freespace::data_device_map(s.mountpoint(), None).unwrap();
    let colors = ColorConfig::default();
    let map = physical_map(
        "t".into(),
        &scan.files,
        &colors,
        geo.block_size,
        Some((&recs, geo.total_blocks)),
        true,
    );
    let grid = map.grid(&fragkit::render::ImgConfig::default());
    assert_eq!(grid.blocks_per_box, 1);
    assert_eq!(grid.cells.len() as u64, geo.total_blocks);
    let count = |want: &dyn Fn(Option<Kind>) -> bool| {
        grid.cells
            .iter()
            .filter(|&&c| want((c != u32::MAX).then(|| map.segments[c as usize].kind)))
            .count() as u64
    };
    let file_boxes = count(&|k| matches!(k, Some(Kind::File { .. })));
    let fiemap_blocks: u64 = scan.files.iter().map(|f| f.metrics.blocks).sum();
    assert_eq!(file_boxes, fiemap_blocks);
    let free_boxes = count(&|k| matches!(k, Some(Kind::Free) | None));
    let free = fragkit_json(&[
        "free",
        "--format",
        "json",
        &s.mountpoint().to_string_lossy(),
    ]);
    assert_eq!(free_boxes, free["free_blocks"].as_u64().unwrap());
    assert!(map.segments.iter().any(|s| matches!(
        s.kind,
        Kind::File {
            fragmented: true,
            ..
        }
    )));

    // The SVG's hover text names the file, its offset and the fragment.
    let svg = s.mountpoint().join("m.svg");
    fragkit_json(&[
        "map",
        &s.mountpoint().to_string_lossy(),
        "--whole-fs",
        "-o",
        &svg.to_string_lossy(),
        "--format",
        "json",
    ]);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.contains("big.sst | offset 0 | fragment 1 of"),
        "no hover text for big.sst"
    );
}
