//! `fragkit watch DIR...` and `fragkit watch report`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::cli::{InfoFormat, WatchAction, WatchArgs, WatchReportArgs, WatchReportFormat};
use crate::layout::walk;

use crate::watch::engine::{Config, Engine, HistoryUnwritable};
use crate::watch::store::Store;
use crate::watch::{artefacts, live, prometheus, serve, Source};

/// The database and its journal files, as the engine must ignore them.
fn db_paths(db: &Path) -> Vec<PathBuf> {
    let dir = db
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.canonicalize().unwrap_or_else(|_| d.to_path_buf()))
        .unwrap_or_else(|| std::env::current_dir().unwrap_or_default());
    let name = db
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    ["", "-wal", "-shm", "-journal", ".token"]
        .iter()
        .map(|s| dir.join(format!("{name}{s}")))
        .collect()
}

/// The file holding the live page's token: the database's name with `.token` appended.
fn token_path(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".token");
    db.with_file_name(name)
}

pub fn run(args: WatchArgs) -> Result<i32> {
    if let Some(WatchAction::Report(r)) = args.action {
        return report(r);
    }
    if let Some(addr) = &args.listen {
        serve::check_listen(addr, args.listen_any)?;
    }
    let mut roots = Vec::new();
    for p in &args.paths {
        walk::check_root(p).map_err(anyhow::Error::msg)?;
        roots.push(
            p.canonicalize()
                .with_context(|| format!("{}: cannot resolve", p.display()))?,
        );
    }
    let fragtracer = match &args.fragtracer {
        Some(out) => {
            std::fs::create_dir_all(out).with_context(|| {
                format!("--fragtracer {}: cannot create directory", out.display())
            })?;
            Some(
                out.canonicalize()
                    .with_context(|| format!("--fragtracer {}: cannot resolve", out.display()))?,
            )
        }
        None => None,
    };
    let db = match &args.db {
        Some(d) => d.clone(),
        None => crate::watch::default_db()?,
    };
    // Never watch our own output: the history database and the artefacts directory.
    let mut ignore = db_paths(&db);
    ignore.extend(fragtracer.clone());
    let mut store = Store::open(&db)?;
    store.retention.max_file_samples = args.max_file_samples;
    let (source, why) = Source::open(&roots, args.events)?;
    let cfg = Config {
        roots: roots.clone(),
        request_size: args.request_size,
        rescan: (!args.rescan.is_zero()).then_some(args.rescan),
        ignore: ignore.clone(),
    };
    let mut engine = Engine::new(cfg, store, source);

    // glibc's signal(2), used here before, restarts system calls: so does this.
    let stop = crate::sys::signals::interrupt_flag(true);

    let t0 = Instant::now();
    engine.store.begin()?;
    engine.full_scan(crate::watch::engine::now())?;
    engine.store.commit()?;
    let first_scan = t0.elapsed();
    if let Some(out) = &fragtracer {
        artefacts::write(out, &roots, &ignore)?;
    }
    let server = match args.listen {
        Some(addr) => {
            let l = serve::Live::new();
            l.publish(
                live::snapshot(&engine),
                prometheus::prometheus(&engine, true),
                prometheus::prometheus(&engine, false),
            );
            let token = serve::Token::random()?;
            let token_file = token_path(&db);
            serve::write_token(&token_file, &token)?;
            let bound = serve::start(addr, l.clone(), token)?;
            Some((l, bound, token_file))
        }
        None => None,
    };
    fragkit_sys::stderr_line!(
        "fragkit: watching {} files under {} every {:?}; changes from {why}; history in {}",
        engine.files.len(),
        roots
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        args.interval,
        db.display()
    );
    if let Some((_, bound, token_file)) = &server {
        fragkit_sys::stderr_line!(
            "fragkit: live page on http://{bound}/?token=TOKEN and Prometheus metrics on http://{bound}/metrics (file paths only with the token), TOKEN being the contents of {} (mode 0600)",
            token_file.display()
        );
    }

    let bar = if std::io::stderr().is_terminal() {
        let b = indicatif::ProgressBar::new_spinner();
        b.enable_steady_tick(Duration::from_millis(250));
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let start = Instant::now();
    let (mut ticks, mut tick_ms_sum, mut tick_ms_max, mut events) = (0u64, 0.0f64, 0.0f64, 0u64);
    let mut changed_total = 0u64;
    let mut history_down: Option<HistoryUnwritable> = None;
    let mut next = start + args.interval;
    // --duration ends the watch at its end, with a last tick then, even when the next
    // tick would come later (--interval 20m --duration 1s ran for 20 minutes).
    let end = args.duration.map(|d| start + d);
    loop {
        let until = end.map_or(next, |e| next.min(e));
        while Instant::now() < until && !stop.load(Ordering::SeqCst) {
            let left = until.saturating_duration_since(Instant::now());
            engine.wait_for_events(left.min(Duration::from_millis(50)))?;
        }
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let r = match engine.run_tick() {
            Ok(r) => {
                if history_down.take().is_some() {
                    fragkit_sys::stderr_line!(
                        "fragkit: {}: the history is written again (rebuilt by a full rescan)",
                        db.display()
                    );
                }
                r
            }
            Err(e) => match e.downcast::<HistoryUnwritable>() {
                Ok(h) => {
                    if history_down.is_none() {
                        fragkit_sys::stderr_line!(
                            "fragkit: warning: {h}; still watching and serving the last figures written, trying again every tick"
                        );
                    }
                    history_down = Some(h);
                    next = next_tick(next, args.interval);
                    if args.duration.is_some_and(|d| start.elapsed() >= d) {
                        break;
                    }
                    continue;
                }
                Err(e) => return Err(e),
            },
        };
        ticks += 1;
        tick_ms_sum += r.tick_ms;
        tick_ms_max = tick_ms_max.max(r.tick_ms);
        events += r.events;
        changed_total += r.changed_files;
        if let Some((l, _, _)) = &server {
            l.publish(
                live::snapshot(&engine),
                prometheus::prometheus(&engine, true),
                prometheus::prometheus(&engine, false),
            );
        }
        if let Some(out) = &fragtracer {
            if engine.changed > 0 {
                artefacts::write(out, &roots, &ignore)?;
            }
        }
        bar.set_message(format!(
            "tick {}: {} files, {} fragmented, {} fragments; {} changed ({:.1} ms)",
            r.tick,
            engine.totals.files,
            engine.totals.fragmented_files,
            engine.totals.fragments,
            r.changed_files,
            r.tick_ms
        ));
        next = next_tick(next, args.interval);
        if args.duration.is_some_and(|d| start.elapsed() >= d) {
            break;
        }
    }
    bar.finish_and_clear();
    if let Some((_, _, token_file)) = &server {
        let _ = std::fs::remove_file(token_file);
    }
    if history_down.is_none() {
        if let Err(e) = engine.store.prune(crate::watch::engine::now(), true) {
            fragkit_sys::stderr_line!(
                "fragkit: warning: {}: history not pruned at the end: {e:#}",
                db.display()
            );
        }
    }
    let t = &engine.totals;
    let mean_ms = if ticks > 0 {
        tick_ms_sum / ticks as f64
    } else {
        0.0
    };
    let run = crate::report::watch::RunSummary {
        version: 1,
        db: db.clone(),
        source: engine.source_name(),
        ticks,
        seconds: start.elapsed().as_secs_f64(),
        first_scan_ms: first_scan.as_secs_f64() * 1e3,
        mean_tick_ms: mean_ms,
        max_tick_ms: tick_ms_max,
        events,
        changed_files: changed_total,
        full_rescans: engine.full_rescans,
        totals: *t,
        request_size: args.request_size,
    };
    crate::report::to_stdout(|w| match args.format {
        InfoFormat::Json => crate::report::watch::write_run_json(w, &run),
        InfoFormat::Table => crate::report::watch::write_run_table(w, &run),
    })?;
    Ok(0)
}

/// `fragkit watch report`: read the history, plot it if asked, print it.
/// The tick after `next`; behind schedule (a long full rescan) it skips the missed ticks
/// rather than burst.
fn next_tick(next: Instant, interval: Duration) -> Instant {
    let after = next + interval;
    let now = Instant::now();
    if after < now {
        now + interval
    } else {
        after
    }
}

fn report(args: WatchReportArgs) -> Result<i32> {
    use crate::report::watch::{self as out, Format, History};
    let db = match &args.db {
        Some(d) => d.clone(),
        None => crate::watch::default_db()?,
    };
    let store = Store::open_existing(&db)?;
    let file = match &args.file {
        Some(f) => Some((f.clone(), store.file_history(f)?)),
        None => None,
    };
    let history = History {
        db_bytes: std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0),
        rows: store.row_counts()?,
        series: store.series()?,
        first: store.first_fragmented()?,
        file,
        png: args.png.clone(),
        db,
    };
    if let Some(png) = &args.png {
        out::plot(png, &history.series, &history.first)?;
    }
    let format = match args.format {
        WatchReportFormat::Table => Format::Table,
        WatchReportFormat::Json => Format::Json,
        WatchReportFormat::Csv => Format::Csv,
    };
    out::print(&mut std::io::stdout().lock(), &history, format)?;
    Ok(0)
}
