//! `fragkit trace [--pid P] [--comm N] [--cgroup C] [--mount M] [-o FILE] [--summary] [-- CMD]`

use std::io::{self, IsTerminal, Write};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::{TraceArgs, TraceFormat};
use crate::report::{self, trace as out};
use crate::trace::collect::Collector;
use crate::trace::loader::{self, Filter, Stop};
use crate::trace::ranges::Hotness;
use crate::trace::summary::summarize;

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
    // Where the profile goes is checked before anything is traced or run: a traced command
    // whose result cannot be written was run for nothing.
    if let Some(out) = &args.output {
        check_output(out)?;
    }
    // Bad model parameters fail before anything is traced.
    let model = match &args.model {
        Some(m) => Some(super::ssd::model_params(m, None)?),
        None => None,
    };
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
        if n.is_multiple_of(4096) {
            bar.set_position(n);
        }
    };
    let announce = announcer(command.is_some());
    let stop = stop_when(&args, &announce);
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

    let summary = args
        .summary
        .then(|| summarize(&profile, args.request_size, model.as_ref()));
    // The closing lines go to stderr even when stdout was closed early.
    let written = report::to_stdout(|w| match (&summary, args.format) {
        (Some(s), TraceFormat::Json) => report::write_json_pretty(w, s),
        (Some(s), TraceFormat::Table) => out::write_summary(w, s, args.top),
        (None, _) if args.output.is_none() || args.format == TraceFormat::Json => {
            writeln!(w, "{}", profile.to_json())
        }
        (None, _) => Ok(()),
    });
    out::write_end(&mut io::stderr(), &stats, &profile, args.output.as_deref())?;
    written?;
    Ok(match stats.command_status {
        Some(s) => {
            use std::os::unix::process::ExitStatusExt;
            s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
        }
        None => 0,
    })
}

/// `trace --block DEV -o FILE [--mount M] [-- CMD]`: the block trace `fragkit ssd` replays.
/// `-o FILE` can be written: its directory exists and is a writable directory.
fn check_output(out: &std::path::Path) -> Result<()> {
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    if !dir.is_dir() {
        bail!(
            "-o {}: directory {} does not exist (expected a file in an existing directory)",
            out.display(),
            dir.display()
        );
    }
    if out.is_dir() {
        bail!(
            "-o {}: is a directory (expected a file name)",
            out.display()
        );
    }
    nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK).map_err(|e| {
        anyhow::anyhow!(
            "-o {}: cannot write in {}: {e}",
            out.display(),
            dir.display()
        )
    })?;
    Ok(())
}

fn run_block(
    dev: &std::path::Path,
    args: &TraceArgs,
    command: Option<&mut Command>,
) -> Result<i32> {
    if !args.pid.is_empty() || args.comm.is_some() || args.cgroup.is_some() || args.summary {
        bail!("--block records every request on the device: --pid, --comm, --cgroup and --summary do not apply");
    }
    let out = args.output.as_ref().expect("clap requires -o with --block");
    let announce = announcer(command.is_some());
    let stop = stop_when(args, &announce);
    let mut rec = crate::trace::block::record(dev, command, &stop)?;
    let resolved = match &args.mount {
        Some(m) => Some(crate::trace::block::resolve_owners(&mut rec.trace, m)?),
        None => None,
    };
    std::fs::write(out, rec.trace.to_json() + "\n")
        .map_err(|e| anyhow::anyhow!("writing the block trace to {}: {e}", out.display()))?;
    fragkit_sys::stderr_line!(
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
        fragkit_sys::stderr_line!(
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

/// Said once everything is attached: scripts (and the tests) wait for this line before
/// starting the traced work. A launched command needs no cue.
fn announcer(launching: bool) -> impl Fn() {
    move || {
        if !launching {
            fragkit_sys::stderr_line!("fragkit: tracing; stop with Ctrl-C or SIGTERM");
        }
    }
}

/// Both traces end the same way: a signal, `-d SECS`, or the launched command's exit.
fn stop_when<'a>(args: &TraceArgs, announce: &'a dyn Fn()) -> Stop<'a> {
    Stop {
        signalled: crate::sys::signals::interrupt_flag(false),
        duration: args.duration,
        on_attached: announce,
    }
}
