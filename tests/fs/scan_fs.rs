//! fragkit's extent engine against the kernel's own view, on real ext4, xfs and btrfs.

use crate::common;

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use fragkit::scratch::FsType;
use serde_json::Value;

/// Files with known kinds of layout: contiguous, interleaved, punched and re-fallocated,
/// sparse, tiny, empty.
fn build_layouts(dir: &Path) -> Vec<PathBuf> {
    let p = |n: &str| dir.join(n);
    write_file(&p("contiguous"), 8 << 20, 1);
    interleaved_direct_appends(&[p("inter-a"), p("inter-b")], 64 << 10, 32);

    write_file(&p("punched"), 4 << 20, 2);
    let f = OpenOptions::new().write(true).open(p("punched")).unwrap();
    fallocate(
        &f,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        1 << 20,
        1 << 20,
    );
    f.sync_all().unwrap();
    write_file(&p("filler"), 2 << 20, 3);
    fallocate(&f, 0, 1 << 20, 1 << 20);
    f.sync_all().unwrap();

    let sparse = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(p("sparse"))
        .unwrap();
    use std::os::unix::fs::FileExt;
    let buf = AlignedBuf::new(65536, 4);
    sparse.write_all_at(buf.as_slice(), 0).unwrap();
    sparse.write_all_at(buf.as_slice(), 10 << 20).unwrap();
    sparse.set_len(20 << 20).unwrap();
    sparse.sync_all().unwrap();

    write_file(&p("tiny"), 100, 5);
    write_file(&p("empty"), 0, 0);
    let mut v: Vec<PathBuf> = [
        "contiguous",
        "inter-a",
        "inter-b",
        "punched",
        "filler",
        "sparse",
        "tiny",
        "empty",
    ]
    .iter()
    .map(|n| p(n))
    .collect();
    v.sort();
    v
}

fn flag_names(e: &Value) -> Vec<String> {
    e["flags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect()
}

fn extents_equal_filefrag(fs: FsType) {
    let s = scratch(fs, 512 << 20, &[]);
    let files = build_layouts(s.mountpoint());
    let doc = fragkit_json(&[
        "scan",
        "--format",
        "json",
        &s.mountpoint().to_string_lossy(),
    ]);
    let listed = doc["files"].as_array().unwrap();
    assert_eq!(listed.len(), files.len(), "every regular file scanned once");
    let mut saw_fragmented = false;
    for f in listed {
        let path = PathBuf::from(f["path"].as_str().unwrap());
        let (bs, want) = filefrag_extents(&path);
        assert_eq!(bs, f["block_size"].as_u64().unwrap(), "{}", path.display());
        let got: Vec<FilefragExtent> = f["extents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let flags = flag_names(e);
                let shift = if flags.iter().any(|x| x == "inline") {
                    1
                } else {
                    bs
                };
                let unknown = flags.iter().any(|x| x == "unknown");
                FilefragExtent {
                    logical: e["logical"].as_u64().unwrap() / shift,
                    physical: if unknown {
                        0
                    } else {
                        e["physical"].as_u64().unwrap() / shift
                    },
                    length: if unknown {
                        0
                    } else {
                        e["length"].as_u64().unwrap() / shift
                    },
                    flags,
                }
            })
            .collect();
        assert_eq!(
            got,
            want,
            "{} on {}: extents differ from filefrag -v",
            path.display(),
            fs.name()
        );
        saw_fragmented |= f["fragments"].as_u64().unwrap() > 1;
    }
    assert!(
        saw_fragmented,
        "the layouts built must include a fragmented file on {}",
        fs.name()
    );

    // --format filefrag is a drop-in: byte-identical to filefrag -v over the same list
    // (tests/filefrag_dropin.rs covers errors, directories and devices).
    let order: Vec<&str> = listed.iter().map(|f| f["path"].as_str().unwrap()).collect();
    let out = fragkit(&[&["scan", "--format", "filefrag"], &order[..]].concat());
    assert!(out.status.success());
    let theirs = Command::new("filefrag")
        .arg("-v")
        .args(&order)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&theirs.stdout),
        "--format filefrag differs from filefrag -v on {}",
        fs.name()
    );
}

