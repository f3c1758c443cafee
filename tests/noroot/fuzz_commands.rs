//! Fuzzing the commands' use of parsed values, not only the parsers: each target is a
//! subcommand run by the built binary on a fresh scratch directory (a 64 KiB file, a
//! small tree, `--dry-run` where the command changes files), with one to three of its
//! numeric, size and list options set to seeded mutations of valid values (the mutator of
//! fuzz.rs). Each run must end by itself with status 0, 1 or 2, and a failure must be told
//! in lines of its own (no panic, no abort, no signal, no `Caused by:` chain, no backtrace).
//! Limits keep a value that is valid but huge from hurting the machine: address space 4 GiB
//! (an allocation of 25 GB fails, and Rust aborts: counted), file size 16 MiB (writes past
//! it fail with EFBIG, which the command must report), and a wall-clock limit per run,
//! after which the run is killed and counted as "timed out" (a value that asks for a long
//! run is not a fault; the count is printed).
//! FRAGKIT_FUZZ_SECONDS (default 2) per target, or FRAGKIT_FUZZ_COMMAND_ITERS runs.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::fuzz::{budget, mutate, Rng};

/// A subcommand, its fixed arguments (`{dir}`: the scratch directory, `{file}`: a 64 KiB
/// file in it, `{out}`: a path to write), and the options to mutate with valid seeds. An
/// option not mutated in a run is left out, or given its first seed when listed in `small`
/// (required options, and defaults too big for a scratch directory or too long a run).
struct Target {
    name: &'static str,
    args: &'static [&'static str],
    options: &'static [(&'static str, &'static [&'static str])],
    small: &'static [&'static str],
}

const SIZES: &[&str] = &["4K", "128K", "1M", "64K", "512"];
const COUNTS: &[&str] = &["1", "2", "8", "100"];

