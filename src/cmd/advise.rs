//! `fragkit advise PATH... [--device D] [--profile P | --trace-for SECS --comm NAME] [--apply]`

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::cli::{AdviseArgs, ReportFormat};
use crate::defrag::advise::{self, Advice, AdviseOptions, Fix};
use crate::defrag::migrate::Method;
use crate::defrag::plan::Profile;
use crate::defrag::{self, DefragOptions, DefragReport};
use crate::device::DeviceModel;
use crate::io::device::{BlockDevice, DeviceStats};
use crate::layout::walk::{self, WalkOptions};
use crate::report::{self, advise as out};
use crate::scan::{FileEntry, DEFAULT_REQUEST_SIZE};

/// What `--apply` did to one file, beside what was predicted.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Applied {
    #[serde(flatten, serialize_with = "fragkit_core::units::path_fields")]
    pub path: PathBuf,
    pub fix: Fix,
    pub predicted_bytes: u64,
    pub moved_bytes: u64,
    pub before_ns: u64,
    pub predicted_ns: u64,
    pub achieved_ns: u64,
}

/// `--apply`'s whole account: per file, the device's own write count, each defrag run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ApplyReport {
    pub files: Vec<Applied>,
    pub predicted_bytes: u64,
    pub moved_bytes: u64,
    /// Bytes the file systems' block devices wrote during the runs (data, metadata and
    /// journal; other writers to those devices included).
    pub device_written_bytes: u64,
    pub predicted_ns: u64,
    pub achieved_ns: u64,
    pub defrag: Vec<DefragReport>,
}

/// Exit status: 0 advice given (and, with --apply, carried out), 1 some path could not be
/// read or some planned move was refused or skipped (each named), 2 an error.
pub fn run(args: AdviseArgs) -> Result<i32> {
    let device =
        DeviceModel::parse(&args.device).with_context(|| format!("--device {}", args.device))?;
    if args.apply && !nix::unistd::geteuid().is_root() {
        bail!("advise --apply needs root (defrag's migration ioctls do); run it as root, or leave out --apply to only advise");
    }
    if args.trace_for.is_some() && !nix::unistd::geteuid().is_root() {
        bail!("advise --trace-for needs root (the eBPF tracer does); record a profile with `sudo fragkit trace -o FILE` and give --profile FILE");
    }
    // Checked before a trace is recorded for nothing.
    let roots = roots(&args.paths)?;
    let profile = match (&args.profile, args.trace_for) {
        (Some(p), _) => Some(Profile::load(p)?),
        (None, Some(d)) => Some(record(d, args.comm.as_deref().unwrap_or_default())?),
        (None, None) => None,
    };
    let opts = AdviseOptions {
        device,
        request_size: args.io_size,
        profile,
        profile_label: match &args.profile {
            Some(p) => fragkit_sys::console::printable(&p.to_string_lossy()).into_owned(),
            None => "FILE (record one with `fragkit trace -o FILE`)".into(),
        },
        hot_pct: args.hot_pct,
        reads: args.reads,
    };
    let (files, mut status) = scan(&roots);
    let advice = advise::advise(&files, &opts)?;
    let applied = if args.apply {
        let (a, s) = apply(&args, &opts, &advice)?;
        status = status.max(s);
        Some(a)
    } else {
        None
    };
    report::to_stdout(|w| match args.format {
        ReportFormat::Json => report::write_json_pretty(
            w,
            &serde_json::json!({ "advice": advice, "prevention": advise::prevention(&advice), "applied": applied }),
        ),
        ReportFormat::Table => {
            out::write_table(w, &advice, args.top)?;
            if let Some(a) = &applied {
                out::write_applied(w, a)?;
            }
            Ok(())
        }
    })?;
    Ok(status)
}

/// The paths checked as walk roots (one-line error for a missing or unreadable one).
fn roots(paths: &[PathBuf]) -> Result<Vec<walk::Root>> {
    paths
        .iter()
        .map(|p| walk::check_root(p).map_err(|e| anyhow::anyhow!("{e}")))
        .collect()
}

/// Every regular file under the roots; unreadable ones named on stderr (status 1).
fn scan(roots: &[walk::Root]) -> (Vec<FileEntry>, i32) {
    let bar = crate::report::progress::files_spinner();
    let found = crate::scan::scan_roots(
        roots,
        &WalkOptions::default(),
        &[DEFAULT_REQUEST_SIZE],
        &|n| bar.set_position(n),
    );
    bar.finish_and_clear();
    for e in &found.errors {
        fragkit_sys::stderr_line!("fragkit: {}: {}", e.path.display(), e.message);
    }
    (found.files, i32::from(!found.errors.is_empty()))
}

