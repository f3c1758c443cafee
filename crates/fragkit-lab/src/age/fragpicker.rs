//! FragPicker's synthetic workload (SOSP'21): files grown round-robin, each round 32 × 4 KiB
//! O_DIRECT appends interleaved across the files, then one 128 KiB append to each file.
//! Perfect interleaving gives every file 33 fragments per round: 32 of 4 KiB and one of
//! 128 KiB (what a 128 KiB request then has to split over).
//!
//! On ext4 the interleaving mostly does not show: each inode's preallocation (and the
//! stream allocator for big files) keeps a file's appends together, so the files end up
//! with a few dozen extents instead of 33 per round. FragPicker's ext4 benchmark therefore
//! runs a fragmentor after the appends; fragkit's equivalent (`fragment_apart`) relocates
//! alternate 4 KiB pieces with EXT4_IOC_MOVE_EXT so that every piece of a round becomes a
//! fragment of its own, as the interleaving would have made it.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use super::{check_file, seeded_buf, write_all_at, FileCheck};
use fragkit_sys::alloc::allocate;
use fragkit_sys::fsinfo::FsInfo;
use fragkit_sys::move_ext::move_ext;
use fragkit_sys::tmpfile::temp_file_in;

const SMALL: u64 = 4096;
const SMALL_PER_ROUND: u64 = 32;
const BIG: u64 = 128 * 1024;
/// Bytes each file grows by per round.
pub(crate) const ROUND_BYTES: u64 = SMALL * SMALL_PER_ROUND + BIG;

#[derive(Debug, Clone, Serialize)]
pub struct SyntheticReport {
    pub version: u32,
    #[serde(flatten, serialize_with = "fragkit_core::units::dir_fields")]
    pub dir: PathBuf,
    pub files: Vec<FileCheck>,
    pub rounds: u64,
    pub file_size: u64,
    /// Fragments per file if every append were interleaved exactly (33 per round).
    pub expected_fragments_per_file: u64,
    /// Total fragments over all files.
    pub fragments: u64,
    /// Mean fragments per file achieved, against `expected_fragments_per_file`.
    pub achieved_fragments_per_file: f64,
    /// The fragmentor step (ext4), or why it did not run.
    pub fragmentor: FragmentorReport,
    pub seed: u64,
    pub elapsed_seconds: f64,
}

/// Whether to run the fragmentor after the appends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fragmentor {
    /// On ext4 (where preallocation absorbs the interleaving), off elsewhere.
    Auto,
    On,
    Off,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct FragmentorReport {
    pub ran: bool,
    /// Why it did not run (off, or not ext4).
    pub skipped: Option<String>,
    /// Total fragments of the files after the appends, before the fragmentor.
    pub fragments_before: u64,
    /// 4 KiB pieces relocated.
    pub pieces_moved: u64,
    pub seconds: f64,
}

