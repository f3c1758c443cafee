//! FragPicker's synthetic workload (SOSP'21): files grown round-robin, each round 32 × 4 KiB
//! O_DIRECT appends interleaved across the files, then one 128 KiB append to each file.
//! Perfect interleaving gives every file 33 fragments per round: 32 of 4 KiB and one of
//! 128 KiB (what a 128 KiB request then has to split over).

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use super::{check_file, seeded_buf, write_all_at, FileCheck};

const SMALL: u64 = 4096;
const SMALL_PER_ROUND: u64 = 32;
const BIG: u64 = 128 * 1024;
/// Bytes each file grows by per round.
pub const ROUND_BYTES: u64 = SMALL * SMALL_PER_ROUND + BIG;

#[derive(Debug, Clone, Serialize)]
pub struct SyntheticReport {
    pub version: u32,
    pub dir: PathBuf,
    pub files: Vec<FileCheck>,
    pub rounds: u64,
    pub file_size: u64,
    /// Fragments per file if every append were interleaved exactly (33 per round).
    pub expected_fragments_per_file: u64,
    /// Total fragments over all files.
    pub fragments: u64,
    pub seed: u64,
    pub elapsed_seconds: f64,
}

/// Run the synthetic workload: `files` files named `synthetic.N` in `dir`, each `size`
/// bytes rounded down to whole rounds (256 KiB).
pub fn synthetic(dir: &Path, files: usize, size: u64, seed: u64) -> Result<SyntheticReport> {
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
    let checks = paths
        .iter()
        .map(|p| check_file(p))
        .collect::<Result<Vec<_>>>()?;
    Ok(SyntheticReport {
        version: 1,
        dir: dir.to_path_buf(),
        fragments: checks.iter().map(|c| c.fragments).sum(),
        files: checks,
        rounds,
        file_size: rounds * ROUND_BYTES,
        expected_fragments_per_file: rounds * (SMALL_PER_ROUND + 1),
        seed,
        elapsed_seconds: start.elapsed().as_secs_f64(),
    })
}
