//! `fragkit age layout|fragpicker-synthetic|hypothetical|paf|profile`: thin wrappers over
//! the generators in `crate::age`; `report::age` prints their summaries.

use anyhow::Result;

use crate::age;
use crate::cli::{AgeAction, InfoFormat};
use crate::report::{self, age as out};

pub fn run(action: AgeAction) -> Result<i32> {
    match action {
        AgeAction::Layout(a) => {
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
            };
            let r = age::hypothetical::build(&spec)?;
            report::to_stdout(|w| match a.format {
                InfoFormat::Json => report::write_json_pretty(w, &r),
                InfoFormat::Table => out::hypothetical(w, &r),
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
