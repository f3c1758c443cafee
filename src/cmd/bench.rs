//! `fragkit bench read|write FILE...` and `fragkit bench writes -- COMMAND...`

use std::io::{self, IsTerminal};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::{
    BenchAction, BenchDofArgs, BenchFormat, BenchIoArgs, BenchIorArgs, BenchPafArgs, BenchPattern,
    BenchSweepArgs, BenchWritesArgs, EngineArg,
};
use crate::io::{self as engine_io, BlockDevice, EngineKind, JobSpec, Op, Pattern};
use crate::report::bench::{self as out, BenchJob, WritesReport};

pub fn run(action: BenchAction) -> Result<i32> {
    match action {
        BenchAction::Read(a) => run_io(a, Op::Read),
        BenchAction::Write(a) => run_io(a, Op::Write),
        BenchAction::Writes(a) => run_writes(a),
        BenchAction::Sweep(a) => run_sweep(a),
        BenchAction::Dof(a) => run_dof(a),
        BenchAction::Fast24(a) => run_fast24(a),
        BenchAction::Paf(a) => run_paf(a),
        BenchAction::Fragpicker(a) => run_fragpicker(a),
        BenchAction::Sqlite(a) => run_sqlite(a),
        BenchAction::Ior(a) => {
            let cluster = crate::cluster::Cluster::init()?;
            let r = run_ior(a, &cluster);
            cluster.finish(r)
        }
    }
}

/// A progress bar on a terminal, hidden otherwise (pipes, tests, CI).
pub(crate) fn progress(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr_with_hz(10));
    if !io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{bar:30}} {{pos}}/{{len}} {what} {{msg}} {{elapsed}}"
        ))
        .expect("static template"),
    );
    bar
}

pub(crate) fn engine_kind(e: EngineArg) -> EngineKind {
    match e {
        EngineArg::Uring => EngineKind::Uring,
        EngineArg::Psync => EngineKind::Psync,
    }
}

fn spec_for(a: &BenchIoArgs, op: Op, path: &Path) -> JobSpec {
    let mut spec = JobSpec::new(path, op);
    spec.block_size = a.bs;
    spec.queue_depth = a.qd;
    spec.pattern = match a.pattern {
        BenchPattern::Seq => Pattern::Sequential,
        BenchPattern::Stride => Pattern::Stride { gap: a.gap },
        BenchPattern::Random => Pattern::Random {
            seed: a.seed,
            align: a.align.unwrap_or(a.bs),
        },
    };
    spec.direct = a.direct;
    spec.engine = engine_kind(a.engine);
    spec.offset = a.offset;
    spec.size = a.size;
    spec.count = a.count;
    spec.iterations = a.iterations;
    spec.warmup = a.warmup;
    spec.drop_caches = !a.no_drop_caches;
    spec.read_mapping_first = !a.cold_mapping;
    spec.clip_at_eof = true;
    spec
}