#[test]
fn extents_equal_filefrag_ext4() {
    extents_equal_filefrag(FsType::Ext4);
}

#[test]
fn extents_equal_filefrag_xfs() {
    extents_equal_filefrag(FsType::Xfs);
}

#[test]
fn extents_equal_filefrag_btrfs() {
    extents_equal_filefrag(FsType::Btrfs);
}

/// S(R) from fragkit equals the reads the loop device completes for an O_DIRECT sequential
/// read in R-byte requests (±2%: the inode and extent-tree reads after a cache drop).
fn split_count_matches_device(fs: FsType) {
    let s = scratch(fs, 512 << 20, &[]);
    let dir = s.mountpoint();
    interleaved_direct_appends(&[dir.join("a"), dir.join("b")], 64 << 10, 512);
    write_file(&dir.join("contiguous"), 32 << 20, 7);
    let dev = s.device_name();
    for name in ["a", "contiguous"] {
        let path = dir.join(name);
        for r in [128usize << 10, 512 << 10] {
            let doc = fragkit_json(&[
                "scan",
                "--format",
                "json",
                "--request-size",
                &r.to_string(),
                &path.to_string_lossy(),
            ]);
            let split = doc["files"][0]["requests"][0]["split"].as_u64().unwrap();
            drop_caches();
            let before = device_reads(&dev);
            direct_sequential_read(&path, r);
            let reads = device_reads(&dev) - before;
            let tolerance = (split as f64 * 0.02).max(2.0);
            assert!(
                (reads as f64 - split as f64).abs() <= tolerance,
                "{} {name} R={r}: device completed {reads} reads, fragkit S(R)={split}",
                fs.name()
            );
            if name == "a" && r == 128 << 10 && fs == FsType::Ext4 {
                let ideal = doc["files"][0]["requests"][0]["ideal"].as_u64().unwrap();
                assert!(
                    split > ideal,
                    "interleaved 64K appends must split 128K requests on ext4"
                );
            }
        }
    }
}

#[test]
fn split_count_matches_device_reads_ext4() {
    split_count_matches_device(FsType::Ext4);
}

#[test]
fn split_count_matches_device_reads_xfs() {
    split_count_matches_device(FsType::Xfs);
}

/// ext4 caps an extent record at 32768 blocks (128 MiB). Kernel 6.x's iomap-based FIEMAP
/// already merges same-state records, so the records that reach user space split where
/// the state changes: a 200 MiB preallocation written for its first 150 MiB comes back as
/// a written and an unwritten record, physically adjacent — one fragment, not two.
/// Backup superblocks are off so the allocator can give one run across block groups.
#[test]
fn ext4_adjacent_records_are_one_fragment() {
    let s = scratch(
        FsType::Ext4,
        1 << 30,
        &["-O", "sparse_super2,^resize_inode", "-E", "num_backup_sb=0"],
    );
    let path = s.mountpoint().join("big");
    {
        let f = std::fs::File::create(&path).unwrap();
        fallocate(&f, 0, 0, 200 << 20);
    }
    {
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        use std::os::unix::fs::FileExt;
        let buf = AlignedBuf::new(10 << 20, 9);
        for i in 0..15u64 {
            f.write_all_at(buf.as_slice(), i * (10 << 20)).unwrap();
        }
        f.sync_all().unwrap();
    }
    let doc = fragkit_json(&["scan", "--format", "json", &path.to_string_lossy()]);
    let f = &doc["files"][0];
    let extents = f["extents"].as_array().unwrap();
    assert!(
        extents.len() >= 2,
        "expected separate written/unwritten records: {extents:?}"
    );
    let e0 = &extents[0];
    let e1 = &extents[1];
    assert_eq!(
        e0["physical"].as_u64().unwrap() + e0["length"].as_u64().unwrap(),
        e1["physical"].as_u64().unwrap(),
        "the allocator did not give one run; the test needs adjacent records: {extents:?}"
    );
    assert_eq!(
        f["fragments"], 1,
        "physically adjacent records must be one fragment: {extents:?}"
    );
    assert_eq!(f["unwritten_bytes"], 50 << 20);
    assert_eq!(f["requests"][0]["split"], f["requests"][0]["ideal"]);
    // Only the written 150 MiB costs reads: 1200 windows of 128 KiB.
    assert_eq!(f["requests"][0]["ideal"], 1200);
}

