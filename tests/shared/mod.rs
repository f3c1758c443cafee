//! Shared helpers for integration tests on real loop-mounted file systems.
#![allow(dead_code)]

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fragkit::scratch::FsType;
use fragkit::scratch::{Scratch, ScratchSpec};

pub fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "integration tests need root (loop devices, mkfs, mount): run scripts/test as root"
    );
}

pub fn scratch(fs: FsType, size: u64, mkfs_args: &[&str]) -> Scratch {
    require_root();
    let mut spec = ScratchSpec::new(fs, size);
    spec.mkfs_args = mkfs_args.iter().map(|s| s.to_string()).collect();
    Scratch::create(&spec).unwrap_or_else(|e| panic!("scratch {}: {e:#}", fs.name()))
}

/// A heap buffer aligned for O_DIRECT.
pub struct AlignedBuf {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl AlignedBuf {
    pub fn new(len: usize, fill: u8) -> AlignedBuf {
        assert!(len > 0, "an O_DIRECT buffer holds at least one byte");
        let layout = std::alloc::Layout::from_size_align(len, 4096).unwrap();
        // SAFETY: the layout's size is non-zero (asserted above); zeroed, so the slices
        // built over it below cover initialised bytes.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        let mut b = AlignedBuf { ptr, layout };
        // Vary the bytes so no layer can deduplicate or compress them away.
        for (i, x) in b.as_mut().iter_mut().enumerate() {
            *x = fill ^ (i as u8).wrapping_mul(31) ^ (i >> 12) as u8;
        }
        b
    }
    pub fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid and initialised for layout.size() bytes, owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts(self.ptr, self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

pub fn open_direct_write(path: &Path) -> File {
    OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Append `chunk` bytes to each file in turn, `rounds` times, with O_DIRECT: the
/// allocator hands out space in write order, so the files interleave on disk.
pub fn interleaved_direct_appends(paths: &[PathBuf], chunk: usize, rounds: usize) {
    // On one CPU: ext4 serves files under mb_stream_req from per-CPU preallocations, so
    // appends made on two CPUs land in two regions and do not interleave (it left "a"
    // contiguous in one CI run of bench_read_model_columns_in_csv).
    let _pin = fragkit::sys::affinity::CpuPin::current();
    let files: Vec<File> = paths.iter().map(|p| open_direct_write(p)).collect();
    let buf = AlignedBuf::new(chunk, 0x5a);
    for r in 0..rounds {
        for f in &files {
            f.write_all_at(buf.as_slice(), (r * chunk) as u64).unwrap();
        }
    }
    for f in &files {
        f.sync_all().unwrap();
    }
}

pub fn write_file(path: &Path, len: usize, fill: u8) {
    let mut f = File::create(path).unwrap();
    let buf = AlignedBuf::new(len.max(1), fill);
    f.write_all(&buf.as_slice()[..len]).unwrap();
    f.sync_all().unwrap();
}

pub fn fallocate(f: &File, mode: libc::c_int, offset: u64, len: u64) {
    // SAFETY: plain fallocate(2) on an open fd.
    let rc = unsafe { libc::fallocate(f.as_raw_fd(), mode, offset as i64, len as i64) };
    assert_eq!(rc, 0, "fallocate: {}", std::io::Error::last_os_error());
}

pub fn drop_caches() {
    global_sync();
    std::fs::write("/proc/sys/vm/drop_caches", "3").expect("drop caches");
}

/// The scratch file system's loop device as /sys/block names it ("loop3").
pub fn loop_name(s: &Scratch) -> String {
    s.info
        .loop_device
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// Reads completed on a block device (first field of /sys/block/DEV/stat).
pub fn device_reads(dev: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/sys/block/{dev}/stat")).unwrap();
    s.split_whitespace().next().unwrap().parse().unwrap()
}

/// Device read requests (`/sys/block/<dev>/stat`) of an O_DIRECT sequential read of
/// `path` in `request`-byte requests: the fewest over up to 3 passes, the file held open
/// throughout. The data requests are the same in every pass; what can differ is metadata
/// (inode, extent map) that another test's drop_caches evicted meanwhile, which only ever
/// adds reads, so the fewest is the layout's own count.
pub fn direct_read_requests(dev: &str, path: &Path, request: usize) -> u64 {
    let _held = std::fs::File::open(path).unwrap();
    global_sync();
    let mut fewest = u64::MAX;
    for _ in 0..3 {
        let before = device_reads(dev);
        direct_sequential_read(path, request);
        fewest = fewest.min(device_reads(dev) - before);
    }
    fewest
}

/// Read a whole file sequentially with O_DIRECT in `request`-byte requests.
pub fn direct_sequential_read(path: &Path, request: usize) {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .unwrap();
    let mut buf = AlignedBuf::new(request, 0);
    let mut off = 0u64;
    loop {
        let n = f.read_at(buf.as_mut(), off).unwrap();
        if n == 0 {
            break;
        }
        off += n as u64;
    }
}

/// xxh3 of a file's whole contents.
pub fn file_hash(path: &Path) -> u64 {
    xxhash_rust::xxh3::xxh3_64(&std::fs::read(path).unwrap())
}

/// Run `cmd` to its end, its stdout and stderr captured, but SIGKILL it if it has not
/// ended after `limit` (a guard for a test whose command could hang, not a timing
/// figure: the killed run's status says so).
pub fn output_within(cmd: &mut Command, limit: std::time::Duration) -> Output {
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id() as i32;
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let guard = std::thread::spawn(move || {
        if done_rx.recv_timeout(limit).is_err() {
            // SAFETY: signalling our own child, which has not been reaped yet (the
            // waiting thread holds it until this guard returns).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let out = child.wait_with_output().expect("wait");
    let _ = done_tx.send(());
    guard.join().unwrap();
    out
}

pub fn fragkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args(args)
        .output()
        .expect("run fragkit")
}

pub fn fragkit_json(args: &[&str]) -> serde_json::Value {
    let out = fragkit(args);
    assert!(
        out.status.success(),
        "fragkit {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("fragkit printed invalid JSON")
}

/// Run fragkit with `--format json` among `args`, expect exit status `code`, return the
/// report.
pub fn fragkit_json_exit(args: &[&str], code: i32) -> serde_json::Value {
    let out = fragkit(args);
    assert_eq!(
        out.status.code(),
        Some(code),
        "fragkit {args:?}: exit status (stderr: {})",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("fragkit printed invalid JSON")
}

/// One extent line of `filefrag -v`, in blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilefragExtent {
    pub logical: u64,
    pub physical: u64,
    pub length: u64,
    pub flags: Vec<String>,
}

/// Parse `filefrag -v FILE` into its extent lines.
pub fn filefrag_extents(path: &Path) -> (u64, Vec<FilefragExtent>) {
    let out = Command::new("filefrag")
        .arg("-v")
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "filefrag -v {}", path.display());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut block_size = 0;
    let mut extents = Vec::new();
    for line in text.lines() {
        if line.starts_with("File size of ") {
            // "... (N block[s] of BS bytes)"
            let tail = line.rsplit(" of ").next().unwrap();
            block_size = tail.trim_end_matches(" bytes)").parse().unwrap();
            continue;
        }
        let t = line.trim_start();
        let Some((idx, rest)) = t.split_once(':') else {
            continue;
        };
        if idx.parse::<u64>().is_err() {
            continue;
        }
        // rest: " l0..  l1:  p0..  p1:  len:  [expected:] flags"
        let fields: Vec<&str> = rest.split(':').collect();
        let range = |s: &str| -> (u64, u64) {
            let (a, b) = s.trim().split_once("..").unwrap();
            (a.trim().parse().unwrap(), b.trim().parse().unwrap())
        };
        let (l0, _) = range(fields[0]);
        let (p0, _) = range(fields[1]);
        let len: u64 = fields[2].trim().parse().unwrap();
        let flags_field = if fields.len() > 4 {
            fields[4]
        } else {
            fields[3]
        };
        let flags = flags_field
            .trim()
            .split(',')
            .filter(|f| !f.is_empty() && *f != "eof")
            .map(|f| match f {
                "unknown_loc" => "unknown".to_string(),
                "tail_packed" => "tail".to_string(),
                other => other.to_string(),
            })
            .collect();
        extents.push(FilefragExtent {
            logical: l0,
            physical: p0,
            length: len,
            flags,
        });
    }
    (block_size, extents)
}

/// Make `path` a file of `size` bytes in fragments of `frag` bytes with `frag` bytes of
/// foreign data between them, on any allocator: fill nearly all free space with one big
/// preallocated filler, fill the rest with `frag`-sized files, delete every other one,
/// then write the file with O_DIRECT in `frag` chunks (it must take the holes), and
/// delete the fillers so contiguous free space exists again for whoever defragments it.
///
/// On ext4 the fill must reach every block: make the scratch with `-m 0` (no root
/// reserve); this sets the fs's reserved_clusters to 0 while filling.
pub fn fill_punch_fragment(s: &Scratch, path: &Path, size: u64, frag: u64) {
    let dir = s.mountpoint();
    let resv = format!("/sys/fs/ext4/{}/reserved_clusters", s.device_name());
    let saved = std::fs::read_to_string(&resv).ok();
    if saved.is_some() {
        std::fs::write(&resv, "0").unwrap();
    }
    let small_share = 2 * size + (4 << 20);
    // xfs frees deleted files' blocks in the background: wait for earlier fillers to go.
    let mut free = 0;
    for _ in 0..100 {
        global_sync();
        let st = nix::sys::statvfs::statvfs(dir).unwrap();
        free = st.blocks_free() as u64 * st.fragment_size() as u64;
        if free > small_share + (64 << 20) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        free > small_share + (8 << 20),
        "scratch fs too small to fragment {size} bytes"
    );
    let fillers = dir.join(".fillers");
    std::fs::create_dir(&fillers).unwrap();
    let big = File::create(fillers.join("big")).unwrap();
    fallocate(&big, 0, 0, free - small_share);
    let mut small = Vec::new();
    loop {
        let p = fillers.join(format!("s{}", small.len()));
        let Ok(f) = File::create(&p) else {
            break; // no room even for an inode
        };
        // SAFETY: fallocate(2) on an open fd.
        if unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, frag as i64) } != 0 {
            std::fs::remove_file(&p).unwrap();
            break;
        }
        small.push(p);
    }
    global_sync();
    for p in small.iter().step_by(2) {
        std::fs::remove_file(p).unwrap();
    }
    global_sync();
    let f = open_direct_write(path);
    let buf = AlignedBuf::new(frag as usize, (size / frag) as u8);
    let mut pos = 0;
    while pos < size {
        f.write_all_at(buf.as_slice(), pos).unwrap();
        f.sync_data().unwrap();
        pos += frag;
    }
    drop(f);
    std::fs::remove_dir_all(&fillers).unwrap();
    global_sync();
    if let Some(v) = saved {
        std::fs::write(&resv, v.trim()).unwrap();
    }
}
/// A sparse image attached to a loop device and never mounted; detached when dropped.
pub struct LoopImage {
    pub device: PathBuf,
    _dir: tempfile::TempDir,
}

impl LoopImage {
    pub fn new(size: u64) -> LoopImage {
        require_root();
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("raw.img");
        File::create(&image).unwrap().set_len(size).unwrap();
        let out = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&image)
            .output()
            .expect("losetup");
        assert!(
            out.status.success(),
            "losetup: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let device = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        LoopImage { device, _dir: dir }
    }
}

impl Drop for LoopImage {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.device).status();
    }
}

/// Run fragkit expecting failure; returns its stderr, checked to be exactly one line.
pub fn fragkit_error(args: &[&str]) -> String {
    let out = fragkit(args);
    assert_eq!(
        out.status.code(),
        Some(2),
        "fragkit {args:?} should fail with status 2; stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err:?}");
    err
}

/// `fragkit watch --listen 127.0.0.1:0 --db DB DIR` with `interval`: the child and the
/// address it serves on (its stderr is drained in the background).
/// The token a listening watch wrote next to its database (`DB.token`).
pub fn watch_token(db: &Path) -> String {
    let mut name = db.file_name().unwrap().to_os_string();
    name.push(".token");
    let text = std::fs::read_to_string(db.with_file_name(name)).expect("the watch's token file");
    text.trim().to_string()
}

pub fn watch_listening(dir: &Path, db: &Path, interval: &str) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut watch = Command::new(env!("CARGO_BIN_EXE_fragkit"))
        .args([
            "watch",
            "--interval",
            interval,
            "--listen",
            "127.0.0.1:0",
            "--db",
        ])
        .arg(db)
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(watch.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("watch exited").unwrap();
        if let Some(rest) = line.split("live page on http://").nth(1) {
            break rest.split('/').next().unwrap().to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (watch, addr)
}

/// FAST'24's hypothetical worst case as `age hypothetical --layout ideal` builds it: 8 MiB
/// appended in 32 KiB chunks, each S = 256 KiB after the previous (every chunk on one die
/// of the fast24 device).
pub fn hypothetical_worst_ideal(path: PathBuf) -> fragkit::age::hypothetical::HypotheticalSpec {
    use fragkit::age::hypothetical::*;
    HypotheticalSpec {
        path,
        mode: HypotheticalMode::Append,
        pattern: HypotheticalPattern::Worst,
        chunk: 32 << 10,
        stripe: 256 << 10,
        size: 8 << 20,
        direct: false,
        tune: true,
        keep_dummies: false,
        seed: 1,
        layout: HypotheticalLayout::Ideal,
        approach: false,
        read_back: false,
    }
}

/// A scratch fs for fragmenting: ext4 without the root reserve (-m 0), so filling it to a
/// share of its size means that share of the blocks.
pub fn frag_scratch(fs: FsType, size: u64) -> Scratch {
    scratch(
        fs,
        size,
        if fs == FsType::Ext4 {
            &["-m", "0"]
        } else {
            &[]
        },
    )
}

/// (fragments, S(128K)) of every file under `dir`, from `fragkit scan`.
pub fn file_counts(dir: &Path) -> std::collections::BTreeMap<std::path::PathBuf, (u64, u64)> {
    let doc = fragkit_json(&["scan", "--format", "json", &dir.to_string_lossy()]);
    doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                std::path::PathBuf::from(f["path"].as_str().unwrap()),
                (
                    f["fragments"].as_u64().unwrap(),
                    f["requests"][0]["split"].as_u64().unwrap(),
                ),
            )
        })
        .collect()
}

/// A scratch fs of `size` aged into small free holes (PAF fills it to 85% — btrfs 75%, it
/// needs room for metadata chunks — and deletes a seeded random half), then `files` FragPicker
/// round-robin files of `file_size` in fp/ (they take the few large free runs left).
pub fn paf_aged(fs: FsType, size: u64, files: &str, file_size: &str) -> Scratch {
    let s = frag_scratch(fs, size);
    let m = s.mountpoint().to_string_lossy().to_string();
    let spec = if fs == FsType::Btrfs {
        "PAF:75.50@64K"
    } else {
        "PAF:85.50@64K"
    };
    // One writer thread: the file set is seeded (PaF's default seed), and with one thread
    // the files are also created, and dirtied, in the same order every run; with one per
    // CPU the interleaving, and so the inode order and the layout, changed between runs.
    // Writeback's CPU (ext4's per-CPU group preallocation) can still vary: the tests that
    // need room are sized for it.
    let out = fragkit(&["age", "paf", "--threads", "1", "--target", &m, spec]);
    assert!(
        out.status.success(),
        "age paf: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fp = s.mountpoint().join("fp");
    std::fs::create_dir(&fp).unwrap();
    let out = fragkit(&[
        "age",
        "fragpicker-synthetic",
        "--files",
        files,
        "--size",
        file_size,
        &fp.to_string_lossy(),
    ]);
    assert!(
        out.status.success(),
        "age fragpicker-synthetic: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    s
}

/// `fragkit trace --block DEV --mount MNT -o TRACE -- sh -c SCRIPT`, which must succeed;
/// the recorded trace.
pub fn trace_block(dev: &Path, mnt: &Path, trace: &Path, script: &str) -> serde_json::Value {
    let o = fragkit(&[
        "trace",
        "--block",
        dev.to_str().unwrap(),
        "--mount",
        mnt.to_str().unwrap(),
        "-o",
        trace.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        script,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&std::fs::read_to_string(trace).unwrap()).unwrap()
}

/// FS_IOC_SHUTDOWN = _IOR('X', 125, __u32) (include/uapi/linux/fs.h).
const FS_IOC_SHUTDOWN: libc::c_ulong =
    nix::request_code_read!(b'X', 125, std::mem::size_of::<u32>()) as libc::c_ulong;
/// FS_GOING_DOWN_NOLOGFLUSH: shut down without flushing the log.
const FS_GOING_DOWN_NOLOGFLUSH: u32 = 2;

/// FS_IOC_SHUTDOWN without flushing the log, as a power failure leaves it; then unmount
/// and mount the same device again.
pub fn power_cut_and_remount(s: &Scratch, fs: FsType) {
    let dir = std::fs::File::open(s.mountpoint()).unwrap();
    let mut flags = FS_GOING_DOWN_NOLOGFLUSH;
    // SAFETY: FS_IOC_SHUTDOWN reads one u32.
    let rc = unsafe { libc::ioctl(dir.as_raw_fd(), FS_IOC_SHUTDOWN as _, &mut flags) };
    assert_eq!(
        rc,
        0,
        "FS_IOC_SHUTDOWN: {}",
        std::io::Error::last_os_error()
    );
    drop(dir);
    let mp = s.mountpoint().to_path_buf();
    assert!(Command::new("umount").arg(&mp).status().unwrap().success());
    let mut mount = Command::new("mount");
    if fs == FsType::Xfs {
        mount.args(["-o", "nouuid"]);
    }
    assert!(mount
        .arg(&s.info.loop_device)
        .arg(&mp)
        .status()
        .unwrap()
        .success());
}

/// Every file of a defrag report has, in `dir` now, the fragments the report gave it after.
pub fn assert_layouts_as_reported(report: &serde_json::Value, dir: &Path) {
    let now = file_counts(dir);
    for f in report["files"].as_array().unwrap() {
        let path = PathBuf::from(f["path"].as_str().unwrap());
        assert_eq!(
            now[&path].0,
            f["fragments_after"].as_u64().unwrap(),
            "{}: the layout defrag reported did not survive the power cut",
            path.display()
        );
    }
}

/// Tests that sync every file system hold this shared; a test whose premise is that the
/// kernel has not committed something yet holds it exclusively for that window (a sibling's
/// `sync(2)` would commit it).
pub static GLOBAL_SYNC: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// sync(2), but never inside another test's no-commit window.
pub fn global_sync() {
    let _shared = GLOBAL_SYNC.read().unwrap_or_else(|e| e.into_inner());
    nix::unistd::sync();
}
