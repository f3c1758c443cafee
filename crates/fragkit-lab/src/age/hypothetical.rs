//! The FAST'24 hypothetical workload ("We Ain't Afraid of No File Fragmentation"): a file
//! built chunk by chunk (append, or overwrite of an existing file), each chunk followed by
//! fdatasync and a new dummy file whose size decides where the next chunk lands relative
//! to the SSD's dies:
//! - worst: dummy of S − G, so every chunk starts a stripe S after the previous one (same die);
//! - random: dummy of a random multiple of G (1..=32, seeded);
//! - aligned: dummy of S (chunks die-aligned).
//!
//! `layout` chooses how faithfully: `Artifact` (default) runs the artifact's program
//! (yuhun-Jun/fast24_ae `evaluation/hypothetical/{append,overwrite}_maker.cpp`): the target
//! opened `O_APPEND` for append (overwrite: written whole in 1 MiB writes, fsync, then each
//! chunk rewritten in place), a buffered write of G, fdatasync, a new dummy file `D<n>.data`
//! beside the target written in one buffered write, fdatasync, close; the thread free to
//! move between CPUs as under the artifact's `numactl --cpubind=NODE`. On ext4 nodelalloc
//! that gives irregular gaps (chunks drawn from different CPUs' preallocation pools sit
//! next to each other). `Ideal` keeps fragkit's earlier builder: dummies in a
//! subdirectory and the writer pinned to one CPU, so every gap is exactly the dummy.
//!
//! `approach`: the artifact's user-level pseudo approach (`pseudo_append_NVMe.sh`, the
//! paper's Fig. 11 on real SSDs): the dummy is padded to the next multiple of S, so the
//! data between two chunks is a whole number of stripes plus the chunk itself and each
//! chunk starts on the die after the previous chunk's (worst: S − G becomes S, exactly the
//! artifact's `DUMMYAPPEND_SIZE=$STRIPE_SIZE`; random: k·G rounded up to S, fragkit's
//! extension of the same rule).
//!
//! File-system setup: the artifact formatted ext4 with an external journal, `-m 0`, mounted
//! it `nodelalloc`, set `reserved_clusters` to 0 and `mb_stream_req` to 4200000000 (so every
//! allocation comes from the shared locality-group preallocation, in write order). fragkit
//! sets `mb_stream_req` the same way for the run on ext4 (restored afterwards; `tune: false`
//! leaves it), fdatasyncs every chunk and dummy as the artifact did (which also forces
//! allocation under delalloc), pins the writing thread to one CPU (ext4's preallocation
//! pools are per CPU; the artifact used numactl), and reports the mount options it ran under. It does not
//! reformat or remount: use `fragkit scratch create --mount-options nodelalloc` for the
//! artifact's exact mount.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use rand::RngExt;
use serde::Serialize;

