//! `fragkit age layout|fragpicker-synthetic|hypothetical|paf|profile`: thin wrappers over
//! the generators in `crate::age`; `report::age` prints their summaries.

use anyhow::{bail, Result};

use crate::age;
use crate::cli::{AgeAction, FileserverMix, InfoFormat};
use crate::report::{self, age as out};

pub fn run(action: AgeAction) -> Result<i32> {
    match action {
        AgeAction::Layout(a) => {
            // Stop between pieces on SIGINT/SIGTERM: the filler, the half-made target and
            // the knobs go back through the normal error path.
            crate::sys::signals::interrupt_flag(true);
            let spec = age::layout::LayoutSpec {
                path: a.file,
                size: a.size,
                frag_size: a.frag_size,
                frag_distance: a.frag_distance,
                seed: a.seed,
                force: a.force,
                progress: true,
            };
            let r = age::layout::build(&spec)?;
            report::to_stdout(|w| match a.format {
                InfoFormat::Json => report::write_json_pretty(w, &r),
                InfoFormat::Table => out::layout(w, &r),
            })?;
            Ok(0)
        }
        AgeAction::Paf(a) => {
            let cluster = crate::cluster::Cluster::init()?;
            if crate::cluster::launched() {
                let r = paf_ranks(&a, &cluster);
                return cluster.finish(r);
            }
            let spec = age::paf::PafSpec::parse(&a.spec)?;
            let mut opts = age::paf::PafOptions {
                seed: a.seed,
                force: a.force,
                dry_run: a.dry_run,
                progress: true,
                ..Default::default()
            };
            if let Some(t) = a.threads {
                opts.threads = t;
            }
            let r = age::paf::run(&spec, &a.target, &opts)?;
            report::to_stdout(|w| match a.format {
                InfoFormat::Json => report::write_json_pretty(w, &r),
                InfoFormat::Table => out::paf(w, &r),
            })?;
            Ok(0)
        }
        AgeAction::Hypothetical(a) => {
            let spec = age::hypothetical::HypotheticalSpec {
                path: a.file,
                mode: a.mode,
                pattern: a.pattern,
                chunk: a.chunk,
                stripe: a.stripe,
                size: a.size,
                direct: a.direct,
                tune: !a.no_tune,
                keep_dummies: a.keep_dummies,
                seed: a.seed,
                layout: a.layout,
                approach: a.approach,
                read_back: a.read_back,
            };
            let dir = match spec.path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => std::path::PathBuf::from("."),
            };
            let r = recorded(&dir, a.block_trace.as_deref(), || {
                age::hypothetical::build(&spec)
            })?;
            report::to_stdout(|w| match a.format {
                InfoFormat::Json => report::write_json_pretty(w, &r),
                InfoFormat::Table => out::hypothetical(w, &r),
            })?;
            Ok(0)
        }
        AgeAction::Sqlite(a) => {
            let spec = age::sqlite::SqliteSpec {
                dir: a.dir,
                records: a.records,
                dummy_bytes: a.dummy,
                contiguous: a.contiguous,
                read_back: a.read_back,
                seed: a.seed,
            };
            let r = recorded(&spec.dir, a.block_trace.as_deref(), || {
                age::sqlite::run(&spec)
            })?;
            report::to_stdout(|w| match a.format {
                InfoFormat::Json => report::write_json_pretty(w, &r),
                InfoFormat::Table => out::sqlite(w, &r),
            })?;
            Ok(0)
        }
        AgeAction::Fileserver(a) if a.mix == FileserverMix::Filebench => {
            if a.appends.is_some() || a.contiguous || a.read_back {
                bail!("age fileserver: --appends, --contiguous and --read-back apply to --mix artifact only");
            }
            let spec = age::filebench::FilebenchSpec {
                dir: a.dir,
                files: a.files,
                dir_width: 20,
                mean_file_size: a.file_size,
                size_gamma: a.size_gamma,
                prealloc_pct: a.prealloc,
                threads: a.threads.unwrap_or(50),
                iosize: a.iosize,
                append_max: a.append.unwrap_or(16 << 10),
                loops: a.loops.unwrap_or(a.files),
                seed: a.seed,
            };
            let r = recorded(&spec.dir, a.block_trace.as_deref(), || {
                age::filebench::run(&spec)
            })?;
            report::to_stdout(|w| match a.format {
                InfoFormat::Json => report::write_json_pretty(w, &r),
                InfoFormat::Table => out::filebench(w, &r),
            })?;
            Ok(0)
        }
        AgeAction::Fileserver(a) => {
            if a.loops.is_some() {
                bail!("age fileserver: --loops applies to --mix filebench only (the artifact counts --appends)");
            }
            let spec = age::fileserver::FileserverSpec {
                dir: a.dir,
                files: a.files,
                file_size: a.file_size,
                dir_width: 20,
                threads: a.threads.unwrap_or(10),
                append: a.append.unwrap_or(32 << 10),
                appends: a.appends.unwrap_or(2 * a.files),
                contiguous: a.contiguous,
                read_back: a.read_back,
                seed: a.seed,
            };
            let r = recorded(&spec.dir, a.block_trace.as_deref(), || {
                age::fileserver::run(&spec)
            })?;
            report::to_stdout(|w| match a.format {
                InfoFormat::Json => report::write_json_pretty(w, &r),
                InfoFormat::Table => out::fileserver(w, &r),
            })?;
            Ok(0)
        }
        AgeAction::FragpickerSynthetic(a) => {
            use crate::age::fragpicker::Fragmentor;
            let fragmentor = match a.fragmentor {
                crate::cli::FragmentorArg::Auto => Fragmentor::Auto,
                crate::cli::FragmentorArg::On => Fragmentor::On,
                crate::cli::FragmentorArg::Off => Fragmentor::Off,
            };
            let r = age::fragpicker::synthetic(&a.dir, a.files, a.size, a.seed, fragmentor)?;
            report::to_stdout(|w| match a.format {
                InfoFormat::Json => report::write_json_pretty(w, &r),
                InfoFormat::Table => out::fragpicker_synthetic(w, &r),
            })?;
            Ok(0)
        }
        AgeAction::Profile(a) => {
            let spec = age::profile::ProfileSpec {
                target: a.target,
                fullness_pct: a.fullness,
                sizes: age::profile::SizeProfile::load(&a.sizes)?,
                churn: a.churn,
                steps: a.steps,
                seed: a.seed,
                force: a.force,
                progress: true,
            };
            let r = age::profile::run(&spec)?;
            report::to_stdout(|w| match a.format {
                InfoFormat::Json => report::write_json_pretty(w, &r),
                InfoFormat::Table => out::profile(w, &r),
            })?;
            Ok(0)
        }
    }
}

