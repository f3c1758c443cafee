//! `fragkit lab --app`'s outputs: report.json, report.html (the answer, the comparison
//! table, the ratios against the file system's own tool, the interference chart, the
//! commands) and a text summary for the terminal.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Write};
use std::path::Path;

use anyhow::{Context, Result};

use crate::lab::app::{AppReport, Contender};
use crate::lab::figures::RatioInterval;
use crate::units::HumanBytes;
use fragkit_core::stats::Summary;

const CHART: &str = "interference.png";

/// Write every output into `out` (the report's `chart` is filled in here).
pub fn write_all(out: &Path, report: &mut AppReport) -> Result<()> {
    report.chart = match write_chart(out, report) {
        Ok(()) => Some(CHART.into()),
        Err(e) => {
            report
                .notes
                .push(format!("no interference chart: {}", first_line(&e)));
            None
        }
    };
    let json = serde_json::to_string_pretty(report)? + "\n";
    fs::write(out.join("report.json"), json).context("writing report.json")?;
    fs::write(out.join("report.html"), html(report)).context("writing report.html")?;
    Ok(())
}

fn first_line(e: &anyhow::Error) -> String {
    format!("{e:#}")
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// One panel per contender: the application's ops/s around the defrag, one line per round,
/// x = seconds since the defrag started.
fn write_chart(out: &Path, r: &AppReport) -> Result<()> {
    use crate::render::plot::{line_panels, Line, Panel};
    let panels: Vec<Panel> = r
        .contenders
        .iter()
        .map(|c| Panel {
            caption: format!(
                "{}: {}; during ÷ before {}",
                c.name,
                match &c.defrag_seconds {
                    Some(s) => format!("defrag ran from 0 s for {} s", spread(s, 2)),
                    None => "no defrag (the control)".into(),
                },
                interval(&c.during_ratio)
            ),
            y_desc: format!("{} ops/s", r.app.name()),
            log_y: false,
            lines: c
                .rounds
                .iter()
                .map(|k| Line {
                    name: format!("round {}", k.round),
                    points: k.series.clone(),
                })
                .collect(),
        })
        .collect();
    line_panels(
        &out.join(CHART),
        &format!(
            "{} while each defragmenter runs ({} on {}, {})",
            r.app.name(),
            r.fs,
            HumanBytes(r.size),
            r.io_limit.as_ref().map_or("no device ceiling", |l| &l.name)
        ),
        "seconds since the defrag started",
        false,
        &|x| format!("{x:.0}"),
        &panels,
    )
}

fn spread(s: &Summary, digits: usize) -> String {
    if s.n == 1 || (s.max - s.min).abs() < f64::EPSILON {
        format!("{:.*}", digits, s.median)
    } else {
        format!(
            "{:.*} ({:.*}–{:.*})",
            digits, s.median, digits, s.min, digits, s.max
        )
    }
}

fn bytes_spread(s: &Summary) -> String {
    let b = |v: f64| HumanBytes(v.max(0.0) as u64).to_string();
    if s.n == 1 || s.max == s.min {
        b(s.median)
    } else {
        format!("{} ({}–{})", b(s.median), b(s.min), b(s.max))
    }
}

fn interval(i: &Option<RatioInterval>) -> String {
    match i {
        Some(i) => format!(
            "{:.3} [{:.3}–{:.3}, {:.0}%, n={}]",
            i.median,
            i.low,
            i.high,
            i.confidence * 100.0,
            i.rounds
        ),
        None => "one round: no interval".into(),
    }
}

fn opt(s: &Option<Summary>, f: impl Fn(&Summary) -> String) -> String {
    s.as_ref().map_or("–".into(), f)
}

/// The comparison rows, as (header, cells per contender).
fn rows(r: &AppReport) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let replayed = r.flash.is_some();
    let mut header = vec![
        "method",
        "defrag s",
        "device writes",
        "app during ÷ before",
        "read ops/s after",
        "read requests after",
        "modeled ms after",
    ];
    if replayed {
        header.push("replayed MB/s after");
    }
    let cells = r
        .contenders
        .iter()
        .map(|c: &Contender| {
            let single = |c: &Contender| {
                c.during_ratio
                    .is_none()
                    .then(|| c.rounds.first().map(|k| format!("{:.3}", k.during_ratio)))
                    .flatten()
            };
            let mut row = vec![
                c.name.clone(),
                opt(&c.defrag_seconds, |s| spread(s, 2)),
                opt(&c.device_bytes_written, bytes_spread),
                single(c).unwrap_or_else(|| interval(&c.during_ratio)),
                opt(&c.read_ops_per_s, |s| spread(s, 0)),
                opt(&c.read_requests, |s| spread(s, 0)),
                opt(&c.modeled_ms, |s| spread(s, 2)),
            ];
            if replayed {
                row.push(opt(&c.replayed_mb_s, |s| spread(s, 1)));
            }
            row
        })
        .collect();
    (header, cells)
}

