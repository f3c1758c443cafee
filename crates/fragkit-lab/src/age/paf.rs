//! Seagate's Populate-and-Fragment (PaF) aging.
//!
//! Spec grammar (docs/design.md): `PAF:AA.BB[,CC.DD...][:SEED]@SIZE[,SIZE...][<KBLOCKS]`.
//! Generation i writes AA% of the capacity as files of SIZE bytes (threads, like bringsel's
//! threaded creator), then deletes BB% of that generation's files chosen at random
//! (probabilistic fragmentation). One SIZE applies to every generation; otherwise one per
//! generation. KBLOCKS is the 1K-blocks capacity the structure was planned for: when
//! given, percentages are of that capacity.
//!
//! Determinism: the file set (names, sizes, which files are deleted) depends only on the
//! spec, the seed and the capacity; threads get files by index (file i goes to thread
//! i mod T), so timing never changes what is written.
//!
//! As MPI ranks ([`run_ranks`], `mpirun -np N fragkit age paf`): every rank computes the
//! same whole plan from the spec, the seed and rank 0's capacity; file i of a generation
//! is written and (if drawn) deleted by rank i mod N under `paf/rNNNN/`, so the same spec,
//! seed and N give the same files; barriers between populate and delete keep the
//! generations collective.

use std::fmt;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::{file_set_digest, progress_bar, require_scratch, seeded_buf, seeded_rng, FsUsage};
use crate::cluster::Cluster;
use fragkit_core::freespace::FreeSpaceSummary;
use fragkit_core::io::buf::AlignedBuf;
use fragkit_core::units::{parse_size, short_size};

/// One generation: fill AA% of capacity with files of `file_size`, then delete BB% of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Generation {
    pub fill_pct: u32,
    pub delete_pct: u32,
}

/// A parsed PaF spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PafSpec {
    pub generations: Vec<Generation>,
    pub seed: Option<u64>,
    /// File sizes as written in the spec: one for all generations, or one per generation.
    pub sizes: Vec<u64>,
    /// 1K-blocks the structure was planned for.
    pub kblocks: Option<u64>,
}

struct Cursor<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }
    /// One-line error naming the 1-based character position and what was expected.
    fn fail<T>(&self, at: usize, what: &str) -> Result<T> {
        // `at` is a byte offset on a character boundary; name the whole character (not its
        // first byte) and count characters, not bytes.
        let found = match self.text.get(at..).and_then(|t| t.chars().next()) {
            Some(c) => format!("'{}'", fragkit_core::units::printable(&c.to_string())),
            None => "the end".to_string(),
        };
        let character = self.text.get(..at).map_or(at, |t| t.chars().count()) + 1;
        bail!(
            "PaF spec '{}': at character {character} found {found}, expected {what} (form PAF:AA.BB[,CC.DD...][:SEED]@SIZE[,SIZE...][<KBLOCKS], e.g. PAF:70.30@264M)",
            fragkit_core::units::printable(self.text),
        )
    }
    fn expect(&mut self, c: u8, what: &str) -> Result<()> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            self.fail(self.pos, what)
        }
    }
    fn number(&mut self, what: &str) -> Result<(u64, usize)> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        if self.pos == start {
            return self.fail(start, what);
        }
        match self.text[start..self.pos].parse::<u64>() {
            Ok(v) => Ok((v, start)),
            Err(_) => self.fail(start, &format!("{what} (this one is too large)")),
        }
    }
    fn percent(&mut self, what: &str, min: u64) -> Result<u32> {
        let (v, at) = self.number(what)?;
        if v < min || v > 100 {
            return self.fail(at, &format!("{what} between {min} and 100, not {v}"));
        }
        Ok(v as u32)
    }
    fn size(&mut self) -> Result<u64> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        if self.pos == start {
            return self.fail(
                start,
                "a file size such as 264M (digits, then K, M, G or T)",
            );
        }
        if self
            .peek()
            .is_some_and(|c| matches!(c.to_ascii_uppercase(), b'K' | b'M' | b'G' | b'T'))
        {
            self.pos += 1;
        }
        if !matches!(self.peek(), None | Some(b',') | Some(b'<')) {
            return self.fail(
                self.pos,
                "a size suffix K, M, G or T, then ',', '<' or the end",
            );
        }
        let v = parse_size(&self.text[start..self.pos]).or_else(|e| self.fail(start, &e))?;
        if v == 0 {
            return self.fail(start, "a file size greater than zero");
        }
        Ok(v)
    }
}

