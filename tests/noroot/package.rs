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

    // Depends names the package of every shared library the binary links (without it, a
    // binary built with MPI fails with exit 127 where OpenMPI is not installed).
    let depends = run(Command::new("dpkg-deb")
        .arg("--field")
        .arg(deb)
        .arg("Depends"));
    let depended: Vec<&str> = depends
        .split(',')
        .filter_map(|d| d.split_whitespace().next())
        .collect();
    let ldd = run(Command::new("ldd").arg(env!("CARGO_BIN_EXE_fragkit")));
    let dynamic = run(Command::new("readelf")
        .arg("-d")
        .arg(env!("CARGO_BIN_EXE_fragkit")));
    // readelf: "(NEEDED)  Shared library: [libmpi.so.40]"; ldd: "libmpi.so.40 => /lib/...".
    let needed: Vec<&str> = dynamic
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1)?.split(']').next())
        .collect();
    assert!(needed.iter().any(|n| n.starts_with("libc.so")), "{dynamic}");
    for lib in needed {
        // ldd: "libmpi.so.40 => /lib/x86_64-linux-gnu/libmpi.so.40 (0x...)", or for the
        // loader "/lib64/ld-linux-x86-64.so.2 (0x...)".
        let path = ldd
            .lines()
            .find_map(|l| {
                let path = match l.trim().split_once(" => ") {
                    Some((name, rest)) if name == lib => rest,
                    Some(_) => return None,
                    None => l.trim(),
                };
                let path = path.split_whitespace().next()?;
                (Path::new(path).file_name()? == lib).then_some(path)
            })
            .unwrap_or_else(|| panic!("ldd does not resolve {lib}: {ldd}"));
        // dpkg -S PATH: "libopenmpi3:amd64: /usr/lib/..."; dpkg knows a library under
        // /lib (a symlink to /usr/lib on merged-/usr systems) by its /usr path.
        let owner = |p: &str| {
            let out = Command::new("dpkg").arg("-S").arg(p).output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            out.status
                .success()
                .then(|| text.split(':').next().unwrap_or_default().to_string())
        };
        let package = owner(path)
            .or_else(|| owner(&format!("/usr{path}")))
            .unwrap_or_else(|| panic!("dpkg -S {path}: no package owns it"));
        assert!(
            depended.contains(&package.as_str()),
            "{lib} ({path}, package {package}) is not in Depends: {depends}"
        );
    }

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
