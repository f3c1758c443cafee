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
    let opts = DefragOptions {
        mode,
        request_size: args.io_size,
        method: match args.method {
            DefragMethod::Auto => Method::Auto,
            DefragMethod::Rewrite => Method::Rewrite,
        },
        verify: !args.no_verify,
        dry_run: args.dry_run,
        max_rate: args.max_rate.map(|mb| (mb * 1_000_000.0) as u64),
        budget: args.budget,
        unshare: args.unshare,
        force: args.force,
        allow_unsafe: args.r#unsafe,
    };
    if let Some(r) = args.max_rate {
        if r <= 0.0 {
            bail!("--max-rate {r}: expected MB/s greater than zero");
        }
    }
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
    report::to_stdout(|w| match args.format {
        ReportFormat::Json => report::write_json_pretty(w, &report),
        ReportFormat::Table => out::write_table(w, &report),
    })?;
    let s = &report.summary;
    Ok(if s.verify_failures > 0 || s.ranges_failed > 0 {
        1
    } else {
        0
    })
}