impl PafSpec {
    /// Parse a spec; errors are one line naming the character position and what was
    /// expected there.
    pub fn parse(text: &str) -> Result<PafSpec> {
        let mut c = Cursor {
            text,
            bytes: text.as_bytes(),
            pos: 0,
        };
        if !text.is_ascii() {
            let at = text
                .char_indices()
                .find(|(_, ch)| !ch.is_ascii())
                .map_or(0, |(i, _)| i);
            return c.fail(at, "only ASCII characters");
        }
        for (i, want) in b"PAF:".iter().enumerate() {
            if c.peek().map(|b| b.to_ascii_uppercase()) != Some(*want) {
                return c.fail(i, "the prefix 'PAF:'");
            }
            c.pos += 1;
        }
        let mut generations = Vec::new();
        loop {
            let fill_pct = c.percent("a fill percentage AA", 1)?;
            c.expect(b'.', "'.' and the delete percentage (as in 70.30)")?;
            let delete_pct = c.percent("a delete percentage BB", 0)?;
            generations.push(Generation {
                fill_pct,
                delete_pct,
            });
            match c.peek() {
                Some(b',') => c.pos += 1,
                _ => break,
            }
        }
        let total: u32 = generations.iter().map(|g| g.fill_pct).sum();
        if total > 100 {
            bail!(
                "PaF spec '{text}': the generations fill {total}% of capacity in total, expected at most 100%"
            );
        }
        let seed = if c.peek() == Some(b':') {
            c.pos += 1;
            Some(c.number("a seed (digits)")?.0)
        } else {
            None
        };
        c.expect(
            b'@',
            "'@' and the file size (or ',' for another generation, ':' for a seed)",
        )?;
        let mut sizes = vec![c.size()?];
        while c.peek() == Some(b',') {
            c.pos += 1;
            sizes.push(c.size()?);
        }
        if sizes.len() != 1 && sizes.len() != generations.len() {
            bail!(
                "PaF spec '{text}': {} sizes for {} generations, expected one size or one per generation",
                sizes.len(),
                generations.len()
            );
        }
        let kblocks = if c.peek() == Some(b'<') {
            c.pos += 1;
            let (k, at) = c.number("the 1K-blocks count KBLOCKS")?;
            if k == 0 || k > u64::MAX / 1024 {
                return c.fail(at, "a 1K-blocks count KBLOCKS from 1 to 18014398509481983");
            }
            Some(k)
        } else {
            None
        };
        if c.pos != text.len() {
            return c.fail(c.pos, "the end of the spec (or '<' and KBLOCKS)");
        }
        Ok(PafSpec {
            generations,
            seed,
            sizes,
            kblocks,
        })
    }

    /// File size of generation `g`.
    pub fn size_of(&self, g: usize) -> u64 {
        if self.sizes.len() == 1 {
            self.sizes[0]
        } else {
            self.sizes[g]
        }
    }
}

impl fmt::Display for PafSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gens: Vec<String> = self
            .generations
            .iter()
            .map(|g| format!("{}.{}", g.fill_pct, g.delete_pct))
            .collect();
        write!(f, "PAF:{}", gens.join(","))?;
        if let Some(s) = self.seed {
            write!(f, ":{s}")?;
        }
        let sizes: Vec<String> = self.sizes.iter().map(|&s| short_size(s)).collect();
        write!(f, "@{}", sizes.join(","))?;
        if let Some(k) = self.kblocks {
            write!(f, "<{k}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for PafSpec {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<PafSpec> {
        PafSpec::parse(s)
    }
}

/// How to run a spec.
#[derive(Debug, Clone)]
pub struct PafOptions {
    /// Writer threads (at least 1).
    pub threads: usize,
    /// Seed when the spec has none.
    pub seed: Option<u64>,
    /// Age a non-scratch file system, or one already above the first generation's fill.
    pub force: bool,
    /// Plan only: compute the file set, write nothing.
    pub dry_run: bool,
    pub progress: bool,
}

impl Default for PafOptions {
    fn default() -> PafOptions {
        PafOptions {
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            seed: None,
            force: false,
            dry_run: false,
            progress: false,
        }
    }
}

/// What one generation did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GenerationReport {
    pub generation: usize,
    pub fill_pct: u32,
    pub delete_pct: u32,
    pub file_size: u64,
    pub files_written: u64,
    pub bytes_written: u64,
    pub files_deleted: u64,
    /// Used share of capacity (statfs) before, after populating and after deleting.
    pub used_pct_before: f64,
    pub used_pct_after_fill: f64,
    pub used_pct_after_delete: f64,
    pub populate_seconds: f64,
    pub populate_bytes_per_second: f64,
    /// Names of the deleted files, relative to the target.
    pub deleted: Vec<String>,
}

