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

pub mod app;
pub mod child;
pub mod figures;
pub mod flash;
pub mod runner;
pub mod steps;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use child::{Free, Paf, Synthetic, TraceSummary};
use figures::State;
use fragkit_core::scratch::FsType;
use fragkit_core::units::short_size;
use runner::{Runner, StepRecord};

pub const SCHEMA_VERSION: u32 = 1;

/// The modeled device of the lab's deterministic column: the FAST'24 artifact's NVMe
/// (see docs/ssd.md).
pub(crate) const MODEL: &str = "fast24";

/// The modeled disk priced beside it: what the same fragmentation costs a hard disk
/// (a Constellation ES.3 4 TB, see docs/hdd.md).
pub(crate) const DISK_MODEL: &str = "hdd";

/// What the lab reads from the fragmented files, before and after each defragmenter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

fn tool_available(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
        || Path::new("/usr/sbin").join(program).is_file()
        || Path::new("/sbin").join(program).is_file()
}

#[derive(Debug, Clone, Default, Serialize)]
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
    /// What the defragmenter declined to do, in its own words (e4defrag "does not need
    /// defragmentation", xfs_fsr "already fully defragmented", fragkit's skip reasons).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declined: Option<String>,
    /// fragkit defrag: files it reported came out worse (0 is its promise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files_worse: Option<u64>,
    /// Whether the files' atime, mtime and ctime were the same after the defragmenter as
    /// before it (stat before and after its step; the lab reads nothing in between).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub times: Option<TimesKept>,
}

/// How many files a defragmenter left with the times they had (xfs_fsr and e4defrag keep
/// atime, mtime and ctime; backup tools, make and rsync trust them).
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct TimesKept {
    pub files: u64,
    pub kept: u64,
    /// "name: mtime, ctime" for each file whose times changed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
}

/// Each file's atime, mtime and ctime under `mp`/work (None: not stat-able).
fn file_times(mp: &Path, names: &[String]) -> Vec<Option<fragkit_sys::stat::Times>> {
    names
        .iter()
        .map(|n| {
            fs::symlink_metadata(mp.join("work").join(n))
                .ok()
                .map(|m| fragkit_sys::stat::times(&m))
        })
        .collect()
}

/// The files whose times differ between two [`file_times`] samples.
fn times_kept(
    names: &[String],
    before: &[Option<fragkit_sys::stat::Times>],
    after: &[Option<fragkit_sys::stat::Times>],
) -> TimesKept {
    let mut t = TimesKept::default();
    for ((name, b), a) in names.iter().zip(before).zip(after) {
        t.files += 1;
        let changed = match (b, a) {
            (Some(b), Some(a)) => fragkit_sys::stat::times_changed(b, a),
            _ => vec!["unknown (stat failed)"],
        };
        if changed.is_empty() {
            t.kept += 1;
        } else {
            t.changed.push(format!("{name}: {}", changed.join(", ")));
        }
    }
    t
}

#[derive(Debug, Clone, Default, Serialize)]
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

#[derive(Debug, Clone, Default, Serialize)]
pub struct WorkloadFigures {
    pub iterations: usize,
    /// Bytes the workload reads per iteration.
    pub bytes: u64,
    /// Requests the workload issued per iteration.
    pub requests: u64,
    /// Read requests the device completed, mean per iteration.
    pub device_reads: f64,
    /// The same per round.
    pub device_reads_each: Vec<u64>,
    /// What fragkit's layout model predicts for those: the workload's requests split
    /// where the files' data runs end (round 1's; the same in every round).
    pub predicted_device_reads: Option<u64>,
    /// Device reads before each pass to read the files' mapping back after the cache
    /// drop (extent trees; btrfs checksum items), mean per round: metadata, counted
    /// apart from `device_reads`.
    pub mapping_reads: f64,
    pub mb_per_s: f64,
    pub mb_per_s_cov: f64,
    pub mb_per_s_each: Vec<f64>,
    /// The same pass on the modeled NVMe (`bench read --model fast24`): deterministic,
    /// equal in every round.
    pub modeled: Option<ModeledFigures>,
    /// The same pass on the modeled disk (`bench read --model hdd`): deterministic too.
    pub modeled_disk: Option<DiskFigures>,
}

