//! An RGB pixel buffer with filled rectangles and text, saved as PNG.
//!
//! Text uses DejaVu Sans (fonts/DejaVuSans.ttf, shipped with this crate under the
//! Bitstream Vera licence in fonts/LICENSE-DejaVu), embedded at build time and rasterised
//! with ab_glyph, so a picture renders the same wherever the binary runs.

use std::io::Write;

use ab_glyph::{point, Font, FontRef, PxScale, ScaleFont};

pub(crate) static FONT_BYTES: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");

pub(crate) type Rgb = [u8; 3];

pub struct Canvas {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<u8>,
    font: FontRef<'static>,
}

impl Canvas {
    pub fn new(width: u32, height: u32, background: Rgb) -> Canvas {
        let mut pixels = Vec::with_capacity(width as usize * height as usize * 3);
        for _ in 0..width as usize * height as usize {
            pixels.extend_from_slice(&background);
        }
        Canvas {
            width,
            height,
            pixels,
            font: FontRef::try_from_slice(FONT_BYTES).expect("embedded DejaVu Sans parses"),
        }
    }

    pub(crate) fn fill_rect(&mut self, x: u32, y: u32, w: u32, h: u32, c: Rgb) {
        let x1 = (x + w).min(self.width);
        let y1 = (y + h).min(self.height);
        for yy in y.min(self.height)..y1 {
            let row = (yy as usize * self.width as usize) * 3;
            for xx in x.min(self.width)..x1 {
                let i = row + xx as usize * 3;
                self.pixels[i..i + 3].copy_from_slice(&c);
            }
        }
    }

    /// Outline of a rectangle, one pixel wide.
    pub(crate) fn stroke_rect(&mut self, x: u32, y: u32, w: u32, h: u32, c: Rgb) {
        self.fill_rect(x, y, w, 1, c);
        self.fill_rect(x, y + h.saturating_sub(1), w, 1, c);
        self.fill_rect(x, y, 1, h, c);
        self.fill_rect(x + w.saturating_sub(1), y, 1, h, c);
    }

    /// The CSS/SVG font-size that draws text as tall as `size` does here (ab_glyph scales
    /// by ascent-to-descent height, CSS by the em).
    pub(crate) fn css_font_size(&self, size: f32) -> f32 {
        let em = self.font.units_per_em().unwrap_or(2048.0);
        size * em / self.font.height_unscaled()
    }

    /// Width in pixels of `text` at `size` px.
    pub(crate) fn text_width(&self, text: &str, size: f32) -> f32 {
        let f = self.font.as_scaled(PxScale::from(size));
        text.chars().map(|c| f.h_advance(f.glyph_id(c))).sum()
    }

    /// Draw `text` with its top-left corner at (x, y); returns the x after it.
    pub fn text(&mut self, x: f32, y: f32, text: &str, size: f32, c: Rgb) -> f32 {
        let scale = PxScale::from(size);
        let scaled = self.font.as_scaled(scale);
        let baseline = y + scaled.ascent();
        let mut caret = x;
        let mut draws = Vec::new();
        for ch in text.chars() {
            let id = scaled.glyph_id(ch);
            let glyph = id.with_scale_and_position(scale, point(caret, baseline));
            caret += scaled.h_advance(id);
            if let Some(outline) = self.font.outline_glyph(glyph) {
                let b = outline.px_bounds();
                outline.draw(|gx, gy, cov| {
                    draws.push((b.min.x as i32 + gx as i32, b.min.y as i32 + gy as i32, cov))
                });
            }
        }
        for (px, py, cov) in draws {
            if px < 0 || py < 0 || px >= self.width as i32 || py >= self.height as i32 {
                continue;
            }
            let i = (py as usize * self.width as usize + px as usize) * 3;
            let a = cov.clamp(0.0, 1.0);
            for (px, &ink) in self.pixels[i..i + 3].iter_mut().zip(&c) {
                let bg = *px as f32;
                *px = (bg + (ink as f32 - bg) * a).round() as u8;
            }
        }
        caret
    }

    pub fn write_png(&self, out: impl Write) -> std::io::Result<()> {
        write_rgb_png(out, self.width, self.height, &self.pixels)
    }
}

/// Encode `width` × `height` 8-bit RGB pixels as PNG.
pub(crate) fn write_rgb_png(
    out: impl Write,
    width: u32,
    height: u32,
    pixels: &[u8],
) -> std::io::Result<()> {
    let mut enc = png::Encoder::new(out, width, height);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_compression(png::Compression::Fast);
    let mut w = enc.write_header().map_err(std::io::Error::other)?;
    w.write_image_data(pixels).map_err(std::io::Error::other)?;
    w.finish().map_err(std::io::Error::other)
}
