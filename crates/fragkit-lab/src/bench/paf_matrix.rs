//! Seagate's capacity × fragmentation × transfer-size matrix. For every cell (capacity C%,
//! fragmentation P%) a fresh scratch file system gets the PaF structure `PAF:C.P@SIZE`
//! (age::paf: fill C% with files, delete P% of them at random), then for every transfer
//! size a new file is written with O_DIRECT requests of that size and read back the same
//! way, `iterations` times (the file is deleted and re-created each time, so every write
//! allocates in the aged free space). Throughput mean and CoV per (cell, size, op).
//!
//! With `--mpi` ([`run_ranks`]): rank 0 makes each cell's scratch file system, the
//! ranks lay the PaF structure down together (age::paf::run_ranks) and measure it with
//! IOR's method (bench::ior: every rank writes and reads its own `bench_size` file, reads
//! shifted to another rank's), and rank 0 keeps the CSV.
//!
//! With `--model hdd` ([`MatrixSpec::model`]): each iteration's benchmarked file is also
//! priced on the modeled disk (fragkit_core::hdd): its writes and reads at the same
//! transfer size and queue depth, split where its extents (FIEMAP, after the read) end,
//! at their physical addresses. Mean modeled MB/s per row beside the measured one.
//!
//! Resumable: each finished cell's rows are appended to a CSV at once; a later run with
//! the same CSV skips the cells already there.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::age::paf::{Generation, PafOptions, PafSpec};
use crate::cluster::Cluster;
use fragkit_core::io::{run_job, JobSpec, Op};
use fragkit_core::scratch::FsType;
use fragkit_core::scratch::{Scratch, ScratchSpec};
use fragkit_core::stats::{mean, Summary};

#[derive(Debug, Clone)]
pub struct MatrixSpec {
    pub fs: FsType,
    /// Scratch image size per cell.
    pub fs_size: u64,
    pub capacities: Vec<u64>,
    pub frags: Vec<u64>,
    pub xfers: Vec<u64>,
    pub iterations: u32,
    /// Size of the benchmarked file.
    pub bench_size: u64,
    /// File size of the PaF population.
    pub file_size: u64,
    pub seed: u64,
    pub csv: PathBuf,
    /// MPI ranks populating and measuring each cell (1: this process alone).
    pub ranks: u64,
    /// `--model hdd`: also price each benchmarked file's writes and reads on the disk model.
    pub model: Option<fragkit_core::hdd::Params>,
}

impl MatrixSpec {
    fn model_name(&self) -> String {
        self.model
            .as_ref()
            .map_or(String::new(), |p| p.name.clone())
    }
}

/// One CSV row: one (cell, transfer size, op).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MatrixRow {
    pub fs: String,
    pub fs_size: u64,
    pub bench_size: u64,
    pub file_size: u64,
    pub seed: u64,
    pub capacity_pct: u64,
    pub frag_pct: u64,
    pub xfer: u64,
    pub op: String,
    pub iterations: u32,
    pub mb_per_s_mean: f64,
    pub mb_per_s_trimmed_mean: f64,
    pub mb_per_s_cov: f64,
    pub mb_per_s_min: f64,
    pub mb_per_s_max: f64,
    /// Device requests per iteration (mean).
    pub device_requests: f64,
    /// Fragments of the benchmarked file after its write (mean over iterations).
    pub bench_file_fragments: f64,
    /// Used share of the file system after the PaF structure (statfs).
    pub used_pct: f64,
    /// Smith–Seltzer layout score of the PaF population.
    pub paf_layout_score: f64,
    /// Ranks that populated and measured the cell, each writing its own bench file
    /// (`--mpi`; CSVs from before it have no column: 1).
    #[serde(default = "one")]
    pub ranks: u64,
    /// `--model`: the disk model the row was priced on ("" without; CSVs from before it
    /// have no column).
    #[serde(default)]
    pub model: String,
    /// Modeled MB/s of the row's op on the benchmarked files (mean over iterations), their
    /// device requests and seeks per iteration (empty without --model).
    #[serde(default)]
    pub model_mb_s: Option<f64>,
    #[serde(default)]
    pub model_device_requests: Option<f64>,
    #[serde(default)]
    pub model_seeks: Option<f64>,
}

