//! `fragkit age layout|fragpicker-synthetic|hypothetical|paf|profile`: thin wrappers over
//! the generators in `crate::age`, printing their JSON report or a short summary.

use anyhow::Result;
use serde::Serialize;

use crate::age;
use crate::cli::{AgeAction, InfoFormat};
use crate::units::HumanBytes;

fn print_json<T: Serialize>(report: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(report)?);
    Ok(())
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

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
            match a.format {
                InfoFormat::Json => print_json(&r)?,
                InfoFormat::Table => {
                    println!(
                        "{}: {} on {} by {:?}: {} fragments (requested {}), sizes {}..{} (mean {}), \
                         distances {}..{}; within one block: size {}, distance {}",
                        r.achieved.path.display(),
                        HumanBytes(r.achieved.size),
                        r.achieved.fs,
                        r.technique,
                        r.achieved.fragments,
                        r.requested.fragments,
                        HumanBytes(r.achieved.frag_sizes.min),
                        HumanBytes(r.achieved.frag_sizes.max),
                        HumanBytes(r.achieved.frag_sizes.mean() as u64),
                        HumanBytes(r.achieved.frag_distances.min),
                        HumanBytes(r.achieved.frag_distances.max),
                        pct(r.size_fidelity),
                        pct(r.distance_fidelity),
                    );
                }
            }
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
            match a.format {
                InfoFormat::Json => print_json(&r)?,
                InfoFormat::Table => {
                    for g in r.generations.iter().filter(|_| r.dry_run) {
                        println!(
                            "generation {} (planned): {} files of {}, then delete {}",
                            g.generation,
                            g.files_written,
                            HumanBytes(g.file_size),
                            g.files_deleted
                        );
                    }
                    for g in r.generations.iter().filter(|_| !r.dry_run) {
                        println!(
                            "generation {}: {} files of {} ({} at {}/s), {:.1}% -> {:.1}% full, deleted {} -> {:.1}%",
                            g.generation,
                            g.files_written,
                            HumanBytes(g.file_size),
                            HumanBytes(g.bytes_written),
                            HumanBytes(g.populate_bytes_per_second as u64),
                            g.used_pct_before,
                            g.used_pct_after_fill,
                            g.files_deleted,
                            g.used_pct_after_delete
                        );
                    }
                    println!(
                        "{} (seed {}): {} files, {:.1}% of {} used, layout score {:.4}, file set {}",
                        r.spec,
                        r.seed,
                        r.files,
                        r.used_pct,
                        HumanBytes(r.capacity),
                        r.layout_score,
                        r.file_set_digest
                    );
                    if let Some(fs) = &r.free_space {
                        let buckets: Vec<String> = fs
                            .extents
                            .buckets
                            .iter()
                            .map(|b| format!("{}+: {}", HumanBytes(b.min), b.count))
                            .collect();
                        println!(
                            "free space ({}): {} in {} extents [{}]",
                            fs.source,
                            HumanBytes(fs.free_bytes),
                            fs.extents.count,
                            buckets.join(", ")
                        );
                    }
                }
            }
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
            match a.format {
                InfoFormat::Json => print_json(&r)?,
                InfoFormat::Table => println!(
                    "{}: {} {} {} chunks of {} (stripe {}) on {} [{}{}]: {} fragments, distances {}..{}",
                    r.achieved.path.display(),
                    r.mode,
                    r.pattern,
                    r.chunks,
                    HumanBytes(r.chunk),
                    HumanBytes(r.stripe),
                    r.setup.fs,
                    r.setup.mount_options,
                    r.setup
                        .tunables
                        .iter()
                        .map(|(k, v)| format!("; {k}={v}"))
                        .collect::<String>(),
                    r.achieved.fragments,
                    HumanBytes(r.achieved.frag_distances.min),
                    HumanBytes(r.achieved.frag_distances.max),
                ),
            }
            Ok(0)
        }
        AgeAction::FragpickerSynthetic(a) => {
            let r = age::fragpicker::synthetic(&a.dir, a.files, a.size, a.seed)?;
            match a.format {
                InfoFormat::Json => print_json(&r)?,
                InfoFormat::Table => {
                    for f in &r.files {
                        println!(
                            "{}: {} fragments (expected {} if fully interleaved), sizes {}..{}",
                            f.path.display(),
                            f.fragments,
                            r.expected_fragments_per_file,
                            HumanBytes(f.frag_sizes.min),
                            HumanBytes(f.frag_sizes.max)
                        );
                    }
                }
            }
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
            match a.format {
                InfoFormat::Json => print_json(&r)?,
                InfoFormat::Table => {
                    println!(
                        "step  churn_written  files  used%  layout_score  fragments  free_extents"
                    );
                    for p in &r.series {
                        println!(
                            "{:>4}  {:>13}  {:>5}  {:>5.1}  {:>12.4}  {:>9}  {:>12}",
                            p.step,
                            HumanBytes(p.churn_bytes).to_string(),
                            p.files,
                            p.used_pct,
                            p.layout_score,
                            p.fragments,
                            p.free_space
                                .as_ref()
                                .map_or("-".to_string(), |f| f.extents.count.to_string())
                        );
                    }
                    println!(
                        "profile {} (seed {}): {} created, {} deleted, {} written, file set {}",
                        r.profile.name,
                        r.seed,
                        r.files_created,
                        r.files_deleted,
                        HumanBytes(r.bytes_written),
                        r.file_set_digest
                    );
                }
            }
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