fn run_io(a: BenchIoArgs, op: Op) -> Result<i32> {
    if a.pattern != BenchPattern::Stride && a.gap != 0 {
        bail!("--gap {}: only meaningful with --pattern stride", a.gap);
    }
    if a.pattern != BenchPattern::Random && a.align.is_some() {
        bail!("--align: only meaningful with --pattern random");
    }
    if !a.model.is_empty() && op != Op::Read {
        bail!("--model: only read jobs are modeled");
    }
    if !a.model.is_empty() && !a.direct {
        bail!(
            "--model: needs --direct (buffered reads reach the device as the page cache's readahead, not as the job's requests)"
        );
    }
    let (mut ssd, mut hdd) = (None, None);
    for m in &a.model {
        match crate::bench::DeviceModel::parse(m)? {
            crate::bench::DeviceModel::Ssd(_) if ssd.is_some() => {
                bail!("--model {m}: one SSD model per run (and at most one disk model)")
            }
            crate::bench::DeviceModel::Hdd(_) if hdd.is_some() => {
                bail!("--model {m}: one disk model per run (and at most one SSD model)")
            }
            crate::bench::DeviceModel::Ssd(p) => ssd = Some(p),
            crate::bench::DeviceModel::Hdd(p) => hdd = Some(p),
        }
    }
    if ssd.is_some() && hdd.is_some() && matches!(a.format, BenchFormat::Csv) {
        bail!("--model twice: not with --format csv (its model columns hold one model); use --format json");
    }
    let total = a.files.len() as u64 * (a.iterations + a.warmup) as u64;
    let bar = progress(total, "iterations");
    let mut jobs = Vec::new();
    for path in &a.files {
        let spec = spec_for(&a, op, path);
        bar.set_message(path.display().to_string());
        let result = engine_io::run_job_observed(&spec, &mut |_, _| bar.inc(1))?;
        bar.inc(spec.warmup as u64);
        let layout = crate::bench::predict_requests(&spec, &result)?;
        let model = match &ssd {
            Some(p) => Some(crate::bench::model_reads(p, &spec, &result)?),
            None => None,
        };
        let model_hdd = match &hdd {
            Some(p) => Some(crate::bench::model_reads_hdd(p, &spec, &result)?),
            None => None,
        };
        jobs.push(BenchJob {
            result,
            layout,
            model,
            model_hdd,
        });
    }
    bar.finish_and_clear();
    crate::report::to_stdout(|w| match a.format {
        BenchFormat::Table => out::write_table(w, &jobs),
        BenchFormat::Json => out::write_json(w, &jobs),
        BenchFormat::Csv => out::write_csv(w, &jobs),
    })?;
    Ok(0)
}