/// The structure a PaF run achieved (one rank's share of it when run as ranks).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PafReport {
    pub version: u32,
    pub spec: String,
    pub seed: u64,
    pub target: PathBuf,
    /// Capacity the percentages are of (KBLOCKS × 1024 if given, else statfs).
    pub capacity: u64,
    pub threads: usize,
    pub generations: Vec<GenerationReport>,
    /// This rank's directory under the target ("paf" alone; "paf/rNNNN" as ranks).
    pub dir: String,
    pub used_bytes: u64,
    pub used_pct: f64,
    pub files: u64,
    /// Fingerprint of the remaining (name, size) set: equal seeds give equal digests.
    pub file_set_digest: String,
    /// Smith–Seltzer layout score over the remaining files (1 = no fragmentation).
    pub layout_score: f64,
    pub fragments: u64,
    /// Rank 0's alone (not carried between ranks).
    #[serde(skip_deserializing)]
    pub free_space: Option<FreeSpaceSummary>,
    pub dry_run: bool,
}

/// The files one generation writes, in order, and which of them it deletes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerationPlan {
    pub names: Vec<String>,
    pub size: u64,
    /// Indices into `names`, ascending.
    pub delete: Vec<usize>,
}

/// Name of file `i` of generation `g` written by `rank` of `ranks`.
pub fn file_name(g: usize, i: usize, rank: usize, ranks: usize) -> String {
    if ranks <= 1 {
        format!("paf/g{g}/f{i:07}")
    } else {
        format!("paf/r{rank:04}/g{g}/f{i:07}")
    }
}

/// A file's name without its rank's directory (`paf/r0003/g0/f0000042` → `paf/g0/f0000042`):
/// the name the plan gives it, the same at any rank count. Each rank writes under its own
/// directory so that no two ranks create entries in one directory (on a parallel file
/// system one directory's creates serialise on its metadata server); the file-set digest
/// is taken over these names, so a seed gives one digest whatever the rank count.
pub fn planned_name(name: &str) -> std::borrow::Cow<'_, str> {
    match name.strip_prefix("paf/r") {
        Some(rest)
            if rest.len() > 5
                && rest.as_bytes()[..4].iter().all(u8::is_ascii_digit)
                && rest.as_bytes()[4] == b'/' =>
        {
            format!("paf/{}", &rest[5..]).into()
        }
        _ => name.into(),
    }
}

/// The file-set digest over planned names (see [`planned_name`]).
pub fn planned_digest(files: &[(String, u64)]) -> String {
    let named: Vec<(String, u64)> = files
        .iter()
        .map(|(n, s)| (planned_name(n).into_owned(), *s))
        .collect();
    file_set_digest(&named)
}

/// Directory holding one rank's files.
pub(crate) fn rank_dir(rank: usize, ranks: usize) -> String {
    if ranks <= 1 {
        "paf".to_string()
    } else {
        format!("paf/r{rank:04}")
    }
}

impl GenerationPlan {
    /// The files of generation `g` that `rank` of `ranks` writes (i mod ranks == rank),
    /// named under its own directory, with the deletions that fall on them.
    pub fn share(&self, g: usize, rank: usize, ranks: usize) -> GenerationPlan {
        let ranks = ranks.max(1);
        let names = (rank..self.names.len())
            .step_by(ranks)
            .map(|i| file_name(g, i, rank, ranks))
            .collect();
        let delete = self
            .delete
            .iter()
            .filter(|&&d| d % ranks == rank)
            .map(|&d| d / ranks)
            .collect();
        GenerationPlan {
            names,
            size: self.size,
            delete,
        }
    }

    /// Names and sizes of the files left after the deletions.
    pub fn remaining(&self) -> impl Iterator<Item = (&String, u64)> + '_ {
        let mut del = self.delete.iter().peekable();
        self.names.iter().enumerate().filter_map(move |(i, n)| {
            if del.peek() == Some(&&i) {
                del.next();
                None
            } else {
                Some((n, self.size))
            }
        })
    }
}

/// Plan every generation of `spec` for `capacity` bytes with `seed` (pure: no I/O).
pub fn plan(spec: &PafSpec, capacity: u64, seed: u64) -> Vec<GenerationPlan> {
    let mut rng = seeded_rng(seed);
    spec.generations
        .iter()
        .enumerate()
        .map(|(g, gen)| {
            let size = spec.size_of(g);
            let bytes = capacity as u128 * gen.fill_pct as u128 / 100;
            let count = (bytes / size as u128) as usize;
            let names = (0..count).map(|i| format!("paf/g{g}/f{i:07}")).collect();
            let to_delete = (count * gen.delete_pct as usize + 50) / 100;
            let mut delete = rand::seq::index::sample(&mut rng, count, to_delete).into_vec();
            delete.sort_unstable();
            GenerationPlan {
                names,
                size,
                delete,
            }
        })
        .collect()
}

