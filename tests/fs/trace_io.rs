//! `fragkit trace` against known access patterns on a real scratch ext4: the profile must
//! hold exactly the expected ranges and counts (buffered sequential reads: the readahead
//! model, checked against what the kernel really cached, within its documented tolerance).

use crate::common;

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, IoSliceMut, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;
use fragkit::scratch::FsType;
use serde_json::Value;

const G: u64 = 1 << 30;
const K: u64 = 1 << 10;

fn write_data(path: &Path, len: usize) {
    write_file(path, len, 7);
}

/// The ranges of `name` in a profile as (offset, length, reads, writes).
fn ranges_of(profile: &Value, dir: &Path, name: &str) -> Vec<(u64, u64, u64, u64)> {
    let want = dir.join(name);
    let files = profile["files"].as_array().unwrap();
    let f = files
        .iter()
        .find(|f| Path::new(f["path"].as_str().unwrap()) == want)
        .unwrap_or_else(|| panic!("{name} missing from profile: {profile:#}"));
    let ino = std::fs::metadata(&want).unwrap().ino();
    assert_eq!(f["ino"].as_u64().unwrap(), ino);
    assert_eq!(f["block_size"].as_u64().unwrap(), 4096);
    f["ranges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let n = |k: &str| r[k].as_u64().unwrap();
            (n("offset"), n("length"), n("reads"), n("writes"))
        })
        .collect()
}

/// Bytes of `path` from offset 0 that are resident in the page cache (mincore).
fn cached_prefix(path: &Path) -> u64 {
    let f = File::open(path).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    // SAFETY: read-only shared mapping of an open file, unmapped below.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    assert_ne!(addr, libc::MAP_FAILED);
    let pages = len.div_ceil(4096);
    let mut vec = vec![0u8; pages];
    // SAFETY: vec has one byte per page of the mapping.
    let rc = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
    assert_eq!(rc, 0);
    // SAFETY: `addr`/`len` are exactly the mapping made above, and nothing reads it after.
    unsafe { libc::munmap(addr, len) };
    vec.iter().take_while(|&&b| b & 1 == 1).count() as u64 * 4096
}

/// `fragkit trace FILTER --mount DIR -o PROFILE` running in the background.
struct Tracer {
    child: std::process::Child,
    err: BufReader<std::process::ChildStderr>,
    first: String,
}

impl Tracer {
    /// Starts the tracer and returns once it says it is tracing (everything attached).
    fn start(filter: &[&str], dir: &Path, profile: &Path) -> Tracer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fragkit"))
            .arg("trace")
            .args(filter)
            .arg("--mount")
            .arg(dir)
            .arg("-o")
            .arg(profile)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        err.read_line(&mut first).unwrap();
        assert!(first.contains("tracing"), "tracer did not start: {first}");
        Tracer { child, err, first }
    }

    /// SIGTERM ends the trace through the normal path: profile written, exit status 0.
    fn stop(mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let mut rest = String::new();
        self.err.read_to_string(&mut rest).unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "tracer failed: {}{rest}", self.first);
    }
}

