//! `fragkit age ...` summaries: one short table per generator (JSON is the report itself).

use fragkit_sys::console::Shown;
use std::io::{self, Write};

use crate::units::HumanBytes;

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

pub fn layout(w: &mut dyn Write, r: &crate::age::layout::LayoutReport) -> io::Result<()> {
    writeln!(
        w,
        "{}: {} on {} by {:?}: {} fragments (requested {}), sizes {}..{} (mean {}), \
                         distances {}..{}; within one block: size {}, distance {}",
        Shown(&r.achieved.path),
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
    )?;
    let o = &r.off_pieces;
    writeln!(
        w,
        "exact: {} of fragments F, {} of gaps D",
        pct(o.exact_fragments),
        pct(o.exact_gaps)
    )?;
    if o.count > 0 {
        let why: Vec<String> = o
            .by_reason
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        writeln!(w, "{} pieces off: {}", o.count, why.join(", "))?;
        for p in o.pieces.iter().take(10) {
            writeln!(
                w,
                "  fragment {} at {}: {} {} (wanted {}): {}",
                p.index,
                HumanBytes(p.logical),
                p.what,
                p.got,
                p.wanted,
                p.reason
            )?;
        }
    }
    Ok(())
}

pub fn paf(w: &mut dyn Write, r: &crate::age::paf::PafReport) -> io::Result<()> {
    for g in r.generations.iter().filter(|_| r.dry_run) {
        writeln!(
            w,
            "generation {} (planned): {} files of {}, then delete {}",
            g.generation,
            g.files_written,
            HumanBytes(g.file_size),
            g.files_deleted
        )?;
    }
    for g in r.generations.iter().filter(|_| !r.dry_run) {
        writeln!(
 w,
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
                        )?;
    }
    writeln!(
        w,
        "{} (seed {}): {} files, {:.1}% of {} used, layout score {:.4}, file set {}",
        r.spec,
        r.seed,
        r.files,
        r.used_pct,
        HumanBytes(r.capacity),
        r.layout_score,
        r.file_set_digest
    )?;
    if let Some(fs) = &r.free_space {
        let buckets: Vec<String> = fs
            .extents
            .buckets
            .iter()
            .map(|b| format!("{}+: {}", HumanBytes(b.min), b.count))
            .collect();
        writeln!(
            w,
            "free space ({}): {} in {} extents [{}]",
            fs.source,
            HumanBytes(fs.free_bytes),
            fs.extents.count,
            buckets.join(", ")
        )?;
    }

    Ok(())
}

pub fn hypothetical(
    w: &mut dyn Write,
    r: &crate::age::hypothetical::HypotheticalReport,
) -> io::Result<()> {
    writeln!(
        w,
        "{}: {} {} {} chunks of {} (stripe {}) on {} [{}{}]: {} fragments, distances {}..{}",
        Shown(&r.achieved.path),
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
    )?;
    writeln!(
        w,
        "  layout {}{}; dummies {}",
        match r.layout {
            crate::age::hypothetical::HypotheticalLayout::Artifact => "artifact",
            crate::age::hypothetical::HypotheticalLayout::Ideal => "ideal",
        },
        if r.approach {
            ", pseudo approach (dummies padded to a multiple of S)"
        } else {
            ""
        },
        HumanBytes(r.dummy_bytes)
    )?;
    let sizes: Vec<String> = r
        .extent_sizes
        .iter()
        .map(|(b, n)| format!("{n} × {}", HumanBytes(*b)))
        .collect();
    writeln!(w, "  fragments: {}", sizes.join(", "))?;
    let mut gaps: Vec<&(i64, u64)> = r.gaps.iter().collect();
    gaps.sort_by_key(|g| std::cmp::Reverse(g.1));
    let shown: Vec<String> = gaps
        .iter()
        .take(8)
        .map(|(b, n)| {
            let size = if *b < 0 {
                format!("-{}", HumanBytes(b.unsigned_abs()))
            } else {
                HumanBytes(*b as u64).to_string()
            };
            format!("{n} × {size}")
        })
        .collect();
    writeln!(
        w,
        "  gaps (most common of {} sizes): {}",
        r.gaps.len(),
        shown.join(", ")
    )?;
    if let Some(rb) = &r.read {
        writeln!(
            w,
            "  read back: {} in {:.3} s = {:.1} MB/s (O_DIRECT 1 MiB, page cache dropped)",
            HumanBytes(rb.bytes),
            rb.seconds,
            rb.mb_s
        )?;
    }
    Ok(())
}

pub(crate) fn fragpicker_synthetic(
    w: &mut dyn Write,
    r: &crate::age::fragpicker::SyntheticReport,
) -> io::Result<()> {
    for f in &r.files {
        writeln!(
            w,
            "{}: {} fragments (expected {} if fully interleaved), sizes {}..{}",
            Shown(&f.path),
            f.fragments,
            r.expected_fragments_per_file,
            HumanBytes(f.frag_sizes.min),
            HumanBytes(f.frag_sizes.max)
        )?;
    }
    let fr = &r.fragmentor;
    match &fr.skipped {
        Some(why) => writeln!(w, "fragmentor: not run ({why})")?,
        None => writeln!(
            w,
            "fragmentor: {} pieces relocated in {:.1} s; {} fragments before, {} after",
            fr.pieces_moved, fr.seconds, fr.fragments_before, r.fragments
        )?,
    }
    writeln!(
        w,
        "achieved {:.0} fragments per file, expected {}",
        r.achieved_fragments_per_file, r.expected_fragments_per_file
    )
}