pub fn write_summary(w: &mut dyn Write, r: &AppReport, out: &Path) -> io::Result<()> {
    writeln!(
        w,
        "fragkit lab --app {}: {} {} aged {}, {} {} × {} B; {} round{}; device ceiling: {}",
        r.app.name(),
        r.fs,
        HumanBytes(r.size),
        r.paf,
        r.keys,
        r.app.unit().0,
        r.value_size,
        r.rounds,
        if r.rounds == 1 { "" } else { "s" },
        r.io_limit
            .as_ref()
            .map_or("none".to_string(), |l| format!("{} ({})", l.name, l.source))
    )?;
    writeln!(
        w,
        "database: {} file{}, {}, {} fragments; read whole in {} requests of {}, {} more than contiguous",
        r.database.files,
        if r.database.files == 1 { "" } else { "s" },
        HumanBytes(r.database.bytes),
        r.database.fragments,
        r.database.split,
        HumanBytes(r.request_size),
        r.database.extra
    )?;
    for l in layout_costs(r) {
        writeln!(w, "{l}")?;
    }
    for a in &r.advice {
        writeln!(w, "advise ({}): {}", a.device, a.answer)?;
    }
    for a in &r.advise_applied {
        writeln!(w, "{}", applied_line(a))?;
    }
    writeln!(w)?;
    let (header, cells) = rows(r);
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            cells
                .iter()
                .map(|c| c[i].chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |w: &mut dyn Write, cols: Vec<String>| -> io::Result<()> {
        let text: Vec<String> = cols
            .iter()
            .zip(&widths)
            .map(|(c, n)| format!("{c:<n$}"))
            .collect();
        writeln!(w, "{}", text.join("  ").trim_end())
    };
    line(w, header.iter().map(|h| h.to_string()).collect())?;
    for c in cells {
        line(w, c)?;
    }
    if let Some(l) = against_control(r) {
        writeln!(w, "{l}")?;
    }
    for c in &r.contenders {
        if let Some(d) = c
            .rounds
            .iter()
            .find_map(|k| k.defrag.as_ref().and_then(|d| d.declined.clone()))
        {
            writeln!(w, "{} declined: {d}", c.name)?;
        }
    }
    if !r.versus_tool.is_empty() {
        writeln!(
            w,
            "\nagainst {} (per-round ratios: median (min–max), n rounds):",
            r.versus_tool[0].tool
        )?;
        for v in &r.versus_tool {
            let f = |s: &Option<Summary>| opt(s, |s| format!("{} n={}", spread(s, 3), s.n));
            writeln!(
                w,
                "  {:<7} bytes written {}; application slowdown {}; defrag time {}; operations lost {}; read requests after {}",
                v.contender,
                f(&v.bytes_written),
                f(&v.slowdown),
                f(&v.seconds),
                f(&v.ops_lost),
                f(&v.read_requests)
            )?;
        }
    }
    for n in &r.notes {
        writeln!(w, "note: {n}")?;
    }
    writeln!(w, "report: {}", out.join("report.html").display())
}

/// Which defragmenters' during ÷ before the rounds tell apart from the control's (its
/// own rate moves that much with nothing running), and which they do not.
fn against_control(r: &AppReport) -> Option<String> {
    let control = r.contenders.iter().find(|c| c.name == "none")?;
    let ci = control.during_ratio.as_ref()?;
    let (mut apart, mut not) = (Vec::new(), Vec::new());
    for c in r.contenders.iter().filter(|c| c.name != "none") {
        match &c.during_ratio {
            Some(i) if i.apart_from(ci) => apart.push(c.name.as_str()),
            _ => not.push(c.name.as_str()),
        }
    }
    let list = |v: &[&str]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    Some(format!(
        "application during ÷ before against the control's {:.3} [{:.3}–{:.3}]: told apart: {}; not told apart from no defrag: {}",
        ci.median,
        ci.low,
        ci.high,
        list(&apart),
        list(&not)
    ))
}

/// `advise --apply` predicted against achieved, in one line.
fn applied_line(a: &crate::lab::app::AdviseApplied) -> String {
    if a.files == 0 {
        return format!("advise --apply ({}): nothing to apply", a.device);
    }
    let pct = |x: f64, p: f64| {
        if p > 0.0 {
            format!("{:+.1}%", 100.0 * (x / p - 1.0))
        } else {
            "–".into()
        }
    };
    format!(
        "advise --apply ({}): {} file{} ({}): predicted {}, moved {}, device wrote {} ({}); modeled {:.2} ms predicted, {:.2} ms achieved ({})",
        a.device,
        a.files,
        if a.files == 1 { "" } else { "s" },
        a.fixes.join(", "),
        HumanBytes(a.predicted_bytes),
        HumanBytes(a.moved_bytes),
        HumanBytes(a.device_written_bytes),
        pct(a.device_written_bytes as f64, a.predicted_bytes as f64),
        a.predicted_ns as f64 / 1e6,
        a.achieved_ns as f64 / 1e6,
        pct(a.achieved_ns as f64, a.predicted_ns as f64)
    )
}

/// The modeled loss before anything moved and what each defragmenter recovered of it, on
/// the first advised device (fast24).
fn modeled_loss(r: &AppReport) -> Option<String> {
    let a = r.advice.first()?;
    if a.now_ns == 0 {
        return None;
    }
    let ms = |ns: u64| ns as f64 / 1e6;
    let loss = 1.0 - a.contiguous_ns as f64 / a.now_ns as f64;
    let mut text = format!(
        "modeled on {} ({}): {:.2} ms now, {:.2} ms contiguous: {:.1}% of the throughput lost to the layout",
        a.device,
        r.access,
        ms(a.now_ns),
        ms(a.contiguous_ns),
        100.0 * loss
    );
    if let Some(p) = r.paper_loss {
        let _ = write!(text, " (paper: {:.1}%)", 100.0 * p);
    }
    let excess = a.now_ns.saturating_sub(a.contiguous_ns) as f64 / 1e6;
    // Below advise's placement uncertainty there is nothing a move can be said to recover.
    let u = crate::defrag::advise::PLACEMENT_UNCERTAINTY;
    if excess < u * ms(a.contiguous_ns) {
        let _ = write!(
            text,
            "; below advise's {:.1}% placement uncertainty, so no recovery is computed",
            100.0 * u
        );
    } else if excess > 0.0 {
        text += &recovered(r, |c| {
            Some((ms(a.now_ns) - c.modeled_ms.as_ref()?.median) / excess)
        });
    }
    Some(text)
}

/// Whether a contender's defragmenter moved something in at least one round (fragkit:
/// bytes moved; a tool: the device wrote): a recovered share of one that never did (a
/// tool refusing a locked file) is only its clone's noise.
fn moved_in_some_round(c: &Contender) -> bool {
    c.rounds.iter().any(|k| {
        k.defrag
            .as_ref()
            .is_some_and(|d| d.bytes_moved.map_or(d.device_bytes_written > 0, |b| b > 0))
    })
}

/// "; recovered after: pick 96%, …": `share` of the loss each contender that moved
/// something recovered (empty when none has a share).
fn recovered(r: &AppReport, share: impl Fn(&Contender) -> Option<f64>) -> String {
    let rec: Vec<String> = r
        .contenders
        .iter()
        .filter(|c| moved_in_some_round(c))
        .filter_map(|c| Some(format!("{} {:.0}%", c.name, 100.0 * share(c)?)))
        .collect();
    if rec.is_empty() {
        String::new()
    } else {
        format!("; recovered after: {}", rec.join(", "))
    }
}

/// What the layout costs, one line per model: advise's, and the write-order replay's.
fn layout_costs(r: &AppReport) -> Vec<String> {
    modeled_loss(r).into_iter().chain(flash_loss(r)).collect()
}

/// FAST'24's measure: the recorded requests replayed in write order, before anything
/// moved and what each defragmenter recovered of the loss (median over its rounds).
fn flash_loss(r: &AppReport) -> Option<String> {
    let f = r.flash.as_ref()?;
    let mut text = format!(
        "replayed on {} in write order (the build's writes, then the application's reads, recorded): {:.1} MB/s against {:.1} MB/s contiguous: {:.1}% of the throughput lost",
        f.model,
        f.fragmented_mb_s,
        f.contiguous_mb_s,
        100.0 * f.loss
    );
    if let Some(p) = r.paper_loss {
        let _ = write!(text, " (paper: {:.1}%)", 100.0 * p);
    }
    text += &recovered(r, |c| f.recovered(c.replayed_mb_s.as_ref()?.median));
    if f.dropped_events > 0 {
        let _ = write!(
            text,
            "; the recorder lost {} events (figures incomplete)",
            f.dropped_events
        );
    }
    Some(text)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn html(r: &AppReport) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>fragkit lab --app {}</title>\
         <style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto}}\
         table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}\
         td:first-child,th:first-child{{text-align:left}}code{{font-size:90%}}</style></head><body>",
        esc(r.app.name())
    );
    let _ = write!(
        h,
        "<h1>{} on an aged {} ({}), defragmented while it runs</h1><p>{}</p><p>{} keys × {} B, PaF {}, {} rounds, device ceiling: {}</p><p>How: {}</p>",
        esc(r.app.name()),
        esc(&r.fs),
        HumanBytes(r.size),
        esc(&r.app_description),
        r.keys,
        r.value_size,
        esc(&r.paf),
        r.rounds,
        esc(&r.io_limit.as_ref().map_or("none".into(), |l| format!("{} ({})", l.name, l.source))),
        esc(&r.io_limit_how)
    );
    let costs = layout_costs(r);
    if !costs.is_empty() {
        h.push_str("<h2>What the layout costs</h2><ul>");
        for c in costs {
            let _ = write!(h, "<li>{}</li>", esc(&c));
        }
        h.push_str("</ul>");
    }
    h.push_str("<h2>What advise said before anything moved</h2><ul>");
    for a in &r.advice {
        let _ = write!(h, "<li><b>{}</b>: {}</li>", esc(&a.device), esc(&a.answer));
    }
    for a in &r.advise_applied {
        let _ = write!(h, "<li>{}</li>", esc(&applied_line(a)));
    }
    h.push_str("</ul><h2>Each defragmenter while the application runs</h2><table><tr>");
    let (header, cells) = rows(r);
    for c in header {
        let _ = write!(h, "<th>{}</th>", esc(c));
    }
    h.push_str("</tr>");
    for row in cells {
        h.push_str("<tr>");
        for c in row {
            let _ = write!(h, "<td>{}</td>", esc(&c));
        }
        h.push_str("</tr>");
    }
    h.push_str("</table>");
    if let Some(v) = r.versus_tool.first() {
        let _ = write!(
            h,
            "<h2>Against {} (per-round ratios)</h2><table><tr><th>method</th><th>bytes written</th><th>slowdown</th><th>defrag time</th><th>operations lost</th><th>read requests after</th></tr>",
            esc(&v.tool)
        );
        for v in &r.versus_tool {
            let f = |s: &Option<Summary>| esc(&opt(s, |s| format!("{} n={}", spread(s, 3), s.n)));
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&v.contender),
                f(&v.bytes_written),
                f(&v.slowdown),
                f(&v.seconds),
                f(&v.ops_lost),
                f(&v.read_requests)
            );
        }
        h.push_str("</table>");
    }
    if let Some(c) = &r.chart {
        let _ = write!(
            h,
            "<h2>Interference</h2><img src=\"{}\" alt=\"application throughput around each defrag\" style=\"max-width:100%\">",
            esc(c)
        );
    }
    if !r.notes.is_empty() {
        h.push_str("<h2>Notes</h2><ul>");
        for n in &r.notes {
            let _ = write!(h, "<li>{}</li>", esc(n));
        }
        h.push_str("</ul>");
    }
    h.push_str("<h2>Commands</h2><ol>");
    for s in &r.steps {
        let _ = write!(
            h,
            "<li><code>{}</code> ({:.1} s, exit {})</li>",
            esc(&s.command),
            s.seconds,
            s.exit_status
        );
    }
    h.push_str("</ol></body></html>\n");
    h
}