/// Per-iteration modeled figures of one op: MB/s, device requests, seeks.
#[derive(Debug, Clone, Default)]
pub struct Modeled {
    pub mb_s: Vec<f64>,
    pub requests: Vec<f64>,
    pub seeks: Vec<f64>,
}

impl Modeled {
    fn push(&mut self, m: &fragkit_core::hdd::ModeledIo) {
        self.mb_s.push(m.mb_s);
        self.requests.push(m.device_requests as f64);
        self.seeks.push(m.seeks as f64);
    }
}

fn one() -> u64 {
    1
}

impl MatrixRow {
    /// One (cell, transfer size, op) row from its per-iteration MB/s.
    #[allow(clippy::too_many_arguments)]
    fn new(
        spec: &MatrixSpec,
        (capacity, frag, xfer, op): (u64, u64, u64, &str),
        mb_per_s: &[f64],
        device_requests: f64,
        bench_file_fragments: f64,
        (used_pct, paf_layout_score): (f64, f64),
        ranks: u64,
        modeled: Option<&Modeled>,
    ) -> MatrixRow {
        let s = Summary::of(mb_per_s);
        let m = |f: fn(&Modeled) -> &Vec<f64>| modeled.map(|x| mean(f(x)));
        MatrixRow {
            fs: spec.fs.name().to_string(),
            fs_size: spec.fs_size,
            bench_size: spec.bench_size,
            file_size: spec.file_size,
            seed: spec.seed,
            capacity_pct: capacity,
            frag_pct: frag,
            xfer,
            op: op.to_string(),
            iterations: spec.iterations,
            mb_per_s_mean: s.mean,
            mb_per_s_trimmed_mean: s.trimmed_mean,
            mb_per_s_cov: s.cov,
            mb_per_s_min: s.min,
            mb_per_s_max: s.max,
            device_requests,
            bench_file_fragments,
            used_pct,
            paf_layout_score,
            ranks,
            model: spec.model_name(),
            model_mb_s: m(|x| &x.mb_s),
            model_device_requests: m(|x| &x.requests),
            model_seeks: m(|x| &x.seeks),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct MatrixReport {
    pub version: u32,
    pub csv: PathBuf,
    /// Cells measured by this run, and cells skipped because the CSV had them.
    pub measured_cells: usize,
    pub skipped_cells: usize,
    /// Every row of the CSV for the requested cells (earlier runs' included).
    pub rows: Vec<MatrixRow>,
}

/// Refuse a matrix whose benchmark file cannot fit beside the fullest structure.
/// Bytes left for the benchmarked files beside a `capacity`% structure: ext4 keeps ~5% for
/// root plus metadata, so the files get 90% of what the structure leaves.
fn room_beside(fs_size: u64, capacity: u64) -> u64 {
    fs_size / 100 * 100u64.saturating_sub(capacity) * 9 / 10
}

/// The default scratch size: 1 GiB, or the smallest multiple of 256 MiB in which `ranks`
/// files of `bench_size` fit beside the largest of `capacities`.
pub fn fitting_fs_size(capacities: &[u64], bench_size: u64, ranks: u64) -> u64 {
    const STEP: u64 = 256 << 20;
    let cmax = capacities.iter().copied().max().unwrap_or(0);
    let need = bench_size.saturating_mul(ranks.max(1));
    let mut size = 1u64 << 30;
    // At most 95% is accepted, so 5% × 90% of the size is always room: this ends.
    while cmax <= 95 && room_beside(size, cmax) < need && size < u64::MAX / 2 {
        size += STEP;
    }
    size
}

pub fn validate(spec: &MatrixSpec) -> Result<()> {
    for (name, list) in [
        ("--capacities", &spec.capacities),
        ("--frag", &spec.frags),
        ("--xfer", &spec.xfers),
    ] {
        if list.is_empty() {
            bail!("{name}: expected at least one value");
        }
    }
    if let Some(&c) = spec.capacities.iter().find(|&&c| c == 0 || c > 95) {
        bail!("--capacities {c}: expected percentages from 1 to 95");
    }
    if let Some(&p) = spec.frags.iter().find(|&&p| p > 100) {
        bail!("--frag {p}: expected percentages from 0 to 100");
    }
    if let Some(&x) = spec.xfers.iter().find(|&&x| x % 4096 != 0) {
        bail!("--xfer {x}: expected multiples of 4 KiB (O_DIRECT)");
    }
    if !spec.bench_size.is_multiple_of(4096) || spec.bench_size == 0 {
        bail!(
            "--bench-size {}: expected a positive multiple of 4 KiB",
            spec.bench_size
        );
    }
    let cmax = spec.capacities.iter().copied().max().unwrap_or(0);
    let free = room_beside(spec.fs_size, cmax);
    if spec.bench_size.saturating_mul(spec.ranks.max(1)) > free {
        bail!(
            "--bench-size {} × {} rank(s): does not fit beside a {cmax}% structure on a {} MiB file system (about {} MiB free); use a larger --fs-size or a smaller --bench-size",
            spec.bench_size,
            spec.ranks.max(1),
            spec.fs_size >> 20,
            free >> 20
        );
    }
    if spec.iterations == 0 {
        bail!("--iterations 0: expected at least 1");
    }
    if spec.model.is_some() && spec.ranks > 1 {
        bail!("--model: not with --mpi (the ranks' files are not priced on the disk model)");
    }
    Ok(())
}

/// Rows already in the CSV (none if it does not exist).
pub(crate) fn read_rows(csv_path: &Path) -> Result<Vec<MatrixRow>> {
    if !csv_path.exists() {
        return Ok(Vec::new());
    }
    let mut r = csv::Reader::from_path(csv_path)
        .with_context(|| format!("{}: cannot read", csv_path.display()))?;
    let mut rows = Vec::new();
    for (i, row) in r.deserialize().enumerate() {
        let row: MatrixRow = row.with_context(|| {
            format!(
                "{}: row {} is not a `bench paf` result row; give another --csv",
                csv_path.display(),
                i + 2
            )
        })?;
        rows.push(row);
    }
    Ok(rows)
}

fn same_setup(row: &MatrixRow, spec: &MatrixSpec) -> bool {
    row.fs == spec.fs.name()
        && row.fs_size == spec.fs_size
        && row.bench_size == spec.bench_size
        && row.file_size == spec.file_size
        && row.seed == spec.seed
        && row.iterations == spec.iterations
        && row.ranks == spec.ranks
        && row.model == spec.model_name()
}

/// (capacity, frag) cells whose every transfer size has a write and a read row.
pub(crate) fn done_cells(rows: &[MatrixRow], spec: &MatrixSpec) -> BTreeSet<(u64, u64)> {
    let mut have: BTreeMap<(u64, u64), BTreeSet<(u64, String)>> = BTreeMap::new();
    for r in rows.iter().filter(|r| same_setup(r, spec)) {
        have.entry((r.capacity_pct, r.frag_pct))
            .or_default()
            .insert((r.xfer, r.op.clone()));
    }
    have.into_iter()
        .filter(|(_, got)| {
            spec.xfers.iter().all(|x| {
                got.contains(&(*x, "write".to_string())) && got.contains(&(*x, "read".to_string()))
            })
        })
        .map(|(k, _)| k)
        .collect()
}

/// Run the cells the CSV lacks. `on_cell(capacity, frag, skipped)` reports progress.
pub fn run(spec: &MatrixSpec, on_cell: &mut dyn FnMut(u64, u64, bool)) -> Result<MatrixReport> {
    run_with(spec, None, on_cell)
}

/// As [`run`] with every rank of `cluster` populating and measuring each cell; rank 0
/// keeps the CSV and gets the report (None on the others).
pub fn run_ranks(
    spec: &MatrixSpec,
    cluster: &Cluster,
    on_cell: &mut dyn FnMut(u64, u64, bool),
) -> Result<Option<MatrixReport>> {
    let r = run_with(spec, Some(cluster), on_cell)?;
    Ok(cluster.is_root().then_some(r))
}

/// Rows of the CSV that another setup wrote make it unusable for this one.
fn existing_rows(spec: &MatrixSpec) -> Result<Vec<MatrixRow>> {
    let existing = read_rows(&spec.csv)?;
    if let Some(r) = existing.iter().find(|r| !same_setup(r, spec)) {
        bail!(
            "{}: holds results of another setup (fs {}, fs size {}, bench size {}, file size {}, seed {}, {} iterations, {} rank(s), model {:?}); give another --csv or the same options",
            spec.csv.display(),
            r.fs,
            r.fs_size,
            r.bench_size,
            r.file_size,
            r.seed,
            r.iterations,
            r.ranks,
            r.model
        );
    }
    Ok(existing)
}

fn run_with(
    spec: &MatrixSpec,
    cluster: Option<&Cluster>,
    on_cell: &mut dyn FnMut(u64, u64, bool),
) -> Result<MatrixReport> {
    let solo = Cluster::solo();
    let cl = cluster.unwrap_or(&solo);
    // Rank 0 alone reads and writes the CSV.
    let done = cl.agree(validate(spec).and_then(|_| {
        if cl.is_root() {
            Ok(done_cells(&existing_rows(spec)?, spec))
        } else {
            Ok(BTreeSet::new())
        }
    }))?;
    let mut measured = 0;
    let mut skipped = 0;
    for &c in &spec.capacities {
        for &p in &spec.frags {
            if cl.broadcast_u64(done.contains(&(c, p)) as u64) == 1 {
                skipped += 1;
                on_cell(c, p, true);
                continue;
            }
            let rows = match cluster {
                None => measure_cell(spec, c, p)?,
                Some(cl) => measure_cell_ranks(spec, cl, c, p)?,
            };
            cl.agree(if cl.is_root() {
                append_rows(&spec.csv, &rows)
            } else {
                Ok(())
            })?;
            measured += 1;
            on_cell(c, p, false);
        }
    }
    let wanted: BTreeSet<(u64, u64)> = spec
        .capacities
        .iter()
        .flat_map(|&c| spec.frags.iter().map(move |&p| (c, p)))
        .collect();
    let xfers: BTreeSet<u64> = spec.xfers.iter().copied().collect();
    let rows = if cl.is_root() {
        read_rows(&spec.csv)?
            .into_iter()
            .filter(|r| wanted.contains(&(r.capacity_pct, r.frag_pct)) && xfers.contains(&r.xfer))
            .collect()
    } else {
        Vec::new()
    };
    Ok(MatrixReport {
        version: 1,
        csv: spec.csv.clone(),
        measured_cells: measured,
        skipped_cells: skipped,
        rows,
    })
}

/// The single PaF generation of cell (capacity, frag).
fn cell_spec(spec: &MatrixSpec, capacity: u64, frag: u64) -> PafSpec {
    PafSpec {
        generations: vec![Generation {
            fill_pct: capacity as u32,
            delete_pct: frag as u32,
        }],
        seed: Some(spec.seed),
        sizes: vec![spec.file_size],
        kblocks: None,
    }
}

/// One cell as ranks: rank 0's fresh scratch file system, populated by every rank, then
/// IOR's write and read per transfer size. Rows on rank 0 (empty on the others).
/// Start `fragkit scratch guard` over the scratch in `dir` for this process (see
/// `scratch::guard`): in a process group of its own, so a launcher that kills this rank's
/// group leaves it, and without the launcher's variables, so it is no rank.
fn spawn_guard(dir: &Path) -> Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let exe =
        std::env::current_exe().context("bench paf: finding this program to guard the scratch")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args([
        "scratch",
        "guard",
        "--owner",
        &std::process::id().to_string(),
    ])
    .arg(dir)
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .process_group(0);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("OMPI_") || k.starts_with("PMIX_") || k.starts_with("PMI_") {
            cmd.env_remove(&*k);
        }
    }
    cmd.spawn().context("bench paf: starting the scratch guard")
}

fn measure_cell_ranks(
    spec: &MatrixSpec,
    cl: &Cluster,
    capacity: u64,
    frag: u64,
) -> Result<Vec<MatrixRow>> {
    use super::ior::{self, IorLayout, IorSpec, ReadOrder};
    let scratch = cl.agree(if cl.is_root() {
        Scratch::create(&ScratchSpec::new(spec.fs, spec.fs_size))
            .context("bench paf: making the scratch file system")
            .map(Some)
    } else {
        Ok(None)
    })?;
    // A launcher's abort or SIGKILL ends rank 0 before it can tear the scratch down; a
    // guard process of its own does it then.
    let guard = cl.agree(match &scratch {
        Some(s) => spawn_guard(&s.info.dir).map(Some),
        None => Ok(None),
    })?;
    let mnt: PathBuf = cl.broadcast(
        scratch
            .as_ref()
            .map(|s| s.mountpoint().to_path_buf())
            .as_ref(),
    )?;
    let paf = cell_spec(spec, capacity, frag);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let opts = PafOptions {
        progress: false,
        threads: (cores / cl.local_size().max(1)).max(1),
        ..PafOptions::default()
    };
    let mine = crate::age::paf::run_ranks(&paf, &mnt, &opts, cl)
        .with_context(|| format!("bench paf: cell {capacity}% / {frag}%: {paf}"))?;
    let structure = match cl.gather(&mine)? {
        Some(mut all) => {
            all[0] = mine;
            Some(crate::age::paf::PafRanksReport::from_ranks(&paf, all)?)
        }
        None => None,
    };
    let ior_spec = IorSpec {
        dir: mnt.clone(),
        xfers: spec.xfers.clone(),
        block: spec.bench_size,
        direct: true,
        write: true,
        read: true,
        iterations: spec.iterations,
        layout: IorLayout::FilePerProcess,
        order: ReadOrder::Constant { nodes: 1 },
        segments: 1,
        random_offsets: false,
        deadline: None,
        keep: false,
        // The matrix's write figures have always included the sync: kept comparable.
        fsync: true,
        verbose: 0,
    };
    let report = ior::run(&ior_spec, cl)?;
    cl.barrier();
    if let Some(s) = scratch {
        s.destroy()?;
    }
    if let Some(mut g) = guard {
        // It sees the scratch gone within a quarter second and ends.
        let _ = g.wait();
    }
    let (Some(report), Some(structure)) = (report, structure) else {
        return Ok(Vec::new());
    };
    let mut rows = Vec::new();
    for &xfer in &spec.xfers {
        let frags: Vec<f64> = report
            .fragments
            .iter()
            .filter(|f| f.xfer == xfer)
            .map(|f| f.fragments as f64)
            .collect();
        for op in ["write", "read"] {
            let mb: Vec<f64> = report
                .iterations
                .iter()
                .filter(|r| r.xfer == xfer && r.op == op)
                .map(|r| r.bytes as f64 / 1e6 / r.seconds)
                .collect();
            rows.push(MatrixRow::new(
                spec,
                (capacity, frag, xfer, op),
                &mb,
                // Ranks share one device here: its counters are not split per rank.
                f64::NAN,
                mean(&frags),
                (structure.used_pct, structure.layout_score),
                cl.size() as u64,
                None,
            ));
        }
    }
    Ok(rows)
}

/// Append rows, writing the header only into a new (or empty) file; flushed before return
/// so an interrupted matrix keeps every finished cell.
fn append_rows(path: &Path, rows: &[MatrixRow]) -> Result<()> {
    let fresh = std::fs::metadata(path).map_or(true, |m| m.len() == 0);
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("{}: cannot open for appending", path.display()))?;
    let mut w = csv::WriterBuilder::new()
        .has_headers(fresh)
        .from_writer(file);
    for r in rows {
        w.serialize(r)
            .with_context(|| format!("{}: cannot write", path.display()))?;
    }
    w.flush()
        .with_context(|| format!("{}: cannot write", path.display()))?;
    Ok(())
}