/// `--trace-for D --comm NAME`: the accesses of NAME for D, as a profile.
fn record(duration: std::time::Duration, comm: &str) -> Result<Profile> {
    use crate::trace::{collect::Collector, loader, ranges::Hotness};
    let filter = loader::Filter {
        pids: Vec::new(),
        comm: Some(comm.to_string()),
        cgroup: None,
        mount: None,
    };
    let announce = || {
        fragkit_sys::stderr_line!(
            "fragkit: tracing {comm} for {:.0} s; stop early with Ctrl-C",
            duration.as_secs_f64()
        )
    };
    let stop = loader::Stop {
        signalled: crate::sys::signals::interrupt_flag(false),
        duration: Some(duration),
        on_attached: &announce,
    };
    let mut collector = Collector::new();
    let stats = loader::trace(&filter, None, &stop, &mut |e| collector.add(e))?;
    let profile = collector.finish(&stats, &Hotness::default());
    if profile.files.is_empty() {
        bail!("--trace-for: {comm} did no file I/O the tracer sees in {:.0} s (read/write/pread/pwrite calls; not mmap, io_uring or AIO)", duration.as_secs_f64());
    }
    serde_json::from_str(&profile.to_json()).context("the recorded profile")
}

/// Carry out the advice: each fix's files through defrag in that mode, within one budget,
/// then the same files priced again.
fn apply(args: &AdviseArgs, opts: &AdviseOptions, advice: &Advice) -> Result<(ApplyReport, i32)> {
    let mut groups: BTreeMap<Fix, Vec<PathBuf>> = BTreeMap::new();
    for f in &advice.files {
        if f.chosen().is_some() {
            groups.entry(f.fix).or_default().push(f.path.clone());
        }
    }
    let devices = devices(groups.values().flatten());
    let before = device_stats(&devices)?;
    let mut reports = Vec::new();
    let mut budget = args.budget;
    let mut status = 0;
    for (fix, paths) in &groups {
        let Some(mode) = fix.mode(opts) else { continue };
        let o = DefragOptions {
            mode,
            request_size: opts.request_size,
            method: Method::Auto,
            verify: true,
            dry_run: false,
            max_rate: args.max_rate,
            budget,
            unshare: false,
            force: false,
            allow_unsafe: false,
            jobs: 1,
            interrupt: Some(crate::sys::signals::interrupt_flag(true)),
        };
        let r = defrag::run(paths, &o, &|_, _| {})?;
        status = status.max(r.summary.exit_code());
        if let Some(b) = &mut budget {
            *b = b.saturating_sub(r.summary.bytes_moved);
        }
        let stop = r.summary.interrupted || budget == Some(0);
        reports.push(r);
        if stop {
            break;
        }
    }
    let after = device_stats(&devices)?;
    let written: u64 = before
        .iter()
        .zip(&after)
        .map(|(b, a)| b.delta(a).write_bytes)
        .sum();
    // The same files priced again, with the same accesses.
    let moved: HashMap<&Path, u64> = reports
        .iter()
        .flat_map(|r| r.files.iter().map(|f| (f.path.as_path(), f.bytes_moved)))
        .collect();
    let paths: Vec<PathBuf> = groups.values().flatten().cloned().collect();
    let again = if paths.is_empty() {
        None
    } else {
        let (files, _) = scan(&roots(&paths)?);
        Some(advise::advise(&files, opts)?)
    };
    let now_of: HashMap<&Path, u64> = again
        .iter()
        .flat_map(|a| a.files.iter().map(|f| (f.path.as_path(), f.now.time_ns)))
        .collect();
    let files: Vec<Applied> = advice
        .files
        .iter()
        .filter_map(|f| {
            let o = f.chosen()?;
            Some(Applied {
                path: f.path.clone(),
                fix: f.fix,
                predicted_bytes: o.bytes,
                moved_bytes: moved.get(f.path.as_path()).copied().unwrap_or(0),
                before_ns: f.now.time_ns,
                predicted_ns: o.after_ns,
                achieved_ns: now_of
                    .get(f.path.as_path())
                    .copied()
                    .unwrap_or(f.now.time_ns),
            })
        })
        .collect();
    Ok((
        ApplyReport {
            predicted_bytes: files.iter().map(|f| f.predicted_bytes).sum(),
            moved_bytes: files.iter().map(|f| f.moved_bytes).sum(),
            device_written_bytes: written,
            predicted_ns: files.iter().map(|f| f.predicted_ns).sum(),
            achieved_ns: files.iter().map(|f| f.achieved_ns).sum(),
            files,
            defrag: reports,
        },
        status,
    ))
}

/// The block devices under the paths, each once.
fn devices<'a>(paths: impl Iterator<Item = &'a PathBuf>) -> Vec<BlockDevice> {
    let mut out: Vec<BlockDevice> = Vec::new();
    for p in paths {
        if let Ok(d) = BlockDevice::for_path(p) {
            if !out.iter().any(|x| x.name == d.name) {
                out.push(d);
            }
        }
    }
    out
}

fn device_stats(devices: &[BlockDevice]) -> Result<Vec<DeviceStats>> {
    devices.iter().map(|d| d.settled_stats()).collect()
}