/// The pattern the pid-filtered trace must see (16 calls, all on the scratch fs).
fn access_pattern(dir: &Path) {
    // Buffered preads above 4 GiB in a sparse file: one block three times, then an
    // unaligned read that FragPicker's 32-bit offsets and rounding would get wrong.
    let big = File::open(dir.join("big")).unwrap();
    let mut b = vec![0u8; 10_000];
    for _ in 0..3 {
        assert_eq!(big.read_at(&mut b[..4096], 5 * G + 4096).unwrap(), 4096);
    }
    assert_eq!(big.read_at(&mut b, 4 * G + 100).unwrap(), 10_000);

    // readv from f_pos that comes up short at EOF (24 KiB asked, 12 KiB there), then preadv.
    let mut vec = File::open(dir.join("vec")).unwrap();
    vec.seek(SeekFrom::Start(1 << 20)).unwrap();
    let (mut x, mut y, mut z) = ([0u8; 8192], [0u8; 8192], [0u8; 8192]);
    let mut iov = [
        IoSliceMut::new(&mut x),
        IoSliceMut::new(&mut y),
        IoSliceMut::new(&mut z),
    ];
    assert_eq!(vec.read_vectored(&mut iov).unwrap(), 12 * 1024);
    let iov2 = [
        libc::iovec {
            iov_base: x.as_mut_ptr().cast(),
            iov_len: 4096,
        },
        libc::iovec {
            iov_base: y.as_mut_ptr().cast(),
            iov_len: 4096,
        },
    ];
    // SAFETY: two valid iovecs over stack buffers.
    let n = unsafe { libc::preadv(vec.as_raw_fd(), iov2.as_ptr(), 2, 64 * 1024) };
    assert_eq!(n, 8192);

    // Buffered sequential reads from offset 0: the readahead model applies.
    let mut seq = File::open(dir.join("seq")).unwrap();
    let mut c = vec![0u8; 65536];
    for _ in 0..4 {
        seq.read_exact(&mut c).unwrap();
    }

    // O_DIRECT: one 128 KiB range twice, the next once (adjacent: kept apart), then read()
    // at f_pos 512 KiB.
    let mut direct = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(dir.join("direct"))
        .unwrap();
    let mut buf = AlignedBuf::new(128 * 1024, 0);
    direct.read_exact_at(buf.as_mut(), 0).unwrap();
    direct.read_exact_at(buf.as_mut(), 0).unwrap();
    direct.read_exact_at(buf.as_mut(), 128 * 1024).unwrap();
    direct.seek(SeekFrom::Start(512 * 1024)).unwrap();
    direct.read_exact(buf.as_mut()).unwrap();

    // Writes: an unaligned pwrite, and an O_APPEND write (f_pos before it is not where
    // the data goes).
    let w = OpenOptions::new().write(true).open(dir.join("w")).unwrap();
    w.write_all_at(&[1u8; 100], 5000).unwrap();
    let mut log = OpenOptions::new()
        .append(true)
        .open(dir.join("log"))
        .unwrap();
    log.write_all(&[2u8; 100]).unwrap();
}

#[test]
fn pid_trace_profiles_known_pattern_exactly() {
    let s = scratch(FsType::Ext4, 256 << 20, &[]);
    let dir = s.mountpoint().to_path_buf();
    let big = File::create(dir.join("big")).unwrap();
    big.write_all_at(&[9u8; 65536], 5 * G).unwrap();
    big.set_len(6 * G).unwrap();
    write_data(&dir.join("vec"), (1 << 20) + 12 * 1024);
    write_data(&dir.join("seq"), 8 << 20);
    write_data(&dir.join("direct"), 1 << 20);
    write_data(&dir.join("w"), 65536);
    write_data(&dir.join("log"), 65536);
    drop(big);
    drop_caches();

    let out = tempfile::tempdir().unwrap();
    let prof = out.path().join("profile.json");
    let tracer = Tracer::start(&["--pid", &std::process::id().to_string()], &dir, &prof);
    access_pattern(&dir);
    let cached = cached_prefix(&dir.join("seq"));
    tracer.stop();

    let p: Value = serde_json::from_slice(&std::fs::read(&prof).unwrap()).unwrap();
    assert_eq!(p["version"], 1);
    assert_eq!(p["kind"], "fragkit-trace-profile");
    assert_eq!(p["dropped"], 0);
    assert_eq!(p["events"], 16, "{p:#}");
    assert_eq!(p["files"].as_array().unwrap().len(), 6, "{p:#}");

    assert_eq!(
        ranges_of(&p, &dir, "big"),
        vec![(4 * G, 12 * K, 1, 0), (5 * G + 4 * K, 4 * K, 3, 0)]
    );
    assert_eq!(
        ranges_of(&p, &dir, "vec"),
        vec![(64 * K, 8 * K, 1, 0), (1 << 20, 12 * K, 1, 0)]
    );
    assert_eq!(
        ranges_of(&p, &dir, "direct"),
        vec![
            (0, 128 * K, 2, 0),
            (128 * K, 128 * K, 1, 0),
            (512 * K, 128 * K, 1, 0)
        ]
    );
    assert_eq!(ranges_of(&p, &dir, "w"), vec![(4 * K, 4 * K, 0, 1)]);
    assert_eq!(ranges_of(&p, &dir, "log"), vec![(64 * K, 4 * K, 0, 1)]);

    // Readahead model: the kernel's window ramp for 64 KiB reads with the device's real
    // read_ahead_kb, replayed by the library; the kernel's real cached prefix lies within the
    // documented tolerance (one read_ahead_kb) of the model's end.
    let dev = &s.device_name();
    let ra: u64 = std::fs::read_to_string(format!("/sys/block/{dev}/queue/read_ahead_kb"))
        .unwrap()
        .trim()
        .parse::<u64>()
        .unwrap()
        * K;
    let mut streams = fragkit::trace::ranges::Streams::default();
    let model_end = (0..4)
        .map(|k| streams.read(1, k * 64 * K, 64 * K, ra).unwrap())
        .max()
        .unwrap()
        .min(8 << 20);
    assert!(model_end >= 256 * K);
    eprintln!("readahead: ra {ra}, model end {model_end}, kernel cached prefix {cached}");
    assert_eq!(ranges_of(&p, &dir, "seq"), vec![(0, model_end, 4, 0)]);
    assert!(
        cached >= 256 * K && cached.abs_diff(model_end) <= ra,
        "kernel cached {cached} bytes, model says {model_end} (ra {ra})"
    );
}

