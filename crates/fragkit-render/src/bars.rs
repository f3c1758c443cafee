//! Horizontal bar charts, one panel per quantity, side by side: the lab's comparison of
//! methods (bytes written, device requests, MB/s) at a glance.

use std::path::Path;

use anyhow::{Context, Result};

use super::canvas::{Canvas, Rgb};

pub struct Bar {
    pub label: String,
    pub value: f64,
    /// Text printed after the bar (the value with its unit).
    pub text: String,
    pub colour: Rgb,
}

pub struct Panel {
    pub title: String,
    /// A line under the title, e.g. "fewer is better".
    pub subtitle: String,
    pub bars: Vec<Bar>,
}

const PANEL_W: u32 = 340;
const ROW_H: u32 = 34;
const LABEL_W: f32 = 80.0;
const INK: Rgb = [40, 40, 40];
const GRID: Rgb = [220, 220, 220];

pub fn write_panels(title: &str, panels: &[Panel], out: &Path) -> Result<()> {
    let rows = panels.iter().map(|p| p.bars.len()).max().unwrap_or(1) as u32;
    let width = PANEL_W * panels.len().max(1) as u32 + 20;
    let height = 50 + 48 + rows * ROW_H + 16;
    let mut c = Canvas::new(width, height, [255, 255, 255]);
    c.text(12.0, 10.0, title, 20.0, INK);
    for (i, panel) in panels.iter().enumerate() {
        let x0 = 10 + i as u32 * PANEL_W;
        c.text(x0 as f32 + 6.0, 46.0, &panel.title, 16.0, INK);
        c.text(
            x0 as f32 + 6.0,
            66.0,
            &panel.subtitle,
            12.0,
            [110, 110, 110],
        );
        let max = panel.bars.iter().map(|b| b.value).fold(0.0, f64::max);
        let bar_x = x0 as f32 + LABEL_W;
        let bar_room = PANEL_W as f32 - LABEL_W - 90.0;
        let top = 92;
        c.fill_rect(bar_x as u32, top - 4, 1, rows * ROW_H + 4, GRID);
        for (j, b) in panel.bars.iter().enumerate() {
            let y = top + j as u32 * ROW_H;
            c.text(x0 as f32 + 6.0, y as f32 + 6.0, &b.label, 13.0, INK);
            let w = if max > 0.0 {
                (b.value / max * bar_room as f64).round().max(1.0) as u32
            } else {
                1
            };
            c.fill_rect(bar_x as u32 + 1, y + 4, w, ROW_H - 12, b.colour);
            c.text(bar_x + w as f32 + 6.0, y as f32 + 6.0, &b.text, 13.0, INK);
        }
    }
    let f =
        std::fs::File::create(out).with_context(|| format!("{}: cannot create", out.display()))?;
    c.write_png(std::io::BufWriter::new(f))
        .with_context(|| format!("{}: cannot write", out.display()))
}
