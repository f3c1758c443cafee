//! `fragkit watch report`: fragmentation over time and the moments files first became
//! fragmented, from a watch's history database; text, JSON, CSV and a PNG plot.

use fragkit_sys::console::printable;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde_json::json;

use crate::units::utc;
use crate::watch::store::{FileSummary, FirstFragmented, SeriesPoint};

/// How `fragkit watch report` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    /// The totals series, one row per point
    Csv,
}

/// What a watch's history database holds, as read for the report.
pub struct History {
    pub db: PathBuf,
    pub db_bytes: u64,
    /// Rows per table.
    pub rows: Vec<(String, u64)>,
    pub series: Vec<SeriesPoint>,
    pub first: Vec<FirstFragmented>,
    /// The file asked for with --file and its samples.
    pub file: Option<(String, Vec<(f64, FileSummary)>)>,
    /// Where the plot was written.
    pub png: Option<PathBuf>,
}

/// What a finished `fragkit watch` did.
#[derive(serde::Serialize)]
pub(crate) struct RunSummary {
    pub version: u32,
    pub db: PathBuf,
    pub source: &'static str,
    pub ticks: u64,
    pub seconds: f64,
    pub first_scan_ms: f64,
    pub mean_tick_ms: f64,
    pub max_tick_ms: f64,
    pub events: u64,
    pub changed_files: u64,
    pub full_rescans: u64,
    pub totals: crate::watch::store::Totals,
    #[serde(skip)]
    pub request_size: u64,
}

pub(crate) fn write_run_json(w: &mut dyn Write, r: &RunSummary) -> io::Result<()> {
    serde_json::to_writer(&mut *w, r)?;
    writeln!(w)
}

pub(crate) fn write_run_table(w: &mut dyn Write, r: &RunSummary) -> io::Result<()> {
    let t = &r.totals;
    writeln!(
        w,
        "watched {} ticks over {:.1} s with {}: {} files, {} fragmented, {} fragments, {} extra requests at {}",
        r.ticks,
        r.seconds,
        r.source,
        t.files,
        t.fragmented_files,
        t.fragments,
        t.extra_requests(),
        crate::units::short_size(r.request_size)
    )?;
    writeln!(
        w,
        "first scan {:.1} ms; ticks mean {:.2} ms, max {:.2} ms; {} events, {} file records changed, {} full rescans",
        r.first_scan_ms, r.mean_tick_ms, r.max_tick_ms, r.events, r.changed_files, r.full_rescans
    )?;
    writeln!(w, "history: {}", r.db.display())
}

/// Print the history in `format`.
pub fn print(w: &mut dyn Write, h: &History, format: Format) -> Result<()> {
    let History {
        db,
        db_bytes,
        rows,
        series,
        first,
        ..
    } = h;
    let history = h.file.as_ref().map(|(_, s)| s);
    match format {
        Format::Json => {
            let v = json!({
                "version": 1,
                "db": db,
                "db_bytes": db_bytes,
                "rows": rows.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
                "series": series,
                "first_fragmented": first,
                "file": history.map(|h| h.iter().map(|(t, s)| json!({"t": t, "summary": s})).collect::<Vec<_>>()),
            });
            writeln!(w, "{v}")?;
        }
        Format::Csv => {
            let mut w = csv::Writer::from_writer(&mut *w);
            w.write_record([
                "t",
                "utc",
                "files",
                "fragmented_files",
                "bytes",
                "extents",
                "fragments",
                "split",
                "ideal",
                "extra_requests",
            ])?;
            for p in series {
                let s = &p.totals;
                w.write_record([
                    format!("{:.3}", p.t),
                    utc(p.t),
                    s.files.to_string(),
                    s.fragmented_files.to_string(),
                    s.bytes.to_string(),
                    s.extents.to_string(),
                    s.fragments.to_string(),
                    s.split.to_string(),
                    s.ideal.to_string(),
                    s.extra_requests().to_string(),
                ])?;
            }
            w.flush()?;
        }
        Format::Table => {
            writeln!(w, "history {} ({} bytes)", db.display(), db_bytes)?;
            writeln!(
                w,
                "rows: {}",
                rows.iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )?;
            if series.is_empty() {
                writeln!(w, "no ticks recorded")?;
            } else {
                writeln!(
                    w,
                    "\n{:<19}  {:>8}  {:>10}  {:>10}  {:>10}",
                    "time (UTC)", "files", "fragmented", "fragments", "extra req"
                )?;
                // At most 30 evenly spaced points, always the first and the last.
                let n = series.len();
                let step = n.div_ceil(30).max(1);
                for (i, p) in series.iter().enumerate() {
                    if i % step != 0 && i != n - 1 {
                        continue;
                    }
                    writeln!(
                        w,
                        "{:<19}  {:>8}  {:>10}  {:>10}  {:>10}",
                        utc(p.t),
                        p.totals.files,
                        p.totals.fragmented_files,
                        p.totals.fragments,
                        p.totals.extra_requests()
                    )?;
                }
            }
            writeln!(w, "\nfirst became fragmented:")?;
            if first.is_empty() {
                writeln!(w, "  (no file has become fragmented)")?;
            }
            for f in first {
                let gone = f
                    .deleted
                    .map(|d| format!(" (deleted {})", utc(d)))
                    .unwrap_or_default();
                writeln!(
                    w,
                    "  {}  {}  now {} fragments{gone}",
                    utc(f.t),
                    printable(&f.path),
                    f.fragments_now
                )?;
            }
            if let Some((f, h)) = &h.file {
                writeln!(w, "\nsamples of {}:", printable(f))?;
                for (t, s) in h {
                    writeln!(
                        w,
                        "  {}  size {}  extents {}  fragments {}  S(R) {}  I(R) {}",
                        utc(*t),
                        s.size,
                        s.extents,
                        s.fragments,
                        s.split,
                        s.ideal
                    )?;
                }
            }
            if let Some(png) = &h.png {
                writeln!(w, "\nplot: {}", png.display())?;
            }
        }
    }
    Ok(())
}