#[test]
fn launched_command_is_traced_from_its_first_read() {
    let s = scratch(FsType::Ext4, 256 << 20, &[]);
    let dir = s.mountpoint().to_path_buf();
    let big = File::create(dir.join("big")).unwrap();
    big.set_len(6 * G).unwrap();
    drop(big);
    write_data(&dir.join("data"), 1 << 20);
    let out = tempfile::tempdir().unwrap();
    let prof = out.path().join("p.json");
    // dd: O_DIRECT read() at f_pos above 4 GiB (two adjacent blocks), then a child shell's
    // dd reading a whole file in 128 KiB O_DIRECT requests.
    let script = format!(
        "dd if={d}/big of=/dev/null bs=4096 skip=1310721 count=2 iflag=direct status=none && \
         sh -c 'dd if={d}/data of=/dev/null bs=128K iflag=direct status=none'",
        d = dir.display()
    );
    let o = fragkit(&[
        "trace",
        "--mount",
        dir.to_str().unwrap(),
        "-o",
        prof.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let p: Value = serde_json::from_slice(&std::fs::read(&prof).unwrap()).unwrap();
    assert_eq!(
        ranges_of(&p, &dir, "big"),
        vec![(5 * G + 4 * K, 4 * K, 1, 0), (5 * G + 8 * K, 4 * K, 1, 0)]
    );
    let want: Vec<_> = (0..8).map(|i| (i * 128 * K, 128 * K, 1, 0)).collect();
    assert_eq!(ranges_of(&p, &dir, "data"), want);
    assert_eq!(p["events"], 10);

    // --summary: the current fragmentation of each hot range, checked against the kernel's
    // own extent list (filefrag -v). Interleaved O_DIRECT appends split inter-a at least
    // where its first two 64 KiB chunks went to different places.
    interleaved_direct_appends(&[dir.join("inter-a"), dir.join("inter-b")], 64 << 10, 8);
    let sum = fragkit_json(&[
        "trace",
        "--mount",
        dir.to_str().unwrap(),
        "--summary",
        "-f",
        "json",
        "--",
        "dd",
        &format!("if={}/inter-a", dir.display()),
        "of=/dev/null",
        "bs=128K",
        "iflag=direct",
        "status=none",
    ]);
    assert_eq!(sum["kind"], "fragkit-trace-summary");
    // What the tracer cannot see is said with its numbers, in JSON and in the table.
    let not = sum["not_traced"].as_str().unwrap_or_default();
    for blind in ["mmap", "io_uring", "AIO"] {
        assert!(not.contains(blind), "{sum:#}");
    }
    let o = fragkit(&[
        "trace",
        "--mount",
        dir.to_str().unwrap(),
        "--summary",
        "--",
        "true",
    ]);
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.lines().any(|l| l.starts_with("not traced")
            && l.contains("mmap")
            && l.contains("io_uring")
            && l.contains("AIO")),
        "{table}"
    );
    let (bs, extents) = filefrag_extents(&dir.join("inter-a"));
    // Physically contiguous extents are one fragment.
    let mut frags: Vec<(u64, u64)> = Vec::new(); // (logical start, end) in bytes
    let mut prev_phys_end = None;
    for e in &extents {
        let (l, p, n) = (e.logical * bs, e.physical * bs, e.length * bs);
        match frags.last_mut() {
            Some(f) if prev_phys_end == Some(p) && f.1 == l => f.1 = l + n,
            _ => frags.push((l, l + n)),
        }
        prev_phys_end = Some(p + n);
    }
    let ranges = sum["ranges"].as_array().unwrap();
    assert_eq!(ranges.len(), 4, "{sum:#}");
    let mut extra_total = 0;
    for r in ranges {
        let off = r["offset"].as_u64().unwrap();
        assert_eq!(r["length"], 128 * K);
        assert_eq!(r["reads"], 1);
        let touching = frags
            .iter()
            .filter(|f| f.0 < off + 128 * K && f.1 > off)
            .count() as u64;
        assert_eq!(r["fragments"], touching, "{sum:#} vs {extents:?}");
        // Each range is one aligned 128 KiB window: one request per fragment in it.
        assert_eq!(r["extra_requests_per_access"], touching - 1);
        extra_total += touching - 1;
    }
    assert!(extra_total >= 1, "inter-a is not fragmented: {extents:?}");

    // The exit status of the command is fragkit's.
    let o = fragkit(&[
        "trace",
        "--mount",
        dir.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "exit 3",
    ]);
    assert_eq!(o.status.code(), Some(3));
}

#[test]
fn bad_filters_fail_with_one_line_naming_the_input() {
    require_root();
    for (args, want) in [
        (
            vec!["trace", "--comm", "a-name-longer-than-15", "-d", "1"],
            "--comm",
        ),
        (
            vec!["trace", "--cgroup", "/proc", "-d", "1"],
            "--cgroup /proc",
        ),
        (
            vec!["trace", "--mount", "/no/such/dir", "-d", "1"],
            "--mount /no/such/dir",
        ),
        (vec!["trace", "--hot-pct", "0"], "percentage"),
    ] {
        let o = fragkit(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(want) && err.lines().count() == 1,
            "{args:?}: {err}"
        );
    }
}

/// btrfs hands stat() a per-subvolume device number, not the superblock's s_dev the
/// tracer sees: `--mount` must still select the file system, and paths must resolve.
#[test]
fn btrfs_mount_filter_and_paths_resolve() {
    let s = scratch(FsType::Btrfs, 256 << 20, &[]);
    let dir = s.mountpoint().to_path_buf();
    write_data(&dir.join("data"), 1 << 20);
    let out = tempfile::tempdir().unwrap();
    let prof = out.path().join("p.json");
    let o = fragkit(&[
        "trace",
        "--mount",
        dir.to_str().unwrap(),
        "-o",
        prof.to_str().unwrap(),
        "--",
        "dd",
        &format!("if={}/data", dir.display()),
        "of=/dev/null",
        "bs=128K",
        "iflag=direct",
        "status=none",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let p: Value = serde_json::from_slice(&std::fs::read(&prof).unwrap()).unwrap();
    assert_eq!(p["unresolved_files"], 0, "{p:#}");
    let want: Vec<_> = (0..8).map(|i| (i * 128 * K, 128 * K, 1, 0)).collect();
    assert_eq!(ranges_of(&p, &dir, "data"), want);
}

/// `--comm` matches the whole process name, compared in the kernel as two masked 8-byte
/// words: a 15-byte name (the kernel's limit; longer names are cut to it) matches, and a
/// process whose name is a prefix of the wanted one does not.
#[test]
fn comm_filter_matches_the_whole_name_only() {
    let s = scratch(FsType::Ext4, 64 << 20, &[]);
    let dir = s.mountpoint().to_path_buf();
    write_data(&dir.join("match"), 64 * K as usize);
    write_data(&dir.join("prefix"), 64 * K as usize);
    let bin = tempfile::tempdir().unwrap();
    // comm is the executable's name cut to 15 bytes.
    let long = bin.path().join("fkdd-15-bytes-xyz-more");
    let short = bin.path().join("fkdd-15-bytes-");
    for p in [&long, &short] {
        std::fs::copy("/bin/dd", p).unwrap();
    }
    let out = tempfile::tempdir().unwrap();
    let prof = out.path().join("p.json");
    let tracer = Tracer::start(&["--comm", "fkdd-15-bytes-x"], &dir, &prof);
    for (exe, file) in [(&long, "match"), (&short, "prefix")] {
        let st = Command::new(exe)
            .arg(format!("if={}", dir.join(file).display()))
            .args(["of=/dev/null", "bs=4096", "status=none"])
            .status()
            .unwrap();
        assert!(st.success());
    }
    tracer.stop();
    let p: Value = serde_json::from_slice(&std::fs::read(&prof).unwrap()).unwrap();
    assert_eq!(p["events"], 16, "{p:#}");
    assert_eq!(p["files"].as_array().unwrap().len(), 1, "{p:#}");
    assert_eq!(ranges_of(&p, &dir, "match"), vec![(0, 64 * K, 16, 0)]);
}

/// A traced process leaves the pid set when it exits: an untraced process that is later
/// given the same pid is not traced. The pid is reused on purpose (ns_last_pid, the way
/// CRIU picks pids), and every step waits on the previous one through a fifo or wait(2),
/// never on time.
#[test]
fn exited_pid_is_not_traced_when_reused() {
    use std::os::unix::process::CommandExt;
    let s = scratch(FsType::Ext4, 256 << 20, &[]);
    let dir = s.mountpoint().to_path_buf();
    let tmp = tempfile::tempdir().unwrap();
    let (pidfile, go) = (tmp.path().join("pid"), tmp.path().join("go"));
    nix::unistd::mkfifo(&go, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let prof = tmp.path().join("p.json");
    // The traced shell's child dd writes `a` and exits (and is reaped); the shell then
    // publishes the child's pid and blocks on the fifo until the test is done.
    let script = format!(
        "dd if=/dev/zero of={d}/a bs=4096 count=1 status=none & p=$!; wait $p; \
         echo $p > {pid}; read x < {go}",
        d = dir.display(),
        pid = pidfile.display(),
        go = go.display()
    );
    let mut tracer = Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args(["trace", "--mount", dir.to_str().unwrap(), "-o"])
        .arg(&prof)
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Opening the fifo for writing succeeds once the shell opens it to read, which is after
    // it wrote the pid file.
    let mut fifo = loop {
        match OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&go)
        {
            Ok(f) => break f,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                if let Some(st) = tracer.try_wait().unwrap() {
                    let mut err = String::new();
                    tracer
                        .stderr
                        .take()
                        .unwrap()
                        .read_to_string(&mut err)
                        .unwrap();
                    panic!("tracer ended early ({st}): {err}");
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("{}: {e}", go.display()),
        }
    };
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Start an untraced dd (a child of this test, not of anything traced) with that pid.
    // Other processes may take the pid first: then the child refuses to exec and we retry.
    let mut reused = false;
    for _ in 0..1000 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).unwrap();
        let mut dd = Command::new("dd");
        dd.args([
            "if=/dev/zero",
            &format!("of={}/b", dir.display()),
            "bs=4096",
            "count=1",
            "status=none",
        ]);
        // SAFETY: the hook only calls getpid(2).
        unsafe {
            dd.pre_exec(move || {
                if libc::getpid() == pid {
                    Ok(())
                } else {
                    Err(std::io::Error::from_raw_os_error(libc::EAGAIN))
                }
            });
        }
        match dd.status() {
            Ok(st) => {
                assert!(st.success(), "dd with the reused pid {pid}: {st}");
                reused = true;
                break;
            }
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => continue,
            Err(e) => panic!("dd: {e}"),
        }
    }
    assert!(reused, "pid {pid} was never free to reuse in 1000 tries");
    fifo.write_all(b"\n").unwrap();
    drop(fifo);
    let out = tracer.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p: Value = serde_json::from_slice(&std::fs::read(&prof).unwrap()).unwrap();
    // The traced child's write is there; the later process with its pid is not.
    assert_eq!(ranges_of(&p, &dir, "a"), vec![(0, 4 * K, 0, 1)]);
    let b = dir.join("b");
    assert!(
        !p["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| Path::new(f["path"].as_str().unwrap()) == b),
        "the untraced process with reused pid {pid} was traced: {p:#}"
    );
    assert_eq!(p["events"], 1, "{p:#}");
}
