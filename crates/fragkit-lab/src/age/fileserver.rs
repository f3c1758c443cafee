//! FAST'24's fileserver workload, written by fragkit (filebench is not in Debian): the
//! artifact's `evaluation/filebench/fileserver_append.f` then `fileserver_read.f`.
//!
//! - Fileset `bigfileset`: `files` files of `file_size` (artifact: 10000 × 128 KiB, mean
//!   directory width 20), preallocated by `threads` threads in parallel (`prealloc,paralloc`).
//! - Aging: `threads` threads (artifact: 10) each repeat open / append `append` bytes
//!   (artifact: 32 KiB, buffered, no fsync) / close on a file of the set. The artifact ran
//!   this for 30 s; fragkit runs a fixed number of appends instead (`appends`, default two
//!   per file), the targets drawn per thread from a seeded generator, so the final file
//!   sizes are the same every run (the interleaving of the threads is not).
//! - Read (`fileserver_read.f`): `threads` threads open a file O_DIRECT, read it whole in
//!   1 MiB requests, close. The artifact read random files for 60 s; fragkit reads every
//!   file once, the files dealt round-robin to the threads: total bytes over elapsed time.
//! - `contiguous`: the artifact rsync'd the aged set into a fresh file system; fragkit
//!   writes files of the same final sizes one after another from one thread, each in one
//!   write, then syncs.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use rand::RngExt;
use serde::Serialize;

use super::{seeded_buf, seeded_rng, ReadBack};
use fragkit_core::io::buf::AlignedBuf;

#[derive(Debug, Clone)]
pub struct FileserverSpec {
    /// Directory to create `bigfileset` in.
    pub dir: PathBuf,
    pub files: u64,
    pub file_size: u64,
    pub dir_width: u64,
    pub threads: usize,
    pub append: u64,
    pub appends: u64,
    pub contiguous: bool,
    pub read_back: bool,
    pub seed: u64,
}