/// One pass of the workload over a state's files on the modeled SSD: its jobs summed
/// (the fields of one job's figures, see `ssd::layout::ModeledReads`).
pub use fragkit_core::ssd::layout::ModeledReads as ModeledFigures;

/// One pass of the workload on the modeled disk: its jobs summed (see `hdd::ModeledIo`).
pub use fragkit_core::hdd::ModeledIo as DiskFigures;

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
    /// `speedup` with its paired interval over the rounds (exact sign-test interval for
    /// the median ratio, see `figures::RatioInterval`).
    pub real_time: Option<figures::RatioInterval>,
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
    pub paf: Paf,
    pub synthetic: Synthetic,
    pub free_space: Option<Free>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Headline {
    /// Device bytes written by pick as a share of full's.
    pub pick_written_vs_full: f64,
    /// Device read requests of the workload after each method, as a share of before.
    pub requests_after: BTreeMap<String, f64>,
    /// Each method's "speedup" (median of the paired rounds' MB/s after ÷ before): the
    /// same figure as in `methods` and in the verdict sentences.
    pub speedup: BTreeMap<String, f64>,
    /// The same with its paired interval: a method is faster or slower in real time only
    /// when the interval excludes 1.
    pub real_time: BTreeMap<String, figures::RatioInterval>,
    /// The winner table: per axis, the best defragmenters (several: a tie).
    pub winners: Vec<figures::Axis>,
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
    /// Seed of the aging.
    pub seed: u64,
    /// --scratch-dir when given (reproduce.sh puts its images there too).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scratch_dir: Option<PathBuf>,
    /// Whether pick mode ran on a traced profile (false: fell back to bypass).
    pub traced: bool,
    pub trace: Option<TraceSummary>,
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
    /// Every directory a scratch file system of this run was asked for, made or not: a
    /// step stopped while making one leaves its marker, image or loop device there.
    dirs: Vec<PathBuf>,
}