/// The benchmarked file's writes and reads on the modeled disk: `size` bytes in `xfer`
/// requests from offset 0, `qd` in flight, split at its extents' ends (FIEMAP now).
fn model_file(
    p: &fragkit_core::hdd::Params,
    path: &Path,
    size: u64,
    xfer: u64,
    qd: u32,
) -> Result<[fragkit_core::hdd::ModeledIo; 2]> {
    use fragkit_core::hdd::layout::{model_reads, model_writes};
    let f = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
    let extents = fragkit_sys::fiemap::read_extents(std::os::fd::AsFd::as_fd(&f), true)
        .map_err(|e| anyhow::anyhow!("{}: FIEMAP: {e}", path.display()))?;
    let reqs = sequential_requests(size, xfer);
    let w = model_writes(p, &extents, &reqs, qd).map_err(|e| anyhow::anyhow!("--model: {e}"))?;
    let r = model_reads(p, &extents, &reqs, qd).map_err(|e| anyhow::anyhow!("--model: {e}"))?;
    Ok([w, r])
}

/// (offset, length) of `size` bytes in `xfer` requests from 0 (the last one shorter).
fn sequential_requests(size: u64, xfer: u64) -> Vec<(u64, u64)> {
    let x = xfer.max(1);
    (0..size.div_ceil(x))
        .map(|i| (i * x, x.min(size - i * x)))
        .collect()
}