/// `age paf` as one rank of an MPI job: every rank ages its share, rank 0 prints the whole.
fn paf_ranks(a: &crate::cli::AgePafArgs, cluster: &crate::cluster::Cluster) -> Result<i32> {
    let spec = cluster.agree(age::paf::PafSpec::parse(&a.spec))?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let opts = age::paf::PafOptions {
        seed: a.seed,
        force: a.force,
        dry_run: a.dry_run,
        progress: cluster.is_root(),
        // The host's cores shared among the ranks on it.
        threads: a
            .threads
            .unwrap_or((cores / cluster.local_size().max(1)).max(1)),
    };
    let mine = age::paf::run_ranks(&spec, &a.target, &opts, cluster)?;
    let Some(mut all) = cluster.gather(&mine)? else {
        return Ok(0);
    };
    all[0] = mine;
    let r = age::paf::PafRanksReport::from_ranks(&spec, all)?;
    report::to_stdout(|w| match a.format {
        InfoFormat::Json => report::write_json_pretty(w, &r),
        InfoFormat::Table => out::paf_ranks(w, &r),
    })?;
    Ok(0)
}

/// Run `work`, recording the block requests of the device `dir` lives on to `out` (with
/// each request's file resolved under that file system's mount) when asked.
pub(crate) fn recorded<R: Send>(
    dir: &std::path::Path,
    out: Option<&std::path::Path>,
    work: impl FnOnce() -> Result<R> + Send,
) -> Result<R> {
    let Some(out) = out else {
        return work();
    };
    let (dev, mount) = age::device_of(dir)?;
    let (mut trace, r) = crate::trace::block::record_during(&dev, work)?;
    let r = r?;
    crate::trace::block::resolve_owners(&mut trace, &mount)?;
    std::fs::write(out, trace.to_json() + "\n")
        .map_err(|e| anyhow::anyhow!("writing the block trace to {}: {e}", out.display()))?;
    fragkit_sys::stderr_line!(
        "fragkit: {} block requests on {} ({} dropped); trace in {}",
        trace.requests.len(),
        trace.device,
        trace.dropped,
        out.display()
    );
    Ok(r)
}