/// Run `spec` against the file system mounted at `target`.
pub fn run(spec: &PafSpec, target: &Path, opts: &PafOptions) -> Result<PafReport> {
    run_ranks(spec, target, opts, &Cluster::solo())
}

/// The capacity the spec's percentages are of: KBLOCKS × 1024 if given, else statfs.
fn capacity_of(spec: &PafSpec, target: &Path, usage: &FsUsage) -> Result<u64> {
    match spec.kblocks {
        Some(k) => {
            let c = k.saturating_mul(1024);
            if c > usage.capacity {
                bail!(
                    "PaF spec '{spec}': planned for {k} 1K-blocks but {} holds only {}",
                    target.display(),
                    usage.capacity / 1024
                );
            }
            Ok(c)
        }
        None => Ok(usage.capacity),
    }
}

/// Refusals before anything is written (rank 0 alone speaks for a shared file system).
fn check_before(
    target: &Path,
    usage: &FsUsage,
    plans: &[GenerationPlan],
    first_fill: u32,
    force: bool,
) -> Result<()> {
    let first = first_fill as f64;
    if usage.used_pct() >= first && !force {
        bail!(
            "{} is already {:.1}% full, above the first generation's {}%; use an emptier file system or --force",
            target.display(),
            usage.used_pct(),
            first
        );
    }
    // Deletions between generations may make room; only refuse the impossible.
    let first_gen = plans[0].names.len() as u64 * plans[0].size;
    if usage.used + first_gen > usage.capacity {
        bail!(
            "{}: the first generation needs {} bytes but only {} are free",
            target.display(),
            first_gen,
            usage.free
        );
    }
    if target.join("paf").exists() {
        bail!(
            "{}: already holds a paf/ directory from an earlier run; remove it or use a fresh scratch file system",
            target.display()
        );
    }
    Ok(())
}

/// Run `spec` as one rank of `cluster`: this rank writes and deletes its share of every
/// generation; every rank returns its own report (see [`PafRanksReport`] for the whole).
pub fn run_ranks(
    spec: &PafSpec,
    target: &Path,
    opts: &PafOptions,
    cluster: &Cluster,
) -> Result<PafReport> {
    let (rank, ranks) = (cluster.rank(), cluster.size());
    let usage = cluster.agree(FsUsage::of(target).and_then(|u| {
        let c = capacity_of(spec, target, &u)?;
        Ok((u, c))
    }))?;
    // Rank 0's view of the capacity plans every rank (one plan for the whole job).
    let (usage, capacity) = (usage.0, cluster.broadcast_u64(usage.1));
    let seed = spec.seed.or(opts.seed).unwrap_or(super::DEFAULT_SEED);
    let plans = plan(spec, capacity, seed);
    if let Some((g, p)) = plans.iter().enumerate().find(|(_, p)| p.names.is_empty()) {
        bail!(
            "PaF spec '{spec}': generation {} fills {}% of {} bytes, less than one file of {} bytes; expected a file size at most {} bytes",
            g + 1,
            spec.generations[g].fill_pct,
            capacity,
            p.size,
            capacity as u128 * spec.generations[g].fill_pct as u128 / 100
        );
    }
    let mine: Vec<GenerationPlan> = plans
        .iter()
        .enumerate()
        .map(|(g, p)| p.share(g, rank, ranks))
        .collect();
    let threads = opts.threads.max(1);
    if !opts.dry_run {
        cluster.agree((|| {
            require_scratch(target, opts.force, "age paf")?;
            if cluster.is_root() {
                check_before(
                    target,
                    &usage,
                    &plans,
                    spec.generations[0].fill_pct,
                    opts.force,
                )?;
            }
            Ok(())
        })())?;
    }
    let mut gens = Vec::new();
    let buf = seeded_buf(1 << 20, seed);
    let pct = |used: u64| 100.0 * used as f64 / capacity as f64;
    for (g, (gen, p)) in spec.generations.iter().zip(&mine).enumerate() {
        let before = cluster.agree(FsUsage::of(target))?;
        let mut rep = GenerationReport {
            generation: g,
            fill_pct: gen.fill_pct,
            delete_pct: gen.delete_pct,
            file_size: p.size,
            files_written: p.names.len() as u64,
            bytes_written: p.names.len() as u64 * p.size,
            files_deleted: p.delete.len() as u64,
            used_pct_before: pct(before.used),
            used_pct_after_fill: 0.0,
            used_pct_after_delete: 0.0,
            populate_seconds: 0.0,
            populate_bytes_per_second: 0.0,
            deleted: p.delete.iter().map(|&i| p.names[i].clone()).collect(),
        };
        if !opts.dry_run {
            // Every rank starts populating together; each times its own share.
            cluster.barrier();
            let t0 = Instant::now();
            let populated = (|| {
                let dir = target.join(format!("{}/g{g}", rank_dir(rank, ranks)));
                fs::create_dir_all(&dir)
                    .with_context(|| format!("{}: cannot create", dir.display()))?;
                populate(target, p, threads, &buf, opts.progress, g)
            })();
            // This rank's own time: taken before the collective check, which waits for
            // the slowest rank.
            let secs = t0.elapsed().as_secs_f64();
            cluster.agree(populated)?;
            rep.populate_seconds = secs;
            rep.populate_bytes_per_second = rep.bytes_written as f64 / secs.max(1e-9);
            rep.used_pct_after_fill = pct(cluster.agree(FsUsage::of(target))?.used);
            cluster.agree((|| {
                for &i in &p.delete {
                    let path = target.join(&p.names[i]);
                    fs::remove_file(&path)
                        .with_context(|| format!("{}: cannot delete", path.display()))?;
                }
                syncfs(target)
            })())?;
            rep.used_pct_after_delete = pct(cluster.agree(FsUsage::of(target))?.used);
        }
        gens.push(rep);
    }
    // The structure achieved.
    let remaining: Vec<(String, u64)> = mine
        .iter()
        .flat_map(|p| p.remaining().map(|(n, s)| (n.clone(), s)))
        .collect();
    let dir = rank_dir(rank, ranks);
    let (after, layout_score, fragments) = cluster.agree((|| {
        let after = FsUsage::of(target)?;
        if opts.dry_run {
            return Ok((after, 1.0, 0));
        }
        let scan = fragkit_core::scan::scan_paths(&[target.join(&dir)], &[])
            .map_err(|e| anyhow::anyhow!(e))?;
        Ok((after, scan.summary.layout_score(), scan.summary.fragments))
    })())?;
    Ok(PafReport {
        version: 1,
        spec: spec.to_string(),
        seed,
        target: target.to_path_buf(),
        capacity,
        threads,
        generations: gens,
        dir,
        used_bytes: after.used,
        used_pct: pct(after.used),
        files: remaining.len() as u64,
        file_set_digest: planned_digest(&remaining),
        layout_score,
        fragments,
        free_space: if opts.dry_run || !cluster.is_root() {
            None
        } else {
            fragkit_core::freespace::summary(target).ok()
        },
        dry_run: opts.dry_run,
    })
}