fn targets() -> Vec<Target> {
    vec![
        Target {
            name: "scan",
            args: &["scan", "{dir}", "--format", "json"],
            options: &[
                ("-j", &["1", "2", "4"]),
                ("--request-size", SIZES),
                ("--top", COUNTS),
                ("--min-fragments", COUNTS),
                ("--model", &["fast24", "32K,256K", "4K,64K"]),
            ],
            small: &[],
        },
        Target {
            name: "defrag --dry-run",
            args: &["defrag", "{dir}", "--dry-run", "--format", "json"],
            options: &[
                ("--hot-pct", &["10", "50", "100", "0.5"]),
                ("--io-size", SIZES),
                ("--max-rate", &["50", "2.5", "0.001"]),
                ("--budget", &["1M", "64K", "1G"]),
                ("-j", &["1", "2"]),
            ],
            small: &[],
        },
        Target {
            // A file that is not a SQLite database: refused in one line, whatever the options.
            name: "bench sqlite",
            args: &["bench", "sqlite", "{file}", "--format", "json"],
            options: &[
                ("--scans", COUNTS),
                ("--duration", &["1ms", "0", "10ms"]),
                ("--progress", COUNTS),
            ],
            small: &[],
        },
        Target {
            name: "advise",
            args: &["advise", "{dir}", "--format", "json"],
            options: &[
                ("--device", &["fast24", "hdd", "32K,256K", "hdd@50%"]),
                ("--io-size", SIZES),
                ("--reads", COUNTS),
                ("--hot-pct", &["10", "50", "100"]),
                ("--top", COUNTS),
            ],
            small: &[],
        },
        Target {
            name: "map",
            args: &["map", "{dir}", "--out", "{out}.png"],
            options: &[
                ("--max-length", &["0", "64", "4096"]),
                ("--title", &["t", "a b"]),
                // Config files: the mutated text is written to a file, its path passed.
                (
                    "--img-config",
                    &[
                        "max_length 0\ncolumns 256\nbox_size 4\nmax_boxes 65536\n",
                        "max_length = 64\ncolumns = 128\n",
                    ],
                ),
                (
                    "--color-config",
                    &[".sst,.ldb green light-orange dark-orange\ndefault light-gray black dark-gray\n@free white\n"],
                ),
            ],
            small: &[],
        },
        Target {
            name: "free",
            args: &["free", "{dir}", "--format", "json"],
            options: &[],
            small: &[],
        },
        Target {
            name: "bench read",
            args: &[
                "bench",
                "read",
                "{file}",
                "--format",
                "json",
                "--iterations",
                "1",
            ],
            options: &[
                ("--bs", SIZES),
                ("--qd", &["1", "4", "32"]),
                ("--gap", &["0", "4K", "1M"]),
                ("--align", &["512", "4K"]),
                ("--warmup", &["0", "1"]),
                ("--offset", &["0", "4K", "60K"]),
                ("--size", &["4K", "64K", "1M"]),
                ("--count", COUNTS),
                ("--iterations", &["1", "2"]),
                ("--model", &["fast24", "hdd", "32K,256K"]),
            ],
            small: &["--count"],
        },
        Target {
            name: "bench write",
            args: &[
                "bench",
                "write",
                "{file}",
                "--format",
                "json",
                "--iterations",
                "1",
            ],
            options: &[
                ("--bs", SIZES),
                ("--qd", &["1", "4", "32"]),
                ("--gap", &["0", "4K"]),
                ("--offset", &["0", "4K"]),
                ("--size", &["4K", "64K"]),
                ("--count", COUNTS),
            ],
            small: &["--count"],
        },
        Target {
            name: "probe alignment",
            args: &["probe", "alignment", "{file}", "--format", "json"],
            options: &[
                ("--bs", &["4K", "8K"]),
                ("--qd", &["1", "4"]),
                ("--step", &["4K", "8K"]),
                ("--max", &["16K", "64K"]),
                ("--count", COUNTS),
                ("--span", &["64K", "1M"]),
            ],
            small: &["--count", "--max"],
        },
        Target {
            name: "probe interface",
            args: &["probe", "interface", "{file}", "--format", "json"],
            options: &[
                ("--bytes", &["4K", "64K"]),
                ("--max-requests", &["1", "4", "16"]),
                ("--qd", &["1", "4"]),
                ("--iterations", &["1", "3"]),
            ],
            small: &["--iterations"],
        },
        Target {
            name: "age layout",
            args: &["age", "layout", "{out}", "--format", "json"],
            options: &[
                ("--size", &["64K", "256K", "1M"]),
                ("--frag-size", &["4K", "16K"]),
                ("--frag-distance", &["0", "4K", "64K"]),
            ],
            small: &["--size", "--frag-size", "--frag-distance"],
        },
        Target {
            name: "age fragpicker-synthetic",
            args: &["age", "fragpicker-synthetic", "{dir}", "--format", "json"],
            options: &[("--size", &["64K", "256K"]), ("--files", &["1", "2", "4"])],
            small: &["--size", "--files"],
        },
        Target {
            name: "age hypothetical",
            args: &["age", "hypothetical", "{out}", "--format", "json"],
            options: &[
                ("--chunk", &["4K", "32K"]),
                ("--stripe", &["64K", "256K"]),
                ("--size", &["64K", "1M"]),
            ],
            small: &["--size"],
        },
        Target {
            name: "age sqlite",
            args: &["age", "sqlite", "{dir}", "--format", "json"],
            options: &[
                ("--records", &["1", "10", "100"]),
                ("--dummy", &["0", "1K", "4K"]),
            ],
            small: &["--records"],
        },
        Target {
            name: "age fileserver",
            args: &["age", "fileserver", "{dir}", "--format", "json"],
            options: &[
                ("--files", &["4", "1", "16"]),
                ("--file-size", &["4K", "64K"]),
                ("--threads", &["1", "2"]),
                ("--append", &["4K", "16K"]),
                ("--iosize", &["4K", "64K"]),
                ("--loops", &["1", "2"]),
                ("--appends", &["1", "4"]),
            ],
            small: &["--files", "--file-size", "--threads", "--loops"],
        },
        Target {
            name: "age profile",
            args: &["age", "profile", "--target", "{dir}", "--format", "json"],
            options: &[
                ("--fullness", &["50", "90", "0.5"]),
                ("--sizes", &["4K..64K", "4K,16K,64K"]),
                ("--churn", &["0.1", "0.5"]),
                ("--steps", &["1", "4"]),
            ],
            small: &["--steps"],
        },
        Target {
            name: "age paf",
            args: &[
                "age",
                "paf",
                "PAF:85.50@64K",
                "--target",
                "{dir}",
                "--format",
                "json",
            ],
            options: &[("-j", &["1", "2"]), ("--seed", &["1", "42"])],
            small: &[],
        },
        #[cfg(feature = "watch")]
        Target {
            name: "watch",
            args: &["watch", "{dir}", "--db", "{out}.db", "--format", "json"],
            options: &[
                ("--interval", &["200ms", "1s"]),
                ("--rescan", &["1s", "10"]),
                ("--request-size", SIZES),
                ("--max-file-samples", COUNTS),
                ("--duration", &["300ms", "1s"]),
            ],
            small: &["--duration"],
        },
    ]
}

/// How one run ended, when it is a fault.
fn fault(status: std::process::ExitStatus, stderr: &str) -> Option<String> {
    if let Some(sig) = status.signal() {
        return Some(format!("killed by signal {sig}"));
    }
    let code = status.code().unwrap_or(-1);
    if !(0..=2).contains(&code) {
        return Some(format!("exit status {code}"));
    }
    for bad in [
        "panicked at",
        "RUST_BACKTRACE",
        "Caused by:",
        "memory allocation of",
    ] {
        if stderr.contains(bad) {
            return Some(format!("stderr holds {bad:?}"));
        }
    }
    if code == 2 {
        let last = stderr.lines().rev().find(|l| !l.is_empty()).unwrap_or("");
        if !last.starts_with("fragkit: ") {
            return Some("exit 2 without a `fragkit: ` line last".into());
        }
        if let Some(l) = stderr.lines().find(|l| l.starts_with([' ', '\t'])) {
            return Some(format!("an error over several lines: {l:?}"));
        }
    }
    None
}