/// One cell on its own fresh scratch file system.
fn measure_cell(spec: &MatrixSpec, capacity: u64, frag: u64) -> Result<Vec<MatrixRow>> {
    let scratch = Scratch::create(&ScratchSpec::new(spec.fs, spec.fs_size))
        .context("bench paf: making the scratch file system")?;
    let mnt = scratch.mountpoint().to_path_buf();
    let paf = cell_spec(spec, capacity, frag);
    let opts = PafOptions {
        progress: false,
        ..PafOptions::default()
    };
    let structure = crate::age::paf::run(&paf, &mnt, &opts)
        .with_context(|| format!("bench paf: cell {capacity}% / {frag}%: {paf}"))?;
    let path = mnt.join("bench-file");
    let mut rows = Vec::new();
    for &xfer in &spec.xfers {
        let mut per_op: [(Vec<f64>, Vec<f64>); 2] = Default::default();
        let mut modeled: [Modeled; 2] = Default::default();
        let mut frags = Vec::new();
        for _ in 0..spec.iterations {
            // One process: stop between runs, the cell's scratch file system torn down on
            // the way out (ranks under MPI stop together through the launcher instead).
            if fragkit_sys::signals::interrupted() {
                anyhow::bail!(fragkit_sys::signals::INTERRUPTED_MESSAGE);
            }
            let _ = std::fs::remove_file(&path);
            fragkit_sys::sync::syncfs(&mnt)?;
            let mut qd = 1;
            for (k, op) in [Op::Write, Op::Read].into_iter().enumerate() {
                let mut job = JobSpec::new(&path, op);
                job.block_size = xfer;
                job.size = Some(spec.bench_size);
                qd = job.queue_depth;
                let r = run_job(&job)?;
                let it = &r.iterations[0];
                per_op[k].0.push(it.mb_per_s);
                let dev = it.device.map_or(0, |d| match op {
                    Op::Write => d.writes,
                    Op::Read => d.reads,
                });
                per_op[k].1.push(dev as f64);
                if op == Op::Write {
                    frags.push(crate::age::check_file(&path)?.fragments as f64);
                }
            }
            if let Some(p) = &spec.model {
                let [w, r] = model_file(p, &path, spec.bench_size, xfer, qd)?;
                modeled[0].push(&w);
                modeled[1].push(&r);
            }
        }
        for (k, op) in ["write", "read"].into_iter().enumerate() {
            rows.push(MatrixRow::new(
                spec,
                (capacity, frag, xfer, op),
                &per_op[k].0,
                mean(&per_op[k].1),
                mean(&frags),
                (structure.used_pct, structure.layout_score),
                1,
                spec.model.as_ref().map(|_| &modeled[k]),
            ));
        }
    }
    let _ = std::fs::remove_file(&path);
    scratch.destroy()?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> MatrixSpec {
        MatrixSpec {
            fs: FsType::Ext4,
            fs_size: 1 << 30,
            capacities: vec![10, 20],
            frags: vec![0],
            xfers: vec![1 << 20, 2 << 20],
            iterations: 2,
            bench_size: 64 << 20,
            file_size: 16 << 20,
            seed: 1,
            csv: PathBuf::from("x.csv"),
            ranks: 1,
            model: None,
        }
    }

    fn row(s: &MatrixSpec, cap: u64, xfer: u64, op: &str) -> MatrixRow {
        MatrixRow {
            fs: "ext4".into(),
            fs_size: s.fs_size,
            bench_size: s.bench_size,
            file_size: s.file_size,
            seed: s.seed,
            capacity_pct: cap,
            frag_pct: 0,
            xfer,
            op: op.into(),
            iterations: s.iterations,
            mb_per_s_mean: 1.0,
            mb_per_s_trimmed_mean: 1.0,
            mb_per_s_cov: 0.0,
            mb_per_s_min: 1.0,
            mb_per_s_max: 1.0,
            device_requests: 1.0,
            bench_file_fragments: 1.0,
            used_pct: 10.0,
            paf_layout_score: 1.0,
            ranks: 1,
            model: String::new(),
            model_mb_s: None,
            model_device_requests: None,
            model_seeks: None,
        }
    }

    #[test]
    fn a_cell_is_done_only_with_every_size_and_op() {
        let s = spec();
        let mut rows = Vec::new();
        for x in &s.xfers {
            for op in ["write", "read"] {
                rows.push(row(&s, 10, *x, op));
            }
        }
        // Cell 20 lacks the 2M read.
        rows.push(row(&s, 20, 1 << 20, "write"));
        rows.push(row(&s, 20, 1 << 20, "read"));
        rows.push(row(&s, 20, 2 << 20, "write"));
        assert_eq!(done_cells(&rows, &s), BTreeSet::from([(10, 0)]));
        // Another setup's rows never count.
        let mut other = s.clone();
        other.iterations = 3;
        assert!(done_cells(&rows, &other).is_empty());
    }

    /// A cell priced on the disk model is another setup than one without it; the
    /// requests cover the file with a short last one.
    #[test]
    fn model_rows_are_their_own_setup_and_requests_cover_the_file() {
        let s = spec();
        let mut m = s.clone();
        m.model = Some(fragkit_core::hdd::Params::hdd());
        let plain = row(&s, 10, 1 << 20, "write");
        assert!(same_setup(&plain, &s) && !same_setup(&plain, &m));
        assert_eq!(
            sequential_requests(5 << 19, 1 << 20),
            vec![(0, 1 << 20), (1 << 20, 1 << 20), (2 << 20, 1 << 19)]
        );
        assert!(sequential_requests(0, 1 << 20).is_empty());
        m.ranks = 2;
        assert!(validate(&m).unwrap_err().to_string().contains("--mpi"));
    }

    /// A CSV written before the model columns existed still reads (no model, no figures).
    #[test]
    fn old_csv_rows_read_without_model_columns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.csv");
        let s = spec();
        let r = row(&s, 10, 1 << 20, "read");
        let mut w = csv::Writer::from_path(&path).unwrap();
        w.write_record([
            "fs",
            "fs_size",
            "bench_size",
            "file_size",
            "seed",
            "capacity_pct",
            "frag_pct",
            "xfer",
            "op",
            "iterations",
            "mb_per_s_mean",
            "mb_per_s_trimmed_mean",
            "mb_per_s_cov",
            "mb_per_s_min",
            "mb_per_s_max",
            "device_requests",
            "bench_file_fragments",
            "used_pct",
            "paf_layout_score",
            "ranks",
        ])
        .unwrap();
        w.write_record([
            "ext4",
            &s.fs_size.to_string(),
            &s.bench_size.to_string(),
            &s.file_size.to_string(),
            "1",
            "10",
            "0",
            "1048576",
            "read",
            "2",
            "1",
            "1",
            "0",
            "1",
            "1",
            "1",
            "1",
            "10",
            "1",
            "1",
        ])
        .unwrap();
        w.flush().unwrap();
        assert_eq!(read_rows(&path).unwrap(), vec![r.clone()]);
        // And a row with the model round-trips.
        let mut m = r;
        m.model = "hdd".into();
        m.model_mb_s = Some(123.5);
        append_rows(&dir.path().join("new.csv"), std::slice::from_ref(&m)).unwrap();
        assert_eq!(read_rows(&dir.path().join("new.csv")).unwrap(), vec![m]);
    }

    #[test]
    fn bench_file_must_fit_beside_the_fullest_structure() {
        let mut s = spec();
        s.capacities = vec![95];
        let e = validate(&s).unwrap_err().to_string();
        assert!(e.starts_with("--bench-size"), "{e}");
        s.capacities = vec![50];
        validate(&s).unwrap();
    }
}