impl Drop for Scratches {
    fn drop(&mut self) {
        if self.keep {
            for m in &self.mounts {
                fragkit_sys::stderr_line!(
                    "fragkit lab: kept {}; remove with: fragkit scratch destroy {}",
                    m.display(),
                    m.display()
                );
            }
            if let (Some(dir), false) = (&self.images, self.mounts.is_empty()) {
                // scratch destroy empties each state's directory but cannot know the lab's.
                fragkit_sys::stderr_line!(
                    "fragkit lab: then remove the emptied images directory: rmdir {}/* {}",
                    dir.display(),
                    dir.display()
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
                fragkit_sys::stderr_line!(
                    "fragkit lab: could not destroy {}; try: fragkit scratch destroy {}",
                    m.display(),
                    m.display()
                );
            }
        }
        for d in &self.dirs {
            match fragkit_core::scratch::sweep(d) {
                Ok(0) => {}
                Ok(n) => fragkit_sys::stderr_line!(
                    "fragkit lab: tore down {n} half-made scratch file system{} in {}",
                    if n == 1 { "" } else { "s" },
                    d.display()
                ),
                Err(e) => fragkit_sys::stderr_line!("fragkit lab: {}: {e:#}", d.display()),
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
                fragkit_sys::stderr_line!(
                    "fragkit lab: {} is not empty; left in place",
                    dir.display()
                );
            }
        }
    }
}

/// Where the scratch images go: --scratch-dir; else under $TMPDIR when it is set (the
/// user chose it); else RAM (/dev/shm) when it has room for every copy (loop devices on a
/// disk file measure the host disk's layout too, which differs from copy to copy); else
/// /tmp. Returns (dir, made by us, in RAM).
fn images_dir(spec: &LabSpec, copies: u64) -> Result<(PathBuf, bool, bool)> {
    let is_tmpfs = |d: &Path| {
        fs::File::open(d).is_ok_and(|f| {
            fragkit_sys::fsinfo::FsInfo::of_fd(std::os::fd::AsFd::as_fd(&f))
                .is_ok_and(|i| i.type_name() == "tmpfs")
        })
    };
    if let Some(d) = &spec.scratch_dir {
        fs::create_dir_all(d)
            .with_context(|| format!("--scratch-dir {}: cannot create", d.display()))?;
        return Ok((d.canonicalize()?, false, is_tmpfs(d)));
    }
    let shm = Path::new("/dev/shm");
    let room = nix::sys::statvfs::statvfs(shm)
        .map(|v| v.blocks_available() * v.fragment_size())
        .unwrap_or(0);
    let tmpdir = std::env::var_os("TMPDIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let parent = images_parent(tmpdir, room, copies * spec.size + (1 << 30));
    let d = tempfile::Builder::new()
        .prefix("fragkit-lab-")
        .tempdir_in(&parent)
        .with_context(|| {
            format!(
                "{}: cannot create a directory for the images",
                parent.display()
            )
        })?;
    let in_ram = is_tmpfs(d.path());
    Ok((d.keep(), true, in_ram))
}

/// The parent directory of the images when --scratch-dir is not given (see images_dir).
fn images_parent(tmpdir: Option<PathBuf>, shm_room: u64, needed: u64) -> PathBuf {
    match tmpdir {
        Some(t) => t,
        None if shm_room >= needed => PathBuf::from("/dev/shm"),
        None => PathBuf::from("/tmp"),
    }
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
    fragkit_core::scratch::require_root("fragkit lab")?;
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
    let plan = figures::plan(spec, tool_available);
    let mut r = Runner::new(&out, plan.steps)?;
    let mut notes = Vec::new();
    let (images, images_made, in_ram) = images_dir(spec, plan.methods_after + 2)?;
    r.define("IMAGES", &images);
    if in_ram {
        notes.push(format!(
            "The scratch images are in RAM ({}, tmpfs), so MB/s measures what each request costs the kernel and the loop device, not the seeks of this machine's disk; use --scratch-dir DIR (or TMPDIR) to put them on a disk.",
            images.display()
        ));
    }
    let mut scratches = Scratches {
        exe: r.exe().to_path_buf(),
        mounts: Vec::new(),
        keep: spec.keep,
        images: images_made.then(|| images.clone()),
        dirs: vec![images.join("base")],
    };
    let rs = spec.workload.request_size();
    let rs_arg = short_size(rs);

    // 1. A scratch file system nobody else uses.
    let base_info = steps::create_base(&mut r, spec, &images, &[])?;
    let base = base_info.mountpoint.clone();
    scratches.mounts.push(base.clone());
    r.define("BASE", &base);

    // 2. Fragment: free space in small holes (PaF), then files grown side by side in it;
    // with --paf none, side by side in free space that has room for them whole.
    let paf = if spec.paf == figures::NO_PAF {
        child::Paf {
            spec: figures::NO_PAF.into(),
            generations: Vec::new(),
            rest: Default::default(),
        }
    } else {
        steps::age_paf(&mut r, spec, &base)?
    };
    let synthetic = steps::age_synthetic(&mut r, spec, &base.join("work"))?;
    let names = synthetic.names();
    let free_space = if matches!(spec.fs, FsType::Ext4 | FsType::Xfs) {
        Some(steps::free_before(&mut r, &base)?)
    } else {
        None
    };

    // 3. Look at the fragmented state (the clones below have the very same layout).
    let before_look = steps::look(&mut r, "before", &base, &rs_arg)?;

    // 4. One block-for-block clone per defragmenter: each starts from the same layout.
    // The untouched state is measured on a clone too, so every state measured is an image
    // made the same way (a sequential copy), unlike the image the file system wrote itself.
    let mut clone = |r: &mut Runner, var: &str| -> Result<PathBuf> {
        scratches.dirs.push(images.join(var.to_lowercase()));
        let mp = steps::clone_scratch(r, &base, &images, var)?.mountpoint;
        scratches.mounts.push(mp.clone());
        Ok(mp)
    };
    let before_mp = clone(&mut r, "BEFORE")?;
    let pick_mp = clone(&mut r, "PICK")?;
    let full_mp = clone(&mut r, "FULL")?;
    let tool_mp = match &plan.tool {
        Some(_) => Some(clone(&mut r, "TOOL")?),
        None => None,
    };

    // 5. Trace the workload on the pick clone; without a profile pick falls back to bypass.
    let profile = out.join("data/profile.json");
    let trace = match steps::trace_workload(&mut r, spec, &pick_mp, &names, &profile) {
        Ok(summary) => Some(summary),
        Err(e) => {
            let first = format!("{e:#}");
            let first = first.lines().next().unwrap_or_default().to_string();
            let note = format!(
                "tracing was not possible here ({first}); pick mode fell back to bypass mode (every {rs_arg} window spanning more than one fragment), which needs no profile"
            );
            r.say(&format!("  note  {note}"));
            notes.push(note);
            None
        }
    };
    let traced = trace.is_some();

    // 6. Defragment each clone, counting what its device wrote.
    // Each file's times before and after its defragmenter, checked by stat alone.
    let timed = |mp: &Path, run: &mut dyn FnMut() -> Result<DefragFigures>| {
        let before = file_times(mp, &names);
        let mut d = run()?;
        d.times = Some(times_kept(&names, &before, &file_times(mp, &names)));
        Ok::<_, anyhow::Error>(d)
    };
    let pick_name = if traced { "pick" } else { "bypass" };
    let pick_defrag = timed(&pick_mp, &mut || {
        steps::defrag_pick(
            &mut r,
            &pick_mp,
            &pick_mp.join("work"),
            traced.then_some(&*profile),
            &rs_arg,
            "pick",
        )
    })?;
    let full_defrag = timed(&full_mp, &mut || {
        steps::defrag_full(&mut r, &full_mp, &full_mp.join("work"), &rs_arg, "full")
    })?;
    let tool_notes = notes.len();
    let tool_defrag = match (&plan.tool, &tool_mp) {
        (Some((prog, leading)), Some(mp)) => Some(timed(mp, &mut || {
            let targets: Vec<PathBuf> = names.iter().map(|n| mp.join("work").join(n)).collect();
            steps::defrag_tool(
                &mut r,
                (prog, leading),
                mp,
                &targets,
                &mut notes,
                prog,
                &[0],
            )
        })?),
        _ => None,
    };
    // What was set up around the tool, reproduce.sh sets up the same way.
    for n in &mut notes[tool_notes..] {
        n.push_str("; reproduce.sh sets it the same way around the tool");
    }

    // 7. Look at each clone again, then run the workload on every state side by side:
    // each round reads the untouched clone and every defragmented one once, in rotating
    // order; speed-ups are paired per round.
    let mut after: Vec<(String, PathBuf, DefragFigures)> = vec![
        (pick_name.into(), pick_mp, pick_defrag),
        ("full".into(), full_mp, full_defrag),
    ];
    if let (Some((prog, _)), Some(mp), Some(d)) = (&plan.tool, tool_mp, tool_defrag) {
        after.push((prog.to_string(), mp, d));
    }
    let mut scans = vec![before_look.scan];
    let mut states = vec![State {
        name: "before".into(),
        mountpoint: before_mp,
        defrag: None,
        layout: before_look.layout,
        map: before_look.map,
    }];
    for (name, mp, defrag) in after {
        let look = steps::look(&mut r, &name, &mp, &rs_arg)?;
        scans.push(look.scan);
        states.push(State {
            name,
            mountpoint: mp,
            defrag: Some(defrag),
            layout: look.layout,
            map: look.map,
        });
    }
    let rounds = steps::bench_rounds(&mut r, spec, &states, &names)?;
    let workloads = states
        .iter()
        .map(|s| figures::workload_figures(&rounds, &s.mountpoint))
        .collect::<Result<Vec<_>>>()?;
    let methods = figures::methods(states, workloads);
    notes.extend(figures::measurement_notes(&methods, spec, &plan));

    let variables: BTreeMap<String, PathBuf> = r.variables().into_iter().collect();
    r.finish();
    let lab_plan = LabPlan::of(
        spec,
        &methods,
        traced,
        plan.tool.map(|t| t.0.to_string()),
        &r.steps,
    );
    fs::write(
        out.join(PLAN_FILE),
        serde_json::to_string_pretty(&lab_plan)? + "\n",
    )
    .with_context(|| format!("writing {PLAN_FILE}"))?;
    drop(scratches);

    Ok(LabReport {
        version: SCHEMA_VERSION,
        started_utc,
        seconds: t0.elapsed().as_secs_f64(),
        fs: spec.fs.name().to_string(),
        size: spec.size,
        workload: spec.workload,
        workload_description: spec.workload.describe().to_string(),
        request_size: rs,
        files: names.len(),
        file_size: spec.file_size(),
        iterations: spec.iterations,
        seed: spec.seed,
        scratch_dir: spec.scratch_dir.clone(),
        traced,
        trace,
        machine: machine(&base_info.dir),
        scratch: ScratchFigures {
            fs: spec.fs.name().to_string(),
            size: spec.size,
            mkfs: spec.fs.mkfs_command(),
            loop_device: base_info.loop_device.to_string_lossy().into_owned(),
            image: base_info.image.to_string_lossy().into_owned(),
            paf,
            synthetic,
            free_space,
        },
        headline: figures::headline(&methods),
        file_rows: figures::file_rows(&names, &scans),
        methods,
        steps: r.steps.clone(),
        variables,
        notes,
        images: Vec::new(),
    })
}

/// What a run did, in the order it did it, without any figure: reproduce.sh writes the same
/// file, and `fragkit lab --report-only DIR` rebuilds the report from it and the steps'
/// outputs in DIR/data.
pub const PLAN_FILE: &str = "data/lab.json";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LabPlan {
    pub version: u32,
    pub fs: String,
    pub size: u64,
    pub workload: Workload,
    pub files: usize,
    pub paf: String,
    pub iterations: u32,
    pub seed: u64,
    /// The measured states in order: before, pick (or bypass), full, the tool.
    pub states: Vec<String>,
    /// The file system's own defragmenter, when it ran.
    pub tool: Option<String>,
    pub traced: bool,
    pub steps: Vec<PlanStep>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlanStep {
    pub n: usize,
    pub name: String,
    pub command: String,
    pub log: String,
    pub output: Option<String>,
}

impl LabPlan {
    pub fn of(
        spec: &LabSpec,
        methods: &[MethodResult],
        traced: bool,
        tool: Option<String>,
        steps: &[StepRecord],
    ) -> LabPlan {
        LabPlan {
            version: SCHEMA_VERSION,
            fs: spec.fs.name().to_string(),
            size: spec.size,
            workload: spec.workload,
            files: spec.files,
            paf: spec.paf.clone(),
            iterations: spec.iterations,
            seed: spec.seed,
            states: methods.iter().map(|m| m.name.clone()).collect(),
            tool,
            traced,
            steps: steps
                .iter()
                .map(|s| PlanStep {
                    n: s.n,
                    name: s.name.clone(),
                    command: s.command.clone(),
                    log: s.log.clone(),
                    output: s.output.clone(),
                })
                .collect(),
        }
    }

    /// The plan of a finished report (what reproduce.sh writes).
    pub fn of_report(r: &LabReport) -> LabPlan {
        LabPlan {
            version: SCHEMA_VERSION,
            fs: r.fs.clone(),
            size: r.size,
            workload: r.workload,
            files: r.files,
            paf: r.scratch.paf.spec.clone(),
            iterations: r.iterations,
            seed: r.seed,
            states: r.methods.iter().map(|m| m.name.clone()).collect(),
            tool: r
                .methods
                .iter()
                .skip(1)
                .map(|m| m.name.as_str())
                .find(|n| !matches!(*n, "pick" | "bypass" | "full"))
                .map(String::from),
            traced: r.traced,
            steps: r
                .steps
                .iter()
                .map(|s| PlanStep {
                    n: s.n,
                    name: s.name.clone(),
                    command: s.command.clone(),
                    log: s.log.clone(),
                    output: s.output.clone(),
                })
                .collect(),
        }
    }
}

/// `logs/steps.times` as reproduce.sh writes it: per step "N START END STATUS" (seconds
/// since the epoch); steps missing from it get 0 s.
fn step_times(text: &str) -> BTreeMap<usize, (f64, f64, i32)> {
    text.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            Some((
                w.first()?.parse().ok()?,
                (
                    w.get(1)?.parse().ok()?,
                    w.get(2)?.parse().ok()?,
                    w.get(3)?.parse().ok()?,
                ),
            ))
        })
        .collect()
}

/// The report of a finished run rebuilt from `dir`: its plan (data/lab.json) and the steps'
/// outputs in data/ (scans, bench rounds, `bench writes` counts, defrag reports), computed
/// by the same functions as a lab run. Nothing is run.
/// Whether `dir` holds a `lab --app` run's report (report.json naming its application).
fn is_app_run(dir: &Path) -> bool {
    fs::read_to_string(dir.join("report.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .is_some_and(|v| v.get("app").is_some())
}

pub fn report_from_dir(dir: &Path) -> Result<LabReport> {
    let dir = dir
        .canonicalize()
        .with_context(|| format!("--report-only {}: no such directory", dir.display()))?;
    let read = |f: &str| -> Result<String> {
        fs::read_to_string(dir.join(f)).with_context(|| {
            format!(
                "{}: cannot read it (is {} the output directory of fragkit lab or reproduce.sh?)",
                dir.join(f).display(),
                dir.display()
            )
        })
    };
    if !dir.join(PLAN_FILE).exists() && is_app_run(&dir) {
        bail!(
            "--report-only {}: a `lab --app` run, whose report.json and report.html were written complete at its end; --report-only rebuilds a synthetic lab's report from its steps' outputs (reproduce.sh)",
            dir.display()
        );
    }
    let plan: LabPlan = child::parse(PLAN_FILE, &read(PLAN_FILE)?)?;
    let fs_type = FsType::from_name(&plan.fs)
        .with_context(|| format!("{PLAN_FILE}: unknown file system {:?}", plan.fs))?;
    let spec = LabSpec {
        fs: fs_type,
        size: plan.size,
        workload: plan.workload,
        out: dir.clone(),
        files: plan.files,
        paf: plan.paf.clone(),
        iterations: plan.iterations,
        baseline: plan.tool.is_some(),
        keep: false,
        scratch_dir: None,
        seed: plan.seed,
    };
    let base: fragkit_core::scratch::ScratchInfo =
        child::parse("scratch create", &read("data/scratch-base.json")?)?;
    let paf = if plan.paf == figures::NO_PAF {
        child::Paf {
            spec: figures::NO_PAF.into(),
            generations: Vec::new(),
            rest: Default::default(),
        }
    } else {
        child::parse("age paf", &read("data/age-paf.json")?)?
    };
    let synthetic: Synthetic = child::parse(
        "age fragpicker-synthetic",
        &read("data/age-synthetic.json")?,
    )?;
    let names = synthetic.names();
    let free_space = if matches!(fs_type, FsType::Ext4 | FsType::Xfs) {
        Some(child::parse("free", &read("data/free-before.json")?)?)
    } else {
        None
    };
    let trace = if plan.traced {
        Some(TraceSummary::of(&fragkit_trace::profile::Profile::load(
            &dir.join("data/profile.json"),
        )?))
    } else {
        None
    };
    let log_of = |step: &str| {
        plan.steps
            .iter()
            .find(|s| s.name == step)
            .map(|s| fs::read_to_string(dir.join(&s.log)).unwrap_or_default())
            .unwrap_or_default()
    };
    let rounds = (1..=plan.iterations)
        .map(|k| child::parse("bench read", &read(&format!("data/bench-round-{k}.json"))?))
        .collect::<Result<Vec<child::Bench>>>()?;
    let first_round = rounds
        .first()
        .with_context(|| format!("{PLAN_FILE}: no rounds of the workload"))?;
    let mut scans = Vec::new();
    let mut states = Vec::new();
    for (i, name) in plan.states.iter().enumerate() {
        let step = format!("scan ({name})");
        let scan: child::Scan = child::parse(&step, &read(&format!("data/scan-{name}.json"))?)?;
        let layout = figures::layout_figures(&step, &scan)?;
        // Round 1 read the states in order, each state's files in a row (later rounds
        // rotate): the i-th state's files are MOUNTPOINT/work/NAME.
        let mountpoint = first_round
            .jobs
            .get(i * names.len())
            .and_then(|j| j.path.parent()?.parent())
            .map(Path::to_path_buf)
            .with_context(|| {
                format!("data/bench-round-1.json: no job for state {name} (expected {} files per state)", names.len())
            })?;
        let defrag = match name.as_str() {
            "before" => None,
            "pick" | "bypass" | "full" => {
                let which = if name == "full" { "full" } else { "pick" };
                let step = format!("defrag --mode {name}");
                let w: child::Writes =
                    child::parse(&step, &read(&format!("data/writes-{which}.json"))?)?;
                let d: child::Defrag =
                    child::parse(&step, &read(&format!("data/defrag-{which}.json"))?)?;
                Some(figures::fragkit_defrag(
                    &step,
                    &d,
                    figures::writes_figures(&step, &w)?,
                )?)
            }
            tool => {
                let w: child::Writes =
                    child::parse(tool, &read(&format!("data/writes-{tool}.json"))?)?;
                let said =
                    fs::read_to_string(dir.join(format!("data/{tool}.out"))).unwrap_or_default();
                Some(DefragFigures {
                    declined: figures::tool_declined(&format!("{said}\n{}", log_of(tool))),
                    ..figures::writes_figures(tool, &w)?
                })
            }
        };
        scans.push(scan);
        states.push(State {
            name: name.clone(),
            mountpoint,
            defrag,
            layout,
            map: format!("maps/{name}.png"),
        });
    }
    let workloads = states
        .iter()
        .map(|s| figures::workload_figures(&rounds, &s.mountpoint))
        .collect::<Result<Vec<_>>>()?;
    let methods = figures::methods(states, workloads);
    let machine = machine(&base.dir);
    let mut notes = Vec::new();
    if machine.image_store == "tmpfs" {
        notes.push("The scratch images were in RAM (tmpfs), so MB/s measures what each request costs the kernel and the loop device, not the seeks of this machine's disk.".to_string());
    }
    if !plan.traced {
        notes.push("pick mode ran in bypass mode (every request-size window spanning more than one fragment): the run had no traced profile".to_string());
    }
    if plan.tool.as_deref() == Some("e4defrag") {
        notes.push("e4defrag ran with the file system's mb_max_to_scan raised for its run, as fragkit's full mode sets it for its own (docs/defrag.md); see its command".to_string());
    }
    let tool_plan = figures::plan(&spec, |p| plan.tool.as_deref() == Some(p));
    notes.extend(figures::measurement_notes(&methods, &spec, &tool_plan));
    let times = step_times(&fs::read_to_string(dir.join("logs/steps.times")).unwrap_or_default());
    let steps: Vec<StepRecord> = plan
        .steps
        .iter()
        .map(|s| {
            let (t0, t1, code) = times.get(&s.n).copied().unwrap_or((0.0, 0.0, 0));
            StepRecord {
                n: s.n,
                name: s.name.clone(),
                command: s.command.clone(),
                seconds: t1 - t0,
                exit_status: code,
                log: s.log.clone(),
                output: s.output.clone(),
            }
        })
        .collect();
    let first = times.values().map(|t| t.0).fold(f64::INFINITY, f64::min);
    let last = times.values().map(|t| t.1).fold(0.0, f64::max);
    let (started_utc, seconds) = if first.is_finite() {
        (fragkit_core::units::utc(first), last - first)
    } else {
        (utc_now(), 0.0)
    };
    Ok(LabReport {
        version: SCHEMA_VERSION,
        started_utc,
        seconds,
        fs: plan.fs.clone(),
        size: plan.size,
        workload: plan.workload,
        workload_description: plan.workload.describe().to_string(),
        request_size: plan.workload.request_size(),
        files: names.len(),
        file_size: spec.file_size(),
        iterations: plan.iterations,
        seed: plan.seed,
        scratch_dir: None,
        traced: plan.traced,
        trace,
        scratch: ScratchFigures {
            fs: plan.fs.clone(),
            size: plan.size,
            mkfs: fs_type.mkfs_command(),
            loop_device: base.loop_device.to_string_lossy().into_owned(),
            image: base.image.to_string_lossy().into_owned(),
            paf,
            synthetic,
            free_space,
        },
        machine,
        headline: figures::headline(&methods),
        file_rows: figures::file_rows(&names, &scans),
        methods,
        steps,
        variables: BTreeMap::new(),
        notes,
        images: Vec::new(),
    })
}

fn machine(image_dir: &Path) -> Machine {
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
    let image_store = fs::File::open(image_dir)
        .and_then(|d| fragkit_sys::fsinfo::FsInfo::of_fd(std::os::fd::AsFd::as_fd(&d)))
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
    fragkit_core::units::utc(fragkit_core::units::unix_now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_times_read_back_and_bad_lines_are_skipped() {
        let t = step_times("1 10.5 12.0 0\n2 12.0 13.25 1\ngarbage\n3 x 1 0\n");
        assert_eq!(t.len(), 2);
        assert_eq!(t[&1], (10.5, 12.0, 0));
        assert_eq!(t[&2], (12.0, 13.25, 1));
    }

    #[test]
    fn report_only_on_an_app_run_says_what_it_is() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir(d.path().join("data")).unwrap();
        fs::write(d.path().join("report.json"), r#"{"app":"rocksdb"}"#).unwrap();
        let e = format!("{:#}", report_from_dir(d.path()).unwrap_err());
        assert!(e.contains("a `lab --app` run"), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }

    #[test]
    fn report_only_on_a_directory_without_a_lab_is_one_error() {
        let d = tempfile::tempdir().unwrap();
        let e = format!("{:#}", report_from_dir(d.path()).unwrap_err());
        assert!(e.contains("data/lab.json: cannot read it"), "{e}");
        let e = format!("{:#}", report_from_dir(&d.path().join("nope")).unwrap_err());
        assert!(e.contains("no such directory"), "{e}");
    }

    #[test]
    fn images_follow_tmpdir_when_set_else_ram_when_it_fits() {
        let t = Some(PathBuf::from("/var/tmp/x"));
        assert_eq!(
            images_parent(t.clone(), u64::MAX, 1),
            PathBuf::from("/var/tmp/x")
        );
        assert_eq!(images_parent(t, 0, 1), PathBuf::from("/var/tmp/x"));
        assert_eq!(
            images_parent(None, 2 << 30, 1 << 30),
            PathBuf::from("/dev/shm")
        );
        assert_eq!(images_parent(None, 1 << 30, 2 << 30), PathBuf::from("/tmp"));
    }
}
