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
            let r = age::fragpicker::synthetic(&a.dir, a.files, a.size, a.seed)?;
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
    match a.format {
        InfoFormat::Json => print_json(&r)?,
        InfoFormat::Table => {
            for g in &r.generations {
                println!(
                    "generation {}: {} files of {} ({}) at {}/s over {} ranks, {:.1}% -> {:.1}% full, deleted {} -> {:.1}%",
                    g.generation,
                    g.files_written,
                    HumanBytes(g.file_size),
                    HumanBytes(g.bytes_written),
                    HumanBytes(g.populate_bytes_per_second as u64),
                    r.ranks,
                    g.used_pct_before,
                    g.used_pct_after_fill,
                    g.files_deleted,
                    g.used_pct_after_delete
                );
            }
            println!(
                "{:>5} {:>8} {:>10} {:>10} {:>12} {:>10} {:>8}",
                "rank", "files", "written", "seconds", "populate/s", "fragments", "layout"
            );
            for p in &r.per_rank {
                println!(
                    "{:>5} {:>8} {:>10} {:>10.2} {:>12} {:>10} {:>8.4}",
                    p.rank,
                    p.files,
                    HumanBytes(p.bytes_written).to_string(),
                    p.populate_seconds,
                    HumanBytes(p.populate_bytes_per_second as u64).to_string(),
                    p.fragments,
                    p.layout_score
                );
            }
            println!(
                "{} (seed {}) on {} ranks: {} files, {}; wrote {:.2}% of {} (spec {:.0}%), file system +{:.2}% -> {:.2}% used (spec leaves {:.2}%); populate {}/s aggregate; layout score {:.4}, file set {}",
                r.spec,
                r.seed,
                r.ranks,
                r.files,
                HumanBytes(r.bytes),
                r.written_pct,
                HumanBytes(r.capacity),
                r.requested_fill_pct,
                r.added_pct,
                r.used_pct,
                r.requested_remaining_pct,
                HumanBytes(r.populate_bytes_per_second as u64),
                r.layout_score,
                r.file_set_digest
            );
        }
    }
    Ok(0)
}
