//! Pictures of layouts: block maps in FragTracer's semantics (PNG, SVG, HTML) and
//! FragTracer's artefacts. Usable without the CLI (watch writes artefacts every tick).

// A closed stdout or stderr must never panic a command: print through writers that
// return errors (stdout) or `stderr_line!` (diagnostics).
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod bars;
pub mod blockmap;
pub(crate) mod canvas;
pub mod config;
pub mod fragtracer;
pub mod picture;
pub mod plot;

pub use config::{ColorConfig, ImgConfig};
pub use fragtracer::write_artefacts;
