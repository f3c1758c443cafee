//! Drawing a block map: PNG (with legend), SVG (hover: <title> per run of boxes) and a
//! self-contained HTML page (the PNG plus a hover readout).

use std::collections::BTreeSet;
use std::io::{self, Write};

use super::blockmap::{BlockMap, Grid, Kind};
use super::canvas::{Canvas, Rgb};
use super::config::{hex, ColorConfig, ImgConfig};
use fragkit_core::units::HumanBytes;

const MARGIN: u32 = 12;
const TITLE_PX: f32 = 17.0;
const TEXT_PX: f32 = 13.0;
const LINE: u32 = 19;
const GRID_LINE: Rgb = [205, 205, 205];
const INK: Rgb = [20, 20, 20];
const MIN_WIDTH: u32 = 760;

/// One legend entry: one or two swatches and a label.
struct Entry {
    swatches: Vec<Rgb>,
    label: String,
}

fn legend(map: &BlockMap, grid: &Grid, colors: &ColorConfig) -> Vec<Entry> {
    let mut classes: BTreeSet<(usize, bool)> = BTreeSet::new();
    let (mut free, mut meta, mut other, mut unknown) = (false, false, false, false);
    for s in &map.segments {
        match s.kind {
            Kind::File {
                class, fragmented, ..
            } => {
                classes.insert((class, fragmented));
            }
            Kind::Free => free = true,
            Kind::Metadata(_) => meta = true,
            Kind::Other => other = true,
            Kind::Unmapped => unknown = true,
        }
    }
    if grid.cells.contains(&u32::MAX) {
        if map.gaps_are_free {
            free = true
        } else {
            unknown = true
        }
    }
    let mut out = Vec::new();
    for (class, fragmented) in classes {
        let c = colors.class_colors(class);
        let label = colors.class_label(class);
        out.push(if fragmented {
            Entry {
                swatches: c.fragmented.to_vec(),
                label: format!("{label} fragmented (fragments alternate)"),
            }
        } else {
            Entry {
                swatches: vec![c.contiguous],
                label: format!("{label} contiguous"),
            }
        });
    }
    for (on, c, label) in [
        (free, colors.free, "free space"),
        (meta, colors.metadata, "file-system metadata"),
        (other, colors.other, "other files, directories, journal"),
        (
            unknown,
            colors.unmapped,
            "not in the drawn files (no GETFSMAP: free or used unknown)",
        ),
    ] {
        if on {
            out.push(Entry {
                swatches: vec![c],
                label: label.into(),
            });
        }
    }
    out
}

/// Lines under the title: scale, skipped runs, the map's own notes.
fn scale_lines(map: &BlockMap, grid: &Grid) -> Vec<String> {
    let n = grid.blocks_per_box;
    let per_box = n * map.block_size;
    let mut v = vec![format!(
        "1 box = {n} block{} of {} B ({}); {} boxes per row = {}; {} rows",
        if n == 1 { "" } else { "s" },
        map.block_size,
        HumanBytes(per_box),
        grid.columns,
        HumanBytes(per_box * grid.columns as u64),
        grid.rows
    )];
    if n > 1 {
        v[0].push_str("; a box shows what covers most of its blocks");
    }
    if map.skipped.0 > 0 {
        v.push(format!(
            "{} contiguous runs longer than img.cnf max_length ({} blocks, {}) are not drawn",
            map.skipped.0,
            map.skipped.1,
            HumanBytes(map.skipped.1 * map.block_size)
        ));
    }
    v.extend(map.notes.iter().cloned());
    v
}

struct Geometry {
    width: u32,
    height: u32,
    grid_top: u32,
    legend_top: u32,
    /// (x, y) of each legend entry.
    entries: Vec<(u32, u32)>,
}

