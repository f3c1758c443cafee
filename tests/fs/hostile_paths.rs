//! Paths holding spaces, quotes, `$()`, backticks and a newline go through every program
//! fragkit runs (mkfs, losetup, blkid, xfs_db, cp) and every file it writes as given:
//! nothing in them is executed, and the outputs land exactly where asked. The lab's
//! reproduce.sh reads a scratch mount point back whole, whatever its path holds.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::Value;

/// `cd` with no argument goes to $HOME, so the canaries need no `/` in the path.
const CANARIES: [&str; 2] = ["fragkit-pwned-1", "fragkit-pwned-2"];

fn hostile_dir(parent: &Path) -> PathBuf {
    parent.join("a b'c\"d$(cd;touch fragkit-pwned-1)e`cd;touch fragkit-pwned-2`f\ng")
}

fn canaries(cwd: &Path) -> Vec<PathBuf> {
    let home = PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()));
    CANARIES
        .iter()
        .flat_map(|c| [home.join(c), cwd.join(c), Path::new("/").join(c)])
        .collect()
}

fn fragkit_in(cwd: &Path, args: &[&std::ffi::OsStr]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "fragkit {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn os(s: &str) -> &std::ffi::OsStr {
    std::ffi::OsStr::new(s)
}

#[test]
fn hostile_paths_are_data_not_code() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    for c in canaries(&cwd) {
        let _ = std::fs::remove_file(c);
    }
    let base = hostile_dir(tmp.path());

    // scratch create on xfs: the image path goes to losetup, the device to mkfs.xfs,
    // blkid and xfs_db.
    let dir = base.join("scratch");
    let info = fragkit_in(
        &cwd,
        &[
            os("scratch"),
            os("create"),
            os("--fs"),
            os("xfs"),
            os("--size"),
            os("320M"),
            os("--format"),
            os("json"),
            os("--dir"),
            dir.as_os_str(),
        ],
    );
    let mnt = dir.join("mnt");
    assert_eq!(info["mountpoint"].as_str(), mnt.to_str(), "{info}");
    assert!(fragkit::sys::mountinfo::is_mount_point(&mnt));
    interleaved_direct_appends(&[mnt.join("x y"), mnt.join("$(z)")], 64 << 10, 8);

    // Outputs land where asked.
    let png = base.join("map $(x).png");
    let ft = base.join("tracer `y`");
    fragkit_in(
        &cwd,
        &[
            os("map"),
            mnt.as_os_str(),
            os("--out"),
            png.as_os_str(),
            os("--fragtracer"),
            ft.as_os_str(),
        ],
    );
    assert!(
        std::fs::metadata(&png).unwrap().len() > 0,
        "{}",
        png.display()
    );
    for f in ["fragInfo.txt", "fragProc.tbl", "fragImg.png"] {
        assert!(ft.join(f).is_file(), "{f} not in {}", ft.display());
    }
    let scan = fragkit_in(
        &cwd,
        &[os("scan"), os("--format"), os("json"), mnt.as_os_str()],
    );
    let mut paths: Vec<&str> = scan["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    paths.sort();
    assert_eq!(
        paths,
        [mnt.join("$(z)"), mnt.join("x y")]
            .iter()
            .map(|p| p.to_str().unwrap())
            .collect::<Vec<_>>()
    );

    // scratch clone: both image paths go to cp.
    let clone_dir = base.join("clone");
    let clone = fragkit_in(
        &cwd,
        &[
            os("scratch"),
            os("clone"),
            mnt.as_os_str(),
            os("--format"),
            os("json"),
            os("--dir"),
            clone_dir.as_os_str(),
        ],
    );
    let clone_mnt = clone_dir.join("mnt");
    assert_eq!(clone["mountpoint"].as_str(), clone_mnt.to_str(), "{clone}");
    assert_eq!(
        file_hash(&clone_mnt.join("x y")),
        file_hash(&mnt.join("x y"))
    );

    // reproduce.sh's scratch step, as the lab writes it, with $IMAGES holding the path.
    let vars = vec![("IMAGES".to_string(), base.clone())];
    let args: Vec<String> = [
        "scratch", "create", "--fs", "ext4", "--size", "64M", "--format", "json", "--dir",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([base.join("base").to_string_lossy().into_owned()])
    .collect();
    let shown: Vec<String> = std::iter::once("fragkit".to_string())
        .chain(
            args.iter()
                .map(|a| fragkit::lab::runner::shell_word(a, &vars)),
        )
        .collect();
    let line = fragkit::report::lab::mountpoint_into("BASE", &shown.join(" "));
    assert!(line.contains("${IMAGES}"), "{line}");
    let exe_dir = Path::new(env!("CARGO_BIN_EXE_fragkit")).parent().unwrap();
    let path = format!(
        "{}:{}",
        exe_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("set -e\n{line}\nprintf %s \"$BASE\""))
        .env("IMAGES", &base)
        .env("PATH", path)
        .current_dir(&cwd)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{line}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let repro_mnt = base.join("base").join("mnt");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        repro_mnt.to_string_lossy(),
        "{line}"
    );
    assert!(fragkit::sys::mountinfo::is_mount_point(&repro_mnt));

    for m in [&repro_mnt, &clone_mnt, &mnt] {
        fragkit_in(&cwd, &[os("scratch"), os("destroy"), m.as_os_str()]);
        assert!(!m.exists(), "{} left behind", m.display());
    }
    for c in canaries(&cwd) {
        assert!(
            !c.exists(),
            "{} was created: a path was run as code",
            c.display()
        );
    }
}

/// A directory name that closes a `<script>` element and opens an `<img onerror>` is data
/// in `map --out x.html`, not markup: the page's only `</script>` is its own, and the name
/// comes back whole from the page's JSON.
#[test]
fn map_html_keeps_a_script_closing_name_inside_its_json() {
    let s = scratch(fragkit::scratch::FsType::Ext4, 64 << 20, &[]);
    // A path, not one name: "x<" holding "script><img src=x onerror=alert(2)><!--".
    let name = "x</script><img src=x onerror=alert(2)><!--";
    let dir = s.mountpoint().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    write_file(&dir.join("f"), 1 << 20, 3);
    let page = s.mountpoint().join("page.html");
    let out = fragkit(&[
        "map",
        &s.mountpoint().to_string_lossy(),
        "--out",
        &page.to_string_lossy(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(
        html.matches("</script>").count(),
        1,
        "one closing tag, the page's own"
    );
    assert!(!html.contains("<img src=x"), "the name became markup");
    assert!(!html.contains("<!--"), "the name opened a comment");
    let json = html
        .split("<script>const M=")
        .nth(1)
        .and_then(|t| t.split(";\n").next())
        .expect("the page's data");
    let m: Value = serde_json::from_str(json).unwrap();
    let texts: Vec<&str> = m["texts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_str())
        .collect();
    assert!(texts.iter().any(|t| t.contains(name)), "{texts:?}");
}