/// Exit status: the command's own (so scripts see its failure), after the report.
fn run_writes(a: BenchWritesArgs) -> Result<i32> {
    let device = match (&a.device, &a.path) {
        (Some(d), _) => BlockDevice::from_name(d)?,
        (None, Some(p)) => BlockDevice::for_path(p)?,
        (None, None) => {
            bail!("bench writes: give --device DEV or --path PATH (the device to count on)")
        }
    };
    let program = &a.command[0];
    // Opened before the command runs: a path that cannot be written fails before it does.
    let command_stdout = match &a.command_output {
        Some(f) => Stdio::from(
            std::fs::File::create(f)
                .with_context(|| format!("--command-output {}: cannot create", f.display()))?,
        ),
        None => Stdio::from(io::stderr()),
    };
    // A signal does not end this process while the command runs: it is waited for, so
    // nothing it holds (files open on a file system about to be unmounted) outlives us.
    let flag = crate::sys::signals::interrupt_flag(true);
    if !a.no_sync {
        nix::unistd::sync();
    }
    let before = device.settled_stats()?;
    let t = Instant::now();
    // The command's stdout goes to our stderr (or --command-output) so that stdout holds
    // only the report.
    let mut child = Command::new(program)
        .args(&a.command[1..])
        .stdout(command_stdout)
        .spawn()
        .map_err(|e| anyhow!("{program}: cannot run: {e}"))?;
    let mut passed_on = false;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if !passed_on && flag.load(std::sync::atomic::Ordering::SeqCst) {
            passed_on = true;
            // SIGTERM was sent to this process alone: the command gets it too. SIGINT from
            // a terminal reached the whole process group, the command with it.
            if crate::sys::signals::first_signal() == Some(libc::SIGTERM) {
                let pid = nix::unistd::Pid::from_raw(child.id() as i32);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let command_seconds = t.elapsed().as_secs_f64();
    if !a.no_sync {
        // Buffered writes the command left dirty belong to it.
        nix::unistd::sync();
    }
    let seconds = t.elapsed().as_secs_f64();
    let after = device
        .settled_stats()
        .context("reading device counters after the command")?;
    let report = WritesReport {
        version: out::SCHEMA_VERSION,
        command: a.command.clone(),
        exit_status: status.code(),
        device: device.clone(),
        synced: !a.no_sync,
        command_seconds,
        seconds,
        counts: before.delta(&after),
    };
    crate::report::to_stdout(|w| match a.format {
        BenchFormat::Table => out::write_writes_table(w, &report),
        BenchFormat::Json => out::write_writes_json(w, &report),
        BenchFormat::Csv => out::write_writes_csv(w, &report),
    })?;
    Ok(status.code().unwrap_or(128 + status_signal(&status)))
}

fn status_signal(s: &std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    s.signal().unwrap_or(1)
}

fn run_sweep(a: BenchSweepArgs) -> Result<i32> {
    use crate::bench::sweep::{self, SweepSpec};
    use crate::report::bench_runs as runs;
    crate::scratch::require_root("bench sweep")?;
    // Stop between points on SIGINT/SIGTERM; the scratch file system goes with the error.
    crate::sys::signals::interrupt_flag(true);
    let spec = SweepSpec {
        fs: a.fs,
        size: a.size,
        frag_sizes: a.frag_size.0,
        frag_distances: a.frag_distance.0,
        request_size: a.request_size,
        iterations: a.iterations,
        scratch_size: a.scratch_size,
        keep: a.keep,
    };
    // Before anything derives sizes from the lists (a zero F would divide by zero).
    sweep::validate(&spec)?;
    let n = (spec.frag_sizes.len() * spec.frag_distances.len()) as u64;
    let bar = progress(n, "layouts laid out and read");
    bar.enable_steady_tick(std::time::Duration::from_millis(250));
    bar.set_message(format!(
        "(scratch {} of {})",
        spec.fs.name(),
        crate::units::short_size(
            spec.scratch_size
                .unwrap_or_else(|| sweep::scratch_size_for(&spec))
        )
    ));
    let report = sweep::run(&spec, &mut |p| {
        bar.set_message(format!(
            "last F={} D={}: {:.0} reads, {:.0} MB/s",
            crate::units::short_size(p.frag_size),
            crate::units::short_size(p.frag_distance),
            p.device_reads,
            p.mb_per_s.mean
        ));
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    if let Some(png) = &a.plot {
        runs::sweep_plot(png, &report)?;
    }
    crate::report::to_stdout(|w| match a.format {
        BenchFormat::Table => runs::sweep_table(w, &report),
        BenchFormat::Json => runs::sweep_json(w, &report),
        BenchFormat::Csv => runs::sweep_csv(w, &report),
    })?;
    if let Some(png) = &a.plot {
        fragkit_sys::stderr_line!("plot written to {}", png.display());
    }
    Ok(0)
}

fn run_fast24(a: crate::cli::BenchFast24Args) -> Result<i32> {
    use crate::bench::fast24;
    crate::scratch::require_root("bench fast24")?;
    use crate::cli::Fast24Family as F;
    let only: Vec<fast24::Family> = a
        .only
        .iter()
        .map(|f| match f {
            F::Hypothetical => fast24::Family::Hypothetical,
            F::Sqlite => fast24::Family::Sqlite,
            F::Fileserver => fast24::Family::Fileserver,
        })
        .collect();
    let spec = fast24::Fast24Spec {
        only,
        images_in: fast24::images_dir(),
        quick: a.quick,
        seed: a.seed,
        traces: a.keep_traces,
    };
    let bar = progress(fast24::runs(&spec.only), "runs");
    bar.enable_steady_tick(std::time::Duration::from_millis(250));
    let report = fast24::run(&spec, &mut |name| {
        bar.set_message(format!("last: {name}"));
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    crate::report::to_stdout(|w| match a.format {
        BenchFormat::Table => crate::report::fast24::table(w, &report),
        BenchFormat::Json => crate::report::write_json_pretty(w, &report),
        BenchFormat::Csv => crate::report::fast24::csv(w, &report),
    })?;
    Ok(0)
}

fn run_fragpicker(a: crate::cli::BenchFragpickerArgs) -> Result<i32> {
    use crate::bench::fragpicker::{self, Workload};
    use crate::cli::FragpickerWorkload as W;
    let workloads: Vec<Workload> = if a.workloads.is_empty() {
        Workload::ALL.to_vec()
    } else {
        a.workloads
            .iter()
            .map(|w| match w {
                W::SeqRead => Workload::SeqRead,
                W::StrideRead => Workload::StrideRead,
                W::SeqUpdate => Workload::SeqUpdate,
                W::StrideUpdate => Workload::StrideUpdate,
            })
            .collect()
    };
    let bar = progress((workloads.len() * a.files.len()) as u64, "jobs");
    let report = fragpicker::run(&a.files, &workloads, a.runs, &mut |name| {
        bar.set_message(format!("last: {name}"));
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    crate::report::to_stdout(|w| match a.format {
        BenchFormat::Table => crate::report::fragpicker::table(w, &report),
        BenchFormat::Json => crate::report::write_json_pretty(w, &report),
        BenchFormat::Csv => crate::report::fragpicker::csv(w, &report),
    })?;
    Ok(0)
}

fn run_dof(a: BenchDofArgs) -> Result<i32> {
    use crate::bench::dof::{self, DofSpec};
    use crate::report::bench_runs as runs;
    crate::scratch::require_root("bench dof")?;
    // Stop between points on SIGINT/SIGTERM; the scratch file system goes with the error.
    crate::sys::signals::interrupt_flag(true);
    let spec = DofSpec {
        fs: a.fs,
        size: a.size,
        dofs: a.dof.0,
        frag_distance: a.frag_distance,
        request_size: a.bs,
        queue_depths: a.qd,
        iterations: a.iterations,
        scratch_size: a.scratch_size,
    };
    dof::validate(&spec)?;
    let bar = progress(
        (spec.dofs.len() * spec.queue_depths.len()) as u64,
        "DoF × QD points",
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(250));
    let report = dof::run(&spec, &mut |p| {
        bar.set_message(format!(
            "last DoF {} QD {}: {:.0} MB/s",
            p.dof, p.queue_depth, p.mb_per_s.mean
        ));
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    if let Some(png) = &a.plot {
        runs::dof_plot(png, &report)?;
    }
    crate::report::to_stdout(|w| match a.format {
        BenchFormat::Table => runs::dof_table(w, &report),
        BenchFormat::Json => runs::dof_json(w, &report),
        BenchFormat::Csv => runs::dof_csv(w, &report),
    })?;
    Ok(0)
}

fn run_paf(a: BenchPafArgs) -> Result<i32> {
    if !a.mpi && crate::cluster::launched() {
        // Each rank would run the whole matrix by itself into the same CSV (ranks = 1).
        return Err(crate::cluster::EveryRank("bench paf: started by an MPI launcher (mpirun, srun) without --mpi: every rank would run the whole matrix on its own and write the same output; add --mpi to run it as the job's ranks, or start it without a launcher".into()).into());
    }
    if !a.mpi {
        // Stop between runs on SIGINT/SIGTERM; the cell's scratch goes with the error.
        crate::sys::signals::interrupt_flag(true);
        return run_paf_on(a, None);
    }
    let cluster = crate::cluster::Cluster::init()?;
    let r = run_paf_on(a, Some(&cluster));
    cluster.finish(r)
}

fn run_paf_on(a: BenchPafArgs, cluster: Option<&crate::cluster::Cluster>) -> Result<i32> {
    use crate::bench::paf_matrix::{self, MatrixSpec};
    use crate::report::bench_runs as runs;
    match cluster {
        Some(c) => c.agree(crate::scratch::require_root("bench paf"))?,
        None => crate::scratch::require_root("bench paf")?,
    }
    let model = match a.model.as_deref() {
        None => None,
        Some(_) if cluster.is_some() => {
            bail!("--model: not with --mpi (the ranks' files are not priced on the disk model)")
        }
        Some(m) => match crate::bench::DeviceModel::parse(m)? {
            crate::bench::DeviceModel::Hdd(p) => Some(p),
            crate::bench::DeviceModel::Ssd(_) => bail!(
                "--model {m}: bench paf prices its files on the disk model; expected hdd or hdd@OFFSET"
            ),
        },
    };
    if cluster.is_none_or(|c| c.is_root()) {
        if let Some(dir) = &a.plot_dir {
            // Before the matrix, not after hours of it.
            runs::check_plot_dir(dir)?;
        }
    }
    let ranks = cluster.map_or(1, |c| c.size() as u64);
    let spec = MatrixSpec {
        fs: a.fs,
        fs_size: a
            .fs_size
            .unwrap_or_else(|| paf_matrix::fitting_fs_size(&a.capacities.0, a.bench_size, ranks)),
        capacities: a.capacities.0,
        frags: a.frag.0,
        xfers: a.xfer.0,
        iterations: a.iterations,
        bench_size: a.bench_size,
        file_size: a.file_size,
        seed: a.seed,
        csv: a.csv,
        ranks,
        model,
    };
    if cluster.is_none() {
        paf_matrix::validate(&spec)?;
    }
    let bar = progress(
        (spec.capacities.len() * spec.frags.len()) as u64,
        "cells (capacity × fragmentation)",
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(250));
    let mut on_cell = |c, p, skipped| {
        bar.set_message(format!(
            "last {c}% / {p}%{}",
            if skipped { " (already in the CSV)" } else { "" }
        ));
        bar.inc(1);
    };
    let report = match cluster {
        None => paf_matrix::run(&spec, &mut on_cell)?,
        Some(c) => match paf_matrix::run_ranks(&spec, c, &mut on_cell)? {
            Some(r) => r,
            None => return Ok(0),
        },
    };
    bar.finish_and_clear();
    let plots = match &a.plot_dir {
        Some(dir) => runs::paf_plots(dir, &report)?,
        None => Vec::new(),
    };
    crate::report::to_stdout(|w| match a.format {
        BenchFormat::Table => runs::paf_table(w, &report),
        BenchFormat::Json => runs::paf_json(w, &report),
        BenchFormat::Csv => runs::paf_csv(w, &report),
    })?;
    for p in plots {
        fragkit_sys::stderr_line!("heat map written to {}", p.display());
    }
    Ok(0)
}

fn run_ior(a: BenchIorArgs, cluster: &crate::cluster::Cluster) -> Result<i32> {
    use crate::bench::ior::{self, IorLayout, IorSpec, ReadOrder};
    let both = !a.write && !a.read;
    let spec = IorSpec {
        dir: a.dir,
        xfers: a.xfer.0,
        block: a.block,
        direct: a.direct,
        write: a.write || both,
        read: a.read || both,
        iterations: a.iterations,
        layout: if a.file_per_process {
            IorLayout::FilePerProcess
        } else {
            IorLayout::SharedFile
        },
        order: if a.no_reorder {
            ReadOrder::Own
        } else if a.reorder_random {
            ReadOrder::Random {
                nodes: a.reorder_offset as usize,
                seed: a.reorder_seed,
            }
        } else {
            ReadOrder::Constant {
                nodes: a.reorder_offset as usize,
            }
        },
        segments: a.segments,
        random_offsets: a.random_offsets,
        deadline: a.deadline.map(|d| d.as_secs_f64()),
        keep: a.keep,
        fsync: a.fsync,
        verbose: a.verbose,
    };
    let Some(report) = ior::run(&spec, cluster)? else {
        return Ok(0);
    };
    crate::report::to_stdout(|w| match a.format {
        BenchFormat::Table => crate::report::ior::table(w, &report),
        BenchFormat::Json => crate::report::ior::json(w, &report),
        BenchFormat::Csv => crate::report::ior::csv(w, &report),
    })?;
    Ok(0)
}

fn run_sqlite(a: crate::cli::BenchSqliteArgs) -> Result<i32> {
    use crate::bench::sqlite::{self, SqliteReadSpec};
    use std::io::Write as _;
    let spec = SqliteReadSpec {
        db: a.db,
        scans: a.scans,
        duration: a.duration,
    };
    let every = a.progress;
    let started = std::time::Instant::now();
    let r = sqlite::run(&spec, &mut |rows| {
        // A caller samples the application's throughput from these lines; the time since
        // the start lets it place them when they were printed, not when they arrived.
        if every > 0 && rows % every == 0 {
            let secs = started.elapsed().as_secs_f64();
            fragkit_sys::stderr_line!("progress: {rows} rows in {secs:.6} s");
        }
    })?;
    crate::report::to_stdout(|w| match a.format {
        crate::cli::InfoFormat::Json => crate::report::write_json_pretty(w, &r),
        crate::cli::InfoFormat::Table => writeln!(
            w,
            "bench sqlite: {} scan{} of {} ({}): {} rows in {:.2} s: {:.0} rows/s, {:.1} MiB/s",
            r.scans,
            if r.scans == 1 { "" } else { "s" },
            r.db.display(),
            crate::units::HumanBytes(r.db_bytes),
            r.rows,
            r.seconds,
            r.rows_per_s,
            r.mib_per_s
        ),
    })?;
    Ok(0)
}
