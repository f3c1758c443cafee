//! `--fragtracer OUTDIR`: FragTracer's artefacts (fragInfo.txt, fragProc.tbl, fragImg.png)
//! rewritten at every tick, so existing FragTracer users get their files live.
//!
//! The writer itself is the block-map renderer's (`render::fragtracer`, the "see it"
//! issue); this is the single place the watch calls it. Until it is connected, `available`
//! says no and `fragkit watch --fragtracer` refuses to start rather than write nothing.

use std::path::{Path, PathBuf};

/// Whether this build can write FragTracer artefacts.
pub fn available() -> bool {
    false
}

/// Called once per tick with the watched roots and the paths whose record changed during the
/// tick. FragTracer's fragInfo.txt lists every file, so the writer re-maps the
/// roots itself when `changed` is not empty, and does nothing on a quiet tick.
pub fn on_tick(outdir: &Path, roots: &[PathBuf], changed: &[PathBuf]) -> anyhow::Result<()> {
    // Hook for render::fragtracer (issue 3): write_artefacts(outdir, roots) goes here.
    let _ = (outdir, roots, changed);
    Ok(())
}
