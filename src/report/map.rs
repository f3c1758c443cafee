//! `fragkit map` summary: what was drawn or written, and how long it took.

use std::io::{self, Write};
use std::path::PathBuf;

use serde::Serialize;

use crate::render::fragtracer;

#[derive(Serialize)]
pub struct Summary {
    pub version: u32,
    #[serde(flatten, serialize_with = "fragkit_core::units::path_fields")]
    pub path: PathBuf,
    pub files: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub picture: Option<PictureSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fragtracer: Option<fragtracer::ArtefactSummary>,
    /// Wall time: mapping the files (FIEMAP), then everything after it (GETFSMAP, layout,
    /// drawing, writing), then in total.
    pub scan_seconds: f64,
    pub render_seconds: f64,
    pub seconds: f64,
}

#[derive(Serialize)]
pub struct PictureSummary {
    pub out: PathBuf,
    pub whole_fs: bool,
    pub fsmap: bool,
    pub block_size: u64,
    pub blocks_per_box: u64,
    pub boxes: u64,
    pub columns: u32,
    pub rows: u32,
    pub segments: u64,
    pub skipped_runs: u64,
}

pub(crate) fn write_json(w: &mut dyn Write, s: &Summary) -> io::Result<()> {
    serde_json::to_writer(&mut *w, s)?;
    writeln!(w)
}

pub(crate) fn write_table(w: &mut dyn Write, s: &Summary) -> io::Result<()> {
    if let Some(p) = &s.picture {
        writeln!(
                    w,
                    "wrote {}: {} files, {} boxes ({} per row, 1 box = {} block{} of {} B){} in {:.2} s (mapping files {:.2} s, drawing {:.2} s)",
                    p.out.display(),
                    s.files,
                    p.boxes,
                    p.columns,
                    p.blocks_per_box,
                    if p.blocks_per_box == 1 { "" } else { "s" },
                    p.block_size,
                    if p.skipped_runs > 0 {
                        format!(", {} long contiguous runs not drawn", p.skipped_runs)
                    } else {
                        String::new()
                    },
                    s.seconds,
                    s.scan_seconds,
                    s.render_seconds
                )?;
    }
    if let Some(a) = &s.fragtracer {
        writeln!(
            w,
            "wrote {}, {}, {}: {} files, {} extents, {} rows ({} unwritten/unplaced dropped)",
            a.info.display(),
            a.proc.display(),
            a.image.display(),
            a.files,
            a.extents,
            a.proc_rows,
            a.dropped_extents
        )?;
    }
    Ok(())
}
