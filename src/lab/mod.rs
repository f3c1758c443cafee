//! `fragkit lab`: the whole story on a scratch file system, end to end.
//!
//! scratch → fragment (PaF free-space structure + FragPicker's synthetic appends) → scan →
//! map → workload bench → clone the file system block for block, once per defragmenter →
//! trace the workload (or fall back to bypass) → defrag pick / full / the file system's own
//! tool, each on its own clone, counting the device's writes → scan, map and bench again →
//! report.json + report.html.
//!
//! Every step is a real `fragkit` (or tool) command run as a child process: the report lists
//! exactly what ran, and each figure can be reproduced by typing the command.

pub mod runner;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use clap::ValueEnum;
use serde::Serialize;
use serde_json::Value;

use crate::io::{BlockDevice, DeviceDelta};
use crate::scratch::FsType;
use crate::units::short_size;
use runner::{json, Runner, StepRecord};

pub const SCHEMA_VERSION: u32 = 1;

/// What the lab reads from the fragmented files, before and after each defragmenter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Whole files read front to back in 128 KiB O_DIRECT requests (FragPicker's sequential read)
    Seq,
    /// 128 KiB O_DIRECT reads with 128 KiB skipped after each (FragPicker's stride read):
    /// only half of every file is hot
    Stride,
    /// A database's page reads: 16 KiB O_DIRECT random reads of 16 KiB-aligned pages over
    /// the first quarter of each file (its hot key range)
    Db,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Seq => "seq",
            Workload::Stride => "stride",
            Workload::Db => "db",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Workload::Seq => "whole files read front to back in 128 KiB O_DIRECT requests",
            Workload::Stride => {
                "128 KiB O_DIRECT reads, 128 KiB skipped after each (half of every file hot)"
            }
            Workload::Db => {
                "16 KiB O_DIRECT random reads of 16 KiB-aligned pages over the first quarter of each file"
            }
        }
    }

    /// The application's request size: what defrag must keep whole.
    pub fn request_size(self) -> u64 {
        match self {
            Workload::Seq | Workload::Stride => 128 << 10,
            Workload::Db => 16 << 10,
        }
    }

    /// `fragkit bench read` arguments (without files, iterations and format).
    fn bench_args(self, file_size: u64) -> Vec<String> {
        let mut a: Vec<String> = vec!["bench".into(), "read".into(), "--direct".into()];
        match self {
            Workload::Seq => a.extend(["--bs".into(), "128K".into()]),
            Workload::Stride => a.extend([
                "--bs".into(),
                "128K".into(),
                "--pattern".into(),
                "stride".into(),
                "--gap".into(),
                "128K".into(),
            ]),
            Workload::Db => {
                let hot = (file_size / 4).max(64 << 10) / 4096 * 4096;
                a.extend([
                    "--bs".into(),
                    "16K".into(),
                    "--pattern".into(),
                    "random".into(),
                    "--size".into(),
                    hot.to_string(),
                    "--count".into(),
                    (hot / (16 << 10)).to_string(),
                ])
            }
        }
        a
    }
}

/// How to run the lab (from `fragkit lab` arguments).
#[derive(Debug, Clone)]
pub struct LabSpec {
    pub fs: FsType,
    pub size: u64,
    pub workload: Workload,
    pub out: PathBuf,
    /// Files FragPicker's synthetic workload grows side by side.
    pub files: usize,
    /// The PaF structure laid down first (free space in small holes).
    pub paf: String,
    pub iterations: u32,
    /// Also run the file system's own defragmenter (e4defrag, xfs_fsr, btrfs) on a clone.
    pub baseline: bool,
    pub keep: bool,
    pub scratch_dir: Option<PathBuf>,
    pub seed: u64,
}

impl LabSpec {
    /// Each synthetic file: a quarter of the file system shared among the files, in
    /// whole 256 KiB rounds.
    pub fn file_size(&self) -> u64 {
        let round = crate::age::fragpicker::ROUND_BYTES;
        (self.size / 4 / self.files.max(1) as u64 / round).max(1) * round
    }
}

/// The file system's own defragmenter, the conventional baseline.
fn baseline_tool(fs: FsType) -> Option<(&'static str, Vec<String>)> {
    match fs {
        FsType::Ext4 => Some(("e4defrag", vec![])),
        FsType::Xfs => Some(("xfs_fsr", vec!["-v".into()])),
        FsType::Btrfs => Some((
            "btrfs",
            vec!["filesystem".into(), "defragment".into(), "-f".into()],
        )),
        FsType::F2fs => None,
    }
}

