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

use std::fmt;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use super::freespace::{free_space, FreeSpace};
use super::{file_set_digest, progress_bar, require_scratch, seeded_buf, seeded_rng, FsUsage};
use crate::io::buf::AlignedBuf;
use crate::units::{parse_size, short_size};

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
        let found = match self.bytes.get(at) {
            Some(&c) => format!("'{}'", c as char),
            None => "the end".to_string(),
        };
        bail!(
            "PaF spec '{}': at character {} found {found}, expected {what} (form PAF:AA.BB[,CC.DD...][:SEED]@SIZE[,SIZE...][<KBLOCKS], e.g. PAF:70.30@264M)",
            self.text,
            at + 1
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
            Some(c.number("the 1K-blocks count KBLOCKS")?.0)
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
#[derive(Debug, Clone, Serialize)]
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

/// The structure a PaF run achieved.
#[derive(Debug, Clone, Serialize)]
pub struct PafReport {
    pub version: u32,
    pub spec: String,
    pub seed: u64,
    pub target: PathBuf,
    /// Capacity the percentages are of (KBLOCKS × 1024 if given, else statfs).
    pub capacity: u64,
    pub threads: usize,
    pub generations: Vec<GenerationReport>,
    pub used_bytes: u64,
    pub used_pct: f64,
    pub files: u64,
    /// Fingerprint of the remaining (name, size) set: equal seeds give equal digests.
    pub file_set_digest: String,
    /// Smith–Seltzer layout score over the remaining files (1 = no fragmentation).
    pub layout_score: f64,
    pub fragments: u64,
    pub free_space: Option<FreeSpace>,
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
    let usage = FsUsage::of(target)?;
    let capacity = match spec.kblocks {
        Some(k) => {
            let c = k.saturating_mul(1024);
            if c > usage.capacity {
                bail!(
                    "PaF spec '{spec}': planned for {k} 1K-blocks but {} holds only {}",
                    target.display(),
                    usage.capacity / 1024
                );
            }
            c
        }
        None => usage.capacity,
    };
    let seed = spec.seed.or(opts.seed).unwrap_or(super::DEFAULT_SEED);
    let plans = plan(spec, capacity, seed);
    let threads = opts.threads.max(1);
    if !opts.dry_run {
        require_scratch(target, opts.force, "age paf")?;
        let first = spec.generations[0].fill_pct as f64;
        if usage.used_pct() >= first && !opts.force {
            bail!(
                "{} is already {:.1}% full, above the first generation's {}%; use an emptier file system or --force",
                target.display(),
                usage.used_pct(),
                first
            );
        }
        let planned: u64 = plans.iter().map(|p| p.names.len() as u64 * p.size).sum();
        if usage.used + planned > usage.capacity {
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
        }
        if target.join("paf").exists() {
            bail!(
                "{}: already holds a paf/ directory from an earlier run; remove it or use a fresh scratch file system",
                target.display()
            );
        }
    }
    let mut gens = Vec::new();
    let buf = seeded_buf(1 << 20, seed);
    for (g, (gen, p)) in spec.generations.iter().zip(&plans).enumerate() {
        let before = FsUsage::of(target)?;
        let mut rep = GenerationReport {
            generation: g,
            fill_pct: gen.fill_pct,
            delete_pct: gen.delete_pct,
            file_size: p.size,
            files_written: p.names.len() as u64,
            bytes_written: p.names.len() as u64 * p.size,
            files_deleted: p.delete.len() as u64,
            used_pct_before: 100.0 * before.used as f64 / capacity as f64,
            used_pct_after_fill: 0.0,
            used_pct_after_delete: 0.0,
            populate_seconds: 0.0,
            populate_bytes_per_second: 0.0,
            deleted: p.delete.iter().map(|&i| p.names[i].clone()).collect(),
        };
        if !opts.dry_run {
            let dir = target.join(format!("paf/g{g}"));
            fs::create_dir_all(&dir)
                .with_context(|| format!("{}: cannot create", dir.display()))?;
            let t0 = Instant::now();
            populate(target, p, threads, &buf, opts.progress, g)?;
            let secs = t0.elapsed().as_secs_f64();
            rep.populate_seconds = secs;
            rep.populate_bytes_per_second = rep.bytes_written as f64 / secs.max(1e-9);
            rep.used_pct_after_fill = 100.0 * FsUsage::of(target)?.used as f64 / capacity as f64;
            for &i in &p.delete {
                let path = target.join(&p.names[i]);
                fs::remove_file(&path)
                    .with_context(|| format!("{}: cannot delete", path.display()))?;
            }
            syncfs(target)?;
            rep.used_pct_after_delete = 100.0 * FsUsage::of(target)?.used as f64 / capacity as f64;
        }
        gens.push(rep);
    }
    // The structure achieved.
    let mut remaining = Vec::new();
    for p in &plans {
        let mut del = p.delete.iter().peekable();
        for (i, n) in p.names.iter().enumerate() {
            if del.peek() == Some(&&i) {
                del.next();
                continue;
            }
            remaining.push((n.clone(), p.size));
        }
    }
    let after = FsUsage::of(target)?;
    let (layout_score, fragments) = if opts.dry_run {
        (1.0, 0)
    } else {
        let scan =
            crate::scan::scan_paths(&[target.join("paf")], &[]).map_err(|e| anyhow::anyhow!(e))?;
        (scan.summary.layout_score(), scan.summary.fragments)
    };
    Ok(PafReport {
        version: 1,
        spec: spec.to_string(),
        seed,
        target: target.to_path_buf(),
        capacity,
        threads,
        generations: gens,
        used_bytes: after.used,
        used_pct: 100.0 * after.used as f64 / capacity as f64,
        files: remaining.len() as u64,
        file_set_digest: file_set_digest(&remaining),
        layout_score,
        fragments,
        free_space: if opts.dry_run {
            None
        } else {
            free_space(target).ok()
        },
        dry_run: opts.dry_run,
    })
}

pub(crate) fn syncfs(path: &Path) -> Result<()> {
    let f = File::open(path)?;
    nix::unistd::syncfs(std::os::fd::AsRawFd::as_raw_fd(&f))
        .with_context(|| format!("{}: syncfs", path.display()))?;
    Ok(())
}

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