impl FileserverSpec {
    /// The artifact's fileset and flowops in `dir` (appends: two per file).
    pub fn artifact(dir: PathBuf) -> FileserverSpec {
        FileserverSpec {
            dir,
            files: 10_000,
            file_size: 128 << 10,
            dir_width: 20,
            threads: 10,
            append: 32 << 10,
            appends: 20_000,
            contiguous: false,
            read_back: false,
            seed: super::DEFAULT_SEED,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct FileserverReport {
    pub version: u32,
    pub files: u64,
    pub file_size: u64,
    pub threads: usize,
    pub append: u64,
    pub appends: u64,
    pub contiguous: bool,
    pub seed: u64,
    /// Bytes in the set at the end.
    pub bytes: u64,
    /// Fragments over all files, and files in more than one fragment.
    pub fragments: u64,
    pub fragmented_files: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read: Option<ReadBack>,
    pub elapsed_seconds: f64,
}

/// File `i` of the set under `root`: directory i / width, name i (eight digits).
pub(super) fn file_path(root: &Path, i: u64, width: u64) -> PathBuf {
    root.join(format!("{:05}", i / width))
        .join(format!("{:08}", i))
}

/// An empty `bigfileset` in `dir` (a previous one removed) with the directories for
/// `files` files, `width` to a directory.
pub(super) fn fresh_fileset(dir: &Path, files: u64, width: u64) -> Result<PathBuf> {
    let root = dir.join("bigfileset");
    if root.exists() {
        fs::remove_dir_all(&root).with_context(|| format!("{}: cannot remove", root.display()))?;
    }
    for d in 0..files.div_ceil(width) {
        let p = root.join(format!("{d:05}"));
        fs::create_dir_all(&p).with_context(|| format!("{}: cannot create", p.display()))?;
    }
    Ok(root)
}

/// The final size of every file: `file_size` plus the appends the seeded per-thread
/// choices give it, and each thread's list of append targets.
fn plan(spec: &FileserverSpec) -> (Vec<u64>, Vec<Vec<u64>>) {
    let mut sizes = vec![spec.file_size; spec.files as usize];
    let mut per_thread = Vec::new();
    for t in 0..spec.threads {
        let mut rng = seeded_rng(spec.seed.wrapping_add(t as u64 + 1));
        let n = spec.appends / spec.threads as u64
            + u64::from((t as u64) < spec.appends % spec.threads as u64);
        let picks: Vec<u64> = (0..n).map(|_| rng.random_range(0..spec.files)).collect();
        for &f in &picks {
            sizes[f as usize] += spec.append;
        }
        per_thread.push(picks);
    }
    (sizes, per_thread)
}

pub fn run(spec: &FileserverSpec) -> Result<FileserverReport> {
    let start = Instant::now();
    if spec.files == 0 || spec.threads == 0 || spec.dir_width == 0 {
        bail!("--files, --threads and the directory width must be at least 1");
    }
    if !spec.dir.is_dir() {
        bail!(
            "{}: not a directory (expected the directory to create bigfileset in)",
            spec.dir.display()
        );
    }
    fragkit_core::limits::require_threads("--threads", spec.threads as u64)?;
    fragkit_core::limits::require_room(
        &format!("--files {} of {} bytes", spec.files, spec.file_size),
        &spec.dir,
        spec.files as u128 * spec.file_size as u128,
        spec.files,
    )?;
    let root = fresh_fileset(&spec.dir, spec.files, spec.dir_width)?;
    let (sizes, per_thread) = plan(spec);
    let biggest = sizes.iter().copied().max().unwrap_or(0);
    let buf = seeded_buf(
        biggest.max(spec.file_size).max(spec.append) as usize,
        spec.seed,
    );
    let data = buf.as_slice();
    let write_new = |i: u64, size: u64| -> Result<()> {
        let p = file_path(&root, i, spec.dir_width);
        let mut f = File::create(&p).with_context(|| format!("{}: cannot create", p.display()))?;
        f.write_all(&data[..size as usize])
            .with_context(|| format!("{}: write", p.display()))
    };
    let pb = super::progress_bar(spec.files + spec.appends, "age fileserver");
    if spec.contiguous {
        for (i, &size) in sizes.iter().enumerate() {
            write_new(i as u64, size)?;
            pb.inc(1);
        }
        pb.inc(spec.appends);
    } else {
        // prealloc,paralloc: the threads create the set together.
        std::thread::scope(|s| -> Result<()> {
            let hs: Vec<_> = (0..spec.threads as u64)
                .map(|t| {
                    let write_new = &write_new;
                    let pb = &pb;
                    s.spawn(move || -> Result<()> {
                        let mut i = t;
                        while i < spec.files {
                            write_new(i, spec.file_size)?;
                            pb.inc(1);
                            i += spec.threads as u64;
                        }
                        Ok(())
                    })
                })
                .collect();
            for h in hs {
                h.join().expect("prealloc thread")?;
            }
            Ok(())
        })?;
        std::thread::scope(|s| -> Result<()> {
            let hs: Vec<_> = per_thread
                .iter()
                .map(|picks| {
                    let root = &root;
                    let pb = &pb;
                    s.spawn(move || -> Result<()> {
                        for &f in picks {
                            let p = file_path(root, f, spec.dir_width);
                            let mut fh = OpenOptions::new()
                                .append(true)
                                .open(&p)
                                .with_context(|| format!("{}: cannot open", p.display()))?;
                            fh.write_all(&data[..spec.append as usize])
                                .with_context(|| format!("{}: append", p.display()))?;
                            pb.inc(1);
                        }
                        Ok(())
                    })
                })
                .collect();
            for h in hs {
                h.join().expect("append thread")?;
            }
            Ok(())
        })?;
    }
    pb.finish_and_clear();
    fragkit_sys::sync::sync();
    let mut fragments = 0;
    let mut fragmented_files = 0;
    for i in 0..spec.files {
        let c = super::check_file(&file_path(&root, i, spec.dir_width))?;
        fragments += c.fragments;
        fragmented_files += u64::from(c.fragments > 1);
    }
    let read = if spec.read_back {
        Some(read_all(&root, spec)?)
    } else {
        None
    };
    Ok(FileserverReport {
        version: 1,
        files: spec.files,
        file_size: spec.file_size,
        threads: spec.threads,
        append: spec.append,
        appends: spec.appends,
        contiguous: spec.contiguous,
        seed: spec.seed,
        bytes: sizes.iter().sum(),
        fragments,
        fragmented_files,
        read,
        elapsed_seconds: start.elapsed().as_secs_f64(),
    })
}

/// `fileserver_read.f`: the threads read whole files O_DIRECT in 1 MiB requests.
fn read_all(root: &Path, spec: &FileserverSpec) -> Result<ReadBack> {
    fragkit_core::io::job::drop_caches()?;
    let started = super::monotonic_ns();
    let t = Instant::now();
    let total = std::thread::scope(|s| -> Result<u64> {
        let hs: Vec<_> = (0..spec.threads as u64)
            .map(|th| {
                s.spawn(move || -> Result<u64> {
                    let mut buf = AlignedBuf::new(1 << 20);
                    let mut bytes = 0;
                    let mut i = th;
                    while i < spec.files {
                        let p = file_path(root, i, spec.dir_width);
                        bytes += super::read_whole_direct(&p, &mut buf, 1 << 20)?;
                        i += spec.threads as u64;
                    }
                    Ok(bytes)
                })
            })
            .collect();
        let mut sum = 0;
        for h in hs {
            sum += h.join().expect("read thread")?;
        }
        Ok(sum)
    })?;
    Ok(ReadBack::new(started, total, t.elapsed().as_secs_f64()))
}