fn geometry(
    canvas_for_text: &Canvas,
    lines: usize,
    grid: &Grid,
    img: &ImgConfig,
    entries: &[Entry],
) -> Geometry {
    let grid_w = grid.columns * img.box_size;
    let width = grid_w.max(MIN_WIDTH) + 2 * MARGIN;
    let grid_top = MARGIN + LINE + 2 + lines as u32 * LINE + 6;
    let grid_h = grid.rows * img.box_size;
    let legend_top = grid_top + grid_h + 10;
    let mut pos = Vec::new();
    let (mut x, mut y) = (MARGIN, legend_top);
    for e in entries {
        let w = e.swatches.len() as u32 * 16
            + 6
            + canvas_for_text.text_width(&e.label, TEXT_PX) as u32
            + 18;
        if x > MARGIN && x + w > width - MARGIN {
            x = MARGIN;
            y += LINE;
        }
        pos.push((x, y));
        x += w;
    }
    Geometry {
        width,
        height: y + LINE + MARGIN,
        grid_top,
        legend_top,
        entries: pos,
    }
}

/// Render the map as a picture.
pub fn render_png(map: &BlockMap, grid: &Grid, colors: &ColorConfig, img: &ImgConfig) -> Canvas {
    let entries = legend(map, grid, colors);
    let lines = scale_lines(map, grid);
    let probe = Canvas::new(1, 1, [255, 255, 255]);
    let g = geometry(&probe, lines.len(), grid, img, &entries);
    let mut c = Canvas::new(g.width, g.height, [255, 255, 255]);
    c.text(MARGIN as f32, MARGIN as f32, &map.title, TITLE_PX, INK);
    for (i, l) in lines.iter().enumerate() {
        let y = MARGIN + LINE + 2 + i as u32 * LINE;
        c.text(MARGIN as f32, y as f32, l, TEXT_PX, [60, 60, 60]);
    }
    let bsz = img.box_size;
    let gap = if bsz >= 3 { 1 } else { 0 };
    let boxes = grid.cells.len() as u32;
    // Grid lines: the background of every row, boxes drawn inside.
    let full_rows = boxes / grid.columns;
    c.fill_rect(
        MARGIN,
        g.grid_top,
        grid.columns * bsz + gap,
        full_rows * bsz + gap,
        GRID_LINE,
    );
    let rest = boxes % grid.columns;
    if rest > 0 {
        c.fill_rect(
            MARGIN,
            g.grid_top + full_rows * bsz,
            rest * bsz + gap,
            bsz + gap,
            GRID_LINE,
        );
    }
    let mut last: (u32, Rgb) = (u32::MAX - 1, [0, 0, 0]);
    for (i, &cell) in grid.cells.iter().enumerate() {
        let color = if cell == last.0 {
            last.1
        } else {
            let seg = (cell != u32::MAX).then(|| &map.segments[cell as usize]);
            let col = map.color(colors, seg);
            last = (cell, col);
            col
        };
        let (row, col) = (i as u32 / grid.columns, i as u32 % grid.columns);
        c.fill_rect(
            MARGIN + col * bsz + gap,
            g.grid_top + row * bsz + gap,
            bsz - gap,
            bsz - gap,
            color,
        );
    }
    for (e, &(x, y)) in entries.iter().zip(&g.entries) {
        let mut xx = x;
        for s in &e.swatches {
            c.fill_rect(xx, y + 2, 14, 14, *s);
            c.stroke_rect(xx, y + 2, 14, 14, [90, 90, 90]);
            xx += 16;
        }
        c.text((xx + 6) as f32, y as f32 + 1.0, &e.label, TEXT_PX, INK);
    }
    let _ = g.legend_top;
    c
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// SVG: one <rect> per run of boxes in a row showing the same segment, its <title> the
/// hover text (file, offset, fragment k of n, blocks).
pub fn write_svg(
    out: &mut impl Write,
    map: &BlockMap,
    grid: &Grid,
    colors: &ColorConfig,
    img: &ImgConfig,
) -> io::Result<()> {
    let entries = legend(map, grid, colors);
    let lines = scale_lines(map, grid);
    let probe = Canvas::new(1, 1, [255, 255, 255]);
    let g = geometry(&probe, lines.len(), grid, img, &entries);
    let b = img.box_size;
    let (title_px, text_px) = (probe.css_font_size(TITLE_PX), probe.css_font_size(TEXT_PX));
    writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="DejaVu Sans, sans-serif">"#,
        g.width, g.height
    )?;
    writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#)?;
    writeln!(
        out,
        r#"<text x="{MARGIN}" y="{}" font-size="{title_px:.2}">{}</text>"#,
        MARGIN + 15,
        xml_escape(&map.title)
    )?;
    for (i, l) in lines.iter().enumerate() {
        let y = MARGIN + LINE + 2 + i as u32 * LINE + 12;
        writeln!(
            out,
            r##"<text x="{MARGIN}" y="{y}" font-size="{text_px:.2}" fill="#3c3c3c">{}</text>"##,
            xml_escape(l)
        )?;
    }
    writeln!(
        out,
        r#"<g stroke="{}" stroke-width="{}">"#,
        hex(GRID_LINE),
        if b >= 3 { 0.5 } else { 0.0 }
    )?;
    let cols = grid.columns as usize;
    for (r, row) in grid.cells.chunks(cols).enumerate() {
        let mut i = 0;
        while i < row.len() {
            let cell = row[i];
            let mut j = i + 1;
            while j < row.len() && row[j] == cell {
                j += 1;
            }
            let seg = (cell != u32::MAX).then(|| &map.segments[cell as usize]);
            let title = seg.map_or_else(
                || {
                    if map.gaps_are_free {
                        "free space".to_string()
                    } else {
                        "not mapped".to_string()
                    }
                },
                |s| map.describe(s),
            );
            writeln!(
                out,
                r#"<rect x="{}" y="{}" width="{}" height="{b}" fill="{}"><title>{}</title></rect>"#,
                MARGIN as usize + i * b as usize,
                g.grid_top as usize + r * b as usize,
                (j - i) * b as usize,
                hex(map.color(colors, seg)),
                xml_escape(&title)
            )?;
            i = j;
        }
    }
    writeln!(out, "</g>")?;
    for (e, &(x, y)) in entries.iter().zip(&g.entries) {
        let mut xx = x;
        for s in &e.swatches {
            writeln!(
                out,
                r##"<rect x="{xx}" y="{}" width="14" height="14" fill="{}" stroke="#5a5a5a"/>"##,
                y + 2,
                hex(*s)
            )?;
            xx += 16;
        }
        writeln!(
            out,
            r#"<text x="{}" y="{}" font-size="{text_px:.2}">{}</text>"#,
            xx + 6,
            y + 14,
            xml_escape(&e.label)
        )?;
    }
    writeln!(out, "</svg>")
}

fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let v = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for k in 0..4 {
            if k <= chunk.len() {
                s.push(T[(v >> (18 - 6 * k)) as usize & 63] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// A self-contained HTML page: the PNG, and under the pointer the box's file, offset and
/// fragment (from a table of the segments the boxes show).
pub fn write_html(
    out: &mut impl Write,
    map: &BlockMap,
    grid: &Grid,
    colors: &ColorConfig,
    img: &ImgConfig,
) -> io::Result<()> {
    let canvas = render_png(map, grid, colors, img);
    let mut png = Vec::new();
    canvas.write_png(&mut png)?;
    let entries = legend(map, grid, colors);
    let lines = scale_lines(map, grid);
    let g = geometry(&canvas, lines.len(), grid, img, &entries);
    // Only the segments some box shows, renumbered.
    let mut used: Vec<u32> = grid
        .cells
        .iter()
        .copied()
        .filter(|&c| c != u32::MAX)
        .collect();
    used.sort_unstable();
    used.dedup();
    let texts: Vec<String> = used
        .iter()
        .map(|&i| map.describe(&map.segments[i as usize]))
        .collect();
    // Per shown segment: first block (drawing coordinates) and file offset, so the page can
    // say which offset of the file the pointed box holds.
    let starts: Vec<u64> = used
        .iter()
        .map(|&i| map.segments[i as usize].start)
        .collect();
    let offs: Vec<i64> = used
        .iter()
        .map(|&i| map.segments[i as usize].file.map_or(-1, |f| f.1 as i64))
        .collect();
    let cells: Vec<i64> = grid
        .cells
        .iter()
        .map(|c| {
            if *c == u32::MAX {
                -1
            } else {
                used.binary_search(c).unwrap() as i64
            }
        })
        .collect();
    let gap_text = if map.gaps_are_free {
        "free space"
    } else {
        "not mapped"
    };
    writeln!(
        out,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{}</title>",
        xml_escape(&map.title)
    )?;
    writeln!(out, "<style>body{{font-family:sans-serif;margin:8px}}#info{{font:13px monospace;min-height:1.4em;padding:4px;background:#f4f4f4}}#map{{image-rendering:pixelated;cursor:crosshair}}</style></head><body>")?;
    writeln!(out, "<div id=\"info\">point at a box</div>")?;
    writeln!(
        out,
        "<img id=\"map\" src=\"data:image/png;base64,{}\">",
        base64(&png)
    )?;
    let data = serde_json::json!({
        "left": MARGIN, "top": g.grid_top, "box": img.box_size, "columns": grid.columns,
        "blocks_per_box": grid.blocks_per_box, "origin": map.origin, "gap": gap_text,
        "cells": cells, "texts": texts, "starts": starts, "offs": offs, "block_size": map.block_size,
    });
    writeln!(out, "<script>const M={};", script_json(&data))?;
    writeln!(
        out,
        r#"const img=document.getElementById('map'),info=document.getElementById('info');
img.addEventListener('mousemove',e=>{{const r=img.getBoundingClientRect();
const x=(e.clientX-r.left)*img.naturalWidth/r.width-M.left,y=(e.clientY-r.top)*img.naturalHeight/r.height-M.top;
const c=Math.floor(x/M.box),w=Math.floor(y/M.box),i=w*M.columns+c;
if(x<0||y<0||c>=M.columns||i>=M.cells.length){{info.textContent='point at a box';return;}}
const s=M.cells[i],b=M.origin+i*M.blocks_per_box;let t='box '+i+' (block '+b+'): '+(s<0?M.gap:M.texts[s]);
if(s>=0&&M.offs[s]>=0)t+=' | this box: file offset '+(M.offs[s]+Math.max(0,b-M.starts[s])*M.block_size);info.textContent=t;}});
</script></body></html>"#
    )
}

/// JSON to paste inside a `<script>` element: `<`, `>` and `&` written as \u escapes
/// (only strings can hold them, and there the escapes mean the same), so a name holding
/// `</script>` or `<!--` cannot end or change the element; U+2028 and U+2029 as escapes
/// too, which older JavaScript took for line ends inside strings.
fn script_json(v: &serde_json::Value) -> String {
    let mut out = String::new();
    for c in v.to_string().chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn script_json_cannot_end_the_script_element_and_means_the_same() {
        let name = "x</script><img src=x onerror=alert(2)><!-- & \u{2028}";
        let v = serde_json::json!({ "texts": [name] });
        let text = super::script_json(&v);
        assert!(
            !text.contains('<') && !text.contains('>') && !text.contains('&'),
            "{text}"
        );
        assert!(!text.contains('\u{2028}'), "{text}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn base64_matches_rfc4648() {
        assert_eq!(super::base64(b""), "");
        assert_eq!(super::base64(b"f"), "Zg==");
        assert_eq!(super::base64(b"fo"), "Zm8=");
        assert_eq!(super::base64(b"foobar"), "Zm9vYmFy");
    }
}