/// History rows are written when values change, so draw steps, not slopes.
fn steps(
    series: &[SeriesPoint],
    x: &dyn Fn(f64) -> f64,
    f: &dyn Fn(&SeriesPoint) -> u64,
) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(series.len() * 2);
    for p in series {
        let (px, py) = (x(p.t), f(p) as f64);
        if let Some(&(_, prev)) = out.last() {
            out.push((px, prev));
        }
        out.push((px, py));
    }
    out
}

/// Without the `plot` feature there is no chart: say so.
#[cfg(not(feature = "plot"))]
pub fn plot(out: &Path, _series: &[SeriesPoint], _first: &[FirstFragmented]) -> Result<()> {
    anyhow::bail!(
        "--png {}: this fragkit was built without charts (the `plot` feature); rebuild with it: cargo install --locked --path . --features plot",
        out.display()
    )
}

#[cfg(feature = "plot")]
/// Two panels over time: files and fragmented files; fragments and extra requests. Red
/// ticks along the bottom mark the moments files first became fragmented.
pub fn plot(out: &Path, series: &[SeriesPoint], first: &[FirstFragmented]) -> Result<()> {
    use plotters::prelude::*;
    crate::render::plot::register_plot_font("--png")?;
    if series.is_empty() {
        anyhow::bail!("--png {}: the history has no ticks to plot", out.display());
    }
    let t0 = series[0].t;
    let t1 = series.last().map(|p| p.t).unwrap_or(t0).max(t0 + 1.0);
    let (x_scale, x_unit) = match t1 - t0 {
        d if d > 2.0 * 86400.0 => (86400.0, "days"),
        d if d > 2.0 * 3600.0 => (3600.0, "hours"),
        d if d > 180.0 => (60.0, "minutes"),
        _ => (1.0, "seconds"),
    };
    let x = |t: f64| (t - t0) / x_scale;
    let xmax = x(t1);
    let err = |e: &dyn std::fmt::Display| anyhow::anyhow!("{}: cannot plot: {e}", out.display());
    crate::render::plot::save_png(out, (1000, 640), |root| {
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let root = root
            .titled(
                &format!("fragkit watch: {} to {} UTC", utc(t0), utc(t1)),
                ("sans-serif", 20),
            )
            .map_err(|e| err(&e))?;
        let (top, bottom) = root.split_vertically(300);
        type Panel<'a> = (
            &'a str,
            Vec<(&'a str, RGBColor, Box<dyn Fn(&SeriesPoint) -> u64>)>,
        );
        let panels: [(DrawingArea<BitMapBackend, plotters::coord::Shift>, Panel); 2] = [
            (
                top,
                (
                    "files",
                    vec![
                        (
                            "files",
                            RGBColor(120, 120, 120),
                            Box::new(|p: &SeriesPoint| p.totals.files),
                        ),
                        (
                            "fragmented files",
                            RGBColor(220, 50, 40),
                            Box::new(|p: &SeriesPoint| p.totals.fragmented_files),
                        ),
                    ],
                ),
            ),
            (
                bottom,
                (
                    "count",
                    vec![
                        (
                            "fragments",
                            RGBColor(40, 110, 190),
                            Box::new(|p: &SeriesPoint| p.totals.fragments),
                        ),
                        (
                            "extra requests at R",
                            RGBColor(140, 60, 170),
                            Box::new(|p: &SeriesPoint| p.totals.extra_requests()),
                        ),
                    ],
                ),
            ),
        ];
        for (i, (area, (ylabel, lines))) in panels.into_iter().enumerate() {
            let ymax = series
                .iter()
                .flat_map(|p| lines.iter().map(move |(_, _, f)| f(p)))
                .max()
                .unwrap_or(1)
                .max(1) as f64
                * 1.1;
            let mut chart = ChartBuilder::on(&area)
                .margin(10)
                .x_label_area_size(35)
                .y_label_area_size(60)
                .build_cartesian_2d(0.0..xmax, 0.0..ymax)
                .map_err(|e| err(&e))?;
            chart
                .configure_mesh()
                .x_desc(format!("{x_unit} since start"))
                .y_desc(ylabel)
                .draw()
                .map_err(|e| err(&e))?;
            for (name, colour, f) in &lines {
                let c = *colour;
                chart
                    .draw_series(LineSeries::new(
                        steps(series, &x, f.as_ref()),
                        c.stroke_width(2),
                    ))
                    .map_err(|e| err(&e))?
                    .label(*name)
                    .legend(move |(a, b)| {
                        PathElement::new(vec![(a, b), (a + 20, b)], c.stroke_width(2))
                    });
            }
            if i == 0 {
                chart
                    .draw_series(first.iter().filter(|f| f.t >= t0).map(|f| {
                        PathElement::new(
                            vec![(x(f.t), 0.0), (x(f.t), ymax * 0.06)],
                            RGBColor(220, 50, 40).stroke_width(2),
                        )
                    }))
                    .map_err(|e| err(&e))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(|e| err(&e))?;
        }
        root.present().map_err(|e| err(&e))?;
        Ok(())
    })
}
