//! Charts for the benchmark reports (plotters, bitmap backend): line panels over a
//! parameter, and heat maps over a two-parameter grid. Text is drawn with DejaVu Sans,
//! registered once.

use std::path::Path;

use anyhow::{anyhow, Result};
#[cfg(feature = "plot")]
use plotters::coord::Shift;
#[cfg(feature = "plot")]
use plotters::prelude::*;
#[cfg(feature = "plot")]
use plotters::style::{register_font, FontStyle};

#[cfg(feature = "plot")]
/// Make DejaVu Sans (the font the block maps embed) the "sans-serif" plotters draws text
/// with. `flag` names the option that asked for a chart, for callers that report errors.
pub fn register_plot_font(_flag: &str) -> Result<()> {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    let mut result = Ok(());
    REGISTERED.call_once(|| {
        result = register_font("sans-serif", FontStyle::Normal, crate::canvas::FONT_BYTES)
            .map_err(|_| anyhow!("the embedded DejaVu Sans font does not parse"));
    });
    result
}

#[cfg(feature = "plot")]
/// Draw a `size` chart with plotters into an RGB buffer and write it to `out` as PNG with
/// the same encoder as the block maps (one PNG stack in the build).
pub fn save_png(
    out: &Path,
    size: (u32, u32),
    draw: impl FnOnce(DrawingArea<BitMapBackend<'_>, Shift>) -> Result<()>,
) -> Result<()> {
    let mut pixels = vec![0u8; size.0 as usize * size.1 as usize * 3];
    draw(BitMapBackend::with_buffer(&mut pixels, size).into_drawing_area())?;
    let file = std::fs::File::create(out)
        .map_err(|e| anyhow!("{}: cannot write the chart: {e}", out.display()))?;
    crate::canvas::write_rgb_png(std::io::BufWriter::new(file), size.0, size.1, &pixels)
        .map_err(|e| anyhow!("{}: cannot write the chart: {e}", out.display()))
}

#[cfg(feature = "plot")]
/// Distinguishable line colours (Tableau 10).
pub(crate) const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// One named line of (x, y) points.
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// One panel: its lines and axis titles.
pub struct Panel {
    /// Drawn above the panel (empty: none).
    pub caption: String,
    pub y_desc: String,
    /// log2-scaled y axis (counts spanning decades; values must be positive).
    pub log_y: bool,
    pub lines: Vec<Line>,
}

#[cfg(feature = "plot")]
/// Stacked panels sharing an x axis (log2-scaled when `log_x`), labelled by `x_label`.
pub fn line_panels(
    out: &Path,
    title: &str,
    x_desc: &str,
    log_x: bool,
    x_label: &dyn Fn(f64) -> String,
    panels: &[Panel],
) -> Result<()> {
    register_plot_font("--plot")?;
    let err = |e: &dyn std::fmt::Display| anyhow!("{}: cannot plot: {e}", out.display());
    let height = 60 + 320 * panels.len() as u32;
    save_png(out, (1000, height), |root| {
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let root = root
            .titled(title, ("sans-serif", 22))
            .map_err(|e| err(&e))?;
        let areas = root.split_evenly((panels.len(), 1));
        let xs: Vec<f64> = panels
            .iter()
            .flat_map(|p| p.lines.iter().flat_map(|l| l.points.iter().map(|q| q.0)))
            .collect();
        let xmin = xs.iter().cloned().fold(f64::INFINITY, f64::min);
        let xmax = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        if !xmin.is_finite() {
            return Err(anyhow!("{}: nothing to plot", out.display()));
        }
        // Work in log2(x) for log axes, so ticks fall on the measured powers of two.
        let tx = |x: f64| if log_x { x.max(1e-9).log2() } else { x };
        let (lo, hi) = (tx(xmin), tx(xmax));
        let pad = ((hi - lo) * 0.03).max(0.05);
        let x_range = (lo - pad)..(hi + pad);
        for (area, panel) in areas.iter().zip(panels) {
            let ty = |y: f64| {
                if panel.log_y {
                    y.max(1e-9).log2()
                } else {
                    y
                }
            };
            let ys = || {
                panel
                    .lines
                    .iter()
                    .flat_map(|l| l.points.iter().map(|p| p.1))
            };
            let (y_lo, ymax) = if panel.log_y {
                let lo = ys().fold(f64::INFINITY, f64::min).max(1e-9).log2().floor();
                let hi = ys().fold(0.0, f64::max).max(1e-9).log2().ceil();
                (lo - 0.2, hi.max(lo + 1.0) + 0.3)
            } else {
                (0.0, ys().fold(0.0, f64::max).max(1e-9) * 1.15)
            };
            let mut builder = ChartBuilder::on(area);
            if !panel.caption.is_empty() {
                builder.caption(panel.caption.as_str(), ("sans-serif", 16));
            }
            let mut chart = builder
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d(x_range.clone(), y_lo..ymax)
                .map_err(|e| err(&e))?;
            let ticks = if log_x {
                (hi - lo).round() as usize + 1
            } else {
                10
            };
            chart
                .configure_mesh()
                .x_desc(x_desc)
                .y_desc(panel.y_desc.as_str())
                .x_labels(ticks.clamp(2, 14))
                .x_label_formatter(&|v| {
                    if log_x {
                        x_label(2f64.powf(*v))
                    } else {
                        x_label(*v)
                    }
                })
                .y_labels(if panel.log_y {
                    (ymax - y_lo).ceil() as usize + 1
                } else {
                    10
                })
                .y_label_formatter(&|v| {
                    if panel.log_y {
                        format!("{:.0}", 2f64.powf(*v))
                    } else {
                        format!("{v:.0}")
                    }
                })
                .label_style(("sans-serif", 14))
                .axis_desc_style(("sans-serif", 16))
                .draw()
                .map_err(|e| err(&e))?;
            let n = panel.lines.len() as u32;
            for (i, line) in panel.lines.iter().enumerate() {
                let c = PALETTE[i % PALETTE.len()];
                // Earlier lines wider, so lines that coincide stay visible under later ones.
                let width = 2 + 2 * (n - 1 - i as u32);
                let pts: Vec<(f64, f64)> =
                    line.points.iter().map(|&(x, y)| (tx(x), ty(y))).collect();
                chart
                    .draw_series(LineSeries::new(pts.clone(), c.stroke_width(width)))
                    .map_err(|e| err(&e))?
                    .label(line.name.as_str())
                    .legend(move |(a, b)| {
                        PathElement::new(vec![(a, b), (a + 20, b)], c.stroke_width(2))
                    });
                chart
                    .draw_series(
                        pts.into_iter()
                            .map(|p| Circle::new(p, 2 + width as i32 / 2, c.filled())),
                    )
                    .map_err(|e| err(&e))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font(("sans-serif", 14))
                .position(legend_corner(panel, y_lo, ymax, &ty))
                .draw()
                .map_err(|e| err(&e))?;
        }
        root.present().map_err(|e| err(&e))?;
        Ok(())
    })
}

/// One heat map: cell values over an x × y grid (None: not measured).
pub struct Heat {
    pub title: String,
    pub xs: Vec<u64>,
    pub ys: Vec<u64>,
    /// values[yi][xi]
    pub values: Vec<Vec<Option<f64>>>,
}

#[cfg(feature = "plot")]
/// Side-by-side heat maps sharing one colour scale (white = low, dark blue = high), each
/// cell labelled with its value.
pub fn heat_maps(out: &Path, title: &str, x_desc: &str, y_desc: &str, maps: &[Heat]) -> Result<()> {
    register_plot_font("--plot")?;
    let err = |e: &dyn std::fmt::Display| anyhow!("{}: cannot plot: {e}", out.display());
    let width = 40 + 560 * maps.len() as u32;
    save_png(out, (width, 560), |root| {
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let root = root
            .titled(title, ("sans-serif", 20))
            .map_err(|e| err(&e))?;
        let all: Vec<f64> = maps
            .iter()
            .flat_map(|m| m.values.iter().flatten().flatten().cloned())
            .collect();
        let vmin = all.iter().cloned().fold(f64::INFINITY, f64::min);
        let vmax = all.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let span = if vmax > vmin { vmax - vmin } else { 1.0 };
        let colour = |v: f64| {
            let t = ((v - vmin) / span).clamp(0.0, 1.0);
            let lerp = |a: f64, b: f64| (a + (b - a) * t) as u8;
            RGBColor(lerp(247.0, 8.0), lerp(251.0, 48.0), lerp(255.0, 107.0))
        };
        let areas = root.split_evenly((1, maps.len()));
        for (area, m) in areas.iter().zip(maps) {
            let (nx, ny) = (m.xs.len(), m.ys.len());
            let mut chart = ChartBuilder::on(area)
                .caption(m.title.as_str(), ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(55)
                .build_cartesian_2d(0.0..nx as f64, 0.0..ny as f64)
                .map_err(|e| err(&e))?;
            let xs = m.xs.clone();
            let ys = m.ys.clone();
            chart
                .configure_mesh()
                .disable_mesh()
                .x_desc(x_desc)
                .y_desc(y_desc)
                .x_labels(nx * 2 + 1)
                .y_labels(ny * 2 + 1)
                .x_label_formatter(&|v| label_at(&xs, *v))
                .y_label_formatter(&|v| label_at(&ys, *v))
                .label_style(("sans-serif", 14))
                .axis_desc_style(("sans-serif", 16))
                .draw()
                .map_err(|e| err(&e))?;
            for (yi, row) in m.values.iter().enumerate() {
                for (xi, v) in row.iter().enumerate() {
                    let (x0, y0) = (xi as f64, yi as f64);
                    let fill = v.map_or(RGBColor(230, 230, 230), colour);
                    chart
                        .draw_series(std::iter::once(Rectangle::new(
                            [(x0, y0), (x0 + 1.0, y0 + 1.0)],
                            fill.filled(),
                        )))
                        .map_err(|e| err(&e))?;
                    if let Some(v) = v {
                        let dark = (v - vmin) / span > 0.55;
                        let text_colour = if dark { WHITE } else { BLACK };
                        let style = TextStyle::from(("sans-serif", 13).into_font())
                            .color(&text_colour)
                            .pos(plotters::style::text_anchor::Pos::new(
                                plotters::style::text_anchor::HPos::Center,
                                plotters::style::text_anchor::VPos::Center,
                            ));
                        chart
                            .draw_series(std::iter::once(Text::new(
                                format!("{v:.0}"),
                                (x0 + 0.5, y0 + 0.5),
                                style,
                            )))
                            .map_err(|e| err(&e))?;
                    }
                }
            }
        }
        root.present().map_err(|e| err(&e))?;
        Ok(())
    })
}

#[cfg(feature = "plot")]
/// The label of the cell whose centre is at `v` (cells span [i, i+1)); empty elsewhere.
fn label_at(values: &[u64], v: f64) -> String {
    let i = v - 0.5;
    if (i - i.round()).abs() < 1e-6 && i >= -1e-6 {
        values
            .get(i.round() as usize)
            .map_or(String::new(), |x| x.to_string())
    } else {
        String::new()
    }
}

#[cfg(feature = "plot")]
/// Upper right unless a line ends high there (then upper left).
fn legend_corner(
    panel: &Panel,
    y_lo: f64,
    ymax: f64,
    ty: &dyn Fn(f64) -> f64,
) -> SeriesLabelPosition {
    let high_at_right = panel.lines.iter().any(|l| {
        l.points
            .iter()
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .is_some_and(|p| ty(p.1) > y_lo + 0.6 * (ymax - y_lo))
    });
    if high_at_right {
        SeriesLabelPosition::UpperLeft
    } else {
        SeriesLabelPosition::UpperRight
    }
}

/// Without the `plot` feature there is no chart: say so instead of drawing.
#[cfg(not(feature = "plot"))]
pub fn line_panels(
    out: &Path,
    _title: &str,
    _x_desc: &str,
    _log_x: bool,
    _x_label: &dyn Fn(f64) -> String,
    _panels: &[Panel],
) -> Result<()> {
    Err(without_plot(out))
}

/// Without the `plot` feature there is no chart: say so instead of drawing.
#[cfg(not(feature = "plot"))]
pub fn heat_maps(
    out: &Path,
    _title: &str,
    _x_desc: &str,
    _y_desc: &str,
    _maps: &[Heat],
) -> Result<()> {
    Err(without_plot(out))
}

#[cfg(not(feature = "plot"))]
fn without_plot(out: &Path) -> anyhow::Error {
    anyhow!(
        "{}: this fragkit was built without charts (the `plot` feature); rebuild with it: cargo install --locked --path . --features plot",
        out.display()
    )
}