/// The walk: nested directories, each hard-linked inode once, non-regular files skipped,
/// another file system mounted inside not entered unless --cross-mounts.
#[test]
fn walk_semantics() {
    let outer = scratch(FsType::Ext4, 64 << 20, &[]);
    let root = outer.mountpoint();
    std::fs::create_dir_all(root.join("a/b/c")).unwrap();
    for (i, d) in ["", "a", "a/b", "a/b/c"].iter().enumerate() {
        write_file(
            &root.join(d).join(format!("f{i}.log")),
            10_000 * (i + 1),
            i as u8,
        );
    }
    std::fs::hard_link(root.join("f0.log"), root.join("a/hardlink.log")).unwrap();
    std::os::unix::fs::symlink(root.join("f0.log"), root.join("a/symlink")).unwrap();
    nix::unistd::mkfifo(
        &root.join("a/fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    write_file(&root.join("a/b/other.db"), 4096, 1);
    // A second scratch fs mounted inside the first.
    let inner_dir = root.join("inner");
    std::fs::create_dir(&inner_dir).unwrap();
    let inner = scratch(FsType::Ext4, 64 << 20, &[]);
    write_file(&inner.mountpoint().join("inside.log"), 5000, 2);
    nix::mount::mount(
        Some(inner.mountpoint()),
        &inner_dir,
        None::<&str>,
        nix::mount::MsFlags::MS_BIND,
        None::<&str>,
    )
    .unwrap();
    let r = root.to_string_lossy();
    let doc = fragkit_json(&["scan", "--format", "json", &r]);
    let w = &doc["summary"]["walk"];
    assert_eq!(
        doc["summary"]["files"], 5,
        "4 logs + other.db, hard link once: {w}"
    );
    assert_eq!(w["hard_link_duplicates"], 1);
    assert_eq!(w["skipped_non_regular"], 2, "symlink and FIFO");
    assert_eq!(w["other_fs_directories"], 1);
    let crossed = fragkit_json(&["scan", "--format", "json", "--cross-mounts", &r]);
    assert_eq!(crossed["summary"]["files"], 6);
    let only_logs = fragkit_json(&["scan", "--format", "json", "--ext", "log", &r]);
    assert_eq!(only_logs["summary"]["files"], 4);
    assert_eq!(only_logs["summary"]["walk"]["skipped_filtered"], 1);
    // ndjson: one object per file, then the summary line.
    let out = fragkit(&["scan", "--format", "ndjson", &r]);
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 6);
    assert_eq!(lines[5]["summary"]["files"], 5);
    // csv: header + one row per file.
    let out = fragkit(&["scan", "--format", "csv", &r]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 6);
    assert!(text.starts_with("path,path_bytes,dev,ino,fs,size,allocated,extents,fragments"));
    nix::mount::umount2(&inner_dir, nix::mount::MntFlags::MNT_DETACH).unwrap();
}

/// Listings are written while the walk goes on, in byte order of the full paths whatever
/// the thread count ("a.x" before "a/…", since '.' < '/'); `--sort --top` keeps the same
/// first files as the whole sorted listing.
#[test]
fn streamed_listing_is_in_path_order() {
    let s = scratch(FsType::Ext4, 64 << 20, &[]);
    let root = s.mountpoint();
    // More files than one batch (256) in one directory, and names that sort across '/'.
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    std::fs::create_dir_all(root.join("a-")).unwrap();
    for i in 0..600 {
        write_file(&root.join(format!("a/b/{}", 599 - i)), 100 + i, 1);
    }
    for name in ["a.x", "a/z", "a-/y", "a0", "b", "a/b.c"] {
        write_file(&root.join(name), 5000, 2);
    }
    let r = root.to_string_lossy();
    let paths = |threads: &str| -> Vec<String> {
        let out = fragkit(&["scan", "--format", "ndjson", "-j", threads, &r]);
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let (summary, files) = lines.split_last().unwrap();
        assert_eq!(summary["summary"]["files"], 606);
        files
            .iter()
            .map(|f| f["path"].as_str().unwrap().to_string())
            .collect()
    };
    let one = paths("1");
    let mut sorted = one.clone();
    sorted.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    assert_eq!(one, sorted, "path byte order");
    assert_eq!(paths("2"), one, "same order with two threads");
    assert_eq!(paths("3"), one, "same order with three threads");

    let all = fragkit_json(&["scan", "--format", "json", "--sort", "size", &r]);
    let top = fragkit_json(&[
        "scan", "--format", "json", "--sort", "size", "--top", "7", &r,
    ]);
    let first = |d: &Value, n: usize| -> Vec<Value> {
        d["files"].as_array().unwrap()[..n]
            .iter()
            .map(|f| f["path"].clone())
            .collect()
    };
    assert_eq!(top["files"].as_array().unwrap().len(), 7);
    assert_eq!(first(&top, 7), first(&all, 7));
    assert_eq!(top["summary"], all["summary"]);
}

/// `scan --model`: a file built as FAST'24's worst case (32 KiB chunks S = 256 KiB apart,
/// every chunk on one die of the fast24 device) reads far slower on the model than its
/// contiguous self, a contiguous file does not, and --model only adds fields: without it
/// the output is what it was. Bad --model values: one-line errors.
#[test]
fn scan_model_sees_the_fast24_worst_case() {
    use fragkit::age::hypothetical::build;
    use fragkit::scratch::{Scratch, ScratchSpec};
    require_root();
    let mut spec = ScratchSpec::new(FsType::Ext4, 256 << 20);
    spec.mount_options = Some("nodelalloc".into());
    let s = Scratch::create(&spec).unwrap();
    let worst = s.mountpoint().join("worst");
    let r = build(&hypothetical_worst_ideal(worst.clone())).unwrap();
    assert_eq!(r.achieved.fragments, 256);
    // One fallocate of 2048 blocks (a power of two: one buddy chunk) before the data, so
    // the file is one extent; written page by page under nodelalloc it once came out in 2.
    let contiguous = s.mountpoint().join("contiguous");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&contiguous).unwrap();
        fallocate(&f, 0, 0, 8 << 20);
        f.write_all(AlignedBuf::new(8 << 20, 1).as_slice()).unwrap();
        f.sync_all().unwrap();
    }
    let dir = s.mountpoint().to_str().unwrap();

    let doc = fragkit_json(&["scan", dir, "--model", "fast24", "--format", "json"]);
    let file = |name: &str| {
        doc["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"].as_str().unwrap().ends_with(name))
            .unwrap()
            .clone()
    };
    let (w, c) = (
        file("/worst")["model"].clone(),
        file("/contiguous")["model"].clone(),
    );
    let ratio = |m: &Value| m["ratio"].as_f64().unwrap();
    assert!(ratio(&w) > 2.0, "worst case: {w}");
    assert_eq!(c["read_ns"], c["contiguous_ns"], "{c}");
    assert_eq!(c["collisions"], 0);
    assert!(w["collisions"].as_u64().unwrap() > 0, "{w}");
    let m = &doc["summary"]["model"];
    assert_eq!(m["name"], "fast24");
    assert_eq!(m["worst"][0]["path"], worst.to_str().unwrap());
    assert_eq!(
        m["read_ns"].as_u64().unwrap(),
        w["read_ns"].as_u64().unwrap() + c["read_ns"].as_u64().unwrap()
    );

    // Without --model: no model fields, and everything else as with it.
    let mut plain = fragkit_json(&["scan", dir, "--format", "json"]);
    let mut with = doc.clone();
    for f in with["files"].as_array_mut().unwrap() {
        assert!(f.as_object_mut().unwrap().remove("model").is_some());
    }
    with["summary"].as_object_mut().unwrap().remove("model");
    for d in [&mut plain, &mut with] {
        d["summary"]["walk"] = Value::Null;
    }
    assert_eq!(plain, with);
    let csv = fragkit(&["scan", dir, "--model", "sata-a", "--format", "csv"]);
    let csv = String::from_utf8(csv.stdout).unwrap();
    assert!(csv.lines().next().unwrap().ends_with(",model_device_reads"));
    let table = fragkit(&["scan", dir, "--model", "32K,256K"]);
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(
        table.contains("VS-CONT") && table.contains("modeled    on custom"),
        "{table}"
    );

    for bad in ["nope", "0,1M", "32K,100K"] {
        let e = fragkit_error(&["scan", dir, "--model", bad]);
        assert!(
            e.contains(bad.split(',').next().unwrap()) || e.contains("model"),
            "{e}"
        );
    }
}