/// One rank's part.
#[derive(Debug, Clone, Serialize)]
pub struct RankShare {
    pub rank: usize,
    pub dir: String,
    pub files: u64,
    pub bytes_written: u64,
    pub populate_seconds: f64,
    pub populate_bytes_per_second: f64,
    pub fragments: u64,
    pub layout_score: f64,
}

/// The whole structure a run as ranks achieved (rank 0 prints it).
#[derive(Debug, Clone, Serialize)]
pub struct PafRanksReport {
    pub version: u32,
    pub spec: String,
    pub seed: u64,
    #[serde(flatten, serialize_with = "fragkit_core::units::target_fields")]
    pub target: PathBuf,
    pub capacity: u64,
    pub ranks: usize,
    pub threads_per_rank: usize,
    /// What the spec asks to write: the generations' fills, percent of capacity.
    pub requested_fill_pct: f64,
    /// What the ranks wrote, percent of capacity (whole files: at most one file short
    /// per generation).
    pub written_pct: f64,
    /// What the spec leaves after its deletions, percent of capacity.
    pub requested_remaining_pct: f64,
    /// statfs: used before the first generation and after the last, percent of capacity.
    pub used_pct_before: f64,
    pub used_pct: f64,
    /// used_pct − used_pct_before: what the structure occupies on the file system.
    pub added_pct: f64,
    pub files: u64,
    pub bytes: u64,
    pub bytes_written: u64,
    pub files_deleted: u64,
    /// All generations' bytes over their summed populate times.
    pub populate_bytes_per_second: f64,
    /// Summed over the ranks; populate time from the common start (a barrier) to the
    /// last rank's end (its syncfs), bandwidth all ranks' bytes over it.
    pub generations: Vec<GenerationReport>,
    pub per_rank: Vec<RankShare>,
    /// Fingerprint of every rank's remaining (name, size) set.
    pub file_set_digest: String,
    pub fragments: u64,
    /// Layout scores of the ranks' directories, weighted by their remaining files.
    pub layout_score: f64,
    pub free_space: Option<FreeSpaceSummary>,
    pub dry_run: bool,
}