/// Run the synthetic workload: `files` files named `synthetic.N` in `dir`, each `size`
/// bytes rounded down to whole rounds (256 KiB), then the fragmentor if `fragmentor` asks.
pub fn synthetic(
    dir: &Path,
    files: usize,
    size: u64,
    seed: u64,
    fragmentor: Fragmentor,
) -> Result<SyntheticReport> {
    let start = Instant::now();
    if files == 0 {
        bail!("--files 0: expected at least one file");
    }
    let rounds = size / ROUND_BYTES;
    if rounds == 0 {
        bail!("--size {size}: expected at least {ROUND_BYTES} bytes (one round: 32 × 4 KiB + 128 KiB)");
    }
    if !dir.is_dir() {
        fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    }
    fragkit_core::limits::require_room(
        &format!("--files {files} of --size {size}"),
        dir,
        files as u128 * (rounds * ROUND_BYTES) as u128,
        files as u64,
    )?;
    let paths: Vec<PathBuf> = (0..files)
        .map(|i| dir.join(format!("synthetic.{i}")))
        .collect();
    let handles = paths
        .iter()
        .map(|p| {
            OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(true)
                .custom_flags(libc::O_DIRECT)
                .open(p)
                .with_context(|| format!("{}: cannot create with O_DIRECT", p.display()))
        })
        .collect::<Result<Vec<File>>>()?;
    let buf = seeded_buf(BIG as usize, seed);
    let pb = super::progress_bar(rounds, "age fragpicker-synthetic");
    let mut off = 0u64;
    for _ in 0..rounds {
        for _ in 0..SMALL_PER_ROUND {
            for (f, p) in handles.iter().zip(&paths) {
                write_all_at(f, &buf.as_slice()[..SMALL as usize], off)
                    .with_context(|| format!("{}: write", p.display()))?;
            }
            off += SMALL;
        }
        for (f, p) in handles.iter().zip(&paths) {
            write_all_at(f, &buf.as_slice()[..BIG as usize], off)
                .with_context(|| format!("{}: write", p.display()))?;
        }
        off += BIG;
        pb.inc(1);
    }
    pb.finish_and_clear();
    for f in &handles {
        f.sync_all()?;
    }
    drop(handles);
    let fs = FsInfo::of_fd(std::os::fd::AsFd::as_fd(&File::open(dir)?))
        .map(|i| i.type_name())
        .unwrap_or_default();
    let mut frag = FragmentorReport::default();
    match (fragmentor, fs.as_str()) {
        (Fragmentor::Off, _) => frag.skipped = Some("--fragmentor off".into()),
        (Fragmentor::Auto, f) if f != "ext4" => {
            frag.skipped = Some(format!(
                "{f}: not needed (no per-inode preallocation to undo)"
            ))
        }
        (Fragmentor::On, f) if f != "ext4" => {
            bail!(
                "--fragmentor on: needs ext4 (EXT4_IOC_MOVE_EXT), {} is {f}",
                dir.display()
            )
        }
        _ => {
            let t = Instant::now();
            for p in &paths {
                frag.fragments_before += check_file(p)?.fragments;
            }
            for p in &paths {
                frag.pieces_moved += fragment_apart(dir, p, rounds)?;
            }
            frag.ran = true;
            frag.seconds = t.elapsed().as_secs_f64();
        }
    }
    let checks = paths
        .iter()
        .map(|p| check_file(p))
        .collect::<Result<Vec<_>>>()?;
    let fragments: u64 = checks.iter().map(|c| c.fragments).sum();
    Ok(SyntheticReport {
        version: 1,
        dir: dir.to_path_buf(),
        fragments,
        achieved_fragments_per_file: fragments as f64 / checks.len() as f64,
        fragmentor: frag,
        files: checks,
        rounds,
        file_size: rounds * ROUND_BYTES,
        expected_fragments_per_file: rounds * (SMALL_PER_ROUND + 1),
        seed,
        elapsed_seconds: start.elapsed().as_secs_f64(),
    })
}

/// Rounds whose pieces share one donor: a donor of 2 × 17 × 16 blocks (~2 MiB) at a time, so
/// the step needs little free space and gives back the old blocks as it goes.
const ROUNDS_PER_DONOR: u64 = 16;

/// FragPicker's ext4 fragmentor, fragkit's way: in each round relocate pieces 0, 1, 3, 5,
/// …, 31 (4 KiB each) into every other block of a donor, in reverse order, with
/// EXT4_IOC_MOVE_EXT.
/// Every piece left in place then sits between relocated neighbours (their old blocks are
/// freed), and relocated pieces land a block apart in descending order, so no two pieces
/// touch physically: 33 fragments per round, as perfect interleaving gives, and as many
/// device requests. Returns the pieces moved.
fn fragment_apart(dir: &Path, path: &Path, rounds: u64) -> Result<u64> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .with_context(|| format!("{}: cannot open for the fragmentor", path.display()))?;
    let dirf = File::open(dir)?;
    let bs = SMALL; // ext4 with 4 KiB blocks: one piece is one block
    let per_round = ROUND_BYTES / bs;
    let mut moved = 0u64;
    let mut first = 0u64;
    while first < rounds {
        let last = (first + ROUNDS_PER_DONOR).min(rounds);
        let pieces: Vec<u64> = (first..last)
            .flat_map(|r| {
                let base = r * per_round;
                std::iter::once(base).chain((1..SMALL_PER_ROUND).step_by(2).map(move |i| base + i))
            })
            .collect();
        let n = pieces.len() as u64;
        let donor = temp_file_in(&dirf)
            .with_context(|| format!("{}: O_TMPFILE donor for the fragmentor", dir.display()))?;
        // Every other donor block: relocated pieces never touch each other physically, or
        // the block layer would merge (front-merge) the bios of one request over them and
        // the device would see fewer requests than the fragments say.
        allocate(&donor, 0, 2 * n * bs).with_context(|| {
            format!(
                "{}: fragmentor donor of {} blocks (free space)",
                dir.display(),
                n
            )
        })?;
        for (j, &block) in pieces.iter().enumerate() {
            let got =
                move_ext(&f, &donor, block, 2 * (n - 1 - j as u64), 1).with_context(|| {
                    format!("{}: EXT4_IOC_MOVE_EXT of block {block}", path.display())
                })?;
            if got != 1 {
                bail!(
                    "{}: EXT4_IOC_MOVE_EXT moved nothing at block {block}",
                    path.display()
                );
            }
            moved += 1;
        }
        // Closing the donor frees the pieces' old blocks it now holds.
        drop(donor);
        first = last;
    }
    f.sync_all()?;
    Ok(moved)
}
