//! `fragkit defrag PATH...`

use std::io::{self, IsTerminal};

use anyhow::{bail, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::{DefragArgs, DefragMethod, DefragMode, ReportFormat};
use crate::defrag::migrate::Method;
use crate::defrag::plan::{Mode, Profile};
use crate::defrag::{self, DefragOptions, DefragReport};
use crate::units::{short_size, HumanBytes};

pub fn run(args: DefragArgs) -> Result<i32> {
    let mode = match args.mode {
        DefragMode::Pick => {
            let Some(p) = &args.profile else {
                bail!("--mode pick needs --profile FILE (a profile written by `fragkit trace`)");
            };
            if !(args.hot_pct > 0.0 && args.hot_pct <= 100.0) {
                bail!(
                    "--hot-pct {}: expected a percentage in (0, 100]",
                    args.hot_pct
                );
            }
            Mode::Pick {
                profile: Profile::load(p)?,
                hot_pct: args.hot_pct,
            }
        }
        DefragMode::Bypass => Mode::Bypass,
        DefragMode::Full => Mode::Full,
    };
    let opts = DefragOptions {
        mode,
        request_size: args.io_size,
        method: match args.method {
            DefragMethod::Auto => Method::Auto,
            DefragMethod::Rewrite => Method::Rewrite,
        },
        verify: !args.no_verify,
        dry_run: args.dry_run,
        max_rate: args.max_rate,
        budget: args.budget,
        unshare: args.unshare,
        force: args.force,
        allow_unsafe: args.r#unsafe,
    };
    let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr_with_hz(10));
    if !io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:30} {bytes}/{total_bytes} migrated ({bytes_per_sec}) {elapsed}",
        )
        .expect("static template"),
    );
    let progress = |done: u64, total: u64| {
        bar.set_length(total);
        bar.set_position(done);
    };
    let report = defrag::run(&args.paths, &opts, &progress)?;
    bar.finish_and_clear();
    match args.format {
        ReportFormat::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        ReportFormat::Table => print_table(&report),
    }
    let s = &report.summary;
    Ok(if s.verify_failures > 0 || s.ranges_failed > 0 {
        1
    } else {
        0
    })
}

fn print_table(r: &DefragReport) {
    let label = short_size(r.request_size);
    println!(
        "{:>9} {:>9} {:>10} {:>10}  {:<22} PATH",
        "FRAGS",
        format!("REQ@{label}"),
        "PLANNED",
        "MOVED",
        "RESULT"
    );
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
        println!(
            "{:>4}→{:<4} {:>4}→{:<4} {:>10} {:>10}  {:<22} {}",
            f.fragments_before,
            f.fragments_after,
            f.split_before,
            f.split_after,
            HumanBytes(f.bytes_planned).to_string(),
            HumanBytes(f.bytes_moved).to_string(),
            result,
            f.path.display()
        );
        for x in f.ranges.iter().filter(|x| x.reason.is_some()) {
            println!(
                "      range {}+{}: {}",
                x.offset,
                x.length,
                x.reason.as_deref().unwrap_or_default()
            );
        }
    }
    let s = &r.summary;
    println!();
    println!(
        "{} mode at {label}{}: {} files scanned, {} planned, {} changed, {} refused",
        r.mode,
        if r.dry_run { " (dry run)" } else { "" },
        s.files_scanned,
        s.files_planned,
        s.files_changed,
        s.files_refused
    );
    println!(
        "ranges: {} planned, {} moved, {} skipped, {} failed; bytes: {} planned, {} moved",
        s.ranges_planned,
        s.ranges_moved,
        s.ranges_skipped,
        s.ranges_failed,
        HumanBytes(s.bytes_planned),
        HumanBytes(s.bytes_moved)
    );
    println!(
        "extra requests at {label} for one sequential read of each file: {} before, {} after{}; {:.1} s",
        s.extra_before,
        s.extra_after,
        if r.dry_run { " (expected)" } else { "" },
        s.elapsed_ms as f64 / 1000.0
    );
    for t in &r.tunables {
        println!(
            "{}: {} -> {} for the run, {}",
            t.knob.display(),
            t.from,
            t.to,
            if t.restored {
                format!("restored to {}", t.from)
            } else {
                "NOT RESTORED".to_string()
            }
        );
    }
    if s.verify_failures > 0 {
        println!("VERIFICATION FAILED on {} ranges", s.verify_failures);
    }
    if s.budget_exhausted {
        println!("--budget reached: some ranges were left for a later run");
    }
}
