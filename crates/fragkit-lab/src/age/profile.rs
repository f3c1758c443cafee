//! Geriatrix-style profile aging with a time series: create files from a size distribution
//! until the file system is U% full, then delete random files and create new ones (keeping
//! fullness at U) until `churn` × capacity bytes have been written. The layout score and
//! the free-space histogram are recorded after the fill and at every step of the churn —
//! the record no aging tool keeps.
//!
//! Determinism: every size, name and deletion comes from one seeded generator, and fullness
//! is tracked from the sizes written (not from statfs), so the same seed gives the same
//! sequence of operations on any file system.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use rand::rngs::ChaCha8Rng;
use rand::RngExt;
use serde::{Deserialize, Serialize};

use super::paf::syncfs;
use super::{file_set_digest, require_scratch, seeded_buf, seeded_rng, FsUsage};
use fragkit_core::freespace::FreeSpaceSummary;
use fragkit_core::io::buf::AlignedBuf;

/// A file-size distribution, as shipped in data/profiles/*.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeProfile {
    pub version: u32,
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(flatten)]
    pub dist: SizeDist,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SizeDist {
    /// exp(ln(median) + sigma·Z), Z standard normal, clipped to [min, max].
    Lognormal {
        median: u64,
        sigma: f64,
        min: u64,
        max: u64,
    },
    /// Discrete sizes with relative weights.
    Buckets { buckets: Vec<SizeBucket> },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeBucket {
    pub size: u64,
    pub weight: f64,
}

const SHIPPED: [(&str, &str); 2] = [
    ("office", include_str!("../../data/profiles/office.json")),
    (
        "database",
        include_str!("../../data/profiles/database.json"),
    ),
];

impl SizeProfile {
    /// A shipped profile by name ("office", "database") or a JSON file in the same format.
    pub fn load(name_or_path: &str) -> Result<SizeProfile> {
        let (text, origin) = match SHIPPED.iter().find(|(n, _)| *n == name_or_path) {
            Some((_, t)) => (t.to_string(), format!("shipped profile '{name_or_path}'")),
            None => {
                let p = Path::new(name_or_path);
                let t = fs::read_to_string(p).map_err(|e| {
                    anyhow!(
                        "--sizes {name_or_path}: not a shipped profile (office, database) and not a readable file: {e}"
                    )
                })?;
                (t, p.display().to_string())
            }
        };
        let p: SizeProfile = serde_json::from_str(&text).map_err(|e| {
            anyhow!("{origin}: expected a size profile (JSON with \"kind\": \"lognormal\" or \"buckets\"): {e}")
        })?;
        p.validate().map_err(|e| anyhow!("{origin}: {e}"))?;
        Ok(p)
    }

    fn validate(&self) -> Result<()> {
        match &self.dist {
            SizeDist::Lognormal {
                median,
                sigma,
                min,
                max,
            } => {
                if *median == 0 || *min == 0 || min > max || !sigma.is_finite() || *sigma < 0.0 {
                    bail!("lognormal needs median > 0, sigma >= 0 and 0 < min <= max");
                }
            }
            SizeDist::Buckets { buckets } => {
                if buckets.is_empty()
                    || buckets
                        .iter()
                        .any(|b| b.size == 0 || !b.weight.is_finite() || b.weight < 0.0)
                    || buckets.iter().map(|b| b.weight).sum::<f64>() <= 0.0
                {
                    bail!("buckets need sizes > 0 and non-negative weights with a positive sum");
                }
            }
        }
        Ok(())
    }

    /// Draw one file size.
    pub fn sample(&self, rng: &mut ChaCha8Rng) -> u64 {
        match &self.dist {
            SizeDist::Lognormal {
                median,
                sigma,
                min,
                max,
            } => {
                // Box–Muller: two uniforms in (0, 1] give one standard normal.
                let u1: f64 = 1.0 - rng.random::<f64>();
                let u2: f64 = rng.random::<f64>();
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                let v = ((*median as f64).ln() + sigma * z).exp();
                (v as u64).clamp(*min, *max)
            }
            SizeDist::Buckets { buckets } => {
                let total: f64 = buckets.iter().map(|b| b.weight).sum();
                let mut x = rng.random::<f64>() * total;
                for b in buckets {
                    if x < b.weight {
                        return b.size;
                    }
                    x -= b.weight;
                }
                buckets.last().map_or(4096, |b| b.size)
            }
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct ProfileSpec {
    pub target: PathBuf,
    /// Fullness to reach and keep, percent of capacity.
    pub fullness_pct: f64,
    pub sizes: SizeProfile,
    /// Bytes to write during churn, as a multiple of capacity.
    pub churn: f64,
    /// Points recorded during churn (plus one after the fill).
    pub steps: u32,
    pub seed: u64,
    pub force: bool,
    pub progress: bool,
}

/// One point of the time series.
#[derive(Debug, Clone, Serialize)]
pub struct ProfilePoint {
    pub step: u32,
    /// Bytes written since the fill ended.
    pub churn_bytes: u64,
    pub files: u64,
    pub used_pct: f64,
    pub layout_score: f64,
    pub fragments: u64,
    pub fragmented_files: u64,
    pub free_space: Option<FreeSpaceSummary>,
    pub elapsed_seconds: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProfileReport {
    pub version: u32,
    #[serde(flatten, serialize_with = "fragkit_core::units::target_fields")]
    pub target: PathBuf,
    pub profile: SizeProfile,
    pub fullness_pct: f64,
    pub churn: f64,
    pub seed: u64,
    pub capacity: u64,
    pub files_created: u64,
    pub files_deleted: u64,
    pub bytes_written: u64,
    /// Fingerprint of the final (name, size) set: equal seeds give equal digests.
    pub file_set_digest: String,
    pub series: Vec<ProfilePoint>,
}

struct Aging<'a> {
    root: PathBuf,
    buf: &'a AlignedBuf,
    live: Vec<(u64, u64)>,
    next_id: u64,
    used: u64,
    block: u64,
    created: u64,
    deleted: u64,
    written: u64,
}

impl Aging<'_> {
    fn name(id: u64) -> String {
        format!("d{:02}/f{id:08}", id % 64)
    }
    fn on_disk(&self, size: u64) -> u64 {
        size.div_ceil(self.block) * self.block
    }
    fn create(&mut self, size: u64) -> Result<()> {
        let id = self.next_id;
        self.next_id += 1;
        let path = self.root.join(Self::name(id));
        let mut f =
            File::create(&path).with_context(|| format!("{}: cannot create", path.display()))?;
        let mut left = size;
        while left > 0 {
            let n = left.min(self.buf.len() as u64) as usize;
            f.write_all(&self.buf.as_slice()[..n])
                .with_context(|| format!("{}: write", path.display()))?;
            left -= n as u64;
        }
        self.live.push((id, size));
        self.used += self.on_disk(size);
        self.created += 1;
        self.written += size;
        Ok(())
    }
    fn delete_random(&mut self, rng: &mut ChaCha8Rng) -> Result<()> {
        let i = rng.random_range(0..self.live.len());
        let (id, size) = self.live.swap_remove(i);
        let path = self.root.join(Self::name(id));
        fs::remove_file(&path).with_context(|| format!("{}: cannot delete", path.display()))?;
        self.used -= self.on_disk(size);
        self.deleted += 1;
        Ok(())
    }
}

fn record(
    target: &Path,
    root: &Path,
    step: u32,
    churn_bytes: u64,
    files: u64,
    capacity: u64,
    start: Instant,
) -> Result<ProfilePoint> {
    syncfs(target)?;
    let scan =
        fragkit_core::scan::scan_paths(&[root.to_path_buf()], &[]).map_err(|e| anyhow!(e))?;
    let usage = FsUsage::of(target)?;
    Ok(ProfilePoint {
        step,
        churn_bytes,
        files,
        used_pct: 100.0 * usage.used as f64 / capacity as f64,
        layout_score: scan.summary.layout_score(),
        fragments: scan.summary.fragments,
        fragmented_files: scan.summary.fragmented_files,
        free_space: fragkit_core::freespace::summary(target).ok(),
        elapsed_seconds: start.elapsed().as_secs_f64(),
    })
}

/// Age the file system at `spec.target` and return the time series.
pub fn run(spec: &ProfileSpec) -> Result<ProfileReport> {
    let start = Instant::now();
    if !(spec.fullness_pct > 0.0 && spec.fullness_pct < 100.0) {
        bail!(
            "--fullness {}: expected a percentage between 0 and 100",
            spec.fullness_pct
        );
    }
    if !spec.churn.is_finite() || spec.churn < 0.0 {
        bail!(
            "--churn {}: expected a non-negative multiple of the capacity",
            spec.churn
        );
    }
    if spec.steps == 0 {
        bail!("--steps 0: expected at least one step");
    }
    require_scratch(&spec.target, spec.force, "age profile")?;
    let usage = FsUsage::of(&spec.target)?;
    if usage.used_pct() >= spec.fullness_pct {
        bail!(
            "{} is already {:.1}% full, at or above --fullness {}",
            spec.target.display(),
            usage.used_pct(),
            spec.fullness_pct
        );
    }
    let root = spec.target.join("profile");
    if root.exists() {
        bail!(
            "{}: already holds a profile/ directory from an earlier run; remove it or use a fresh scratch file system",
            spec.target.display()
        );
    }
    for d in 0..64 {
        fs::create_dir_all(root.join(format!("d{d:02}")))?;
    }
    let capacity = usage.capacity;
    let goal = (capacity as f64 * spec.fullness_pct / 100.0) as u64;
    let buf = seeded_buf(1 << 20, spec.seed);
    let mut rng = seeded_rng(spec.seed);
    let mut a = Aging {
        root: root.clone(),
        buf: &buf,
        live: Vec::new(),
        next_id: 0,
        used: usage.used,
        block: usage.block_size.max(1) as u64,
        created: 0,
        deleted: 0,
        written: 0,
    };
    let pb = spec
        .progress
        .then(|| super::progress_bar(spec.steps as u64 + 1, "age profile"));
    // Fill to the goal: stop at the first size that would overshoot it.
    loop {
        let s = spec.sizes.sample(&mut rng);
        if a.used + a.on_disk(s) > goal {
            break;
        }
        a.create(s)?;
    }
    let mut series = vec![record(
        &spec.target,
        &root,
        0,
        0,
        a.live.len() as u64,
        capacity,
        start,
    )?];
    if let Some(pb) = &pb {
        pb.inc(1);
    }
    let total = (spec.churn * capacity as f64) as u64;
    let filled = a.written;
    let mut step = 1u32;
    while step <= spec.steps {
        let mark = total / spec.steps as u64 * step as u64;
        while a.written - filled < mark {
            let s = spec.sizes.sample(&mut rng);
            while a.used + a.on_disk(s) > goal && !a.live.is_empty() {
                a.delete_random(&mut rng)?;
            }
            if a.used + a.on_disk(s) > goal {
                break; // a single file larger than the goal: skip it
            }
            a.create(s)?;
        }
        series.push(record(
            &spec.target,
            &root,
            step,
            a.written - filled,
            a.live.len() as u64,
            capacity,
            start,
        )?);
        if let Some(pb) = &pb {
            pb.inc(1);
        }
        step += 1;
    }
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    let set: Vec<(String, u64)> = a
        .live
        .iter()
        .map(|&(id, size)| (Aging::name(id), size))
        .collect();
    Ok(ProfileReport {
        version: 1,
        target: spec.target.clone(),
        profile: spec.sizes.clone(),
        fullness_pct: spec.fullness_pct,
        churn: spec.churn,
        seed: spec.seed,
        capacity,
        files_created: a.created,
        files_deleted: a.deleted,
        bytes_written: a.written,
        file_set_digest: file_set_digest(&set),
        series,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_profiles_load_and_sample_within_bounds() {
        for name in ["office", "database"] {
            let p = SizeProfile::load(name).unwrap();
            assert_eq!(p.name, name);
            let mut rng = seeded_rng(5);
            let xs: Vec<u64> = (0..2000).map(|_| p.sample(&mut rng)).collect();
            assert!(xs.iter().all(|&x| (512..=64 << 20).contains(&x)), "{name}");
            let mut again = seeded_rng(5);
            let ys: Vec<u64> = (0..2000).map(|_| p.sample(&mut again)).collect();
            assert_eq!(xs, ys, "same seed, same sizes");
        }
        // The office median is near 16 KiB.
        let p = SizeProfile::load("office").unwrap();
        let mut rng = seeded_rng(9);
        let mut xs: Vec<u64> = (0..4001).map(|_| p.sample(&mut rng)).collect();
        xs.sort_unstable();
        let median = xs[2000];
        assert!((8 << 10..=32 << 10).contains(&median), "median {median}");
    }

    #[test]
    fn unknown_profile_is_one_clear_line() {
        let e = SizeProfile::load("no-such-profile")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not a shipped profile (office, database)"),
            "{e}"
        );
        assert!(!e.contains('\n'));
    }
}
