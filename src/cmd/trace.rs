//! `fragkit trace [--pid P] [--comm N] [--cgroup C] [--mount M] [-o FILE] [--summary] [-- CMD]`

use std::io::{self, IsTerminal, Write};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use crate::cli::{TraceArgs, TraceFormat};
use crate::layout::walk::map_path;
use crate::metrics::range_request_count;
use crate::trace::collect::Collector;
use crate::trace::loader::{self, Filter, Stop};
use crate::trace::profile::Profile;
use crate::trace::ranges::Hotness;
use crate::units::HumanBytes;

/// Exit status: that of CMD when one was launched (128+signal if it was killed), else 0.
pub fn run(args: TraceArgs) -> Result<i32> {
    let filter = Filter {
        pids: args.pid.clone(),
        comm: args.comm.clone(),
        cgroup: args.cgroup.clone(),
        mount: args.mount.clone(),
    };
    if !args.pid.is_empty() && !args.command.is_empty() {
        bail!("--pid and -- CMD both choose the processes to trace: give one of them");
    }
    let mut command = args.command.split_first().map(|(prog, rest)| {
        let mut c = Command::new(prog);
        c.args(rest);
        c
    });

    if let Some(dev) = &args.block {
        return run_block(dev, &args, command.as_mut());
    }

    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(4));
    if !io::stderr().is_terminal() || command.is_some() {
        // A launched command owns the terminal; don't draw over its output.
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template("{spinner} tracing: {pos} calls ({per_sec}) {elapsed}")
            .expect("static template"),
    );
    bar.enable_steady_tick(Duration::from_millis(250));

    let mut collector = Collector::new();
    let mut n = 0u64;
    let mut on_event = |e: &loader::Event| {
        collector.add(e);
        n += 1;
        if n % 4096 == 0 {
            bar.set_position(n);
        }
    };
    let launching = command.is_some();
    let announce = || {
        // Scripts (and the tests) wait for this line before starting the traced work.
        if !launching {
            eprintln!("fragkit: tracing; stop with Ctrl-C or SIGTERM");
        }
    };
    let stop = Stop {
        signalled: loader::stop_on_signals(),
        duration: args.duration.map(Duration::from_secs_f64),
        on_attached: &announce,
    };
    let stats = loader::trace(&filter, command.as_mut(), &stop, &mut on_event)?;
    bar.finish_and_clear();

    let hot = Hotness {
        top_pct: args.hot_pct,
        min_count: args.min_count,
    };
    let profile = collector.finish(&stats, &hot);
    if let Some(out) = &args.output {
        std::fs::write(out, profile.to_json() + "\n")
            .map_err(|e| anyhow::anyhow!("writing the profile to {}: {e}", out.display()))?;
    }

    let stdout = io::stdout();
    let mut w = stdout.lock();
    let written = if args.summary {
        let s = summarize(&profile, args.request_size);
        match args.format {
            TraceFormat::Json => writeln!(w, "{}", serde_json::to_string_pretty(&s)?),
            TraceFormat::Table => write_summary(&mut w, &s, args.top),
        }
    } else if args.output.is_none() || args.format == TraceFormat::Json {
        writeln!(w, "{}", profile.to_json())
    } else {
        Ok(())
    };
    match written.and_then(|_| w.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
        Err(e) => bail!("writing output: {e}"),
    }

    let ranges: usize = profile.files.iter().map(|f| f.ranges.len()).sum();
    eprintln!(
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
        match &args.output {
            Some(p) => format!("; profile in {}", p.display()),
            None => String::new(),
        }
    );
    if stats.dropped() > 0 {
        eprintln!(
            "fragkit: {} records dropped ({} ring buffer full, {} calls without task storage): the profile undercounts",
            stats.dropped(),
            stats.dropped_ring,
            stats.dropped_pending
        );
    }
    Ok(match stats.command_status {
        Some(s) => {
            use std::os::unix::process::ExitStatusExt;
            s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
        }
        None => 0,
    })
}