impl PafRanksReport {
    /// Sum rank reports (in rank order, as [`Cluster::gather`] gives them).
    pub fn from_ranks(spec: &PafSpec, reports: Vec<PafReport>) -> Result<PafRanksReport> {
        let Some(r0) = reports.first() else {
            bail!("no rank reported");
        };
        let ranks = reports.len();
        let capacity = r0.capacity;
        let pct = |b: u64| 100.0 * b as f64 / capacity as f64;
        let plans = plan(spec, capacity, r0.seed);
        let mut all_remaining = Vec::new();
        for rank in 0..ranks {
            for (g, p) in plans.iter().enumerate() {
                let s = p.share(g, rank, ranks);
                all_remaining.extend(s.remaining().map(|(n, sz)| (n.clone(), sz)));
            }
        }
        let generations: Vec<GenerationReport> = r0
            .generations
            .iter()
            .enumerate()
            .map(|(g, g0)| {
                let sum = |f: fn(&GenerationReport) -> u64| -> u64 {
                    reports.iter().map(|r| f(&r.generations[g])).sum()
                };
                let bytes = sum(|x| x.bytes_written);
                let secs = reports
                    .iter()
                    .map(|r| r.generations[g].populate_seconds)
                    .fold(0.0, f64::max);
                GenerationReport {
                    generation: g,
                    fill_pct: g0.fill_pct,
                    delete_pct: g0.delete_pct,
                    file_size: g0.file_size,
                    files_written: sum(|x| x.files_written),
                    bytes_written: bytes,
                    files_deleted: sum(|x| x.files_deleted),
                    used_pct_before: g0.used_pct_before,
                    used_pct_after_fill: g0.used_pct_after_fill,
                    used_pct_after_delete: g0.used_pct_after_delete,
                    populate_seconds: secs,
                    populate_bytes_per_second: bytes as f64 / secs.max(1e-9),
                    deleted: reports
                        .iter()
                        .flat_map(|r| r.generations[g].deleted.iter().cloned())
                        .collect(),
                }
            })
            .collect();
        let per_rank: Vec<RankShare> = reports
            .iter()
            .enumerate()
            .map(|(rank, r)| {
                let bytes: u64 = r.generations.iter().map(|g| g.bytes_written).sum();
                let secs: f64 = r.generations.iter().map(|g| g.populate_seconds).sum();
                RankShare {
                    rank,
                    dir: r.dir.clone(),
                    files: r.files,
                    bytes_written: bytes,
                    populate_seconds: secs,
                    populate_bytes_per_second: bytes as f64 / secs.max(1e-9),
                    fragments: r.fragments,
                    layout_score: r.layout_score,
                }
            })
            .collect();
        let bytes_written: u64 = generations.iter().map(|g| g.bytes_written).sum();
        let populate_secs: f64 = generations.iter().map(|g| g.populate_seconds).sum();
        let files: u64 = reports.iter().map(|r| r.files).sum();
        let bytes: u64 = all_remaining.iter().map(|(_, s)| s).sum();
        let requested_fill_pct: f64 = spec.generations.iter().map(|g| g.fill_pct as f64).sum();
        let requested_remaining_pct: f64 = spec
            .generations
            .iter()
            .map(|g| g.fill_pct as f64 * (100 - g.delete_pct) as f64 / 100.0)
            .sum();
        let used_pct_before = generations.first().map_or(0.0, |g| g.used_pct_before);
        Ok(PafRanksReport {
            version: 1,
            spec: r0.spec.clone(),
            seed: r0.seed,
            target: r0.target.clone(),
            capacity,
            ranks,
            threads_per_rank: r0.threads,
            requested_fill_pct,
            written_pct: pct(bytes_written),
            requested_remaining_pct,
            used_pct_before,
            used_pct: r0.used_pct,
            added_pct: r0.used_pct - used_pct_before,
            files,
            bytes,
            bytes_written,
            files_deleted: generations.iter().map(|g| g.files_deleted).sum(),
            populate_bytes_per_second: bytes_written as f64 / populate_secs.max(1e-9),
            generations,
            per_rank,
            file_set_digest: planned_digest(&all_remaining),
            fragments: reports.iter().map(|r| r.fragments).sum(),
            layout_score: if files == 0 {
                1.0
            } else {
                reports
                    .iter()
                    .map(|r| r.layout_score * r.files as f64)
                    .sum::<f64>()
                    / files as f64
            },
            free_space: r0.free_space.clone(),
            dry_run: r0.dry_run,
        })
    }
}

pub(crate) use fragkit_sys::sync::syncfs;