pub fn profile(w: &mut dyn Write, r: &crate::age::profile::ProfileReport) -> io::Result<()> {
    writeln!(
        w,
        "step  churn_written  files  used%  layout_score  fragments  free_extents"
    )?;
    for p in &r.series {
        writeln!(
            w,
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
        )?;
    }
    writeln!(
        w,
        "profile {} (seed {}): {} created, {} deleted, {} written, file set {}",
        r.profile.name,
        r.seed,
        r.files_created,
        r.files_deleted,
        HumanBytes(r.bytes_written),
        r.file_set_digest
    )?;

    Ok(())
}

/// `age paf` as MPI ranks: per generation, per rank, then the whole.
pub(crate) fn paf_ranks(w: &mut dyn Write, r: &crate::age::paf::PafRanksReport) -> io::Result<()> {
    for g in &r.generations {
        writeln!(
        w,
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
        )?;
    }
    writeln!(
        w,
        "{:>5} {:>8} {:>10} {:>10} {:>12} {:>10} {:>8}",
        "rank", "files", "written", "seconds", "populate/s", "fragments", "layout"
    )?;
    for p in &r.per_rank {
        writeln!(
            w,
            "{:>5} {:>8} {:>10} {:>10.2} {:>12} {:>10} {:>8.4}",
            p.rank,
            p.files,
            HumanBytes(p.bytes_written).to_string(),
            p.populate_seconds,
            HumanBytes(p.populate_bytes_per_second as u64).to_string(),
            p.fragments,
            p.layout_score
        )?;
    }
    writeln!(
        w,
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
    )?;
    Ok(())
}

fn read_line(w: &mut dyn Write, what: &str, rb: &crate::age::ReadBack) -> io::Result<()> {
    writeln!(
        w,
        "  {what}: {} in {:.3} s = {:.1} MB/s (page cache dropped)",
        HumanBytes(rb.bytes),
        rb.seconds,
        rb.mb_s
    )
}

pub fn sqlite(w: &mut dyn Write, r: &crate::age::sqlite::SqliteReport) -> io::Result<()> {
    writeln!(
        w,
        "{}: {} records of {} ({}), dummy {}: {} in {} fragments",
        Shown(&r.achieved.path),
        r.records,
        HumanBytes(r.record_bytes),
        if r.contiguous {
            "contiguous"
        } else {
            "with dummy appends"
        },
        HumanBytes(r.dummy_bytes),
        HumanBytes(r.achieved.size),
        r.achieved.fragments
    )?;
    if let Some(rb) = &r.read {
        read_line(
            w,
            &format!("full table scan of {} rows", r.rows_scanned),
            rb,
        )?;
    }
    Ok(())
}

pub fn fileserver(
    w: &mut dyn Write,
    r: &crate::age::fileserver::FileserverReport,
) -> io::Result<()> {
    writeln!(
        w,
        "fileserver: {} files of {} + {} appends of {} by {} threads ({}): {} in {} fragments, {} files fragmented",
        r.files,
        HumanBytes(r.file_size),
        r.appends,
        HumanBytes(r.append),
        r.threads,
        if r.contiguous { "contiguous" } else { "aged" },
        HumanBytes(r.bytes),
        r.fragments,
        r.fragmented_files
    )?;
    if let Some(rb) = &r.read {
        read_line(w, "read whole files, O_DIRECT 1 MiB", rb)?;
    }
    Ok(())
}

pub fn filebench(w: &mut dyn Write, r: &crate::age::filebench::FilebenchReport) -> io::Result<()> {
    writeln!(
        w,
        "fileserver (filebench {}): {} files (gamma mean {}, shape {}), {} preallocated, {} threads x {} loops in {:.2} s, seed {}",
        r.personality,
        r.spec.files,
        HumanBytes(r.spec.mean_file_size),
        r.spec.size_gamma,
        r.preallocated,
        r.spec.threads,
        r.spec.loops,
        r.run_seconds,
        r.spec.seed
    )?;
    writeln!(
        w,
        "  {:<16} {:>9} {:>11} {:>9} {:>9}",
        "flowop", "ops", "ops/s", "MB/s", "ms/op"
    )?;
    for f in &r.flowops {
        writeln!(
            w,
            "  {:<16} {:>9} {:>11.1} {:>9.1} {:>9.3}",
            f.name, f.ops, f.ops_per_s, f.mb_per_s, f.ms_per_op
        )?;
    }
    writeln!(
        w,
        "  {:<16} {:>9} {:>11.1} {:>9.1}",
        "total", r.total_ops, r.ops_per_s, r.mb_per_s
    )?;
    writeln!(
        w,
        "files created {}, deleted {}; {} at the end, {} in {} fragments, {} files fragmented (set {})",
        r.created,
        r.deleted,
        r.files_at_end,
        HumanBytes(r.bytes_at_end),
        r.fragments,
        r.fragmented_files,
        r.file_set_digest
    )
}
