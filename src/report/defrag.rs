//! `fragkit defrag` report: per-file before/after and the run's totals.

use fragkit_sys::console::Shown;
use std::io::{self, Write};

use crate::defrag::migrate::SkipKind;
use crate::defrag::DefragReport;
use crate::units::{short_size, HumanBytes};

/// One line per file (and per range with a reason), then the totals.
pub(crate) fn write_table(w: &mut dyn Write, r: &DefragReport) -> io::Result<()> {
    let label = short_size(r.request_size);
    let s = &r.summary;
    if s.ranges_planned == 0 && s.files_refused == 0 && r.files.is_empty() {
        // Nothing planned and nothing refused: every file already reads as few requests
        // as this mode aims for.
        return writeln!(
            w,
            "{} mode at {label}: nothing to do: {} files scanned, no range worth moving ({} extra requests at {label})",
            r.mode, s.files_scanned, s.extra_before
        );
    }
    writeln!(
        w,
        "{:>9} {:>9} {:>10} {:>10}  {:<22} PATH",
        "FRAGS",
        format!("REQ@{label}"),
        "PLANNED",
        "MOVED",
        "RESULT"
    )?;
    for f in &r.files {
        let result = if let Some(why) = &f.refused {
            format!("refused: {why}")
        } else if r.dry_run {
            format!("{} ranges planned", f.ranges.len())
        } else {
            let moved = f.ranges.iter().filter(|x| x.status == "moved").count();
            let failed = f.ranges.iter().filter(|x| x.status == "failed").count();
            let skipped = f.ranges.iter().filter(|x| x.status == "skipped").count();
            format!("{moved} moved, {skipped} skipped, {failed} failed")
        };
        writeln!(
            w,
            "{:>4}→{:<4} {:>4}→{:<4} {:>10} {:>10}  {:<22} {}",
            f.fragments_before,
            f.fragments_after,
            f.split_before,
            f.split_after,
            HumanBytes(f.bytes_planned).to_string(),
            HumanBytes(f.bytes_moved).to_string(),
            result,
            Shown(&f.path)
        )?;
        if let Some(why) = &f.worse {
            writeln!(w, "      WORSE: {why}")?;
        }
        if let Some(why) = &f.vanished {
            writeln!(w, "      VANISHED: {why}")?;
        }
        if f.times_kept == Some(false) {
            writeln!(
                w,
                "      TIMES CHANGED: {} (by the move's primitive, or by another process meanwhile)",
                f.times_changed.join(", ")
            )?;
        }
        // Ranges an interruption left unstarted are counted once at the end, not listed.
        for x in f
            .ranges
            .iter()
            .filter(|x| x.reason.is_some() && x.skip != Some(SkipKind::Interrupted))
        {
            writeln!(
                w,
                "      range {}+{}: {}",
                x.offset,
                x.length,
                x.reason.as_deref().unwrap_or_default()
            )?;
        }
    }
    writeln!(w)?;
    writeln!(
        w,
        "{} mode at {label}{}: {} files scanned, {} planned, {} changed, {} refused",
        r.mode,
        if r.dry_run { " (dry run)" } else { "" },
        s.files_scanned,
        s.files_planned,
        s.files_changed,
        s.files_refused
    )?;
    writeln!(
        w,
        "ranges: {} planned, {} moved, {} skipped, {} failed; bytes: {} planned, {} moved",
        s.ranges_planned,
        s.ranges_moved,
        s.ranges_skipped,
        s.ranges_failed,
        HumanBytes(s.bytes_planned),
        HumanBytes(s.bytes_moved)
    )?;
    writeln!(
 w,
        "extra requests at {label} for one sequential read of each file: {} before, {} after{}; {:.1} s",
        s.extra_before,
        s.extra_after,
        if r.dry_run { " (expected)" } else { "" },
        s.elapsed_ms as f64 / 1000.0
    )?;
    for t in &r.tunables {
        writeln!(
            w,
            "{}: {} -> {} for the run, {}",
            t.knob.display(),
            t.from,
            t.to,
            if t.restored {
                format!("restored to {}", t.from)
            } else {
                "NOT RESTORED".to_string()
            }
        )?;
    }
    if s.files_changed > 0 {
        if s.files_times_changed == 0 {
            writeln!(
                w,
                "times: atime, mtime and ctime as before on every changed file"
            )?;
        } else {
            writeln!(
                w,
                "TIMES CHANGED on {} of {} changed files (listed above)",
                s.files_times_changed, s.files_changed
            )?;
        }
    }
    if s.verify_failures > 0 {
        writeln!(w, "VERIFICATION FAILED on {} ranges", s.verify_failures)?;
    }
    if s.ranges_moved_not_better > 0 {
        writeln!(
            w,
            "MOVED BUT NOT BETTER: {} ranges the file system placed no better (listed above)",
            s.ranges_moved_not_better
        )?;
    }
    if s.files_worse > 0 {
        writeln!(
            w,
            "WORSE: {} files came out worse than they went in (listed above)",
            s.files_worse
        )?;
    }
    if s.sync_ms > 0 {
        writeln!(
            w,
            "durable: every changed file fsynced (ext4: and its journal committed) before this report ({:.2} s)",
            s.sync_ms as f64 / 1000.0
        )?;
    }
    if s.commits_for_space > 0 {
        writeln!(
            w,
            "space: committed the file system {} time(s) so that blocks freed by earlier moves could hold ranges that found no whole free run",
            s.commits_for_space
        )?;
    }
    if s.checksum_chunks_direct > 0 {
        writeln!(
            w,
            "checksums: {} of {} chunks were not in the page cache after readahead and were read again with O_DIRECT (memory pressure)",
            s.checksum_chunks_direct,
            s.checksum_chunks_cached + s.checksum_chunks_direct
        )?;
    }
    if s.shared_bytes_unshared > 0 {
        writeln!(
            w,
            "--unshare: {} of shared (reflinked or snapshot) extents moved; their sharing is broken and they now use space of their own",
            HumanBytes(s.shared_bytes_unshared)
        )?;
    }
    if s.budget_exhausted {
        writeln!(w, "--budget reached: some ranges were left for a later run")?;
    }
    if s.interrupted {
        let (n, bytes) = r
            .files
            .iter()
            .flat_map(|f| &f.ranges)
            .filter(|x| x.skip == Some(SkipKind::Interrupted))
            .fold((0u64, 0u64), |(n, b), x| (n + 1, b + x.length));
        writeln!(
            w,
            "INTERRUPTED: {n} ranges ({}) not started; the moves reported above finished and are durable",
            HumanBytes(bytes)
        )?;
    }
    Ok(())
}
