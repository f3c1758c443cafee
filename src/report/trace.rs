//! `fragkit trace` output: the summary table and the closing lines on stderr.

use std::io::{self, Write};
use std::path::Path;

use crate::trace::loader::TraceStats;
use crate::trace::profile::Profile;
use crate::trace::summary::Summary;
use crate::units::HumanBytes;

/// The hottest `top` ranges (0 = all) and what fragmentation cost the traced accesses.
pub(crate) fn write_summary(w: &mut dyn Write, s: &Summary, top: usize) -> io::Result<()> {
    let shown = if top == 0 {
        s.ranges.len()
    } else {
        top.min(s.ranges.len())
    };
    writeln!(
        w,
        "hottest {shown} of {} ranges (extra requests per access at R = {}):",
        s.ranges.len(),
        HumanBytes(s.request_size)
    )?;
    writeln!(
        w,
        "{:>8} {:>8} {:>14} {:>10} {:>6} {:>7}  PATH",
        "READS", "WRITES", "OFFSET", "LENGTH", "FRAGS", "EXTRA"
    )?;
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |x| x.to_string());
    for r in &s.ranges[..shown] {
        writeln!(
            w,
            "{:>8} {:>8} {:>14} {:>10} {:>6} {:>7}  {}",
            r.reads,
            r.writes,
            r.offset,
            HumanBytes(r.length).to_string(),
            opt(r.fragments),
            opt(r.extra_requests_per_access),
            r.path
        )?;
    }
    let extra: u64 = s
        .ranges
        .iter()
        .filter_map(|r| {
            r.extra_requests_per_access
                .map(|x| x * (r.reads + r.writes))
        })
        .sum();
    writeln!(
        w,
        "{} calls traced, {} dropped; fragmentation cost the traced accesses {} extra requests",
        s.events, s.dropped, extra
    )?;
    if let Some(model) = &s.model {
        let (now, ideal) = s
            .ranges
            .iter()
            .filter_map(|r| {
                let n = r.reads + r.writes;
                Some((r.modeled_ns_per_access? * n, r.modeled_contiguous_ns? * n))
            })
            .fold((0u64, 0u64), |a, b| (a.0 + b.0, a.1 + b.1));
        writeln!(
            w,
            "modeled on {model} (each access a sequential read of its range in R-sized requests, mapping from FIEMAP in physical order): {:.3} ms now, {:.3} ms if the files were contiguous ({})",
            now as f64 / 1e6,
            ideal as f64 / 1e6,
            if ideal > 0 {
                format!("×{:.2}", now as f64 / ideal as f64)
            } else {
                "–".into()
            }
        )?;
    }
    writeln!(
        w,
        "not traced (missing from these counts): {}",
        s.not_traced
    )
}

/// What was traced, how much was lost, where the profile went.
pub(crate) fn write_end(
    w: &mut dyn Write,
    stats: &TraceStats,
    profile: &Profile,
    output: Option<&Path>,
) -> io::Result<()> {
    let ranges: usize = profile.files.iter().map(|f| f.ranges.len()).sum();
    writeln!(
        w,
        "fragkit: traced {} calls in {:.1} s ({} dropped); {} files, {} ranges{}{}",
        stats.events,
        stats.duration.as_secs_f64(),
        stats.dropped(),
        profile.files.len(),
        ranges,
        if profile.unresolved_files > 0 {
            format!(
                " ({} files without a path: deleted?)",
                profile.unresolved_files
            )
        } else {
            String::new()
        },
        match output {
            Some(p) => format!("; profile in {}", p.display()),
            None => String::new(),
        }
    )?;
    if stats.dropped() > 0 {
        writeln!(
            w,
            "fragkit: {} records dropped (ring buffer full): the profile undercounts",
            stats.dropped()
        )?;
    }
    Ok(())
}
