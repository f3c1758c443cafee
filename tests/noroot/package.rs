//! scripts/package builds a .deb; installed into an empty directory root it gives a
//! working binary, a man page `man -l` reads, and the three shells' completions.

use std::path::Path;
use std::process::Command;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn deb_installs_binary_man_page_and_completions() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let deb = run(Command::new(root.join("scripts/package"))
        .arg("--bin")
        .arg(env!("CARGO_BIN_EXE_fragkit"))
        .arg("--out")
        .arg(tmp.path()));
    let deb = Path::new(deb.trim());
    assert!(deb.is_file(), "{}", deb.display());

    let info = run(Command::new("dpkg-deb")
        .arg("--field")
        .arg(deb)
        .arg("Package"));
    assert_eq!(info.trim(), "fragkit");

    // A clean directory root: nothing but what the package holds.
    let dest = tmp.path().join("root");
    run(Command::new("dpkg").arg("-x").arg(deb).arg(&dest));

    let version = run(Command::new(dest.join("usr/bin/fragkit")).arg("--version"));
    assert_eq!(
        version.trim(),
        format!("fragkit {}", env!("CARGO_PKG_VERSION"))
    );

    let page = dest.join("usr/share/man/man1/fragkit.1.gz");
    let text = run(Command::new("man")
        .arg("-l")
        .arg(&page)
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100"));
    assert!(text.contains("fragkit"), "{text}");
    assert!(text.contains("SYNOPSIS") && text.contains("scan"), "{text}");
    // One page per command, too.
    assert!(dest.join("usr/share/man/man1/fragkit-scan.1.gz").is_file());

    for (path, marker) in [
        ("usr/share/bash-completion/completions/fragkit", "_fragkit"),
        (
            "usr/share/zsh/vendor-completions/_fragkit",
            "#compdef fragkit",
        ),
        (
            "usr/share/fish/vendor_completions.d/fragkit.fish",
            "complete -c fragkit",
        ),
    ] {
        let body = std::fs::read_to_string(dest.join(path)).unwrap();
        assert!(body.contains(marker), "{path}: no '{marker}'");
        assert!(body.contains("defrag"), "{path}: no subcommands");
    }
}