/// Write one generation's files: file i by thread i mod `threads`, buffered 1 MiB writes,
/// then one syncfs so the data is on the device when the clock stops.
fn populate(
    target: &Path,
    p: &GenerationPlan,
    threads: usize,
    buf: &AlignedBuf,
    progress: bool,
    g: usize,
) -> Result<()> {
    let pb = progress.then(|| progress_bar(p.names.len() as u64, &format!("paf generation {g}")));
    std::thread::scope(|s| -> Result<()> {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let pb = pb.clone();
                s.spawn(move || -> Result<()> {
                    for name in p.names.iter().skip(t).step_by(threads) {
                        let path = target.join(name);
                        let mut f = File::create(&path)
                            .with_context(|| format!("{}: cannot create", path.display()))?;
                        let mut left = p.size;
                        while left > 0 {
                            let n = left.min(buf.len() as u64) as usize;
                            f.write_all(&buf.as_slice()[..n])
                                .with_context(|| format!("{}: write", path.display()))?;
                            left -= n as u64;
                        }
                        if let Some(pb) = &pb {
                            pb.inc(1);
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            w.join()
                .map_err(|_| anyhow::anyhow!("a writer thread panicked"))??;
        }
        Ok(())
    })?;
    syncfs(target)?;
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn planned_names_drop_only_the_rank_directory() {
        assert_eq!(planned_name("paf/r0003/g0/f0000042"), "paf/g0/f0000042");
        assert_eq!(planned_name("paf/g1/f0000001"), "paf/g1/f0000001");
        assert_eq!(planned_name("paf/rx003/g0/f1"), "paf/rx003/g0/f1");
        assert_eq!(planned_name("paf/r0003"), "paf/r0003");
        // One plan shared among 1, 2 and 4 ranks: one digest.
        let spec = PafSpec::parse("PAF:40.30@4M").unwrap();
        let plans = plan(&spec, 256 << 20, 7);
        let digest = |ranks: usize| {
            let mut files = Vec::new();
            for r in 0..ranks {
                for (g, p) in plans.iter().enumerate() {
                    let s = p.share(g, r, ranks);
                    files.extend(s.remaining().map(|(n, sz)| (n.clone(), sz)));
                }
            }
            planned_digest(&files)
        };
        assert_eq!(digest(1), digest(2));
        assert_eq!(digest(1), digest(4));
    }

    fn err(s: &str) -> String {
        PafSpec::parse(s).unwrap_err().to_string()
    }

    #[test]
    fn parses_the_examples() {
        let s = PafSpec::parse("PAF:70.30,20.40:67005@264M,40M<24253639848").unwrap();
        assert_eq!(
            s.generations,
            vec![
                Generation {
                    fill_pct: 70,
                    delete_pct: 30
                },
                Generation {
                    fill_pct: 20,
                    delete_pct: 40
                }
            ]
        );
        assert_eq!(s.seed, Some(67005));
        assert_eq!(s.sizes, vec![264 << 20, 40 << 20]);
        assert_eq!(s.kblocks, Some(24253639848));
        assert_eq!(s.size_of(1), 40 << 20);
        let s = PafSpec::parse("PAF:50.30@8M").unwrap();
        assert_eq!(s.seed, None);
        assert_eq!(s.kblocks, None);
        assert_eq!(s.to_string(), "PAF:50.30@8M");
        let s = PafSpec::parse("PAF:70.30,20.40@1M").unwrap();
        assert_eq!(s.size_of(1), 1 << 20);
    }

    #[test]
    fn nonsense_is_refused() {
        let e = err("PAF:50.30@1M<0");
        assert!(
            e.contains("character 14") && e.contains("KBLOCKS from 1"),
            "{e}"
        );
        assert!(PafSpec::parse("PAF:50.30@1M<18014398509481984").is_err());
        // Non-ASCII: the whole character, counted as one.
        let e = err("PAF:5Ã.30@1M");
        assert!(e.contains("found 'Ã'") && e.contains("character 6"), "{e}");
        // A file larger than the generation's share writes nothing: refused, not "done".
        let dir = tempfile::tempdir().unwrap();
        let opts = PafOptions {
            dry_run: true,
            ..PafOptions::default()
        };
        let spec = PafSpec::parse("PAF:50.30@18446744073709551615").unwrap();
        let e = run(&spec, dir.path(), &opts).unwrap_err().to_string();
        assert!(e.contains("less than one file"), "{e}");
        let spec = PafSpec::parse("PAF:50.30@1M").unwrap();
        assert!(run(&spec, dir.path(), &opts).is_ok());
    }

    #[test]
    fn bad_specs_name_the_character_and_what_was_expected() {
        let e = err("PAF:70");
        assert!(
            e.contains("character 7") && e.contains("found the end") && e.contains("'.'"),
            "{e}"
        );
        let e = err("PAF:70.30@");
        assert!(e.contains("character 11") && e.contains("file size"), "{e}");
        let e = err("PAF:170.30@1M");
        assert!(
            e.contains("character 5") && e.contains("between 1 and 100, not 170"),
            "{e}"
        );
        let e = err("PAF:70.30@1X");
        assert!(
            e.contains("character 12") && e.contains("found 'X'") && e.contains("K, M, G or T"),
            "{e}"
        );
        for e in [
            err("PAF:70"),
            err("PAF:70.30@"),
            err("PAF:170.30@1M"),
            err("PAF:70.30@1X"),
        ] {
            assert!(!e.contains('\n'), "one line: {e}");
        }
        assert!(err("XAF:70.30@1M").contains("character 1"));
        assert!(err("PAF:70.130@1M").contains("character 8"));
        assert!(err("PAF:0.30@1M").contains("between 1 and 100"));
        assert!(err("PAF:70.30:@1M").contains("seed"));
        assert!(err("PAF:70.30@1M<").contains("KBLOCKS"));
        assert!(err("PAF:70.30@1M<5x").contains("character 15"));
        assert!(err("PAF:70.30@0").contains("greater than zero"));
        assert!(err("PAF:70.30,40.10@1M").contains("110%"));
        assert!(err("PAF:70.30,20.10@1M,2M,3M").contains("3 sizes for 2 generations"));
        assert!(err("PAF:70.30@1M,").contains("character 14"));
        assert!(err("PAF:70.30 @1M").contains("character 10"));
        assert!(err("").contains("character 1"));
    }

    #[test]
    fn lowercase_prefix_and_suffixes_are_accepted() {
        let s = PafSpec::parse("paf:10.5@64k").unwrap();
        assert_eq!(s.sizes, vec![64 << 10]);
    }

    #[test]
    fn plan_is_deterministic_and_deletes_the_share_asked() {
        let spec = PafSpec::parse("PAF:50.30,20.40@8M").unwrap();
        let a = plan(&spec, 1 << 30, 7);
        let b = plan(&spec, 1 << 30, 7);
        let c = plan(&spec, 1 << 30, 8);
        assert_eq!(a, b);
        assert_ne!(a[0].delete, c[0].delete);
        assert_eq!(a[0].names.len(), 64);
        assert_eq!(a[0].delete.len(), 19); // 30% of 64 = 19.2
        assert_eq!(a[1].names.len(), 25);
        assert_eq!(a[1].delete.len(), 10);
        assert!(a[0].delete.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn ranks_share_the_plan_exactly() {
        let spec = PafSpec::parse("PAF:50.30,20.40@8M").unwrap();
        let whole = plan(&spec, 1 << 30, 7);
        for ranks in [1, 3, 4] {
            for (g, p) in whole.iter().enumerate() {
                let shares: Vec<GenerationPlan> =
                    (0..ranks).map(|r| p.share(g, r, ranks)).collect();
                let files: usize = shares.iter().map(|s| s.names.len()).sum();
                let deleted: usize = shares.iter().map(|s| s.delete.len()).sum();
                let left: usize = shares.iter().map(|s| s.remaining().count()).sum();
                assert_eq!((files, deleted), (p.names.len(), p.delete.len()));
                assert_eq!(left, p.remaining().count());
                // File i is deleted in its rank's share exactly when the plan deletes it.
                for (i, _) in p.names.iter().enumerate() {
                    let s = &shares[i % ranks];
                    assert_eq!(
                        s.delete.contains(&(i / ranks)),
                        p.delete.contains(&i),
                        "ranks {ranks} file {i}"
                    );
                    assert!(s.names[i / ranks].ends_with(&format!("g{g}/f{i:07}")));
                }
            }
        }
        assert_eq!(whole[0].share(0, 0, 1), whole[0]);
        assert_eq!(file_name(1, 5, 2, 4), "paf/r0002/g1/f0000005");
    }

    proptest! {
        #[test]
        fn display_round_trips(
            gens in proptest::collection::vec((1u32..=25, 0u32..=100), 1..4),
            seed in proptest::option::of(0u64..1_000_000),
            size_units in proptest::collection::vec((1u64..5000, 0u32..4), 1..2),
            kblocks in proptest::option::of(1u64..u64::MAX / 2048),
        ) {
            let spec = PafSpec {
                generations: gens.iter().map(|&(f, d)| Generation { fill_pct: f, delete_pct: d }).collect(),
                seed,
                sizes: size_units.iter().map(|&(n, u)| n << (10 * u)).collect(),
                kblocks,
            };
            let text = spec.to_string();
            prop_assert_eq!(PafSpec::parse(&text).unwrap(), spec);
        }
    }
}
