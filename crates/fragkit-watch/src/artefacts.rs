//! `--fragtracer OUTDIR`: FragTracer's artefacts (fragInfo.txt, fragProc.tbl, fragImg.png)
//! written at start and rewritten after every tick that changed a file record, so
//! FragTracer users get their files live. The writer is the block-map renderer's
//! (`render::write_artefacts`); this is the single place the watch calls it.
//!
//! fragInfo.txt lists every extent of every file, so each write re-maps the whole tree
//! (as FragTracer itself does every interval): its cost is that of `fragkit map`, paid
//! only on ticks where something changed.

use std::path::{Path, PathBuf};

use fragkit_render::{write_artefacts, ColorConfig, ImgConfig};

/// Write the artefacts for `roots` into `outdir`, leaving out files below `ignore` (the
/// history database, the artefacts themselves). Each root gets its own set of files (a
/// subdirectory `root<i>` when several are watched).
pub fn write(outdir: &Path, roots: &[PathBuf], ignore: &[PathBuf]) -> anyhow::Result<()> {
    let colors = ColorConfig::default();
    let img = ImgConfig::default();
    for (i, root) in roots.iter().enumerate() {
        let mut scan = fragkit_core::scan::scan_paths(
            std::slice::from_ref(root),
            &[fragkit_core::scan::DEFAULT_REQUEST_SIZE],
        )
        .map_err(anyhow::Error::msg)?;
        scan.files
            .retain(|f| !ignore.iter().any(|x| f.file.path.starts_with(x)));
        let out = if roots.len() == 1 {
            outdir.to_path_buf()
        } else {
            outdir.join(format!("root{i}"))
        };
        write_artefacts(&scan.files, root, &out, &colors, &img)?;
    }
    Ok(())
}
