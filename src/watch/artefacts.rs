//! `--fragtracer OUTDIR`: FragTracer's artefacts (fragInfo.txt, fragProc.tbl, fragImg.png)
//! rewritten at every tick that changed something, so FragTracer users get their files live.
//! The writer is the block-map renderer's (`render::write_artefacts`); this is the single
//! place the watch calls it.

use std::path::{Path, PathBuf};

use crate::render::{write_artefacts, ColorConfig, ImgConfig};

/// Whether this build can write FragTracer artefacts.
pub fn available() -> bool {
    true
}

/// Called once per tick with the watched roots and the paths whose record changed during the
/// tick. FragTracer's fragInfo.txt lists every file, so the roots are re-mapped when
/// `changed` is not empty; a quiet tick writes nothing. Each root gets its own set of files
/// (a subdirectory named after the root when several are watched).
pub fn on_tick(outdir: &Path, roots: &[PathBuf], changed: &[PathBuf]) -> anyhow::Result<()> {
    if changed.is_empty() {
        return Ok(());
    }
    let colors = ColorConfig::default();
    let img = ImgConfig::default();
    for (i, root) in roots.iter().enumerate() {
        let scan = crate::scan::scan_paths(
            std::slice::from_ref(root),
            &[crate::scan::DEFAULT_REQUEST_SIZE],
        )
        .map_err(anyhow::Error::msg)?;
        let out = if roots.len() == 1 {
            outdir.to_path_buf()
        } else {
            outdir.join(format!("root{i}"))
        };
        write_artefacts(&scan.files, root, &out, &colors, &img)?;
    }
    Ok(())
}