/// `trace --block DEV -o FILE [--mount M] [-- CMD]`: the block trace `fragkit ssd` replays.
fn run_block(
    dev: &std::path::Path,
    args: &TraceArgs,
    command: Option<&mut Command>,
) -> Result<i32> {
    if !args.pid.is_empty() || args.comm.is_some() || args.cgroup.is_some() || args.summary {
        bail!("--block records every request on the device: --pid, --comm, --cgroup and --summary do not apply");
    }
    let out = args.output.as_ref().expect("clap requires -o with --block");
    let launching = command.is_some();
    let announce = || {
        if !launching {
            eprintln!("fragkit: tracing; stop with Ctrl-C or SIGTERM");
        }
    };
    let stop = Stop {
        signalled: loader::stop_on_signals(),
        duration: args.duration.map(Duration::from_secs_f64),
        on_attached: &announce,
    };
    let mut rec = crate::trace::block::record(dev, command, &stop)?;
    let resolved = match &args.mount {
        Some(m) => Some(crate::trace::block::resolve_owners(&mut rec.trace, m)?),
        None => None,
    };
    std::fs::write(out, rec.trace.to_json() + "\n")
        .map_err(|e| anyhow::anyhow!("writing the block trace to {}: {e}", out.display()))?;
    eprintln!(
        "fragkit: {} block requests on {} ({} dropped, {} completions without an issue){}; trace in {}",
        rec.trace.requests.len(),
        rec.trace.device,
        rec.trace.dropped,
        rec.unmatched_completions,
        match resolved {
            Some(n) => format!("; {n} resolved to a file"),
            None => String::new(),
        },
        out.display()
    );
    if rec.trace.dropped > 0 {
        eprintln!(
            "fragkit: {} events dropped (ring buffer full): the trace is incomplete",
            rec.trace.dropped
        );
    }
    Ok(match rec.status {
        Some(s) => {
            use std::os::unix::process::ExitStatusExt;
            s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
        }
        None => 0,
    })
}

#[derive(Debug, Serialize)]
pub struct Summary {
    pub version: u32,
    pub kind: &'static str,
    pub duration_ns: u64,
    pub events: u64,
    pub dropped: u64,
    pub request_size: u64,
    /// Hottest first.
    pub ranges: Vec<SummaryRange>,
}

#[derive(Debug, Serialize)]
pub struct SummaryRange {
    pub path: String,
    pub offset: u64,
    pub length: u64,
    pub reads: u64,
    pub writes: u64,
    /// Data fragments the range touches now (None if the file could not be mapped).
    pub fragments: Option<u64>,
    /// S(R) − I(R) for reading just this range: device requests each access spends
    /// because of fragmentation.
    pub extra_requests_per_access: Option<u64>,
}

fn summarize(p: &Profile, request_size: u64) -> Summary {
    let mut ranges = Vec::new();
    for f in &p.files {
        let runs = map_path(&f.path, false).ok().map(|s| s.layout.data_runs());
        for r in &f.ranges {
            let (fragments, extra) = match &runs {
                Some(runs) => {
                    let touched = runs
                        .iter()
                        .filter(|x| x.logical < r.end() && x.logical_end() > r.offset)
                        .count() as u64;
                    let rc = range_request_count(runs, r.offset, r.end(), request_size);
                    (Some(touched), Some(rc.extra()))
                }
                None => (None, None),
            };
            ranges.push(SummaryRange {
                path: f.path.display().to_string(),
                offset: r.offset,
                length: r.length,
                reads: r.reads,
                writes: r.writes,
                fragments,
                extra_requests_per_access: extra,
            });
        }
    }
    ranges.sort_by(|a, b| {
        (b.reads + b.writes)
            .cmp(&(a.reads + a.writes))
            .then(
                b.extra_requests_per_access
                    .cmp(&a.extra_requests_per_access),
            )
            .then(a.path.cmp(&b.path))
            .then(a.offset.cmp(&b.offset))
    });
    Summary {
        version: 1,
        kind: "fragkit-trace-summary",
        duration_ns: p.duration_ns,
        events: p.events,
        dropped: p.dropped,
        request_size,
        ranges,
    }
}

fn write_summary(w: &mut impl Write, s: &Summary, top: usize) -> io::Result<()> {
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
    )
}