/// `scan --model` on a sparse file of 8 EiB less a byte (the largest size xfs and btrfs
/// take) holding 512 KiB of data in three places: the model reads the data extents, not
/// the holes, so it ends (it modeled 2^36 segments of holes before), and its device reads
/// are exactly the pieces the data extents put in the 128 KiB requests that hold data.
/// A run that has not ended after 10 minutes is killed and the test fails (a hang guard,
/// not a timing figure).
fn scan_model_skips_holes(fs: FsType) {
    use std::os::unix::fs::FileExt;
    let s = scratch(fs, 320 << 20, &[]);
    let path = s.mountpoint().join("sparse");
    {
        let f = std::fs::File::create(&path).unwrap();
        for (off, len) in [
            (0u64, 128usize << 10),
            (1 << 40, 256 << 10),
            (1 << 62, 128 << 10),
        ] {
            f.write_all_at(&vec![7u8; len], off).unwrap();
        }
        f.set_len(i64::MAX as u64).unwrap();
        f.sync_all().unwrap();
    }
    let out = output_within(
        Command::new(env!("CARGO_BIN_EXE_fragkit")).args([
            "scan",
            path.to_str().unwrap(),
            "--model",
            "fast24",
            "--format",
            "json",
        ]),
        std::time::Duration::from_secs(600),
    );
    assert!(
        out.status.success(),
        "{}: scan --model did not end: {:?}",
        fs.name(),
        out.status
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let file = &doc["files"][0];
    assert_eq!(file["size"], i64::MAX as u64, "{}", fs.name());
    // The pieces of data each 128 KiB request holds, physically contiguous ones as one
    // (unwritten extents, e.g. xfs's preallocation beyond the writes, read no device).
    const R: u64 = 128 << 10;
    let mut pieces: std::collections::BTreeMap<u64, Vec<(u64, u64)>> = Default::default();
    for e in file["extents"].as_array().unwrap() {
        let flags = e["flags"].as_array().unwrap();
        if flags
            .iter()
            .any(|f| f == "unwritten" || f == "unknown" || f == "delalloc")
        {
            continue;
        }
        let (l, p, n) = (
            e["logical"].as_u64().unwrap(),
            e["physical"].as_u64().unwrap(),
            e["length"].as_u64().unwrap(),
        );
        let mut o = l;
        while o < l + n {
            let end = (o / R + 1) * R;
            let t = end.min(l + n);
            let w = pieces.entry(o / R).or_default();
            let phys = p + (o - l);
            match w.last_mut() {
                Some((a, b)) if *a + *b == phys => *b += t - o,
                _ => w.push((phys, t - o)),
            }
            o = t;
        }
    }
    let expected: usize = pieces.values().map(Vec::len).sum();
    assert!(expected >= 4, "{}: {file}", fs.name());
    assert_eq!(
        file["model"]["device_reads"],
        expected as u64,
        "{}: {}",
        fs.name(),
        file["model"]
    );
}

#[test]
fn scan_model_skips_holes_xfs() {
    scan_model_skips_holes(FsType::Xfs);
}

#[test]
fn scan_model_skips_holes_btrfs() {
    scan_model_skips_holes(FsType::Btrfs);
}

/// The rows of a csv text (RFC 4180: quoted fields may hold commas, quotes and newlines).
fn csv_rows(text: &str) -> Vec<Vec<String>> {
    let (mut rows, mut row, mut field) = (Vec::new(), Vec::new(), String::new());
    let (mut quoted, mut chars) = (false, text.chars().peekable());
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    rows
}

/// json, ndjson and csv of one tree list the same files in the same order with the same
/// numbers, at -j 1 and -j 2 byte for byte, and names holding quotes, a backslash, a
/// newline, a comma, a tab or bytes that are not UTF-8 come out as serde writes the
/// lossy UTF-8 name (JSON) and quoted (csv).
#[test]
fn formats_agree_and_escape_odd_names() {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let s = scratch(FsType::Ext4, 64 << 20, &[]);
    let root = s.mountpoint();
    let d = root.join("d");
    std::fs::create_dir(&d).unwrap();
    let odd: [&[u8]; 8] = [
        b"q\"uote",
        b"back\\slash",
        b"new\nline",
        b"com,ma",
        b"bad-\xff\xfe",
        b"tab\t",
        b"utf8-\xc3\xa9",
        b"plain",
    ];
    for (i, n) in odd.iter().enumerate() {
        write_file(
            &d.join(std::ffi::OsStr::from_bytes(n)),
            3000 + i * 5000,
            i as u8,
        );
    }
    // More than one batch of 256 files.
    for i in 0..300 {
        write_file(&d.join(format!("f{i:03}")), 100 + i, 1);
    }
    let r = root.to_string_lossy();
    let run = |format: &str, threads: &str| {
        let out = fragkit(&["scan", "--format", format, "-j", threads, &r]);
        assert!(out.status.success(), "{format}: {out:?}");
        out.stdout
    };
    for format in ["json", "ndjson", "csv"] {
        assert_eq!(
            run(format, "1"),
            run(format, "2"),
            "{format}: -j 1 and -j 2"
        );
    }
    let json: Value = serde_json::from_slice(&run("json", "2")).unwrap();
    let files = json["files"].as_array().unwrap();
    assert_eq!(files.len(), 308);
    let nd: Vec<Value> = String::from_utf8(run("ndjson", "2"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (summary, nd_files) = nd.split_last().unwrap();
    assert_eq!(nd_files, &files[..], "ndjson lines = json files");
    assert_eq!(summary["summary"], json["summary"]);
    for n in odd {
        let want = String::from_utf8_lossy(
            &d.join(std::ffi::OsStr::from_bytes(n))
                .into_os_string()
                .into_vec(),
        )
        .into_owned();
        assert!(
            files.iter().any(|f| f["path"] == want.as_str()),
            "{want:?} listed"
        );
    }
    let csv = csv_rows(&String::from_utf8(run("csv", "2")).unwrap());
    let (header, rows) = csv.split_first().unwrap();
    assert_eq!(rows.len(), files.len());
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    // Names that are not UTF-8 are kept losslessly: JSON `path_bytes` (byte values) and
    // CSV `path_bytes` (hex); UTF-8 names have neither.
    let bad = d.join(std::ffi::OsStr::from_bytes(b"bad-\xff\xfe"));
    let bad_bytes = bad.as_os_str().as_bytes();
    let with_bytes: Vec<&Value> = files
        .iter()
        .filter(|f| f.get("path_bytes").is_some())
        .collect();
    assert_eq!(
        with_bytes.len(),
        1,
        "only the non-UTF-8 name has path_bytes"
    );
    let got: Vec<u8> = with_bytes[0]["path_bytes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap() as u8)
        .collect();
    assert_eq!(got, bad_bytes);
    let hex: String = bad_bytes.iter().map(|b| format!("{b:02x}")).collect();
    for (row, f) in rows.iter().zip(files) {
        let want = if f.get("path_bytes").is_some() {
            hex.as_str()
        } else {
            ""
        };
        assert_eq!(row[col("path_bytes")], want, "{}", f["path"]);
    }
    for (row, f) in rows.iter().zip(files) {
        assert_eq!(row[col("path")], f["path"].as_str().unwrap());
        for key in ["ino", "size", "allocated", "fragments"] {
            assert_eq!(row[col(key)], f[key].to_string(), "{key} of {}", f["path"]);
        }
        let extents = f["extents"].as_array().unwrap().len();
        assert_eq!(row[col("extents")], extents.to_string());
    }
}

/// Names holding ESC (a colour, an OSC title), CR or other C0/C1 characters never reach the
/// terminal raw: the scan table and stderr's lines show them escaped, one line each.
#[test]
fn terminal_output_escapes_control_characters() {
    use std::os::unix::ffi::OsStrExt;
    let s = scratch(FsType::Ext4, 64 << 20, &[]);
    let d = s.mountpoint().join("t");
    std::fs::create_dir(&d).unwrap();
    let hostile: &[u8] = b"x\x1b]0;pwned\x07\x1b[2J\rfake\xc2\x9bline";
    let a = d.join(std::ffi::OsStr::from_bytes(hostile));
    let b = d.join("plain");
    interleaved_direct_appends(&[a.clone(), b.clone()], 32 << 10, 4);
    let out = fragkit(&["scan", d.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let raw_controls = |bytes: &[u8]| {
        String::from_utf8_lossy(bytes)
            .chars()
            .any(|c| c.is_control() && c != '\n')
    };
    assert!(
        !raw_controls(&out.stdout),
        "raw control characters in the table"
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("x\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\rfake\\u{9b}line"),
        "{table}"
    );
    // A diagnostic naming the file: a path that does not exist, with the same bytes.
    let missing = d.join(std::ffi::OsStr::from_bytes(b"gone\x1b[31m\rX\nfake: line"));
    let out = fragkit(&["scan", missing.to_str().unwrap(), b.to_str().unwrap()]);
    assert!(
        !raw_controls(&out.stderr),
        "raw control characters on stderr: {out:?}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("gone\\u{1b}[31m\\rX\\nfake: line"), "{err}");
    assert!(err.lines().all(|l| !l.starts_with("fake")), "{err}");
}

/// `defrag` names files the same way: its JSON keeps a name that is not UTF-8 (serde's
/// own path serialisation failed there and cut the document short), and its table
/// escapes control characters.
#[test]
fn defrag_output_keeps_odd_names() {
    use std::os::unix::ffi::OsStrExt;
    let s = scratch(FsType::Ext4, 64 << 20, &[]);
    let d = s.mountpoint().join("odd");
    std::fs::create_dir(&d).unwrap();
    let bad = d.join(std::ffi::OsStr::from_bytes(b"bad-\xff\x1b[2J"));
    let other = d.join("other");
    interleaved_direct_appends(&[bad.clone(), other.clone()], 32 << 10, 8);
    let out = fragkit(&[
        "defrag",
        "--dry-run",
        "--format",
        "json",
        d.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("a whole JSON document");
    let files = v["files"].as_array().unwrap();
    let f = files
        .iter()
        .find(|f| f.get("path_bytes").is_some())
        .unwrap_or_else(|| panic!("no path_bytes: {v}"));
    let got: Vec<u8> = f["path_bytes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap() as u8)
        .collect();
    assert_eq!(got, bad.as_os_str().as_bytes());
    assert!(files
        .iter()
        .any(|f| f["path"] == other.to_str().unwrap() && f.get("path_bytes").is_none()));
    let out = fragkit(&["defrag", "--dry-run", d.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(!table.contains('\u{1b}'), "{table}");
    assert!(table.contains("bad-\u{fffd}\\u{1b}[2J"), "{table}");
}

/// A name that is not UTF-8 comes back whole (`path_bytes`, `dir_bytes`: the name's
/// bytes, beside the lossy text) from `age fragpicker-synthetic`, `bench fragpicker` and
/// `watch report`'s JSON, as from scan's: before, serde refused such a path and the
/// command printed no JSON at all (age, bench), or the history kept only U+FFFD (watch).
#[test]
fn age_bench_and_watch_json_keep_non_utf8_names() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let bytes_of = |v: &Value| -> Vec<u8> {
        v.as_array()
            .unwrap_or_else(|| panic!("not an array of bytes: {v}"))
            .iter()
            .map(|b| b.as_u64().unwrap() as u8)
            .collect()
    };
    // fragkit ARGS... PATH, which must succeed and print one JSON document.
    let json = |args: &[&str], path: &Path| -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_fragkit"))
            .args(args)
            .arg(path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {err}");
        serde_json::from_slice(&out.stdout).expect("a whole JSON document")
    };
    let s = scratch(FsType::Ext4, 256 << 20, &[]);
    let odd = |name: &str| {
        let mut b = s.mountpoint().as_os_str().as_bytes().to_vec();
        b.extend_from_slice(format!("/{name}-").as_bytes());
        b.push(0xff);
        PathBuf::from(OsStr::from_bytes(&b))
    };

    let syn = odd("syn");
    let v = json(
        &[
            "age",
            "fragpicker-synthetic",
            "--size",
            "1M",
            "--files",
            "2",
            "--format",
            "json",
        ],
        &syn,
    );
    assert_eq!(bytes_of(&v["dir_bytes"]), syn.as_os_str().as_bytes(), "{v}");
    for f in v["files"].as_array().unwrap() {
        let b = bytes_of(&f["path_bytes"]);
        assert!(b.starts_with(syn.as_os_str().as_bytes()), "{f}");
    }

    let file = odd("fp");
    write_file(&file, 5 * 416 * 1024 + 64 * 1024, 0x33);
    let v = json(
        &["bench", "fragpicker", "--runs", "1", "--format", "json"],
        &file,
    );
    let rows = v["rows"].as_array().unwrap();
    assert!(!rows.is_empty());
    for r in rows {
        let b = bytes_of(&r["path_bytes"]);
        assert_eq!(b, file.as_os_str().as_bytes(), "{r}");
    }

    // watch: a file fragmented before the watch starts is fragmented from its first tick.
    let dir = s.mountpoint().join("w");
    std::fs::create_dir(&dir).unwrap();
    let bad = odd("w/bad");
    interleaved_direct_appends(&[bad.clone(), dir.join("other")], 32 << 10, 8);
    let db = s.mountpoint().join("w.db");
    let db_arg = db.to_str().unwrap();
    json(
        &[
            "watch",
            "--interval",
            "200ms",
            "--duration",
            "1s",
            "--format",
            "json",
            "--db",
            db_arg,
        ],
        &dir,
    );
    let v = json(&["watch", "report", "--format", "json", "--db"], &db);
    let first = v["first_fragmented"].as_array().unwrap();
    let f = first
        .iter()
        .find(|f| f.get("path_bytes").is_some())
        .unwrap_or_else(|| panic!("no path_bytes: {v}"));
    assert_eq!(
        bytes_of(&f["path_bytes"]),
        bad.as_os_str().as_bytes(),
        "{f}"
    );
}