use super::{check_file, seeded_buf, seeded_rng, write_all_at, FileCheck};
use fragkit_sys::affinity::CpuPin;
use fragkit_sys::fsinfo::EXT4_MAGIC;
use fragkit_sys::mountinfo;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// How the hypothetical workload writes its chunks.
pub enum HypotheticalMode {
    Append,
    Overwrite,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// Where the dummy writes between chunks put the next chunk.
pub enum HypotheticalPattern {
    /// Dummy of S-G after each chunk: every chunk lands on the same die
    Worst,
    /// Dummy of a random multiple of G (1..32)
    Random,
    /// Dummy of S: chunks stay die-aligned
    Aligned,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
/// How faithfully the workload follows the artifact's program.
pub enum HypotheticalLayout {
    /// The artifact's program: O_APPEND target, dummies beside it, thread not pinned
    #[default]
    Artifact,
    /// Dummies in a subdirectory, writer pinned to one CPU: every gap is the dummy
    Ideal,
}

/// What to build.
#[derive(Debug, Clone)]
pub struct HypotheticalSpec {
    pub layout: HypotheticalLayout,
    /// The artifact's pseudo approach: dummies padded to a multiple of S.
    pub approach: bool,
    /// Read the target back afterwards (page cache dropped, O_DIRECT 1 MiB reads).
    pub read_back: bool,
    pub path: PathBuf,
    pub mode: HypotheticalMode,
    pub pattern: HypotheticalPattern,
    /// Chunk size G.
    pub chunk: u64,
    /// Stripe size S.
    pub stripe: u64,
    /// Target file size (a multiple of G).
    pub size: u64,
    /// O_DIRECT writes (the artifact wrote buffered).
    pub direct: bool,
    /// Set ext4's mb_stream_req as the artifact did (restored afterwards).
    pub tune: bool,
    pub keep_dummies: bool,
    pub seed: u64,
}

/// The setup the run used, so results can be compared with the artifact's.
#[derive(Debug, Clone, Serialize)]
pub struct FsSetup {
    pub fs: String,
    pub mount_options: String,
    /// ext4 mounted nodelalloc, as in the artifact.
    pub nodelalloc: bool,
    /// Tunables set for the run (name, value), restored afterwards.
    pub tunables: Vec<(String, String)>,
    pub direct: bool,
    pub fdatasync_each_write: bool,
    /// The writing thread was pinned to one CPU (ext4 preallocation pools are per CPU).
    pub pinned_to_one_cpu: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct HypotheticalReport {
    pub version: u32,
    pub layout: HypotheticalLayout,
    pub approach: bool,
    pub mode: &'static str,
    pub pattern: &'static str,
    pub chunk: u64,
    pub stripe: u64,
    pub size: u64,
    pub seed: u64,
    pub chunks: u64,
    /// Bytes of dummy files written (deleted afterwards unless kept).
    pub dummy_bytes: u64,
    pub dummies_kept: bool,
    pub setup: FsSetup,
    pub achieved: FileCheck,
    /// Fragment sizes of the target: (bytes, count).
    pub extent_sizes: Vec<(u64, u64)>,
    /// Gaps between consecutive fragments (next physical start − previous end, bytes;
    /// negative when the next fragment lies before): (bytes, count).
    pub gaps: Vec<(i64, u64)>,
    /// The read-back when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read: Option<super::ReadBack>,
    pub elapsed_seconds: f64,
}

fn mode_name(m: HypotheticalMode) -> &'static str {
    match m {
        HypotheticalMode::Append => "append",
        HypotheticalMode::Overwrite => "overwrite",
    }
}

fn pattern_name(p: HypotheticalPattern) -> &'static str {
    match p {
        HypotheticalPattern::Worst => "worst",
        HypotheticalPattern::Random => "random",
        HypotheticalPattern::Aligned => "aligned",
    }
}

/// Mount options of the file system at `path` (from /proc/self/mountinfo; the longest
/// mount point that is a prefix of the canonical path).
pub fn mount_options(path: &Path) -> String {
    let Ok(abs) = path.canonicalize() else {
        return String::new();
    };
    let Ok(mounts) = mountinfo::read() else {
        return String::new();
    };
    // Per-mount options, then the super block options after the " - " separator.
    mountinfo::containing(&mounts, &abs)
        .map(|m| format!("{},{}", m.options, m.super_options))
        .unwrap_or_default()
}

/// Run the workload in `spec` and verify the target with FIEMAP.
pub fn build(spec: &HypotheticalSpec) -> Result<HypotheticalReport> {
    let start = Instant::now();
    let g = spec.chunk;
    if g == 0 || spec.size == 0 || !spec.size.is_multiple_of(g) {
        bail!(
            "--size {}: expected a positive multiple of --chunk {}",
            spec.size,
            g
        );
    }
    if spec.stripe < g {
        bail!("--stripe {}: expected at least --chunk {}", spec.stripe, g);
    }
    if spec.direct && (!g.is_multiple_of(4096) || !spec.stripe.is_multiple_of(4096)) {
        bail!("--direct needs --chunk and --stripe to be multiples of 4096");
    }
    // The write buffer holds one stripe (or 32 chunks).
    fragkit_core::limits::require_memory(
        &format!("--stripe {} with --chunk {g}", spec.stripe),
        (32 * g as u128).max(spec.stripe as u128),
    )?;
    let dir = match spec.path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let probe = File::open(&dir).with_context(|| format!("{}: cannot open", dir.display()))?;
    let info = fragkit_sys::fsinfo::FsInfo::of_fd(std::os::fd::AsFd::as_fd(&probe))?;
    let opts = mount_options(&dir);
    let mut tunables = Vec::new();
    let _tuned = if spec.tune && info.magic == EXT4_MAGIC {
        let t = fragkit_sys::tunable::Ext4Tunable::set(&dir, "mb_stream_req", "4200000000")
            .context("setting ext4 mb_stream_req")?;
        if t.is_some() {
            tunables.push(("mb_stream_req".to_string(), "4200000000".to_string()));
        }
        t
    } else {
        None
    };
    let name = spec
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "target".into());
    let ideal = spec.layout == HypotheticalLayout::Ideal;
    let dummy_dir = if ideal {
        let d = dir.join(format!("{name}.dummies"));
        if d.exists() {
            fs::remove_dir_all(&d)?;
        }
        fs::create_dir(&d).with_context(|| format!("{}: cannot create", d.display()))?;
        d
    } else {
        dir.clone()
    };
    let flags = if spec.direct { libc::O_DIRECT } else { 0 };
    let open = |p: &Path, truncate: bool, append: bool| -> Result<File> {
        OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(truncate && !append)
            .append(append)
            .custom_flags(flags)
            .open(p)
            .with_context(|| format!("{}: cannot open for writing", p.display()))
    };
    let n = spec.size / g;
    let buf = seeded_buf((32 * g).max(spec.stripe).max(1 << 20) as usize, spec.seed);
    let append = spec.mode == HypotheticalMode::Append;
    // The artifact: open O_CREAT|O_TRUNC, close, reopen O_APPEND for the appends.
    let mut target = open(&spec.path, true, false)?;
    if append && !ideal {
        target = open(&spec.path, false, true)?;
    }
    if !append {
        // The file written whole before it is overwritten: on one CPU, so ext4's per-CPU
        // locality-group preallocation (mb_stream_req as the artifact set it) serves all
        // of it. A migration after the first page left that page 2 MiB from the rest in 1
        // of 7 recorded runs, every chunk then 4 KiB off the dies' boundaries (overwrite
        // worst with the approach 1995.6 instead of 2174.5 MiB/s).
        let _pin = CpuPin::current();
        let mut off = 0;
        while off < spec.size {
            let len = (spec.size - off).min(1 << 20);
            write_all_at(&target, &buf.as_slice()[..len as usize], off)?;
            off += len;
        }
        target.sync_all()?;
    }
    let mut rng = seeded_rng(spec.seed);
    let mut dummy_bytes = 0;
    let mut dummies = Vec::new();
    // ext4's locality-group preallocation is per CPU: a thread that migrates between the
    // chunk and the dummy writes draws them from different pools (the artifact ran under
    // `numactl --cpubind` for the same reason). Pinned to the CPU it runs on until dropped.
    let pin = if ideal { Some(CpuPin::current()) } else { None };
    let pb = super::progress_bar(n, "age hypothetical");
    for i in 0..n {
        let chunk = &buf.as_slice()[..g as usize];
        if append && !ideal {
            std::io::Write::write_all(&mut target, chunk)
        } else {
            write_all_at(&target, chunk, i * g)
        }
        .with_context(|| format!("{}: write", spec.path.display()))?;
        target.sync_data()?;
        let mut dummy = match spec.pattern {
            HypotheticalPattern::Worst => spec.stripe - g,
            HypotheticalPattern::Random => rng.random_range(1..=32u64) * g,
            HypotheticalPattern::Aligned => spec.stripe,
        };
        if spec.approach {
            dummy = dummy.div_ceil(spec.stripe).max(1) * spec.stripe;
        }
        if dummy > 0 {
            let p = if ideal {
                dummy_dir.join(format!("D{i}"))
            } else {
                dummy_dir.join(format!("D{i}.data"))
            };
            let mut d = open(&p, ideal, !ideal)?;
            std::io::Write::write_all(&mut d, &buf.as_slice()[..dummy as usize])
                .with_context(|| format!("{}: write", p.display()))?;
            d.sync_data()?;
            dummy_bytes += dummy;
            dummies.push(p);
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    let pinned = pin.as_ref().is_some_and(CpuPin::is_pinned);
    drop(pin);
    target.sync_all()?;
    drop(target);
    let achieved = check_file(&spec.path)?;
    if !spec.keep_dummies {
        if ideal {
            fs::remove_dir_all(&dummy_dir)?;
        } else {
            for p in &dummies {
                fs::remove_file(p).with_context(|| format!("{}: cannot remove", p.display()))?;
            }
        }
    }
    let read = if spec.read_back {
        Some(super::read_back(&spec.path)?)
    } else {
        None
    };
    Ok(HypotheticalReport {
        version: 1,
        layout: spec.layout,
        approach: spec.approach,
        extent_sizes: super::size_histogram(&achieved.runs),
        gaps: super::gap_histogram(&achieved.runs),
        read,
        mode: mode_name(spec.mode),
        pattern: pattern_name(spec.pattern),
        chunk: g,
        stripe: spec.stripe,
        size: spec.size,
        seed: spec.seed,
        chunks: n,
        dummy_bytes,
        dummies_kept: spec.keep_dummies,
        setup: FsSetup {
            fs: info.type_name(),
            nodelalloc: opts.split(',').any(|o| o == "nodelalloc"),
            mount_options: opts,
            tunables,
            direct: spec.direct,
            fdatasync_each_write: true,
            pinned_to_one_cpu: pinned,
        },
        achieved,
        elapsed_seconds: start.elapsed().as_secs_f64(),
    })
}