/// Run `args` with the limits; None when it ran past `limit` and was killed.
fn run(args: &[String], dir: &Path, limit: Duration) -> Option<(std::process::ExitStatus, String)> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fragkit"));
    cmd.args(args)
        .current_dir(dir)
        .env("TMPDIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: only setrlimit and signal, async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = |r, v: u64| {
                let l = libc::rlimit {
                    rlim_cur: v,
                    rlim_max: v,
                };
                libc::setrlimit(r, &l)
            };
            lim(libc::RLIMIT_AS, 4 << 30);
            lim(libc::RLIMIT_FSIZE, 16 << 20);
            lim(libc::RLIMIT_CORE, 0);
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        })
    };
    let mut child = cmd.spawn().expect("run fragkit");
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::Read;
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return Some((st, reader.join().unwrap()));
        }
        if t0.elapsed() >= limit {
            // The whole group: watch's or age's helpers too.
            // SAFETY: signalling the child's own process group.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            let _ = reader.join();
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn commands_never_panic_on_values() {
    let (iters, secs) = budget("FRAGKIT_FUZZ_COMMAND_ITERS");
    let limit = Duration::from_secs(5);
    let mut report = Vec::new();
    for (i, t) in targets().into_iter().enumerate() {
        let mut rng = Rng(0xC0FF_EE00_D15E_A5E5 ^ (i as u64 + 1));
        let t0 = Instant::now();
        let (mut n, mut timed_out, mut faults) = (0u64, 0u64, Vec::new());
        // The first few runs that timed out, to look at by hand.
        let mut slow: Vec<String> = Vec::new();
        // Runs that ended with status 0, 1 and 2: how deep the values got.
        let mut statuses = [0u64; 3];
        loop {
            match iters {
                Some(max) if n >= max => break,
                None if t0.elapsed() >= Duration::from_secs_f64(secs) => break,
                _ => {}
            }
            let scratch = tempfile::tempdir().unwrap();
            let dir = scratch.path().join("d");
            std::fs::create_dir_all(dir.join("sub")).unwrap();
            std::fs::write(dir.join("sub/a"), vec![7u8; 12 << 10]).unwrap();
            let file = scratch.path().join("f");
            std::fs::write(&file, vec![1u8; 64 << 10]).unwrap();
            let out = scratch.path().join("out");
            let fill = |a: &str| {
                a.replace("{dir}", dir.to_str().unwrap())
                    .replace("{file}", file.to_str().unwrap())
                    .replace("{out}", out.to_str().unwrap())
            };
            let mut args: Vec<String> = t.args.iter().map(|a| fill(a)).collect();
            let mut mutated = Vec::new();
            if !t.options.is_empty() {
                for _ in 0..1 + rng.below(3) {
                    let (flag, seeds) = t.options[rng.below(t.options.len())];
                    let mut v = seeds[rng.below(seeds.len())].to_string();
                    for _ in 0..rng.below(3) {
                        v = mutate(&mut rng, &v);
                    }
                    args.push(flag.to_string());
                    if flag.ends_with("-config") {
                        // The TOML syntax when it looks like TOML (chosen by the extension).
                        let ext = if v.contains('=') { "toml" } else { "cnf" };
                        let cfg = scratch.path().join(format!("{}.{ext}", mutated.len()));
                        std::fs::write(&cfg, &v).unwrap();
                        args.push(cfg.to_str().unwrap().to_string());
                    } else {
                        // A NUL cannot be an argument; the parsers' fuzzing covers it.
                        args.push(v.replace('\0', ""));
                    }
                    mutated.push(flag);
                }
            }
            for flag in t.small.iter().filter(|f| !mutated.contains(f)) {
                let (_, seeds) = t.options.iter().find(|(f, _)| f == flag).unwrap();
                args.push(flag.to_string());
                args.push(seeds[0].to_string());
            }
            n += 1;
            match run(&args, scratch.path(), limit) {
                None => {
                    timed_out += 1;
                    if slow.len() < 3 {
                        slow.push(args[t.args.len()..].join(" "));
                    }
                }
                Some((st, err)) => {
                    if let Some(c @ 0..=2) = st.code() {
                        statuses[c as usize] += 1;
                    }
                    if let Some(f) = fault(st, &err) {
                        if faults.len() < 5 {
                            faults.push(format!("{f}: {args:?}: {}", err.trim_end()));
                        } else {
                            faults.push(String::new());
                        }
                    }
                }
            }
        }
        let line = format!(
            "{}: {n} runs in {:.1} s (status 0/1/2: {}/{}/{}), {} faults, {timed_out} timed out (> {} s) {slow:?} {:?}",
            t.name,
            t0.elapsed().as_secs_f64(),
            statuses[0],
            statuses[1],
            statuses[2],
            faults.len(),
            limit.as_secs(),
            faults.iter().filter(|f| !f.is_empty()).collect::<Vec<_>>()
        );
        println!("{line}");
        report.push((faults.is_empty(), line));
    }
    assert!(
        report.iter().all(|(ok, _)| *ok),
        "{}",
        report
            .iter()
            .map(|(_, l)| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}
