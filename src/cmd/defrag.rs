//! `fragkit defrag PATH...`

use std::io::{self, IsTerminal};

use anyhow::{bail, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::{DefragArgs, DefragMethod, DefragMode, ReportFormat};
use crate::defrag::migrate::Method;
use crate::defrag::plan::{Mode, Profile};
use crate::defrag::{self, DefragOptions};
use crate::report::{self, defrag as out};

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
    let jobs = match args.jobs {
        Some(0) => bail!("-j 0: expected at least 1 (the number of files defragmented at once)"),
        Some(n) => n,
        // Pick and bypass with the safe primitive: one file per CPU. Two workers used to
        // leave windows split (they took turns in the same free runs, and blocks their
        // moves freed came back only at the next journal commit); a range without a whole
        // donor now commits once and tries again, and `-j 2` leaves the layout `-j 1` does
        // (bench/defrag-jobs-layout.sh, docs/defrag.md). Full mode places each file by a
        // free-space plan that two workers would both count on, and the rewrite method
        // has no such retry: one file at a time.
        None if matches!(mode, Mode::Pick { .. } | Mode::Bypass)
            && args.method == DefragMethod::Auto =>
        {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
        None => 1,
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
        jobs,
        // Ctrl-C ends the run through its normal path: moves in flight finish and are made
        // durable, knobs are put back, the report says what was done.
        interrupt: (!args.dry_run).then(|| crate::sys::signals::interrupt_flag(true)),
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
    // Workers report from several threads: never move the bar backwards.
    let progress = |done: u64, total: u64| {
        bar.set_length(total);
        bar.set_position(done.max(bar.position()));
    };
    let report = defrag::run(&args.paths, &opts, &progress)?;
    bar.finish_and_clear();
    report::to_stdout(|w| match args.format {
        ReportFormat::Json => report::write_json_pretty(w, &report),
        ReportFormat::Table => out::write_table(w, &report),
    })?;
    Ok(report.summary.exit_code())
}