fn tool_available(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
        || Path::new("/usr/sbin").join(program).is_file()
        || Path::new("/sbin").join(program).is_file()
}

#[derive(Debug, Clone, Serialize)]
pub struct DefragFigures {
    /// The command's own summary where it has one (fragkit defrag).
    pub bytes_planned: Option<u64>,
    pub bytes_moved: Option<u64>,
    pub ranges_moved: Option<u64>,
    pub verify_failures: Option<u64>,
    pub seconds: f64,
    /// What the device under the clone wrote while it ran (sync before and after).
    pub device_bytes_written: u64,
    pub device_write_requests: u64,
    pub device_bytes_read: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct LayoutFigures {
    pub files: u64,
    pub bytes: u64,
    pub fragments: u64,
    pub extents: u64,
    /// S(R), I(R) and S(R)-I(R) at the workload's request size, for whole sequential reads.
    pub split: u64,
    pub ideal: u64,
    pub extra: u64,
    pub move_bytes: u64,
    pub layout_score: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkloadFigures {
    pub iterations: usize,
    /// Bytes the workload reads per iteration.
    pub bytes: u64,
    /// Requests the workload issued per iteration.
    pub requests: u64,
    /// Read requests the device completed, mean per iteration.
    pub device_reads: f64,
    /// What fragkit's layout model predicts for those (sequential and stride patterns).
    pub predicted_device_reads: Option<u64>,
    pub mb_per_s: f64,
    pub mb_per_s_cov: f64,
    pub mb_per_s_each: Vec<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MethodResult {
    /// before, pick (or bypass), full, e4defrag / xfs_fsr / btrfs
    pub name: String,
    pub description: String,
    pub mountpoint: PathBuf,
    pub defrag: Option<DefragFigures>,
    pub layout: LayoutFigures,
    pub workload: WorkloadFigures,
    /// MB/s over the untouched file system's MB/s in the same round, median over rounds.
    pub speedup: Option<f64>,
    pub speedup_each: Vec<f64>,
    /// Block map, relative to the output directory.
    pub map: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileRow {
    pub file: String,
    pub size: u64,
    /// Fragments per method, in the order of `methods`.
    pub fragments: Vec<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub kernel: String,
    pub cpu: String,
    pub cpus: usize,
    pub memory_bytes: u64,
    pub fragkit_version: String,
    pub hostname: String,
    /// File system holding the scratch images (the loop devices' backing store).
    pub image_store: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScratchFigures {
    pub fs: String,
    pub size: u64,
    pub mkfs: String,
    pub loop_device: String,
    pub image: String,
    pub paf: Value,
    pub synthetic: Value,
    pub free_space: Option<Value>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Headline {
    /// Device bytes written by pick as a share of full's.
    pub pick_written_vs_full: f64,
    /// Device read requests of the workload after each method, as a share of before.
    pub requests_after: BTreeMap<String, f64>,
    pub mb_per_s_after: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LabReport {
    pub version: u32,
    pub started_utc: String,
    pub seconds: f64,
    pub fs: String,
    pub size: u64,
    pub workload: Workload,
    pub workload_description: String,
    pub request_size: u64,
    pub files: usize,
    pub file_size: u64,
    pub iterations: u32,
    /// Whether pick mode ran on a traced profile (false: fell back to bypass).
    pub traced: bool,
    pub trace: Option<Value>,
    pub machine: Machine,
    pub scratch: ScratchFigures,
    pub methods: Vec<MethodResult>,
    pub headline: Headline,
    pub file_rows: Vec<FileRow>,
    pub steps: Vec<StepRecord>,
    /// Shell variables the commands use: name → what it stood for in this run.
    pub variables: BTreeMap<String, PathBuf>,
    pub notes: Vec<String>,
    pub images: Vec<String>,
}

/// Scratch file systems made by this run, destroyed on the way out (even on error).
struct Scratches {
    exe: PathBuf,
    mounts: Vec<PathBuf>,
    keep: bool,
    /// The images directory the lab made itself, removed once the images are gone.
    images: Option<PathBuf>,
}

impl Drop for Scratches {
    fn drop(&mut self) {
        if self.keep {
            for m in &self.mounts {
                eprintln!(
                    "fragkit lab: kept {}; remove with: fragkit scratch destroy {}",
                    m.display(),
                    m.display()
                );
            }
            return;
        }
        for m in self.mounts.iter().rev() {
            let status = std::process::Command::new(&self.exe)
                .args(["scratch", "destroy"])
                .arg(m)
                .status();
            if !status.is_ok_and(|s| s.success()) {
                eprintln!(
                    "fragkit lab: could not destroy {}; try: fragkit scratch destroy {}",
                    m.display(),
                    m.display()
                );
            }
        }
        if let Some(dir) = &self.images {
            // Only empty directories go: anything still in there is reported, not deleted.
            if let Ok(entries) = fs::read_dir(dir) {
                for e in entries.flatten() {
                    let _ = fs::remove_dir(e.path());
                }
            }
            if fs::remove_dir(dir).is_err() {
                eprintln!("fragkit lab: {} is not empty; left in place", dir.display());
            }
        }
    }
}

fn s<T: ToString>(v: T) -> String {
    v.to_string()
}

fn p(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn u(v: &Value, ptr: &str) -> u64 {
    v.pointer(ptr).and_then(Value::as_u64).unwrap_or(0)
}

/// Where the scratch images go: --scratch-dir, else RAM (/dev/shm) when it has room for
/// every copy (loop devices on a disk file measure the host disk's layout too, which
/// differs from copy to copy), else $TMPDIR. Returns (dir, made by us, in RAM).
fn images_dir(spec: &LabSpec, copies: u64) -> Result<(PathBuf, bool, bool)> {
    if let Some(d) = &spec.scratch_dir {
        fs::create_dir_all(d)
            .with_context(|| format!("--scratch-dir {}: cannot create", d.display()))?;
        let in_ram =
            crate::sys::fsinfo::FsInfo::of_fd(std::os::fd::AsFd::as_fd(&fs::File::open(d)?))
                .is_ok_and(|i| i.type_name() == "tmpfs");
        return Ok((d.canonicalize()?, false, in_ram));
    }
    let shm = Path::new("/dev/shm");
    let room = nix::sys::statvfs::statvfs(shm)
        .map(|v| v.blocks_available() * v.fragment_size())
        .unwrap_or(0);
    let (parent, in_ram) = if room >= copies * spec.size + (1 << 30) {
        (shm.to_path_buf(), true)
    } else {
        (std::env::temp_dir(), false)
    };
    let d = tempfile::Builder::new()
        .prefix("fragkit-lab-")
        .tempdir_in(&parent)
        .with_context(|| {
            format!(
                "{}: cannot create a directory for the images",
                parent.display()
            )
        })?;
    Ok((d.keep(), true, in_ram))
}

/// Refuse an output directory that holds something other than an earlier lab report.
fn prepare_out(out: &Path) -> Result<()> {
    if out.exists() {
        if !out.is_dir() {
            bail!("--out {}: exists and is not a directory", out.display());
        }
        let mut entries = fs::read_dir(out)?;
        if entries.next().is_some() && !out.join("report.json").exists() {
            bail!(
                "--out {}: not empty and holds no earlier lab report; expected a new or empty directory",
                out.display()
            );
        }
        for sub in ["logs", "data", "maps"] {
            let _ = fs::remove_dir_all(out.join(sub));
        }
    }
    fs::create_dir_all(out.join("maps"))
        .with_context(|| format!("--out {}: cannot create", out.display()))
}

pub fn run(spec: &LabSpec) -> Result<LabReport> {
    crate::scratch::require_root("fragkit lab")?;
    if spec.files == 0 {
        bail!("--files 0: expected at least one file to fragment");
    }
    if spec.iterations == 0 {
        bail!("--iterations 0: expected at least one measured iteration");
    }
    prepare_out(&spec.out)?;
    let out = spec.out.canonicalize()?;
    let t0 = Instant::now();
    let started_utc = utc_now();
    let tool = if spec.baseline {
        baseline_tool(spec.fs).filter(|(prog, _)| tool_available(prog))
    } else {
        None
    };
    let methods_after = 2 + tool.is_some() as u64;
    // create, paf, synthetic, free, scan, map, trace; per method: clone, defrag, scan,
    // map; the workload rounds.
    let planned = 8 + methods_after * 4 + spec.iterations as u64;
    let mut r = Runner::new(&out, planned)?;
    let mut notes = Vec::new();
    let (images, images_made, in_ram) = images_dir(spec, methods_after + 2)?;
    r.define("IMAGES", &images);
    if in_ram {
        notes.push(format!(
            "The scratch images are in RAM ({}, tmpfs), so MB/s measures what each request costs the kernel and the loop device, not the seeks of this machine's disk; use --scratch-dir DIR to put them on a disk.",
            images.display()
        ));
    }
    let mut scratches = Scratches {
        exe: r.exe().to_path_buf(),
        mounts: Vec::new(),
        keep: spec.keep,
        images: images_made.then(|| images.clone()),
    };
    let rs = spec.workload.request_size();
    let rs_arg = short_size(rs);

    // 1. A scratch file system nobody else uses.
    let created = r.fragkit(
        "scratch create",
        &[
            s("scratch"),
            s("create"),
            s("--fs"),
            s(spec.fs.name()),
            s("--size"),
            short_size(spec.size),
            s("--format"),
            s("json"),
        ]
        .into_iter()
        .chain([s("--dir"), p(&images.join("base"))])
        .collect::<Vec<_>>(),
        Some("scratch-base.json"),
    )?;
    let base_info = json("scratch create", &created)?;
    let base = PathBuf::from(
        base_info["mountpoint"]
            .as_str()
            .ok_or_else(|| anyhow!("scratch create: no mountpoint in its output"))?,
    );
    scratches.mounts.push(base.clone());
    r.define("BASE", &base);

    // 2. Fragment: free space in small holes (PaF), then files grown side by side in it.
    let paf = r.fragkit(
        "age paf",
        &[
            s("age"),
            s("paf"),
            spec.paf.clone(),
            s("--target"),
            p(&base),
            s("--seed"),
            s(spec.seed),
            s("--format"),
            s("json"),
        ],
        Some("age-paf.json"),
    )?;
    let mut paf = json("age paf", &paf)?;
    for g in paf["generations"].as_array_mut().into_iter().flatten() {
        // Thousands of names are noise in the report; the data file keeps them.
        if let Some(list) = g.get_mut("deleted") {
            *list = Value::from(list.as_array().map_or(0, |l| l.len()));
        }
    }
    let work = base.join("work");
    let synthetic = r.fragkit(
        "age fragpicker-synthetic",
        &[
            s("age"),
            s("fragpicker-synthetic"),
            p(&work),
            s("--files"),
            s(spec.files),
            s("--size"),
            short_size(spec.file_size()),
            s("--seed"),
            s(spec.seed),
            s("--format"),
            s("json"),
        ],
        Some("age-synthetic.json"),
    )?;
    let synthetic = json("age fragpicker-synthetic", &synthetic)?;
    let names: Vec<String> = synthetic["files"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["path"].as_str())
        .filter_map(|path| Path::new(path).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .collect();
    if names.is_empty() {
        bail!("age fragpicker-synthetic made no files");
    }
    let free_space = if matches!(spec.fs, FsType::Ext4 | FsType::Xfs) {
        let text = r.fragkit(
            "free (before)",
            &[s("free"), p(&base), s("--format"), s("json")],
            Some("free-before.json"),
        )?;
        let mut v = json("free", &text)?;
        if let Some(o) = v.as_object_mut() {
            o.remove("groups");
        }
        Some(v)
    } else {
        None
    };

    // 3. Look at the fragmented state (the clones below have the very same layout).
    let file_size = spec.file_size();
    let (before_layout, before_map) = look(&mut r, "before", &base, &rs_arg)?;

    // 4. One block-for-block clone per defragmenter: each starts from the same layout.
    let mut clone = |r: &mut Runner, var: &str| -> Result<PathBuf> {
        let text = r.fragkit(
            &format!("scratch clone ({})", var.to_lowercase()),
            &[s("scratch"), s("clone"), p(&base), s("--format"), s("json")]
                .into_iter()
                .chain([s("--dir"), p(&images.join(var.to_lowercase()))])
                .collect::<Vec<_>>(),
            None,
        )?;
        let info = json("scratch clone", &text)?;
        let mp = PathBuf::from(info["mountpoint"].as_str().unwrap_or_default());
        scratches.mounts.push(mp.clone());
        r.define(var, &mp);
        Ok(mp)
    };
    // The untouched state is measured on a clone too, so every state measured is an image
    // made the same way (a sequential copy), unlike the image the file system wrote itself.
    let before_mp = clone(&mut r, "BEFORE")?;
    let pick_mp = clone(&mut r, "PICK")?;
    let full_mp = clone(&mut r, "FULL")?;
    let tool_mp = match &tool {
        Some(_) => Some(clone(&mut r, "TOOL")?),
        None => None,
    };

    // 6. Trace the workload on the pick clone: the profile says which ranges are hot. The
    // traced run uses pread (psync): the tracer sees system calls, and io_uring's reads
    // bypass them.
    let profile = out.join("data/profile.json");
    let pick_files: Vec<String> = names
        .iter()
        .map(|n| p(&pick_mp.join("work").join(n)))
        .collect();
    let mut trace_args = vec![
        s("trace"),
        s("--mount"),
        p(&pick_mp),
        s("-o"),
        p(&profile),
        s("--"),
        p(r.exe()),
    ];
    trace_args.extend(spec.workload.bench_args(file_size));
    trace_args.extend([
        s("--engine"),
        s("psync"),
        s("--iterations"),
        s("1"),
        s("--format"),
        s("json"),
    ]);
    trace_args.extend(pick_files.iter().cloned());
    let traced = r
        .fragkit("trace workload", &trace_args, None)
        .and_then(|_| profile_summary(&profile));
    let (traced, trace_summary) = match traced {
        Ok(summary) => (true, Some(summary)),
        Err(e) => {
            let first = format!("{e:#}");
            let first = first.lines().next().unwrap_or_default().to_string();
            let note = format!(
                "tracing was not possible here ({first}); pick mode fell back to bypass mode (every {rs_arg} window spanning more than one fragment), which needs no profile"
            );
            r.say(&format!("  note  {note}"));
            notes.push(note);
            (false, None)
        }
    };

    // 7. Defragment each clone, counting what its device wrote.
    let pick_name = if traced { "pick" } else { "bypass" };
    let mut pick_args = vec![s("defrag"), s("--mode"), s(pick_name)];
    if traced {
        pick_args.extend([s("--profile"), p(&profile)]);
    }
    pick_args.extend([
        s("--io-size"),
        rs_arg.clone(),
        s("--format"),
        s("json"),
        p(&pick_mp.join("work")),
    ]);
    let pick_defrag = counted(
        &mut r,
        &format!("defrag --mode {pick_name}"),
        &pick_mp,
        "fragkit",
        &pick_args,
        Some("defrag-pick.json"),
    )?;
    let full_args = vec![
        s("defrag"),
        s("--mode"),
        s("full"),
        s("--io-size"),
        rs_arg.clone(),
        s("--format"),
        s("json"),
        p(&full_mp.join("work")),
    ];
    let full_defrag = counted(
        &mut r,
        "defrag --mode full",
        &full_mp,
        "fragkit",
        &full_args,
        Some("defrag-full.json"),
    )?;
    let tool_defrag = match (&tool, &tool_mp) {
        (Some((prog, pre)), Some(mp)) => {
            let mut args = pre.clone();
            args.extend(names.iter().map(|n| p(&mp.join("work").join(n))));
            Some(counted(&mut r, prog, mp, prog, &args, None)?)
        }
        _ => None,
    };

    // 8. Look at each clone again, then run the workload on every state side by side:
    // each round reads the untouched base and every clone once, in rotating order, so a
    // change in the machine's speed hits all states alike; speed-ups are paired per round.
    let mut states: Vec<(String, PathBuf, Option<DefragFigures>)> = vec![
        ("before".into(), before_mp.clone(), None),
        (pick_name.into(), pick_mp.clone(), Some(pick_defrag)),
        ("full".into(), full_mp.clone(), Some(full_defrag)),
    ];
    if let (Some((prog, _)), Some(mp), Some(d)) = (&tool, &tool_mp, tool_defrag) {
        states.push((prog.to_string(), mp.clone(), Some(d)));
    }
    let mut looks = vec![(before_layout, before_map)];
    for (name, mp, _) in &states[1..] {
        looks.push(look(&mut r, name, mp, &rs_arg)?);
    }
    let rounds = bench_rounds(&mut r, spec, &states, &names)?;
    let figures = states
        .iter()
        .map(|(_, mp, _)| workload_figures(&rounds, mp))
        .collect::<Result<Vec<_>>>()?;
    let mut methods = Vec::new();
    for ((name, mp, defrag), ((layout, map), workload)) in states
        .into_iter()
        .zip(looks.into_iter().zip(figures.iter().cloned()))
    {
        let speedup_each: Vec<f64> = workload
            .mb_per_s_each
            .iter()
            .zip(&figures[0].mb_per_s_each)
            .map(|(a, b)| if *b > 0.0 { a / b } else { 0.0 })
            .collect();
        methods.push(MethodResult {
            speedup: (name != "before").then(|| median(&speedup_each)),
            speedup_each: if name == "before" {
                Vec::new()
            } else {
                speedup_each
            },
            name,
            description: String::new(),
            mountpoint: mp,
            defrag,
            layout,
            workload,
            map,
        });
    }
    let noisiest = methods
        .iter()
        .map(|m| m.workload.mb_per_s_cov)
        .fold(0.0, f64::max);
    if noisiest > 0.10 {
        notes.push(format!(
            "MB/s varied by up to {:.0}% (CoV) between rounds on this machine, so throughput differences that small are noise; the device's request counts are exact.",
            noisiest * 100.0
        ));
    }
    if spec.baseline && tool.is_none() {
        notes.push(format!(
            "no baseline defragmenter for {} was found on this machine",
            spec.fs.name()
        ));
    }
    for m in methods.iter_mut() {
        m.description = describe_method(&m.name).to_string();
    }

    let variables: BTreeMap<String, PathBuf> = r.variables().into_iter().collect();
    r.finish();
    drop(scratches);

    let file_rows = file_rows(&out, &names, &methods);
    let headline = headline(&methods);
    let report = LabReport {
        version: SCHEMA_VERSION,
        started_utc,
        seconds: t0.elapsed().as_secs_f64(),
        fs: spec.fs.name().to_string(),
        size: spec.size,
        workload: spec.workload,
        workload_description: spec.workload.describe().to_string(),
        request_size: rs,
        files: names.len(),
        file_size,
        iterations: spec.iterations,
        traced,
        trace: trace_summary,
        machine: machine(&base_info),
        scratch: ScratchFigures {
            fs: spec.fs.name().to_string(),
            size: spec.size,
            mkfs: spec.fs.mkfs_command(),
            loop_device: base_info["loop_device"].as_str().unwrap_or_default().into(),
            image: base_info["image"].as_str().unwrap_or_default().into(),
            paf,
            synthetic: strip_synthetic(synthetic),
            free_space,
        },
        methods,
        headline,
        file_rows,
        steps: r.steps.clone(),
        variables,
        notes,
        images: Vec::new(),
    };
    Ok(report)
}

/// Events and files of a trace profile; an empty one is an error (nothing to pick from).
fn profile_summary(profile: &Path) -> Result<Value> {
    let text = fs::read_to_string(profile)
        .with_context(|| format!("{}: no profile written", profile.display()))?;
    let v: Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a profile", profile.display()))?;
    let files = v["files"].as_array().map_or(0, |f| f.len());
    let ranges: usize = v["files"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| f["ranges"].as_array().map_or(0, |r| r.len()))
        .sum();
    if files == 0 {
        bail!("the trace saw no reads of the workload's files");
    }
    Ok(serde_json::json!({
        "events": v["events"],
        "dropped": v["dropped"],
        "duration_ns": v["duration_ns"],
        "files": files,
        "ranges": ranges,
    }))
}

fn describe_method(name: &str) -> &'static str {
    match name {
        "before" => "the fragmented file system, untouched",
        "pick" => "FragPicker: only the traced hot ranges that span more than one fragment",
        "bypass" => "FragPicker-B: every request-size window spanning more than one fragment",
        "full" => "conventional: every file in more than one fragment, whole",
        "e4defrag" => "ext4's own defragmenter (e2fsprogs), whole files",
        "xfs_fsr" => "xfs's own reorganiser (xfsprogs), whole files",
        "btrfs" => "btrfs filesystem defragment, whole files",
        _ => "",
    }
}

/// Scan and map one file system's copy of the workload files.
fn look(r: &mut Runner, name: &str, mp: &Path, rs_arg: &str) -> Result<(LayoutFigures, String)> {
    let work = mp.join("work");
    let scan = r.fragkit(
        &format!("scan ({name})"),
        &[
            s("scan"),
            s("--format"),
            s("json"),
            s("-r"),
            s(rs_arg),
            p(&work),
        ],
        Some(&format!("scan-{name}.json")),
    )?;
    let scan = json("scan", &scan)?;
    let sm = &scan["summary"];
    let layout = LayoutFigures {
        files: u(sm, "/files"),
        bytes: u(sm, "/bytes"),
        fragments: u(sm, "/fragments"),
        extents: u(sm, "/extents"),
        split: u(sm, "/requests/0/split"),
        ideal: u(sm, "/requests/0/ideal"),
        extra: u(sm, "/requests/0/extra"),
        move_bytes: u(sm, "/requests/0/move_bytes"),
        layout_score: sm["layout_score"].as_f64().unwrap_or(0.0),
    };
    let map = format!("maps/{name}.png");
    r.fragkit(
        &format!("map ({name})"),
        &[
            s("map"),
            p(&work),
            s("--out"),
            p(&r.out().join(&map)),
            s("--title"),
            format!(
                "{name}: {} files, {} fragments, {} extra requests at {rs_arg}",
                layout.files, layout.fragments, layout.extra
            ),
            s("--format"),
            s("json"),
        ],
        None,
    )?;
    Ok((layout, map))
}

/// The workload over every state's copy of the files, `spec.iterations` rounds of one
/// pass each; round k starts with state k (rotating), so no state always runs first.
fn bench_rounds(
    r: &mut Runner,
    spec: &LabSpec,
    states: &[(String, PathBuf, Option<DefragFigures>)],
    names: &[String],
) -> Result<Vec<Value>> {
    let mut rounds = Vec::new();
    for k in 0..spec.iterations as usize {
        let mut args = spec.workload.bench_args(spec.file_size());
        args.extend([s("--iterations"), s("1"), s("--format"), s("json")]);
        for i in 0..states.len() {
            let work = states[(k + i) % states.len()].1.join("work");
            args.extend(names.iter().map(|n| p(&work.join(n))));
        }
        let text = r.fragkit(
            &format!("bench workload, round {} of {}", k + 1, spec.iterations),
            &args,
            Some(&format!("bench-round-{}.json", k + 1)),
        )?;
        rounds.push(json("bench read", &text)?);
    }
    Ok(rounds)
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// One state's figures from the rounds: per round, its jobs (one per file, run one after
/// another) add up to one pass of the workload; MB/s is that pass's bytes over its time.
fn workload_figures(rounds: &[Value], mp: &Path) -> Result<WorkloadFigures> {
    let work = mp.join("work");
    let mut reads = Vec::new();
    let mut mbps = Vec::new();
    let (mut bytes, mut requests) = (0, 0);
    let mut predicted: Option<u64> = None;
    for (k, round) in rounds.iter().enumerate() {
        let jobs: Vec<&Value> = round["jobs"]
            .as_array()
            .ok_or_else(|| anyhow!("bench read: no jobs in its output"))?
            .iter()
            .filter(|j| {
                j["path"]
                    .as_str()
                    .is_some_and(|p| Path::new(p).starts_with(&work))
            })
            .collect();
        if jobs.is_empty() {
            bail!("bench read: no job read {}", work.display());
        }
        let (mut b, mut secs, mut d, mut q) = (0u64, 0f64, 0u64, 0u64);
        for j in &jobs {
            let it = &j["iterations"][0];
            b += u(it, "/bytes");
            q += u(it, "/requests");
            secs += it["seconds"].as_f64().unwrap_or(0.0);
            d += u(it, "/device/reads");
        }
        bytes = b;
        requests = q;
        reads.push(d as f64);
        mbps.push(if secs > 0.0 {
            b as f64 / secs / 1e6
        } else {
            0.0
        });
        if k == 0 {
            predicted = jobs
                .iter()
                .map(|j| j.pointer("/layout/split").and_then(Value::as_u64))
                .sum();
        }
    }
    Ok(WorkloadFigures {
        iterations: rounds.len(),
        bytes,
        requests,
        device_reads: crate::stats::mean(&reads),
        predicted_device_reads: predicted,
        mb_per_s: crate::stats::trimmed_mean(&mbps),
        mb_per_s_cov: crate::stats::cov(&mbps),
        mb_per_s_each: mbps,
    })
}

/// Run a defragmenter on `mp` with the device's counters read around it (sync before
/// and after, as `fragkit bench writes` does; the report shows it as that command).
fn counted(
    r: &mut Runner,
    name: &str,
    mp: &Path,
    program: &str,
    args: &[String],
    fragkit_output: Option<&str>,
) -> Result<DefragFigures> {
    let device = BlockDevice::for_path(mp)?;
    nix::unistd::sync();
    let before = device.stats()?;
    let t = Instant::now();
    let text = match fragkit_output {
        Some(file) => r.fragkit(name, args, Some(file))?,
        None => r.tool(name, program, args)?,
    };
    let seconds = t.elapsed().as_secs_f64();
    nix::unistd::sync();
    let delta: DeviceDelta = before.delta(&device.stats()?);
    // Show the step as the command that reproduces these figures.
    let var = mp_var(&r.variables(), mp);
    if let Some(step) = r.steps.last_mut() {
        step.command = format!(
            "fragkit bench writes --path \"${{{var}}}\" -- {}",
            step.command
        );
    }
    let (planned, moved, ranges, failures) = if fragkit_output.is_some() {
        let v = json(name, &text)?;
        let sm = &v["summary"];
        (
            Some(u(sm, "/bytes_planned")),
            Some(u(sm, "/bytes_moved")),
            Some(u(sm, "/ranges_moved")),
            Some(u(sm, "/verify_failures")),
        )
    } else {
        (None, None, None, None)
    };
    if failures.is_some_and(|f| f > 0) {
        bail!(
            "{name}: {} ranges failed verification",
            failures.unwrap_or(0)
        );
    }
    Ok(DefragFigures {
        bytes_planned: planned,
        bytes_moved: moved,
        ranges_moved: ranges,
        verify_failures: failures,
        seconds,
        device_bytes_written: delta.write_bytes,
        device_write_requests: delta.writes,
        device_bytes_read: delta.read_bytes,
    })
}

fn mp_var(vars: &[(String, PathBuf)], mp: &Path) -> String {
    vars.iter()
        .find(|(_, p)| p == mp)
        .map(|(n, _)| n.clone())
        .unwrap_or_else(|| "MP".into())
}

fn file_rows(out: &Path, names: &[String], methods: &[MethodResult]) -> Vec<FileRow> {
    let scans: Vec<BTreeMap<String, (u64, u64)>> = methods
        .iter()
        .map(|m| {
            let path = out.join(format!("data/scan-{}.json", m.name));
            let v: Value = fs::read_to_string(path)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or(Value::Null);
            v["files"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| {
                    let name = Path::new(f["path"].as_str()?).file_name()?;
                    Some((
                        name.to_string_lossy().into_owned(),
                        (u(f, "/fragments"), u(f, "/size")),
                    ))
                })
                .collect()
        })
        .collect();
    names
        .iter()
        .map(|n| FileRow {
            file: n.clone(),
            size: scans
                .first()
                .and_then(|s| s.get(n))
                .map_or(0, |&(_, size)| size),
            fragments: scans
                .iter()
                .map(|s| s.get(n).map_or(0, |&(f, _)| f))
                .collect(),
        })
        .collect()
}

fn headline(methods: &[MethodResult]) -> Headline {
    let written = |name: &str| {
        methods
            .iter()
            .find(|m| m.name == name)
            .and_then(|m| m.defrag.as_ref())
            .map(|d| d.device_bytes_written)
    };
    let pick = written("pick").or_else(|| written("bypass")).unwrap_or(0);
    let full = written("full").unwrap_or(0);
    let before = &methods[0].workload;
    let mut requests_after = BTreeMap::new();
    let mut mb_per_s_after = BTreeMap::new();
    for m in &methods[1..] {
        if before.device_reads > 0.0 {
            requests_after.insert(
                m.name.clone(),
                m.workload.device_reads / before.device_reads,
            );
        }
        if before.mb_per_s > 0.0 {
            mb_per_s_after.insert(m.name.clone(), m.workload.mb_per_s / before.mb_per_s);
        }
    }
    Headline {
        pick_written_vs_full: if full > 0 {
            pick as f64 / full as f64
        } else {
            0.0
        },
        requests_after,
        mb_per_s_after,
    }
}

/// The synthetic report without its per-file histograms (the data file keeps them).
fn strip_synthetic(mut v: Value) -> Value {
    for f in v["files"].as_array_mut().into_iter().flatten() {
        if let Some(o) = f.as_object_mut() {
            o.remove("frag_sizes");
            o.remove("frag_distances");
        }
    }
    v
}

fn machine(base_info: &Value) -> Machine {
    let uts = nix::sys::utsname::uname().ok();
    let field =
        |f: &dyn Fn(&nix::sys::utsname::UtsName) -> String| uts.as_ref().map(f).unwrap_or_default();
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let memory_bytes = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|k| k.parse::<u64>().ok())
        })
        .unwrap_or(0)
        * 1024;
    let image_dir = base_info["dir"]
        .as_str()
        .map(PathBuf::from)
        .unwrap_or_default();
    let image_store = fs::File::open(&image_dir)
        .and_then(|d| crate::sys::fsinfo::FsInfo::of_fd(std::os::fd::AsFd::as_fd(&d)))
        .map_or_else(|_| "unknown".into(), |i| i.type_name());
    Machine {
        kernel: field(&|u| {
            format!(
                "{} {} {}",
                u.sysname().to_string_lossy(),
                u.release().to_string_lossy(),
                u.machine().to_string_lossy()
            )
        }),
        cpu,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        memory_bytes,
        fragkit_version: env!("CARGO_PKG_VERSION").to_string(),
        hostname: field(&|u| u.nodename().to_string_lossy().into_owned()),
        image_store,
    }
}

fn utc_now() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    crate::units::utc(now)
}
